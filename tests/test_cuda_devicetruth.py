"""GPU time by CUDA events, streams, the L2 flush of cache="cold" and the
cold start on a CUDA device, proven against the fake driver.

The fake's events complete when the work queued before them on their stream
does, as a real GPU's do; fake_stream_create() gives a stream with its own
queue (like a non-blocking stream), which cuCtxSynchronize waits for and an
event on another stream does not.
"""
import json
import textwrap

import pytest

from _rounding import released_round
from cuda_support import run_with_fake_cuda  # fixtures come from conftest.py

SETUP = """
import json, warnings
from spatialhub.utils.profiling import benchmark_callable, BenchmarkWarning
f = fake()
f.fake_fail.argtypes = [ctypes.c_char_p, ctypes.c_int]
f.fake_stream_create.restype = ctypes.c_void_p
f.fake_enqueue_stream_ns.argtypes = [ctypes.c_void_p, ctypes.c_longlong]
f.fake_last_memset.restype = ctypes.c_longlong
f.fake_alloc_live_bytes.restype = ctypes.c_longlong
def spin(s):
    end = time.perf_counter() + s
    while time.perf_counter() < end:
        pass
def bench(fn, **kw):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        s = benchmark_callable(fn, device="CUDA", **kw)
    return s, [said(x) for x in w if issubclass(x.category, BenchmarkWarning)]
"""


def run(lib, code, env=None):
    out = run_with_fake_cuda(lib, SETUP + textwrap.dedent(code), env=env)
    return json.loads(out.strip().splitlines()[-1])


def test_gpu_time_follows_the_queued_work(fake_cuda_lib):
    r = run(fake_cuda_lib, """
        make_current(0)
        s, w = bench(lambda: f.fake_enqueue_ns(3_000_000), num_warmup=3, num_iters=20)
        d = s.to_dict()
        print(json.dumps([s.gpu_median_ms, min(s.gpu_samples_ms), max(s.gpu_samples_ms), s.median_ms, s.host_share,
                          len(s.gpu_samples_ms), min(b - a for a, b in zip(s.gpu_samples_ms,
                          s.samples_ms)), d["gpu_median_ms"], "gpu_samples_ms" in d, w,
                          f.fake_live_events()]))
    """)
    med, lo, hi, wall, share, n, wall_minus_gpu, exported, in_dict, warns, live = r
    assert 2.9 <= lo <= med <= 3.6, r
    assert wall >= med and wall_minus_gpu >= -0.01, r   # events sit inside the synced span
    assert share < 0.2, r                               # the host only queued the work
    assert n == 20 and exported == released_round(med) and in_dict
    assert not [m for m in warns if "launch-bound" in m], warns
    assert live == 0, "the two events were not destroyed"


def test_a_launch_bound_call_is_reported(fake_cuda_lib):
    # 40 ms of Python before a 0.05 ms kernel: the GPU has nothing left to
    # do when the call returns.  (Long, so that the fake's wake-up latency on
    # a loaded or sanitized run -- ms -- stays a small part of the wall.)
    r = run(fake_cuda_lib, """
        make_current(0)
        def slow_launch():
            spin(0.040)
            f.fake_enqueue_ns(50_000)
        s, w = bench(slow_launch, num_warmup=1, num_iters=8)
        print(json.dumps([s.host_share, s.host_share * s.median_ms, s.median_ms, w]))
    """)
    share, host, wall, warns = r
    assert share > 0.8 and host >= 40.0 and wall >= host, r
    # a share near 1 reads "nearly all", never "1.0x"; the exact share is an attribute
    assert any("launch-bound: the host's launch took nearly all of the time" in m
               and "host_share=0." in m for m in warns), warns


class _Proto:
    pass


