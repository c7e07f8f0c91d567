"""The pytest plugin: pytest-benchmark's fixture conventions on our native loop.

Each scenario runs a separate pytest process on a small test file (the plugin's
options and fixture belong to a session).  `-p no:benchmark` keeps pytest-benchmark out
where it is installed too (who owns the fixture is tested on its own below)."""
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FAST = ["--benchmark-max-time=0.05", "--benchmark-max-rounds=300"]
# where the reference workload is not what a test is about: one native run per benchmark
# instead of eight segments and nine reference blocks (a third of the time)
QUICK = FAST + ["--benchmark-reference=off"]


def run_pytest(tmp_path, source, *args, env=None, block_pb=True, files=None):
    (tmp_path / "test_subject.py").write_text(textwrap.dedent(source))
    for name, text in (files or {}).items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W",
           "error::pytest.PytestUnraisableExceptionWarning"]
    if block_pb:
        cmd += ["-p", "no:benchmark"]
    cmd += list(args)
    e = dict(os.environ)
    e.pop("PYTEST_ADDOPTS", None)
    e.update(env or {})
    p = subprocess.run(cmd, cwd=tmp_path, env=e, capture_output=True, text=True, timeout=240)
    return p.returncode, p.stdout + p.stderr


# ---- calling conventions -------------------------------------------------------------

def test_benchmark_call_returns_the_result_and_passes_args_and_kwargs(tmp_path):
    rc, out = run_pytest(tmp_path, """
        def f(a, b=0, *, name=None, device=None):
            return (a, b, name, device)

        def test_it(benchmark):
            # name= and device= are harness keywords of benchmark_callable: they must
            # reach f unchanged
            assert benchmark(f, 1, b=2, name="n", device="d") == (1, 2, "n", "d")
            assert benchmark.stats.stats.rounds >= 5
            assert benchmark.stats["median"] > 0
            assert benchmark.stats.native.p99_ms >= benchmark.stats.native.median_ms

        import inspect, pytest
        from spatialhub.utils.profiling import benchmark_callable
        OPTIONS = [p.name for p in inspect.signature(benchmark_callable).parameters.values()
                   if p.kind is p.KEYWORD_ONLY]

        @pytest.mark.parametrize("kw", OPTIONS)
        def test_every_option_name_reaches_f(benchmark, kw):
            # pytest-benchmark passes every keyword on: so do we, whatever the name
            assert benchmark(lambda **k: k, **{kw: {"v": 1}}) == {kw: {"v": 1}}
    """, *FAST)
    assert rc == 0, out
    assert re.search(r"\b1[5-9] passed", out), out     # 1 + benchmark_callable's options


def test_fixture_can_only_be_used_once(tmp_path):
    rc, out = run_pytest(tmp_path, """
        import pytest
        from spatialhub.utils.profiling.pytest_plugin.fixture import FixtureAlreadyUsed

        def test_twice(benchmark):
            benchmark(lambda: 1)
            with pytest.raises(FixtureAlreadyUsed, match="benchmark\\\\(...\\\\) mode"):
                benchmark.pedantic(lambda: 1)
    """, *FAST)
    assert rc == 0, out


@pytest.mark.parametrize("kw, expected", [
    (dict(), 1),
    (dict(rounds=15), 15),
    (dict(iterations=10), 11),                   # 10 timed + 1 call for the result
    (dict(iterations=10, rounds=15), 151),
    (dict(warmup_rounds=15, rounds=5), 20),
    (dict(warmup_rounds=2, rounds=3, iterations=4), 21),
])
def test_pedantic_call_counts_match_pytest_benchmark(tmp_path, kw, expected):
    rc, out = run_pytest(tmp_path, f"""
        def test_it(benchmark):
            runs = []
            result = benchmark.pedantic(runs.append, args=[1], **{kw!r})
            assert result is None
            assert runs == [1] * {expected}, len(runs)
            assert benchmark.stats.stats.rounds == {kw.get("rounds", 1)}
            assert benchmark.stats.iterations == {kw.get("iterations", 1)}
    """)
    assert rc == 0, out


def test_pedantic_setup_teardown_order_and_arguments(tmp_path):
    rc, out = run_pytest(tmp_path, """
        import itertools, time
        counter = itertools.count()

        def test_setup_many_rounds(benchmark):
            log = []
            def setup():
                i = next(counter)
                log.append(("setup", i))
                time.sleep(0.003)            # must not be timed
                return (i,), {"bar": 2}
            def stuff(i, bar=0):
                log.append(("stuff", i, bar))
                return i * 10
            def teardown(i, bar=0):
                log.append(("teardown", i, bar))
            r = benchmark.pedantic(stuff, setup=setup, teardown=teardown, rounds=4,
                                   warmup_rounds=1)
            assert log == [("setup", 0), ("stuff", 0, 2), ("teardown", 0, 2),
                           ("setup", 1), ("stuff", 1, 2), ("teardown", 1, 2),
                           ("setup", 2), ("stuff", 2, 2), ("teardown", 2, 2),
                           ("setup", 3), ("stuff", 3, 2), ("teardown", 3, 2),
                           ("setup", 4), ("stuff", 4, 2), ("teardown", 4, 2)], log
            assert r == 40                       # the last timed round's result
            assert benchmark.stats.stats.rounds == 4
            # 3 ms of setup per round, none of it in the samples
            assert benchmark.stats.stats.max < 0.003, benchmark.stats.stats.max

        def test_teardown_many_iterations(benchmark):
            runs = []
            benchmark.pedantic(lambda: runs.append("stuff"), teardown=lambda: runs.append("teardown"),
                               iterations=3)
            assert runs == ["stuff"] * 3 + ["teardown", "stuff", "teardown"]

        def test_setup_without_return_keeps_args(benchmark):
            runs = []
            benchmark.pedantic(lambda a: runs.append(a), setup=lambda: None, args=[123])
            assert runs == [123]
    """)
    assert rc == 0, out


