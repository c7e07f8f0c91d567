"""The regression gate's one decision.

``judge(baseline, candidate, threshold)`` is the ONLY place where the plugin turns two
sets of samples into "fail" / "pass".  Everything else (terminal table, Markdown, exit
status) reads its ``Verdict``.  Switching to another comparison rule is a change to
this file alone.

Two rules, chosen by what ``compare_benchmarks`` offers (see ``_new_verdict_api``):

* today's ``compare_benchmarks`` (a bootstrap CI of the ratio of medians, within one
  run): fail only when the comparison says "slower" AND the whole 95% interval of the
  ratio lies above ``1 + threshold`` -- the data say, with 95% confidence, that the
  median got slower by more than the threshold.  A point estimate past the threshold
  whose interval reaches below it is "not proven" and passes.
* issue 11's (``margin=``, "inconclusive", intervals widened by the spread between
  blocks and runs): fail exactly when the verdict with ``margin=threshold`` is "slower"
  (the rule of the CLI's ``--fail-if-slower``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

__all__ = ["Verdict", "judge", "RESAMPLES"]

RESAMPLES = 2000


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


def _new_verdict_api():
    """True once compare_benchmarks has issue 11's rules (margin=, "inconclusive",
    between-block/between-run spread in the interval, a reason on every Comparison)."""
    from .._native import Comparison

    return hasattr(Comparison, "margin") and hasattr(Comparison, "reason")


def judge(name, baseline, candidate, threshold=None, *, seed=0):
    """Compare ``candidate`` with ``baseline`` (``BenchmarkStats`` with raw samples).

    ``threshold``: allowed slowdown as a fraction (0.10 = 10%) or None (report only).
    Returns a ``Verdict``; never raises for data reasons (missing samples give
    ``verdict="no data"`` and never fail)."""
    from .._native import compare_benchmarks

    if (baseline.samples_ms is None or candidate.samples_ms is None
            or len(baseline.samples_ms) == 0 or len(candidate.samples_ms) == 0):
        return Verdict(name, "no data", None, None, None, threshold, False,
                       "the saved run has no raw samples (saved by pytest-benchmark without "
                       "--benchmark-save-data?): cannot judge")
    if _new_verdict_api():
        # Issue 11's rules, as its CLI's --fail-if-slower PCT: the threshold is the
        # practical-equivalence margin, and "slower" already means lo > 1 and
        # ratio > 1 + margin on an interval that includes the spread between blocks of
        # the run (and between runs when known).  Fail exactly on that verdict.
        kw = {"margin": threshold} if threshold is not None else {}
        c = compare_benchmarks(baseline, candidate, resamples=RESAMPLES, seed=seed, **kw)
        ratio, lo, hi = float(c.ratio), float(c.ci95_low), float(c.ci95_high)
        fails = threshold is not None and c.verdict == "slower" and ratio > 1.0 + threshold
        return Verdict(name, c.verdict, ratio, lo, hi, threshold, fails, str(c.reason))

    c = compare_benchmarks(baseline, candidate, resamples=RESAMPLES, seed=seed)
    ratio, lo, hi = float(c.ratio), float(c.ci95_low), float(c.ci95_high)
    fails = False
    if threshold is None:
        reason = f"{c.verdict} (95% CI of the ratio [{lo:.3f}, {hi:.3f}])"
    elif c.verdict == "slower" and lo > 1.0 + threshold:
        fails = True
        reason = (f"slower by more than {threshold:.0%}: ratio {ratio:.3f}, whole 95% CI "
                  f"[{lo:.3f}, {hi:.3f}] above {1 + threshold:.2f}")
    elif c.verdict == "slower":
        reason = (f"slower, but not beyond {threshold:.0%} with 95% confidence "
                  f"(CI [{lo:.3f}, {hi:.3f}])")
    else:
        reason = f"{c.verdict} (CI [{lo:.3f}, {hi:.3f}])"
    return Verdict(name, c.verdict, ratio, lo, hi, threshold, fails, reason)
