"""The readiness report: one page that answers "can this model ship?".

``write_report`` turns results -- benchmarks, sweeps, load runs, output checks -- into
one self-contained HTML page (or Markdown for a pull-request comment): each candidate
against the baseline with its interval, budgets met or failed and by how much, outputs
equal within tolerance, the latency distributions, the batch trade-off, latency against
the offered rate, flags in plain words, and the environment and versions to reproduce
it.  The figures are drawn by the package (svg.py); nothing is loaded from anywhere and
no script runs, so the page reads offline, without JavaScript, and prints.

Python by nature: it arranges what the core computed.  The verdicts are
``compare_benchmarks``', every name and label is escaped by the core's one escaper
(``_native._html_escape``, ``_native._md_text``), a flag's words are its warning's.

The page is built once as a small document model (_page.py) that both writers render,
so the HTML and the Markdown say the same.
"""
from __future__ import annotations

import datetime
import math
import os
import pathlib
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Literal, Mapping, Sequence, Union

import numpy as np

from . import _native
from ._native import BenchmarkStats, Comparison, compare_benchmarks
from ._numbers import exact, number
from ._page import (H3, Cell, Fig, Items, Native, P, Pre, Section, Table, html_page,
                    markdown_page)
from .outputs import OutputCheck
from .svg import ALARM, DASHES, PALETTE, Figure
from .sweeps import SweepResult, throughput_unit

if TYPE_CHECKING:
    from ._page import Span
    Path = Union[str, "os.PathLike[str]"]
    Budgets = Mapping[str, Union[float, Mapping[str, float]]]

__all__ = ["write_report", "FLOOR_FIELDS"]

#: Budget fields where more is better: the limit is a floor (measured >= limit).  Every
#: other field is a ceiling (measured <= limit).
FLOOR_FIELDS = frozenset({"fps", "throughput", "achieved_qps", "offered_qps", "arrival_qps",
                          "completed", "cosine_similarity", "top1_agreement"})

_MAX_SERIES = len(PALETTE)      # results drawn in one figure
_ECDF_POINTS = 600              # points of an ECDF curve (quantiles beyond that many samples)


# ==== the results given ==================================================================

def is_load(x: Any) -> bool:
    """A load result (``benchmark_load`` / ``find_peak_qps``): recognised by its
    attributes, so the report needs no import of the load module."""
    return hasattr(x, "offered_qps") and hasattr(x, "latencies_ms")


class _Load:
    """The one place that reads a load result: a ``LoadStats`` (``benchmark_load``,
    ``find_peak_qps``; the latter's ``search`` holds the bound, the percentile, the peak
    and every probe), or one probe's fields as the search keeps them (a dict).  A name
    missing reads None."""

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def get(self, name: str) -> Any:
        v = self.obj.get(name) if isinstance(self.obj, Mapping) else getattr(self.obj, name,
                                                                              None)
        return v

    def num(self, name: str) -> float | None:
        v = self.get(name)
        if v is None or isinstance(v, bool):
            return None
        try:
            f = float(v)
        except (TypeError, ValueError):
            return None
        return f if math.isfinite(f) else None

    @property
    def name(self) -> str:
        return str(self.get("name") or "load")

    @property
    def search(self) -> Mapping[str, Any]:
        """find_peak_qps's record of its search; empty for a plain run."""
        s = self.get("search")
        return s if isinstance(s, Mapping) else {}

    @property
    def probes(self) -> list[Mapping[str, Any]]:
        p = self.search.get("probes")
        return [x for x in p if isinstance(x, Mapping)] if isinstance(p, (list, tuple)) else []

    @property
    def tried(self) -> list[_Load]:
        """The probes of a search, as results (their fields; no per-request arrays)."""
        return [_Load(x.get("stats") or {}) for x in self.probes]

    def search_num(self, name: str) -> float | None:
        return _Load(self.search).num(name)

    @property
    def no_peak(self) -> bool:
        """A search that found no rate meeting its bound (its result is the lowest rate
        tried, or the closed-loop run that estimated the service time)."""
        return bool(self.search) and self.search_num("peak_qps") is None

    @property
    def peak_probe(self) -> Mapping[str, Any] | None:
        """The probe that met the bound at the peak rate (its percentile's value and
        interval), or None; an undecided probe at that rate before it is not it."""
        peak = self.search_num("peak_qps")
        if peak is None:
            return None
        at = [p for p in self.probes if _Load(p).num("offered_qps") == peak]
        return next((p for p in at if p.get("verdict") == "meets"), at[-1] if at else None)

    @property
    def capped(self) -> bool:
        """The request cap stopped the search while the bound was met: the peak is at
        least peak_qps."""
        return self.search.get("capped") is True

    @property
    def env(self) -> dict[str, Any]:
        e = self.get("env")
        return dict(e) if isinstance(e, Mapping) else {}


@dataclass
class _Given:
    benches: list[BenchmarkStats] = field(default_factory=list)   # compared one by one
    sweeps: list[SweepResult] = field(default_factory=list)       # a swept parameter
    loads: list[Any] = field(default_factory=list)
    checks: list[OutputCheck] = field(default_factory=list)
    comparisons: list[Comparison] = field(default_factory=list)


def _gather(results: Any, outputs: Any) -> _Given:
    g = _Given()

    def take(x: Any, where: str) -> None:
        if isinstance(x, BenchmarkStats):
            g.benches.append(x)
        elif isinstance(x, SweepResult):
            if x.param is None:           # rows that differ by device (benchmark_onnx's)
                g.benches.extend(x)
            elif len(x):
                g.sweeps.append(x)
        elif isinstance(x, OutputCheck):
            g.checks.append(x)
        elif isinstance(x, Comparison):
            g.comparisons.append(x)
        elif is_load(x):
            g.loads.append(x)
        elif isinstance(x, (list, tuple)):
            for i, y in enumerate(x):
                take(y, f"{where}[{i}]")
        else:
            raise TypeError(f"write_report(): {where} is a {type(x).__name__}; results are "
                            "BenchmarkStats, SweepResult, load results, OutputCheck or "
                            "Comparison")

    if isinstance(results, (BenchmarkStats, SweepResult, OutputCheck, Comparison)) or \
            is_load(results):
        take(results, "results")
    else:
        try:
            items = list(results)
        except TypeError:
            raise TypeError(f"write_report(): results must be a result or an iterable of "
                            f"them, not {type(results).__name__}") from None
        for i, x in enumerate(items):
            take(x, f"results[{i}]")
    if outputs is not None:
        many = outputs if isinstance(outputs, (list, tuple)) else [outputs]
        for i, x in enumerate(many):
            if not isinstance(x, OutputCheck):
                raise TypeError(f"write_report(): outputs[{i}] is a {type(x).__name__}, "
                                "not an OutputCheck (check_outputs returns one)")
            g.checks.append(x)
    if not (g.benches or g.sweeps or g.loads or g.checks or g.comparisons):
        raise ValueError("write_report(): no results to report")
    return g


# ==== figures and words of one result =====================================================

def _ms(x: float | None) -> str:
    return "not measured" if x is None else number(float(x))


def _pct(x: float) -> str:
    v = 100 * x
    return f"{v:.1f}%" if abs(v) < 10 else f"{v:.0f}%"


def _interval(lo: float | None, hi: float | None) -> str:
    if lo is None or hi is None:
        return ""
    return f"{number(float(lo))} to {number(float(hi))}"


def _label(s: BenchmarkStats, param: str | None = None) -> str:
    if param is not None:
        value = (s.params or {}).get(param)
        return f"{s.name} {param}={value}"
    return s.name