def test_pedantic_argument_validation(tmp_path):
    rc, out = run_pytest(tmp_path, """
        import pytest

        @pytest.mark.parametrize("value", [0, -1, "asdf", 1.5])
        def test_rounds(benchmark, value):
            runs = []
            with pytest.raises(ValueError, match="Must have positive int for `rounds`"):
                benchmark.pedantic(runs.append, args=[1], rounds=value)
            assert runs == []

        @pytest.mark.parametrize("value", [-1, "asdf"])
        def test_warmup_rounds(benchmark, value):
            with pytest.raises(ValueError, match="`warmup_rounds`"):
                benchmark.pedantic(print, warmup_rounds=value)

        @pytest.mark.parametrize("value", [0, -1, "asdf"])
        def test_iterations(benchmark, value):
            with pytest.raises(ValueError, match="`iterations`"):
                benchmark.pedantic(None, setup=lambda: None, iterations=value)

        def test_setup_with_iterations(benchmark):
            with pytest.raises(ValueError, match="more than 1 `iterations` with a `setup`"):
                benchmark.pedantic(None, setup=lambda: None, iterations=2)

        def test_args_and_returning_setup(benchmark):
            runs = []
            with pytest.raises(TypeError, match="Can't use `args` or `kwargs`"):
                benchmark.pedantic(lambda *a, **k: runs.append(1),
                                   setup=lambda: ([1], {"bar": 2}), args=[123])
            assert runs == []
    """)
    assert rc == 0, out


def test_user_exception_propagates_unchanged(tmp_path):
    rc, out = run_pytest(tmp_path, """
        import pytest

        class Boom(Exception):
            pass

        err = Boom("x")

        def f():
            raise err

        def test_call(benchmark):
            with pytest.raises(Boom) as info:
                benchmark(f)
            assert info.value is err

        def test_pedantic_setup(benchmark):
            with pytest.raises(Boom) as info:
                benchmark.pedantic(f, setup=lambda: None, teardown=lambda: None, rounds=3)
            assert info.value is err
    """, *FAST)
    assert rc == 0, out


def test_marker_options_group_extra_info_and_unknown_keyword(tmp_path):
    rc, out = run_pytest(tmp_path, """
        import json, time, pytest

        @pytest.mark.benchmark(group="parsing", min_rounds=7, max_time=0.01)
        def test_marked(benchmark):
            benchmark.extra_info["size"] = 3
            benchmark(sum, [1, 2, 3])
            assert benchmark.stats.stats.rounds >= 7

        @pytest.mark.benchmark(group="parsing", timer=time.process_time, max_time=0.01)
        def test_other_timer(benchmark):
            benchmark(sum, [1, 2, 3])

        @pytest.mark.benchmark(colour="red")
        def test_bad_marker(benchmark):
            benchmark(sum, [1])
    """, "--benchmark-json=out.json", *FAST)
    assert rc == 1, out
    assert "benchmark mark can't have 'colour' keyword argument" in out
    doc = json.loads((tmp_path / "out.json").read_text())
    by_name = {b["name"]: b for b in doc["benchmarks"]}
    assert set(by_name) == {"test_marked", "test_other_timer"}
    b = by_name["test_marked"]
    assert b["group"] == "parsing" and b["extra_info"] == {"size": 3}
    assert b["options"]["timer"] == "perf_counter" and b["spatialhub"]["clock"] == "native"
    # another timer: rounds timed in Python with it, as pytest-benchmark does; no memory
    t = by_name["test_other_timer"]
    assert t["options"]["timer"] == "process_time" and t["spatialhub"]["clock"] == "python"
    assert t["spatialhub"]["ram_delta_mb"] is None and t["stats"]["rounds"] >= 5
    assert "benchmark 'parsing': 2 tests" in out


def test_disable_runs_once_untimed_and_skip_only(tmp_path):
    src = """
        calls = []

        def test_bench(benchmark):
            benchmark(calls.append, 1)

        def test_ped(benchmark):
            assert benchmark.pedantic(lambda: 5, rounds=10) == 5

        def test_plain():
            pass

        def test_count():
            assert calls == [1], calls
    """
    rc, out = run_pytest(tmp_path, src, "--benchmark-disable", "--benchmark-json=o.json")
    assert rc == 0 and "4 passed" in out, out
    assert not (tmp_path / "o.json").exists()
    src = src.replace("assert calls == [1], calls", "pass")
    rc, out = run_pytest(tmp_path, src, "--benchmark-skip")
    assert "2 passed, 2 skipped" in out, out
    rc, out = run_pytest(tmp_path, src, "--benchmark-only", *FAST)
    assert "2 passed, 2 skipped" in out, out


# ---- JSON, storage, comparison ------------------------------------------------------

PB_STATS = ("min", "max", "mean", "stddev", "rounds", "median", "iqr", "q1", "q3",
            "iqr_outliers", "stddev_outliers", "outliers", "ld15iqr", "hd15iqr", "ops",
            "total", "iterations", "data")


