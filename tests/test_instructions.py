"""Instruction counts (issue 24): the CPU's counters through counters=, callgrind's counts
in the --instructions modes, the rule that judges counts, and where they show.

The counts under valgrind are tested here on the native core (one valgrind run of a
script, ~25 s) and through the CLI's gate end to end (three spatialhub-bench --instructions
runs and two --compare: ~1 min of CPU); both skip, saying so, where valgrind is not
installed.  The gate's rates over many runs, for the CLI and the pytest plugin, are
bench/bench_instruction_gate.py's (docs/guide.md, "Instruction counts")."""
import json
import math
import os
import pickle
import re
import shutil
import subprocess
import sys
import textwrap
import warnings

import pytest

import spatialhub.utils.profiling as prof
from spatialhub.utils.profiling import _native, benchmark_callable, format_benchmark_table
from spatialhub.utils.profiling.instructions import (DIR_ENV, NOISE, PROBE_ENV, PROBES_ENV,
                                                    callgrind_command, judge_counts,
                                                    rerun_env)

HAVE_VALGRIND = shutil.which("valgrind") is not None
NO_VALGRIND = ("valgrind is not installed (the instruction gate runs the benchmark under "
               "valgrind's callgrind)")
if HAVE_VALGRIND:
    # valgrind cannot run a process that preloads ASan (CI's sanitizer stage); these
    # tests run in CI's main stage
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from reliability_support import UNDER_SANITIZER
    HAVE_VALGRIND = not UNDER_SANITIZER
    NO_VALGRIND = "valgrind cannot run a process that preloads ASan"


def busy(n=20_000):
    s = 0
    for i in range(n):
        s += i
    return s


def recorded(fn, *args, **kwargs):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = fn(*args, **kwargs)
    return out, [r.message for r in w if issubclass(r.category, prof.BenchmarkWarning)]


# ---- counters= : the CPU's counters ---------------------------------------------------

def test_counters_argument_is_checked():
    with pytest.raises(ValueError, match="counters must be None, or names from 'instructions'"):
        benchmark_callable(busy, num_iters=1, counters=("instructions", "cache-misses"))
    with pytest.raises(TypeError, match="counters must be"):
        benchmark_callable(busy, num_iters=1, counters=5)
    with pytest.raises(TypeError, match="counters must be"):
        benchmark_callable(busy, num_iters=1, counters=[b"cycles"])
    calls = []
    with pytest.raises(ValueError):   # nothing is called before the options are checked
        benchmark_callable(lambda: calls.append(1), num_iters=1, counters="branches")
    assert calls == []


def test_without_counters_nothing_is_counted_or_said():
    s, w = recorded(benchmark_callable, busy, 1000, num_warmup=1, num_iters=5)
    assert (s.instructions_per_call, s.cycles_per_call, s.counter_source) == (None, None, None)
    assert not any(isinstance(m, prof.CountersWarning) for m in w)


def test_counters_are_read_where_the_cpu_has_them_and_never_faked_elsewhere():
    s1, w1 = recorded(benchmark_callable, busy, 20_000, num_warmup=3, num_iters=20,
                      counters=("instructions", "cycles"))
    if s1.instructions_per_call is None:
        # this machine (a VM without a virtual PMU: ENOENT) -- refused, with the reason
        assert s1.cycles_per_call is None and s1.counter_source is None
        [m] = [m for m in w1 if isinstance(m, prof.CountersWarning)]
        assert "counters not available" in m.causes
        assert "perf_event_open(instructions) failed with " in m.reason
        # the line names what to do instead: count under callgrind with the CLI
        assert "counters not available" in str(m) and "spatialhub-bench --instructions" in str(m)
        assert m.stats is s1
        return
    # a machine with counters: figures that behave like instruction counts
    s2 = benchmark_callable(busy, 40_000, num_warmup=3, num_iters=20,
                            counters=("instructions", "cycles"))
    assert s1.counter_source == s2.counter_source == "perf_event"
    assert 20_000 * 3 < s1.instructions_per_call < 20_000 * 100   # a few per loop step
    assert 1.8 < s2.instructions_per_call / s1.instructions_per_call < 2.2
    assert s1.cycles_per_call > 0
    assert not any(isinstance(m, prof.CountersWarning) for m in w1)


