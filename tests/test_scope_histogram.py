"""The per-scope latency distribution: percentiles within 1 % of NumPy's (method="linear")
over the very durations the scopes measured; exact min, max and mean; bounded memory."""
import random

import numpy as np
import pytest

from spatialhub.utils.profiling import HierarchicalProfiler


def record(p, name, loops):
    """Run one scope per entry of `loops` (a busy loop of that length); the per-call
    wall times in ms as each Timer measured them."""
    out = []
    for n in loops:
        t = p(name, track_ram=False)
        with t:
            for _ in range(n):
                pass
        out.append(t.elapsed_wall * 1e3)
    return np.array(out)


@pytest.mark.parametrize("shape", ["uniform", "heavy-tail", "bimodal"])
def test_percentiles_match_numpy_within_one_percent(shape):
    rng = random.Random(7)
    if shape == "uniform":
        loops = [rng.randint(0, 3000) for _ in range(1500)]
    elif shape == "heavy-tail":
        loops = [int(rng.paretovariate(1.2) * 50) for _ in range(1500)]
    else:
        loops = [rng.choice((10, 4000)) + rng.randint(0, 50) for _ in range(1500)]
    p = HierarchicalProfiler("R", track_ram=False)
    ms = record(p, "s", loops)
    node = p.root.children["s"]
    assert node.calls == len(ms)
    for attr, q in (("p50_ms", 50), ("p95_ms", 95), ("p99_ms", 99)):
        want = np.percentile(ms, q)
        got = getattr(node, attr)
        assert got == pytest.approx(want, rel=0.01), (attr, got, want)
    for q in (1, 10, 25, 75, 90, 99.9):
        assert node.percentile(q) == pytest.approx(np.percentile(ms, q), rel=0.01), q
    assert node.min_ms == pytest.approx(ms.min(), rel=1e-9)
    assert node.max_ms == pytest.approx(ms.max(), rel=1e-9)
    assert node.mean_ms == pytest.approx(ms.mean(), rel=1e-9)
    assert node.percentile(0) == node.min_ms and node.percentile(100) == node.max_ms


def test_one_call_and_two_calls():
    p = HierarchicalProfiler("R", track_ram=False)
    ms = record(p, "one", [100])
    n = p.root.children["one"]
    assert n.p50_ms == n.p95_ms == n.p99_ms == n.min_ms == n.max_ms
    assert n.p50_ms == pytest.approx(ms[0], rel=1e-9)
    ms = record(p, "two", [10, 20000])
    n = p.root.children["two"]
    assert n.p50_ms == pytest.approx(np.percentile(ms, 50), rel=0.01)


def test_percentile_argument_is_checked():
    p = HierarchicalProfiler("R", track_ram=False)
    record(p, "s", [1])
    n = p.root.children["s"]
    with pytest.raises(ValueError, match=r"percentile\(\): q must be in \[0, 100\], got 101"):
        n.percentile(101)
    with pytest.raises(TypeError):
        n.percentile("50")


def test_memory_does_not_grow_with_calls():
    """The histogram holds buckets, not samples: 100x the calls over the same range of
    durations costs no more memory (measured as the process's traced allocations)."""
    import tracemalloc

    p = HierarchicalProfiler("R", track_ram=False, trace_capacity=0)
    loops = [random.Random(1).randint(0, 300) for _ in range(200)]
    record(p, "s", loops)          # buckets for this range now exist
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(100):
            for n in loops:
                with p("s", track_ram=False):
                    for _ in range(n):
                        pass
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert p.root.children["s"].calls == 200 * 101
    assert grown < 32 * 1024, grown   # 20000 more samples, as doubles alone, are 160 KB
