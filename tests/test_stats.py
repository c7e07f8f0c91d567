"""BenchmarkStats and GPUMemoryInfo behave like the seed's dataclasses, and more."""
import copy
import dataclasses
import gc
import json
import math
import pickle
import sys
import weakref

import numpy as np
import pytest

from spatialhub.utils.profiling import BenchmarkStats, GPUMemoryInfo
from spatialhub.utils.profiling import _native
from _rounding import released_round

SEED_FIELDS = ["name", "device", "mean_ms", "median_ms", "std_ms", "p95_ms", "min_ms",
               "max_ms", "fps", "warmup_iters", "timed_iters", "ram_delta_mb", "vram_delta_mb"]


def test_positional_construction_in_seed_order():
    s = BenchmarkStats("m", "CPU", 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8, 9, 10.0, 11.0)
    assert [getattr(s, f) for f in SEED_FIELDS] == ["m", "CPU", 1.0, 2.0, 3.0, 4.0, 5.0, 6.0,
                                                    7.0, 8, 9, 10.0, 11.0]


def test_defaults_and_keyword_only_extras(make_stats):
    s = make_stats()
    assert s.ram_delta_mb == 0.0 and s.vram_delta_mb == 0.0
    assert s.p99_ms is None and s.env is None and s.samples_ms is None
    assert s.batch_size == 1 and s.throughput == s.fps
    with pytest.raises(TypeError):  # extras are keyword-only
        BenchmarkStats("m", "CPU", 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8, 9, 0.0, 0.0, 1.0)
    s = make_stats(p99_ms=3.0, batch_size=16, timed_iters=100)
    assert s.p99_ms == 3.0 and s.throughput == pytest.approx(s.fps * 16)


def test_missing_and_unknown_arguments_are_type_errors(make_stats):
    with pytest.raises(TypeError, match="missing required argument 'timed_iters'"):
        BenchmarkStats("m", "CPU", 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8)
    with pytest.raises(TypeError, match="unexpected keyword argument 'mean'"):
        make_stats(mean=1.0)
    with pytest.raises(TypeError, match="multiple values"):
        BenchmarkStats("m", "CPU", 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8, 9, name="x")


def test_attributes_are_settable_with_type_checks(make_stats):
    s = make_stats()
    s.name = "other"
    s.mean_ms = 2
    s.timed_iters = np.int64(7)
    s.p99_ms = None
    assert (s.name, s.mean_ms, s.timed_iters) == ("other", 2.0, 7)
    with pytest.raises(TypeError, match="name must be str"):
        s.name = 3
    with pytest.raises(TypeError, match="mean_ms must be a real number"):
        s.mean_ms = "1.5"
    with pytest.raises(TypeError, match="an int"):
        s.timed_iters = 1.5
    with pytest.raises(ValueError, match=">= 0"):
        s.warmup_iters = -1
    with pytest.raises(TypeError):
        s.params = [1]
    with pytest.raises(AttributeError):
        del s.name
    with pytest.raises(AttributeError):
        s.samples_ms = [1.0]


def test_seed_code_using_the_dataclass_protocol_keeps_working(make_stats):
    s = make_stats(name="m", device="CPU", samples_ms=[1.0, 2.0, 3.0], ram_delta_mb=1.5)
    assert dataclasses.is_dataclass(s) and dataclasses.is_dataclass(BenchmarkStats)
    seed = SEED_FIELDS
    assert [f.name for f in dataclasses.fields(s)] == seed
    assert [f.default for f in dataclasses.fields(BenchmarkStats)][-2:] == [0.0, 0.0]
    d = dataclasses.asdict(s)
    assert list(d) == seed and d["ram_delta_mb"] == 1.5 and d["mean_ms"] == s.mean_ms
    json.dumps(d)   # as JSON-ready as the seed's: no array, no nested objects
    assert dataclasses.astuple(s) == tuple(getattr(s, k) for k in seed)
    r = dataclasses.replace(s, name="renamed")
    assert type(r) is BenchmarkStats and r.name == "renamed" and r.mean_ms == s.mean_ms
    with pytest.raises(TypeError):
        dataclasses.replace(s, mean_ms="fast")   # the setters' type checks still apply
    if sys.version_info >= (3, 10):   # a match statement is a SyntaxError before 3.10
        ns = {"BenchmarkStats": BenchmarkStats, "s": s}
        exec(compile("match s:\n"
                     "    case BenchmarkStats('m', 'CPU', mean):\n"
                     "        got = mean\n"
                     "    case _:\n"
                     "        got = None\n", "<match>", "exec"), ns)
        assert ns["got"] == s.mean_ms, "positional pattern did not match"
    g = GPUMemoryInfo(total_mb=8.0, free_mb=6.0, used_mb=2.0)
    assert dataclasses.asdict(g) == {"total_mb": 8.0, "free_mb": 6.0, "used_mb": 2.0}


