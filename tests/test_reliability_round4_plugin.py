"""Reliability round 4 (issue 30), the pytest plugin and the counted mode: what is read
from disk is checked before use (a bad saved run is one line naming the file and the
field, and the new run is still saved; a bad history file is skipped with a note; a bad
CLI --compare file or calibration file is named with its field), options are judged as
pytest-benchmark judges them (--benchmark-disable then --benchmark-enable counts under
callgrind), the counted mode judges counts only (a time rule is refused before anything
runs), plugin results keep every field a direct benchmark_callable call has (the busy
flag, its rerun floor, the busy warning once), and only valgrind messages that mean the
count is wrong fail a counted run.  Each regression test failed on a601027 (findings:
docs/reliability.md, "Round 4: what is read from disk, and how options are judged")."""
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import spatialhub.utils.profiling as prof
from spatialhub.utils.profiling import _native, benchmark_callable

HAVE_VALGRIND = shutil.which("valgrind") is not None
NO_VALGRIND = "valgrind is not installed (the counted mode runs under valgrind's callgrind)"
if HAVE_VALGRIND:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from reliability_support import UNDER_SANITIZER
    HAVE_VALGRIND = not UNDER_SANITIZER
    NO_VALGRIND = "valgrind cannot run a process that preloads ASan"

# one native run per benchmark, no reference workload: what these tests look at is not
# the measurement
QUICK = ["--benchmark-max-time=0.02", "--benchmark-max-rounds=100",
         "--benchmark-reference=off"]


def run_pytest(tmp_path, source, *args, env=None, files=None, timeout=240):
    """pytest on `source` in a child, in a session of its own (a timeout stops it and
    whatever it started)."""
    (tmp_path / "test_subject.py").write_text(textwrap.dedent(source))
    for name, text in (files or {}).items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    e = dict(os.environ)
    e.pop("PYTEST_ADDOPTS", None)
    e.update(env or {})
    p = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-p", "no:benchmark", *args], cwd=tmp_path, env=e,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    except BaseException:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise
    return p.returncode, out


FAKE_VALGRIND = """#!{python}
import json, os, sys
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
"""


def fake_valgrind(tmp_path):
    """A `valgrind` on PATH that writes down each call and runs nothing."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "valgrind"
    exe.write_text(FAKE_VALGRIND.format(python=sys.executable))
    exe.chmod(0o755)
    log = tmp_path / "calls.jsonl"
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "FAKE_LOG": str(log)}
    return env, lambda: [json.loads(x) for x in log.read_text().splitlines()] \
        if log.exists() else []


BENCH = """
    def test_it(benchmark):
        benchmark(sum, range(100))
