#!/usr/bin/env bash
# The release artefacts, built as a user's pip or a release builds them, held to
# "no warnings" (issue 25).
#
#   bash .ci/build.sh OUTDIR
#
#   1. python -m build: the sdist from the tree, then the wheel from that sdist, in an
#      isolated environment with the newest setuptools and NumPy 2 -- so the sdist is
#      proven to build in a clean environment, and the wheel CI tests is the one an
#      sdist install would make.  Strict flags (-Wall -Wextra -Werror).  Any warning
#      in the build's output fails (setuptools' deprecations, MANIFEST.in patterns that
#      match nothing, a compiler's), except pip's notes about this machine's local
#      index configuration ("WARNING: Location '...' is ignored"), which are not ours.
#   2. twine check --strict on both (the metadata and the README render).
#   3. The sdist carries every tracked file the build and the tests read (git
#      ls-files, less .ci/ and .gitignore), when the tree is a git checkout.
#   4. A release tag on HEAD (vX.Y.Z) must name _version.py's version.
#
# OUTDIR gets spatialhub_profiling-V.tar.gz and spatialhub_profiling-V-cpXY-cpXY-linux_*.whl
# (the native platform tag; .ci/manylinux.sh makes the manylinux one) and build.log.
# Environment: TOOLS_PYTHON, an interpreter that has (or may be given) `build` and
# `twine`; default: a temporary venv made from python3.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=.ci/build_warnings.sh
. .ci/build_warnings.sh
root=$(pwd)
out=${1:?usage: bash .ci/build.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
say() { printf 'build: %s\n' "$*"; }
fail() { printf 'build: FAIL: %s\n' "$*" >&2; exit 1; }

tools=${TOOLS_PYTHON:-}
if [ -z "$tools" ]; then
    tmpvenv=$(mktemp -d "${TMPDIR:-/tmp}/spatialhub-buildtools.XXXXXX")
    trap 'rm -rf "$tmpvenv"' EXIT
    python3 -m venv "$tmpvenv"
    tools="$tmpvenv/bin/python"
fi
if ! "$tools" -c "import build, twine" 2>/dev/null; then
    "$tools" -m pip install -q build twine 2> >(grep -v "^WARNING: Location" >&2)
fi

version=$("$tools" - "$root/src/spatialhub/utils/profiling/_version.py" <<'EOF'
import ast, sys
for node in ast.parse(open(sys.argv[1]).read()).body:
    if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "__version__":
        print(ast.literal_eval(node.value))
EOF
)
[ -n "$version" ] || fail "no __version__ in _version.py"
say "version $version (src/spatialhub/utils/profiling/_version.py)"

if git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
    tags=$(git -C "$root" tag --points-at HEAD 'v[0-9]*' || true)
    for tag in $tags; do
        [ "$tag" = "v$version" ] || fail "HEAD is tagged $tag but _version.py says $version"
        say "HEAD is tagged $tag: matches"
    done
fi

rm -f "$out"/spatialhub_profiling-*
log="$out/build.log"
say "python -m build (sdist, then the wheel from it), strict"
# PYTHONDONTWRITEBYTECODE (set on this machine) makes build_py warn "byte-compiling is
# disabled"; a wheel never holds .pyc files either way.
if ! env -u PYTHONDONTWRITEBYTECODE SPATIALHUB_STRICT=1 "$tools" -m build -o "$out" "$root" \
        >"$log" 2>&1; then
    tail -40 "$log" >&2
    fail "python -m build failed (log: $log)"
fi
warnings=$(build_warnings "$log")
if [ -n "$warnings" ]; then
    printf '%s\n' "$warnings" >&2
    fail "the build warned (above; full log: $log)"
fi
sdist=$(ls "$out"/spatialhub_profiling-"$version".tar.gz)
wheel=$(ls "$out"/spatialhub_profiling-"$version"-*.whl)
say "built $(basename "$sdist") and $(basename "$wheel"), no warnings"

COLUMNS=200 "$tools" -m twine --no-color check --strict "$sdist" "$wheel" || fail "twine check"

if git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
    missing=$(comm -23 \
        <(git -C "$root" ls-files | grep -vE '^(\.ci/|\.gitignore$)' | sort) \
        <(tar tzf "$sdist" | sed 's|^[^/]*/||' | sort))
    [ -z "$missing" ] || fail "the sdist lacks tracked files: $(echo $missing)"
    say "the sdist has every tracked file but .ci/ and .gitignore"
fi
