"""The regression gate's one decision.

``judge(name, baseline, candidate, threshold, run_spread=...)`` is the ONLY place where
the plugin turns two sets of samples into "fail" / "pass".  Everything else (terminal
table, Markdown, exit status) reads its ``Verdict``.  Switching to another comparison
rule is a change to this file alone.

The rule (the trust issue's, issue 11): a verdict of "slower" must exceed what separate
runs of identical code produce.  The interval of the ratio of medians therefore
combines, on the log scale,

* the within-run uncertainty: the larger of the bootstrap interval of
  ``compare_benchmarks`` and the spread of block medians (10 consecutive blocks per
  side, so drift and autocorrelation within a run widen it), and
* the between-run spread ``run_spread`` (std of log medians of separate runs of the
  same code), counted once for each side: estimated by the session from the saved runs
  in ``.benchmarks/`` when there are at least 3, else ``DEFAULT_RUN_SPREAD``.

``verdict``: "slower" when the whole interval is above 1, "faster" when below, else
"same" (inside ``1 ± threshold``) or "inconclusive".  A benchmark **fails** when the
verdict is "slower" and the ratio exceeds ``1 + threshold``: the rule of issue 11's
``--fail-if-slower``.  When ``compare_benchmarks`` itself has issue 11's rules
(``Comparison.margin``), the interval comes from it, with ``margin=threshold`` and
``run_spread=``, and the same fail rule applies.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

__all__ = ["Verdict", "judge", "RESAMPLES", "DEFAULT_RUN_SPREAD", "run_spread_of"]

RESAMPLES = 2000
Z95 = 1.959963984540054
BLOCKS = 10
# Between-run spread (std of log medians of separate runs of identical code) assumed
# when the store holds fewer than 3 runs of a benchmark.  Measured on the shared 2-core
# VM this was written on: see docs/guide.md (bench/bench_pytest_gate.py).
DEFAULT_RUN_SPREAD = 0.05


@dataclass(frozen=True)
class Verdict:
    """The gate's reading of one benchmark against its saved baseline."""

    name: str
    verdict: str                 # "faster" / "slower" / "same" / "inconclusive" / "no data"
    ratio: Optional[float]       # median(candidate) / median(baseline)
    ci_low: Optional[float]      # 95% interval of that ratio
    ci_high: Optional[float]
    threshold: Optional[float]   # fraction (0.10 for 10%), None when no gate is set
    fails: bool                  # this benchmark fails the gate
    reason: str                  # one line a reader can act on
    machine_factor: Optional[float] = None   # reference now / reference then (1.3: slower machine)


def _new_verdict_api():
    """True once compare_benchmarks has issue 11's rules (margin=, "inconclusive",
    between-block/between-run spread in the interval, a reason on every Comparison)."""
    from .._native import Comparison

    return hasattr(Comparison, "margin") and hasattr(Comparison, "reason")


def run_spread_of(medians):
    """Std of the log of the medians of separate runs, or None under 3 runs."""
    logs = [math.log(m) for m in medians if m and m > 0]
    if len(logs) < 3:
        return None
    mean = sum(logs) / len(logs)
    return math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))


def _block_se(samples):
    """Standard error of the log median from the medians of consecutive blocks."""
    import numpy as np

    x = np.asarray(samples, dtype=np.float64)
    if x.size < 2 * BLOCKS or not (x > 0).all():
        return 0.0
    meds = np.log([np.median(b) for b in np.array_split(x, BLOCKS)])
    return float(meds.std(ddof=1) / math.sqrt(BLOCKS))


