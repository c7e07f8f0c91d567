#!/usr/bin/env bash
# The strict build and the test suite on every other CPython the package claims
# (requires-python >= 3.9) that this machine has: pyproject says 3.9+, and only
# running it there shows it.  The main CI stage covers 3.11 with every extra;
# here each version gets a fresh venv with the package (strict build, pip's
# isolated build against that version's NumPy 2.x) and the light test extras --
# pytest, hypothesis, the Markdown renderers.  Tests of the heavy extras (torch,
# onnxruntime, matplotlib, Jupyter) skip themselves there.
#
#   bash .ci/versions.sh [VERSION[:NUMPY_SPEC][@core] ...]
#
# Default: 3.9:numpy==1.21.6 3.10@core 3.12@core 3.13 -- the oldest Python
# with the oldest NumPy the package declares (numpy>=1.21; the build targets
# the 1.21 API), then each newer Python with its newest NumPy.  The ends of
# the range run the whole suite; @core runs the strict build and the test
# files that meet what differs between interpreters (CORE_TESTS below:
# frames, signals and finalizers, the collector, signatures, subinterpreters,
# the eval loop's instruction counts, the drop-in contract), in a third of
# the time: CI's time limit is shared with the sanitizer run.
#
# Interpreters are looked up as pythonX.Y on PATH, then in pyenv's versions
# folder (PYENV_ROOT, default ~/.pyenv).  A version that is not on the machine
# is reported and skipped, so CI stays green on a machine without it; set
# VERSIONS_REQUIRED=1 to fail instead.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(3.9:numpy==1.21.6 3.10@core 3.12@core 3.13)
CORE_TESTS=(test_bench.py test_scope_api.py test_scope_concurrency.py
            test_reliability_scope_review.py test_warnings.py test_reliability_round2.py
            test_reliability_finalizers.py test_reliability_concurrency.py
            test_help_and_types.py test_instructions.py test_released_module.py)
pyenv_root=${PYENV_ROOT:-$HOME/.pyenv}

find_python() {
    local v=$1 p
    if p=$(command -v "python$v" 2>/dev/null) && "$p" -c 'import sys' 2>/dev/null; then
        echo "$p"; return 0
    fi
    p=$(ls -d "$pyenv_root"/versions/"$v".* 2>/dev/null | sort -V | tail -1)
    if [ -n "$p" ] && [ -x "$p/bin/python" ]; then echo "$p/bin/python"; return 0; fi
    return 1
}

work=$(mktemp -d "${TMPDIR:-/tmp}/spatialhub-versions.XXXXXX")
trap 'rm -rf "$work"' EXIT
tar -C "$root" --exclude=./.git --exclude=./.venv --exclude=./build --exclude='*.so' \
    --exclude='__pycache__' --exclude='.hypothesis' --exclude='*.egg-info' \
    --exclude='.pytest_cache' -cf - . | tar -C "$work" -xf -
mkdir -p "$work/venvs"
# .ci/run starts the 3.11 suite beside this script once the copy is made
[ -z "${VERSIONS_READY_FILE:-}" ] || touch "$VERSIONS_READY_FILE"

failed=() ran=() skipped=()
for spec in "${versions[@]}"; do
    tests=("$work/tests")
    if [ "${spec%@core}" != "$spec" ]; then
        tests=("${CORE_TESTS[@]/#/$work/tests/}")
    fi
    vspec=${spec%@core}
    v=${vspec%%:*}
    numpy_spec=numpy
    [ "$vspec" = "$v" ] || numpy_spec=${vspec#*:}
    if ! py=$(find_python "$v"); then
        echo "== versions: no CPython $v on this machine: skipped"
        skipped+=("$v")
        continue
    fi
    echo "== versions: CPython $v ($py), $numpy_spec, $([ ${#tests[@]} = 1 ] && echo "the whole suite" || echo "${#tests[@]} core test files")"
    t0=$(date +%s)
    venv="$work/venvs/$v"
    ok=1
    "$py" -m venv "$venv" && "$venv/bin/python" -m pip install -q -U pip || ok=0
    # the strict build (-Wall -Wextra -Werror against this version's headers),
    # with the runtime NumPy asked for (the build itself uses NumPy 2.x)
    [ $ok = 1 ] && (cd "$work" && SPATIALHUB_STRICT=1 "$venv/bin/python" -m pip install -q \
        . "$numpy_spec" pytest hypothesis markdown-it-py cmarkgfm) || ok=0
    [ $ok = 1 ] && "$venv/bin/python" -c "import sys, numpy; print('   ', sys.version.split()[0], \
        'numpy', numpy.__version__)" || ok=0
    # from outside the tree, so `import spatialhub` is the installed build
    [ $ok = 1 ] && (cd "$work/venvs" && "$venv/bin/python" -m pytest -q -p no:cacheprovider \
        --durations=5 "${tests[@]}") || ok=0
    echo "== versions: $spec: $([ $ok = 1 ] && echo passed || echo FAILED) ($(( $(date +%s) - t0 ))s)"
    if [ $ok = 1 ]; then ran+=("$spec"); else failed+=("$spec"); fi
done

echo "== versions: passed: ${ran[*]:-none}; failed: ${failed[*]:-none}; not on this machine: ${skipped[*]:-none}"
[ ${#failed[@]} -eq 0 ] || exit 1
if [ "${VERSIONS_REQUIRED:-0}" = 1 ] && [ ${#skipped[@]} -gt 0 ]; then exit 1; fi