def test_json_follows_pytest_benchmark_schema_plus_our_fields(tmp_path):
    import numpy as np

    rc, out = run_pytest(tmp_path, """
        import pytest

        @pytest.mark.parametrize("n", [10, 1000])
        def test_sum(benchmark, n):
            benchmark(sum, range(n))
    """, "--benchmark-json=report.json", *FAST)
    assert rc == 0, out
    doc = json.loads((tmp_path / "report.json").read_text())
    assert set(doc) >= {"machine_info", "commit_info", "benchmarks", "datetime", "version"}
    assert set(doc["machine_info"]) >= {"node", "processor", "machine", "python_implementation",
                                        "python_version", "release", "system", "cpu"}
    assert set(doc["commit_info"]) >= {"id", "time", "dirty", "project", "branch"}
    assert len(doc["benchmarks"]) == 2
    for b in doc["benchmarks"]:
        assert set(b) >= {"group", "name", "fullname", "params", "param", "extra_info",
                          "options", "stats"}
        assert b["fullname"].startswith("test_subject.py::test_sum[")
        st = b["stats"]
        assert set(st) >= set(PB_STATS)
        d = np.array(st["data"])
        assert st["rounds"] == len(d) >= 5 and st["iterations"] >= 1
        # seconds, and consistent with the raw data
        assert st["min"] == d.min() and st["max"] == d.max()
        assert abs(st["mean"] - d.mean()) <= 1e-12 * max(1, d.mean())
        assert abs(st["median"] - np.median(d)) <= 1e-12
        assert abs(st["ops"] - 1 / d.mean()) <= 1e-6 * st["ops"]
        assert 1e-9 < st["median"] < 1.0
        assert isinstance(st["outliers"], str) and ";" in st["outliers"]
        # ours, alongside
        assert st["p90"] <= st["p95"] <= st["p99"] <= st["max"]
        assert st["ci95_low"] <= st["median"] <= st["ci95_high"]
        assert b["spatialhub"]["device"] == "CPU"
        assert b["spatialhub"]["ram_delta_mb"] >= 0
        assert 1e-7 < b["spatialhub"]["reference_s"] < 1e-2
    assert {b["params"]["n"] for b in doc["benchmarks"]} == {10, 1000}
    assert {b["param"] for b in doc["benchmarks"]} == {"10", "1000"}


INTERLEAVE_SRC = """
    import json
    import spatialhub.utils.profiling.pytest_plugin.fixture as fx

    calls = []
    _ref = fx.reference_workload

    def ref():
        calls.append("R")
        return _ref()

    fx.reference_workload = ref

    def work():
        calls.append("F")
        return sum(range(3000))      # tens of us: one call per round, no loops

    def test_work(benchmark):
        assert benchmark(work) == sum(range(3000))
        # the run as blocks: R...R F...F R...R F...F ... R...R
        blocks = []
        for c in calls:
            if not blocks or blocks[-1][0] != c:
                blocks.append([c, 0])
            blocks[-1][1] += 1
        open("calls.json", "w").write(json.dumps({"blocks": blocks,
                                                  "rounds": benchmark.stats.stats.rounds}))
"""


