"""Cold start, warm-up and cache state on the CPU (the CUDA side is in
test_cuda.py, against the fake driver).

A user expects: the first call's latency reported (the cost a serverless or
edge deployment pays), every warm-up call kept, a warning when the warm-up
was too short for the timed calls to have settled -- with the number of calls
it took -- and cache="cold" evicting the last-level cache outside the timed
region.
"""
import json
import os
import pickle
import subprocess
import sys
import textwrap
import time
import warnings

import pytest

import spatialhub.utils.profiling as prof
from _rounding import released_round


def spin(seconds):
    """Busy-wait: a sleep's wake-up latency varies too much on a loaded box."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_first_call_and_warmup_samples_are_kept():
    calls = [0]

    def model():
        calls[0] += 1
        spin(0.030 if calls[0] == 1 else 0.001)   # the first call compiles / loads

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = prof.benchmark_callable(model, num_warmup=4, num_iters=5)
    assert s.first_call_ms >= 30.0
    assert isinstance(s.warmup_ms, tuple) and len(s.warmup_ms) == 4
    assert s.warmup_ms[0] == s.first_call_ms
    assert all(1.0 <= w < 25.0 for w in s.warmup_ms[1:]), s.warmup_ms
    assert s.median_ms < 25.0
    assert s.cache == "warm"
    # exported, and back
    d = s.to_dict()
    assert d["first_call_ms"] == released_round(s.first_call_ms)
    assert d["warmup_ms"] == list(s.warmup_ms)   # raw samples, unrounded like samples_ms
    assert d["cache"] == "warm"
    assert json.loads(s.to_json())["warmup_ms"] == d["warmup_ms"]
    assert prof.BenchmarkStats.from_dict(d).warmup_ms == tuple(d["warmup_ms"])
    assert pickle.loads(pickle.dumps(s)) == s
    assert "first_call_ms=" in repr(s) and "warmup_ms" not in repr(s)


def test_without_warmup_the_first_timed_call_is_the_first_call():
    s = prof.benchmark_callable(spin, 0.0002, num_warmup=0, num_iters=5)
    assert s.warmup_ms is None
    assert s.first_call_ms == s.samples_ms[0]


def test_warmup_list_is_a_private_copy():
    src = [1.0, 2.0]
    s = prof.BenchmarkStats(name="m", device="CPU", mean_ms=1, median_ms=1, std_ms=0, p95_ms=1,
                            min_ms=1, max_ms=1, fps=1, warmup_iters=2, timed_iters=1,
                            warmup_ms=src)
    src.append(3.0)
    assert s.warmup_ms == (1.0, 2.0)
    with pytest.raises(TypeError, match="warmup_ms"):
        s.warmup_ms = ["x"]
    assert s.warmup_ms == (1.0, 2.0)


def decaying(start_ms, step_ms, floor_ms):
    """A callable that gets faster on every call until it reaches floor_ms."""
    calls = [0]

    def fn():
        calls[0] += 1
        spin(max(floor_ms, start_ms - step_ms * calls[0]) / 1e3)
    return fn


def test_a_too_short_warmup_is_reported_with_the_calls_it_took():
    # 12 ms, 11 ms, ... down to 1 ms from the 11th call on: the timed calls
    # after 2 warm-up calls are still falling.
    with pytest.warns(prof.WarmupWarning, match=r"warm-up too short: first calls") as rec:
        s = prof.benchmark_callable(decaying(13, 1, 1), num_warmup=2, num_iters=40)
    assert 8 <= s.settle_calls <= 14, s.settle_calls
    w = next(r.message for r in rec if isinstance(r.message, prof.WarmupWarning))
    # the remedy names the argument of the function called, with the calls it took
    # (counted from the first call); the exact numbers are attributes
    assert f"set num_warmup to {s.settle_calls} or more" in str(w)
    assert w.settle_calls == s.settle_calls and w.head_ms > w.steady_ms


def test_a_long_enough_warmup_is_quiet():
    # only the warm-up warning is judged: on a loaded machine the run may rightly warn
    # that the machine was busy or the samples noisy
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", prof.BenchmarkWarning)
        s = prof.benchmark_callable(decaying(13, 1, 1), num_warmup=20, num_iters=30)
    assert not [w for w in seen if issubclass(w.category, prof.WarmupWarning)], \
        [str(w.message) for w in seen]
    assert s.settle_calls <= 20


def test_settling_needs_enough_timed_calls():
    s = prof.benchmark_callable(decaying(13, 1, 1), num_warmup=1, num_iters=19)
    assert s.settle_calls is None


# ---- cache="cold" -----------------------------------------------------------


@pytest.mark.parametrize("bad, exc", [("hot", ValueError), ("", ValueError), (1, TypeError),
                                      (None, TypeError), (b"cold", TypeError)])
def test_cache_must_be_warm_or_cold(bad, exc):
    with pytest.raises(exc, match=r"benchmark_callable\(\): cache must be (str|.warm. or .cold.)"):
        prof.benchmark_callable(lambda: None, num_warmup=0, num_iters=1, cache=bad)


def run_child(code, env):
    full = dict(os.environ, **env)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=full, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_cold_cache_evicts_outside_the_timed_region():
    # A 64 MiB "LLC": every call is preceded by a pass over a 128 MiB buffer
    # (tens of ms here); none of it may appear in the samples, nor in the RAM
    # figure (the buffer is resident before the baseline).
    r = run_child("""
        import json, time, warnings
        import spatialhub.utils.profiling as prof
        warnings.simplefilter("ignore")
        prof.benchmark_callable(lambda: None, num_warmup=0, num_iters=1)  # overhead measured
        t = time.perf_counter()
        s = prof.benchmark_callable(lambda: None, num_warmup=2, num_iters=20, cache="cold")
        wall = time.perf_counter() - t
        w = prof.benchmark_callable(lambda: None, num_warmup=2, num_iters=20)
        print(json.dumps([s.cache, s.median_ms, max(s.samples_ms), s.ram_delta_mb, wall,
                          w.cache, prof._native._llc_bytes()]))
    """, {"SPATIALHUB_LLC_BYTES": str(64 << 20)})
    cache, median, worst, ram, extra_wall, warm_cache, llc = r
    assert cache == "cold" and warm_cache == "warm"
    assert llc == [64 << 20, "SPATIALHUB_LLC_BYTES"]
    assert median < 0.5 and worst < 20, r
    # 22 passes, each 4 Mi line accesses over 128 MiB: well over 1 ms a pass
    assert extra_wall > 22 * 0.001, r
    assert ram < 16, r


def test_llc_size_comes_from_the_machine():
    size, source = prof._native._llc_bytes()
    assert size >= 256 << 10
    assert source in ("SPATIALHUB_LLC_BYTES", "sysfs", "sysconf", "sysctl",
                      "GetLogicalProcessorInformation", "assumed")
    if sys.platform.startswith("linux") and not os.environ.get("SPATIALHUB_LLC_BYTES") \
            and os.path.exists("/sys/devices/system/cpu/cpu0/cache/index0/size"):
        assert source == "sysfs"


def test_float_tuples_compare_nan_equal_like_the_other_fields():
    kw = dict(name="m", device="CPU", mean_ms=1, median_ms=1, std_ms=0, p95_ms=1, min_ms=1,
              max_ms=1, fps=1, warmup_iters=2, timed_iters=1)
    a = prof.BenchmarkStats(**kw, warmup_ms=[float("nan"), 2.0])
    assert pickle.loads(pickle.dumps(a)) == a
    assert a != prof.BenchmarkStats(**kw, warmup_ms=[float("nan"), 2.5])
    assert a != prof.BenchmarkStats(**kw, warmup_ms=[float("nan")])
    assert a != prof.BenchmarkStats(**kw)