def test_repr_is_dataclass_style(make_stats):
    r = repr(make_stats())
    assert r.startswith("BenchmarkStats(name='Model', device='CPU', mean_ms=1.5, median_ms=1.25,")
    assert "vram_delta_mb=0.0" in r and "p99_ms" not in r and "env" not in r


def test_equality_and_unhashable(make_stats):
    assert make_stats() == make_stats()
    assert make_stats() != make_stats(mean_ms=9.0)
    assert make_stats(samples_ms=[1, 2]) != make_stats(samples_ms=[1, 3])
    assert make_stats() != "x"
    with pytest.raises(TypeError):
        hash(make_stats())


def test_to_dict_keeps_seed_keys_first_and_rounds(make_stats):
    s = make_stats(mean_ms=1.234567, median_ms=0.000123456, fps=810.123456,
                   ram_delta_mb=12.3456, vram_delta_mb=0.005, p99_ms=9.87654321)
    d = s.to_dict()
    assert list(d)[:13] == SEED_FIELDS
    assert d["mean_ms"] == 1.23              # ms to 2 decimals, as the released module
    assert d["median_ms"] == 0.00012         # ... but never fewer than 2 significant digits
    assert d["fps"] == 810.1                 # fps to 1 decimal
    assert d["ram_delta_mb"] == 12.35 and d["vram_delta_mb"] == 0.005   # MiB to 2 decimals
    assert d["p99_ms"] == 9.88 and d["p90_ms"] is None
    assert "samples_ms" not in d
    assert make_stats(samples_ms=[1.5, 2.5]).to_dict(samples=True)["samples_ms"] == [1.5, 2.5]


@pytest.mark.parametrize("v, want", [
    (0.0008415, 0.00084),      # the example: not 0.0
    (0.004, 0.004), (0.0049, 0.0049), (0.05, 0.05), (0.123, 0.12), (2.675, 2.67),
    (1234.5678, 1234.57), (0.0, 0.0), (-0.00015, -0.00015), (0.099999, 0.1),
])
def test_ms_rounding_keeps_two_significant_digits(make_stats, v, want):
    assert make_stats(mean_ms=v).to_dict()["mean_ms"] == want


def test_rounding_matches_python_round(make_stats):
    for v in (0.00005, 0.00015, 2.675, 1.00005, 123.45675, -0.00015, 0.0123456, 7e-9):
        d = make_stats(mean_ms=v, fps=v * 1000, ram_delta_mb=v).to_dict()
        assert d["mean_ms"] == released_round(v, 2)
        assert d["fps"] == released_round(v * 1000, 1)
        assert d["ram_delta_mb"] == released_round(v, 2)


def test_json_and_from_dict_round_trip(make_stats):
    s = make_stats(p50_ms=1.25, env={"python": "3.11"}, params={"batch_size": 4},
                   samples_ms=[1.0, 1.5, 2.0], target_met=True, fps=666.5)
    text = s.to_json(samples=True)
    back = BenchmarkStats.from_dict(json.loads(text))
    assert back == s  # every value here survives rounding unchanged
    assert back.to_dict(samples=True) == s.to_dict(samples=True)
    odd = make_stats(fps=666.6666667)
    assert BenchmarkStats.from_dict(odd.to_dict()).fps == 666.7  # JSON is the rounded view
    assert back.samples_ms.tolist() == [1.0, 1.5, 2.0]
    assert json.loads(s.to_json())["env"] == {"python": "3.11"}
    with pytest.raises(TypeError):
        BenchmarkStats.from_dict([1, 2])


