"""Adaptive stopping: iteration counts on a steady and a noisy callable.

    python bench/adaptive_counts.py

Prints, for target_rel_ci=0.01 (steady 1 ms busy-wait) and on a noisy callable
(uniformly 0.2 to 2.0 ms at random), how many timed iterations ran, whether the target was met,
and the wall time.  Quoted in docs/statistics.md.
"""
import time
import warnings

import numpy as np

from spatialhub.utils.profiling import BenchmarkWarning, benchmark_callable


def busy(ms):
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass


def main():
    warnings.simplefilter("ignore", BenchmarkWarning)
    rng = np.random.default_rng(0)
    cases = [
        ("steady 1 ms busy-wait", lambda: busy(1.0), 0.01, 10.0),
        ("noisy: uniform 0.2-2.0 ms", lambda: busy(rng.uniform(0.2, 2.0)), 0.01, 3.0),
    ]
    print("| callable | target | max_time_s | timed_iters | target_met | median (ms) | CI half-width | wall (s) |")
    print("| :--- | :--- | :--- | :--- | :--- | :--- | :--- | :--- |")
    for label, fn, target, tmax in cases:
        t = time.perf_counter()
        s = benchmark_callable(fn, num_warmup=5, num_iters=20, target_rel_ci=target,
                               max_time_s=tmax, track_ram=False)
        wall = time.perf_counter() - t
        half = (s.ci95_high_ms - s.ci95_low_ms) / 2 / s.median_ms
        print(f"| {label} | ±{target:.0%} | {tmax} | {s.timed_iters} | {s.target_met} | "
              f"{s.median_ms:.4f} | ±{half:.2%} | {wall:.2f} |")


if __name__ == "__main__":
    main()