def test_the_reference_is_timed_all_through_the_benchmark_not_only_around_it(tmp_path):
    """benchmark(func) cuts its timed rounds into up to 8 segments with a block of the
    reference workload before each and after the last, so the machine factor sees the
    machine during the benchmark (docs/guide.md, bench/bench_reference.py: a smaller
    run-to-run spread of the corrected median on a busy 2-core VM).  The rounds and the
    statistics stay one run."""
    rc, out = run_pytest(tmp_path, INTERLEAVE_SRC, "--benchmark-json=r.json",
                         "--benchmark-max-time=0.05", "--benchmark-max-rounds=400")
    assert rc == 0, out
    got = json.loads((tmp_path / "calls.json").read_text())
    blocks, rounds = got["blocks"], got["rounds"]
    refs = [n for c, n in blocks if c == "R"]
    # calibration first (the cold call, then 5 warm rounds when it is under 1 ms -- it is
    # here, but not under ASan), then: reference (5 warm-up + 20), segment, ..., reference
    assert blocks[0] in (["F", 6], ["F", 1]) and blocks[-1][0] == "F"   # the result call last
    assert len(refs) == min(8, rounds // 5) + 1 >= 3, blocks
    assert refs[0] == 25 and all(n == 21 for n in refs[1:]), refs
    segs = [n for c, n in blocks[1:-1] if c == "F"]
    size = rounds // len(segs)
    # the first segment carries the warm-up calls; the others are the rounds alone
    assert all(size <= n <= size + 1 for n in segs[1:]), segs
    assert segs[0] >= size and sum(segs[1:]) + size <= rounds <= sum(segs[1:]) + size + 1
    doc = json.loads((tmp_path / "r.json").read_text())
    b = doc["benchmarks"][0]
    assert b["stats"]["rounds"] == rounds == len(b["stats"]["data"])
    assert b["spatialhub"]["run_sizes"] is None                     # one run, not several
    assert 1e-7 < b["spatialhub"]["reference_s"] < 1e-2


GATE_SRC = """
    import os, time
    FACTOR = float(os.environ.get("FACTOR", "1"))

    def spin():
        end = time.perf_counter_ns() + int(40_000 * FACTOR)
        while time.perf_counter_ns() < end:
            pass

    def test_spin(benchmark):
        benchmark(spin)
"""


def test_save_compare_and_gate(tmp_path):
    # the spin waits for the clock, so it does not follow the machine's speed: no
    # machine-speed correction here (it would be wrong for this workload).  Inside this
    # suite's own test the plugin's spread probes are off by default (PYTEST_CURRENT_TEST):
    # asked for, 3 fresh processes per run measure the spread the gate decides on.
    args = ["--benchmark-max-time=0.2", "--benchmark-max-rounds=2000",
            "--benchmark-reference=off", "--benchmark-processes=3"]
    rc, out = run_pytest(tmp_path, GATE_SRC, "--benchmark-save=base", *args)
    assert rc == 0, out
    saved = sorted((tmp_path / ".benchmarks").glob("*/0001_base.json"))
    assert len(saved) == 1, out
    assert json.loads(saved[0].read_text())["benchmarks"][0]["stats"]["data"]
    rc, out = run_pytest(tmp_path, GATE_SRC, "--benchmark-autosave", *args)
    assert rc == 0, out
    assert len(list(saved[0].parent.glob("0002_*.json"))) == 1

    # a 2x slowdown against run 0001 fails the gate, with the Markdown summary saying so
    rc, out = run_pytest(tmp_path, GATE_SRC, "--benchmark-compare=0001",
                         "--benchmark-compare-fail=median:10%", "--benchmark-markdown=s.md",
                         *args, env={"FACTOR": "2"})
    assert rc == 1, out
    assert "Performance has regressed" in out and "slower FAIL" in out
    md = (tmp_path / "s.md").read_text()
    # the saved run's row, then this run's (pytest-benchmark's order and names)
    assert "**Performance has regressed**" in md and "| `test_spin (NOW)` |" in md
    assert "| `test_spin (0001_base)` |" in md

    # a threshold larger than the slowdown passes
    rc, out = run_pytest(tmp_path, GATE_SRC, "--benchmark-compare=0001",
                         "--benchmark-compare-fail=median:300%", *args, env={"FACTOR": "2"})
    assert rc == 0, out
    assert "Gate passed" in out


def test_a_gate_that_measured_no_spread_says_it_did_not_judge(tmp_path):
    """No process medians (probes off) and one saved run: a 2x slowdown cannot be called
    on an assumed spread.  The gate does not fail it, and does not hide it either: the
    summary counts it as not judged and prints its reason, with what would measure it."""
    args = ["--benchmark-max-time=0.1", "--benchmark-reference=off",
            "--benchmark-processes=0"]
    rc, out = run_pytest(tmp_path, GATE_SRC, "--benchmark-save=base", *args)
    assert rc == 0, out
    rc, out = run_pytest(tmp_path, GATE_SRC, "--benchmark-compare=0001",
                         "--benchmark-compare-fail=median:10%", *args, env={"FACTOR": "2"})
    assert rc == 0, out
    flat = " ".join(out.split())
    assert "inconclusive" in flat and "1 not judged" in flat, out
    assert "no spread measured yet (--benchmark-processes 3 or more measures it)" in flat, out
    assert "benchmark_repeated" not in flat, out      # the plugin's words, not ours


LOAD_GATE_SRC = """
    import os, time
    D = float(os.environ.get("D", "0.001"))

    def test_served(benchmark):
        benchmark.load(time.sleep, D, qps=100, duration_s=0.3, seed=1, num_warmup=2)
"""


def test_a_run_under_load_is_gated_once_three_saved_runs_give_its_spread(tmp_path):
    """A run under load has no reference workload and is never probed: its spread comes
    from the saved runs' raw medians (the others' are divided by their references).
    Before 3 saved runs it is not judged, and the reason says what measures it; after,
    a 3x slower service fails the gate."""
    rc, out = run_pytest(tmp_path, LOAD_GATE_SRC, "--benchmark-autosave")
    assert rc == 0, out
    gate = ["--benchmark-compare", "--benchmark-compare-fail=median:10%"]
    rc, out = run_pytest(tmp_path, LOAD_GATE_SRC, *gate, env={"D": "0.003"})
    flat = " ".join(out.split())
    assert rc == 0 and "1 not judged" in flat, out
    assert "a run under load is not probed: 3 saved runs measure it" in flat, out
    for _ in range(2):
        assert run_pytest(tmp_path, LOAD_GATE_SRC, "--benchmark-autosave")[0] == 0
    rc, out = run_pytest(tmp_path, LOAD_GATE_SRC, *gate, env={"D": "0.003"})
    assert rc == 1 and "Performance has regressed" in out, out


def test_compare_fail_needs_compare_and_a_known_field(tmp_path):
    rc, out = run_pytest(tmp_path, GATE_SRC, "--benchmark-compare-fail=median:10%")
    assert rc == 4 and "requires valid --benchmark-compare" in out, out
    # every field pytest-benchmark knows (and ours) parses; the run then needs a compare
    rc, out = run_pytest(tmp_path, GATE_SRC, "--benchmark-compare-fail", "min:10%", "max:0.001",
                         "ops:5%", "p99:2.5%", "rounds:1")
    assert rc == 4 and "requires valid --benchmark-compare" in out, out
    for bad in ("?", "foo:10%", "median:", "median:10%%"):
        rc, out = run_pytest(tmp_path, GATE_SRC, f"--benchmark-compare-fail={bad}")
        assert rc == 4 and f"Could not parse value: {bad!r}." in out, (bad, out)
    rc, out = run_pytest(tmp_path, GATE_SRC, "--benchmark-compare", "--benchmark-compare-fail=median:5%")
    assert rc == 4 and "Can't compare. No benchmark files" in out, out


def test_gate_judge_never_fails_on_identical_samples_and_catches_a_slowdown():
    import numpy as np

    from spatialhub.utils.profiling import _native
    from spatialhub.utils.profiling.pytest_plugin.gate import judge

    rng = np.random.default_rng(1)
    base = _native._stats_from_samples(1.0 + rng.gamma(2.0, 0.05, 2000))
    same = _native._stats_from_samples(1.0 + rng.gamma(2.0, 0.05, 2000))
    slow = _native._stats_from_samples(1.5 * (1.0 + rng.gamma(2.0, 0.05, 2000)))
    # 10 saved runs measured a 5% run-to-run spread
    hist = {"run_spread": 0.05, "spread_runs": 10}
    assert not judge("t", base, same, 0.10).fails
    assert not judge("t", base, same, 0.10, **hist).fails
    v = judge("t", base, slow, 0.10, **hist)
    assert v.fails and v.verdict == "slower" and 1.4 < v.ratio < 1.6
    assert not judge("t", base, slow, 0.60, **hist).fails      # within the allowed slowdown
    # nothing measured yet: 1.5x is within the 15% assumed between two single runs
    v = judge("t", base, slow, 0.10)
    assert not v.fails and v.verdict == "inconclusive"
    nodata = _native.BenchmarkStats("x", "CPU", 1, 1, 0, 1, 1, 1, 1000, 0, 5)
    v = judge("t", nodata, slow, 0.10)
    assert v.verdict == "no data" and not v.fails


def test_docs_example_runs(tmp_path):
    """docs/examples/test_benchmarks_example.py is what the guide shows: it must pass."""
    src = (REPO / "docs" / "examples" / "test_benchmarks_example.py").read_text()
    rc, out = run_pytest(tmp_path, src, "--benchmark-json=ex.json", *FAST)
    assert rc == 0, out
    doc = json.loads((tmp_path / "ex.json").read_text())
    assert len(doc["benchmarks"]) >= 3


# ---- who owns the `benchmark` fixture ------------------------------------------------

FAKE_PB = {
    "pytest_benchmark/__init__.py": "",
    "pytest_benchmark/plugin.py": """
        import pytest

        def pytest_addoption(parser):
            parser.getgroup("benchmark").addoption("--benchmark-json", metavar="PATH")

        @pytest.fixture
        def benchmark():
            return "fake pytest-benchmark"
    """,
    "pytest_benchmark-0.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: pytest-benchmark\nVersion: 0.0\n",
    "pytest_benchmark-0.0.dist-info/entry_points.txt": "[pytest11]\nbenchmark = pytest_benchmark.plugin\n",
}


def _fake_pb(tmp_path):
    site = tmp_path / "fake_site"
    for name, text in FAKE_PB.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(textwrap.dedent(text))
    return {"PYTHONPATH": str(site) + os.pathsep + os.environ.get("PYTHONPATH", "")}


OWNER_SRC = """
    def test_owner(benchmark):
        print("OWNER:", type(benchmark).__module__ if not isinstance(benchmark, str) else benchmark)
"""


def test_ownership_pytest_benchmark_installed_owns_the_fixture(tmp_path):
    env = _fake_pb(tmp_path)
    rc, out = run_pytest(tmp_path, OWNER_SRC, "-s", "-v", env=env, block_pb=False)
    assert rc == 0, out
    assert "OWNER: fake pytest-benchmark" in out
    assert "spatialhub benchmark plugin: inactive" in out
    # explicitly switched off: ours owns it, options included
    rc, out = run_pytest(tmp_path, OWNER_SRC, "-s", "-p", "no:benchmark", *FAST, env=env,
                         block_pb=False)
    assert rc == 0, out
    assert "OWNER: spatialhub.utils.profiling.pytest_plugin.fixture" in out


def test_ownership_ours_without_pytest_benchmark_and_switch_off(tmp_path):
    rc, out = run_pytest(tmp_path, OWNER_SRC, "-s", *FAST)
    assert rc == 0 and "OWNER: spatialhub.utils.profiling.pytest_plugin.fixture" in out, out
    rc, out = run_pytest(tmp_path, OWNER_SRC, "-p", "no:spatialhub_benchmark")
    assert rc == 1 and "fixture 'benchmark' not found" in out, out


def test_ownership_with_the_real_pytest_benchmark(tmp_path):
    pytest.importorskip("pytest_benchmark")
    rc, out = run_pytest(tmp_path, OWNER_SRC, "-s", "--benchmark-max-time=0.01", block_pb=False)
    assert rc == 0 and "OWNER: pytest_benchmark.fixture" in out, out
    rc, out = run_pytest(tmp_path, OWNER_SRC, "-s", *FAST)
    assert rc == 0 and "OWNER: spatialhub.utils.profiling.pytest_plugin.fixture" in out, out


def test_gate_spread_comes_from_saved_runs_and_is_t_adjusted_for_how_few_they_are():
    """Under 3 saved runs, with no process medians, nothing is measured: the library's
    single-run assumption (15%) may explain a reading, never decide it -- even 1.8x is
    "inconclusive", and the gate says it could not judge.  Measured from 10 saved runs
    (3%, taken as 5% at least), 1.3x fails; from 3 runs the same 3% is too rough an
    estimate (t with 2 degrees of freedom) to fail 1.3x."""
    import numpy as np

    from spatialhub.utils.profiling import _native
    from spatialhub.utils.profiling.pytest_plugin.gate import judge, t975

    def steady(level, seed):
        return _native._stats_from_samples(
            level * (1 + 0.01 * np.random.default_rng(seed).standard_normal(1000)))

    base, mid, big = steady(1.0, 1), steady(1.3, 2), steady(1.8, 3)
    v = judge("t", base, mid, 0.10)
    assert not v.fails and v.verdict == "inconclusive" and "no spread measured yet" in v.reason
    assert "15%" in v.reason and "--benchmark-processes 3 or more measures it" in v.reason
    assert not v.spread_known
    v = judge("t", base, big, 0.10)
    assert not v.fails and v.verdict == "inconclusive" and not v.spread_known
    assert "excludes 1" in v.reason     # what the assumption would say, said as such
    v = judge("t", base, mid, 0.10, run_spread=0.03, spread_runs=10)
    assert v.fails and "from 10 saved runs" in v.reason
    v = judge("t", base, mid, 0.10, run_spread=0.03, spread_runs=3)
    assert not v.fails and v.verdict == "inconclusive"
    # a spread the user gave is taken as given
    v = judge("t", base, mid, 0.10, run_spread=0.02)
    assert v.fails and "spread given" in v.reason
    assert not judge("t", base, mid, 0.40, run_spread=0.02).fails   # within the allowed 40%
    assert t975(2) == pytest.approx(4.303, abs=1e-3) and t975(1000) == pytest.approx(1.962, abs=0.01)


def test_gate_takes_the_machine_speed_out():
    """A run where the machine itself was 1.5x slower (the reference workload says so)
    is not a regression; the same slowdown with the machine unchanged is."""
    import numpy as np

    from spatialhub.utils.profiling import _native
    from spatialhub.utils.profiling.pytest_plugin.gate import judge

    rng = np.random.default_rng(2)
    base = _native._stats_from_samples(1.0 + rng.gamma(2.0, 0.02, 1000))
    slow = _native._stats_from_samples(1.5 * (1.0 + rng.gamma(2.0, 0.02, 1000)))
    hist = {"run_spread": 0.05, "spread_runs": 10}   # measured from 10 saved runs
    v = judge("t", base, slow, 0.10, machine_factor=1.5, **hist)
    assert not v.fails and abs(v.ratio - 1.0) < 0.05 and "machine speed factor 1.500" in v.reason
    v = judge("t", base, slow, 0.10, machine_factor=1.0, **hist)
    assert v.fails and v.machine_factor == 1.0


# ---- pytest-benchmark's contract: hooks, calibration, options, streams ---------------------

HOOKS_CONFTEST = """
    import pytest

    def pytest_benchmark_update_machine_info(config, machine_info):
        machine_info["lab"] = "bench-7"

    def pytest_benchmark_update_commit_info(config, commit_info):
        commit_info["ticket"] = "T-1"

    def pytest_benchmark_update_json(config, benchmarks, output_json):
        output_json["names"] = sorted(b.name for b in benchmarks)

    def pytest_benchmark_group_stats(config, benchmarks, group_by):
        # one table per first letter of the function after "test_"
        groups = {}
        for b in benchmarks:
            groups.setdefault("letter " + b["name"][5], []).append(b)
        return sorted(groups.items())

    def pytest_benchmark_scale_unit(config, unit, benchmarks, best, worst, sort):
        return ("m", 1e3) if unit == "seconds" else ("", 1.0)
"""


def test_a_conftest_with_pytest_benchmarks_hooks_runs_and_is_used(tmp_path):
    """A suite's conftest written for pytest-benchmark's hooks: before, pytest stopped with
    'unknown hook'; now every hook is called where pytest-benchmark calls it."""
    rc, out = run_pytest(tmp_path, """
        def test_alpha(benchmark):
            benchmark(sum, range(100))

        def test_apple(benchmark):
            benchmark(sum, range(200))

        def test_beta(benchmark):
            benchmark(sum, range(300))
    """, "--benchmark-json=h.json", *QUICK, files={"conftest.py": HOOKS_CONFTEST})
    assert rc == 0, out
    doc = json.loads((tmp_path / "h.json").read_text())
    assert doc["machine_info"]["lab"] == "bench-7"
    assert doc["commit_info"]["ticket"] == "T-1"
    assert doc["names"] == ["test_alpha", "test_apple", "test_beta"]
    # our fields survive the user's hooks (the gate reads them back)
    assert all("spatialhub" in b for b in doc["benchmarks"])
    assert "benchmark 'letter a': 2 tests" in out and "benchmark 'letter b': 1 tests" in out
    assert out.count("Name (time in ms)") == 2, out
    # pytest-benchmark's columns, ours, then its two counts last
    header = next(line for line in out.splitlines() if line.startswith("Name (time in"))
    cols = header.split(")", 1)[1].split()
    assert cols[:8] == ["Min", "Max", "Mean", "StdDev", "Median", "IQR", "Outliers", "OPS"], cols
    assert header.rstrip().endswith("Rounds  Iterations") and "P99" in cols, header
    assert "Median 95% CI" in header and "Peak RAM" in header


def test_fast_functions_are_calibrated_into_rounds_of_several_iterations(tmp_path):
    """A ~0.1 us function is called in loops so that a round lasts >= the 5 us target
    (pytest-benchmark's calibration); every round stays a sample, divided by the loop
    count.  A 30 us function keeps one call per round.  --benchmark-verbose logs the
    calibration on stderr."""
    (tmp_path / "test_subject.py").write_text(textwrap.dedent("""
        def test_tiny(benchmark):
            benchmark(int)

        def test_slowish(benchmark):
            benchmark(sum, range(3000))
    """))
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
                        "no:benchmark", "--benchmark-verbose", "--benchmark-json=c.json", *QUICK],
                       cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stdout + p.stderr
    doc = {b["name"]: b for b in json.loads((tmp_path / "c.json").read_text())["benchmarks"]}
    tiny, slowish = doc["test_tiny"]["stats"], doc["test_slowish"]["stats"]
    assert tiny["iterations"] >= 10, tiny["iterations"]
    # a round (median per-call time x iterations) reaches the 5 us target, within noise
    assert tiny["median"] * tiny["iterations"] >= 2.5e-6, tiny
    assert tiny["rounds"] == len(tiny["data"]) >= 5
    assert slowish["iterations"] == 1 and slowish["median"] > 5e-6
    err = p.stderr
    assert "Calibrating to target round 5.00us" in err and "(native clock)" in err, err
    assert "    Measured 1 iterations: " in err and "    Measured 10 iterations: " in err
    assert f" rounds x {tiny['iterations']} iterations ..." in err and "  Ran for " in err


