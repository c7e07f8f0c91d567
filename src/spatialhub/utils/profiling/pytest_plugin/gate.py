"""The regression gate's decisions.

``--benchmark-compare-fail`` expressions become ``FailRule`` objects
(``parse_fail_rule``); ``check(rule, ...)`` is the ONLY place where the plugin turns a
saved run and a new one into "fail" / "pass" for a rule, and ``judge`` the one place for
the interval rule.  Everything else (terminal table, Markdown, exit status) reads their
``Check`` and ``Verdict``.  Which field is judged how is the table ``FIELDS``: a new
field (an instruction count) is one entry there and a judge function.

* ``median`` and ``mean``: the interval rule below, noise included.
* ``instructions`` (``--benchmark-instructions``): a count, judged by
  ``instructions.judge_counts``: fails when the count per call grew by more than N
  (percent, or instructions per call) -- identical code reads the same count to within
  0.2%, so no interval is needed, and the machine's load does not enter.  A new result
  without a count (not counted: the run was not under callgrind) fails the rule.
  Time rules are refused under --benchmark-instructions (``options.judge_options``):
  the times of a counted run are valgrind's.
* every other field (``min``, ``max``, ``stddev``, ``iqr``, ``ops``, ``rounds``, the
  percentiles, ...): pytest-benchmark's raw threshold -- the change over the saved value,
  in percent or in seconds, against N -- with no noise model; the output says so.

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

import argparse
import math
import re
from dataclasses import dataclass
from typing import Optional

from .._native import DEFAULT_MARGIN, _judge, _t975

__all__ = ["Verdict", "judge", "judge_mean", "RESAMPLES", "MIN_MEASURED_SPREAD",
           "MIN_SPREAD_RUNS", "HISTORY_RUNS",
           "run_spread_of", "t975", "FailRule", "Check", "parse_fail_rule", "check",
           "FIELDS", "ALLOWED_FIELDS", "check_count"]

#: How each --benchmark-compare-fail field is judged: "interval" (the noise-aware rule,
#: ``judge`` / ``judge_mean``), "count" (instructions per call, ``check_count``) or
#: "threshold" (pytest-benchmark's raw threshold).
FIELDS = {
    "median": "interval", "mean": "interval", "instructions": "count",
    "min": "threshold", "max": "threshold", "stddev": "threshold", "iqr": "threshold",
    "q1": "threshold", "q3": "threshold", "ld15iqr": "threshold", "hd15iqr": "threshold",
    "p90": "threshold", "p95": "threshold", "p99": "threshold", "ops": "threshold",
    "rounds": "threshold",
}
ALLOWED_FIELDS = tuple(FIELDS)
#: fields where a lower value is the regression (everything else: higher is worse)
HIGHER_IS_BETTER = frozenset(("ops",))

_RULE_RE = re.compile(r"^(?P<field>[a-z0-9]+):(?:(?P<pct>[0-9]+(?:\.[0-9]+)?)%"
                      r"|(?P<abs>[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?))$")

RESAMPLES = 2000
Z95 = _t975(math.inf)
# A between-run spread measured from a handful of saved runs is never taken below this:
# three runs that happen to agree must not make the gate trigger-happy.
MIN_MEASURED_SPREAD = 0.05
# The spread is measured from the saved runs once there are this many (fewer: the
# single-run assumption, ASSUMED_RUN_SPREAD), from the last HISTORY_RUNS of them.
MIN_SPREAD_RUNS = 3
#: Process medians a side needs for the spread between runs to be read from them.
MIN_PROCESSES = 3
HISTORY_RUNS = 10
#: The words of a verdict the core reached on this machine's calibrated spread (compare.c).
CALIBRATED = "this machine's calibrated between-run spread"


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
    spread_known: bool = True    # False: no between-run spread measured or given (it cannot fail)


def t975(df):
    """Two-sided 95% quantile of Student's t with df degrees of freedom (below 1 counts as
    1; fractional and infinite df allowed): the core's, which every verdict uses."""
    return _t975(float(df))


def run_spread_of(medians):
    """Std of the log of the medians of separate runs, or None under MIN_SPREAD_RUNS runs."""
    logs = [math.log(m) for m in medians if m and m > 0]
    if len(logs) < MIN_SPREAD_RUNS:
        return None
    mean = sum(logs) / len(logs)
    return math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))