"""


# ---- 3: a bad value in a saved run ---------------------------------------------------------

def saved_run(**stats):
    """A saved run as pytest-benchmark 5.2.3 writes it (with --benchmark-save-data)."""
    data = [1.0e-6 + 1e-9 * i for i in range(20)]
    st = {"min": min(data), "max": max(data), "mean": float(np.mean(data)),
          "stddev": float(np.std(data, ddof=1)), "rounds": 20, "median": float(np.median(data)),
          "iqr": 1e-8, "q1": 1.005e-6, "q3": 1.015e-6, "iqr_outliers": 0,
          "stddev_outliers": 6, "outliers": "6;0", "ld15iqr": min(data),
          "hd15iqr": max(data), "ops": 1e6, "total": sum(data), "data": data,
          "iterations": 1}
    st.update(stats)
    return {"machine_info": {"node": "vm", "machine": "x86_64", "cpu": {"brand_raw": "x"}},
            "commit_info": {"id": "unversioned"},
            "benchmarks": [{"group": None, "name": "test_it",
                            "fullname": "test_subject.py::test_it", "params": None,
                            "param": None, "extra_info": {}, "options": {}, "stats": st}],
            "datetime": "2026-12-04T13:20:49+00:00", "version": "5.2.3"}


def store(tmp_path):
    from spatialhub.utils.profiling.pytest_plugin.report import machine_id

    d = tmp_path / ".benchmarks" / machine_id()
    d.mkdir(parents=True, exist_ok=True)
    return d


def bad(doc, path, value):
    """`doc` with the value at `path` (keys and indices) replaced."""
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return doc


@pytest.mark.parametrize("text, field, gate", [
    (json.dumps(bad(saved_run(), ["benchmarks", 0, "stats", "data", 3], None)),
     "benchmarks[0].stats.data[3] is not a number (null)", True),
    (json.dumps(bad(saved_run(), ["benchmarks", 0, "stats"], None)),
     "benchmarks[0].stats is not an object (null)", True),
    (json.dumps(saved_run(median="abc")),
     'benchmarks[0].stats.median is not a number ("abc")', True),
    (json.dumps(saved_run(mean="abc")),       # read only by the table, after the save
     'benchmarks[0].stats.mean is not a number ("abc")', False),
    ("{", "is not JSON (Expecting property name enclosed in double quotes: line 1 column 2 "
          "(char 1))", True),
])
def test_a_bad_saved_run_is_one_line_and_the_new_run_is_still_saved(tmp_path, text, field,
                                                                      gate):
    """Defect 3: a null sample, `"stats": null`, a non-numeric median raised inside
    pytest_sessionfinish (a traceback, no table, exit 1) and the run's autosave was never
    written; unreadable JSON stopped the session before any test ran."""
    (store(tmp_path) / "0001_base.json").write_text(text)
    rc, out = run_pytest(tmp_path, BENCH, "--benchmark-compare=0001", "--benchmark-autosave",
                         "--benchmark-markdown=summary.md",
                         *(["--benchmark-compare-fail=median:10%"] if gate else []), *QUICK)
    name = f".benchmarks/{store(tmp_path).name}/0001_base.json"
    said = [line for line in out.splitlines() if "Can't compare" in line]
    assert said == [f"ERROR: Can't compare: {name}: {field}"], out
    assert rc == 4, out                       # the user's file is bad: a usage error
    assert "Traceback" not in out and "1 passed" in out, out
    assert "Name (time in" in out and "Gate passed" not in out, out   # the table, no verdict
    md = (tmp_path / "summary.md").read_text()
    assert f"**Can't compare**: `{name}: {field}`" in md, md
    runs = sorted(p.name for p in store(tmp_path).iterdir())
    assert len(runs) == 2 and runs[0] == "0001_base.json", runs       # this run, saved
    saved = json.loads((store(tmp_path) / runs[1]).read_text())
    assert saved["benchmarks"][0]["fullname"] == "test_subject.py::test_it"
    assert len(saved["benchmarks"][0]["stats"]["data"]) >= 5


def test_a_pytest_benchmark_saved_run_passes_the_checks(tmp_path):
    """The checks accept what pytest-benchmark 5.2.3 saves, with and without raw data."""
    doc = saved_run()
    del doc["benchmarks"][0]["stats"]["data"]
    (store(tmp_path) / "0001_pb.json").write_text(json.dumps(doc))
    rc, out = run_pytest(tmp_path, BENCH, "--benchmark-compare=0001",
                         "--benchmark-compare-fail=median:10%", *QUICK)
    assert rc == 0 and "Gate passed" in out and "no data" in out, out


def test_a_bad_history_file_is_skipped_with_one_note(tmp_path):
    """The gate's history (the last 10 saved runs) read each file inside an `except`:
    a bad one was dropped unsaid.  It is skipped, and a note under the table says which
    file and which field."""
    d = store(tmp_path)
    for i, median in enumerate([1.0e-6, 1.01e-6, "abc", 0.99e-6]):
        (d / f"{i + 1:04d}_r{i + 1}.json").write_text(json.dumps(saved_run(median=median)))
    rc, out = run_pytest(tmp_path, BENCH, "--benchmark-compare=0004",
                         "--benchmark-compare-fail=median:200%", *QUICK)
    assert rc == 0 and "Gate passed" in out, out
    flat = " ".join(out.split())
    assert (f"note: the gate's history skips .benchmarks/{d.name}/0003_r3.json: "
            'benchmarks[0].stats.median is not a number ("abc")') in flat, out


# ---- 4: --benchmark-disable, then --benchmark-enable ---------------------------------------

def test_benchmark_enable_overrides_an_ini_disable_in_the_counted_mode(tmp_path):
    """Defect 4: addopts = --benchmark-disable plus --benchmark-enable on the command line
    (pytest-benchmark's documented pattern: disabled = disable and not enable) ran
    --benchmark-instructions natively: no count, "Gate passed" on a 10x slowdown, and
    without --benchmark-compare a KeyError: 'instructions'.  It must run under callgrind:
    the fake valgrind is called for the two probes and the reported run."""
    env, calls = fake_valgrind(tmp_path)
    rc, out = run_pytest(tmp_path, BENCH, "--benchmark-enable", "--benchmark-instructions",
                         env=env, files={"pytest.ini": """
                             [pytest]
                             addopts = --benchmark-disable
                         """})
    assert rc == 0, out
    assert len(calls()) == 3, out
    assert all("--tool=callgrind" in c for c in calls())


def test_a_count_gate_fails_when_the_new_run_counted_nothing():
    """Behind defect 4: a count rule read a new run without a count as "no data", and the
    gate passed.  Under --benchmark-instructions a benchmark without a count means the
    run did not count: the rule fails, saying so."""
    from spatialhub.utils.profiling.pytest_plugin.gate import check_count, parse_fail_rule

    c = check_count(parse_fail_rule("instructions:1%"), "test_it",
                    {"instructions": 150_112.0, "median": 1e-6}, {"median": 1e-5})
    assert c.fails, c
    assert "the new run has no instructions count" in c.reason, c.reason
    # a saved run without counts (a timed one) is still not judged: nothing to hold to
    c = check_count(parse_fail_rule("instructions:1%"), "test_it", {"median": 1e-6},
                    {"instructions": 150_112.0})
    assert not c.fails and "not judged" in c.reason, c


def test_the_table_picks_a_time_unit_when_sorted_by_instructions():
    """The KeyError: 'instructions' of defect 4: the unit of a table sorted by counts was
    read from the count column, which a row without a count lacks."""
    from spatialhub.utils.profiling.pytest_plugin.table import scale_unit

    rows = [{"min": 2e-6, "max": 3e-6, "instructions": None}, {"min": 4e-6, "max": 5e-6}]
    assert scale_unit(None, "seconds", rows, {"min": 2e-6}, {"min": 4e-6},
                      "instructions") == ("u", 1e6)


def test_a_session_that_would_count_outside_callgrind_is_refused(tmp_path):
    """What made defect 4 possible: a session under --benchmark-instructions that was not
    the re-run under callgrind timed natively and compared "no data".  Here a conftest
    starts the session itself, as a plugin that takes over pytest_cmdline_main would."""
    rc, out = run_pytest(tmp_path, BENCH, "--benchmark-instructions", files={"conftest.py": """
        import pytest
        from _pytest.main import _main, wrap_session

        @pytest.hookimpl(tryfirst=True)
        def pytest_cmdline_main(config):
            return wrap_session(config, _main)
    """})
    assert rc == 4, out
    assert "--benchmark-instructions: this process does not run under valgrind's " \
           "callgrind" in " ".join(out.split()), out


# ---- 5: time rules under --benchmark-instructions ------------------------------------------

@pytest.mark.parametrize("rules, named", [
    (["median:10%"], "median:10%"),
    (["mean:5%"], "mean:5%"),
    (["min:0.001"], "min:0.001"),
    (["instructions:1%", "max:20%"], "max:20%"),
])
def test_a_time_rule_under_instructions_is_refused_before_anything_runs(tmp_path, rules,
                                                                         named):
    """Defect 5: a time rule under --benchmark-instructions compared valgrind's times with
    native ones (identical code: "9735.7% slower", "Performance has regressed").  It is a
    usage error naming the count rule to use, said before any callgrind run starts."""
    env, calls = fake_valgrind(tmp_path)
    rc, out = run_pytest(tmp_path, BENCH, "--benchmark-instructions", "--benchmark-compare",
                         *[f"--benchmark-compare-fail={r}" for r in rules], env=env)
    flat = " ".join(out.split())
    assert rc == 4, out
    assert (f"--benchmark-compare-fail={named} judges times, and under "
            "--benchmark-instructions the times are valgrind's") in flat, out
    assert "--benchmark-compare-fail=instructions:N%" in flat, out
    assert calls() == [], calls()


# ---- 6: plugin results keep what a direct call has -----------------------------------------

def work():
    return sum(range(30))


def nonnull(stats):
    return {k for k, v in stats.to_dict(samples=True).items() if v is not None}


def direct(num_warmup=5, num_iters=40, busy=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", prof.BenchmarkWarning)
        s = benchmark_callable(work, num_warmup=num_warmup, num_iters=num_iters,
                               progress=False)
    if busy is not None:
        s.machine_busy = busy
        _native._apply_rerun(s)
    return s


def test_pooled_and_per_iteration_results_keep_every_field_of_the_runs():
    """Defect 6: _pool_segments and _per_iteration built new stats and dropped
    machine_busy (and _per_iteration also the first call, warm-up, settle count, cache
    state and OS counters)."""
    from spatialhub.utils.profiling.pytest_plugin.fixture import _per_iteration, _pool_segments

    a, b = direct(), direct(num_warmup=0)
    assert a.machine_busy is not None          # Linux reads the machine's load
    assert nonnull(a) - nonnull(_pool_segments([a, b])) == set()
    assert nonnull(a) - nonnull(_per_iteration(a, 4)) == set()


def test_a_busy_run_keeps_its_flag_and_its_rerun_floor_through_the_plugin():
    """Defect 6: the busy flag was dropped, and with it the busy rerun floor (25% between
    runs, "assumed busy"): the fixture's result allowed 15%."""
    from spatialhub.utils.profiling.pytest_plugin.fixture import _per_iteration, _pool_segments

    a, b = direct(busy=True), direct(busy=False)
    expect_basis(a, "assumed busy")
    for made in (_pool_segments([a, b]), _per_iteration(a, 4)):
        assert made.machine_busy is True, made
        expect_basis(made, "assumed busy")
    quiet = _pool_segments([direct(busy=False), direct(busy=False)])
    assert quiet.machine_busy is False
    expect_basis(quiet, "assumed")


def expect_basis(s, word):
    """The rerun basis a single run states: `word`, unless its samples show two modes or a
    drift (a sub-microsecond call on a loaded machine may): then no interval, the reason."""
    if s.stability in ("multimodal", "drifting"):
        assert s.rerun_basis.startswith(("two modes:", "drifting:")), s.rerun_basis
        assert s.rerun_low_ms is None and s.rerun_high_ms is None
    else:
        # samples that vary slowly within the run (a sanitizer's or a busy lane's) widen
        # the interval beyond the assumption, and say so: 'slow variation'
        assert s.rerun_basis in (word, "slow variation"), (s.stability, s.rerun_basis)


FIELDS_SRC = """
    import json, os, warnings
    from spatialhub.utils.profiling import BenchmarkWarning, benchmark_callable

    def work():
        return sum(range(30))

    def fields(s):
        # a rerun interval is None, with its reason in rerun_basis, for samples in two
        # modes or drifting: a property of the samples (a busy CI lane makes them), not a
        # field dropped
        d = s.to_dict(samples=True)
        return sorted(k for k, v in d.items()
                      if v is not None or (k.startswith("rerun_") and d.get("rerun_basis")))

    def record(name, benchmark, num_warmup):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", BenchmarkWarning)
            d = benchmark_callable(work, num_warmup=num_warmup, num_iters=40, progress=False)
        with open(os.environ["OUT"], "a") as f:
            f.write(json.dumps([name, fields(benchmark.stats.native), fields(d),
                                benchmark.stats.iterations]) + "\\n")

    def test_call(benchmark):                 # calibrated loops, 8 segments, the reference
        benchmark(work)
        record("call", benchmark, 5)

    def test_pedantic_loops(benchmark):
        benchmark.pedantic(work, rounds=20, warmup_rounds=2, iterations=3)
        record("pedantic_loops", benchmark, 2)

    def test_pedantic_setup(benchmark):
        benchmark.pedantic(work, setup=lambda: None, rounds=20)
        record("pedantic_setup", benchmark, 0)
"""


def test_fixture_results_keep_every_field_of_a_direct_call(tmp_path):
    """Defect 6, through the fixture: every field a direct benchmark_callable call on the
    same function fills is filled in the fixture's result (benchmark(func) on calibrated
    loops and segments; pedantic with iterations; pedantic with a setup)."""
    out_file = tmp_path / "fields.jsonl"
    rc, out = run_pytest(tmp_path, FIELDS_SRC, "--benchmark-max-time=0.05",
                         env={"OUT": str(out_file)})
    assert rc == 0, out
    rows = [json.loads(x) for x in out_file.read_text().splitlines()]
    assert [r[0] for r in rows] == ["call", "pedantic_loops", "pedantic_setup"]
    assert rows[0][3] > 1 and rows[1][3] == 3      # the loops the first two are about
    for name, made, by_hand, _ in rows:
        assert set(by_hand) - set(made) == set(), (name, set(by_hand) - set(made))


def make_fixture(**options):
    from spatialhub.utils.profiling.pytest_plugin.fixture import BenchmarkFixture

    node = SimpleNamespace(name="test_x", nodeid="t.py::test_x")
    o = dict(min_rounds=5, max_time=0.02, min_time=0.000005, max_rounds=100,
             reference=True, warmup="auto")
    o.update(options)
    return BenchmarkFixture(node, o, lambda fx: None, False)


BUSY = ("benchmark {name!r} (statistics.md#the-causes):\n  busy machine: other processes used much of the CPUs when "
        "the run started (warning.load_average, .others_cpu_share; stats.machine_busy).")


def fake_busy_machine(monkeypatch):
    """benchmark_callable as on a busy machine: every result busy, the warning said by the
    first run of the process only (csrc/warn.c: once per process while it stays busy),
    whichever run that is."""
    from spatialhub.utils.profiling.pytest_plugin import fixture

    said = []
    # nothing pending from another test of this process (fixture._busy_note: the text the
    # first busy result takes)
    monkeypatch.setattr(fixture, "_busy_note", [], raising=False)

    def busy_callable(func, *args, **kw):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", prof.BenchmarkWarning)
            s = benchmark_callable(func, *args, **kw)
        s.machine_busy = True
        _native._apply_rerun(s)
        if not said:
            said.append(kw.get("name"))
            w = prof.BusyMachineWarning(BUSY.format(name=kw.get("name", "BenchmarkTarget")))
            w.causes = ("busy machine",)
            warnings.warn(w)
        return s

    monkeypatch.setattr(fixture, "benchmark_callable", busy_callable)
    return said


@pytest.mark.parametrize("reference", [True, False])
def test_the_busy_warning_reaches_the_user_once(monkeypatch, reference):
    """Defect 6: the busy warning is said once per process, by the first run that sees the
    machine busy -- in the plugin one of its own calibration runs, whose warnings are
    not kept: the user never saw it.  The first result measured on the busy machine
    carries it, and only that one."""
    said = fake_busy_machine(monkeypatch)
    fx = make_fixture(reference=reference)
    fx(work)
    assert said, "the fake said nothing"
    busy = [w for w in fx.warnings if "busy machine:" in w]
    assert len(busy) == 1, fx.warnings
    assert busy[0].startswith("benchmark 'test_x' (") and "stats.machine_busy" in busy[0]
    assert fx.stats.native.machine_busy is True
    expect_basis(fx.stats.native, "assumed busy")
    again = make_fixture(reference=reference)
    again(work)
    assert not [w for w in again.warnings if "busy machine:" in w], again.warnings


def test_a_busy_warning_said_by_the_session_probe_reaches_the_user(monkeypatch):
    """The session's environment probe (run at start-up with --benchmark-compare) can be
    the first run of the process: the busy warning it gets goes to the first result."""
    from spatialhub.utils.profiling.pytest_plugin.session import BenchmarkSession

    fake_busy_machine(monkeypatch)
    BenchmarkSession.environment(SimpleNamespace(fixtures=[], _env=None))
    fx = make_fixture(reference=False)
    fx(work)
    assert len([w for w in fx.warnings if "busy machine:" in w]) == 1, fx.warnings


# ---- 8: valgrind's notes ---------------------------------------------------------------------

HEADER = """==4242== Callgrind, a call-graph generating cache profiler
==4242== Copyright (C) 2002-2017, and GNU GPL'd, by Josef Weidendorfer et al.
==4242== Using Valgrind-3.19.0 and LibVEX; rerun with -h for copyright info
==4242== Command: /usr/bin/python3 -m pytest
==4242== 
==4242== For interactive control, run 'callgrind_control -h'.
"""
FOOTER = """==4242== 
==4242== Events    : Ir
==4242== Collected : 97400901
==4242== 
==4242== I   refs:      97,400,901
"""


def valgrind_log(tmp_path, body):
    folder = tmp_path / "dumps"
    folder.mkdir()
    (folder / "valgrind.4242.log").write_text(HEADER + body + FOOTER)
    return str(folder)


# What valgrind 3.19 prints that it survives with the count intact (the strings are
# valgrind's: coregrind/m_syswrap for the syscall and the ioctl, memcheck's address-range
# note, the stack switch and the client syscall notes, callgrind's cache detection).
ACCEPTED = {
    "unhandled ioctl": "==4242== Warning: noted but unhandled ioctl 0xcb01 with no "
                       "size/direction hints.\n==4242==    This could cause spurious value "
                       "errors to appear.\n==4242==    See README_MISSING_SYSCALL_OR_IOCTL "
                       "for guidance on writing a proper wrapper.\n",
    "unhandled syscall": "--4242-- WARNING: unhandled amd64-linux syscall: 999\n--4242-- You "
                         "may be able to write your own handler.\n--4242-- Read the file "
                         "README_MISSING_SYSCALL_OR_IOCTL.\n--4242-- Nevertheless we consider "
                         "this a bug.  Please report\n--4242-- it at "
                         "http://valgrind.org/support/bug_reports.html.\n",
    "address range perms": "==4242== Warning: set address range perms: large range "
                           "[0x59c8f040, 0x99c8f040) (defined)\n",
    "switching stacks": "==4242== Warning: client switching stacks?  SP change: 0x1ffefff8d8 "
                        "--> 0x5b1e0a0\n==4242==          to suppress, use: "
                        "--max-stackframe=137333446712 or greater\n",
    "client syscall": "==4242== Warning: client syscall munmap tried to modify addresses "
                      "0xffffffffffffffff-0xffe\n",
    "invalid fd": "==4242== Warning: invalid file descriptor -1 in syscall close()\n",
    "unimplemented fcntl": "==4242== Warning: unimplemented fcntl command: 1033\n",
    "cache detection": "--4242-- warning: L3 cache found, using its data for the LL "
                       "simulation.\n",
}


@pytest.mark.parametrize("kind", sorted(ACCEPTED))
def test_a_valgrind_note_does_not_fail_a_counted_run(tmp_path, capsys, kind):
    """Defect 8: "noted but unhandled ioctl" matched `unhandled` and turned a successful
    counted run into exit 1.  Each note valgrind survives with the count intact is
    accepted."""
    from spatialhub.utils.profiling.instructions import _valgrind_trouble

    assert _valgrind_trouble(valgrind_log(tmp_path, ACCEPTED[kind]), "test", 0) == 0
    assert "valgrind reported" not in capsys.readouterr().err


def test_every_accepted_note_has_a_test():
    """instructions.ACCEPTED_NOTES lists the kinds of note accepted; each has its sample
    above."""
    from spatialhub.utils.profiling.instructions import ACCEPTED_NOTES

    assert set(ACCEPTED_NOTES) == set(ACCEPTED)


@pytest.mark.parametrize("line", [
    "valgrind: failed to start tool 'callgrind' for platform 'amd64-linux': No such file "
    "or directory\n",
    "valgrind: m_mallocfree.c:303 (get_bszB_as_is): Assertion 'bszB_lo == bszB_hi' failed.\n",
    "\nvalgrind: the 'impossible' happened:\n   Killed by fatal signal\n",
    "==4242== Valgrind's memory management: out of memory:\n==4242==    newSuperblock's "
    "request for 4194304 bytes failed.\n==4242== Valgrind cannot continue.  Sorry.\n",
    "==4242== Fatal error at startup: a function redirection\n",
    "==4242== FATAL: can't open suppressions file \"x.supp\"\n",
    "==4242== Emulation fatal error -- Valgrind cannot continue:\n",
    "VALGRIND INTERNAL ERROR: Valgrind received a signal 11 (SIGSEGV) - exiting\n",
    "==4242== vex amd64->IR: unhandled instruction bytes: 0x62 0xF1 0x7D 0x48\n"
    "==4242== valgrind: Unrecognised instruction at address 0x4a2b3c.\n",
    "==4242== Process terminating with default action of signal 4 (SIGILL)\n",
    "==4242== Error: can not open cache simulation output file `/tmp/x/callgrind.4242.out'\n",
])
def test_valgrind_trouble_still_fails_a_counted_run(tmp_path, capsys, line):
    """What means the count is wrong still turns a clean exit into 1, and is shown."""
    from spatialhub.utils.profiling.instructions import _valgrind_trouble

    assert _valgrind_trouble(valgrind_log(tmp_path, line), "test", 0) == 1
    assert "test: valgrind reported:" in capsys.readouterr().err


NOTES_SCRIPT = """
import ctypes, fcntl, os
ctypes.CDLL(None).syscall(999)              # no such syscall: valgrind warns, returns ENOSYS
fd = os.open(os.devnull, os.O_RDONLY)
try:
    fcntl.ioctl(fd, 0xcb01)                 # an ioctl valgrind has no wrapper for
except OSError:
    pass
"""


@pytest.mark.skipif(not HAVE_VALGRIND, reason=NO_VALGRIND)
def test_a_real_counted_run_with_valgrind_notes_exits_0(tmp_path, capsys):
    """Defect 8 under the real valgrind: a program that makes an unknown syscall and an
    unknown ioctl ends 0 under callgrind, and so does the counted run (one process)."""
    from spatialhub.utils.profiling.instructions import rerun

    (tmp_path / "notes.py").write_text(NOTES_SCRIPT)
    assert rerun([str(tmp_path / "notes.py")], "test", runs=1) == 0
    assert "valgrind reported" not in capsys.readouterr().err


# ---- the CLI's --compare files and the calibration file --------------------------------------

def cli(*args, cwd=None, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "spatialhub.utils.profiling", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, env=e, timeout=120)


@pytest.mark.parametrize("edit, field", [
    (lambda d: d["samples_ms"].__setitem__(3, None), "samples_ms[3] is not a number (null)"),
    (lambda d: d.__setitem__("median_ms", float("nan")), "median_ms is not a finite number (NaN)"),
    (lambda d: d.__setitem__("samples_ms", [1.0, -2.0, 1.1]), "samples_ms[1] is negative (-2.0)"),
])
def test_a_bad_cli_compare_file_is_one_line_naming_the_field(tmp_path, make_stats, edit,
                                                             field):
    """--compare read a null sample as NaN and judged it; a NaN median passed as well."""
    s = make_stats(samples_ms=[1.0, 1.1, 1.2, 1.05, 1.15])
    (tmp_path / "base.json").write_text(s.to_json(samples=True))
    doc = json.loads(s.to_json(samples=True))
    edit(doc)
    (tmp_path / "new.json").write_text(json.dumps([json.loads(s.to_json(samples=True)), doc]))
    (tmp_path / "two.json").write_text(json.dumps([json.loads(s.to_json(samples=True))] * 2))
    p = cli("--compare", "two.json", "new.json", cwd=tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert lines == [f"spatialhub-bench: error: new.json: [1].{field}"], p.stderr
    assert "Traceback" not in p.stderr and p.stdout == ""


@pytest.mark.parametrize("content, field", [
    ('{"version": 1, "machines": {MID: {"run_spread": "abc", "processes": 20}}}',
     'machines[MID].run_spread is not a number ("abc")'),
    ('{"version": 1, "machines": {MID: {"run_spread": 0.04, "processes": 2}}}',
     "machines[MID].processes is below 3 (2)"),
    ('{"version": 1, "machines": [', "is not JSON"),
])
def test_a_bad_calibration_file_is_named_with_its_field(tmp_path, content, field):
    """calibrate.py read its file inside `except`s: a bad entry for this machine was
    ignored unsaid, and the user believed the calibration applied.  It is still not used
    (the assumed spread applies), and one warning names the file and the field."""
    from spatialhub.utils.profiling.calibrate import machine_id

    mid = json.dumps(machine_id())
    (tmp_path / "run_spread.json").write_text(content.replace("MID", mid))
    p = subprocess.run([sys.executable, "-W", "default", "-c",
                        "import spatialhub.utils.profiling as p; "
                        "print(p.machine_run_spread())"],
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, SPATIALHUB_CACHE_DIR=str(tmp_path)))
    assert p.returncode == 0 and p.stdout.strip() == "None", p.stdout + p.stderr
    said = [x for x in p.stderr.splitlines() if "run_spread.json" in x]
    assert len(said) == 1, p.stderr
    assert f"{tmp_path / 'run_spread.json'}: {field.replace('MID', mid)}" in said[0], said
    assert "BenchmarkWarning" in said[0] and "the assumed" in said[0], said
