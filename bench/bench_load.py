"""Figure 13 -- latency under load (benchmark_load) against queueing theory.

    python bench/bench_load.py [--quick]

Four experiments, each against what theory says for the same arrivals:

1. M/D/1: a busy-wait of SERVICE_MS, one worker, utilisation 0.5 (Poisson arrivals at
   0.5 / SERVICE_MS), runs of DURATION_S.  Each run's mean and p99 against Lindley's
   recursion on the *same* arrivals with the nominal service time (target: within 10%),
   and against an independent draw of LONG_ARRIVALS arrivals (the law itself; target:
   within a third).  The figure is the first *clean* round of at most ROUNDS (below).
2. M/D/c: 4 workers on a 5 ms time.sleep (it releases the GIL) at 400/s (utilisation 0.5):
   p50 about 5 ms (target: within 10%), the M/D/4 recursion on the same arrivals with the
   measured median service beside it; and 1 worker at the same rate is reported
   overloaded.
3. The stall: a callable that takes STALL_BASE_MS and stalls STALL_MS every
   STALL_EVERY-th call.  Back to back (benchmark_callable) its p99 is the base time; at
   STALL_QPS requests/s (open loop) the requests that arrive during each stall wait, and
   p99 is over 50 ms (target).
4. The peak: find_peak_qps for the M/D/1 busy-wait of PEAK_SERVICE_MS and a p99 bound of
   PEAK_BOUND_MS, against the rate at which M/D/1's p99 meets that bound exactly
   (Erlang's formula for the waiting time; target: within 15%).  The figure is the first
   clean search of at most SEARCHES.

Clean.  A busy-wait measures wall time: when another process takes its CPU, the call
takes longer and the worker wakes late -- which the harness reports, rightly, but then the
server is no longer the deterministic one the theory is about.  A run is clean when its
own records show the machine left it alone: no service over (1 + CLEAN_SERVICE) times the
nominal time and no lag of the harness over CLEAN_LAG_MS (a search: in every probe).  One
stall of a few ms at utilisation 0.5 delays the whole busy period behind it, so the rule
is on the maxima (a first version on the p99s let such runs through).  Every round is
printed, the ones set aside too, with the load average.
"""
import math
import os
import sys
import time

from _common import Figure, ensure_importable, load_average, print_details, quiet_warnings, \
    run_script

SERVICE_MS = 2.0
DURATION_S = 10.0
ROUNDS = 8
LONG_ARRIVALS = 1_000_000
SLEEP_MS = 5.0
MDC_QPS = 400.0
STALL_BASE_MS = 1.0
STALL_MS = 200.0
STALL_EVERY = 500
STALL_QPS = 200.0
PEAK_SERVICE_MS = 2.0
PEAK_BOUND_MS = 10.0
SEARCHES = 3
CLEAN_SERVICE = 0.5      # no service over 1.5x the nominal busy-wait
CLEAN_LAG_MS = 1.0       # no worker lag over 1 ms
TARGET_SAME = 0.10       # M/D/1 vs Lindley on the same arrivals
TARGET_INDEPENDENT = 1 / 3
TARGET_P50 = 0.10        # M/D/4: p50 within 10% of the 5 ms sleep
TARGET_STALL_MS = 50.0
TARGET_PEAK = 0.15


def busy_wait(ms):
    """A callable that holds the CPU (and the GIL) for `ms` milliseconds of wall time."""
    seconds = ms / 1e3

    def work():
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass
    return work


def clean(stats, nominal_ms):
    """The machine left the run alone: none of its busy-waits took much longer than the
    nominal time and no worker woke much late (a LoadStats, or a probe's fields)."""
    get = stats.get if isinstance(stats, dict) else lambda k: getattr(stats, k)
    service, lag = get("service_max_ms"), get("lag_max_ms")
    return (service is not None and service <= nominal_ms * (1 + CLEAN_SERVICE)
            and lag is not None and lag <= CLEAN_LAG_MS)


