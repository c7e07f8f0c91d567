#!/usr/bin/env bash
# Coexistence with the released `spatialhub` distribution (issue 12).
#
# The released project (0.1.7) ships spatialhub/utils/profiling.py beside its
# models and utilities.  This distribution, `spatialhub-profiling`, owns only
# spatialhub/utils/profiling/ (spatialhub and spatialhub.utils are namespace
# packages here), so it must install into an environment that has the released
# project without touching one of its files, win the import of
# spatialhub.utils.profiling there (a package directory takes precedence over a
# module file of the same name), and give the released module back when it is
# uninstalled.  This script proves all of that in a fresh venv.
#
# With ours installed, it also checks that the version is ours in all five places
# a user reads it (issue 25): __version__, spatialhub-bench --version, a result's
# env, the pytest plugin's JSON and pip show -- none of them may say 0.1.7.
#
# Usage: bash .ci/coexist.sh [WHEEL]
#   WHEEL  a built spatialhub_profiling wheel; without it one is built from the
#          working tree (pip wheel, strict flags), which is most of the run time.
# Environment: PYTHON (default python3), COEXIST_VENV (default a temp dir).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
py=${PYTHON:-python3}
work=$(mktemp -d /tmp/spatialhub-coexist.XXXXXX)
trap 'rm -rf "$work"' EXIT
venv=${COEXIST_VENV:-$work/venv}

# pip, quietly: its per-index "Location ... is ignored" warnings are noise here
vpip() { "$vpy" -m pip "$@" 2> >(grep -v "^WARNING: Location" >&2); }
say() { printf 'coexist: %s\n' "$*"; }
fail() { printf 'coexist: FAIL: %s\n' "$*" >&2; exit 1; }

wheel=${1:-}
if [ -z "$wheel" ]; then
    say "building the wheel from $root"
    SPATIALHUB_STRICT=1 "$py" -m pip wheel -q --no-deps -w "$work/dist" "$root" \
        > "$work/wheel.log" 2>&1 || { cat "$work/wheel.log" >&2; fail "the wheel did not build"; }
    wheel=$(ls "$work"/dist/spatialhub_profiling-*.whl)
fi
[ -f "$wheel" ] || fail "no wheel at $wheel"

rm -rf "$venv"
"$py" -m venv "$venv"
vpy="$venv/bin/python"
vpip install -q -U pip >/dev/null

say "installing the released spatialhub==0.1.7"
vpip install -q "spatialhub==0.1.7"

# A fingerprint of every file the released distribution owns (from its RECORD).
fingerprint() {
    "$vpy" - <<'EOF'
import hashlib, importlib.metadata as md
dist = md.distribution("spatialhub")
h = hashlib.sha256()
for f in sorted(dist.files, key=str):
    p = f.locate()
    if p.suffix == ".pyc" or not p.is_file():
        continue
    h.update(str(f).encode() + b"\0" + p.read_bytes())
print(dist.version, len(dist.files), h.hexdigest())
EOF
}

# What `spatialhub.utils.profiling` resolves to: "ours" or "released".
which_profiling() {
    "$vpy" - <<'EOF'
import os, spatialhub.utils.profiling as p
ours = os.path.basename(p.__file__) == "__init__.py" and hasattr(p, "_native")
print("ours" if ours else "released")
EOF
}

# The released project's own modules must keep importing (models, utils.image).
released_imports() {
    "$vpy" -c "import spatialhub, spatialhub.models, spatialhub.utils.image; print(spatialhub.__version__)"
}

before=$(fingerprint)
say "released files: $before"
[ "$(which_profiling)" = released ] || fail "before ours is installed, profiling is not the released module"
released_imports >/dev/null || fail "the released project does not import on its own"

say "installing ours: $(basename "$wheel")"
vpip install -q --no-deps "$wheel"
after=$(fingerprint)
[ "$before" = "$after" ] || fail "installing ours changed the released files: $after"
vpip show -q spatialhub >/dev/null || fail "pip removed the released distribution"
released_imports >/dev/null || fail "the released spatialhub.models / spatialhub.utils.image no longer import"
[ "$(which_profiling)" = ours ] || fail "spatialhub.utils.profiling is not ours with both installed"

