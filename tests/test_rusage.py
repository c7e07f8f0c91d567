"""What the OS did during the timed calls: page faults and context switches per call."""
import json
import mmap
import sys
import time
import warnings

import pytest

import spatialhub.utils.profiling as prof
from spatialhub.utils.profiling import BenchmarkStats, BenchmarkWarning, benchmark_callable

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RUSAGE_THREAD is Linux's")
PAGES = 1024


def fresh_pages():
    """4 MiB of new anonymous memory touched page by page, then returned: what a callable
    whose big temporaries malloc hands back to the kernel pays on every call."""
    m = mmap.mmap(-1, PAGES * mmap.PAGESIZE)
    for i in range(0, len(m), mmap.PAGESIZE):
        m[i] = 1
    m.close()


def spin(ms=0.2):
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass


def run(func, *args, **kw):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        s = benchmark_callable(func, *args, num_warmup=2, num_iters=40, track_ram=False, **kw)
    return s, [m.message for m in w if issubclass(m.category, BenchmarkWarning)]


@linux
def test_a_page_faulting_callable_is_counted_and_warned_about():
    s, w = run(fresh_pages)
    assert s.minor_faults_per_iter >= PAGES * 0.9, s.minor_faults_per_iter
    assert s.major_faults_per_iter is not None
    faults = [m for m in w if isinstance(m, prof.PageFaultWarning)]
    assert len(faults) == 1 and "MALLOC_MMAP_THRESHOLD_" in str(faults[0]) and "out=" in str(faults[0])
    assert faults[0].faults_per_call >= PAGES * 0.9 and "page faults" in s.flags
    d = json.loads(s.to_json())
    assert d["minor_faults_per_iter"] >= PAGES * 0.9 and "invol_ctx_switches_per_iter" in d
    assert BenchmarkStats.from_dict(d).minor_faults_per_iter == d["minor_faults_per_iter"]


@linux
def test_a_steady_callable_has_no_faults_and_no_fault_warning():
    s, w = run(spin)
    assert s.minor_faults_per_iter < 5
    assert not any(isinstance(m, prof.PageFaultWarning) for m in w)


@linux
def test_sleeping_is_a_voluntary_context_switch_per_call():
    s, _ = run(time.sleep, 0.001)
    assert s.vol_ctx_switches_per_iter >= 0.9


def test_not_available_reads_as_none():
    s = BenchmarkStats("x", "CPU", 1, 1, 0, 1, 1, 1, 1000, 0, 1)
    assert s.minor_faults_per_iter is None and s.to_dict()["vol_ctx_switches_per_iter"] is None
    if not sys.platform.startswith("linux"):
        r, _ = run(spin)
        assert r.minor_faults_per_iter is None