def judge(name, baseline, candidate, threshold=None, *, run_spread=None, spread_runs=None,
          machine_factor=None, seed=0, process_medians=None, probed=True):
    """Compare ``candidate`` with ``baseline`` (``BenchmarkStats`` with raw samples).

    ``threshold``: allowed slowdown as a fraction (0.10 = 10%) or None (report only).
    ``run_spread``: between-run spread of this benchmark (None: not known; the 15%
    ``compare_benchmarks`` assumes for single runs applies); ``spread_runs``: how many
    saved runs it was measured from (None: given by the user, not measured).
    ``machine_factor``: how much slower the machine itself was for the candidate (the
    reference workload's median now / then); the candidate's samples are divided by it
    before the comparison, and the ratio reported is the corrected one.
    ``probed``: whether the spread probes run this benchmark (a run under load is not
    probed: only saved runs can measure its spread) -- the reason's remedy says which.
    Returns a ``Verdict``; never raises for data reasons (missing samples give
    ``verdict="no data"`` and never fail)."""
    from .._native import _stats_from_samples, compare_benchmarks

    runs = _by_processes(name, baseline, process_medians, threshold, seed)
    if runs is not None:
        return runs
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
    measured = (run_spread is not None and spread_runs is not None
                and spread_runs >= MIN_SPREAD_RUNS)
    if measured:
        spread = max(float(run_spread), MIN_MEASURED_SPREAD) * t975(spread_runs - 1) / Z95
        basis = f"run-to-run spread from {spread_runs} saved runs"
    elif run_spread is not None:
        extra = 0.5 * abs(math.log(machine_factor)) if corrected else 0.0
        spread = math.hypot(float(run_spread), extra / math.sqrt(2))
        basis = "run-to-run spread given"
    else:
        spread = None      # compare_benchmarks' own assumption for single runs
        how = (f"--benchmark-processes {MIN_PROCESSES} or more measures it" if probed else
               f"a run under load is not probed: {MIN_SPREAD_RUNS} saved runs measure it")
        basis = (f"under {MIN_SPREAD_RUNS} saved runs and no process medians: no spread "
                 f"measured yet ({how})")
    # margin and run_spread must lie in [0, 1): a threshold of 150% still fails only
    # beyond 2.5x (the ratio test below), with the widest margin it accepts
    kw = {"margin": min(threshold, 0.99)} if threshold is not None else {}
    if spread is not None:
        kw["run_spread"] = min(spread, 0.99)
    c = compare_benchmarks(baseline, candidate, resamples=RESAMPLES, seed=seed, **kw)
    if spread is None and CALIBRATED in c.reason:
        # nothing saved measured it, but this machine's calibration did (the core used it)
        spread, basis = c.run_spread, "this machine's calibration (spatialhub-bench --calibrate)"
    ratio, lo, hi = float(c.ratio), float(c.ci95_low), float(c.ci95_high)
    fails = threshold is not None and c.verdict == "slower" and ratio > 1.0 + threshold
    reason = f"{c.reason}; {basis}"
    if corrected or machine_factor == 1.0:
        reason += f"; machine speed factor {machine_factor:.3f} taken out"
    elif machine_factor is not None:
        reason += f"; machine speed factor {machine_factor!r} unusable: not applied"
    return Verdict(name, c.verdict, ratio, lo, hi, threshold, fails, reason,
                   machine_factor if machine_factor is not None else None,
                   spread_known=spread is not None)


def _runs_of(medians_s):
    """Process medians (seconds) as a BenchmarkStats of runs of one sample each (ms)."""
    from .._native import _stats_from_samples

    s = _stats_from_samples([m * 1e3 for m in medians_s])
    s.run_sizes = (1,) * len(medians_s)
    return s


