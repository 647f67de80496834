#!/usr/bin/env bash
# The lab invariant for one chapter: its untouched lab test program must fail
# the way a learner's first run fails -- cleanly.
#
#   lab_fails_cleanly.sh LAB_TEST_PROGRAM STEP...     e.g. ch00_lab_tests 00.1 00.2 00.3
#
# Passes when the program
#   - finishes within DTW_LAB_TIME_LIMIT seconds (default 120): no hang;
#   - exits with 1, GoogleTest's "some tests failed": not 0 (a lab that passes
#     gives the learner nothing to do), and not a signal (a crash);
#   - shows, for every step ("00.1" ...), a NotImplemented raised by that
#     step's DTW_TODO, so each step is reached by some test.
# CTest runs it for every chapter (cmake/DtwChapter.cmake, label `solution`).
set -uo pipefail

if (($# < 2)); then
  echo "usage: $0 LAB_TEST_PROGRAM STEP..." >&2
  exit 2
fi
program="$1"
shift
limit="${DTW_LAB_TIME_LIMIT:-120}"
name="$(basename "$program")"

if [[ ! -x "$program" ]]; then
  echo "FAIL: $name: $program is not built" >&2
  exit 1
fi

output="$(mktemp)"
trap 'rm -f "$output"' EXIT
start=$SECONDS
timeout --kill-after=5 "$limit" "$program" >"$output" 2>&1
status=$?
elapsed=$((SECONDS - start))

fail() {
  echo "FAIL: $name: $1"
  echo "---- last lines of its output ----"
  tail -n 40 "$output"
  exit 1
}

case $status in
  0) fail "the lab passes every test; a lab must fail until the learner writes it (are the @lab regions in solutions/ missing?)" ;;
  1) ;;
  124 | 137) fail "did not finish within ${limit} s: a lab test hangs instead of failing" ;;
  *)
    if ((status > 128)); then
      fail "crashed with signal $((status - 128)) ($(kill -l $((status - 128)) 2>/dev/null || echo '?'))"
    fi
    fail "exited with $status; failing GoogleTest programs exit with 1"
    ;;
esac

# A DTW_TODO's NotImplemented reaches the output in one of two shapes:
#   C++ exception with description "rank 0: 00.1: hint (NotImplemented) [labs/...]"
#   ... it throws dtw::NotImplemented with description "00.1: hint (NotImplemented) [labs/...]".
# Only DTW_TODO messages start with a step number and end in "(NotImplemented)",
# so each line names the step's NotImplemented (the rule `dtw check` uses too).
for step in "$@"; do
  pattern="\"(rank [0-9]+: )?${step//./\\.}: [^\"]*\(NotImplemented\)"
  grep -qE "$pattern" "$output" ||
    fail "its output never shows step $step's NotImplemented: no test reaches that step's DTW_TODO"
done

failed="$(sed -n 's/^\[  FAILED  \] \([0-9]*\) tests\{0,1\}, listed below.*/\1/p' "$output")"
echo "ok: $name fails cleanly in ${elapsed} s ($failed failed test(s), steps $*: NotImplemented)"