def test_counter_plumbing_with_software_clocks():
    # The software clocks (ns of the thread's CPU time) stand in for the hardware
    # events: open, start and stop around the loop, the floor taken out, per call.
    old = _native._perfctr_software(True)
    try:
        noop = benchmark_callable(_native._noop, num_warmup=10, num_iters=2000,
                                  counters=("instructions", "cycles"))
        work = benchmark_callable(busy, 20_000, num_warmup=2, num_iters=20,
                                  counters=("instructions", "cycles"))
    finally:
        _native._perfctr_software(old)
    assert work.counter_source == "perf_event"
    assert work.instructions_per_call > 0 and work.cycles_per_call > 0
    # CPU ns of a ~1 ms loop, the loop's floor taken out of the no-op's
    assert work.instructions_per_call > 100 * max(noop.instructions_per_call, 1.0)
    assert noop.instructions_per_call < 1_000
    # CPU time never exceeds wall time by much (a clock read apart)
    assert work.instructions_per_call < 2.0 * work.max_ms * 1e6


# ---- where counts show -------------------------------------------------------------------

def test_counts_in_the_table(make_stats):
    counted = make_stats(name="a", instructions_per_call=6_389_075.4, counter_source="callgrind")
    plain = make_stats(name="b")
    t = format_benchmark_table([counted, plain], columns=["instructions", "cycles"])
    header, _, row_a, row_b = t.splitlines()
    assert header.endswith("| Instructions / call | Cycles / call |")
    assert row_a.endswith("| 6,389,075 | N/A |")
    assert row_b.endswith("| N/A | N/A |")
    assert "Instructions / call" in format_benchmark_table([counted, plain], columns="auto")
    assert "Instructions" not in format_benchmark_table([plain], columns="auto")
    assert "Instructions" not in format_benchmark_table([counted])   # the released layout


def test_counts_survive_dict_json_and_pickle(make_stats):
    s = make_stats(instructions_per_call=123_456.7, cycles_per_call=98_765.4,
                   counter_source="perf_event")
    d = s.to_dict()
    assert (d["instructions_per_call"], d["cycles_per_call"], d["counter_source"]) == \
        (123_456.7, 98_765.4, "perf_event")
    back = prof.BenchmarkStats.from_dict(json.loads(s.to_json()))
    assert back.instructions_per_call == 123_456.7 and back.counter_source == "perf_event"
    assert pickle.loads(pickle.dumps(s)).cycles_per_call == 98_765.4
    assert "instructions_per_call=123456.7" in repr(s)
    assert "instructions_per_call" not in repr(make_stats())
    with pytest.raises(TypeError):
        s.instructions_per_call = "many"


# ---- the rule for counts ----------------------------------------------------------------

def test_judge_counts():
    same = judge_counts("f", 100_000, 100_050, 0.01)
    assert (same.verdict, same.fails) == ("same", False)
    more = judge_counts("f", 100_000, 102_000, 0.01)
    assert (more.verdict, more.fails) == ("more", True)
    assert "1.0200x (102,000 now, 100,000 before): more, beyond the 1% allowed" in more.reason
    fewer = judge_counts("f", 100_000, 95_000, 0.01)
    assert (fewer.verdict, fewer.fails) == ("fewer", False)
    # within what separate runs of identical code read apart, never a change
    tight = judge_counts("f", 100_000, 100_000 * (1 + NOISE / 2), 0.0001)
    assert (tight.verdict, tight.fails) == ("same", False)
    report_only = judge_counts("f", 100_000, 150_000)
    assert (report_only.verdict, report_only.fails) == ("more", False)
    for base, cand in ((None, 1.0), (1.0, None), (float("nan"), 1.0), (0.0, 1.0)):
        v = judge_counts("f", base, cand, 0.01)
        assert (v.verdict, v.fails) == ("no data", False)
        assert "not judged" in v.reason


def test_gate_field_instructions():
    from spatialhub.utils.profiling.pytest_plugin.gate import FIELDS, check, parse_fail_rule

    assert FIELDS["instructions"] == "count"
    rule = parse_fail_rule("instructions:1%")
    assert (rule.field, rule.kind, rule.value) == ("instructions", "pct", 1.0)
    ok = check(rule, "t", {"instructions": 1e6}, {"instructions": 1.001e6})
    bad = check(rule, "t", {"instructions": 1e6}, {"instructions": 1.02e6})
    assert not ok.fails and bad.fails and bad.verdict.verdict == "more"
    absolute = parse_fail_rule("instructions:5000")       # instructions per call
    assert check(absolute, "t", {"instructions": 1e6}, {"instructions": 1.004e6}).fails is False
    assert check(absolute, "t", {"instructions": 1e6}, {"instructions": 1.0061e6}).fails
    missing = check(rule, "t", {"median": 1.0}, {"instructions": 1e6})
    assert not missing.fails and "no instructions count" in missing.reason