def _by_processes(name, baseline, process_medians, threshold, seed):
    """The verdict from process medians (spread.py), when the new run has enough of them:
    the core's rule (compare_benchmarks over runs of one median each) on the saved run's
    process medians, or -- a baseline saved without them -- on its median as one run,
    with the new run's measured spread standing for the machine's.  None: not enough."""
    from .._native import compare_benchmarks

    base, cur = process_medians or (None, None)
    if not cur or len(cur) < MIN_PROCESSES:
        return None
    kw = {"margin": min(threshold, 0.99)} if threshold is not None else {}
    if base and len(base) >= MIN_PROCESSES:
        c = compare_benchmarks(_runs_of(base), _runs_of(cur), resamples=RESAMPLES, seed=seed,
                               **kw)
        basis = f"{len(base)} and {len(cur)} process medians"
    else:
        logs = [math.log(m) for m in cur]
        mean = sum(logs) / len(logs)
        measured = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))
        med = getattr(baseline, "median_ms", None)
        if not med or not med > 0:
            return None
        one = [med / 1e3]
        c = compare_benchmarks(_runs_of(one), _runs_of(cur), resamples=RESAMPLES, seed=seed,
                               run_spread=min(max(measured, MIN_MEASURED_SPREAD), 0.99), **kw)
        basis = (f"the saved run without process medians, against {len(cur)}: the new run's "
                 f"measured spread stands for both")
    ratio, lo, hi = float(c.ratio), float(c.ci95_low), float(c.ci95_high)
    fails = threshold is not None and c.verdict == "slower" and ratio > 1.0 + threshold
    return Verdict(name, c.verdict, ratio, lo, hi, threshold, fails, f"{c.reason}; {basis}")


# ---- --benchmark-compare-fail rules -------------------------------------------------------

@dataclass(frozen=True)
class FailRule:
    """One ``--benchmark-compare-fail`` expression: ``FIELD:N%`` (``kind`` "pct", value
    in percent) or ``FIELD:N`` (``kind`` "abs", value in the field's unit: seconds, or
    instructions per call for ``instructions``)."""

    field: str
    kind: str
    value: float
    text: str

    def __str__(self):
        return self.text

    @property
    def method(self):
        return FIELDS[self.field]

    def fraction(self, saved):
        """The allowed change as a fraction of the saved value (inf when it is 0)."""
        if self.kind == "pct":
            return self.value / 100.0
        return self.value / saved if saved else float("inf")


def parse_fail_rule(text):
    m = _RULE_RE.match(str(text).strip())
    if not m or m.group("field") not in FIELDS:
        raise argparse.ArgumentTypeError(f"Could not parse value: {text!r}.")
    if m.group("pct") is not None:
        return FailRule(m.group("field"), "pct", float(m.group("pct")), str(text).strip())
    return FailRule(m.group("field"), "abs", float(m.group("abs")), str(text).strip())


def undecided(check):
    """True when ``check`` (a time rule judged by its interval) could not be decided: the
    saved run has no samples, or no between-run spread was measured yet -- the gate passes
    it, and says so, rather than fail or pass it on an assumption."""
    v = check.verdict
    return (check.rule.method == "interval" and v is not None and not check.fails
            and (v.verdict == "no data" or (v.verdict == "inconclusive" and not v.spread_known)))


@dataclass(frozen=True)
class Check:
    """A rule's outcome for one benchmark."""

    rule: FailRule
    fails: bool
    reason: str                         # one line: the figures and the rule used
    verdict: Optional[Verdict] = None   # the interval rule's full reading


def check(rule, name, saved_stats, current_stats, baseline=None, candidate=None, **interval):
    """Judge ``rule`` for one benchmark.  ``saved_stats`` / ``current_stats``: the
    ``stats`` dicts (seconds) of the saved and the new run; ``baseline`` / ``candidate``:
    ``BenchmarkStats`` with raw samples, for the interval rule, with ``interval``'s
    keywords (``run_spread``, ``spread_runs``, ``machine_factor``) passed to it."""
    if rule.method == "interval":
        saved = saved_stats.get(rule.field)
        frac = rule.fraction(float(saved) if saved else 0.0)
        fn = judge if rule.field == "median" else judge_mean
        v = fn(name, baseline, candidate, frac, **interval)
        return Check(rule, v.fails, f"{rule}: {v.reason}", v)
    if rule.method == "count":
        return check_count(rule, name, saved_stats, current_stats)
    return _check_threshold(rule, saved_stats, current_stats)


def check_count(rule, name, saved_stats, current_stats):
    """A count rule (``instructions:N%``): the saved and the new count per call, by
    ``instructions.judge_counts``; the table's verdict is the same reading."""
    from ..instructions import judge_counts

    saved, now = saved_stats.get(rule.field), current_stats.get(rule.field)
    try:
        frac = rule.fraction(float(saved)) if saved else None
    except (TypeError, ValueError):
        frac = None
    if now is None:
        # a count rule runs under --benchmark-instructions only: a new result without a
        # count was not counted, and a gate on counts must not pass on it
        reason = (f"the new run has no {rule.field} count (it did not run under valgrind's "
                  "callgrind): cannot pass the gate")
        v = Verdict(name, "no data", None, None, None, frac, True, reason)
        return Check(rule, True, f"{rule}: {reason}", v)
    cv = judge_counts(name, saved, now, frac)
    v = Verdict(name, cv.verdict, cv.ratio, None, None, cv.threshold, cv.fails, cv.reason)
    return Check(rule, cv.fails, f"{rule}: {cv.reason}", v)