def md1_wait_cdf(t, lam, d):
    """P(W <= t) of M/D/1's waiting time (Erlang): (1 - rho) sum_k [lam (k d - t)]^k /
    k! e^{-lam (k d - t)} over k = 0 .. floor(t / d)."""
    rho = lam * d
    total = 0.0
    for k in range(int(math.floor(t / d)) + 1):
        x = lam * (k * d - t)
        total += (x ** k) / math.factorial(k) * math.exp(-x)
    return (1 - rho) * total


def md1_peak_rate(d_s, bound_s, q=0.99):
    """The arrival rate at which M/D/1's q-quantile of latency (wait + service) is the
    bound: bisection on lam (the quantile grows with it)."""
    lo, hi = 1e-9, (1 - 1e-9) / d_s
    for _ in range(100):
        mid = (lo + hi) / 2
        if md1_wait_cdf(bound_s - d_s, mid, d_s) >= q:
            lo = mid
        else:
            hi = mid
    return lo


def independent_lindley(np, prof, qps, service_ms, n, seed=12345):
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1e3 / qps, n))
    return prof._native._fcfs_latencies(arrivals, np.full(n, service_ms))


def run(quick=False):
    ensure_importable()
    quiet_warnings()
    import numpy as np
    import spatialhub.utils.profiling as prof

    duration = 1.0 if quick else DURATION_S
    rounds = 1 if quick else ROUNDS
    figs, load_before = [], load_average()

    # 1. M/D/1 at utilisation 0.5
    qps = 0.5 / (SERVICE_MS / 1e3)
    long = independent_lindley(np, prof, qps, SERVICE_MS, 100_000 if quick else LONG_ARRIVALS)
    long_mean, long_p99 = float(long.mean()), float(np.percentile(long, 99))
    rows, cases, chosen = [], [], None
    for r in range(rounds):
        s = prof.benchmark_load(busy_wait(SERVICE_MS), qps=qps, duration_s=duration,
                                seed=100 + r, name="busy-wait")
        same = prof._native._fcfs_latencies(s.arrivals_ms, np.full(s.completed, SERVICE_MS))
        same_mean, same_p99 = float(same.mean()), float(np.percentile(same, 99))
        # the queue the busy-waits as they ran would make, without the harness's lag
        served = prof._native._fcfs_latencies(s.arrivals_ms, s.service_ms)
        ok = clean(s, SERVICE_MS)
        cases.append((s.mean_ms / same_mean, s.p99_ms / same_p99, s, same_mean, same_p99))
        rows.append((r + 1, s.completed, f"{s.service_mean_ms:.3f}", f"{s.service_max_ms:.3f}",
                     f"{s.lag_max_ms:.3f}", "yes" if ok else "no", f"{s.mean_ms:.3f}",
                     f"{same_mean:.3f}", f"{float(served.mean()):.3f}", f"{long_mean:.3f}",
                     f"{s.p99_ms:.2f} [{s.p99_ci_low_ms:.2f}, {s.p99_ci_high_ms:.2f}]",
                     f"{same_p99:.2f}", f"{float(np.percentile(served, 99)):.2f}",
                     f"{long_p99:.2f}", f"{load_average():.2f}"))
        if ok:
            chosen = cases[-1]
            break
    print_details(f"13a. M/D/1: busy-wait {SERVICE_MS:g} ms, 1 worker, {qps:g} req/s "
                  f"(utilisation 0.5), {duration:g} s a round",
                  ["round", "completed", "service mean (ms)", "service max (ms)",
                   "lag max (ms)", "clean", "mean (ms)", "Lindley same arrivals",
                   "Lindley same, measured service", "Lindley independent",
                   "p99 (ms) [95% CI]", "Lindley same", "Lindley same, measured service",
                   "Lindley independent", "load after"], rows)
    judged = chosen is not None
    if not judged:   # no clean round: the median one, recorded, not judged
        print(f"\nno clean round in {rounds}: the figures are the median round's, not judged")
        chosen = sorted(cases, key=lambda c: c[1])[len(cases) // 2]
    mean_ratio, p99_ratio, s, same_mean, same_p99 = chosen

    def verdict(ok):
        return ok if judged else None
    figs.append(Figure("13 load", "M/D/1 mean / Lindley on the same arrivals",
                       f"{mean_ratio:.3f}", f"within {TARGET_SAME:.0%}",
                       verdict(abs(mean_ratio - 1) <= TARGET_SAME)))
    figs.append(Figure("13 load", "M/D/1 p99 / Lindley on the same arrivals",
                       f"{p99_ratio:.3f}", f"within {TARGET_SAME:.0%}",
                       verdict(abs(p99_ratio - 1) <= TARGET_SAME)))
    ind_mean, ind_p99 = s.mean_ms / long_mean, s.p99_ms / long_p99
    figs.append(Figure("13 load", "M/D/1 mean / Lindley on independent arrivals",
                       f"{ind_mean:.3f}", "within a third",
                       verdict(abs(ind_mean - 1) <= TARGET_INDEPENDENT)))
    figs.append(Figure("13 load", "M/D/1 p99 / Lindley on independent arrivals",
                       f"{ind_p99:.3f}", "within a third",
                       verdict(abs(ind_p99 - 1) <= TARGET_INDEPENDENT)))

    # 2. M/D/4 on a GIL-releasing sleep; 1 worker overloaded
    sleep = SLEEP_MS / 1e3

    def nap():
        time.sleep(sleep)
    four = prof.benchmark_load(nap, qps=MDC_QPS, duration_s=duration, workers=4, seed=7,
                               name="sleep x4")
    kw = prof._native._fcfs_latencies(four.arrivals_ms,
                                      np.full(four.completed, four.service_p50_ms), 4)
    one = prof.benchmark_load(nap, qps=MDC_QPS, duration_s=duration, workers=1, seed=7,
                              name="sleep x1")
    print_details(f"13b. M/D/c: time.sleep({SLEEP_MS:g} ms) at {MDC_QPS:g} req/s, {duration:g} s",
                  ["workers", "completed", "unserved", "service p50 (ms)", "p50 (ms)",
                   "M/D/4 same arrivals p50", "p99 (ms)", "M/D/4 p99", "overloaded",
                   "backlog growth (req/s)"],
                  [(4, four.completed, four.unserved, f"{four.service_p50_ms:.3f}",
                    f"{four.p50_ms:.3f}", f"{float(np.median(kw)):.3f}", f"{four.p99_ms:.2f}",
                    f"{float(np.percentile(kw, 99)):.2f}", four.overloaded,
                    f"{four.backlog_growth_qps:.0f}"),
                   (1, one.completed, one.unserved, f"{one.service_p50_ms:.3f}",
                    f"{one.p50_ms:.1f}", "-", f"{one.p99_ms:.0f}", "-", one.overloaded,
                    f"{one.backlog_growth_qps:.0f}")])
    figs.append(Figure("13 load", f"4 workers, {SLEEP_MS:g} ms sleep, {MDC_QPS:g}/s: p50 (ms)",
                       f"{four.p50_ms:.2f}", f"{SLEEP_MS:g} within {TARGET_P50:.0%}",
                       abs(four.p50_ms / SLEEP_MS - 1) <= TARGET_P50 and not four.overloaded))
    figs.append(Figure("13 load", "1 worker, same load: overloaded",
                       f"{one.overloaded} (+{one.backlog_growth_qps:.0f} req/s)", "True",
                       one.overloaded is True))

    # 3. the stall, closed and open loop
    count = [0]
    base = busy_wait(STALL_BASE_MS)
    every = 50 if quick else STALL_EVERY    # a stall or more in the quick run's 200 calls too

    def stalls():
        count[0] += 1
        if count[0] % every == 0:
            time.sleep(STALL_MS / 1e3)
        else:
            base()
    closed = prof.benchmark_callable(stalls, num_iters=int(STALL_QPS * duration),
                                     name="stall, back to back")
    count[0] = 0
    opened = prof.benchmark_load(stalls, qps=STALL_QPS, duration_s=duration, seed=3,
                                 name="stall, open loop")
    print_details(f"13c. A {STALL_BASE_MS:g} ms call that stalls {STALL_MS:g} ms every "
                  f"{every}th call",
                  ["how", "calls", "p50 (ms)", "p99 (ms)", "max (ms)"],
                  [("benchmark_callable (back to back)", closed.timed_iters,
                    f"{closed.median_ms:.2f}", f"{closed.p99_ms:.2f}", f"{closed.max_ms:.0f}"),
                   (f"benchmark_load at {STALL_QPS:g}/s (open loop)", opened.completed,
                    f"{opened.p50_ms:.2f}", f"{opened.p99_ms:.1f}", f"{opened.max_ms:.0f}")])
    figs.append(Figure("13 load", "stall: p99 back to back (ms)", f"{closed.p99_ms:.2f}",
                       f"about {STALL_BASE_MS:g}", closed.p99_ms < 2 * STALL_BASE_MS))
    figs.append(Figure("13 load", f"stall: p99 open loop at {STALL_QPS:g}/s (ms)",
                       f"{opened.p99_ms:.1f}", f">= {TARGET_STALL_MS:g}",
                       opened.p99_ms >= TARGET_STALL_MS))

    # 4. the peak against M/D/1's
    theory = md1_peak_rate(PEAK_SERVICE_MS / 1e3, PEAK_BOUND_MS / 1e3)
    sim = independent_lindley(np, prof, theory, PEAK_SERVICE_MS, 100_000 if quick else
                              LONG_ARRIVALS)
    found, found_clean = None, False
    for attempt in range(1 if quick else SEARCHES):
        t = time.perf_counter()
        peak = prof.find_peak_qps(busy_wait(PEAK_SERVICE_MS), latency_bound_ms=PEAK_BOUND_MS,
                                  duration_s=duration, max_time_s=30 * duration,
                                  seed=11 + 100 * attempt, progress=False, name="busy-wait")
        took = time.perf_counter() - t
        probes = peak.search["probes"]
        ok = all(clean(p["stats"], PEAK_SERVICE_MS) for p in probes)
        print_details(f"13d. find_peak_qps, search {attempt + 1}: busy-wait "
                      f"{PEAK_SERVICE_MS:g} ms, p99 <= {PEAK_BOUND_MS:g} ms, probes of "
                      f"{duration:g} s ({took:.0f} s in all; {'clean' if ok else 'not clean'};"
                      f" load average {load_average():.2f} after)",
                      ["rate (req/s)", "p99 (ms)", "95% CI (ms)", "service max (ms)",
                       "lag max (ms)", "verdict"],
                      [(f"{p['offered_qps']:.1f}", f"{p['value_ms']:.2f}",
                        f"{p['ci_low_ms']:.2f} - {p['ci_high_ms']:.2f}",
                        f"{p['stats']['service_max_ms']:.3f}",
                        f"{p['stats']['lag_max_ms']:.3f}", p["verdict"]) for p in probes])
        if found is None or ok:
            found, found_clean = peak.search["peak_qps"], ok
        if ok:
            break
    print(f"\nM/D/1 peak (Erlang's formula): {theory:.1f} req/s (utilisation "
          f"{theory * PEAK_SERVICE_MS / 1e3:.3f}); a Lindley simulation of "
          f"{len(sim):,} arrivals at that rate reads p99 {np.percentile(sim, 99):.2f} ms")
    ratio = (found or 0.0) / theory
    # without a clean search the figure is recorded, not judged: the machine, not the
    # harness, set the peak
    figs.append(Figure("13 load", f"find_peak_qps / M/D/1 peak ({PEAK_SERVICE_MS:g} ms, "
                       f"p99 <= {PEAK_BOUND_MS:g} ms)",
                       f"{ratio:.3f} ({found or 0:.0f} / {theory:.0f} req/s)"
                       + ("" if found_clean else f"; no clean search in {SEARCHES}"),
                       f"within {TARGET_PEAK:.0%}",
                       abs(ratio - 1) <= TARGET_PEAK if found_clean else None))
    print(f"\nload average {load_before:.2f} before, {load_average():.2f} after; "
          f"{os.cpu_count()} CPUs")
    return figs


if __name__ == "__main__":
    sys.exit(run_script(run))