def test_to_dict_returns_copies_of_dicts(make_stats):
    s = make_stats(env={"a": 1})
    s.to_dict()["env"]["a"] = 2
    assert s.env == {"a": 1}


def test_pickle_and_copy_keep_every_field(make_stats):
    s = make_stats(p99_ms=3.3333333333, samples_ms=np.linspace(1, 2, 101), outliers=2,
                   ram_peak_method="hwm", env={"k": "v"}, timed_iters=101)
    for proto in range(pickle.HIGHEST_PROTOCOL + 1):
        t = pickle.loads(pickle.dumps(s, proto))
        assert t == s and t.p99_ms == 3.3333333333
    assert copy.deepcopy(s) == s


def test_samples_view_is_read_only_zero_copy_and_outlives_the_stats():
    x = np.linspace(1.0, 2.0, 1000)
    s = _native._stats_from_samples(x)
    v = s.samples_ms
    assert v.dtype == np.float64 and v.shape == (1000,) and not v.flags.writeable
    assert np.shares_memory(v, s.samples_ms)  # both view the stats' own buffer
    with pytest.raises(ValueError):
        v[0] = 5.0
    ref = weakref.ref(s)
    del s
    gc.collect()
    assert ref() is None              # the stats object may go ...
    junk = [bytes(8000) for _ in range(100)]
    assert v.sum() == pytest.approx(x.sum())   # ... its buffer lives as long as a view
    assert type(v.base).__name__ == "PyCapsule"
    del junk


def test_repr_markdown_and_html(make_stats):
    s = make_stats(name="a<b")
    md = s._repr_markdown_()
    assert md.splitlines()[0].startswith("| Model / Target |") and "**a\\<b**" in md   # escaped: not an HTML tag
    html = s._repr_html_()
    assert html.startswith("<table>") and "<b>a&lt;b</b>" in html


def test_subclass_works(make_stats):
    class Mine(BenchmarkStats):
        pass

    m = Mine("m", "CPU", 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8, 9)
    assert isinstance(Mine.from_dict(m.to_dict()), Mine)
    assert m._repr_markdown_().count("\n") == 2


def test_gpu_memory_info():
    g = GPUMemoryInfo(80.0, 30.5, 49.5)
    assert (g.total_mb, g.free_mb, g.used_mb) == (80.0, 30.5, 49.5)
    assert g == GPUMemoryInfo(total_mb=80.0, free_mb=30.5, used_mb=49.5)
    assert repr(g) == "GPUMemoryInfo(total_mb=80.0, free_mb=30.5, used_mb=49.5)"
    assert GPUMemoryInfo(1.004, 0.0, 1.004).to_dict() == {"total_mb": 1.0, "free_mb": 0.0,
                                                          "used_mb": 1.0}
    assert pickle.loads(pickle.dumps(g)) == g
    with pytest.raises(TypeError):
        GPUMemoryInfo(1.0, 2.0)


def test_views_survive_reinitialising_the_stats():
    seed = ("n", "d", 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1000.0, 0, 1)
    s = BenchmarkStats(*seed, samples_ms=[7.0] * 1000)
    v = s.samples_ms
    s.__init__(*seed, samples_ms=[1.0])      # replaces the buffer v views
    junk = [bytes(8000) for _ in range(50)]  # would reuse freed memory
    assert v.sum() == 7000.0 and s.samples_ms.tolist() == [1.0]
    s.__setstate__(dict(zip(["name", "device", "mean_ms", "median_ms", "std_ms", "p95_ms",
                             "min_ms", "max_ms", "fps", "warmup_iters", "timed_iters"], seed)))
    assert s.samples_ms is None and v[999] == 7.0
    del junk
