"""benchmark_callable follows the timing protocol of docs/design.md to the letter."""
import gc
import statistics
import sys
import time
import types
import warnings

import numpy as np
import pytest

import spatialhub.utils.profiling as prof
from spatialhub.utils.profiling import (BenchmarkInterrupted, BenchmarkWarning,
                                        benchmark_callable)
from spatialhub.utils.profiling import _native
from reliability_support import UNDER_SANITIZER

# Calls for the reference-leak loops: 20 show a leak of one reference per call as a count
# 20 off.  Each call's full collection walks the whole heap: ~80 ms a call where torch is
# loaded (CI's 3.11 suite), seconds under ASan with every object malloc'd; at 200 calls
# the two loops took 7.5 minutes of CI's 3.11 lane.
LEAK_LOOP_CALLS = 20

pytestmark = pytest.mark.filterwarnings("ignore::spatialhub.utils.profiling.BenchmarkWarning")


class Counter:
    def __init__(self, log=None, tag=None):
        self.n = 0
        self.log = log
        self.tag = tag

    def __call__(self, *a, **k):
        self.n += 1
        if self.log is not None:
            self.log.append(self.tag)


def test_seed_example_runs_and_fills_every_field():
    def process_pipeline(image_tensor, threshold=0.5):
        filtered = np.clip(image_tensor * 1.5, 0.0, 1.0)
        return filtered > threshold

    x = np.random.rand(1, 3, 480, 640).astype(np.float32)
    s = benchmark_callable(process_pipeline, x, threshold=0.6, name="ImagePreprocessor",
                           num_warmup=5, num_iters=50, track_ram=True, track_vram=True)
    assert (s.name, s.device, s.warmup_iters, s.timed_iters) == ("ImagePreprocessor", "CPU", 5, 50)
    assert 0 < s.min_ms <= s.median_ms <= s.p95_ms <= s.max_ms
    assert s.fps == pytest.approx(1000.0 / s.mean_ms)
    assert s.samples_ms.shape == (50,)
    assert s.ram_peak_method == "hwm" if sys.platform.startswith("linux") else True


def test_statistics_are_those_of_the_returned_samples():
    s = benchmark_callable(sum, range(2000), num_iters=101)
    x = s.samples_ms
    assert s.mean_ms == pytest.approx(statistics.fmean(x), rel=1e-12)
    assert s.std_ms == pytest.approx(statistics.stdev(x), rel=1e-9)
    for q, got in ((50, s.median_ms), (90, s.p90_ms), (95, s.p95_ms), (99, s.p99_ms)):
        assert np.percentile(x, q) == got
    assert s.min_ms == x.min() and s.max_ms == x.max()


def test_sleep_of_2ms_lands_in_a_sane_window():
    s = benchmark_callable(time.sleep, 0.002, num_warmup=2, num_iters=20)
    assert 1.95 <= s.median_ms <= 30.0
    assert s.min_ms >= 1.95   # never less than the work itself


def test_call_counts_of_func_and_sync_fn():
    func, sync = Counter(), Counter()
    benchmark_callable(func, num_warmup=7, num_iters=13, sync_fn=sync)
    assert func.n == 7 + 13
    # the released module's own test counts exactly num_warmup + 2 * num_iters
    assert sync.n == 7 + 2 * 13


def test_sync_brackets_every_timed_call():
    log = []
    benchmark_callable(Counter(log, "f"), num_warmup=2, num_iters=3, sync_fn=Counter(log, "s"))
    # warm-up: call, sync; timed: sync, call, sync -- the user's hook is never called
    # an extra time (only the native CUDA sync drains once before the first call)
    assert "".join(log) == "fs" * 2 + "sfs" * 3


class _Result:
    """A result that logs when it is freed."""

    def __init__(self, log):
        self.log = log

    def __del__(self):
        self.log.append("d")


def test_each_result_is_released_before_the_closing_sync():
    # as `func(*args)` as a statement releases it: freeing the output is part of the
    # call's cost (seed, timeit, pyperf, pytest-benchmark, the released module)
    log = []

    def f():
        log.append("f")
        return _Result(log)

    benchmark_callable(f, num_warmup=2, num_iters=3, sync_fn=lambda: log.append("s"))
    assert "".join(log) == "fds" * 2 + "sfds" * 3