@pytest.mark.parametrize("how", ["int", "protocol", "attribute"])
def test_events_on_the_stream_the_user_names(fake_cuda_lib, how):
    # Work on a stream of its own: events there see it; events on the legacy
    # default stream do not (the documented caveat), the sync always does.
    r = run(fake_cuda_lib, f"""
        make_current(0)
        h = f.fake_stream_create()
        assert h
        class Proto:
            def __cuda_stream__(self):
                return (0, h)
        class Attr:
            cuda_stream = h
        stream = {{"int": h, "protocol": Proto(), "attribute": Attr()}}[{how!r}]
        work = lambda: f.fake_enqueue_stream_ns(h, 3_000_000)
        named, _ = bench(work, num_warmup=2, num_iters=20, stream=stream)
        default, _ = bench(work, num_warmup=2, num_iters=20)
        print(json.dumps([named.gpu_median_ms, named.median_ms,
                          default.gpu_median_ms, default.median_ms]))
    """)
    named_gpu, named_wall, default_gpu, default_wall = r
    assert 2.9 <= named_gpu <= 3.6 and named_wall >= 2.9, r
    assert default_gpu < 1.0 and default_wall >= 2.9, r


def test_bad_stream_arguments(fake_cuda_lib):
    r = run(fake_cuda_lib, """
        from spatialhub.utils.profiling import benchmark_callable as bc
        make_current(0)
        out = []
        for kw in [dict(stream="s", device="CUDA"), dict(stream=True, device="CUDA"),
                   dict(stream=-1, device="CUDA"), dict(stream=1, device="CPU"),
                   dict(stream=type("P", (), {"__cuda_stream__": lambda self: 5})(), device="CUDA")]:
            try:
                bc(lambda: None, num_warmup=0, num_iters=1, **kw)
                out.append("ok")
            except (TypeError, ValueError) as e:
                out.append([type(e).__name__, str(e)])
        print(json.dumps(out))
    """)
    assert r[0][0] == "TypeError" and "stream must be None, an int" in r[0][1]
    assert r[1][0] == "TypeError"
    assert r[2][0] == "ValueError" and "a pointer, not negative" in r[2][1]
    assert r[3][0] == "ValueError" and "needs a CUDA device" in r[3][1]
    assert r[4][0] == "TypeError" and "(version, handle)" in r[4][1]


def test_stream_with_our_own_sync_passed_back_is_native_a_cpu_run_refuses_it(fake_cuda_lib):
    r = run(fake_cuda_lib, """
        from spatialhub.utils.profiling import benchmark_callable as bc, get_cuda_sync_fn
        make_current(0)
        h = f.fake_stream_create()
        s = bc(lambda: f.fake_enqueue_stream_ns(h, 3_000_000), device="CUDA", num_warmup=1,
               num_iters=5, stream=h, sync_fn=get_cuda_sync_fn())
        out = [s.gpu_median_ms]
        try:
            bc(lambda: None, num_warmup=0, num_iters=1, stream=h)      # device="CPU"
        except ValueError as e:
            out.append([str(e), getattr(e, "__notes__", [])])
        print(json.dumps(out))
    """)
    assert 2.9 <= r[0] <= 3.6, r                     # events on the named stream
    assert "needs a CUDA device" in r[1][0] and "functools.partial(func, stream=...)" in r[1][1][0]


def test_event_creation_failing_leaves_wall_time(fake_cuda_lib):
    r = run(fake_cuda_lib, """
        make_current(0)
        f.fake_fail(b"cuEventCreate", 2)
        s, w = bench(lambda: f.fake_enqueue_ns(2_000_000), num_warmup=1, num_iters=5)
        print(json.dumps([s.gpu_median_ms, s.host_share, s.median_ms, w]))
    """)
    gpu, share, wall, warns = r
    assert gpu is None and share is None and wall >= 1.9, r
    assert any("GPU time not measured: gpu_median_ms stays None" in m and "reason=cuEventCreate failed: "
               "CUDA_ERROR_OUT_OF_MEMORY" in m for m in warns), warns


def test_event_record_failing_stops_the_run(fake_cuda_lib):
    r = run(fake_cuda_lib, """
        make_current(0)
        bench(lambda: None, num_warmup=0, num_iters=1)   # overhead measured
        f.fake_fail(b"cuEventRecord", 700)
        try:
            bench(lambda: None, num_warmup=1, num_iters=3)
            out = "no error"
        except RuntimeError as e:
            out = str(e)
        f.fake_fail(b"cuEventRecord", 0)
        print(json.dumps([out, f.fake_live_events()]))
    """)
    msg, live = r
    assert "cuEventRecord failed" in msg and "CUDA_ERROR_ILLEGAL_ADDRESS" in msg, msg
    assert live == 0


