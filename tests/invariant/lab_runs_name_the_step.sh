#!/usr/bin/env bash
# `dtw run DEMO --lab` and `dtw train --strategy NAME --lab` run the learner's
# code: on the untouched labs they must stop at the first step they need with
# "Not written yet" naming that step and the command that tests it, exit with
# 3 (a run failed), and never run the solution instead.
#
#   lab_runs_name_the_step.sh DTW_PROGRAM
#
# CTest runs it while DTW_LAB_INVARIANT is on (tests/cli/CMakeLists.txt).
set -uo pipefail

dtw="$(readlink -f "$1")"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
failures=0

# expect NAME STATUS PATTERN... -- ARGS: run dtw ARGS, check status and patterns.
expect() {
  local name=$1 want=$2
  shift 2
  local patterns=()
  while [[ $1 != -- ]]; do patterns+=("$1"); shift; done
  shift
  local out="$scratch/out" status=0
  (cd "$scratch" && timeout 120 "$dtw" "$@") >"$out" 2>&1 || status=$?
  local ok=1
  [[ $status == "$want" ]] || ok=0
  for p in "${patterns[@]}"; do grep -qE -- "$p" "$out" || ok=0; done
  if ((ok)); then
    echo "ok   $name"
  else
    echo "FAIL $name: dtw $* exited $status (want $want), output must match: ${patterns[*]}"
    tail -n 15 "$out"
    failures=$((failures + 1))
  fi
}

expect "run --lab stops at the demo's first step" 3 \
  "Not written yet: your lab has not written step 00\.[0-9]+" "dtw check 00 00\.[0-9]+ tests it" \
  -- run token-ring --lab
expect "train --lab stops at the strategy's first step" 3 \
  "\(your lab of chapter 02\)" "Not written yet: your lab has not written step 02\.[0-9]+" \
  "dtw check 02 02\.[0-9]+ tests it" \
  -- train --strategy dp-allreduce --ranks 2 --steps 2 --model mlp-tiny --lab --out "$scratch/c"
expect "train --lab on the training layer's own strategy is a usage error" 2 \
  "strategy single is the training layer's own" -- train --lab --steps 2
expect "train without --lab says it runs the solution" 0 \
  "with dp-allreduce \(chapter 02's solution; --lab runs yours\)" \
  -- train --strategy dp-allreduce --ranks 2 --steps 2 --model mlp-tiny --out "$scratch/c"

((failures == 0)) || exit 1