def test_compare_fail_on_any_field_says_how_it_judged(tmp_path):
    """min:, mean: and the others are accepted: median and mean through the interval rule,
    the rest through pytest-benchmark's raw threshold -- and the output says which."""
    args = ["--benchmark-max-time=0.1", "--benchmark-max-rounds=1000",
            "--benchmark-reference=off"]
    rc, out = run_pytest(tmp_path, GATE_SRC, "--benchmark-save=base", *args)
    assert rc == 0, out
    rc, out = run_pytest(tmp_path, GATE_SRC, "--benchmark-compare=0001",
                         "--benchmark-compare-fail", "min:10%", "mean:10%",
                         "--benchmark-json=g.json", "--benchmark-verbose", *args,
                         env={"FACTOR": "2"})
    # min doubles: its raw threshold fails the run whatever the noise
    assert rc == 1, out
    assert "raw threshold with no noise model, as pytest-benchmark judges it" in out, out
    assert "mean:10%: mean " in out and "the median's run-to-run allowance" in out, out
    b = json.loads((tmp_path / "g.json").read_text())["benchmarks"][0]
    checks = {c["expr"]: c for c in b["spatialhub"]["checks"]}
    assert checks["min:10%"]["method"] == "threshold" and checks["min:10%"]["fails"]
    # the mean's verdict depends on the machine's outliers (the interval holds them): its
    # rates are bench material; here, that it was judged by the interval rule
    assert checks["mean:10%"]["method"] == "interval", checks
    # the same code, a threshold on min of 300%: passes
    rc, out = run_pytest(tmp_path, GATE_SRC, "--benchmark-compare=0001",
                         "--benchmark-compare-fail=min:300%", *args)
    assert rc == 0 and "Gate passed" in out, out


