"""The regression gate's one decision.

``judge(name, baseline, candidate, threshold, run_spread=..., spread_runs=...)`` is the
ONLY place where the plugin turns two sets of samples into "fail" / "pass".  Everything
else (terminal table, Markdown, exit status) reads its ``Verdict``.  Switching to another
comparison rule is a change to this file alone.

The rule is ``compare_benchmarks``' (docs/statistics.md): the interval of the ratio of
medians combines, on the log scale, the within-run uncertainty (bootstrap, and the spread
of block medians: drift and autocorrelation widen it) and the between-run spread
``run_spread`` (std of log medians of separate runs of the same code), counted once for
each side.  A benchmark **fails** when the verdict is "slower" (the interval wholly above
1) and the ratio exceeds ``1 + threshold``: the rule of the CLI's ``--fail-if-slower``.

Where the between-run spread comes from, and what is added for the machine's own speed
(the candidate's samples are divided by the *machine factor*, the reference workload's
median now / then):

* measured from ``spread_runs`` >= 3 saved runs of this benchmark: the saved medians are
  corrected by their own reference the same way, so their spread already holds what the
  correction misses.  It is used as is (never below ``MIN_MEASURED_SPREAD``), scaled by
  t(0.975, k - 1) / 1.96 because k runs estimate it only roughly;
* given by the user (``--benchmark-run-spread``): half the log of the machine factor is
  added, since nothing measured how well the correction works for this benchmark (a
  sleep or I/O does not follow the CPU's speed);
* neither (under 3 saved runs): ``compare_benchmarks``' own rule for single runs, the
  larger of the run's slow variation and the assumed 15%.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

__all__ = ["Verdict", "judge", "RESAMPLES", "MIN_MEASURED_SPREAD", "run_spread_of", "t975"]

RESAMPLES = 2000
Z95 = 1.959963984540054
# A between-run spread measured from a handful of saved runs is never taken below this:
# three runs that happen to agree must not make the gate trigger-happy.
MIN_MEASURED_SPREAD = 0.05


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


def t975(df):
    """Two-sided 95% quantile of Student's t with df >= 1 degrees of freedom."""
    table = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
             2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086)
    df = max(1, int(df))
    return table[df - 1] if df <= len(table) else Z95 + 2.4 / df


def run_spread_of(medians):
    """Std of the log of the medians of separate runs, or None under 3 runs."""
    logs = [math.log(m) for m in medians if m and m > 0]
    if len(logs) < 3:
        return None
    mean = sum(logs) / len(logs)
    return math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))


def judge(name, baseline, candidate, threshold=None, *, run_spread=None, spread_runs=None,
          machine_factor=None, seed=0):
    """Compare ``candidate`` with ``baseline`` (``BenchmarkStats`` with raw samples).

    ``threshold``: allowed slowdown as a fraction (0.10 = 10%) or None (report only).
    ``run_spread``: between-run spread of this benchmark (None: not known; the 15%
    ``compare_benchmarks`` assumes for single runs applies); ``spread_runs``: how many
    saved runs it was measured from (None: given by the user, not measured).
    ``machine_factor``: how much slower the machine itself was for the candidate (the
    reference workload's median now / then); the candidate's samples are divided by it
    before the comparison, and the ratio reported is the corrected one.
    Returns a ``Verdict``; never raises for data reasons (missing samples give
    ``verdict="no data"`` and never fail)."""
    from .._native import _stats_from_samples, compare_benchmarks

    if (baseline.samples_ms is None or candidate.samples_ms is None
            or len(baseline.samples_ms) == 0 or len(candidate.samples_ms) == 0):
        return Verdict(name, "no data", None, None, None, threshold, False,
                       "the saved run has no raw samples (saved by pytest-benchmark without "
                       "--benchmark-save-data?): cannot judge")
    corrected = (machine_factor is not None and math.isfinite(machine_factor)
                 and machine_factor > 0 and machine_factor != 1.0)
    if corrected:
        scaled = _stats_from_samples(candidate.samples_ms / machine_factor)
        scaled.name = candidate.name
        candidate = scaled
    measured = run_spread is not None and spread_runs is not None and spread_runs >= 3
    if measured:
        spread = max(float(run_spread), MIN_MEASURED_SPREAD) * t975(spread_runs - 1) / Z95
        basis = f"run-to-run spread from {spread_runs} saved runs"
    elif run_spread is not None:
        extra = 0.5 * abs(math.log(machine_factor)) if corrected else 0.0
        spread = math.hypot(float(run_spread), extra / math.sqrt(2))
        basis = "run-to-run spread given"
    else:
        spread = None      # compare_benchmarks' own assumption for single runs (15%)
        basis = "under 3 saved runs: no spread measured yet"
    # margin and run_spread must lie in [0, 1): a threshold of 150% still fails only
    # beyond 2.5x (the ratio test below), with the widest margin it accepts
    kw = {"margin": min(threshold, 0.99)} if threshold is not None else {}
    if spread is not None:
        kw["run_spread"] = min(spread, 0.99)
    c = compare_benchmarks(baseline, candidate, resamples=RESAMPLES, seed=seed, **kw)
    ratio, lo, hi = float(c.ratio), float(c.ci95_low), float(c.ci95_high)
    fails = threshold is not None and c.verdict == "slower" and ratio > 1.0 + threshold
    reason = f"{c.reason}; {basis}"
    if corrected or machine_factor == 1.0:
        reason += f"; machine speed factor {machine_factor:.3f} taken out"
    elif machine_factor is not None:
        reason += f"; machine speed factor {machine_factor!r} unusable: not applied"
    return Verdict(name, c.verdict, ratio, lo, hi, threshold, fails, reason,
                   machine_factor if machine_factor is not None else None)
