"""Results for the report's tests (test_report.py, test_report_browser.py): built from
fixed samples (``_stats_from_samples``), so every figure the report states is known, and
a find_peak_qps result with its search."""
import numpy as np

from spatialhub.utils.profiling import LoadStats, SweepResult, check_outputs
from spatialhub.utils.profiling import _native

EVIL = "<script>alert(1)</script>"


def _stats(name, scale, n=400, seed=0, **kw):
    rng = np.random.default_rng(seed)
    s = _native._stats_from_samples(scale * (1 + rng.gamma(4, 0.02, n)))
    s.name = name
    # as benchmark_repeated leaves them: 4 fresh processes, so that a comparison has a
    # measured between-run spread and may decide (an assumed one never does)
    s.run_sizes = (n // 4,) * 4 if n % 4 == 0 else None
    s.env = {"python": "3.11.7", "implementation": "CPython", "numpy": np.__version__,
             "cpu": "Test CPU", "cpu_count": 2, "spatialhub_profiling": "9.9.9",
             "load_avg_1min": 0.25, "platform": "Linux-test"}
    for k, v in kw.items():
        setattr(s, k, v)
    return s


def _sweep():
    rows = []
    for i, b in enumerate((1, 4, 16)):
        s = _stats("net", 1.0 + 0.8 * b, seed=10 + i)
        s.batch_size, s.params = b, {"batch_size": b}
        rows.append(s)
    return SweepResult(rows, param="batch_size")


def _load(q, p99, **kw):
    """A LoadStats with chosen figures (as benchmark_load's to_dict writes them)."""
    d = dict(name="net-served", device="CPU", arrival="poisson", offered_qps=q,
             arrival_qps=q * 0.99, achieved_qps=min(q, 450), duration_s=10.0, workers=1,
             warmup_iters=10, requests=2000, completed=2000, dropped=0, unserved=0,
             mean_ms=p99 / 3, p50_ms=p99 / 3, p90_ms=p99 / 2, p99_ms=p99, p999_ms=p99 * 1.4,
             max_ms=p99 * 1.5, p50_ci_low_ms=p99 / 3.3, p50_ci_high_ms=p99 / 2.8,
             p99_ci_low_ms=p99 * 0.9, p99_ci_high_ms=p99 * 1.15, queue_share=0.2,
             overloaded=q > 450, env={"python": "3.11.7"},
             latencies_ms=[p99 / 3] * 10, service_ms=[1.0] * 10)
    d.update(kw)
    return LoadStats.from_dict(d)


def _search(runs, bound, peak, percentile=99):
    """find_peak_qps's record: the bound, the peak (None: no rate met it), every probe."""
    return {"latency_bound_ms": bound, "percentile": percentile, "peak_qps": peak,
            "stopped": "the peak is known to 15%",
            "probes": [{"offered_qps": r.offered_qps, "value_ms": r.p99_ms,
                        "ci_low_ms": r.p99_ci_low_ms, "ci_high_ms": r.p99_ci_high_ms,
                        "verdict": "meets" if r.p99_ci_high_ms <= bound else "misses",
                        "stats": r.to_dict()} for r in runs]}


def make_scene():
    """Two candidates and a baseline, a sweep, a load run with its rates, an output check
    and a failing budget: the issue's "done when"."""
    base = _stats("fp32", 10.0, seed=1, stability="multimodal")
    fast = _stats(EVIL, 6.0, seed=2)
    same = _stats("int8", 10.0, seed=3)
    tried = [_load(q, p) for q, p in ((100, 4.0), (200, 5.0), (300, 7.0), (400, 12.0),
                                      (500, 90.0))]
    peak = _load(300, 7.0, search=_search(tried, 10.0, 300.0))   # as find_peak_qps returns
    # a plain run past the capacity, and too short: its own flags reach the report
    jammed = _load(600, 150.0, name="net-jammed", completed=600, requests=900, unserved=300)
    rng = np.random.default_rng(6)
    ref = rng.standard_normal((32, 10))
    check = check_outputs(lambda: ref, lambda: ref.astype(np.float16), [], name=EVIL)
    bad = check_outputs(lambda: ref, lambda: ref + 0.1, [], name="int8")
    budgets = {"p99_ms": 9.0, "ram_delta_mb": 500, "int8": {"p99_ms": 12.5}}
    results = [base, fast, same, _sweep(), peak, jammed, check, bad]
    return dict(results=results, budgets=budgets, base=base, fast=fast, same=same,
                peak=peak, jammed=jammed, check=check, bad=bad)
