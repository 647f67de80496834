#!/usr/bin/env bash
# tools/device-check report on the dry run in fixtures/device-check-dry-run:
# it refuses to file a run without a GPU under docs/results/gpu/, and with
# --out writes a page with the machine, every step, every skip with its
# reason, and the command. Needs no GPU and no build.
#
#   tests/gpu/device_check_report_test.sh [REPO_ROOT]
set -euo pipefail
root=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
fixture=$root/tests/gpu/fixtures/device-check-dry-run
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# A run that saw no GPU is no result: without --out the report refuses.
rc=0
"$root/tools/device-check" report "$fixture" >"$tmp/refused" 2>&1 || rc=$?
[[ $rc == 2 ]] || fail "report without --out on a run without a GPU: exit status $rc, want 2"
grep -q "saw no GPU" "$tmp/refused" || fail "the refusal does not say why: $(cat "$tmp/refused")"

"$root/tools/device-check" report "$fixture" --out "$tmp/page.md" >/dev/null
page=$tmp/page.md
expect() { grep -qF -- "$1" "$page" || fail "the page lacks '$1'"; }
expect "# GPU check: "
expect "| GPUs | none seen |"
expect "| NCCL | 2.28.9 (built against 2.28.9) |"
expect "| step | result | s | tests passed / failed / skipped | command |"
expect "| cuda_reduce_test | skipped |"
expect "| bench_gpu | skipped (no CUDA device) |"
expect "- nccl_world_test, NcclSplitTest.GroupsFollowColorAndKeyLikeTheOtherBackends: no CUDA device"
expect "This page records a dry run, not a result."
expect "bash tools/device-check device 2>&1"
# One row per step of the summary, and no path of the machine that ran it.
rows=$(sed -n '/^steps:$/,$p' "$fixture/summary.txt" | tail -n +3 | wc -l)
got=$(awk '/^## Steps/ {on = 1; next} /^## / {on = 0} on && /^\| [a-z_0-9]+ \| / && !/^\| step \| /' "$page" | wc -l)
(( got == rows )) || fail "the page has $got step rows, the summary $rows"
! grep -qF "$root" "$page" || fail "the page names the checkout's path"
! grep -qE '(/tmp|/home|/root)/' "$page" || fail "the page names a path of a machine"
echo "device-check report: ok"
