"""Host memory per scope.  By default a scope reads RSS at enter and at exit (the released
scope's end-minus-start, never negative) and leaves the process's peak-RSS record alone: a
scope goes around per-frame code.  With track_memory="peak" (track_ram="peak" on a profiler)
it opens the high-water-mark window benchmark_callable uses: a temporary freed before the
scope ends is still seen; nested scopes and a benchmark running inside a scope each get their
own exact peak.  CUDA scopes use the native, checked sync."""
import os
import sys

import numpy as np
import pytest
from reliability_support import UNDER_SANITIZER, UNDER_VALGRIND

from spatialhub.utils.profiling import _native
from spatialhub.utils.profiling import (
    HierarchicalProfiler, Timer, benchmark_callable, get_cuda_sync_fn, timeit,
)

MB = 1 << 20


def temporary(mb):
    """Touch `mb` MiB and free it before returning."""
    a = np.ones(mb * MB // 8)
    s = float(a[::4096].sum())
    del a
    return s


def proc_number(path, field):
    """The number after `field:` in one of this process's /proc files."""
    with open(path) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in {path}")


def vm_hwm_kib():
    """The kernel's peak-RSS record of this process (what time -v and wait4 read)."""
    return proc_number("/proc/self/status", "VmHWM")


@pytest.fixture(scope="module")
def hwm():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = benchmark_callable(temporary, 1, num_warmup=0, num_iters=1)
    if s.ram_peak_method != "hwm":
        pytest.skip("the kernel's high-water-mark reset is unavailable here")


# ---- the default: RSS at enter and at exit -------------------------------------------

def test_default_scope_reports_memory_it_keeps():
    kept = []
    p = HierarchicalProfiler("R")
    with p("keep") as t:
        kept.append(np.ones(80 * MB // 8))      # 80 MiB resident after the block
    assert t.track_memory is True
    assert 70 <= t.ram_delta_mb <= 90
    assert p.root.children["keep"].peak_ram_delta_mb == t.ram_delta_mb


@pytest.mark.skipif(UNDER_SANITIZER, reason="ASan's quarantine keeps freed memory resident, "
                    "so RSS does not fall when the block frees")
def test_default_scope_is_end_minus_start_never_negative():
    big = np.ones(80 * MB // 8)
    with Timer("free", track_memory=True) as t:
        del big                                  # RSS falls during the block
    assert t.ram_delta_mb == 0.0
    with Timer("temp") as t:
        temporary(80)                            # freed before the end: not a peak here
    assert t.ram_delta_mb < 40


def read_syscalls():
    """This thread's read system calls so far (a pread of statm is one)."""
    return proc_number("/proc/thread-self/io", "syscr")


needs_io = pytest.mark.skipif(not os.path.exists("/proc/thread-self/io"),
                              reason="/proc/thread-self/io is Linux's (3.17+)")


@needs_io
def test_an_enter_shares_a_read_of_at_most_a_microsecond_ago_and_an_exit_never():
    """An enter takes the last enter's or exit's read when it returned at most 1 us
    before, and reads afresh otherwise (later than that, or a clock that went back); an
    exit always reads afresh, so a block's own work is always inside its window."""
    def enter(now_ns):
        return _native._rss_at_scope(now_ns)

    def leave():
        return _native._rss_at_scope(None)

    rss, read_ns = enter(_native._clock_ns() + 10**9)      # a fresh read, stamped now
    before = read_syscalls()
    io_reads = read_syscalls() - before                   # reading /proc/.../io itself
    before = read_syscalls()
    for age in (0, 1, 500, 999, 1000):
        assert enter(read_ns + age) == (rss, read_ns)
    assert read_syscalls() - before == io_reads           # none of the five read RSS
    before = read_syscalls()
    fresh = [enter(read_ns + 1001), enter(read_ns - 1)]
    assert read_syscalls() - before == io_reads + 2       # each read afresh
    assert all(r > 0 and n > read_ns for r, n in fresh)
    before = read_syscalls()
    exits = [leave(), leave(), leave()]                   # back to back: each reads
    assert read_syscalls() - before == io_reads + 3
    assert exits[0][1] < exits[1][1] < exits[2][1]
    before = read_syscalls()
    assert enter(exits[2][1] + 500) == exits[2]           # the next frame's enter
    assert read_syscalls() - before == io_reads


@needs_io
@pytest.mark.skipif(UNDER_SANITIZER or UNDER_VALGRIND,
                    reason="instrumented code runs the loop >1 us from exit to enter")
def test_a_loop_of_default_scopes_reads_rss_about_once_a_scope():
    """In a per-frame loop each exit reads and the next enter takes that read: about one
    read a scope, not two; a scope with memory off reads none."""
    import time
    import tracemalloc
    if tracemalloc.is_tracing():
        pytest.skip("tracemalloc traces every allocation: exit to enter takes over 1 us")
    n = 2000
    # The exit-to-enter gap is about 60% of a memory-off scope (500 of 820 ns on our Intel
    # VM); where a scope takes over 1.2 us even at its fastest (a slower machine), the gap
    # passes the microsecond and enters read afresh: nothing to test there.
    # (the median of single scopes: a loaded machine preempts a few, not the typical one)
    took = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        with Timer("t", track_memory=False):
            pass
        took.append(time.perf_counter_ns() - t0)
    typical = sorted(took)[n // 2]
    if typical > 1300:
        pytest.skip(f"a memory-off scope takes {typical} ns here: an enter comes over 1 us "
                    "after the exit before it")
    p = HierarchicalProfiler("R")
    for make in (lambda: Timer("t"), lambda: p("s"), lambda: p.scope("s")):
        before = read_syscalls()
        for _ in range(n):
            with make():
                pass
        reads = read_syscalls() - before
        assert n <= reads <= 1.5 * n, reads               # without sharing: 2n
    before = read_syscalls()
    for _ in range(n):
        with Timer("t", track_memory=False):
            pass
    assert read_syscalls() - before <= 2


def test_a_shared_read_never_hides_what_a_block_keeps():
    """Back to back and nested: what a block allocates is seen by it and its parents,
    and what runs between two scopes (for longer than a microsecond) is in neither."""
    kept = []
    p = HierarchicalProfiler("R")
    for _ in range(3):
        with p("outer") as outer:
            with p("inner") as inner:
                kept.append(np.ones(40 * MB // 8))    # 40 MiB resident after the block
        assert 35 <= inner.ram_delta_mb <= 45
        assert 35 <= outer.ram_delta_mb <= 45
    with Timer("before"):
        pass
    kept.append(np.ones(40 * MB // 8))                # between two scopes
    with Timer("after") as after:
        pass
    assert after.ram_delta_mb < 1.0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM is Linux's")
@pytest.mark.parametrize("make", [
    lambda p: Timer("t"),
    lambda p: Timer("t", profiler=p),
    lambda p: p("s"),
    lambda p: p.scope("s"),
])
def test_no_default_scope_touches_the_process_peak_rss_record(make):
    p = HierarchicalProfiler("R")
    temporary(150)                               # the process's peak: >= 150 MiB above now
    before = vm_hwm_kib()
    for _ in range(50):
        with make(p):
            pass
    timed = timeit("f", profiler=p)(lambda: None)
    for _ in range(50):
        timed()
    # a reset would bring the record down to the current RSS, 150 MiB lower
    assert vm_hwm_kib() >= before


def test_memory_mode_is_checked_and_reads_back_as_given():
    assert Timer("a", track_memory=False).track_memory is False
    assert Timer("a", track_memory="peak").track_memory == "peak"
    assert HierarchicalProfiler(track_ram="peak").track_ram == "peak"
    assert HierarchicalProfiler().scope("s").track_memory is True
    assert HierarchicalProfiler(track_ram="peak").scope("s").track_memory == "peak"
    with pytest.raises(ValueError, match=r"Timer\(\): track_memory must be True, False or 'peak', got 'max'"):
        Timer("a", track_memory="max")
    with pytest.raises(ValueError, match="track_ram must be True, False or 'peak'"):
        HierarchicalProfiler(track_ram="Peak")
    with pytest.raises(ValueError, match="track_ram must be True, False or 'peak'"):
        HierarchicalProfiler().scope("s", track_ram="yes")
    t = Timer("a")
    t.track_memory = "peak"
    assert t.track_memory == "peak"
    with pytest.raises(ValueError):
        t.track_memory = "rss?"


# ---- track_memory="peak": the high-water-mark window -----------------------------------

def test_a_freed_temporary_is_seen(hwm):
    p = HierarchicalProfiler("R", track_ram="peak")
    t = p("alloc")
    with t:
        temporary(120)
    assert t.ram_delta_mb >= 100
    assert p.root.children["alloc"].peak_ram_delta_mb == t.ram_delta_mb


def test_nested_windows_each_get_their_own_peak(hwm):
    p = HierarchicalProfiler("R", track_ram="peak")
    with p("outer") as outer:
        temporary(120)              # before the inner scope opens
        with p("inner") as inner:
            sum(range(1000))
    assert outer.ram_delta_mb >= 100
    assert inner.ram_delta_mb < 50
    # and the other way round: the inner scope's peak counts for the outer one
    with p("outer2") as outer2:
        with p("inner2") as inner2:
            temporary(120)
    assert inner2.ram_delta_mb >= 100 and outer2.ram_delta_mb >= 100


def test_a_benchmark_inside_a_scope(hwm):
    p = HierarchicalProfiler("R", track_ram="peak")
    with p("bench") as t:
        s = benchmark_callable(temporary, 80, num_warmup=1, num_iters=3)
    assert s.ram_delta_mb >= 60
    assert t.ram_delta_mb >= 60


def test_track_memory_off_reads_nothing():
    p = HierarchicalProfiler("R", track_ram=False)
    with p("x") as t:
        temporary(50)
    assert t.ram_delta_mb == 0.0 and p.root.children["x"].peak_ram_delta_mb == 0.0


def test_a_timer_dropped_while_open_leaves_no_window_behind(hwm):
    """An abandoned generator with an open scope: the window must leave the process-wide
    list when the Timer dies, or later windows would write into freed memory."""
    p = HierarchicalProfiler("R", track_ram="peak")

    def gen():
        with p("held"):
            yield 1

    g = gen()
    next(g)
    t = Timer("manual", profiler=p, track_memory="peak")
    t.__enter__()
    del t
    g.close()
    del g
    with p("after") as after:
        temporary(60)
    assert after.ram_delta_mb >= 40


def test_cuda_scope_uses_the_native_sync_or_says_why_not():
    p = HierarchicalProfiler("R", track_ram=False)
    if get_cuda_sync_fn() is None:
        with pytest.raises(RuntimeError, match="CUDA") as info:
            with p("gpu", sync_cuda=True):
                pass
        notes = getattr(info.value, "__notes__", [])
        assert any("sync_cuda=False" in n for n in notes)
        assert p.stack == [p.root]          # nothing was entered
    else:
        with p("gpu", sync_cuda=True, track_vram=True) as t:
            pass
        assert t.elapsed_wall > 0 and t.vram_delta_mb >= 0.0


def test_cuda_scope_with_the_fake_driver(fake_cuda_lib):
    from cuda_support import run_with_fake_cuda as run
    out = run(fake_cuda_lib, """
        from spatialhub.utils.profiling import HierarchicalProfiler
        make_current()                            # as torch does on first use
        p = HierarchicalProfiler("R", device="CUDA", track_ram=False)
        n0 = count("cuCtxSynchronize")
        with p("gpu") as t:
            assert fake().fake_alloc(64 * MiB) == 0
            assert fake().fake_enqueue_ns(20_000_000) == 0   # 20 ms of queued device work
        print(count("cuCtxSynchronize") - n0, round(t.elapsed_wall, 3) >= 0.019,
              round(t.vram_delta_mb))
    """)
    syncs, waited, vram = out.split()
    assert syncs == "2"               # one before, one after the block
    assert waited == "True"           # the closing sync waited for the 20 ms of work
    assert vram == "64"


def test_a_failing_closing_sync_raises_and_still_leaves_the_scope(fake_cuda_lib):
    from cuda_support import run_with_fake_cuda as run
    out = run(fake_cuda_lib, """
        from spatialhub.utils.profiling import HierarchicalProfiler
        make_current()
        p = HierarchicalProfiler("R", device="CUDA", track_ram=False, track_vram=False)
        err = ValueError("user's")
        try:
            with p("gpu"):
                fake().fake_inject_sticky(700)    # CUDA_ERROR_ILLEGAL_ADDRESS from now on
                raise err
        except ValueError as e:
            # the user's exception goes on, unchanged, carrying the sync failure
            print("user", e is err, any("ILLEGAL_ADDRESS" in n for n in e.__notes__),
                  len(p.stack))
        try:
            with p("gpu2"):
                pass
        except RuntimeError as e:
            print("raised", "CUDA_ERROR_ILLEGAL_ADDRESS" in str(e), len(p.stack))
    """)
    assert out.split("\n")[:2] == ["user True True 1", "raised True 1"]
