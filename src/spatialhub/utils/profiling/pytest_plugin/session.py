"""One pytest session's benchmarks: options, the compared run, saving, the gate, the
report.  The order is pytest-benchmark's: the compared run is loaded at configure time,
results are saved and grouped at session finish (through its hooks), the table is
written in the terminal summary."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from .._readback import BadFile, BadValue, read_json
from .._words import PYTEST, remedy_words
from ..instructions import active, disagreements, probing
from . import report, spread, table
from .fixture import BenchmarkFixture, _fmt_time
from .gate import HISTORY_RUNS as _HISTORY_RUNS
from .gate import Verdict, check, judge, run_spread_of, undecided
from .logger import Logger
from .options import (DEFAULT_COLUMNS, INSTRUCTION_COLUMNS, first_or, judge_options,
                      load_timer, timer_name)

XDIST_WARNING = ("Benchmarks are automatically disabled because xdist plugin is active. "
                 "Benchmarks cannot be performed reliably in a parallelized environment.")


class BenchmarkSession:
    HISTORY_RUNS = _HISTORY_RUNS

    def __init__(self, config):
        self.config = config
        opt = config.getoption
        self.verbose = opt("benchmark_verbose")
        self.quiet = False if self.verbose else opt("benchmark_quiet")
        level = Logger.VERBOSE if self.verbose else Logger.QUIET if self.quiet else Logger.NORMAL
        self.logger = Logger(level, config=config)
        # pytest-benchmark's reading of --benchmark-skip / -only / -disable / -enable and
        # xdist, and every refused combination (options.judge_options; the first process
        # of a counted run asked the same before it started callgrind)
        judged = judge_options(config)
        self.skip, self.only, self.disabled = judged.skip, judged.only, judged.disabled
        # each xdist worker would time with the others competing for the CPUs and write
        # its own report over the others': benchmarks are off under xdist, as in
        # pytest-benchmark (said once, at the end, if a benchmark was collected)
        self.xdist_worker = os.environ.get("PYTEST_XDIST_WORKER")
        self.xdist_warning = judged.xdist
        self.xdist_benchmark_found = False
        # --benchmark-instructions: this is the re-run under callgrind (the first process
        # only started it: pytest_cmdline_main); count instead of timing
        self.instructions = judged.instructions
        if judged.counts and not active():
            # a session that would time natively and report no count -- and let a gate
            # on counts pass on "no data" -- is refused
            raise pytest.UsageError(
                "--benchmark-instructions: this process does not run under valgrind's "
                "callgrind, so it would count nothing (pytest --benchmark-instructions "
                "starts the run again under callgrind; here something else started the "
                "session, e.g. a plugin's own pytest_cmdline_main)")
        # a probe of a counted run (instructions.RUNS): counts like the reported run, but
        # writes nothing -- no saved run, no JSON, no Markdown, no histogram, no CSV
        self.probe = self.instructions and probing()
        # a probe of the spread between runs (spread.py): times like the session, writes
        # only its medians; and how many such probes a saving or comparing run adds
        self.spread_probe = spread.probing()
        n = opt("benchmark_processes")
        self.processes = spread.default_processes() if n is None else n
        self.cprofile_sort_by = opt("benchmark_cprofile")
        self.cprofile_top = opt("benchmark_cprofile_top")
        self.options = {
            "min_time": opt("benchmark_min_time"),
            "max_time": opt("benchmark_max_time"),
            "min_rounds": opt("benchmark_min_rounds"),
            "precision": opt("benchmark_precision"),
            "confidence": opt("benchmark_confidence"),
            "timer": load_timer(opt("benchmark_timer")),
            "calibration_precision": opt("benchmark_calibration_precision"),
            "disable_gc": opt("benchmark_disable_gc"),
            "warmup": opt("benchmark_warmup"),
            "warmup_iterations": opt("benchmark_warmup_iterations"),
            "cprofile": bool(self.cprofile_sort_by),
            "cprofile_loops": opt("benchmark_cprofile_loops"),
            "cprofile_dump": first_or(opt("benchmark_cprofile_dump")),
            # ours
            "max_rounds": opt("benchmark_max_rounds"),
            "device": opt("benchmark_device"),
            "reference": opt("benchmark_reference") != "off",
            "instructions": self.instructions,
        }
        self.sort = opt("benchmark_sort")
        if self.instructions and self.sort == "min":
            self.sort = "instructions"   # (the default sort, on valgrind's times otherwise)
        self.columns = list(opt("benchmark_columns") or
                            (INSTRUCTION_COLUMNS if self.instructions else DEFAULT_COLUMNS))
        self.group_by = opt("benchmark_group_by")
        self.name_format = table.NAME_FORMATS[opt("benchmark_name")]
        self.histogram = first_or(opt("benchmark_histogram"))
        self.csv = first_or(opt("benchmark_csv"))
        self.fixtures = []
        self.storage = report.Storage(opt("benchmark_storage"))
        self.save = opt("benchmark_save")
        self.autosave = opt("benchmark_autosave")
        self.json_path = opt("benchmark_json")
        self.markdown_path = opt("benchmark_markdown")
        self.report_path = opt("benchmark_report")
        self.fail_rules = judged.fail_rules
        self.run_spread = opt("benchmark_run_spread")
        self.use_reference = opt("benchmark_reference") != "off"
        self.notes = []
        self.compared_path = None
        self.compared = {}
        self.history = {}
        self.verdicts = {}
        self.checks = {}
        self.regressed = False
        self.groups = None
        self._env = None
        self.compare = opt("benchmark_compare")
        # the compared run could not be used (one line, said at the end; the session ends
        # with pytest's usage-error status once this run is saved)
        self.compare_error = None
        self.history_skipped = []

    def start(self):
        """Load the compared run (its machine_info hooks can reach this session now)."""
        if self.compare is not None and not self.spread_probe:
            self._load_compared(self.compare)

    def measures_spread(self):
        """A run that saves or compares measures each benchmark's spread between runs in
        fresh processes (spread.py), unless asked not to, counted, or itself a probe."""
        return (self.processes > 0 and not self.instructions and not self.spread_probe
                and not self.disabled and not self.xdist_worker
                and bool(self.save or self.autosave or self.compare is not None))

    # -- the compared run (configure time) -------------------------------------------------

    def _load_compared(self, compare):
        path = self.storage.find(compare)
        if path is None:
            msg = f"Can't compare. No benchmark files in {str(self.storage.root.resolve())!r}"
            msg += ". Can't load the previous benchmark." if compare is True else \
                f" match {compare!r}."
            if self.fail_rules:   # a gate with nothing to gate against: stop here
                raise pytest.UsageError(msg)
            self.logger.warning(msg)
            return
        # a bad file is the user's usage error, said in one line naming the file and the
        # field; the tests still run and this run is still saved (docs/reliability.md,
        # "Round 4")
        try:
            data = report.check_saved_run(read_json(path))
        except BadFile as exc:
            self.compare_error = f"Can't compare: {exc}"
            return
        except BadValue as exc:
            self.compare_error = f"Can't compare: {BadFile(path, str(exc))}"
            return
        self.compared = {b["fullname"]: b for b in data["benchmarks"]}
        self.compared_path = Path(path)
        self.config.hook.pytest_benchmark_compare_machine_info(
            config=self.config, benchmarksession=self, machine_info=self.machine_info(),
            compared_benchmark=data)
        self.history = self._load_history()
        self.logger.info(f"Comparing against benchmarks from: {path}", newline=False)

    def _load_history(self):
        """Medians (seconds; divided by the run's reference when it is on) of each
        benchmark in the latest saved runs: the between-run spread of identical code is
        estimated from them (``gate.run_spread_of``).  A file that cannot be read, or a
        bad value in what is read from it, leaves that file out, said in a note
        (``history_skipped``): it is one of many, not the file the user named."""
        entries = {}
        skipped = []
        for path in self.storage.runs()[-self.HISTORY_RUNS:]:
            try:
                medians = report.history_medians(read_json(path))
            except BadFile as exc:
                skipped.append(str(exc))
                continue
            except BadValue as exc:
                skipped.append(str(BadFile(path, str(exc))))
                continue
            for name, entry in medians.items():
                entries.setdefault(name, []).append(entry)
        self.history_skipped = skipped
        return {name: report.history_of(e, self.use_reference) for name, e in entries.items()}

    # -- machine and commit (through the hooks) ------------------------------------------

    def environment(self):
        """Our environment record for ``machine_info``: the first result's, else a probe."""
        for fx in self.fixtures:
            if fx.stats is not None and fx.native_clock:
                return fx.stats.native.env or {}
        if self._env is None:
            from .._native import _noop
            from .fixture import internal_run

            # (a busy-machine warning this probe gets is kept for the first result
            # measured on the busy machine: fixture.internal_run)
            self._env = internal_run(_noop, num_warmup=0, num_iters=1, track_ram=False,
                                     track_vram=False, progress=False).env or {}
        return self._env

    def machine_info(self):
        hook = self.config.hook
        info = hook.pytest_benchmark_generate_machine_info(config=self.config)
        hook.pytest_benchmark_update_machine_info(config=self.config, machine_info=info)
        return info

    def commit_info(self):
        hook = self.config.hook
        info = hook.pytest_benchmark_generate_commit_info(config=self.config)
        hook.pytest_benchmark_update_commit_info(config=self.config, commit_info=info)
        return info

    # -- the fixture ---------------------------------------------------------------------

    def make_fixture(self, request):
        node = request.node
        marker = node.get_closest_marker("benchmark")
        options = dict(self.options)
        if marker:
            options.update(marker.kwargs)
        if options.get("timer") is None:
            options["timer"] = self.options["timer"]
        fx = BenchmarkFixture(node, options, self.fixtures.append, self.disabled,
                              logger=self.logger, warner=node.warn)
        fx.cprofile_sort_by, fx.cprofile_top = self.cprofile_sort_by, self.cprofile_top
        return fx

    def note_xdist_benchmark(self):
        """A benchmark was collected.  Under xdist the workers collect: they tell the
        controller (``workeroutput``, read in ``node_down``), which says it once at its
        end -- a worker's own stderr may be cut off when the controller exits."""
        if not self.xdist_warning:
            return
        out = getattr(self.config, "workeroutput", None)
        if out is not None:
            out["spatialhub_benchmark_collected"] = True
        else:
            self.xdist_benchmark_found = True

    def node_down(self, node):
        if self.xdist_warning and (getattr(node, "workeroutput", None) or {}).get(
                "spatialhub_benchmark_collected"):
            self.xdist_benchmark_found = True

    def unconfigure(self):
        if self.xdist_benchmark_found and getattr(self.config, "workeroutput", None) is None:
            self.logger.warning(XDIST_WARNING)

    # -- end of session ------------------------------------------------------------------

    def _ran(self):
        return [fx for fx in self.fixtures if not fx.has_error and fx.stats is not None]

    def _judge_all(self):
        # the verdicts' reasons name this plugin's options, not our Python functions
        with remedy_words(PYTEST):
            self._judge_each()

    def _judge_each(self):
        interval_rules = [r for r in self.fail_rules if r.method == "interval"]
        for fx in self._ran():
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
            ctx = dict(run_spread=spread, spread_runs=spread_runs, machine_factor=factor,
                       process_medians=(report.process_medians(base),
                                        getattr(fx, "process_medians", None)),
                       probed=getattr(fx, "load_stats", None) is None)
            baseline = report.stats_from_json(base)
            saved_stats = dict(base.get("stats") or {})
            current = report.bench_to_json(fx, include_data=False)["stats"]
            if self.instructions:
                # what the table shows: the count's reading (the times are valgrind's)
                self.verdicts[fx.fullname] = self._count_verdict(fx.name, saved_stats, current)
            else:
                # what the table shows: the median's reading, with the tightest median or
                # mean threshold asked for (None: report only)
                fracs = [r.fraction(float(saved_stats.get(r.field) or 0.0))
                         for r in interval_rules]
                self.verdicts[fx.fullname] = judge(fx.name, baseline, fx.stats.native,
                                                   min(fracs) if fracs else None, **ctx)
            checks = [check(r, fx.name, saved_stats, current, baseline, fx.stats.native, **ctx)
                      for r in self.fail_rules]
            self.checks[fx.fullname] = checks
            if any(c.fails for c in checks):
                self.regressed = True

    def _count_verdict(self, name, saved_stats, current):
        """The count's reading for the table, with the tightest instructions threshold
        asked for (None: report only)."""
        from ..instructions import judge_counts

        saved = saved_stats.get("instructions")
        fracs = [r.fraction(float(saved)) for r in self.fail_rules
                 if r.method == "count" and saved]
        cv = judge_counts(name, saved, current.get("instructions"),
                          min(fracs) if fracs else None)
        return Verdict(name, cv.verdict, cv.ratio, None, None, cv.threshold, cv.fails,
                       cv.reason)

    def finish(self, session):
        if self.spread_probe:   # a probe: its medians, nothing else
            spread.record(self._ran())
            return
        if self.measures_spread() and self._ran():
            medians, took = spread.measure(self.config, self._ran(), self.processes,
                                           lambda text: self.logger.info(text))
            for fx in self._ran():
                fx.process_medians = medians.get(fx.fullname)
            self.notes.append(f"the spread between runs measured in {self.processes} more "
                              f"fresh processes ({took:.0f} s; --benchmark-processes)")
        # judged first, so that the saved run carries the verdicts; saved whatever the
        # judging does (what was measured is never lost)
        try:
            if self.compared:
                self._judge_all()
        finally:
            if not self.probe:
                self._save()
        if self.probe:
            return
        rows = self._rows()
        if rows:
            self.groups = self.config.hook.pytest_benchmark_group_stats(
                config=self.config, benchmarks=rows, group_by=self.group_by)
        if self.markdown_path:
            Path(self.markdown_path).write_text(
                table.markdown(self.groups or [], self.columns, self._scale, self.sort,
                               self.name_format, self.gate_line(), self.failing_lines(),
                               self.notes + self.measurement_notes()),
                encoding="utf-8")
            self.logger.info(f"Wrote Markdown summary in: {self.markdown_path}")
        if self.report_path:
            self._write_report()
        if self.regressed and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if self.compare_error and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.USAGE_ERROR

    def _write_report(self):
        """--benchmark-report: the readiness report of the benchmarks run, each with the
        gate's verdict against the compared run (the same reading the table shows)."""
        import copy
        import shlex

        from .._native import Comparison
        from ..report import write_report
        from .gate import RESAMPLES

        ran = self._ran()
        if not ran:
            self.logger.warning("Not writing the report, no benchmarks have been run!")
            return
        names = [fx.name for fx in ran]
        results = []
        for fx in ran:
            s = copy.copy(fx.stats.native)
            s.name = fx.name if names.count(fx.name) == 1 else fx.fullname
            results.append(s)
        for fx, s in zip(ran, list(results)):
            vd, base = self.verdicts.get(fx.fullname), self.compared.get(fx.fullname)
            if vd is None or base is None or vd.ratio is None or vd.verdict not in (
                    "faster", "slower", "same", "inconclusive"):
                continue
            saved = report.stats_from_json(base)
            results.append(Comparison(
                f"{s.name} ({self.compared_path.name})", s.name, saved.median_ms,
                s.median_ms, vd.ratio, vd.ci_low, vd.ci_high, vd.verdict, RESAMPLES,
                reason=vd.reason))
        args = self.config.invocation_params.args
        try:
            write_report(results, self.report_path, title="Benchmarks of the test suite",
                         baseline=False, command="pytest " + shlex.join(args))
        except OSError as exc:
            self.logger.warning(f"Can't write the report {self.report_path}: "
                                f"{exc.strerror or exc}")
            return
        self.logger.info(f"Wrote the readiness report in: {self.report_path}")

    def _save(self):
        name = self.save
        if not (name or self.autosave or self.json_path):
            return
        results = [fx.stats for fx in self._ran()]
        if not results:
            if not self.disabled:
                self.logger.warning("Not saving anything, no benchmarks have been run!")
            return
        hook, config = self.config.hook, self.config
        minfo = self.machine_info()
        cinfo = self.commit_info()

        def document(include_data):
            doc = hook.pytest_benchmark_generate_json(
                config=config, benchmarks=results, include_data=include_data,
                machine_info=minfo, commit_info=cinfo)
            hook.pytest_benchmark_update_json(config=config, benchmarks=results, output_json=doc)
            return doc

        if self.json_path:
            Path(self.json_path).write_text(report.dumps(document(True)), encoding="utf-8")
            self.logger.info(f"Wrote benchmark data in: {self.json_path}")
        if self.autosave:
            name = "{}_{}{}".format(
                str(cinfo.get("id", "unversioned"))[:12],
                time.strftime("%Y%m%d_%H%M%S", time.gmtime()),
                "_uncommitted-changes" if cinfo.get("dirty") else "")
        if name:
            # saved runs always hold the raw timings: the gate needs them
            path = self.storage.save(document(True), name)
            self.logger.info(f"Saved benchmark data in: {path}")

    def _rows(self):
        """The table's rows: for each result, the compared run's row (when there is one)
        above the new one, pytest-benchmark's order."""
        rows = []
        source = None
        if self.compared_path is not None:
            source = table._short_source(
                self.compared_path.relative_to(self.storage.root)
                if self.compared_path.is_relative_to(self.storage.root)
                else self.compared_path, report.machine_id())
        for fx in self._ran():
            base = self.compared.get(fx.fullname)
            if base is not None:
                rows.append(table.saved_row(base, source, self.compared_path))
            entry = report.bench_to_json(fx, include_data=False)
            row = table.flat_row(entry, source="NOW" if base is not None else None)
            row["data"] = list(fx.stats.stats.data)
            if fx.cprofile_stats is not None:
                row["cprofile"] = report.cprofile_functions(fx.cprofile_stats,
                                                            self.cprofile_sort_by,
                                                            self.cprofile_top)
            if self.compared:
                row["verdict"] = self._verdict_cell(fx.fullname)
            rows.append(row)
        return rows

    def _verdict_cell(self, fullname):
        vd = self.verdicts.get(fullname)
        if vd is None:
            return "(new)"
        cell = vd.verdict if vd.ratio is None else f"{vd.ratio:.3f}x {vd.verdict}"
        failing = [str(c.rule) for c in self.checks.get(fullname, ()) if c.fails]
        if failing:
            cell += " FAIL"
        return cell

    def _scale(self, **kw):
        return self.config.hook.pytest_benchmark_scale_unit(config=self.config, **kw)

    def measurement_notes(self):
        notes = [f"{fx.name}: {w}" for fx in self._ran() for w in fx.warnings]
        notes += [f"the gate's history skips {line}" for line in self.history_skipped]
        if self.instructions and self._ran():
            notes.append("instructions per call counted by valgrind's callgrind (warm-up "
                         "excluded, the collector held off, the calling thread only); the "
                         "times were measured under valgrind (~50x native): not wall time")
            uncounted = [fx.name for fx in self._ran()
                         if getattr(fx.stats.native, "instructions_per_call", None) is None]
            if uncounted:
                notes.append(f"no instruction count came back for {', '.join(uncounted)} "
                             "(is the native module stripped of its symbols? callgrind "
                             "finds shp_counted_call by name)")
            notes.extend(disagreements())
        return notes

    def failing_lines(self):
        return [f"{fullname}: {c.reason}" for fullname, checks in self.checks.items()
                for c in checks if c.fails]

    def gate_line(self):
        if self.compare_error:
            said = self.compare_error.removeprefix("Can't compare: ").replace("`", "'")
            return f"**Can't compare**: `{said}`"
        name = self.compared_path.name if self.compared_path is not None else None
        if not self.fail_rules:
            return f"Compared with `{name}` (no gate set)." if name else None
        rules = " ".join(str(r) for r in self.fail_rules)
        how = ("median and mean judged with 95% confidence, noise included; "
               "other fields by raw threshold")
        if any(r.method == "count" for r in self.fail_rules):
            how = "instructions judged as counts per call, which load does not move; " + how
        failing = {f for f, checks in self.checks.items() if any(c.fails for c in checks)}
        if failing:
            return (f"**Performance has regressed**: {len(failing)} benchmark(s) beyond "
                    f"`{rules}` against `{name}` ({how}).")
        open_ = sum(any(undecided(c) for c in checks) for checks in self.checks.values())
        if not open_:
            return (f"Gate passed: no benchmark beyond `{rules}` against `{name}` "
                    f"({len(self.checks)} compared; {how}).")
        return (f"Gate passed: no benchmark beyond `{rules}` against `{name}` "
                f"({len(self.checks)} compared; {how}); **{open_} not judged** (each "
                "one's reason says why, and what would let it be judged).")

    def display(self, tr):
        if self.probe:
            return
        if self.groups and not self.quiet:
            tr.ensure_newline()
            table.render(tr, self.groups, self.columns + (["verdict"] if self.compared else []),
                         self.sort, self.name_format, self._scale)
        if self.groups and self.histogram:
            for path in table.write_histograms(self.histogram, self.groups, self._scale,
                                               self.sort):
                self.logger.info(f"Generated histogram: {path}", bold=True)
        if self.groups and self.csv:
            path = table.write_csv(self.csv, self.groups)
            self.logger.info(f"Generated csv: {path}", bold=True)
        if self.groups and not self.quiet:
            self._display_cprofile(tr)
        notes = self.notes + (self.measurement_notes() if not self.quiet else [])
        for n in notes:
            tr.write_line(f"  note: {n}")
        for fullname, checks in self.checks.items():
            for c in checks:
                if c.fails or self.verbose or undecided(c):
                    tr.write_line(f"  {fullname}: {c.reason}", red=c.fails)
        if self.compared and not self.fail_rules and self.verbose:
            for fullname, vd in self.verdicts.items():
                tr.write_line(f"  {fullname}: {vd.reason}")
        if self.compare_error:
            tr.write_line(f"ERROR: {self.compare_error}", red=True, bold=True)
            return
        line = self.gate_line()
        if line and self.fail_rules:
            tr.write_line(line.replace("**", "").replace("`", ""), red=self.regressed,
                          green=not self.regressed)

    def _display_cprofile(self, tr):
        shown = False
        for _group, rows in self.groups:
            for row in rows:
                if "cprofile" not in row:
                    continue
                if not shown:
                    tr.section("cProfile (time in s)", sep="-", yellow=True)
                    shown = True
                tr.write(row["fullname"], yellow=True)
                tr.write_line(f" ({row['source']})" if row.get("source") else "")
                tr.write_line("ncalls\ttottime\tpercall\tcumtime\tpercall\t"
                              "filename:lineno(function)")
                for f in row["cprofile"]:
                    tr.write_line(f"{f['ncalls_recursion']}\t{f['tottime']:.4f}\t"
                                  f"{f['tottime_per']:.4f}\t{f['cumtime']:.4f}\t"
                                  f"{f['cumtime_per']:.4f}\t{f['function_name']}")
                tr.write("\n")


def report_header(config, bs):
    """pytest-benchmark's header line (``benchmark: VERSION (defaults: ...)``) with ours."""
    o = bs.options
    min_time = _fmt_time(float(o["min_time"])) + "s"
    max_time = _fmt_time(float(o["max_time"])) + "s"
    return (f"benchmark: spatialhub-profiling {report._version()} (defaults: "
            f"timer={timer_name(o['timer'])} disable_gc={o['disable_gc']} "
            f"min_rounds={o['min_rounds']} min_time={min_time} max_time={max_time} "
            f"calibration_precision={o['calibration_precision']} warmup={o['warmup']} "
            f"warmup_iterations={o['warmup_iterations']}; spatialhub: "
            f"max_rounds={o['max_rounds']} device={o['device']} "
            f"reference={'auto' if o['reference'] else 'off'}"
            f"{' instructions=callgrind' if o.get('instructions') else ''})")
