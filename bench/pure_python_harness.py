"""A pure-Python benchmark harness: the comparison point for bench/.

It follows seed 000's protocol step by step, the way a careful Python
programmer would write it (no deliberate handicaps):

1. baseline RSS before warm-up (read from /proc/self/statm, no psutil);
2. ``num_warmup`` untimed calls, each followed by ``sync``;
3. per timed iteration: ``sync``; ``t0 = perf_counter()``; ``func(*args,
   **kwargs)``; ``sync``; ``t1 = perf_counter()``; the sample, in ms, is
   appended to a Python list;
4. statistics from the ``statistics`` module: mean, sample stdev, median,
   P95 (``quantiles(method="inclusive")``, which is NumPy's "linear"), min,
   max; RAM delta as end minus start RSS.

Hot names are bound to locals before the loop (``perf_counter``,
``append``) and the no-sync case does not call a Python no-op, so the
figures are what a good pure-Python harness costs, not a strawman.  The
only thing in the timed region besides the call is what the protocol
requires: the sync check and the two clock reads.
"""
import os
import statistics
import time

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_bytes():
    """Current RSS in bytes (Linux), or 0 where /proc is not available."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except OSError:
        return 0


def benchmark_callable_py(func, *args, num_warmup=10, num_iters=50, sync_fn=None,
                          track_ram=True, **kwargs):
    """Time ``func`` like seed 000; returns a dict of figures (ms, MiB)."""
    if num_iters < 1:
        raise ValueError("num_iters must be >= 1")
    perf_counter = time.perf_counter
    base = rss_bytes() if track_ram else 0
    for _ in range(num_warmup):
        func(*args, **kwargs)
        if sync_fn is not None:
            sync_fn()
    samples = []
    append = samples.append
    if sync_fn is None:
        for _ in range(num_iters):
            t0 = perf_counter()
            func(*args, **kwargs)
            t1 = perf_counter()
            append((t1 - t0) * 1000.0)
    else:
        for _ in range(num_iters):
            sync_fn()
            t0 = perf_counter()
            func(*args, **kwargs)
            sync_fn()
            t1 = perf_counter()
            append((t1 - t0) * 1000.0)
    end = rss_bytes() if track_ram else 0
    mean = statistics.fmean(samples)
    std = statistics.stdev(samples) if len(samples) > 1 else 0.0
    median = statistics.median(samples)
    p95 = (statistics.quantiles(samples, n=100, method="inclusive")[94]
           if len(samples) > 1 else samples[0])
    return {
        "mean_ms": mean,
        "median_ms": median,
        "std_ms": std,
        "p95_ms": p95,
        "min_ms": min(samples),
        "max_ms": max(samples),
        "fps": 1000.0 / mean if mean > 0 else 0.0,
        "timed_iters": len(samples),
        "ram_delta_mb": max(end - base, 0) / 2**20,
        "samples_ms": samples,
    }


if __name__ == "__main__":
    r = benchmark_callable_py(lambda: None, num_iters=10000)
    print({k: v for k, v in r.items() if k != "samples_ms"})
