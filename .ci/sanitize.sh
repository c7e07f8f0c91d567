#!/usr/bin/env bash
# Build the extension with ASan + UBSan into a scratch tree and run the whole
# test suite against it.  Any sanitizer report fails the run (halt_on_error,
# -fno-sanitize-recover), as does any test failure.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${SAN_DIR:-/tmp/spatialhub-san}
rm -rf "$out"
mkdir -p "$out/lib"
cp -r src/spatialhub "$out/lib/"
find "$out/lib" -name '*.so' -delete
SPATIALHUB_SANITIZE=1 SPATIALHUB_STRICT=1 python setup.py -q build_ext -b "$out/lib" -t "$out/tmp" >"$out/build.log" 2>&1 \
    || { cat "$out/build.log"; exit 1; }
asan=$(cc -print-file-name=libasan.so)
ubsan=$(cc -print-file-name=libubsan.so)
# CPython and NumPy keep memory alive until exit by design; leak checking is
# done by the refcount / tracemalloc tests and by valgrind (.ci/valgrind.sh).
export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=0:exitcode=99:strict_string_checks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:exitcode=98"
export PYTHONPATH="$out/lib"
export PYTHONMALLOC=malloc
LD_PRELOAD="$asan:$ubsan" python - <<'PY'
import spatialhub.utils.profiling._native as n, os
assert os.environ["PYTHONPATH"] in n.__file__, n.__file__
print("sanitized module:", n.__file__)
PY
LD_PRELOAD="$asan:$ubsan" python -m pytest -q -p no:cacheprovider "$@"