def _samples(s: BenchmarkStats) -> np.ndarray | None:
    x = s.samples_ms
    if x is None or len(x) < 2:
        return None
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    return x if len(x) >= 2 else None


def _unit_of(field_name: str, rows: Sequence[Any] = ()) -> str:
    if field_name.endswith("_ms"):
        return "ms"
    if field_name.endswith("_mb"):
        return "MB"
    if field_name.endswith("_qps"):
        return "req/s"
    if field_name in ("fps", "throughput"):
        benches = [r for r in rows if isinstance(r, BenchmarkStats)]
        return throughput_unit(benches) if benches else "per s"
    return ""


def _with_unit(v: float, unit: str) -> str:
    return f"{number(v)} {unit}".rstrip()


# ==== budgets ============================================================================

@dataclass
class _Budget:
    label: str            # the result's label
    field: str
    limit: float
    measured: float | None
    floor: bool
    unit: str
    interval: tuple[float, float] | None
    sweep: SweepResult | None = None
    value: Any = None     # the swept value of a sweep's row

    @property
    def met(self) -> bool:
        if self.measured is None:
            return False
        return self.measured >= self.limit if self.floor else self.measured <= self.limit

    def margin(self) -> str:
        """By how much, in words: "4.1 ms under (14%)"."""
        if self.measured is None:
            return "not measured"
        d = self.measured - self.limit
        rel = f" ({_pct(abs(d) / abs(self.limit))})" if self.limit else ""
        if d == 0:
            return "exactly at the limit"
        if self.floor:
            word = "above" if d > 0 else "short"
        else:
            word = "under" if d < 0 else "over"
        return f"{_with_unit(abs(d), self.unit)} {word}{rel}"

    def note(self) -> str:
        """The interval's word when it crosses the limit."""
        if self.interval is None or self.measured is None:
            return ""
        lo, hi = self.interval
        crosses = (hi > self.limit if not self.floor else lo < self.limit) if self.met else \
            (lo <= self.limit if not self.floor else hi >= self.limit)
        if not crosses:
            return ""
        return (f"its 95% interval, {number(lo)} to {number(hi)} {self.unit}".rstrip()
                + f", crosses the limit: a rerun may {'fail' if self.met else 'meet'} it")

    def limit_text(self) -> str:
        return f"{'≥' if self.floor else '≤'} {exact(self.limit)} {self.unit}".rstrip()


def _interval_of(obj: Any, field_name: str) -> tuple[float, float] | None:
    if not field_name.endswith("_ms"):
        return None
    base = field_name[:-3]
    pairs = [(f"{base}_ci_low_ms", f"{base}_ci_high_ms")]
    if base in ("median", "p50"):
        pairs.append(("ci95_low_ms", "ci95_high_ms"))
    for lo_name, hi_name in pairs:
        lo, hi = _read(obj, lo_name), _read(obj, hi_name)
        if lo is not None and hi is not None:
            return lo, hi
    return None


