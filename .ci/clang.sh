#!/usr/bin/env bash
# csrc/**/*.c under clang with -Wall -Wextra -Werror, beside the gcc builds (issue 25).
#
#   bash .ci/clang.sh
#
# macOS builds with Apple's clang, and clang warns where gcc does not (a {NULL}
# sentinel is -Wmissing-field-initializers to clang, 'x += ...' with x never read
# is -Wunused-but-set-variable).  This compiles every C file once, with the flags
# setup.py adds (plus the interpreter's own -fwrapv -DNDEBUG at -O2), against the
# Python and NumPy headers of the interpreter given; objects are thrown away: no
# link, no test run.  (.ci/manylinux.sh builds and links the wheel with zig's newer
# clang, also strict.)
#
# Environment: CLANG (default clang), PYTHON (default python: headers of it and its
# NumPy).
set -euo pipefail
cd "$(dirname "$0")/.."
clang=${CLANG:-clang}
PY=${PYTHON:-$(command -v python || command -v python3)}
command -v "$clang" >/dev/null || { echo "clang: $clang is not installed" >&2; exit 1; }
pyinc=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['include'])")
npinc=$("$PY" -c "import numpy; print(numpy.get_include())")
version=$("$PY" - <<'EOF'
import ast
for node in ast.parse(open("src/spatialhub/utils/profiling/_version.py").read()).body:
    if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "__version__":
        print(ast.literal_eval(node.value))
EOF
)
work=$(mktemp -d "${TMPDIR:-/tmp}/spatialhub-clang.XXXXXX")
trap 'rm -rf "$work"' EXIT
t0=$(date +%s)
export clang pyinc npinc version work
# one compiler per core; xargs exits non-zero when any compile fails
if ! find csrc -name '*.c' | sort | xargs -P "$(nproc 2>/dev/null || echo 2)" -I{} sh -c \
    '"$clang" -c -O2 -fPIC -fwrapv -DNDEBUG -std=c11 -fvisibility=hidden -Wall -Wextra -Werror \
        -DNPY_TARGET_VERSION=NPY_1_21_API_VERSION -DSHP_VERSION="\"$version\"" \
        -Icsrc -I"$npinc" -I"$pyinc" -o "$work/$(echo {} | tr / _).o" {}'; then
    echo "clang: FAIL: csrc/ does not compile cleanly under $("$clang" --version | head -1)" >&2
    exit 1
fi
echo "clang: $(find csrc -name '*.c' | wc -l) files clean under $("$clang" --version | head -1)" \
     "(-Wall -Wextra -Werror, $(( $(date +%s) - t0 ))s)"
