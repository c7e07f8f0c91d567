"""Drop-in, checked against the released module itself (issue 19).

The released `spatialhub` 0.1.7 ships `spatialhub/utils/profiling.py`, pure Python.  Its
wheel, unpacked where SPATIALHUB_RELEASED_DIR points (default /tmp/rel/whl; CI's
coexistence step unpacks it there), is loaded here beside ours, in one process:

* the contract its own test suite states (its repository's tests/utils/test_profiling.py,
  26 tests besides the one that mocks psutil internals) holds on ours -- restated here in
  our words, since that file ships in neither its wheel nor its sdist (docs/migration.md
  records the run of the file itself);
* both modules' tables of the same stats are identical, byte for byte;
* both modules' medians of an allocation-heavy pipeline agree within 5% (interleaved
  rounds, in the allocator state where the output's pages go back to the kernel);
* the stage-by-stage pattern of its benchmark scripts (benchmark_callable per stage of an
  ONNX Runtime session, then format_benchmark_table(stats_list, title=...) appended to a
  Markdown report) prints the released table on ours.
"""
import json
import logging
import math
import re
import statistics
import time
import warnings

import numpy as np
import pytest

import spatialhub.utils.profiling as ours


@pytest.fixture(scope="module")
def rel(released):
    return released


@pytest.fixture
def quiet():
    """A no-op benchmark is overhead-dominated and says so; not what these tests read."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ours.BenchmarkWarning)
        yield


# ---- (a) the contract of the released test suite, on ours ---------------------------

def test_profile_node_starts_empty():
    n = ours.ProfileNode("scope")
    assert (n.name, n.calls, n.total_wall_time, n.total_cpu_time, n.peak_ram_delta_mb,
            n.children) == ("scope", 0, 0.0, 0.0, 0.0, {})


def test_profiler_push_pop_reset_and_the_stack():
    hp = ours.HierarchicalProfiler(name="CustomRoot")
    assert hp.root_name == "CustomRoot" and hp.root.name == "CustomRoot"
    assert len(hp.stack) == 1 and hp.stack[0] == hp.root
    first = hp.push("stage")
    assert len(hp.stack) == 2 and hp.stack[-1] == first and "stage" in hp.root.children
    hp.pop()
    assert hp.push("stage") is first                 # an existing child is reused
    hp.push("kernel")
    assert len(hp.stack) == 3 and "kernel" in first.children
    hp.pop(), hp.pop(), hp.pop()                     # popping the root is harmless
    assert len(hp.stack) == 1
    hp.reset()
    assert hp.root.children == {} and len(hp.stack) == 1


def test_summary_logs_the_tree_with_assigned_totals(caplog):
    hp = ours.HierarchicalProfiler()
    node = hp.push("preprocess")
    node.calls, node.total_wall_time, node.total_cpu_time = 5, 0.5, 0.4
    node.peak_ram_delta_mb = 2.5
    hp.pop()
    with caplog.at_level(logging.INFO):
        hp.summary()
    assert "Hierarchical Profiling Summary" in caplog.text
    assert "preprocess" in caplog.text and "RAM: +2.5MB" in caplog.text


def test_timer_records_into_the_module_profiler_and_survives_exceptions():
    ours.profiler.reset()
    with ours.Timer("block") as t:
        time.sleep(0.01)
    assert t.elapsed_wall >= 0.005 and t.elapsed_cpu >= 0.0
    assert ours.profiler.root.children["block"].calls == 1
    with pytest.raises(RuntimeError, match="Controlled"):
        with ours.Timer("failing"):
            raise RuntimeError("Controlled error")
    assert len(ours.profiler.stack) == 1 and ours.profiler.root.children["failing"].calls == 1
    with ours.Timer("parent"):
        with ours.Timer("child"):
            pass
    assert ours.profiler.root.children["parent"].children["child"].calls == 1
    with ours.Timer("nomem", track_memory=False) as t:
        assert t.track_memory is False


def test_timeit_names_keeps_metadata_and_unwinds():
    ours.profiler.reset()

    @ours.timeit()
    def doubled(v: int) -> int:
        """Doc."""
        return v * 2

    @ours.timeit("explodes")
    def explode():
        raise ValueError("Boom")

    class Worker:
        @ours.timeit("Worker.run")
        def run(self, m):
            return 10 * m

    assert doubled(5) == 10 and doubled.__name__ == "doubled" and doubled.__doc__ == "Doc."
    with pytest.raises(ValueError, match="Boom"):
        explode()
    assert Worker().run(3) == 30
    assert {"doubled", "explodes", "Worker.run"} <= set(ours.profiler.root.children)
    assert len(ours.profiler.stack) == 1


def test_get_ram_mb_is_a_non_negative_float():
    assert isinstance(ours.get_ram_mb(), float) and ours.get_ram_mb() >= 0.0


def test_to_dict_rounds_as_the_released_dataclass():
    d = ours.BenchmarkStats("M", "CPU", 12.3456, 12.0, 0.567, 13.4, 11.1, 15.2, 81.0, 5, 20,
                            ram_delta_mb=2.345).to_dict()
    assert (d["mean_ms"], d["std_ms"], d["p95_ms"], d["fps"], d["ram_delta_mb"]) == (
        12.35, 0.57, 13.4, 81.0, 2.35)
    assert (d["warmup_iters"], d["timed_iters"]) == (5, 20)


def test_benchmark_callable_contract(quiet):
    s = ours.benchmark_callable(lambda a, b=5: a + b, 10, b=20, name="KernelAdd",
                                device="CPU", num_warmup=3, num_iters=15)
    assert (s.name, s.device, s.warmup_iters, s.timed_iters) == ("KernelAdd", "CPU", 3, 15)
    assert s.min_ms <= s.max_ms and s.fps > 0.0
    for bad in (0, -5):
        with pytest.raises(ValueError, match="num_iters must be a positive integer"):
            ours.benchmark_callable(lambda: None, num_iters=bad)
    z = ours.benchmark_callable(lambda: 1 + 1, num_warmup=0, num_iters=5)
    assert (z.warmup_iters, z.timed_iters) == (0, 5)
    calls = []
    s = ours.benchmark_callable(lambda: None, num_warmup=2, num_iters=4,
                                sync_fn=lambda: calls.append(1))
    assert len(calls) == 10 and s.timed_iters == 4   # the released test's count
    assert ours.benchmark_callable(lambda: None, num_warmup=1, num_iters=5,
                                   track_ram=False).ram_delta_mb == 0.0


# The released benchmark_callable's own options; every other keyword went on to func.
RELEASED_OPTIONS = {"name", "device", "num_warmup", "num_iters", "track_ram", "track_vram",
                    "sync_fn"}


def _note(exc):
    return " ".join(getattr(exc, "__notes__", []))


def test_a_keyword_the_released_module_passed_on_says_how_to_pass_it(quiet):
    import functools
    import inspect
    ours_options = {p.name for p in inspect.signature(ours.benchmark_callable).parameters.values()
                    if p.kind is p.KEYWORD_ONLY}
    new = ours_options - RELEASED_OPTIONS
    assert {"cache", "stream", "counters", "run_spread", "progress", "disable_gc"} <= new
    # a value meant for func (a KV cache, a config object) in one of the new names: the
    # harness's error, with a note on the way to pass it on -- and that way works
    for opt in sorted(new - {"progress", "disable_gc"}):   # flags take any object
        seen = []

        def model(x, **kw):
            seen.append(kw)
            return x

        with pytest.raises((TypeError, ValueError)) as info:
            ours.benchmark_callable(model, 1, num_warmup=0, num_iters=2, **{opt: {"k": 1}})
        assert f"if {opt}= was meant for func" in _note(info.value), (opt, str(info.value))
        assert f"functools.partial(func, {opt}=...)" in _note(info.value)
        assert seen == []                                      # func was never called
        s = ours.benchmark_callable(functools.partial(model, **{opt: {"k": 1}}), 1,
                                    num_warmup=0, num_iters=2)
        assert s.timed_iters == 2 and seen == [{opt: {"k": 1}}] * 2
    # values of the right type that the option refuses: a ValueError, the same note
    for bad in (dict(cache="fp16"), dict(run_spread=2), dict(counters="cache-misses"),
                dict(target_rel_ci=5), dict(max_time_s=0),
                dict(stream=7),                            # a stream handle on a CPU run
                dict(stream=7, device="cuda", sync_fn=lambda: None)):
        with pytest.raises(ValueError) as info:
            ours.benchmark_callable(lambda **kw: None, num_warmup=0, num_iters=2, **bad)
        opt = next(k for k in bad if k in new)
        assert f"functools.partial(func, {opt}=...)" in _note(info.value), (bad, info.value)


@pytest.mark.parametrize("kw, exc, message", [
    (dict(num_iters=0), ValueError, "num_iters must be a positive integer, got 0"),
    (dict(num_warmup=-1), ValueError, "num_warmup"),
    (dict(name=3), TypeError, "name"),
    (dict(device="cuda:x"), ValueError, "cuda:x"),
    (dict(sync_fn=3), TypeError, "sync_fn"),
])
def test_the_released_options_errors_win_and_carry_no_note(kw, exc, message):
    # alone, and beside an invalid new option: the released option's own error, no note
    for extra in ({}, dict(cache={"k": 1}), dict(counters="nope"), dict(stream=7)):
        with pytest.raises(exc, match=re.escape(message)) as info:
            ours.benchmark_callable(lambda **k: None, **{"num_warmup": 0, "num_iters": 2, **kw},
                                    **extra)
        assert not getattr(info.value, "__notes__", None), (kw, extra, info.value)


def test_sync_fn_calls_match_the_released_module(rel, quiet):
    for warm, iters in ((2, 4), (0, 3), (7, 13)):
        a, b = [], []
        ours.benchmark_callable(lambda: None, num_warmup=warm, num_iters=iters,
                                sync_fn=lambda: a.append(1))
        rel.benchmark_callable(lambda: None, num_warmup=warm, num_iters=iters,
                               sync_fn=lambda: b.append(1))
        assert len(a) == len(b) == warm + 2 * iters


# ---- (b) tables, byte for byte --------------------------------------------------------

SEED = ("name", "device", "mean_ms", "median_ms", "std_ms", "p95_ms", "min_ms", "max_ms",
        "fps", "warmup_iters", "timed_iters", "ram_delta_mb", "vram_delta_mb")

ROWS = [
    ("ModelA", "CPU", 10.5, 10.2, 0.5, 11.2, 9.8, 12.0, 95.2, 5, 20, 1.5, 0.0),
    ("ModelB", "CUDA", 2.5, 2.4, 0.1, 2.7, 2.2, 3.0, 400.0, 5, 20, 0.0, 0.0),
    ("vit_b_16", "CUDAExecutionProvider", 1.0123, 1.01, 0.08605, 1.19, 0.9, 2.0, 987.85,
     10, 50, 0.04, 312.456),
    ("DINOv2 ViT-S/14 (fp16)", "cuda:1", 123.456789, 120.0049, 15.5551, 150.125, 99.0,
     201.0, 8.1, 10, 50, 2048.75, 0.0),
    ("preprocess", "CPUExecutionProvider", 0.0051, 0.005, 0.0049, 0.0151, 0.004, 0.3,
     196078.4313, 10, 50, -3.0, 5.0),
    ("big", "TensorrtExecutionProvider", 98765.4321, 98765.4, 1234.5, 99999.99, 97000.0,
     100000.0, 0.0101, 1, 3, 1e5, 0.0),
]


def _pair(rel, row):
    kw = dict(zip(SEED, row))
    return rel.BenchmarkStats(**kw), ours.BenchmarkStats(**kw)


@pytest.mark.parametrize("title", [None, "", "Inference Latency"])
@pytest.mark.parametrize("unit", [None, "pairs/s"])
@pytest.mark.parametrize("rows", [ROWS, ROWS[:1], ROWS[4:5], [r for r in ROWS if "CUDA" not in r[1]
                                                             and "cuda" not in r[1]], []])
def test_tables_are_identical_byte_for_byte(rel, rows, title, unit):
    theirs, mine = zip(*[_pair(rel, r) for r in rows]) if rows else ((), ())
    kw = {} if unit is None else {"throughput_unit": unit}
    assert ours.format_benchmark_table(list(mine), title=title, **kw) == \
        rel.format_benchmark_table(list(theirs), title=title, **kw)


def test_a_single_stats_object_gives_the_same_table(rel):
    theirs, mine = _pair(rel, ROWS[2])
    assert ours.format_benchmark_table(mine) == rel.format_benchmark_table(theirs)
    assert ours.format_benchmark_table(mine, "T") == rel.format_benchmark_table(theirs, "T")


def test_where_ours_differs_on_purpose(rel):
    # a latency the released table prints as 0.00 keeps two significant digits; a '|' in a
    # name is escaped instead of splitting the row (docs/migration.md)
    theirs, mine = _pair(rel, ("tiny|op", "CPU", 0.0037, 0.0036, 0.0012, 0.0041, 0.003,
                               0.01, 270270.3, 10, 50, 0.0, 0.0))
    assert rel.format_benchmark_table(theirs).endswith(
        "| **tiny|op** | `CPU` | 0.00 +/- 0.00 | 0.00 | 0.00 | **270270.3** | 0.0 MB |")
    assert ours.format_benchmark_table(mine).endswith(
        "| **tiny\\|op** | `CPU` | 0.0037 +/- 0.0012 | 0.0036 | 0.0041 | **270270.3** | 0.0 MB |")


def test_a_measured_result_is_the_released_layout_plus_at_most_a_footnote(rel, quiet):
    s = ours.benchmark_callable(sum, range(1000), name="sum", num_warmup=2, num_iters=30)
    copy = rel.BenchmarkStats(**{k: getattr(s, k) for k in SEED})
    table, released = ours.format_benchmark_table([s], "T"), rel.format_benchmark_table([copy], "T")
    assert table.startswith(released)
    rest = table[len(released):]
    assert rest == "" or re.fullmatch(r"\n\nFlags: [a-z, -]+\.", rest), rest


# ---- (c) the same median on an allocation-heavy pipeline ------------------------------

PIPELINE_RUN = """
import importlib.util, json, statistics, sys, warnings
warnings.simplefilter("ignore")
spec = importlib.util.spec_from_file_location("released_profiling", sys.argv[1])
rel = importlib.util.module_from_spec(spec)
sys.modules["released_profiling"] = rel
spec.loader.exec_module(rel)
import numpy as np
import spatialhub.utils.profiling as ours