def _read(obj: Any, name: str) -> float | None:
    v = _Load(obj).num(name) if is_load(obj) else getattr(obj, name, None)
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _limit(v: Any, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError(f"write_report(): budgets{where} must be a number, not "
                        f"{type(v).__name__}")
    f = float(v)
    if not math.isfinite(f):
        raise ValueError(f"write_report(): budgets{where} must be finite, got {v!r}")
    return f


def _budgets(g: _Given, labels: dict[int, str], budgets: Budgets | None) -> list[_Budget]:
    if budgets is None:
        return []
    if not isinstance(budgets, Mapping):
        raise TypeError(f"write_report(): budgets must be a dict, not {type(budgets).__name__}")
    everywhere: dict[str, float] = {}
    named: dict[str, dict[str, float]] = {}
    for key, v in budgets.items():
        if not isinstance(key, str):
            raise TypeError(f"write_report(): budgets' keys are fields or result names (str), "
                            f"not {type(key).__name__}")
        if isinstance(v, Mapping):
            named[key] = {}
            for f, lim in v.items():
                if not isinstance(f, str):
                    raise TypeError(f"write_report(): budgets[{key!r}]'s keys are fields "
                                    f"(str), not {type(f).__name__}")
                named[key][f] = _limit(lim, f"[{key!r}][{f!r}]")
        else:
            everywhere[key] = _limit(v, f"[{key!r}]")

    # (label, names it answers to, the object, its sweep and swept value)
    targets: list[tuple[str, set[str], Any, SweepResult | None, Any]] = []
    for s in g.benches:
        targets.append((labels[id(s)], {s.name, labels[id(s)]}, s, None, None))
    for sw in g.sweeps:
        for s, v in zip(sw, sw.values):
            targets.append((_label(s, sw.param), {s.name}, s, sw, v))
    for ld in g.loads:
        targets.append((_Load(ld).name, {_Load(ld).name}, ld, None, None))
    for c in g.checks:
        targets.append((c.name, {c.name, c.candidate}, c, None, None))

    out: list[_Budget] = []

    def check(label: str, obj: Any, f: str, limit: float, sweep: SweepResult | None,
              value: Any, rows: Sequence[Any]) -> None:
        if is_load(obj) and _Load(obj).no_peak:
            # a search that found no rate meeting its bound holds no run at the bound:
            # nothing to judge a budget on (it reads "not measured", a failure)
            out.append(_Budget(label, f, limit, None, f in FLOOR_FIELDS, _unit_of(f, rows),
                               None, sweep, value))
            return
        out.append(_Budget(label, f, limit, _read(obj, f), f in FLOOR_FIELDS,
                           _unit_of(f, rows), _interval_of(obj, f), sweep, value))

    for f, limit in everywhere.items():
        hit = False
        for label, names, obj, sweep, value in targets:
            if _read(obj, f) is None:
                continue
            hit = True
            if any(f in named.get(n, {}) for n in names):
                continue                     # a result's own limit wins
            check(label, obj, f, limit, sweep, value, [obj])
        if not hit:
            raise ValueError(f"write_report(): budget {f!r}: no result has that figure "
                             "(fields such as p99_ms, median_ms, ram_delta_mb, fps)")
    for name, limits in named.items():
        mine = [t for t in targets if name in t[1]]
        if not mine:
            raise ValueError(f"write_report(): budgets[{name!r}]: no result is named "
                             f"{name!r} (the results: "
                             f"{', '.join(sorted({t[0] for t in targets}))})")
        for f, limit in limits.items():
            having = [t for t in mine if hasattr(t[2], f) or (is_load(t[2]) and
                                                             _Load(t[2]).get(f) is not None)]
            if not having:
                raise ValueError(f"write_report(): budgets[{name!r}][{f!r}]: {name!r} has "
                                 "no such figure")
            for label, names, obj, sweep, value in having:
                check(label, obj, f, limit, sweep, value, [obj])
    return out


def _sweep_budget_groups(budgets: list[_Budget]) -> list[tuple[SweepResult, str, list[_Budget]]]:
    groups: dict[tuple[int, str], tuple[SweepResult, str, list[_Budget]]] = {}
    for b in budgets:
        if b.sweep is not None:
            groups.setdefault((id(b.sweep), b.field), (b.sweep, b.field, []))[2].append(b)
    return list(groups.values())


# ==== the report ==========================================================================

@dataclass
class _Verdict:
    label: str            # the candidate's label
    baseline: str
    comparison: Comparison | None
    why_not: str = ""     # when no comparison could be made


def _labels(g: _Given) -> dict[int, str]:
    """A label per compared result: its name, with the device where names repeat, and a
    number where both repeat."""
    out: dict[int, str] = {}
    names = [s.name for s in g.benches]
    for s in g.benches:
        label = s.name if names.count(s.name) == 1 else f"{s.name} [{s.device}]"
        out[id(s)] = label
    seen: dict[str, int] = {}
    for s in g.benches:
        label = out[id(s)]
        seen[label] = seen.get(label, 0) + 1
        if list(out.values()).count(label) > 1:
            out[id(s)] = f"{label} #{seen[label]}"
    return out


def _resolve_baseline(g: _Given, baseline: Any) -> BenchmarkStats | None:
    if baseline is False:
        return None
    if baseline is None:
        if g.comparisons or len(g.benches) < 2:
            return None
        return g.benches[0]
    if isinstance(baseline, BenchmarkStats):
        if not any(s is baseline for s in g.benches):
            g.benches.insert(0, baseline)
        return baseline
    if isinstance(baseline, str):
        for s in g.benches:
            if s.name == baseline:
                return s
        raise ValueError(f"write_report(): baseline {baseline!r} is none of the results' "
                         f"names ({', '.join(s.name for s in g.benches) or 'none'})")
    raise TypeError(f"write_report(): baseline must be a BenchmarkStats, a result's name, "
                    f"None or False, not {type(baseline).__name__}")


def _verdicts(g: _Given, base: BenchmarkStats | None, labels: dict[int, str]
              ) -> list[_Verdict]:
    out: list[_Verdict] = []
    if base is not None:
        for s in g.benches:
            if s is base:
                continue
            try:
                c = compare_benchmarks(base, s)
            except ValueError as exc:
                out.append(_Verdict(labels[id(s)], labels[id(base)], None,
                                    f"not compared: {exc}"))
                continue
            out.append(_Verdict(labels[id(s)], labels[id(base)], c))
    for c in g.comparisons:
        out.append(_Verdict(c.candidate, c.baseline, c))
    return out


def _verdict_words(v: _Verdict) -> list[Span]:
    c = v.comparison
    if c is None:
        return [Cell(v.why_not, "muted")]
    cls = {"faster": "ok", "slower": "fail", "same": "", "inconclusive": "warn"}.get(
        c.verdict, "")
    return [Cell(c.verdict, cls),
            f": {number(c.ratio)}x the median of {v.baseline} (95% interval "
            f"{number(c.ci95_low)} to {number(c.ci95_high)})"]


def _summary(g: _Given, base: BenchmarkStats | None, labels: dict[int, str],
             verdicts: list[_Verdict], budgets: list[_Budget]) -> Section:
    sec = Section("summary", "Verdict")
    plain = [b for b in budgets if b.sweep is None]
    groups = _sweep_budget_groups(budgets)
    failed = [b for b in plain if not b.met]
    failed_sweeps = [(sw, f, bs) for sw, f, bs in groups if not any(b.met for b in bs)]
    failed_checks = [c for c in g.checks if not c.passed]
    searches = [_Load(x) for x in g.loads if _Load(x).search]
    no_peak = [ld for ld in searches if ld.no_peak]
    n_budgets = len(plain) + len(groups)
    problems: list[str] = []
    if failed or failed_sweeps:
        n = len(failed) + len(failed_sweeps)
        problems.append(f"{n} of {n_budgets} budget{'s' if n_budgets > 1 else ''} failed ("
                        + "; ".join([f"{b.label}: {b.field} {_with_unit(b.measured, b.unit)}"
                                     f" against {b.limit_text()}" if b.measured is not None
                                     else f"{b.label}: {b.field} not measured"
                                     for b in failed]
                                    + [f"{sw[0].name}: {f} at every {sw.param}"
                                       for sw, f, _ in failed_sweeps]) + ")")
    if failed_checks:
        problems.append(f"outputs differ beyond tolerance for "
                        f"{', '.join(c.name for c in failed_checks)}")
    for ld in no_peak:
        q = ld.search_num("percentile")
        tried = ("even back to back no request rate"
                 if str(ld.search.get("stopped", "")).startswith("no rate")
                 else "no rate tried")
        problems.append(f"{tried} met {ld.name}'s latency bound (P"
                        f"{exact(q) if q is not None else '99'} ≤ "
                        f"{_ms(ld.search_num('latency_bound_ms'))} ms)")
    stated = n_budgets + len(g.checks) + len(searches)
    if problems:
        sec.blocks.append(P([Cell("Does not meet the stated checks", "fail"), ": "
                             + "; ".join(problems) + "."], "headline fail"))
    elif stated:
        parts = []
        if n_budgets:
            parts.append(f"{n_budgets} budget{'s' if n_budgets > 1 else ''} met")
        if g.checks:
            parts.append(f"{len(g.checks)} output check{'s' if len(g.checks) > 1 else ''} "
                         "passed")
        for ld in searches:
            parts.append(f"{ld.name}'s latency bound met up to "
                         f"{number(ld.search_num('peak_qps') or 0.0)} requests/s"
                         + (" (the most a probe may ask for)" if ld.capped else ""))
        sec.blocks.append(P([Cell("Meets every stated check", "ok"), ": "
                             + ", ".join(parts) + "."], "headline ok"))
    else:
        sec.blocks.append(P(["No budget and no output check were given: the figures below "
                             "are for the reviewer to judge."], "headline"))

    items: list[list[Span]] = []
    if base is not None:
        items.append([f"Baseline: {labels[id(base)]} (median {_ms(base.median_ms)} ms)."])
    for v in verdicts:
        items.append([f"{v.label}: ", *_verdict_words(v)])
    flagged = [_row_label(s, sw) for s, sw in _all_rows(g) if s.flags]
    overloaded = [_Load(x).name for x in g.loads if _Load(x).get("overloaded")]
    if flagged:
        items.append([Cell("Flags", "warn"), f": {', '.join(flagged)} "
                      f"{'carries a flag' if len(flagged) == 1 else 'carry flags'} saying "
                      "the figures may not hold (Flags, below)."])
    if overloaded:
        items.append([Cell("Overloaded", "warn"), f": {', '.join(overloaded)} (Load, below)."])
    if items:
        sec.blocks.append(Items(items))

    # one row per result: how it stands on every question
    rows: list[list[Cell]] = []

    def budget_cell(mine: list[_Budget]) -> Cell:
        if not mine:
            return Cell("none set", "muted")
        bad = [b.field for b in mine if not b.met]
        if bad:
            return Cell("FAILED: " + ", ".join(bad), "fail")
        return Cell(f"met ({len(mine)})", "ok")

    def outputs_cell(name: str) -> Cell:
        mine = [c for c in g.checks if c.candidate == name]
        if not mine:
            return Cell("not checked", "muted")
        if all(c.passed for c in mine):
            return Cell("within tolerance", "ok")
        return Cell("DIFFER", "fail")

    by_label = {v.label: v for v in verdicts}
    baselines = {v.baseline for v in verdicts} | ({labels[id(base)]} if base is not None
                                                    else set())
    compared = bool(verdicts)

    def row(label: str, against: Cell, verdict: Cell, budget: Cell, outputs: Cell
            ) -> list[Cell]:
        return [Cell(label), against, verdict, budget, outputs] if compared else \
            [Cell(label), budget, outputs]

    def verdict_cells(v: _Verdict | None, label: str) -> tuple[Cell, Cell]:
        if v is not None and v.comparison is not None:
            c = v.comparison
            against = f"{number(c.ratio)}x ({number(c.ci95_low)} to {number(c.ci95_high)})"
            if v.baseline not in baselines or len(baselines) > 1:
                against += f" against {v.baseline}"
            return Cell(against, "num"), Cell(c.verdict, {
                "faster": "ok", "slower": "fail", "inconclusive": "warn"}.get(c.verdict, ""))
        if v is not None:
            return Cell(v.why_not, "muted"), Cell("not compared", "muted")
        if label in baselines:
            return Cell("the baseline", "muted"), Cell("baseline", "muted")
        return Cell("not compared", "muted"), Cell("")

    for s in g.benches:
        label = labels[id(s)]
        against, verdict = verdict_cells(by_label.get(label), label)
        rows.append(row(label, against, verdict,
                        budget_cell([b for b in plain if b.label == label]),
                        outputs_cell(s.name)))
    for sw in g.sweeps:
        its = [grp for grp in groups if grp[0] is sw]
        if its:
            texts = []
            for _, f, bs in its:
                ok = [b for b in bs if b.met]
                texts.append(f"{f}: met at {len(ok)} of {len(bs)} {sw.param} values")
            cls = "fail" if any(not any(b.met for b in bs) for _, _, bs in its) else \
                "ok" if all(all(b.met for b in bs) for _, _, bs in its) else "warn"
            bcell = Cell("; ".join(texts), cls)
        else:
            bcell = Cell("none set", "muted")
        rows.append(row(f"{sw[0].name} (sweep over {sw.param})",
                        Cell("not compared", "muted"), Cell(""), bcell,
                        outputs_cell(sw[0].name)))
    for ld in g.loads:
        name = _Load(ld).name
        rows.append(row(f"{name} (under load)", Cell("not compared", "muted"), Cell(""),
                        budget_cell([b for b in plain if b.label == name]),
                        outputs_cell(name)))
    for v in verdicts:
        if not any(v.label == labels[id(s)] for s in g.benches):
            against, verdict = verdict_cells(v, v.label)
            rows.append(row(v.label, against, verdict,
                            budget_cell([b for b in plain if b.label == v.label]),
                            outputs_cell(v.label)))
    if rows:
        head = ["Result", "Median against the baseline (95% interval)", "Verdict",
                "Budgets", "Outputs"]
        sec.blocks.append(Table(head if compared else [head[0], head[3], head[4]], rows))
    reasons = [[f"{v.label} against {v.baseline}: {v.comparison.reason}"]
               for v in verdicts if v.comparison is not None and v.comparison.reason]
    if reasons:
        sec.blocks.append(H3("Against the baseline"))
        sec.blocks.append(P(["Why each verdict (the rule of compare_benchmarks: a "
                             "difference counts only beyond what separate runs of "
                             "identical code produce, and beyond the margin):"]))
        sec.blocks.append(Items(reasons))  # type: ignore[arg-type]

    if budgets:
        sec.blocks.append(H3("Budgets"))
        sec.blocks.append(P(["Each limit against what was measured, and by how much it is "
                             "met or missed."]))
        brows = []
        for b in plain:
            brows.append([Cell(b.label), Cell(b.field), Cell(b.limit_text(), "num"),
                          Cell(_with_unit(b.measured, b.unit) if b.measured is not None
                               else "not measured", "num"),
                          Cell("met" if b.met else "FAILED", "ok" if b.met else "fail"),
                          Cell(b.margin(), "num"), Cell(b.note(), "muted")])
        for sw, f, bs in groups:
            ok = [b for b in bs if b.met]
            no = [b for b in bs if not b.met]
            status = ("met" if not no else "FAILED" if not ok else "partly met")
            where = []
            if ok:
                where.append(f"met at {sw.param} " + ", ".join(str(b.value) for b in ok))
            if no:
                where.append(f"failed at {sw.param} " + ", ".join(str(b.value) for b in no))
            brows.append([Cell(f"{sw[0].name} (sweep)"), Cell(f), Cell(bs[0].limit_text(), "num"),
                          Cell(f"{_with_unit(min(b.measured for b in bs if b.measured is not None), bs[0].unit)} to {_with_unit(max(b.measured for b in bs if b.measured is not None), bs[0].unit)}"
                               if any(b.measured is not None for b in bs) else "not measured",
                               "num"),
                          Cell(status, "ok" if not no else "fail" if not ok else "warn"),
                          Cell(""), Cell("; ".join(where))])
        sec.blocks.append(Table(["Result", "Figure", "Limit", "Measured", "Status",
                                 "Margin", "Note"], brows, frozenset({2, 3})))
    return sec


def _all_rows(g: _Given) -> list[tuple[BenchmarkStats, SweepResult | None]]:
    return [(s, None) for s in g.benches] + [(s, sw) for sw in g.sweeps for s in sw]


def _row_label(s: BenchmarkStats, sw: SweepResult | None, labels: dict[int, str] | None = None
               ) -> str:
    if sw is not None:
        return _label(s, sw.param)
    return labels.get(id(s), s.name) if labels else s.name


def _results_table(g: _Given, labels: dict[int, str]) -> Section:
    sec = Section("results", "Results")
    rows_of = _all_rows(g)
    if not rows_of:
        sec.blocks.append(P(["No closed-loop benchmark among the results."], "muted"))
        return sec
    cuda = any("cuda" in s.device.lower() for s, _ in rows_of)
    rerun = any(s.rerun_low_ms is not None for s, _ in rows_of)
    head = ["Result", "Device", "P50 (95% CI) (ms)"]
    head += ["Rerun 95% (ms)"] if rerun else []
    head += ["P90 (ms)", "P95 (ms)", "P99 (ms)", "Throughput", "RAM Δ (MB)"]
    head += ["VRAM Δ (MB)"] if cuda else []
    head += ["First call (ms)", "Calls", "Stability"]
    # (no mean +/- std: a deployment is judged on percentiles, and the table must fit a
    # page; the mean stays in the result, its JSON and the sweep's own table)
    rows = []
    for s, sw in rows_of:
        unit = throughput_unit([s], sw.param if sw is not None else None)
        p50 = s.p50_ms if s.p50_ms is not None else s.median_ms
        ci = _interval(s.ci95_low_ms, s.ci95_high_ms)
        row = [Cell(_row_label(s, sw, labels)), Cell(s.device),
               Cell(f"{_ms(p50)} ({ci})" if ci else _ms(p50), "num")]
        if rerun:
            basis = s.rerun_basis or ""
            none = f"none ({basis.split(':', 1)[0]})" if ":" in basis else "not measured"
            row.append(Cell(_interval(s.rerun_low_ms, s.rerun_high_ms) or none, "num"))
        row += [Cell(_ms(s.p90_ms), "num"), Cell(_ms(s.p95_ms), "num"),
                Cell(_ms(s.p99_ms), "num"),
                Cell(f"{number(s.throughput)} {unit}", "num"),
                Cell(number(s.ram_delta_mb), "num")]
        if cuda:
            row.append(Cell(number(s.vram_delta_mb) if "cuda" in s.device.lower()
                            else "not on a CUDA device", "num"))
        row += [Cell(_ms(s.first_call_ms), "num"),
                Cell(f"{s.warmup_iters:,} + {s.timed_iters:,}", "num"),
                Cell(", ".join(s.flags) if s.flags else (s.stability or "not judged"),
                     "warn" if s.flags else "")]
        rows.append(row)
    numeric = frozenset(i for i, h in enumerate(head) if "(ms)" in h or "(MB)" in h
                        or h in ("Throughput", "Calls"))
    sec.blocks.append(Table(head, rows, numeric))
    sec.blocks.append(P(["P50 to P99 are NumPy's percentiles of the timed calls; the "
                         "95% CI is the median's (distribution-free), the rerun interval "
                         "where a fresh process's median is expected; RAM and VRAM Δ are "
                         "the peak over the run minus before it (MB = MiB); calls are "
                         "warm-up + timed."], "muted"))
    return sec


def _distributions(g: _Given, labels: dict[int, str]) -> Section | None:
    drawn = [(s, x) for s in g.benches if (x := _samples(s)) is not None]
    if not drawn:
        return None
    sec = Section("distributions", "Latency distributions")
    left_out = drawn[_MAX_SERIES:]
    drawn = drawn[:_MAX_SERIES]
    lo = min(float(np.min(x)) for _, x in drawn)
    hi = max(float(np.max(x)) for _, x in drawn)
    log = lo > 0 and hi / lo > 8
    names = [labels[id(s)] for s, _ in drawn]
    ecdf = Figure("Latency of each call: the share of calls at or below each latency",
                  "latency per call (ms" + (", log scale)" if log else ")"),
                  "share of calls", x_log=log, y_zero=True,
                  desc="Empirical distribution functions of the timed calls of "
                       + ", ".join(names) + "; the median (circle) and P99 (diamond) marked.")
    for i, (s, x) in enumerate(drawn):
        xs = np.sort(x)
        n = len(xs)
        if n > _ECDF_POINTS:
            qs = np.linspace(0, 1, _ECDF_POINTS)
            xs = np.quantile(x, qs)
            ys = qs
        else:
            ys = np.arange(1, n + 1) / n
        color, dash = PALETTE[i], DASHES[i]
        ecdf.line(xs.tolist(), ys.tolist(), color=color, dash=dash, step=True,
                  label=f"{labels[id(s)]} ({n:,} calls)")
        ecdf.points([s.median_ms], [0.5], color=color)
        if s.p99_ms is not None:
            ecdf.points([s.p99_ms], [0.99], color=color, shape="diamond")
    sec.blocks.append(Fig(ecdf, "The share of timed calls at or below each latency. A "
                                "curve to the left is faster; a long flat top is a slow "
                                "tail. Circles mark the median, diamonds P99."))

    box = Figure("Median, quartiles and tail of each result",
                 "latency per call (ms" + (", log scale)" if log else ")"), "", x_log=log,
                 categories=names,
                 desc="For each result: the box spans the quartiles, the bar the median, "
                      "the line P1 to P99, the diamond P99.")
    q1 = [float(np.percentile(x, 25)) for _, x in drawn]
    q3 = [float(np.percentile(x, 75)) for _, x in drawn]
    p1 = [float(np.percentile(x, 1)) for _, x in drawn]
    p99 = [float(s.p99_ms) if s.p99_ms is not None else float(np.percentile(x, 99))
           for s, x in drawn]
    rows = list(range(len(drawn)))
    box.xbars(p1, p99, rows, color="#59636e", thick=1.2)
    box.boxes(q1, q3, rows, colors=list(PALETTE[:len(drawn)]))
    for i, (s, _) in enumerate(drawn):
        box.points([s.median_ms], [i], color=PALETTE[i], shape="tick")
        box.points([p99[i]], [i], color=PALETTE[i], shape="diamond",
                   texts=[f"P99 {number(p99[i])}"])
    sec.blocks.append(Fig(box, "Box: the middle half of the calls; bar: the median; line: "
                               "P1 to P99; diamond: P99."))
    if left_out:
        sec.blocks.append(P([f"Not drawn (at most {_MAX_SERIES} results a figure): "
                             + ", ".join(labels[id(s)] for s, _ in left_out) + "."], "muted"))
    no_samples = [labels[id(s)] for s in g.benches if _samples(s) is None]
    if no_samples:
        sec.blocks.append(P(["Without raw samples (not drawn): " + ", ".join(no_samples)
                             + "."], "muted"))
    return sec


_LATENCY_FIELDS = ("p99_ms", "p95_ms", "p90_ms", "p50_ms", "median_ms", "mean_ms")


def _sweeps(g: _Given, budgets: list[_Budget]) -> Section | None:
    if not g.sweeps:
        return None
    sec = Section("sweep", "Batch trade-off")
    for k, sw in enumerate(g.sweeps):
        rows = list(sw)
        unit = sw.throughput_unit
        name = rows[0].name
        med = [float(s.median_ms) for s in rows]
        tail = [float(s.p99_ms if s.p99_ms is not None else s.p95_ms) for s in rows]
        thr = [float(s.throughput) for s in rows]
        x_log = min(med) > 0 and max(tail) / min(med) > 8
        y_log = min(thr) > 0 and max(thr) / min(thr) > 8
        fig = Figure(f"{name}: throughput against latency; labels: {sw.param}",
                     "latency per call (ms): median, line to P99"
                     + (", log scale" if x_log else ""),
                     f"throughput ({unit}" + (", log scale)" if y_log else ")"),
                     x_log=x_log, y_log=y_log, x_zero=not x_log, y_zero=not y_log,
                     desc=f"Each point is one value of {sw.param}: its median latency per "
                          f"call against its throughput, with a line to its P99.")
        color = PALETTE[k % len(PALETTE)]
        fig.xbars(med, tail, thr, color=color)
        fig.line(med, thr, color=color, markers=True, label=f"{name}, by {sw.param}")
        fig.points(med, thr, color=color, texts=[str(v) for v in sw.values])
        unstable = [i for i, s in enumerate(rows) if s.flags]
        if unstable:
            fig.points([med[i] for i in unstable], [thr[i] for i in unstable], color=ALARM,
                       hollow=True, size=8, label="flagged: figures may not hold")
        for b in budgets:
            if b.sweep is sw and b.field in _LATENCY_FIELDS:
                fig.vline(b.limit, label=f"budget {b.field} {b.limit_text()}")
                break
        for b in budgets:
            if b.sweep is sw and b.field in ("fps", "throughput"):
                fig.hline(b.limit, label=f"budget {b.field} {b.limit_text()}")
                break
        sec.blocks.append(Fig(fig, f"{name} for each {sw.param}: up and to the left is "
                                   "better. The line from each point runs to its P99 "
                                   "(P95 where P99 is not measured)."))
        sec.blocks.append(Native(sw.to_table(format="html", columns="auto"),
                                 sw.to_table(columns="auto")))
    return sec


def _loads(g: _Given, budgets: list[_Budget]) -> Section | None:
    if not g.loads:
        return None
    sec = Section("load", "Latency under load")
    # curves: a find_peak_qps result with the rates it tried; runs of one name together
    curves: list[tuple[str, list[_Load], _Load | None]] = []
    loose: dict[str, list[_Load]] = {}
    for obj in g.loads:
        ld = _Load(obj)
        if ld.tried:
            curves.append((ld.name, ld.tried, ld))
        else:
            loose.setdefault(ld.name, []).append(ld)
    curves += [(n, runs, None) for n, runs in loose.items()]
    for k, (name, runs, peak) in enumerate(curves):
        runs = sorted(runs, key=lambda r: r.num("offered_qps") or 0.0)
        xs = [r.num("offered_qps") for r in runs]
        p50 = [r.num("p50_ms") for r in runs]
        p99 = [r.num("p99_ms") for r in runs]
        ok = [i for i, x in enumerate(xs) if x is not None]
        vals = [v for v in p50 + p99 if v is not None and v > 0]
        log = bool(vals) and max(vals) / min(vals) > 20
        fig = Figure(f"{name}: latency against the offered rate",
                     "offered rate (requests/s)",
                     "latency (ms" + (", log scale)" if log else ")"), y_log=log,
                     x_zero=True, y_zero=not log,
                     desc=f"P50 and P99 latency of {name} at each offered rate, from the "
                          "intended arrival of each request to its completion, with the "
                          "95% interval of P99.")
        fig.line([xs[i] for i in ok], [p50[i] for i in ok], color=PALETTE[0], markers=True,
                 label="P50")
        fig.line([xs[i] for i in ok], [p99[i] for i in ok], color=PALETTE[1],
                 dash=DASHES[1], markers=True, label="P99")
        lo = [runs[i].num("p99_ci_low_ms") for i in ok]
        hi = [runs[i].num("p99_ci_high_ms") for i in ok]
        have = [j for j in range(len(ok)) if lo[j] is not None and hi[j] is not None]
        if have:
            fig.ybars([xs[ok[j]] for j in have], [lo[j] for j in have], [hi[j] for j in have],
                      color=PALETTE[1], label="P99 95% interval")
        over = [i for i in ok if runs[i].get("overloaded")]
        if over:
            fig.points([xs[i] for i in over], [p99[i] for i in over], color=ALARM,
                       hollow=True, size=8, label="overloaded")
        bound = peak.search_num("latency_bound_ms") if peak is not None else None
        q = peak.search_num("percentile") if peak is not None else None
        pq = f"P{exact(q) if q is not None else '99'}"
        rate = peak.search_num("peak_qps") if peak is not None else None
        if bound is not None:
            fig.hline(bound, label=f"bound: {pq} ≤ {exact(bound)} ms")
        else:
            for b in budgets:
                if b.label == name and b.field in ("p99_ms", "p50_ms", "p90_ms", "p999_ms"):
                    fig.hline(b.limit, label=f"budget {b.field} {b.limit_text()}")
                    break
        if rate is not None:
            fig.vline(rate, label=f"peak {number(rate)} req/s", color=PALETTE[2], dash="3 3")
        sec.blocks.append(Fig(fig, f"{name}: latency from each request's intended arrival "
                                   "to its completion, so time spent queueing counts. "
                                   "Where P99 turns up, the workers stop keeping up."))
        if peak is not None and rate is not None:
            at = _Load(peak.peak_probe or {})
            within = _interval(at.num("ci_low_ms"), at.num("ci_high_ms")) or "not given"
            sec.blocks.append(P([
                f"The highest rate whose {pq} meets the bound of {_ms(bound)} ms: "
                f"{number(rate)} requests/s ({name}; {pq} {_ms(at.num('value_ms'))} ms, "
                f"95% interval {within} ms, within the bound)"
                + (": the most a probe may ask for (LOAD_MAX_REQUESTS), so the peak is at "
                   "least that." if peak.capped else ".")]))
        elif peak is not None:
            low = min((r.num("offered_qps") for r in runs if r.num("offered_qps")),
                      default=None)
            sec.blocks.append(P([Cell(f"No rate tried met the bound ({pq} ≤ {_ms(bound)} ms)",
                                      "fail"),
                                 f": {name}, down to {_ms(low)} requests/s "
                                 f"({peak.search.get('stopped') or 'search ended'})."]))
    head = ["Result", "Offered (req/s)", "Achieved (req/s)", "Completed", "Dropped",
            "P50 (ms)", "P50 95% CI (ms)", "P90 (ms)", "P99 (ms)", "P99 95% CI (ms)",
            "P99.9 (ms)", "Queueing share", "Overloaded"]
    rows = []
    for obj in g.loads:
        top = _Load(obj)
        at_peak_probe = top.peak_probe
        for k, r in enumerate(top.tried or [top]):
            share = r.num("queue_share")
            at_peak = bool(top.tried) and top.probes[k] is at_peak_probe
            rows.append([
                Cell(top.name + (" (peak)" if at_peak else "")),
                Cell(_ms(r.num("offered_qps")), "num"), Cell(_ms(r.num("achieved_qps")), "num"),
                Cell(_count(r.get("completed")), "num"), Cell(_count(r.get("dropped")), "num"),
                Cell(_ms(r.num("p50_ms")), "num"),
                Cell(_interval(r.num("p50_ci_low_ms"), r.num("p50_ci_high_ms"))
                     or "not given", "num"),
                Cell(_ms(r.num("p90_ms")), "num"), Cell(_ms(r.num("p99_ms")), "num"),
                Cell(_interval(r.num("p99_ci_low_ms"), r.num("p99_ci_high_ms"))
                     or "not given", "num"),
                Cell(_ms(r.num("p999_ms")), "num"),
                Cell(_pct(share) if share is not None else "not given", "num"),
                Cell("yes" if r.get("overloaded") else
                     "not judged" if r.get("overloaded") is None else "no",
                     "fail" if r.get("overloaded") else "")])
    sec.blocks.append(Table(head, rows, frozenset(range(1, 12))))
    return sec


def _count(v: Any) -> str:
    if v is None or isinstance(v, bool):
        return "not given"
    try:
        return f"{int(v):,}"
    except (TypeError, ValueError):
        return "not given"


def _outputs(g: _Given) -> Section | None:
    if not g.checks:
        return None
    sec = Section("outputs", "Output checks")
    rows = []
    for c in g.checks:
        worst = "none (identical)" if c.max_abs_error == 0 and c.nonfinite == 0 else (
            (f"{c.worst_key!s} " if c.worst_key is not None else "")
            + (f"[{', '.join(str(i) for i in c.worst_index)}]: " if c.worst_index else "")
            + f"{number(c.worst_reference)} against {number(c.worst_candidate)}"
            if c.worst_reference is not None and c.worst_candidate is not None else "none")
        rows.append([Cell(c.name), Cell("passed" if c.passed else "FAILED",
                                        "ok" if c.passed else "fail"),
                     Cell(number(c.max_abs_error), "num"), Cell(number(c.max_rel_error), "num"),
                     Cell(f"{c.cosine_similarity:.6f}", "num"),
                     Cell(_pct(c.top1_agreement) if c.top1_agreement is not None
                          else "not logits", "num"),
                     Cell(worst), Cell(f"rtol {exact(c.rtol)}, atol {exact(c.atol)}"),
                     Cell(f"{c.elements:,}" + (f" ({c.nonfinite:,} NaN or infinite apart)"
                                               if c.nonfinite else ""), "num")])
    sec.blocks.append(Table(["Check", "Result", "Max abs error", "Max rel error", "Cosine",
                             "Top-1 agreement", "Worst element (reference against candidate)",
                             "Tolerance", "Elements"], rows, frozenset({2, 3, 4, 5, 8})))
    per = [(c, d) for c in g.checks if len(c.outputs) > 1 for d in c.outputs]
    if per:
        sec.blocks.append(Table(
            ["Check", "Output", "Shape", "Dtypes", "Max abs error", "Max rel error", "Result"],
            [[Cell(c.name), Cell(str(d.key)), Cell("x".join(str(n) for n in d.shape) or
                                                    "scalar"),
              Cell(f"{d.reference_dtype} / {d.candidate_dtype}"),
              Cell(number(d.max_abs_error), "num"), Cell(number(d.max_rel_error), "num"),
              Cell("passed" if d.passed else "FAILED", "ok" if d.passed else "fail")]
             for c, d in per], frozenset({4, 5})))
    sec.blocks.append(P(["Passed means numpy.allclose(candidate, reference, rtol, atol) on "
                         "every output: |candidate - reference| ≤ atol + rtol·|reference| for "
                         "each element, computed in float64. The relative error is against "
                         "|reference| where it is not 0; the worst element is the one "
                         "furthest outside the tolerance."], "muted"))
    return sec


def _flag_words(flag: str) -> tuple[str, str]:
    """(what it means, the remedy) of a flag: its warning's own words (warn.c), the
    remedy in the words of the interface in effect."""
    cls = _native._warning_class((flag,))
    meaning = (cls.__doc__ or "").strip().split("\n")[0]
    text = _native._warning_texts(None).get(cls.__name__, "")
    remedy = text.split(" -- ", 1)[1] if " -- " in text else ""
    return meaning, remedy[:1].upper() + remedy[1:]


#: The flags of a run under load that no warning says (csrc/render/flags.c names them;
#: docs/load.md, Flags): what each means, and the remedy.  "overloaded" and "busy
#: machine" are warnings' causes: their words are the warnings' own (_flag_words).
_LOAD_FLAG_WORDS = {
    "requests dropped": ("the queue was full (max_queue) when some requests arrived; they "
                         "were turned away and are not in the latencies.",
                         "A lower rate, more workers, or a longer queue"),
    "requests unserved": ("requests still waiting when the run ended are not in the "
                          "latencies, which then understate the tail.",
                          "A lower rate, or more workers"),
    "few requests": ("fewer than 1,000 requests completed: the P99 rests on fewer than 10 "
                     "requests above it.", "A longer duration, or a higher rate"),
    "scheduler lag": ("the harness started requests late by a noticeable share of the P99 "
                      "(lag_p99_ms): the machine could not keep the schedule.",
                      "A quieter machine, or fewer workers"),
}


def _flags(g: _Given, labels: dict[int, str]) -> Section:
    sec = Section("flags", "Flags")
    by_flag: dict[str, list[str]] = {}
    for s, sw in _all_rows(g):
        for f in s.flags:
            by_flag.setdefault(f, []).append(_row_label(s, sw, labels))
    # a load result's own flags (LoadStats.flags; a search's probes above the peak are
    # overloaded by design and flag nothing)
    for x in g.loads:
        for f in _Load(x).get("flags") or ():
            by_flag.setdefault(str(f), []).append(_Load(x).name)
    items: list[list[Span]] = []
    for f, who in by_flag.items():
        meaning, remedy = _LOAD_FLAG_WORDS.get(f) or _flag_words(f)
        items.append([Cell(f, "warn"), f" ({', '.join(who)}): {meaning}"
                      + (f" Remedy: {remedy}." if remedy else "")])
    unstable = [f"{_label(s, sw.param)}" for sw in g.sweeps for s in sw if s.flags]
    if unstable:
        items.append([Cell("sweep", "warn"), ": a trend drawn through a flagged point "
                      "may be the machine's, not the parameter's (" + ", ".join(unstable)
                      + ")."])
    if items:
        sec.blocks.append(Items(items))
    else:
        sec.blocks.append(P(["No result carries a flag: the runs were stable, the machine "
                             "quiet, the harness's own cost small."]))
    return sec


# ---- environment and reproduction ------------------------------------------------------

def _envs(g: _Given, labels: dict[int, str]) -> list[tuple[str, dict[str, Any], str]]:
    """(label, env, device) of every measured result."""
    out = [(_row_label(s, sw, labels), dict(s.env or {}), s.device) for s, sw in _all_rows(g)]
    out += [(_Load(x).name, _Load(x).env, str(_Load(x).get("device") or "")) for x in g.loads]
    return out


_ENV_ROWS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("spatialhub-profiling", ("spatialhub_profiling",), "not recorded"),
    ("Python", ("python", "implementation"), "not recorded"),
    ("NumPy", ("numpy",), "not recorded"),
    ("torch", ("torch", "torch_cuda"), "not loaded"),
    ("ONNX Runtime", ("onnxruntime",), "not used"),
    ("CUDA driver", ("cuda_driver",), "not used (no CUDA device)"),
    ("GPU", ("gpu",), "none used"),
    ("CPU", ("cpu", "cpu_count"), "not recorded"),
    ("Platform", ("platform",), "not recorded"),
    ("CPU governor", ("cpu_governor",), "not readable here"),
    ("Turbo", ("turbo",), "not readable here"),
    ("Load average (1 min) at the start", ("load_avg_1min",), "not recorded"),
    ("Other processes' CPU share at the start", ("other_processes_cpu_share",),
     "not recorded"),
    ("Isolated CPUs", ("isolated_cpus",), "none"),
    ("Timer", ("timer", "timer_resolution_ns"), "not recorded"),
)