def test_gate_mean_rule_never_fails_on_identical_samples_and_catches_a_slowdown():
    import numpy as np

    from spatialhub.utils.profiling import _native
    from spatialhub.utils.profiling.pytest_plugin.gate import judge_mean

    rng = np.random.default_rng(3)
    base = _native._stats_from_samples(1.0 + rng.gamma(2.0, 0.05, 2000))
    same = _native._stats_from_samples(1.0 + rng.gamma(2.0, 0.05, 2000))
    slow = _native._stats_from_samples(1.5 * (1.0 + rng.gamma(2.0, 0.05, 2000)))
    hist = {"run_spread": 0.05, "spread_runs": 10}
    assert not judge_mean("t", base, same, 0.10, **hist).fails
    v = judge_mean("t", base, slow, 0.10, **hist)
    assert v.fails and v.verdict == "slower" and 1.4 < v.ratio < 1.6
    assert v.ci_low <= v.ratio <= v.ci_high
    # nothing measured yet: the 15% assumed between two single runs holds for the mean too
    assert judge_mean("t", base, slow, 0.10).verdict == "inconclusive"


def test_streams_and_usage_errors_read_as_pytest_benchmarks(tmp_path):
    """(pytest-benchmark's own tests check the rest of its wording in CI.)"""
    src = """
        def test_it(benchmark):
            benchmark(sum, range(100))
    """
    rc, out = run_pytest(tmp_path, src, "--benchmark-only", "--benchmark-disable")
    assert rc == 4 and "Can't have both --benchmark-only and --benchmark-disable" in out, out
    (tmp_path / "test_subject.py").write_text(textwrap.dedent(src))
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
                        "no:benchmark", "--benchmark-save=x", "--benchmark-compare", *QUICK],
                       cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stdout + p.stderr
    # the warning at start-up and the saved file's path, both on stderr, as pytest-benchmark
    assert "PytestBenchmarkWarning: Can't compare. No benchmark files in" in p.stderr, p.stderr
    assert "Saved benchmark data in: " in p.stderr and "0001_x.json" in p.stderr, p.stderr
    assert "Saved benchmark data" not in p.stdout