def pipeline(a):
    return np.clip(a * 1.5, 0, 1) > 0.5

x = np.random.default_rng(0).random((1, 3, 480, 640), dtype=np.float32)
ratios, faults = [], []
for r in range(60):                 # short blocks, interleaved in alternating order:
    got = {}                        # what the machine does hits both sides of a round
    for side in (("ours", "rel") if r % 2 == 0 else ("rel", "ours")):
        mod = ours if side == "ours" else rel
        got[side] = mod.benchmark_callable(pipeline, x, num_warmup=1, num_iters=5,
                                           track_ram=False)
    ratios.append(got["ours"].median_ms / got["rel"].median_ms)
    faults.append(got["ours"].minor_faults_per_iter)
print(json.dumps([ratios, faults]))
"""


def test_pipeline_medians_agree_within_5_percent(rel):
    """np.clip(x * 1.5, 0, 1) > 0.5 on a 1x3x480x640 float32 frame, made directly as
    float32, so glibc hands the 3.7 MB temporaries back to the kernel on every free (the
    fault counters confirm it): releasing the output inside the timed region is part of
    the call.  Ours read 0.90x theirs when it released the output after the clock.  In a
    fresh interpreter: a process that freed big blocks before has raised glibc's mmap
    threshold, and the pages then stay."""
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-c", PIPELINE_RUN, rel.__file__],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    ratios, faults = json.loads(done.stdout.strip().splitlines()[-1])
    assert statistics.median(faults) > 256, faults   # the allocator state the test is about
    ratio = statistics.median(ratios)
    shown = (ratio, sorted(round(v, 3) for v in ratios))
    # Within 5%, as a harness judges it: the distribution-free 95% interval of the median
    # per-round ratio (ranks from the binomial) must reach into [0.95, 1.05].  A quiet
    # machine gives an interval of ~1%, so that is the check; a CI lane on two loaded
    # cores gave rounds from 0.32 to 1.4 and a median of 1.058 once, which the interval
    # says it cannot tell from 1.05.  Never beyond 15%, whatever the noise.
    lo, hi = median_interval(ratios)
    assert lo <= 1.05 and hi >= 0.95, (lo, hi, shown)
    assert 0.85 <= ratio <= 1.15, shown


def median_interval(xs, z=1.96):
    """The distribution-free ~95% interval of the median: order statistics at ranks
    n/2 -+ z*sqrt(n)/2 (the normal approximation of the binomial)."""
    v = sorted(xs)
    n = len(v)
    half = z * n ** 0.5 / 2
    return v[max(0, int(n / 2 - half))], v[min(n - 1, int(math.ceil(n / 2 + half)))]


# ---- (d) the released benchmark scripts' pattern ---------------------------------------

def test_stage_by_stage_onnx_report_prints_the_released_table(rel, tmp_path, quiet):
    ort = pytest.importorskip("onnxruntime")
    from _tiny_onnx import linear_model_bytes

    def report(mod):
        sess = ort.InferenceSession(linear_model_bytes(16, 8), providers=["CPUExecutionProvider"])
        frame = np.random.default_rng(1).random((4, 16), dtype=np.float32)

        def preprocess(x):
            return ((x - 0.5) / 0.25).astype(np.float32)

        def inference(x):
            return sess.run(None, {"x": x})

        def postprocess(y):
            return np.argmax(y[0], axis=1)

        feed = preprocess(frame)
        out = inference(feed)
        stats_list = [
            mod.benchmark_callable(preprocess, frame, name="Preprocess", num_warmup=2, num_iters=10),
            mod.benchmark_callable(inference, feed, name="ONNX Inference",
                                   device="CPUExecutionProvider", num_warmup=2, num_iters=10),
            mod.benchmark_callable(postprocess, out, name="Postprocess", num_warmup=2, num_iters=10),
        ]
        path = tmp_path / f"{mod.__name__}.md"
        with open(path, "a") as f:
            f.write("# Report\n\n")
            f.write(mod.format_benchmark_table(stats_list, title="Stage breakdown") + "\n")
        return path.read_text()

    mine, theirs = report(ours), report(rel)
    m, t = mine.split("\n"), theirs.split("\n")
    assert m[:6] == t[:6]        # "# Report", "", "### Stage breakdown", "", header, alignment
    assert m[4] == ("| Model / Target | Device | Latency Mean (ms) | Median (ms) | P95 (ms) | "
                    "Throughput (FPS) | Peak RAM Delta |")
    # each row: the released cells and formats (numbers differ from run to run)
    cell = (r"\| \*\*(Preprocess|ONNX Inference|Postprocess)\*\* \| `(CPU|CPUExecutionProvider)` "
            r"\| \d+\.\d+ \+/- \d+\.\d+ \| \d+\.\d+ \| \d+\.\d+ \| \*\*\d+\.\d\*\* \| "
            r"(\+\d+\.\d MB|0\.0 MB) \|")
    for line in m[6:9]:
        assert re.fullmatch(cell, line), line
    assert [line.split(" | ")[:2] for line in m[6:9]] == [line.split(" | ")[:2] for line in t[6:9]]
    # then at most a footnote line flagging doubtful rows, and the file's newline
    assert m[9:] in ([""], ["", m[10], ""]) and (len(m) == 10 or m[10].startswith("Flags: "))
