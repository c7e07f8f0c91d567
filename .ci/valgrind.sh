#!/usr/bin/env bash
# valgrind memcheck over a focused workload (tests/valgrind/workload.py) that drives every
# native entry point, normal and error paths.  Fails on any invalid read/write, use of an
# uninitialised value, or a definite leak whose stack passes through our extension.
set -euo pipefail
cd "$(dirname "$0")/.."
log=${VALGRIND_LOG:-/tmp/spatialhub-valgrind.log}
PYTHONMALLOC=malloc valgrind --tool=memcheck --leak-check=full --show-leak-kinds=definite \
    --errors-for-leak-kinds=definite --num-callers=30 --log-file="$log" \
    python tests/valgrind/workload.py
errors=$(grep -E "ERROR SUMMARY" "$log" | tail -1)
echo "valgrind: $errors"
# Frames of our code: function names are shp_* / Type_slot, files csrc/*.c, or the .so name.
export OURS='shp_|_native|[(](bench|clock|compare|cuda|env|fields|memory|module|stats|summary|table)[.]c:[0-9]+'
# Any error record (invalid access, uninitialised value, definite leak) that names our code
ours=$(awk 'BEGIN{ours=ENVIRON["OURS"]}
    /^==[0-9]+== [A-Z0-9].*(Invalid|uninitialised|definitely lost)/{rec=1; buf=""}
    rec{buf=buf"\n"$0}
    /^==[0-9]+== $/{if(rec && buf ~ ours){print buf}; rec=0}' "$log")
if [ -n "$ours" ]; then
    echo "valgrind found problems in the native module:"
    echo "$ours"
    exit 1
fi
grep -E "definitely lost|indirectly lost|ERROR SUMMARY" "$log" | tail -3
echo "valgrind: no errors or definite leaks in spatialhub's native code"
