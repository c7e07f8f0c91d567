"""Figure 6 -- warm-up to result: adaptive stopping vs a fixed run.

    python bench/bench_adaptive.py [--quick]

A steady ~1 ms callable (a busy-wait on the clock, not sleep, so the
scheduler's timer slack is not what is measured) timed
  * with target_rel_ci=0.01: run until the 95% CI of the median is within
    +-1% of it (wall time of the whole call, iterations it took);
  * with a fixed num_iters=50: the CI half-width it achieves.
And the same for a jittery ~1 ms callable (lognormal spread, sigma 0.1), which
needs more than 50 iterations for +-1%.
Target: the adaptive run meets its target (target_met, achieved <= 1%);
the rest is recorded (wall time and iterations are the price of the
guarantee).
"""
import math
import random
import time

from _common import Figure, ensure_importable, median, print_details, quiet_warnings, run_script

TARGET = 0.01


def busy_ms(ms):
    ns = int(ms * 1e6)
    clock = time.perf_counter_ns

    def f():
        end = clock() + ns
        while clock() < end:
            pass
    return f


def jittery(ms, sigma, seed=1):
    rnd = random.Random(seed)
    clock = time.perf_counter_ns

    def f():
        end = clock() + int(ms * 1e6 * math.exp(rnd.gauss(0.0, sigma)))
        while clock() < end:
            pass
    return f


def _rel(s):
    return (s.ci95_high_ms - s.ci95_low_ms) / 2.0 / s.median_ms


def run(quick=False):
    ensure_importable()
    quiet_warnings()
    from spatialhub.utils.profiling import benchmark_callable

    rounds = 1 if quick else 3
    cases = [("steady 1 ms busy-wait", busy_ms(1.0))]
    if not quick:
        cases.append(("jittery 1 ms (lognormal sigma 0.1)", jittery(1.0, 0.1)))
    rows, figs = [], []
    for label, f in cases:
        ad, fx = [], []
        for r in range(rounds):
            for mode in (("adaptive", "fixed") if r % 2 == 0 else ("fixed", "adaptive")):
                t = time.perf_counter()
                if mode == "adaptive":
                    s = benchmark_callable(f, target_rel_ci=TARGET, max_time_s=20.0)
                else:
                    s = benchmark_callable(f, num_iters=50)
                wall = time.perf_counter() - t
                (ad if mode == "adaptive" else fx).append((wall, s.timed_iters, _rel(s),
                                                           s.target_met, s.median_ms))
        a_wall = median([x[0] for x in ad])
        a_it = median([x[1] for x in ad])
        a_rel = median([x[2] for x in ad])
        a_met = all(x[3] for x in ad)
        f_wall = median([x[0] for x in fx])
        f_rel = median([x[2] for x in fx])
        rows.append((label, f"{a_wall:.3f} s", f"{a_it:.0f}", f"{a_rel * 100:.3f}%",
                     str(a_met), f"{f_wall:.3f} s", f"{f_rel * 100:.3f}%",
                     f"{median([x[4] for x in ad]):.4f} / {median([x[4] for x in fx]):.4f}"))
        figs.append(Figure("6 warm-up to result",
                           f"{label}: target_rel_ci=0.01, achieved (iters, wall)",
                           f"{a_rel * 100:.3f}% ({a_it:.0f} it, {a_wall:.2f} s)",
                           "target_met, <= 1.00%", a_met and a_rel <= TARGET))
        figs.append(Figure("6 warm-up to result", f"{label}: fixed 50 iterations, achieved (wall)",
                           f"{f_rel * 100:.3f}% ({f_wall:.2f} s)", "-", None))
    print_details(f"6. warm-up to result (median of {rounds} interleaved rounds; CI half-width "
                  f"relative to the median)",
                  ["callable", "adaptive wall", "adaptive iters", "adaptive CI +-",
                   "target_met", "fixed-50 wall", "fixed-50 CI +-", "median ms adaptive / fixed"],
                  rows)
    return figs


if __name__ == "__main__":
    raise SystemExit(run_script(run))
