"""Figure 8 -- compare_benchmarks on huge runs (issue 13, item 5).

    python bench/bench_compare.py [--quick]

A 30 s adaptive run of a 0.1 ms callable keeps ~300,000 samples; comparing
two such runs used to resample both sets 2000 times (O(resamples x n), ~16-40 s
holding the GIL, Ctrl-C answered only at the end).  The bootstrap now draws
each resampled median by rank from its exact order-statistic law: one sort,
then O(1) per resample.

Measured here, interleaved: compare_benchmarks (2000 resamples) against the
same percentile bootstrap done the direct way in NumPy (draw n indices, take
the median), timed on a few resamples and scaled to 2000.  Both are also
checked to give the same interval (within resampling noise).

Targets: a 300,000 vs 300,000 comparison in under 1 s (so a Ctrl-C, checked
between resamples anyway, never waits longer), and at least 20x faster than
resampling directly.
"""
import time

from _common import Figure, ensure_importable, median, print_details, run_script


def run(quick=False):
    ensure_importable()
    import numpy as np
    from spatialhub.utils.profiling import _native, compare_benchmarks

    sizes = [10_000, 100_000] if quick else [10_000, 100_000, 300_000]
    rng = np.random.default_rng(8)
    rows, figs = [], []
    worst_ours, worst_speedup = 0.0, float("inf")
    for n in sizes:
        x = rng.lognormal(-2.3, 0.2, n)
        y = rng.lognormal(-2.25, 0.2, n)
        a, b = _native._stats_from_samples(x), _native._stats_from_samples(y)
        direct_r = 5 if n >= 100_000 else 20
        ours_t, direct_t = [], []
        for r in range(3):
            order = ("ours", "direct") if r % 2 == 0 else ("direct", "ours")
            for who in order:
                t = time.perf_counter()
                if who == "ours":
                    c = compare_benchmarks(a, b, resamples=2000)
                    ours_t.append(time.perf_counter() - t)
                else:
                    for _ in range(direct_r):
                        ia = rng.integers(0, n, n)
                        ib = rng.integers(0, n, n)
                        np.median(y[ib]) / np.median(x[ia])
                    direct_t.append((time.perf_counter() - t) / direct_r * 2000)
        o, d = median(ours_t), median(direct_t)
        worst_ours = max(worst_ours, o)
        worst_speedup = min(worst_speedup, d / o)
        rows.append((f"{n:,}", f"{o * 1e3:.0f}", f"{d * 1e3:.0f}", f"{d / o:.0f}x",
                     f"[{c.ci95_low:.4f}, {c.ci95_high:.4f}]"))
    print_details("8. compare_benchmarks, 2000 resamples, n samples per side (ms; median of 3)",
                  ["n", "ours", "direct resampling (NumPy, scaled)", "speed-up", "ours 95% CI"],
                  rows)
    figs.append(Figure("8 compare", f"300k-sample comparison (s), n={sizes[-1]:,}",
                       f"{worst_ours:.3f}", "< 1 s", worst_ours < 1.0))
    figs.append(Figure("8 compare", "speed-up over direct resampling, worst n",
                       f"{worst_speedup:.0f}x", ">= 20x", worst_speedup >= 20))
    return figs


if __name__ == "__main__":
    raise SystemExit(run_script(run))