def _env_value(label: str, env: dict[str, Any], keys: tuple[str, ...], missing: str) -> str:
    first = env.get(keys[0])
    if first is None or first == "":
        return missing
    if label == "Python":
        return f"{first} ({env.get('implementation') or 'CPython'})"
    if label == "torch":
        cuda = env.get("torch_cuda")
        return f"{first} (CUDA {cuda})" if cuda else f"{first} (CPU build)"
    if label == "CPU":
        n = env.get("cpu_count")
        return f"{first}, {n} CPUs" if n else str(first)
    if label == "Turbo":
        return "on" if first else "off"
    if label.startswith("Load average"):
        return number(float(first))
    if label.startswith("Other processes"):
        return _pct(float(first))
    if label == "Timer":
        res = env.get("timer_resolution_ns")
        return f"{first}, resolution {res} ns" if res is not None else str(first)
    return str(first)


def _environment(g: _Given, labels: dict[int, str], command: str | None,
                 generated: str) -> tuple[Section, Section]:
    envs = _envs(g, labels)
    env_sec = Section("environment", "Environment")
    rows = []
    devices: dict[str, list[str]] = {}
    for label, _, dev in envs:
        if dev:
            devices.setdefault(dev, []).append(label)
    if devices:
        rows.append([Cell("Device"), Cell(_grouped({d: who for d, who in devices.items()},
                                                   len(envs)))])
    for name, keys, missing in _ENV_ROWS:
        values: dict[str, list[str]] = {}
        for label, env, _ in envs:
            values.setdefault(_env_value(name, env, keys, missing), []).append(label)
        if set(values) == {missing} and name in ("Isolated CPUs", "Turbo"):
            continue
        rows.append([Cell(name), Cell(_grouped(values, len(envs)))])
    machine_busy = [_row_label(s, sw, labels) for s, sw in _all_rows(g) if s.machine_busy]
    if machine_busy:
        rows.append([Cell("Busy machine"), Cell("yes, at the start of "
                                                + ", ".join(machine_busy), "warn")])
    if envs:
        env_sec.blocks.append(Table(["", "Value (and which results, where they differ)"],
                                    rows))
    else:
        env_sec.blocks.append(P(["No measured result among the results: nothing recorded "
                                 "about the machine."], "muted"))
    env_sec.blocks.append(P([f"Report written {generated} by spatialhub-profiling "
                             f"{_version()} (Python {sys.version.split()[0]})."], "muted"))

    repro = Section("reproduce", "How to reproduce")
    first = {k: v for _, env, _ in envs for k, v in reversed(list(env.items()))}
    pins = [f'"spatialhub-profiling=={first.get("spatialhub_profiling") or _version()}"']
    for key, dist in (("numpy", "numpy"), ("torch", "torch"), ("onnxruntime", "onnxruntime")):
        v = first.get(key)
        if v:
            pins.append(f'"{dist}=={v}"')
    lines = [f"# Python {str(first.get('python') or sys.version.split()[0])}",
             "pip install " + " ".join(pins)]
    if command:
        lines.append(command)
    repro.blocks.append(P(["The versions measured with, pinned"
                           + (", then the command that measured:" if command else ":")]))
    repro.blocks.append(Pre("\n".join(lines)))
    settings = []
    for s, sw in _all_rows(g):
        settings.append([Cell(_row_label(s, sw, labels)), Cell(s.device),
                         Cell(f"{s.warmup_iters:,}", "num"), Cell(f"{s.timed_iters:,}", "num"),
                         Cell(str(s.batch_size), "num"), Cell(s.cache or "warm"),
                         Cell(", ".join(f"{k}={v}" for k, v in (s.params or {}).items())
                              or "none")])
    if settings:
        repro.blocks.append(P(["Each result's settings (benchmark_callable's num_warmup, "
                               "num_iters, batch_size, cache; the swept parameters):"]))
        repro.blocks.append(Table(["Result", "Device", "Warm-up calls", "Timed calls",
                                   "Batch size", "Cache", "Parameters"], settings,
                                  frozenset({2, 3, 4})))
    spread_hint = ("A single run's median moves between runs on a busy machine; "
                   "repeat in fresh processes (benchmark_repeated, --processes) before "
                   "reading a small difference.")
    repro.blocks.append(P([spread_hint], "muted"))
    return env_sec, repro