def test_args_and_kwargs_are_passed_through_unchanged():
    seen = []

    def f(a, b, *rest, key=None, **extra):
        seen.append((a, b, rest, key, extra))

    marker = object()
    benchmark_callable(f, 1, marker, 3, key="k", other=marker, num_warmup=1, num_iters=2)
    assert seen == [(1, marker, (3,), "k", {"other": marker})] * 3


def test_func_may_be_given_by_keyword():
    c = Counter()
    benchmark_callable(func=c, num_warmup=0, num_iters=4)
    assert c.n == 4


def test_kwargs_dict_is_not_shared_between_calls():
    def f(**kw):
        kw["x"] = kw.get("x", 0) + 1
        return kw["x"]

    benchmark_callable(f, x=1, num_warmup=3, num_iters=3)


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"func": 3}, TypeError, "func must be callable"),
    ({"name": 3}, TypeError, "name must be str"),
    ({"device": None}, TypeError, "device must be str"),
    # the released module's message, verbatim: users' tests match on it
    ({"num_iters": 0}, ValueError, "^num_iters must be a positive integer, got 0$"),
    ({"num_iters": -3}, ValueError, "^num_iters must be a positive integer, got -3$"),
    ({"num_iters": -5}, ValueError, "got -5"),
    ({"num_warmup": -1}, ValueError, "num_warmup must be >= 0, got -1"),
    ({"num_iters": 2.5}, TypeError, "num_iters must be an int"),
    ({"num_iters": True}, TypeError, "num_iters must be an int"),
    ({"num_warmup": "3"}, TypeError, "num_warmup must be an int"),
    ({"sync_fn": 5}, TypeError, "sync_fn must be callable"),
    ({"target_rel_ci": 0.0}, ValueError, "target_rel_ci"),
    ({"target_rel_ci": 1.5}, ValueError, "target_rel_ci"),
    ({"target_rel_ci": float("nan")}, ValueError, "target_rel_ci"),
    ({"max_time_s": -1}, ValueError, "max_time_s"),
    ({"max_time_s": "1"}, TypeError, "max_time_s"),
    ({"device": "cuda:x"}, ValueError, "cuda:x"),
    ({"num_iters": 10**30}, MemoryError, "num_iters"),
])
def test_bad_input_raises_before_anything_is_called(kwargs, exc, match):
    c = Counter()
    func = kwargs.pop("func", c)
    with pytest.raises(exc, match=match):
        benchmark_callable(func, **kwargs)
    assert c.n == 0


def test_missing_func():
    with pytest.raises(TypeError, match="missing required argument 'func'"):
        benchmark_callable()


class Boom(Exception):
    pass


@pytest.mark.parametrize("fail_at, phase, iteration", [(2, "warm-up", 3), (10 + 4, "timed", 5)])
def test_func_exception_propagates_as_the_same_object_with_a_note(fail_at, phase, iteration):
    err = Boom("x")
    calls = []

    def f():
        calls.append(1)
        if len(calls) == fail_at + 1:
            raise err

    with pytest.raises(Boom) as info:
        benchmark_callable(f, name="net", num_warmup=10, num_iters=20)
    assert info.value is err
    assert any(f"{phase} iteration {iteration}" in n and "'net'" in n for n in err.__notes__)


def test_sync_fn_exception_propagates():
    err = Boom("sync")

    def sync():
        raise err

    with pytest.raises(Boom) as info:
        benchmark_callable(lambda: None, num_warmup=0, num_iters=3, sync_fn=sync)
    assert info.value is err and "sync_fn" in err.__notes__[0]


def test_sync_fn_returning_an_error_code_is_an_error():
    with pytest.raises(RuntimeError, match="returned 700"):
        benchmark_callable(lambda: None, num_iters=3, sync_fn=lambda: 700)
    benchmark_callable(lambda: None, num_iters=3, sync_fn=lambda: 0)
    benchmark_callable(lambda: None, num_iters=3, sync_fn=lambda: "ignored")


def test_no_reference_leaks_on_func_args_and_results():
    arg = object()
    result = object()

    def f(a):
        return result

    before = (sys.getrefcount(f), sys.getrefcount(arg), sys.getrefcount(result))
    for _ in range(LEAK_LOOP_CALLS):
        benchmark_callable(f, arg, num_warmup=2, num_iters=20, track_ram=False)
    assert (sys.getrefcount(f), sys.getrefcount(arg), sys.getrefcount(result)) == before