def judge(name, baseline, candidate, threshold=None, *, run_spread=None, machine_factor=None,
          seed=0):
    """Compare ``candidate`` with ``baseline`` (``BenchmarkStats`` with raw samples).

    ``threshold``: allowed slowdown as a fraction (0.10 = 10%) or None (report only).
    ``run_spread``: between-run spread of this benchmark (None: ``DEFAULT_RUN_SPREAD``).
    ``machine_factor``: how much slower the machine itself was for the candidate (the
    reference workload's median now / then); the candidate's samples are divided by it
    before the comparison, and the ratio reported is the corrected one.
    Returns a ``Verdict``; never raises for data reasons (missing samples give
    ``verdict="no data"`` and never fail)."""
    if (baseline.samples_ms is None or candidate.samples_ms is None
            or len(baseline.samples_ms) == 0 or len(candidate.samples_ms) == 0):
        return Verdict(name, "no data", None, None, None, threshold, False,
                       "the saved run has no raw samples (saved by pytest-benchmark without "
                       "--benchmark-save-data?): cannot judge")
    if machine_factor is not None and machine_factor > 0 and machine_factor != 1.0:
        from .._native import _stats_from_samples

        scaled = _stats_from_samples(candidate.samples_ms / machine_factor)
        scaled.name = candidate.name
        candidate = scaled
    # the correction is itself uncertain (a benchmark need not follow the reference's
    # speed: sleeps, I/O): half the size of the correction is added to the uncertainty
    extra_se = 0.5 * abs(math.log(machine_factor)) if machine_factor and machine_factor > 0 else 0.0
    v = _judge(name, baseline, candidate, threshold, run_spread, seed, extra_se)
    if machine_factor is None:
        return v
    reason = v.reason + f"; machine speed factor {machine_factor:.3f} taken out"
    return Verdict(v.name, v.verdict, v.ratio, v.ci_low, v.ci_high, v.threshold, v.fails,
                   reason, machine_factor)


def _judge(name, baseline, candidate, threshold, run_spread, seed, extra_se=0.0):
    from .._native import compare_benchmarks

    # never below the default: a spread estimated from a handful of runs is itself noisy
    spread = DEFAULT_RUN_SPREAD if run_spread is None else max(float(run_spread),
                                                                DEFAULT_RUN_SPREAD)
    spread_txt = f"run-to-run spread {spread:.1%}" + (" (assumed)" if run_spread is None
                                                       else " (from saved runs)")
    if _new_verdict_api():
        # issue 11's compare_benchmarks computes the widened interval itself
        # its margin and run_spread must lie in [0, 1): a threshold of 150% still fails
        # only beyond 2.5x (the ratio test below), with the widest margin it accepts
        kw = {"margin": min(threshold, 0.99)} if threshold is not None else {}
        c = compare_benchmarks(baseline, candidate, resamples=RESAMPLES, seed=seed,
                               run_spread=min(math.hypot(spread, extra_se / math.sqrt(2)), 0.99),
                               **kw)
        ratio, lo, hi = float(c.ratio), float(c.ci95_low), float(c.ci95_high)
        fails = threshold is not None and c.verdict == "slower" and ratio > 1.0 + threshold
        return Verdict(name, c.verdict, ratio, lo, hi, threshold, fails, str(c.reason))

    c = compare_benchmarks(baseline, candidate, resamples=RESAMPLES, seed=seed)
    ratio = float(c.ratio)
    if not ratio > 0:
        return Verdict(name, "no data", None, None, None, threshold, False,
                       "a median of 0: cannot judge")
    se_boot = (math.log(c.ci95_high) - math.log(c.ci95_low)) / (2 * Z95) \
        if c.ci95_low > 0 else 0.0
    se_block = math.hypot(_block_se(baseline.samples_ms), _block_se(candidate.samples_ms))
    se = math.sqrt(max(se_boot, se_block) ** 2 + 2 * spread ** 2 + extra_se ** 2)
    lo = ratio * math.exp(-Z95 * se)
    hi = ratio * math.exp(Z95 * se)
    m = 0.05 if threshold is None else threshold
    if lo > 1.0:
        verdict = "slower"
    elif hi < 1.0:
        verdict = "faster"
    elif lo >= 1.0 / (1.0 + m) and hi <= 1.0 + m:
        verdict = "same"
    else:
        verdict = "inconclusive"
    fails = threshold is not None and verdict == "slower" and ratio > 1.0 + threshold
    ci = f"95% CI [{lo:.3f}, {hi:.3f}] with {spread_txt}"
    if fails:
        reason = f"slower by more than {threshold:.0%}: ratio {ratio:.3f}, {ci}"
    elif verdict == "slower" and threshold is not None:
        reason = f"slower, but the ratio {ratio:.3f} is within the {threshold:.0%} allowed ({ci})"
    elif verdict == "inconclusive":
        reason = (f"inconclusive: ratio {ratio:.3f}, {ci} reaches past both 1 and the "
                  f"{m:.0%} margin (more rounds, or more saved runs to measure the spread)")
    else:
        reason = f"{verdict}: ratio {ratio:.3f}, {ci}"
    return Verdict(name, verdict, ratio, lo, hi, threshold, fails, reason)