def _grouped(values: dict[str, list[str]], total: int) -> str:
    if len(values) == 1:
        return next(iter(values))
    return "; ".join(f"{v} ({', '.join(who)})" for v, who in values.items())


def _version() -> str:
    from ._version import __version__
    return __version__


# ==== the entry point =====================================================================

def _format_of(path: pathlib.Path, fmt: str | None) -> str:
    if fmt is not None:
        if fmt not in ("html", "markdown"):
            raise ValueError(f"write_report(): format must be 'html' or 'markdown', "
                             f"got {fmt!r}")
        return fmt
    suffix = path.suffix.lower()
    if suffix in (".html", ".htm"):
        return "html"
    if suffix in (".md", ".markdown"):
        return "markdown"
    raise ValueError(f"write_report(): cannot tell the format from {path.name!r}: name it "
                     "*.html or *.md, or pass format='html' / 'markdown'")


def render_report(results: Any, *, title: str | None = None, baseline: Any = None,
                  budgets: Budgets | None = None, outputs: Any = None,
                  format: Literal["html", "markdown"] = "html",
                  command: str | None = None) -> str:
    """The report's text (what ``write_report`` writes); the same parameters."""
    g = _gather(results, outputs)
    base = _resolve_baseline(g, baseline)
    labels = _labels(g)
    verdicts = _verdicts(g, base, labels)
    checks = _budgets(g, labels, budgets)
    generated = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    sections = [_summary(g, base, labels, verdicts, checks), _results_table(g, labels)]
    for extra in (_distributions(g, labels), _sweeps(g, checks), _loads(g, checks),
                  _outputs(g)):
        if extra is not None:
            sections.append(extra)
    sections.append(_flags(g, labels))
    sections += list(_environment(g, labels, command, generated))
    if not any(isinstance(b, Table) for b in sections[1].blocks):
        sections.pop(1)                      # no closed-loop result: no results table
    title = title if title is not None else "Readiness report"
    n = len(g.benches) + sum(len(sw) for sw in g.sweeps) + len(g.loads)
    subtitle = (f"{n} measured result{'s' if n != 1 else ''}"
                + (f", {len(g.checks)} output check{'s' if len(g.checks) != 1 else ''}"
                   if g.checks else "")
                + f"; written {generated} by spatialhub-profiling {_version()}.")
    if format == "markdown":
        return markdown_page(title, subtitle, sections)
    return html_page(title, subtitle, sections, _version())