# ---- the commands, without valgrind ---------------------------------------------------------

def cli(*args, env=None, cwd=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "spatialhub.utils.profiling", *map(str, args)],
                          capture_output=True, text=True, env=e, cwd=cwd, timeout=300)


def test_the_rerun_environment_repeats_and_keeps_what_the_user_set():
    # one hash seed and one thread per pool, unless the user chose; the dump folder always
    env = rerun_env("/tmp/dumps", base={"PATH": "/bin", DIR_ENV: "/elsewhere"})
    assert env["PYTHONHASHSEED"] == "0" and env["OMP_NUM_THREADS"] == "1"
    assert env[DIR_ENV] == "/tmp/dumps" and env["PATH"] == "/bin"
    mine = rerun_env("/tmp/dumps", base={"PYTHONHASHSEED": "random", "OMP_NUM_THREADS": "4"})
    assert mine["PYTHONHASHSEED"] == "random" and mine["OMP_NUM_THREADS"] == "4"


def test_the_rerun_gives_the_children_that_environment(monkeypatch, capsys):
    # RUNS processes: the probes first, side by side, output kept aside, each writing its
    # counts to its own file; then the reported run, told where the probes' counts are
    import spatialhub.utils.profiling.instructions as ins
    started, seen = [], {}

    class Child:
        def __init__(self, cmd, env, cwd, stdin=None, stdout=None, stderr=None):
            run = dict(cmd=cmd, env=env, log=getattr(stdout, "name", None))
            if PROBE_ENV in env:
                started.append(run)
            else:                                   # the reported run: the user's streams
                seen.update(run, probes_started=len(started))

        def wait(self, timeout=None):
            return 0

        def poll(self):
            return 0

    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    monkeypatch.setattr(ins, "find_valgrind", lambda: "valgrind")
    monkeypatch.setattr(ins.subprocess, "Popen", Child)
    assert ins.rerun(["-c", "pass"], "test") == 0
    assert ins.RUNS == 3 and len(started) == 2 and seen["probes_started"] == 2
    assert "3 times, the lowest count of each benchmark kept" in capsys.readouterr().err
    assert seen["cmd"][0] == "valgrind" and "--tool=callgrind" in seen["cmd"]
    assert seen["env"]["PYTHONHASHSEED"] == "0" and seen["env"]["OPENBLAS_NUM_THREADS"] == "1"
    folder = seen["env"][DIR_ENV]
    assert os.path.basename(folder).startswith("spatialhub-callgrind-")
    assert seen["env"][PROBES_ENV] == folder and PROBE_ENV not in seen["env"]
    assert [p["cmd"] for p in started] == [seen["cmd"]] * 2
    probe_files = {p["env"][PROBE_ENV] for p in started}
    assert probe_files == {os.path.join(folder, "probe.0.counts"),
                           os.path.join(folder, "probe.1.counts")}
    assert all(p["log"].startswith(folder) and PROBES_ENV not in p["env"] for p in started)
    assert seen["log"] is None
    assert not os.path.exists(folder)                        # the dump folder is removed
    started.clear()
    assert ins.rerun(["-c", "pass"], "test", runs=1) == 0    # one run: no probes
    assert not started and PROBES_ENV not in seen["env"]
    with pytest.raises(ValueError, match="at least 1, got 0"):
        ins.rerun(["-c", "pass"], "test", runs=0)