def test_columns_choose_and_order_the_table_and_our_extras_come_off(tmp_path):
    src = """
        def test_it(benchmark):
            benchmark(sum, range(100))
    """
    rc, out = run_pytest(tmp_path, src, "--benchmark-columns=median,p99,rounds", *QUICK)
    assert rc == 0, out
    header = next(line for line in out.splitlines() if line.startswith("Name (time in"))
    assert header.split(")", 1)[1].split() == ["Median", "P99", "Rounds"], header
    rc, out = run_pytest(tmp_path, src, "--benchmark-columns=median,bogus")
    assert rc == 4 and "Invalid column name(s): bogus" in out, out


def test_cprofile_lists_the_top_functions_after_the_table(tmp_path):
    rc, out = run_pytest(tmp_path, """
        def inner(n):
            return sum(range(n))

        def test_it(benchmark):
            assert benchmark(inner, 1000) == sum(range(1000))
    """, "--benchmark-cprofile=cumtime", "--benchmark-cprofile-top=3",
                         "--benchmark-json=p.json", *QUICK)
    assert rc == 0, out
    assert "cProfile (time in s)" in out and "test_subject.py::test_it" in out, out
    assert "ncalls\ttottime\tpercall\tcumtime\tpercall\tfilename:lineno(function)" in out
    prof = json.loads((tmp_path / "p.json").read_text())["benchmarks"][0]["cprofile"]
    assert 1 <= len(prof) <= 3 and any("(inner)" in f["function_name"] for f in prof), prof