def test_no_leak_on_error_paths():
    arg = object()
    err = Boom()

    def f(a):
        raise err

    before = sys.getrefcount(arg)
    for _ in range(LEAK_LOOP_CALLS):
        with pytest.raises(Boom):
            benchmark_callable(f, arg)
    err.__notes__.clear()
    err.__traceback__ = None   # re-raising one object chains its old frames (Python's doing)
    assert sys.getrefcount(arg) == before


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM reset is Linux-only")
def test_peak_ram_sees_a_freed_200mb_temporary():
    def f():
        a = np.ones(200 * 2**20 // 8)  # 200 MiB, touched, freed before returning
        del a

    s = benchmark_callable(f, num_warmup=1, num_iters=3)
    assert s.ram_peak_method == "hwm"
    assert 190 <= s.ram_delta_mb <= 260


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM reset is Linux-only")
@pytest.mark.skipif(UNDER_SANITIZER, reason="ASan's quarantine keeps freed memory resident")
def test_caller_garbage_freed_by_the_harness_does_not_hide_the_peak():
    """The harness's full collection runs before the RAM baseline: 100 MiB of the caller's
    cyclic garbage freed inside the window would lower the RSS the peak is measured from,
    and a callable's 100 MiB temporary would read 0.0 MB."""
    import gc

    class Cycle:
        pass

    def f():
        a = np.ones(100 * 2**20 // 8)
        del a

    enabled = gc.isenabled()
    gc.disable()
    try:
        c = Cycle()
        c.me, c.payload = c, np.ones(100 * 2**20 // 8)   # 100 MiB, unreachable below
        del c
        s = benchmark_callable(f, num_warmup=0, num_iters=3)
    finally:
        if enabled:
            gc.enable()
    assert s.ram_peak_method == "hwm"
    assert 90 <= s.ram_delta_mb <= 160


def test_sampled_fallback_is_labelled_and_still_sees_held_memory():
    old = _native._force_sampled_rss(True)
    try:
        keep = []
        s = benchmark_callable(lambda: keep.append(np.ones(2**20)), num_warmup=0, num_iters=40)
    finally:
        _native._force_sampled_rss(old)
    assert s.ram_peak_method == "sampled"
    assert 25 <= s.ram_delta_mb <= 400  # 40 x 8 MiB retained


def test_track_ram_off():
    s = benchmark_callable(lambda: None, track_ram=False)
    assert s.ram_peak_method == "off" and s.ram_delta_mb == 0.0


def test_get_ram_mb_is_the_rss_in_mib():
    before = prof.get_ram_mb()
    a = np.ones(64 * 2**20 // 8)
    after = prof.get_ram_mb()
    assert 60 <= after - before <= 70
    del a
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    import os
    assert prof.get_ram_mb() == pytest.approx(pages * os.sysconf("SC_PAGE_SIZE") / 2**20, abs=4)


def test_cuda_device_without_driver_refuses_to_time_dispatch(monkeypatch):
    # Without a driver (the fake is not loaded in this process) CUDA needs a sync_fn.
    if prof.get_cuda_sync_fn() is not None:
        pytest.skip("a CUDA driver is present")
    with pytest.raises(RuntimeError, match="sync_fn"):
        benchmark_callable(lambda: None, device="CUDA")
    with pytest.warns(prof.VRAMNotTrackedWarning, match="VRAM not tracked: vram_delta_mb stays 0.0") as rec:
        s = benchmark_callable(lambda: None, device="cuda", sync_fn=lambda: None)
    assert s.vram_delta_mb == 0.0
    w = next(r.message for r in rec if isinstance(r.message, prof.VRAMNotTrackedWarning))
    assert w.reason and w.stats is s and "VRAM not tracked" in w.causes


def test_mps_without_torch_needs_a_sync(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    with pytest.raises(RuntimeError, match="mps"):
        benchmark_callable(lambda: None, device="mps")
    benchmark_callable(lambda: None, device="mps", sync_fn=lambda: None, num_iters=2)


def test_mps_uses_torch_mps_synchronize_when_torch_is_imported(monkeypatch):
    import types
    calls = []
    fake = types.ModuleType("torch")
    fake.mps = types.SimpleNamespace(synchronize=lambda: calls.append(1))
    fake.__version__ = "0.fake"
    monkeypatch.setitem(sys.modules, "torch", fake)
    s = benchmark_callable(lambda: None, device="mps", num_warmup=2, num_iters=3)
    assert len(calls) == 2 + 2 * 3   # only the native CUDA sync drains first
    assert s.env["torch"] == "0.fake"


def test_env_metadata():
    s = benchmark_callable(lambda: None, num_iters=2)
    for key in ("python", "implementation", "platform", "cpu", "cpu_count", "numpy", "timer",
                "timer_resolution_ns"):
        assert key in s.env, key
    assert s.env["numpy"] == np.__version__
    assert s.env["python"] == "%d.%d.%d" % sys.version_info[:3]
    if "torch" not in sys.modules:
        assert "torch" not in s.env and "torch" not in sys.modules  # never imported by us


def test_overhead_is_measured_once_and_small():
    s1 = benchmark_callable(lambda: None, num_iters=5)
    s2 = benchmark_callable(lambda: None, num_iters=5)
    assert s1.overhead_ms == s2.overhead_ms == _native._overhead_ms()
    assert 0 < s1.overhead_ms < 0.05


def test_overhead_warning_for_tiny_workloads():
    with pytest.warns(BenchmarkWarning, match="overhead"):
        benchmark_callable(int, num_iters=20)


def test_gc_collect_before_timed_loop_and_disable_gc(gc_state):
    states = []
    benchmark_callable(lambda: states.append(gc.isenabled()), num_warmup=2, num_iters=3,
                       disable_gc=True)
    assert states == [True, True, False, False, False] and gc.isenabled()
    gc.disable()
    benchmark_callable(lambda: None, num_iters=3, disable_gc=True)
    assert not gc.isenabled()   # restored to what it was, not forced on


@pytest.mark.parametrize("setup", ["user disabled gc", "another run holds disable_gc", "gc on"])
def test_the_heap_is_collected_before_the_timed_loop_even_with_the_collector_off(gc_state, setup):
    # PyGC_Collect() is a no-op while the collector is off; the clean heap is
    # promised in every mode, so garbage owed by the set-up must be gone when
    # the first timed call runs.
    import weakref

    switch_during_collection = []

    class Node:
        def __del__(self):
            # finalizers run inside the collection (and may hand the GIL to
            # another thread): the switch must read as the user left it
            switch_during_collection.append(gc.isenabled())

    def make_garbage():
        a, b = Node(), Node()
        a.other, b.other = b, a   # a cycle: only the collector frees it
        return weakref.ref(a)

    seen = []

    def run():
        ref = make_garbage()
        benchmark_callable(lambda: seen.append(ref() is None), num_warmup=0, num_iters=2)

    if setup == "user disabled gc":
        gc.disable()
        run()
        assert not gc.isenabled()   # and the switch is left as it was
        assert switch_during_collection == [False, False]
    elif setup == "another run holds disable_gc":
        benchmark_callable(run, num_warmup=0, num_iters=1, disable_gc=True)
    else:
        run()
    assert seen and all(seen), seen


def test_disable_gc_is_restored_when_func_raises(gc_state):
    def f():
        raise Boom()

    with pytest.raises(Boom):
        benchmark_callable(f, num_warmup=0, disable_gc=True)
    assert gc.isenabled()


def test_keyboard_interrupt_keeps_completed_iterations():
    n = [0]

    def f():
        n[0] += 1
        if n[0] == 5 + 8:
            raise KeyboardInterrupt

    with pytest.raises(BenchmarkInterrupted) as info:
        benchmark_callable(f, num_warmup=5, num_iters=100)
    s = info.value.stats
    assert isinstance(info.value, KeyboardInterrupt)
    assert s.timed_iters == 7 and s.samples_ms.shape == (7,)
    assert isinstance(info.value.__context__, KeyboardInterrupt)


def test_keyboard_interrupt_in_warmup_propagates_plainly():
    def f():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as info:
        benchmark_callable(f)
    assert not isinstance(info.value, BenchmarkInterrupted)


def busy(ms):
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass


def test_adaptive_stops_early_on_a_steady_callable():
    s = benchmark_callable(busy, 0.2, num_warmup=3, num_iters=20, target_rel_ci=0.05,
                           max_time_s=20)
    assert s.target_met is True
    assert s.timed_iters >= 20
    assert (s.ci95_high_ms - s.ci95_low_ms) / 2 <= 0.05 * s.median_ms


def test_adaptive_gives_up_at_max_time_on_a_noisy_callable():
    rng = np.random.default_rng(0)

    def noisy():  # continuous noise: a bimodal one can park the median inside a mode
        busy(rng.uniform(0.05, 1.0))

    t = time.perf_counter()
    s = benchmark_callable(noisy, num_warmup=0, num_iters=10, target_rel_ci=0.001,
                           max_time_s=0.5)
    wall = time.perf_counter() - t
    assert s.target_met is False
    assert 0.45 <= wall <= 5.0
    assert s.timed_iters > 10


def test_plain_time_cap_keeps_what_was_measured():
    s = benchmark_callable(busy, 1.0, num_warmup=0, num_iters=10**6, max_time_s=0.2)
    assert 10 <= s.timed_iters < 10**6 and s.target_met is None


def test_non_adaptive_target_met_is_none():
    assert benchmark_callable(lambda: None, num_iters=2).target_met is None


def test_progress_is_drawn_to_stderr_when_asked(capsys):
    benchmark_callable(busy, 60, num_warmup=0, num_iters=10, progress=True)
    err = capsys.readouterr().err
    assert "10/10" in err and "elapsed" in err and err.endswith("\n")
    benchmark_callable(busy, 1, num_warmup=0, num_iters=10, progress=False)
    assert capsys.readouterr().err == ""


def test_an_exception_after_the_progress_line_propagates_unchanged(capsys):
    # The closing progress line is drawn while func's exception is pending;
    # it must neither swallow it (SystemError: NULL without an exception)
    # nor replace it.
    class Boom(Exception):
        pass

    n = {"k": 0}

    def work():
        n["k"] += 1
        if n["k"] == 4:
            raise Boom("the fourth call")

    with pytest.raises(Boom, match="the fourth call") as ei:
        benchmark_callable(work, num_warmup=0, num_iters=10, progress=True)
    assert type(ei.value) is Boom
    err = capsys.readouterr().err
    assert "3/10" in err and err.endswith("\n")


class _FakeKernelStream:
    """What a Jupyter kernel puts in sys.stderr: no tty, but someone sees it."""

    def __init__(self):
        self.chunks = []

    def write(self, text):
        self.chunks.append(text)
        return len(text)

    def flush(self):
        pass

    def isatty(self):
        return False


def test_ctrl_c_inside_a_python_stderr_write_stops_the_run(monkeypatch):
    # A notebook's stderr is Python code: a Ctrl-C can land inside the
    # progress line's write().  It must stop the run like any other Ctrl-C,
    # not be swallowed with the stream's other errors.
    class InterruptedStream(_FakeKernelStream):
        def write(self, text):
            if len(self.chunks) == 2:
                raise KeyboardInterrupt
            return super().write(text)

    monkeypatch.setattr(sys, "stderr", InterruptedStream())
    with pytest.raises(BenchmarkInterrupted) as info:
        benchmark_callable(time.sleep, 0.11, num_warmup=0, num_iters=30, progress=True)
    assert 2 <= info.value.stats.timed_iters < 30
    time.sleep(0.01)   # and it is not armed twice: no second Ctrl-C fires after the run
    sum(range(10000))


def _auto_progress_output(monkeypatch, stream):
    monkeypatch.setattr(sys, "stderr", stream)
    # 40 x 60 ms: projected at 2.4 s when auto mode decides (after 0.5 s)
    benchmark_callable(time.sleep, 0.06, num_warmup=0, num_iters=40)
    return "".join(stream.chunks)


def test_auto_progress_is_off_when_ipykernel_is_merely_imported(monkeypatch):
    # A test suite (or a library) importing ipykernel does not make stderr visible.
    monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))
    assert _auto_progress_output(monkeypatch, _FakeKernelStream()) == ""


@pytest.mark.parametrize("derived", [False, True])
def test_auto_progress_is_on_in_a_kernel(monkeypatch, derived):
    kernel_stream = type("OutStream", (_FakeKernelStream,), {"__module__": "ipykernel.iostream"})
    if derived:   # a wrapper some tool derives from the kernel's stream
        kernel_stream = type("TeeStream", (kernel_stream,), {"__module__": "sometool.io"})
    out = _auto_progress_output(monkeypatch, kernel_stream())
    assert "40/40" in out and out.endswith("\n")


def test_reentrant_benchmark_inside_func():
    inner = []

    def outer():
        inner.append(benchmark_callable(lambda: None, num_warmup=0, num_iters=3))

    s = benchmark_callable(outer, num_warmup=1, num_iters=2)
    assert s.timed_iters == 2 and len(inner) == 3
    assert all(i.timed_iters == 3 for i in inner)
