#!/usr/bin/env bash
# pytest-benchmark's own test suite against our pytest plugin (docs/guide.md,
# "pytest-benchmark's own tests").  pytest-benchmark's source distribution ships
# its tests; the contract subset is every test file that does not import
# pytest_benchmark (they reach the plugin only through the `benchmark` fixture,
# the marker, the --benchmark-* options and what inner pytest runs print and
# save), less test_cli.py, which tests the py.test-benchmark command, not the
# plugin.  They run against the plugin installed in the current environment,
# which must not have pytest-benchmark itself (ours stays passive beside it).
#
#   bash .ci/pytest_benchmark_contract.sh
#
# Time: 7.7 min at load 5 on the 2-core VM, 21 min at load 6 beside the full suite
# (2026-12-02); the inner pytest runs are most of it.
#
# Environment: PYTHON (default: python on PATH); PB_SDIST (a pytest-benchmark
# 5.3.1 sdist already downloaded; default: pip download into a temp dir);
# CONTRACT_KEEP (a folder to keep the JUnit report and the log in).
# The optional packages the tests use (pytest-xdist, aspectlib, pygal) are
# installed into a folder of their own put on PYTHONPATH for this run only.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
PY=${PYTHON:-$(command -v python || command -v python3)}
PB_VERSION=5.3.1

# The contract: files, in the order run.  Keep in step with docs/guide.md
# (tests/test_pytest_plugin.py checks that both say the same).
CONTRACT_FILES=(
    tests/test_benchmark.py
    tests/test_pedantic.py
    tests/test_normal.py
    tests/test_sample.py
    tests/test_skip.py
    tests/test_calibration.py
    tests/test_precision.py
    tests/test_with_testcase.py
    tests/test_with_weaver.py
    tests/test_doctest.rst
)
# passed + skipped that must be reached: every test passes but test_skip.py's one,
# which skips itself
EXPECTED_TOTAL=137
EXPECTED_SKIPPED=1

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# pip, quietly: its per-index "Location ... is ignored" warnings are noise here
qpip() { "$PY" -m pip "$@" 2> >(grep -v "^WARNING: Location" >&2); }

if "$PY" -c 'import pytest_benchmark' 2>/dev/null; then
    echo "pytest-benchmark is installed in this environment: the contract needs ours alone" >&2
    exit 2
fi
"$PY" -c 'import spatialhub.utils.profiling.pytest_plugin' || {
    echo "spatialhub-profiling is not installed in this environment" >&2; exit 2; }

sdist=${PB_SDIST:-}
if [ -z "$sdist" ]; then
    qpip download -q --no-deps --no-binary :all: -d "$work/dl" "pytest-benchmark==$PB_VERSION"
    sdist=$(ls "$work"/dl/pytest_benchmark-"$PB_VERSION".tar.gz)
fi
tar -C "$work" -xzf "$sdist"
src="$work/pytest_benchmark-$PB_VERSION"

# the optional packages, pinned, without their dependencies (pytest stays the one
# installed beside the plugin)
qpip install -q --no-deps --target "$work/extras" \
    pytest-xdist==3.8.0 execnet==2.1.2 aspectlib==2.0.0 fields==5.0.0 \
    pygal==3.1.3 pygaljs==1.0.2 importlib-metadata==8.7.0 zipp==4.1.2

keep=${CONTRACT_KEEP:-$work/keep}
mkdir -p "$keep"
cd "$src"
set +e
# the sdist's pytest.ini stays (filterwarnings = error, its ignores); its addopts are
# replaced: --nbmake needs a notebook runner the contract does not use
PYTHONPATH="$work/extras${PYTHONPATH:+:$PYTHONPATH}" PYTEST_ADDOPTS= \
    "$PY" -m pytest -p no:cacheprovider -o addopts="" -ra --strict-markers \
    --doctest-modules --doctest-glob='*.rst' --tb=short --durations=15 \
    --junitxml="$keep/contract.xml" "${CONTRACT_FILES[@]}" >"$keep/contract.log" 2>&1
rc=$?
set -e
tail -n 40 "$keep/contract.log"
"$PY" - "$keep/contract.xml" "$rc" "$EXPECTED_TOTAL" "$EXPECTED_SKIPPED" <<'EOF'
import sys
import xml.etree.ElementTree as ET

path, rc, total_expected, skipped_expected = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
suite = ET.parse(path).getroot()
suite = suite.find("testsuite") if suite.tag == "testsuites" else suite
n = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
passed = n["tests"] - n["failures"] - n["errors"] - n["skipped"]
print(f"pytest-benchmark contract: {passed} passed, {n['skipped']} skipped, "
      f"{n['failures']} failed, {n['errors']} errors of {n['tests']} "
      f"(target: {total_expected - skipped_expected} passed, {skipped_expected} skipped)")
if passed < total_expected - skipped_expected or n["tests"] != total_expected:
    print("pytest-benchmark contract: below the target", file=sys.stderr)
    sys.exit(1)
EOF
