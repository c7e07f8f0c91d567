"""Issue 32 -- the gates' power and false alarms on their default paths, on this machine.

    python bench/bench_gate_power.py [--pairs 12] [--runs 10] [--only cli|pytest]
                                     [--json FILE]

A pure-Python workload of about 1 ms (a dict filled and sorted: allocation, hashing,
comparisons), whose amount of work a factor scales (WORK_SCALE: 1.0 identical code, 1.3 a
30% regression of the code, not of the clock), timed as a user times it:

* the CLI, as a fresh CI runner would: ``spatialhub-bench --callable work:work --json
  base.json`` (the default path of a saved run: 10 fresh processes), the same for the
  candidate, then ``--compare base.json cand.json --fail-if-slower 10``; exit 3 is a
  failed gate.  ``--pairs`` independent pairs per factor (1.0, 1.1, 1.2, 1.3, 1.5), the
  factors interleaved so that the machine's load falls on all alike.
* the pytest plugin: ``pytest --benchmark-autosave`` (each saved run measures its spread
  in fresh processes: --benchmark-processes), then runs with ``--benchmark-compare
  --benchmark-compare-fail=median:10%`` against the last saved run; exit 1 is a failed
  gate.  After 1 and after 3 saved runs, ``--runs`` runs of identical code and of the
  1.3x workload, interleaved, and 5 each of 1.1x, 1.2x, 1.5x.

Figures: how many gates failed, per factor (false alarms at 1.0, power above), and what
each default path costs (seconds a run).  Targets (issue 32): CLI 1.3x caught in >= 10
of 12 pairs, identical code failed in <= 1 of 12; plugin 1.3x caught in >= 8 of 10
runs, identical failed in <= 1 of 10.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

from _common import Figure, child_env, load_average, machine_line, print_figures

WORK = '''
import os
N = int(900 * float(os.environ.get("WORK_SCALE", "1")))

def work():
    d = {}
    for i in range(N):
        d[i] = str(i * 7919 % 10007)
    return sorted(d.values())
'''
TEST = '''
from work import work

def test_work(benchmark):
    benchmark(work)
'''
FACTORS = (1.0, 1.1, 1.2, 1.3, 1.5)
CLI_TARGET = (10, 1)    # 1.3x caught in >= 10 of 12 pairs; identical failed in <= 1
PYTEST_TARGET = (8, 1)  # of 10 runs


def _env(scale, folder):
    env = child_env()
    env["WORK_SCALE"] = str(scale)
    env["PYTHONPATH"] = folder + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("PYTEST_ADDOPTS", None)
    return env


def _run(cmd, folder, scale):
    t = time.monotonic()
    p = subprocess.run(cmd, cwd=folder, env=_env(scale, folder), capture_output=True,
                       text=True, timeout=1800)
    return p, time.monotonic() - t


def cli(pairs, log):
    folder = tempfile.mkdtemp(prefix="gate-cli-")
    with open(os.path.join(folder, "work.py"), "w") as f:
        f.write(WORK)
    bench = [sys.executable, "-m", "spatialhub.utils.profiling", "--callable", "work:work",
             "--no-progress"]
    failed = {k: 0 for k in FACTORS}
    ratios = {k: [] for k in FACTORS}
    seconds = []
    for i in range(pairs):
        order = FACTORS if i % 2 == 0 else FACTORS[::-1]
        for k in order:
            base, cand = (os.path.join(folder, f"{n}.json") for n in ("base", "cand"))
            p, s = _run(bench + ["--json", base], folder, 1.0)
            assert p.returncode == 0, p.stderr[-2000:]
            seconds.append(s)
            p, s = _run(bench + ["--json", cand], folder, k)
            assert p.returncode == 0, p.stderr[-2000:]
            seconds.append(s)
            out = os.path.join(folder, "verdict.json")
            p, _ = _run([sys.executable, "-m", "spatialhub.utils.profiling", "--compare", base,
                         cand, "--fail-if-slower", "10", "--json", out], folder, 1.0)
            assert p.returncode in (0, 3), p.stderr[-2000:]
            failed[k] += p.returncode == 3
            v = json.loads(open(out).read())
            v = v[0] if isinstance(v, list) else v
            ratios[k].append(v["ratio"])
            log(f"cli pair {i + 1} x{k}: {'FAILED' if p.returncode == 3 else 'passed'} "
                f"{v['verdict']} {v['ratio']:.3f} [{v['ci95_low']:.3f}, {v['ci95_high']:.3f}]")
    return failed, ratios, seconds


def pytest_gate(runs, log, extra=()):
    folder = tempfile.mkdtemp(prefix="gate-pytest-")
    for name, text in (("work.py", WORK), ("test_work.py", TEST)):
        with open(os.path.join(folder, name), "w") as f:
            f.write(text)
    base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:benchmark",
            *extra]
    seconds, result = [], {}
    for saved in (1, 3):
        while _saved(folder) < saved:
            p, s = _run(base + ["--benchmark-autosave"], folder, 1.0)
            assert p.returncode == 0, p.stdout[-2000:]
            seconds.append(s)
        counts = {k: [0, 0] for k in FACTORS}
        plan = [(1.0, runs), (1.3, runs), (1.1, 5), (1.2, 5), (1.5, 5)]
        order = []   # the factors interleaved
        pending = {k: n for k, n in plan}
        while any(pending.values()):
            for k, _ in plan:
                if pending[k]:
                    order.append(k)
                    pending[k] -= 1
        for k in order:
            p, s = _run(base + ["--benchmark-compare", "--benchmark-compare-fail=median:10%"],
                        folder, k)
            assert p.returncode in (0, 1), p.stdout[-2000:]
            seconds.append(s)
            counts[k][0] += p.returncode == 1
            counts[k][1] += 1
            log(f"pytest after {saved} saved x{k}: {'FAILED' if p.returncode else 'passed'}")
        result[saved] = counts
    return result, seconds


def _saved(folder):
    n = 0
    for root, _, files in os.walk(os.path.join(folder, ".benchmarks")):
        n += sum(f.endswith(".json") for f in files)
    return n


def run(quick=False, pairs=12, runs=10, only=None, log=print, pytest_args=()):
    figures = []
    details = {"load_before": load_average()}
    if quick:
        pairs, runs = 2, 2
    if only in (None, "cli"):
        failed, ratios, seconds = cli(pairs, log)
        details["cli"] = {"failed": failed, "ratios": ratios, "seconds": seconds}
        caught, alarms = failed[1.3], failed[1.0]
        figures.append(Figure("gate", f"CLI: 1.3x caught / identical failed, {pairs} pairs",
                              f"{caught} / {alarms}",
                              f">= {CLI_TARGET[0] * pairs // 12} / <= {CLI_TARGET[1]}",
                              caught >= CLI_TARGET[0] * pairs // 12 and alarms <= CLI_TARGET[1]))
        figures.append(Figure("gate", "CLI: failed at 1.1x / 1.2x / 1.5x",
                              " / ".join(str(failed[k]) for k in (1.1, 1.2, 1.5)), "-", None))
        seconds.sort()
        figures.append(Figure("gate", "CLI: a saved run (--json, 10 processes), median s",
                              f"{seconds[len(seconds) // 2]:.1f} s", "<= 15 s",
                              seconds[len(seconds) // 2] <= 15))
    if only in (None, "pytest"):
        result, seconds = pytest_gate(runs, log, pytest_args)
        details["pytest"] = {"result": {str(k): v for k, v in result.items()},
                             "seconds": seconds}
        who = "plugin" + (f" ({' '.join(pytest_args)})" if pytest_args else "")
        for saved, counts in result.items():
            caught, alarms = counts[1.3][0], counts[1.0][0]
            figures.append(Figure(
                "gate", f"{who} after {saved} saved: 1.3x caught / identical failed, {runs} runs",
                f"{caught} / {alarms}", f">= {PYTEST_TARGET[0] * runs // 10} / <= {PYTEST_TARGET[1]}",
                caught >= PYTEST_TARGET[0] * runs // 10 and alarms <= PYTEST_TARGET[1]))
            figures.append(Figure("gate", f"{who} after {saved} saved: failed at 1.1x / 1.2x / 1.5x",
                                  " / ".join(f"{counts[k][0]}/{counts[k][1]}" for k in (1.1, 1.2, 1.5)),
                                  "-", None))
        seconds.sort()
        figures.append(Figure("gate", f"{who}: a compared run" + ("" if pytest_args else
                              " with its spread (7 more processes)") + ", median s",
                              f"{seconds[len(seconds) // 2]:.1f} s", "-", None))
    details["load_after"] = load_average()
    run.details = details
    return figures


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=12)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--only", choices=("cli", "pytest"))
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--pytest-args", default="",
                    help="more options for every pytest run, e.g. '--benchmark-processes 0 "
                         "--benchmark-reference off' (the gate without process medians, without "
                         "the machine speed factor)")
    a = ap.parse_args()

    print(machine_line())
    figs = run(quick=a.quick, pairs=a.pairs, runs=a.runs, only=a.only,
               log=lambda line: print(line, flush=True),
               pytest_args=tuple(shlex.split(a.pytest_args)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(run.details, f, indent=1, default=str)
    print_figures(figs)