def test_the_reported_count_is_the_lowest_of_the_runs(tmp_path, monkeypatch):
    # each probe writes its count per benchmark (a name, and its order among those of that
    # name); the reported run takes the lowest of its own and the probes', and says which
    # benchmarks' runs read apart beyond NOISE
    import spatialhub.utils.profiling.instructions as ins
    from spatialhub.utils.profiling.instructions import NOISE, _Ledger
    monkeypatch.delenv(PROBES_ENV, raising=False)
    for i, counts in enumerate(([("a", 100.0), ("a", 80.05), ("b", None), ("x\ny", 10.0)],
                                [("a", 96.0), ("a", 80.1), ("a\tb", 8.8), ("y", 100.0),
                                 ("far", 10.0)])):
        monkeypatch.setenv(PROBE_ENV, str(tmp_path / f"probe.{i}.counts"))
        probe = _Ledger()
        # a probe reports its own count (its output is kept aside)
        assert [probe.lowest(name, c) for name, c in counts] == [c for _, c in counts]
    with open(tmp_path / "probe.1.counts", "a") as f:
        f.write('["a", 0, 1')                          # a probe that ended in mid-line
    monkeypatch.delenv(PROBE_ENV)
    monkeypatch.setenv(PROBES_ENV, str(tmp_path))
    final = _Ledger()
    assert final.lowest("a", 98.0) == 96.0        # the first "a": probes 100 and 96
    assert final.lowest("a", 80.0) == 80.0        # the second "a": its own is the lowest
    assert final.lowest("a", 60.0) == 60.0        # a third "a": no probe counted it
    assert final.lowest("a\tb", 9.0) == 8.8       # a tab in a name
    assert final.lowest("y", 100.0) == 100.0      # not lowered by "x\ny"'s count
    assert final.lowest("x\ny", 10.4) == 10.0     # a newline in a name
    # beyond LAYOUT_SPREAD the runs did not run the same code: the run's own count
    assert final.lowest("far", 100.0) == 100.0
    assert final.lowest("b", 5.0) == 5.0          # the probes had no count for it
    assert final.lowest("c", None) is None        # no count: nothing to lower
    # the first "a": 96 to 100 apart; the second: 80 to 80.1, within NOISE; a single
    # count: nothing to compare
    assert 80.1 / 80.0 - 1 < NOISE
    assert final.apart == [("a", 3, 96.0, 100.0, 98.0), ("a\tb", 2, 8.8, 9.0, 9.0),
                           ("x\ny", 2, 10.0, 10.4, 10.4), ("far", 2, 10.0, 100.0, 100.0)]
    monkeypatch.setattr(ins, "_ledger", final)
    lines = ins.disagreements()
    assert lines[0] == ("a: the 3 counted runs read 96 to 100 instructions per call "
                        "(+4.17%); the lowest is reported")
    assert lines[3] == ("far: the 2 counted runs read 10 to 100 instructions per call "
                        "(+900.00%); more than the 5% an address layout explains: the runs "
                        "did not run the same code (a probe took another path, failed, or "
                        "ran other tests before), so this run's own count, 100, is reported")
    monkeypatch.delenv(PROBES_ENV)
    assert _Ledger().lowest("a", 98.0) == 98.0    # not a counted run's last: as read


FAKE_VALGRIND = """#!{python}
import json, os, signal, sys, time
def interrupted(signum, frame):       # as pytest does: finish its report, then end
    time.sleep(1.0)
    with open(os.environ["FAKE_LOG"] + ".cleaned", "a") as f:
        f.write(str(os.getpid()) + "\\n")
    sys.exit(2)
signal.signal(signal.SIGINT, interrupted)
args = sys.argv[1:]
rec = {{"argv": args, "pid": os.getpid(), "probe": os.environ.get("{probe}"),
       "probes": os.environ.get("{probes}"), "dir": os.environ.get("{dir}")}}
caches = [a.split("=", 1)[1] for a in args if a.startswith("cache_dir=")]
if caches:
    rec["cache"] = sorted(os.listdir(caches[0]))
    if not os.environ.get("FAKE_NO_CACHE"):
        with open(os.path.join(caches[0], "v", "cache", "lastfailed")) as f:
            rec["lastfailed"] = json.load(f)
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write(json.dumps(rec) + "\\n")
time.sleep(float(os.environ.get("FAKE_SLEEP", "0")))
"""


