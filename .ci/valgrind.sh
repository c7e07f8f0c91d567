#!/usr/bin/env bash
# valgrind memcheck over a focused workload of the native core (issue 7):
# the stats type, the summary, the tables and comparison, and the benchmark
# loop with a native callable, normal and error paths
# (tests/sanitizer/native_workload.py).
#
#   bash .ci/valgrind.sh [rounds]
#
# Runs with PYTHONMALLOC=malloc (every object and buffer is a malloc block
# valgrind can track; no pymalloc false positives to suppress) and
# tests/sanitizer/valgrind.supp (the loader's, CPython's and NumPy's own).
# Fails on any invalid access, use of an uninitialised value, or definitely /
# indirectly lost block whose stack has a frame in our code
# (tests/sanitizer/scan_valgrind.py).  Uses the spatialhub that $PYTHON imports
# (the installed one in CI, or PYTHONPATH=src after an in-place build) -- a
# normal build: valgrind and the ASan build do not mix.
#
# Environment: PYTHON (default: python on PATH), VALGRIND_LOG (log path).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$(command -v python || command -v python3)}
rounds=${1:-3}
log=${VALGRIND_LOG:-${TMPDIR:-/tmp}/spatialhub-valgrind.$$.log}
command -v valgrind >/dev/null || { echo "valgrind: not installed" >&2; exit 1; }

"$PY" - <<'EOF'
import spatialhub.utils.profiling._native as n
maps = open("/proc/self/maps").read() if __import__("os").path.exists("/proc/self/maps") else ""
assert "libasan" not in maps, "valgrind needs the normal build, not the sanitized one"
print("module under test:", n.__file__)
EOF

t0=$(date +%s)
set +e
PYTHONMALLOC=malloc valgrind --tool=memcheck --error-limit=no --num-callers=40 \
    --fullpath-after= --leak-check=full --show-leak-kinds=definite,indirect \
    --errors-for-leak-kinds=definite --suppressions=tests/sanitizer/valgrind.supp \
    --log-file="$log" "$PY" tests/sanitizer/native_workload.py "$rounds" >/dev/null
vg_rc=$?
set -e
echo "valgrind: workload rc=$vg_rc, $(( $(date +%s) - t0 ))s, log $log"
if [ $vg_rc -ne 0 ]; then
    tail -40 "$log"
    echo "valgrind: the workload failed under valgrind" >&2
    exit 1
fi
"$PY" tests/sanitizer/scan_valgrind.py "$log"
echo "valgrind: clean (no errors or lost blocks in spatialhub's native code)"