def _check_threshold(rule, saved_stats, current_stats):
    """pytest-benchmark's rule: the change over the saved value against the threshold,
    whatever the noise."""
    f = rule.field
    saved, now = saved_stats.get(f), current_stats.get(f)
    if saved is None or now is None:
        return Check(rule, False, f"{rule}: the saved run has no {f!r}: not judged")
    saved, now = float(saved), float(now)
    worse = (saved - now) if f in HIGHER_IS_BETTER else (now - saved)
    rel = worse / abs(saved) if saved else (0.0 if worse <= 0 else float("inf"))
    if rule.kind == "pct":
        fails = rel * 100.0 > rule.value
    else:
        fails = worse > rule.value
    word = "regressed" if worse > 0 else "did not regress"
    return Check(rule, fails,
                 f"{rule}: {f} {now:.6g} now, {saved:.6g} saved ({word} by {abs(rel):.1%}); "
                 f"{'over' if fails else 'within'} the threshold -- a raw threshold with no "
                 "noise model, as pytest-benchmark judges it (median and mean are judged "
                 "with the run-to-run noise)")


def judge_mean(name, baseline, candidate, threshold=None, *, run_spread=None,
               spread_runs=None, machine_factor=None, seed=0, process_medians=None,
               probed=True):
    """The interval rule for the ratio of means.  Its interval is the wider, on each
    side, of (a) the median's interval (``judge``: drift, the run-to-run spread and the
    machine factor) moved onto the ratio of means and (b) the mean's own sampling interval
    (Welch, on the log scale); the verdict and the failure follow ``judge``'s rule."""
    import numpy as np

    v = judge(name, baseline, candidate, threshold, run_spread=run_spread,
              spread_runs=spread_runs, machine_factor=machine_factor, seed=seed,
              process_medians=process_medians, probed=probed)
    if v.verdict == "no data" or v.ratio is None or not v.ratio > 0:
        return v
    a = np.asarray(baseline.samples_ms, dtype=np.float64)
    b = np.asarray(candidate.samples_ms, dtype=np.float64)
    mf = machine_factor if (machine_factor is not None and math.isfinite(machine_factor)
                            and machine_factor > 0) else 1.0
    b = b / mf
    ma, mb = float(a.mean()), float(b.mean())
    if not (ma > 0 and mb > 0):
        return Verdict(name, "inconclusive", None, None, None, threshold, False,
                       "a mean <= 0 is no timing: not judged", v.machine_factor)
    ratio = mb / ma
    va = float(a.var(ddof=1)) / (a.size * ma * ma) if a.size > 1 else 0.0
    vb = float(b.var(ddof=1)) / (b.size * mb * mb) if b.size > 1 else 0.0
    se = math.sqrt(va + vb)
    df = ((va + vb) ** 2 / ((va * va / (a.size - 1) if a.size > 1 else 0.0)
                            + (vb * vb / (b.size - 1) if b.size > 1 else 0.0))
          if se > 0 and a.size > 1 and b.size > 1 else 1e9)
    q = t975(df) * se
    lo = min(ratio * v.ci_low / v.ratio, ratio * math.exp(-q))
    hi = max(ratio * v.ci_high / v.ratio, ratio * math.exp(q))
    margin = min(threshold, 0.99) if threshold is not None else DEFAULT_MARGIN
    verdict = _judge(ratio, lo, hi, margin)   # the margin rule of every verdict
    if not v.spread_known:
        # with no between-run spread measured, no verdict (as for the median), whatever
        # the mean's interval within one run says
        verdict = "inconclusive"
    fails = threshold is not None and verdict == "slower" and ratio > 1.0 + threshold
    basis = v.reason.rsplit("; ", 1)[-1] if "; " in v.reason else v.reason
    reason = (f"mean {ratio:.3f}x, 95% interval [{lo:.3f}, {hi:.3f}]: {verdict} (the "
              f"median's run-to-run allowance and the mean's own sampling error; {basis})")
    return Verdict(name, verdict, ratio, lo, hi, threshold, fails, reason, v.machine_factor,
                   spread_known=v.spread_known)