def fake_valgrind(tmp_path):
    """A `valgrind` on PATH that writes down how it was called, and runs nothing."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "valgrind"
    exe.write_text(FAKE_VALGRIND.format(python=sys.executable, probe=PROBE_ENV,
                                        probes=PROBES_ENV, dir=DIR_ENV))
    exe.chmod(0o755)
    log = tmp_path / "calls.jsonl"
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "FAKE_LOG": str(log)}
    return env, lambda: [json.loads(x) for x in log.read_text().splitlines()]


def test_the_probes_get_their_own_copy_of_pytests_cache(tmp_path):
    # --lf in the reported run must select after the user's last run, not after the
    # probes': each probe runs with -o cache_dir= a copy of the user's cache
    env, calls = fake_valgrind(tmp_path)
    last = {"test_subject.py::test_it": True}
    cache = tmp_path / ".pytest_cache" / "v" / "cache"
    cache.mkdir(parents=True)
    (cache / "lastfailed").write_text(json.dumps(last))
    rc, out = run_pytest(tmp_path, "def test_it(benchmark):\n    benchmark(sum, [1])\n",
                         "--benchmark-instructions", "--lf", env=env, cache=True)
    assert rc == 0, out
    probes = [c for c in calls() if c["probe"]]
    (final,) = [c for c in calls() if not c["probe"]]
    assert len(probes) == 2 and final["probes"] == final["dir"]
    for c in probes:
        i = c["argv"].index("-o")
        n = re.search(r"probe\.(\d+)\.counts$", c["probe"]).group(1)
        assert c["argv"][i + 1] == f"cache_dir={c['dir']}/probe.{n}.cache"
        assert c["lastfailed"] == last                  # the user's, copied
    assert "-o" not in final["argv"] and "--lf" in final["argv"]
    assert json.loads((cache / "lastfailed").read_text()) == last
    assert not os.path.exists(final["dir"])             # removed with the copies


def test_ctrl_c_lets_the_reported_run_finish_its_report(tmp_path):
    # Ctrl-C reaches the whole process group: the reported run (pytest) writes its summary
    # and its cache before it ends; it must not be killed a quarter second later
    import signal
    import time
    env, calls = fake_valgrind(tmp_path)
    e = dict(os.environ, **env, FAKE_SLEEP="120")
    p = subprocess.Popen([sys.executable, "-m", "spatialhub.utils.profiling", "--instructions",
                          "--instructions-runs", "1"], env=e, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (
                (tmp_path / "calls.jsonl").exists() and len(calls()) == 1):
            time.sleep(0.1)
        assert len(calls()) == 1, "the reported run did not start"
        time.sleep(0.5)                         # its handler is in place
        os.killpg(p.pid, signal.SIGINT)
        assert p.wait(timeout=30) == 130
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
    cleaned = (tmp_path / "calls.jsonl.cleaned").read_text().split()
    assert cleaned == [str(calls()[0]["pid"])]  # it finished, 1 s after the Ctrl-C


def test_nothing_runs_under_valgrind_when_nothing_is_counted(tmp_path):
    env, calls = fake_valgrind(tmp_path)
    src = "def test_it(benchmark):\n    benchmark(sum, [1])\n"
    for extra in (["--co"], ["--benchmark-disable"], ["--benchmark-skip"]):
        rc, out = run_pytest(tmp_path, src, "--benchmark-instructions", *extra, env=env)
        assert rc in (0, 5), out
        assert not (tmp_path / "calls.jsonl").exists(), (extra, out)


def test_a_cache_that_cannot_be_copied_gives_the_probes_an_empty_one(tmp_path):
    env, calls = fake_valgrind(tmp_path)
    cache = tmp_path / ".pytest_cache" / "v" / "cache"
    cache.mkdir(parents=True)
    (cache / "lastfailed").write_text("{}")
    os.mkfifo(tmp_path / ".pytest_cache" / "pipe")   # copytree cannot copy a pipe
    rc, out = run_pytest(tmp_path, "def test_it(benchmark):\n    benchmark(sum, [1])\n",
                         "--benchmark-instructions", env=dict(env, FAKE_NO_CACHE="1"),
                         cache=True)
    assert rc == 0, out
    probes = [c for c in calls() if c["probe"]]
    assert len(probes) == 2 and all(c["cache"] == [] for c in probes), probes


def test_sigterm_stops_every_counted_run(tmp_path):
    # a CI job's timeout sends SIGTERM to the command: the probes and the dump folder go
    # with it
    import signal
    import time
    env, calls = fake_valgrind(tmp_path)
    e = dict(os.environ, **env, FAKE_SLEEP="120")
    p = subprocess.Popen([sys.executable, "-m", "spatialhub.utils.profiling", "--instructions"],
                         env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (
                (tmp_path / "calls.jsonl").exists() and len(calls()) == 2):
            time.sleep(0.1)
        assert len(calls()) == 2, "the two probes did not start"
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
    time.sleep(0.5)
    for c in calls():
        with pytest.raises(ProcessLookupError):
            os.kill(c["pid"], 0)
    assert not os.path.exists(calls()[0]["dir"])


def test_cli_instructions_needs_valgrind_and_says_which_package(tmp_path):
    p = cli("--instructions", env={"PATH": str(tmp_path)})   # no valgrind on this PATH
    assert p.returncode == 1, p.stderr
    assert "valgrind is not installed" in p.stderr and "apt-get install valgrind" in p.stderr
    assert "Traceback" not in p.stderr and p.stdout == ""
    p = cli("--instructions", "--processes", "2")
    assert p.returncode == 2 and "--processes does not apply to --instructions" in p.stderr
    p = cli("--instructions-runs", "2")
    assert p.returncode == 2 and "--instructions-runs needs --instructions" in p.stderr
    p = cli("--instructions", "--instructions-runs", "0")
    assert p.returncode == 2 and "--instructions-runs" in p.stderr


def test_cli_compare_instructions_gate(tmp_path, make_stats):
    def save(name, count):
        s = make_stats(instructions_per_call=count, counter_source="callgrind",
                       samples_ms=[1.0, 1.1, 1.2])
        (tmp_path / name).write_text(s.to_json(samples=True))
    save("base.json", 1_000_000)
    save("same.json", 1_000_400)
    save("more.json", 1_020_000)
    (tmp_path / "timed.json").write_text(make_stats(samples_ms=[1.0, 1.1]).to_json(samples=True))
    p = cli("--compare", "base.json", "same.json", "--instructions", "--fail-if-slower", "1",
            cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "| Instructions / call |" in p.stdout and "1,000,400" in p.stdout
    assert "1.0004x (1,000,400 now, 1,000,000 before): same (1% allowed)" in p.stdout
    p = cli("--compare", "base.json", "more.json", "--instructions", "--fail-if-slower", "1",
            "--json", "cmp.json", cwd=tmp_path)
    assert p.returncode == 3, p.stderr
    assert "more than 1% more instructions per call" in p.stderr
    verdict = json.loads((tmp_path / "cmp.json").read_text())
    assert (verdict["verdict"], verdict["fails"]) == ("more", True)
    assert verdict["ratio"] == pytest.approx(1.02)
    p = cli("--compare", "base.json", "timed.json", "--instructions", cwd=tmp_path)
    assert p.returncode == 1 and "has no instructions count" in p.stderr
    assert "--instructions --json" in p.stderr


def run_pytest(tmp_path, source, *args, env=None, cache=False, timeout=240):
    """pytest on `source` in a child, in a session of its own: a timeout stops the child
    and every process it started (a counted run's valgrind processes)."""
    import signal
    (tmp_path / "test_subject.py").write_text(textwrap.dedent(source))
    e = dict(os.environ)
    e.pop("PYTEST_ADDOPTS", None)
    e.update(env or {})
    no_cache = [] if cache else ["-p", "no:cacheprovider"]
    p = subprocess.Popen([sys.executable, "-m", "pytest", "-q", *no_cache, "-p", "no:benchmark",
                          *args], cwd=tmp_path, env=e, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    except BaseException:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise
    return p.returncode, out


def test_plugin_instruction_gate_needs_the_instruction_mode(tmp_path):
    src = """
        def test_it(benchmark):
            benchmark(sum, range(10))
    """
    rc, out = run_pytest(tmp_path, src, "--benchmark-compare-fail=instructions:1%",
                         "--benchmark-compare")
    assert rc == 4, out
    assert "instructions:1% judges instruction counts: add --benchmark-instructions" in out
    rc, out = run_pytest(tmp_path, src, "--benchmark-instructions",
                         env={"PATH": str(tmp_path)})
    assert rc == 4, out
    assert "--benchmark-instructions: counting instructions runs the benchmarks under " \
           "valgrind's callgrind, and valgrind is not installed" in out
    rc, out = run_pytest(tmp_path, src, "--benchmark-instructions-runs=2")
    assert rc == 4, out
    assert "--benchmark-instructions-runs needs --benchmark-instructions" in out


# ---- under callgrind ----------------------------------------------------------------------

# A loop that allocates nothing on any version: `not` returns the True/False singletons.
# A loop that allocates an object a step reads the allocator's state (docs/guide.md,
# "What a count misses"): `s ^= 1` on small ints does before 3.11 (long_bitwise builds a
# new int before it hands back the cached one), and on 3.10 read 0.8% fewer instructions
# on its first benchmark than on its second.
LOOP = """
    from itertools import repeat

    def loop(n):
        s = False
        for _ in repeat(None, n):
            s = not s
        return s
"""

SCRIPT = LOOP + """
    import json, sys, warnings
    from spatialhub.utils.profiling import BenchmarkWarning, _native, benchmark_callable

    calls = [0]
    def cold_then_warm():
        calls[0] += 1
        return loop(20_000 if calls[0] <= 10 else 1_000)   # the first 10 calls: 20x

    class Boom(Exception):
        pass
    def raises_on_third():
        calls[0] += 1
        if calls[0] == 3:
            raise Boom("third")
        return loop(1_000)

    out = {"active": _native._callgrind_active()}
    B = dict(num_warmup=10, num_iters=5, disable_gc=True)
    out["noop"] = benchmark_callable(_native._noop, **B).instructions_per_call
    s = benchmark_callable(loop, 1_000, **B)
    out["k1"], out["source"] = s.instructions_per_call, s.counter_source
    out["k1_again"] = benchmark_callable(loop, 1_000, **B).instructions_per_call
    out["k2"] = benchmark_callable(loop, 2_000, **B).instructions_per_call
    out["warm"] = benchmark_callable(cold_then_warm, **B).instructions_per_call
    calls[0] = 0
    try:
        benchmark_callable(raises_on_third, num_warmup=0, num_iters=5)
    except Boom as exc:
        out["raised"] = str(exc)
    out["after_raise"] = benchmark_callable(loop, 1_000, **B).instructions_per_call
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        s = benchmark_callable(loop, 1_000, counters=("instructions", "cycles"), **B)
    out["with_counters"] = [s.instructions_per_call, s.cycles_per_call]
    out["reasons"] = [getattr(m.message, "reason", None) for m in w
                      if issubclass(m.category, BenchmarkWarning)]
    print(json.dumps(out))
"""


@pytest.mark.skipif(not HAVE_VALGRIND, reason=NO_VALGRIND)
def test_callgrind_counts_the_timed_calls_and_nothing_else(tmp_path):
    (tmp_path / "script.py").write_text(textwrap.dedent(SCRIPT))
    env = dict(os.environ, SPATIALHUB_CALLGRIND_DIR=str(tmp_path))
    cmd = callgrind_command([sys.executable, str(tmp_path / "script.py")], str(tmp_path))
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert r["active"] and r["source"] == "callgrind"
    # the harness's own work is not counted: a native no-op is its call and nothing more
    assert 0 < r["noop"] < 200, r
    # identical benchmarks read the same count; twice the loop, twice the count
    assert abs(r["k1_again"] / r["k1"] - 1) < NOISE, r
    assert 1.9 < (r["k2"] - r["noop"]) / (r["k1"] - r["noop"]) < 2.1, r
    # the warm-up is not counted (its 10 calls did 20x the work)
    assert abs(r["warm"] / r["k1"] - 1) < 0.02, r
    # a raising call: the user's exception, and the next benchmark still reads its own
    assert r["raised"] == "third"
    assert abs(r["after_raise"] / r["k1"] - 1) < NOISE, r
    # under valgrind the CPU's counters would count valgrind: cycles refused, said why
    assert r["with_counters"][0] == pytest.approx(r["k1"], rel=NOISE)
    assert r["with_counters"][1] is None
    assert any(reason and "under valgrind" in reason for reason in r["reasons"]), r
    # every dump was read and removed
    assert not [f for f in os.listdir(tmp_path) if ".out." in f]
    assert not math.isnan(r["k1"])


# ---- the gate end to end: CI's small instruction-gate test ---------------------------------

WORKLOAD = """
    import os

    REPS = int(os.environ["GATE_REPS"])   # 100: the saved code; 102: 2% more work

    def work():
        for _ in range(REPS):
            sum(i * i for i in range(30))
"""


@pytest.mark.skipif(not HAVE_VALGRIND, reason=NO_VALGRIND)
def test_cli_instruction_gate_end_to_end(tmp_path):
    # A saved run, a run of the same code and a run with 2% more work, each one
    # spatialhub-bench --instructions process (~15 s here under callgrind); the gate at 1%
    # passes the same code and fails the 2% -- the rule, one run each.
    (tmp_path / "wl.py").write_text(textwrap.dedent(WORKLOAD))
    counts = {}
    # (the saved run counted twice, its lowest kept; the others once, to keep the test
    # short: the lowest-count rule has its own test below)
    for label, reps, runs in (("base", 100, 2), ("same", 100, 1), ("more", 102, 1)):
        p = cli("--callable", "wl.py:work", "--instructions", "--instructions-runs", runs,
                "--no-progress", "--json", f"{label}.json", env={"GATE_REPS": str(reps)},
                cwd=tmp_path)
        assert p.returncode == 0, p.stdout + p.stderr
        assert "counting instructions: running again under valgrind's callgrind" in p.stderr
        assert ("2 times, the lowest count" if runs == 2 else "callgrind once") in p.stderr
        assert "Instructions per call: counted by valgrind's callgrind" in p.stdout
        doc = json.loads((tmp_path / f"{label}.json").read_text())
        assert doc["counter_source"] == "callgrind"
        assert (doc["warmup_iters"], doc["timed_iters"]) == (10, 5)   # the mode's defaults
        counts[label] = doc["instructions_per_call"]
    assert counts["base"] > 100 * 30 * 10          # ~10+ instructions a loop step, at least
    # identical code: within 0.5% (one run of this test read 0.33% after the merge with
    # issues 19-26, others 0.01%; the gate below, at 1%, is the user's promise)
    assert abs(counts["same"] / counts["base"] - 1) < 0.005, counts
    assert 1.015 < counts["more"] / counts["base"] < 1.025, counts
    gate = ("--instructions", "--fail-if-slower", "1")
    same = cli("--compare", "base.json", "same.json", *gate, cwd=tmp_path)
    assert same.returncode == 0, same.stdout + same.stderr
    more = cli("--compare", "base.json", "more.json", *gate, cwd=tmp_path)
    assert more.returncode == 3, more.stdout + more.stderr
    assert "more than 1% more instructions per call" in more.stderr


MARKED = LOOP + """
    import os

    # the first process to get here (a probe: they start before the reported run) loops
    # 2,000 steps a call in test_marked and test_far; every other process 3% more in
    # test_marked (as an address layout might add) and 3x in test_far (other code)
    try:
        os.close(os.open(os.environ["MARK"], os.O_CREAT | os.O_EXCL))
        FIRST = True
    except FileExistsError:
        FIRST = False

    def test_marked(benchmark):
        benchmark(loop, 2_000 if FIRST else 2_060)

    def test_far(benchmark):
        benchmark(loop, 2_000 if FIRST else 6_000)

    def test_reference(benchmark):
        benchmark(loop, 2_000)

    def test_in_the_first_process_only(benchmark):
        if not FIRST:
            import pytest
            pytest.skip("the reported run")
        benchmark(loop, 10)
"""


@pytest.mark.skipif(not HAVE_VALGRIND, reason=NO_VALGRIND)
def test_the_plugin_reports_the_lowest_count_of_its_runs(tmp_path):
    # Two counted runs (a probe, then the reported one) that read different counts for the
    # same benchmark: within 5% the report carries the lower, beyond it its own, and says
    # so; only the reported run writes.
    src = MARKED
    rc, out = run_pytest(tmp_path, src, "--benchmark-instructions",
                         "--benchmark-instructions-runs=2", "--benchmark-autosave",
                         "--benchmark-json=out.json", "--benchmark-cprofile=tottime",
                         "--benchmark-cprofile-dump=prof/run",
                         env={"MARK": str(tmp_path / "mark")}, timeout=900)
    assert rc == 0, out
    assert "2 times, the lowest count of each benchmark kept" in out
    doc = json.loads((tmp_path / "out.json").read_text())
    counts = {b["name"]: b["stats"]["instructions"] for b in doc["benchmarks"]}
    flat = " ".join(out.split())

    def said(name):
        m = re.search(rf"{name}: the 2 counted runs read ([\d,]+) to ([\d,]+) instructions "
                      r"per call \(\+[\d.]+%\); ", flat)
        assert m, out
        how = flat[m.end():].split(" counted runs read ")[0]     # to the next such line
        return float(m.group(1).replace(",", "")), float(m.group(2).replace(",", "")), how

    # the reported run looped 3% longer in test_marked than the probe: the probe's count,
    # the lower, is the one reported, and the line says so
    low, high, how = said("test_marked")
    assert 1.005 < high / low < 1.05 and how.startswith("the lowest is reported"), (low, high)
    assert counts["test_marked"] == pytest.approx(low, abs=1), counts
    # 3x in test_far: beyond LAYOUT_SPREAD, the reported run's own count
    low, high, how = said("test_far")
    assert high / low > 2 and "this run's own count" in how, (low, high, how)
    assert counts["test_far"] == pytest.approx(high, abs=1), counts
    assert counts["test_reference"] > 0
    # the probe wrote no profile: the test it alone ran has none
    assert sorted(f.name for f in (tmp_path / "prof").iterdir()) == [
        "run-test_far.prof", "run-test_marked.prof", "run-test_reference.prof"]
    saved = list((tmp_path / ".benchmarks").rglob("*.json"))
    assert len(saved) == 1, saved                  # the probe saved nothing
    assert json.loads(saved[0].read_text())["benchmarks"][0]["stats"]["instructions"] > 0
