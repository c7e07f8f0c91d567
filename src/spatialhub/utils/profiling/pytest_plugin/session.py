"""One pytest session's benchmarks: options, the compared run, saving, the gate."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from . import report
from .fixture import IGNORED_OPTIONS, BenchmarkFixture
from .gate import judge, run_spread_of

_IGNORED_CLI = ("min_time", "timer", "calibration_precision", "sort", "group_by", "columns",
                "name", "time_unit", "histogram", "csv", "cprofile", "cprofile_loops",
                "cprofile_top", "cprofile_dump", "netrc")


def _xdist_workers(config):
    if not config.pluginmanager.hasplugin("xdist"):
        return False
    try:
        n = config.getoption("numprocesses")
    except ValueError:
        return False
    return bool(n) or hasattr(config, "workerinput")


class BenchmarkSession:
    def __init__(self, config):
        self.config = config
        opt = config.getoption
        self.skip = opt("benchmark_skip") and not opt("benchmark_only")
        self.only = opt("benchmark_only")
        self.disabled = opt("benchmark_disable") and not opt("benchmark_enable")
        self.options = {
            "max_time": opt("benchmark_max_time"),
            "min_rounds": opt("benchmark_min_rounds"),
            "max_rounds": opt("benchmark_max_rounds"),
            "warmup": opt("benchmark_warmup"),
            "warmup_iterations": opt("benchmark_warmup_iterations"),
            "disable_gc": opt("benchmark_disable_gc"),
            "device": opt("benchmark_device"),
            "reference": opt("benchmark_reference") != "off",
        }
        self.notes = []
        if self.disabled is False and _xdist_workers(config):
            # each xdist worker would time with the others competing for the CPUs and
            # write its own report over the others' (pytest-benchmark does the same)
            self.disabled = True
            self.notes.append("benchmarks disabled: pytest-xdist is running tests in "
                              "parallel (use -p no:xdist or -n 0 to benchmark)")
        self.ignored = sorted("--benchmark-" + k.replace("_", "-") for k in _IGNORED_CLI
                              if opt("benchmark_" + k) is not None)
        self.fixtures = []
        self.storage = report.Storage(opt("benchmark_storage"))
        self.save = opt("benchmark_save")
        self.autosave = opt("benchmark_autosave")
        self.json_path = opt("benchmark_json")
        self.markdown_path = opt("benchmark_markdown")
        self.quiet = opt("benchmark_quiet")
        self.fail_exprs = opt("benchmark_compare_fail") or []
        compare = opt("benchmark_compare")
        if self.fail_exprs and compare is None:
            raise pytest.UsageError("--benchmark-compare-fail requires valid --benchmark-compare.")
        self.compared_path = None
        self.compared = {}
        self.history = {}
        self.run_spread = opt("benchmark_run_spread")
        self.use_reference = opt("benchmark_reference") != "off"
        if compare is not None:
            path = self.storage.find(compare)
            if path is None:
                msg = f"Can't compare. No benchmark files in {str(self.storage.dir)!r}"
                msg += ". Can't load the previous benchmark." if compare is True else \
                    f" match {compare!r}."
                if self.fail_exprs:
                    raise pytest.UsageError(msg)
                self.notes.append(msg)
            else:
                try:
                    data = json.loads(Path(path).read_text(encoding="utf-8"))
                    self.compared = {b["fullname"]: b for b in data["benchmarks"]}
                except (OSError, ValueError, KeyError, TypeError) as exc:
                    raise pytest.UsageError(f"Can't compare: cannot read {path}: {exc}") from None
                self.compared_path = path
                self.history = self._load_history()
        self.verdicts = {}
        self.regressed = False
        self.written = []

    HISTORY_RUNS = 10

    def _load_history(self):
        """Medians (seconds) of each benchmark in the latest saved runs: the between-run
        spread of identical code is estimated from them (``gate.run_spread_of``)."""
        hist = {}
        for path in self.storage.runs()[-self.HISTORY_RUNS:]:
            try:
                data = json.loads(Path(path).read_text(encoding="utf-8"))
                for b in data["benchmarks"]:
                    med = float(b["stats"]["median"])
                    if self.use_reference:
                        # corrected medians only: one raw median among them (a run saved
                        # with the reference off) would read as a huge spread
                        ref = (b.get("spatialhub") or {}).get("reference_s")
                        if not ref or not ref > 0:
                            continue
                        med /= float(ref)
                    hist.setdefault(b["fullname"], []).append(med)
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return hist

    def make_fixture(self, node):
        marker = node.get_closest_marker("benchmark")
        options = dict(self.options)
        if marker:
            options.update(marker.kwargs)
        used_ignored = sorted(IGNORED_OPTIONS.intersection(marker.kwargs)) if marker else []
        for k in used_ignored:
            note = f"@pytest.mark.benchmark({k}=...) is accepted and ignored"
            if note not in self.notes:
                self.notes.append(note)
        fx = BenchmarkFixture(node, options, self.fixtures.append, self.disabled)
        return fx

    # -- end of session ------------------------------------------------------------------

    def _threshold(self, baseline_bench):
        """The allowed slowdown as a fraction for this benchmark (the tightest EXPR)."""
        best = None
        for kind, value in self.fail_exprs:
            if kind == "pct":
                frac = value
            else:
                med = float(baseline_bench.get("stats", {}).get("median") or 0.0)
                frac = value / med if med > 0 else float("inf")
            best = frac if best is None else min(best, frac)
        return best

    def _judge_all(self):
        for fx in self.fixtures:
            if fx.has_error or fx.stats is None:
                continue
            base = self.compared.get(fx.fullname)
            if base is None:
                continue
            spread, spread_runs = self.run_spread, None
            if spread is None:
                hist = self.history.get(fx.fullname, ())
                spread = run_spread_of(hist)
                spread_runs = sum(1 for m in hist if m and m > 0) if spread is not None else None
            factor = None
            base_ref = (base.get("spatialhub") or {}).get("reference_s")
            if self.use_reference and base_ref and fx.reference_s:
                factor = fx.reference_s / float(base_ref)
            vd = judge(fx.name, report.stats_from_json(base), fx.stats.native,
                       self._threshold(base) if self.fail_exprs else None, run_spread=spread,
                       spread_runs=spread_runs, machine_factor=factor)
            self.verdicts[fx.fullname] = vd
            if vd.fails:
                self.regressed = True

    def finish(self, session):
        if self.compared:
            self._judge_all()
        ran = [fx for fx in self.fixtures if not fx.has_error and fx.stats is not None]
        if (self.save or self.autosave or self.json_path) and ran:
            env = ran[0].stats.native.env or {}
            minfo = report.machine_info(env)
            cinfo = report.commit_info()
            doc = report.session_json(self.fixtures, minfo, cinfo, True, self.verdicts)
            if self.json_path:
                Path(self.json_path).write_text(report.dumps(doc), encoding="utf-8")
                self.written.append(("JSON report", self.json_path))
            name = self.save
            if self.autosave:
                name = "{}_{}{}".format(cinfo["id"][:12], doc["datetime"][:19].replace(
                    "-", "").replace(":", "").replace("T", "_"),
                    "_uncommitted-changes" if cinfo["dirty"] else "")
            if name:
                path = self.storage.save(doc, name)
                self.written.append(("Saved benchmark data", str(path)))
        if self.markdown_path:
            Path(self.markdown_path).write_text(
                report.markdown_report(self.fixtures, self.verdicts, self.gate_line(),
                                       self.notes + self.ignored_notes()), encoding="utf-8")
            self.written.append(("Markdown summary", self.markdown_path))
        if self.regressed and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def ignored_notes(self):
        return [f"{o} is accepted for pytest-benchmark compatibility and ignored"
                for o in self.ignored]

    def gate_line(self):
        if not self.fail_exprs:
            if self.compared_path is not None:
                return f"Compared with `{Path(self.compared_path).name}` (no gate set)."
            return None
        failing = [v for v in self.verdicts.values() if v.fails]
        if failing:
            return (f"**Performance has regressed**: {len(failing)} benchmark(s) slower than "
                    f"`{Path(self.compared_path).name}` beyond the threshold, with 95% confidence.")
        return (f"Gate passed: no benchmark is slower than `{Path(self.compared_path).name}` "
                f"beyond the threshold with 95% confidence ({len(self.verdicts)} compared).")

    def display(self, tr):
        ran = [fx for fx in self.fixtures if not fx.has_error and fx.stats is not None]
        notes = self.notes + self.ignored_notes()
        if not ran and not self.written and not notes:
            return
        tr.ensure_newline()
        tr.section("benchmark (spatialhub)", sep="-", yellow=True)
        if ran and not self.quiet:
            if self.compared_path is not None:
                tr.write_line(f"Comparing against benchmarks from: {self.compared_path}")
            tr.write_line(report.terminal_table(self.fixtures, self.verdicts or None))
            tr.write_line("Legend: OPS = 1 / Mean (calls per second); Median 95% CI from "
                          "order statistics; percentiles NumPy-linear.")
            for fx in ran:
                for w in fx.warnings:
                    tr.write_line(f"  note {fx.name}: {w}")
        for n in notes:
            tr.write_line(f"  note: {n}")
        for what, where in self.written:
            tr.write_line(f"{what}: {where}")
        if self.verdicts:
            for vd in self.verdicts.values():
                if vd.fails or self.config.getoption("benchmark_verbose"):
                    tr.write_line(f"  {vd.name}: {vd.reason}", red=vd.fails)
        line = self.gate_line()
        if line and self.fail_exprs:
            tr.write_line(line.replace("**", ""), red=self.regressed, green=not self.regressed)