# One version everywhere (issue 25), beside a distribution that answers 0.1.7 for
# `spatialhub`: the package, the command line, every result's environment record,
# the pytest plugin's JSON and pip show all state ours, the tree's _version.py.
expected=$("$vpy" - "$root/src/spatialhub/utils/profiling/_version.py" <<'EOF'
import ast, sys
for node in ast.parse(open(sys.argv[1]).read()).body:
    if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "__version__":
        print(ast.literal_eval(node.value))
EOF
)
case $(basename "$wheel") in
    spatialhub_profiling-"$expected"-*) ;;
    *) fail "the wheel $(basename "$wheel") is not version $expected (_version.py)" ;;
esac
vpip install -q pytest >/dev/null
mkdir -p "$work/plugin"
cat >"$work/plugin/test_version_subject.py" <<'EOF'
def test_it(benchmark):
    benchmark(sum, range(10))
EOF
(cd "$work/plugin" && "$vpy" -m pytest -q -p no:cacheprovider --benchmark-json=report.json \
    --benchmark-max-time=0.05 --benchmark-max-rounds=50 >"$work/plugin.log" 2>&1) \
    || { cat "$work/plugin.log" >&2; fail "a benchmark test under the pytest plugin failed"; }
seen=$("$vpy" - "$work/plugin/report.json" <<'EOF'
import importlib.metadata as md, json, sys, warnings
warnings.simplefilter("ignore")
import spatialhub.utils.profiling as p
doc = json.load(open(sys.argv[1]))
print("__version__", p.__version__)
print("env", p.benchmark_callable(lambda: None, num_iters=5).env["spatialhub_profiling"])
print("plugin-json", doc["version"])
print("plugin-env", doc["machine_info"]["spatialhub"]["spatialhub_profiling"])
print("metadata", md.version("spatialhub-profiling"))
print("released", md.version("spatialhub"))
EOF
)
cli=$("$venv/bin/spatialhub-bench" --version)
pipshow=$(vpip show spatialhub-profiling | sed -n 's/^Version: //p')
for place in __version__ env plugin-json plugin-env metadata; do
    got=$(printf '%s\n' "$seen" | sed -n "s/^$place //p")
    [ "$got" = "$expected" ] || fail "$place says '$got', not $expected"
done
[ "$(printf '%s\n' "$seen" | sed -n 's/^released //p')" = 0.1.7 ] \
    || fail "the released spatialhub does not say 0.1.7 beside ours"
case $cli in
    "spatialhub-bench $expected from $venv/"*) ;;
    *) fail "spatialhub-bench --version says '$cli'" ;;
esac
[ "$pipshow" = "$expected" ] || fail "pip show spatialhub-profiling says '$pipshow', not $expected"
say "version $expected in __version__, --version, env, the plugin's JSON and pip show (released: 0.1.7)"

# Code written for the released module runs on ours, with the released
# project's package __init__ in place (logger, names, the scope profiler).
"$vpy" - <<'EOF' || fail "released-style code does not run on ours"
import logging, warnings
warnings.simplefilter("ignore")   # a no-op benchmark is overhead-dominated: it says so
from spatialhub.utils.profiling import (
    BenchmarkStats, GPUMemoryInfo, HierarchicalProfiler, ProfileNode, Timer,
    benchmark_callable, format_benchmark_table, get_cuda_sync_fn, get_gpu_vram_mb,
    get_ram_mb, timeit, profiler,
)
import spatialhub.utils.profiling as p
assert p.HierarchicalProfiler.__module__.startswith("spatialhub.utils.profiling")
prof = HierarchicalProfiler("Pipeline")
with prof.scope("preprocess"):
    sum(range(1000))
assert prof.root.children["preprocess"].calls == 1
s = benchmark_callable(lambda: None, num_warmup=1, num_iters=5)
assert isinstance(s, BenchmarkStats)
try:
    benchmark_callable(lambda: None, num_iters=0)
except ValueError as e:
    assert str(e) == "num_iters must be a positive integer, got 0", e
else:
    raise AssertionError("num_iters=0 was accepted")
with Timer("module-default", track_memory=False):
    pass
assert profiler.root.children["module-default"].calls == 1
print("released-style code ran on", p.__file__)
EOF

say "uninstalling ours"
vpip uninstall -q -y spatialhub-profiling
[ "$(which_profiling)" = released ] || fail "after uninstalling ours, profiling is not the released module"
released_imports >/dev/null || fail "the released project does not import after ours is uninstalled"
[ "$(fingerprint)" = "$before" ] || fail "uninstalling ours changed the released files"

say "OK: installs beside spatialhub 0.1.7 without touching it, wins the import, uninstalls cleanly"