def write_report(results: Any, path: Path, *, title: str | None = None,
                 baseline: BenchmarkStats | str | Literal[False] | None = None,
                 budgets: Budgets | None = None,
                 outputs: OutputCheck | Iterable[OutputCheck] | None = None,
                 format: Literal["html", "markdown"] | None = None,
                 command: str | None = None) -> pathlib.Path:
    """Write the readiness report: one offline page that answers "can this model ship?".

    A self-contained HTML page (figures drawn by the package as inline SVG, nothing
    loaded from anywhere, no script: it reads offline, without JavaScript, and prints)
    or, for a pull-request comment, Markdown with the same sections and tables.  The
    sections: the verdict (each candidate against the baseline with its 95% interval,
    by ``compare_benchmarks``; budgets met or failed and by how much; outputs within
    tolerance or not), the results table (P50 to P99 with the median's interval,
    throughput, memory, first call), the latency distributions, the batch sweep's
    throughput against latency, latency against the offered rate for load runs, the
    output checks, flags in plain words, the environment and how to reproduce it.
    Every name and label is escaped by the core's one escaper.

    Parameters
    ----------
    results : result or iterable of results
        Any mix of ``BenchmarkStats`` (candidates, compared one by one with the
        baseline), ``SweepResult`` (a swept parameter: its trade-off curve; one
        without a parameter, such as ``benchmark_onnx``'s providers, is candidates),
        load results (``benchmark_load`` / ``find_peak_qps``), ``OutputCheck`` and
        ``Comparison`` (verdicts made already, shown as they are).
    path : str or os.PathLike
        The file to write; ``*.html`` / ``*.htm`` for HTML, ``*.md`` for Markdown
        (or say which with ``format``).
    title : str, optional
        The page's title; None: "Readiness report".
    baseline : BenchmarkStats, str, False or None, default None
        What the candidates are compared with: a result (added to the page when not
        among ``results``) or a result's name; None: the first ``BenchmarkStats`` when
        there are two or more and no ``Comparison`` was given; False: no comparison.
    budgets : dict, optional
        Limits: ``{"p99_ms": 30, "ram_delta_mb": 500}`` for every result that has the
        figure, or ``{"int8": {"p99_ms": 30}}`` keyed by a result's name (a check's
        candidate name counts) for some; both may be mixed, a name's own limit winning.
        A field is any number a result has; ``fps``, ``throughput``, ``achieved_qps``,
        ``offered_qps``, ``arrival_qps``, ``completed``, ``cosine_similarity`` and
        ``top1_agreement`` are floors (at least), every other field a ceiling (at most).
        For a sweep, each value is judged and the report says at which values the
        budget is met.
    outputs : OutputCheck or iterable of OutputCheck, optional
        Output checks (``check_outputs``); they may be among ``results`` too.
    format : {"html", "markdown"}, optional
        The markup; None: from the file's suffix.
    command : str, optional
        The command that measured, shown under "How to reproduce" (the CLI and the
        pytest plugin pass theirs).

    Returns
    -------
    pathlib.Path
        The file written.

    Raises
    ------
    TypeError
        A result, a budget or the baseline of another type.
    ValueError
        No results; a budget naming a result or figure that is not there; a baseline
        name that is not a result's; a path whose suffix says no format.
    OSError
        The file cannot be written.

    Examples
    --------
    >>> a = benchmark_callable(sorted, list(range(1000)), name="sorted", num_iters=30)
    >>> b = benchmark_callable(lambda x: sorted(x, reverse=True), list(range(1000)),
    ...                        name="reversed", num_iters=30)
    >>> write_report([a, b], "report.html", budgets={"p99_ms": 5})  # doctest: +SKIP
    PosixPath('report.html')
    """
    target = pathlib.Path(os.fspath(path))
    fmt = _format_of(target, format)
    text = render_report(results, title=title, baseline=baseline, budgets=budgets,
                         outputs=outputs, format=fmt,  # type: ignore[arg-type]
                         command=command)
    target.write_text(text, encoding="utf-8")
    return target
