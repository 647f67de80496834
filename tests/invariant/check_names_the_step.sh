#!/usr/bin/env bash
# The test of `dtw check`'s own output on a planted bug.
#
#   check_names_the_step.sh DTW NN NN.K PROGRAM BUG_FILE [N]
#
# PROGRAM is chapter NN's lab test program built from the solution with the
# N-th bug of step NN.K in BUG_FILE planted (N from 1, the default;
# cmake/DtwChapter.cmake). The test runs
#   DTW check NN NN.K --program PROGRAM
# (the tests whose own step is NN.K: a bug must fail its own step's tests;
# earlier steps' tests never reach NN.K's code, which the step declarations
# check, so a learner with every step written sees NN.K first) and passes
# when the report
#   - exits with 1;
#   - names NN.K as the first failure ("First failure: step NN.K, ...");
#   - shows the bug's `expect:` text on a context line ("  while: ...");
#   - shows the step's hint ("  hint NN.K: ...");
#   - says all that in at most 15 lines from "First failure" on.
set -uo pipefail

if (($# != 5 && $# != 6)); then
  echo "usage: $0 DTW NN NN.K PROGRAM BUG_FILE [N]" >&2
  exit 2
fi
dtw="$1" chapter="$2" step="$3" program="$4" bug_file="$5" n="${6:-1}"

expect=""
seen=0
current=0
while IFS= read -r line || [[ -n $line ]]; do
  if [[ $line =~ ^bug[[:space:]]+([0-9]+\.[0-9]+)[[:space:]] ]]; then
    current=0
    if [[ ${BASH_REMATCH[1]} == "$step" ]]; then
      seen=$((seen + 1))
      ((seen == n)) && current=1
    fi
  elif ((current)) && [[ $line =~ ^[[:space:]]+expect:[[:space:]]?(.*)$ ]]; then
    expect="${BASH_REMATCH[1]}"
  fi
done <"$bug_file"
if [[ -z $expect ]]; then
  echo "FAIL: $bug_file: bug $n of step $step has no 'expect:' line (the context to look for)"
  exit 1
fi

# Only the first failure is judged, so the step's tests stop there
# (GoogleTest's fail-fast): the tests after it would take most of the time.
output="$(NO_COLOR=1 GTEST_FAIL_FAST=1 "$dtw" check "$chapter" "$step" --program "$program" 2>&1)"
status=$?
fail() {
  echo "FAIL: planted bug $n of step $step: $1"
  echo "---- dtw check's output ----"
  printf '%s\n' "$output"
  exit 1
}
((status == 1)) || fail "dtw check exited with $status, not 1"
report="$(printf '%s\n' "$output" | sed -n '/^First failure: /,$p')"
[[ -n $report ]] || fail "no 'First failure:' line"
head="$(printf '%s\n' "$report" | head -n 1)"
[[ $head == "First failure: step $step, "* ]] || fail "the first failure is not step $step: '$head'"
# Here-strings, not `printf | grep -q`: grep -q exits at the first match, and
# under pipefail the writer's SIGPIPE (bash's printf writes line by line)
# would fail a correct report now and then, on a loaded machine.
grep -qF -- "$expect" <<<"$report" ||
  fail "the report does not show the context '$expect'"
grep -E '^  while: ' <<<"$report" | grep -F -- "$expect" >/dev/null ||
  fail "'$expect' is not on a context line ('  while: ...')"
grep -q "^  hint $step: " <<<"$report" || fail "the report does not show the hint of $step"
lines="$(printf '%s\n' "$report" | wc -l)"
((lines <= 15)) || fail "the report of the failure takes $lines lines (at most 15)"
echo "ok: dtw check names step $step, shows '$expect' and the hint, in $lines lines"