def test_options_that_need_a_missing_package_say_which(tmp_path):
    src = """
        def test_weave(benchmark_weave):
            benchmark_weave("os.getcwd")
    """
    try:
        import pygal  # noqa: F401
    except ImportError:
        rc, out = run_pytest(tmp_path, src, "--benchmark-histogram=h")
        assert rc == 4 and "pip install pygal" in out, out
    try:
        import aspectlib  # noqa: F401
    except ImportError:
        rc, out = run_pytest(tmp_path, src, *QUICK)
        assert rc == 1 and "needs aspectlib: pip install aspectlib" in out, out


def test_the_contract_list_in_the_docs_is_the_one_ci_runs():
    """docs/guide.md lists pytest-benchmark's test files the plugin is held to; the CI
    step runs exactly those."""
    import re

    script = (REPO / ".ci" / "pytest_benchmark_contract.sh").read_text()
    ci = re.findall(r"^\s+(tests/test_\w+\.(?:py|rst))$", script, re.M)
    guide = (REPO / "docs" / "guide.md").read_text()
    section = guide.split("### pytest-benchmark's own tests", 1)[1].split("\n### ", 1)[0]
    docs = re.findall(r"^\| `(tests/test_\w+\.(?:py|rst))` \|", section, re.M)
    assert ci and ci == docs, (ci, docs)
    total = int(re.search(r"EXPECTED_TOTAL=(\d+)", script).group(1))
    counts = [int(n) for n in re.findall(r"^\| `tests/test_\w+\.(?:py|rst)` \| (\d+) \|",
                                         section, re.M)]
    assert sum(counts) == total, (counts, total)


# ---- the readiness report ------------------------------------------------------------

def test_benchmark_report_writes_the_page_with_the_verdicts(tmp_path):
    source = """
        def test_sort(benchmark):
            benchmark(sorted, list(range(500)))

        def test_sum(benchmark):
            benchmark(sum, range(500))
        """
    rc, out = run_pytest(tmp_path, source, *QUICK, "--benchmark-autosave",
                         "--benchmark-report=first.md")
    assert rc == 0, out
    first = (tmp_path / "first.md").read_text()
    assert "| test_sort | CPU |" in first and "| test_sum | CPU |" in first
    assert "against the baseline" not in first       # two tests are not two candidates
    assert "Wrote the readiness report in: first.md" in out
    rc, out = run_pytest(tmp_path, source, *QUICK, "--benchmark-compare",
                         "--benchmark-report=again.html")
    assert rc == 0, out
    html = (tmp_path / "again.html").read_text()
    # each benchmark against its saved run, by the gate's reading
    assert re.search(r"test_sort: (<[^>]+>)?(faster|slower|same|inconclusive)(</\w+>)?: "
                     r"[\d.]+x the median of test_sort \(0001_", html), html[:3000]
    assert "pytest -q -p no:cacheprovider" in html and "<script" not in html


@pytest.mark.parametrize("args, fragment", [
    (["--benchmark-report=r.pdf"], "name the file *.html"),
    (["--benchmark-report=r.html", "--benchmark-instructions"],
     "--benchmark-report does not apply with --benchmark-instructions"),
])
def test_benchmark_report_mistakes_are_usage_errors(tmp_path, args, fragment):
    rc, out = run_pytest(tmp_path, "def test_x(benchmark):\n    benchmark(int)\n", *args)
    assert rc == 4, out
    assert fragment in out


def test_one_note_per_benchmark_with_each_cause_once():
    """The segments of one benchmark(func) warn with their own figures and cause sets: the
    user reads one note per benchmark, each cause on one line (its first figures), never
    the same cause three times."""
    from types import SimpleNamespace

    from spatialhub.utils.profiling.pytest_plugin.fixture import (MAX_NOTE_LINES,
                                                                  BenchmarkFixture)

    fx = SimpleNamespace(warnings=[])
    head = "benchmark 'test_x' (statistics.md#the-causes):"
    for msg in (f"{head}\n  page faults: 570 a call -- reuse buffers (out=)",
                f"{head}\n  noisy: IQR 10% of the median -- raise --benchmark-min-rounds\n"
                "  page faults: 600 a call -- reuse buffers (out=)",
                f"{head}\n  page faults: 580 a call -- reuse buffers (out=)"):
        BenchmarkFixture._keep_warning(fx, msg)
    assert fx.warnings == [f"{head}\n  page faults: 570 a call -- reuse buffers (out=)\n"
                           "  noisy: IQR 10% of the median -- raise --benchmark-min-rounds"]
    for k in range(10):
        BenchmarkFixture._keep_warning(fx, f"{head}\n  cause{k}: x")
    assert len(fx.warnings) == 1 and len(fx.warnings[0].split("\n")) == 1 + MAX_NOTE_LINES