def test_cold_cache_flushes_exactly_the_l2_outside_the_timed_region(fake_cuda_lib):
    # 1 GB of L2 at the fake's 1 TB/s: each flush is 1 ms of device work,
    # which must show in neither the wall nor the GPU time of a 0.5 ms call.
    r = run(fake_cuda_lib, """
        make_current(0)
        bench(lambda: None, num_warmup=0, num_iters=1)   # overhead measured
        c0 = count("cuMemsetD8Async")
        s, w = bench(lambda: f.fake_enqueue_ns(500_000), num_warmup=2, num_iters=20, cache="cold")
        print(json.dumps([s.cache, s.median_ms, s.gpu_median_ms, count("cuMemsetD8Async") - c0,
                          f.fake_last_memset(), count("cuMemAlloc_v2"), f.fake_alloc_live_bytes(),
                          s.vram_delta_mb]))
    """, env={"FAKE_CUDA_L2_BYTES": str(10 ** 9), "SPATIALHUB_LLC_BYTES": str(1 << 20)})
    cache, wall, gpu, memsets, last, allocs, live, vram = r
    assert cache == "cold"
    assert memsets == 2 + 20 and last == 10 ** 9 and allocs == 1, r
    assert 0.45 <= wall < 0.95 and 0.45 <= gpu < 0.95, r
    assert live == 0, "the flush buffer was not freed"
    assert vram == 0.0, "the flush buffer counted as the callable's VRAM"


def test_cold_cache_allocation_failure_is_an_error(fake_cuda_lib):
    r = run(fake_cuda_lib, """
        make_current(0)
        f.fake_fail(b"cuMemAlloc_v2", 2)
        try:
            bench(lambda: None, num_warmup=0, num_iters=2, cache="cold")
            out = "no error"
        except RuntimeError as e:
            out = str(e)
        print(json.dumps([out, f.fake_live_events()]))
    """)
    assert "cache='cold' cannot flush the L2 of CUDA device 0" in r[0], r
    assert "CUDA_ERROR_OUT_OF_MEMORY" in r[0] and r[1] == 0, r


def test_the_l2_flush_releases_the_gil(fake_cuda_lib):
    # Each flush of a 2 GB "L2" is 2 ms of device work the harness waits for;
    # a spinning thread must keep running meanwhile.
    r = run(fake_cuda_lib, """
        make_current(0)
        with GilProbe() as probe:
            a = time.perf_counter()
            bench(lambda: None, num_warmup=0, num_iters=40, cache="cold")
            b = time.perf_counter()
        print(json.dumps([probe.inside(a, b), b - a]))
    """, env={"FAKE_CUDA_L2_BYTES": str(2 * 10 ** 9), "SPATIALHUB_LLC_BYTES": str(1 << 20)})
    inside, took = r
    assert took >= 0.08, r
    assert inside >= 30, r


def test_first_call_is_synced_and_its_own(fake_cuda_lib):
    # 50 ms queued before the benchmark must not count; the first call's own
    # 20 ms of device work must.
    r = run(fake_cuda_lib, """
        make_current(0)
        bench(lambda: None, num_warmup=0, num_iters=1)   # overhead measured
        calls = [0]
        def model():
            calls[0] += 1
            f.fake_enqueue_ns(20_000_000 if calls[0] == 1 else 1_000_000)
        f.fake_enqueue_ns(50_000_000)
        s, w = bench(model, num_warmup=3, num_iters=5)
        print(json.dumps([s.first_call_ms, s.warmup_ms, s.median_ms]))
    """)
    first, warm, med = r
    assert 19.5 <= first < 45, r
    assert len(warm) == 3 and warm[0] == first and all(0.9 <= x < 10 for x in warm[1:]), r
    assert 0.9 <= med < 10, r
