"""The instruction-count gate: false alarms on identical code, detection of a 2% and a 5%
change, for the pytest plugin and for the CLI, each try one run against a saved one.

* pytest: a suite of three benchmarks (a pure-Python loop, a NumPy pipeline, a sort), run
  with ``--benchmark-instructions``; the first run is saved, every try is one more run
  gated with ``--benchmark-compare=0001 --benchmark-compare-fail=instructions:1%``.
* CLI: ``spatialhub-bench --callable gate_workloads.py:mixed --instructions --json``; the
  first run's file is the baseline, every try is one more run and
  ``--compare base.json try.json --instructions --fail-if-slower 1``.

Identical code (``GATE_REPS=100``) must never fail; 2% more work (102) and 5% more (105)
must fail every time.  Runs go ``--jobs`` at a time: a count does not move with the
machine's load (that is the point), only this script's wall time does.

    python bench/bench_instruction_gate.py --json gate.json --log tries.jsonl
        # 20 + 20 + 5 tries per tool: ~1 h on a quiet 2-core VM, hours on a loaded one
    python bench/bench_instruction_gate.py --tries 1 --tries5 0 --check   # a smoke run
    python bench/bench_instruction_gate.py --from-log tries.jsonl   # the rates of a log

Needs valgrind, the package installed (the plugin's entry point, the spatialhub-bench
script) and pytest.  ``--check`` exits 1 on a false alarm or a missed change.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

WORKLOADS = """
    import os
    import numpy as np

    REPS = int(os.environ.get("GATE_REPS", "100"))   # 100 identical; 102: +2%; 105: +5%
    IMG = np.random.default_rng(0).random((1, 3, 40, 60), dtype=np.float32)
    DATA = np.random.default_rng(1).random(1_000)

    def python_loop():
        for _ in range(REPS):
            sum(i * i for i in range(30))

    def numpy_pipeline():
        for _ in range(REPS):
            np.clip(IMG * 1.5, 0.0, 1.0) > 0.6

    def sort():
        for _ in range(REPS):
            np.sort(DATA)

    def mixed():
        python_loop()
        numpy_pipeline()
        sort()
"""

SUITE = """
    from gate_workloads import numpy_pipeline, python_loop, sort

    def test_python_loop(benchmark):
        benchmark(python_loop)

    def test_numpy_pipeline(benchmark):
        benchmark(numpy_pipeline)

    def test_sort(benchmark):
        benchmark(sort)
"""

# plugins that import heavy libraries at start-up cost minutes under valgrind
# (hypothesis: ~100 s); the suite needs none of them
PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:benchmark",
          "-p", "no:hypothesispytest", "test_suite.py", "--benchmark-instructions"]
CLI = [sys.executable, "-m", "spatialhub.utils.profiling"]


def _env(reps):
    env = dict(os.environ, GATE_REPS=str(reps))
    env.pop("PYTEST_ADDOPTS", None)
    return env


def _run(cmd, cwd, reps, ok=(0,)):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=cwd, env=_env(reps), capture_output=True, text=True,
                       timeout=1800)
    wall = time.perf_counter() - t0
    if p.returncode not in ok:
        raise SystemExit(f"{' '.join(map(str, cmd))} failed ({p.returncode}):\n"
                         f"{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p.returncode, wall


BASE = {}   # pytest: fullname -> the saved run's instructions per call


def pytest_base(w):
    _, wall = _run(PYTEST + ["--benchmark-save=base", f"--benchmark-json={w / 'base.json'}"],
                   w, 100)
    doc = json.loads((w / "base.json").read_text())
    BASE.update({b["fullname"]: b["stats"]["instructions"] for b in doc["benchmarks"]})
    return wall


def pytest_try(w, k, reps):
    out = w / f"try_{k:03d}.json"
    rc, wall = _run(PYTEST + [f"--benchmark-json={out}", "--benchmark-compare=0001",
                              "--benchmark-compare-fail=instructions:1%"], w, reps, ok=(0, 1))
    doc = json.loads(out.read_text())
    checks = [c for b in doc["benchmarks"] for c in b["spatialhub"].get("checks") or ()]
    ratios = [b["stats"]["instructions"] / BASE[b["fullname"]] for b in doc["benchmarks"]]
    return {"reps": reps, "fails": rc == 1, "wall_s": wall,
            "benchmarks_failed": sum(c["fails"] for c in checks), "benchmarks": len(checks),
            "ratios": ratios}


def cli_base(w):
    # its own file: the pytest baseline's base.json is written beside it, at the same time
    _, wall = _run(CLI + ["--callable", "gate_workloads.py:mixed", "--instructions",
                          "--no-progress", "--json", "cli_base.json"], w, 100)
    return wall


def cli_try(w, k, reps):
    out = w / f"cli_{k:03d}.json"
    _, wall = _run(CLI + ["--callable", "gate_workloads.py:mixed", "--instructions",
                          "--no-progress", "--json", str(out)], w, reps)
    rc, _ = _run(CLI + ["--compare", "cli_base.json", str(out), "--instructions",
                        "--fail-if-slower", "1", "--json", str(w / f"cmp_{k:03d}.json")],
                 w, reps, ok=(0, 3))
    cmp = json.loads((w / f"cmp_{k:03d}.json").read_text())
    return {"reps": reps, "fails": rc == 3, "wall_s": wall, "benchmarks_failed": int(rc == 3),
            "benchmarks": 1, "ratios": [cmp["ratio"]]}


TOOLS = {"pytest": (pytest_base, pytest_try), "cli": (cli_base, cli_try)}


def summarize(tries, reps):
    xs = [t for t in tries if t["reps"] == reps]
    ratios = [r for t in xs for r in t["ratios"]]
    return {"runs_failed": [sum(t["fails"] for t in xs), len(xs)],
            "benchmarks_failed": [sum(t["benchmarks_failed"] for t in xs),
                                  sum(t["benchmarks"] for t in xs)],
            "ratio_range": [round(min(ratios), 5), round(max(ratios), 5)] if ratios else None}


def load():
    try:
        return round(os.getloadavg()[0], 1)
    except OSError:
        return None


def native_walls(w):
    """The same commands without --instructions (wall time, for the cost)."""
    _, py = _run([c for c in PYTEST if c != "--benchmark-instructions"]
                 + ["--benchmark-max-time=0.05"], w, 100)
    _, cli = _run(CLI + ["--callable", "gate_workloads.py:mixed", "--no-progress",
                         "--warmup", "10", "--iters", "5"], w, 100)
    return round(py, 1), round(cli, 1)


def run_tools(w, names, tries, tries5, jobs, log=None):
    """Both tools at once: their baselines, then every try, ``jobs`` runs at a time,
    identical and changed runs interleaved (so that a run cut short has some of each);
    with ``log``, each try's result is appended to it as one JSON line when it ends."""
    plan = [r for k in range(max(tries, tries5)) for r in
            ([100] if k < tries else []) + ([102] if k < tries else []) +
            ([105] if k < tries5 else [])]
    t0 = time.perf_counter()

    def one(x):
        n, k, reps = x
        r = TOOLS[n][1](w, k, reps)
        if log:
            with open(log, "a") as f:
                f.write(json.dumps({"tool": n, "try": k, "load": load(), **r}) + "\n")
        return n, r

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        base_walls = dict(zip(names, pool.map(lambda n: TOOLS[n][0](w), names)))
        work = [(n, k, reps) for k, reps in enumerate(plan) for n in names]
        done = list(pool.map(one, work))
    out = {}
    for n in names:
        results = [r for m, r in done if m == n]
        res = out[n] = {"identical": summarize(results, 100),
                        "plus_2pct": summarize(results, 102),
                        "plus_5pct": summarize(results, 105),
                        "run_wall_s_median": round(statistics.median(
                            [base_walls[n]] + [r["wall_s"] for r in results]), 1)}
        print(f"{n}: identical runs failed {res['identical']['runs_failed']}, +2% runs failed "
              f"{res['plus_2pct']['runs_failed']}, +5% runs failed "
              f"{res['plus_5pct']['runs_failed']}; one run {res['run_wall_s_median']} s under "
              f"callgrind ({jobs} at a time)", flush=True)
    return out, round(time.perf_counter() - t0, 1)


def summarize_log(path):
    """The rates of the tries a --log holds, per tool (the loads seen as they ended)."""
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    out = {}
    for n in sorted({r["tool"] for r in rows}):
        rs = [r for r in rows if r["tool"] == n]
        loads = [r["load"] for r in rs if r.get("load") is not None]
        out[n] = {"identical": summarize(rs, 100), "plus_2pct": summarize(rs, 102),
                  "plus_5pct": summarize(rs, 105),
                  "run_wall_s_median": round(statistics.median(r["wall_s"] for r in rs), 1),
                  "load_range": [min(loads), max(loads)] if loads else None}
    print(json.dumps(out, indent=2))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tries", type=int, default=20, help="identical and +2%% tries each")
    ap.add_argument("--tries5", type=int, default=5, help="+5%% tries")
    ap.add_argument("--jobs", type=int, default=2, help="runs at a time")
    ap.add_argument("--only", choices=("pytest", "cli"), help="one tool only")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--log", help="append each try's result here as it ends (JSON lines)")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 on a false alarm or a missed change")
    ap.add_argument("--from-log", metavar="LOG",
                    help="summarize a --log of a run (one cut short, too) and exit")
    a = ap.parse_args(argv)
    if a.from_log:
        return summarize_log(a.from_log)
    if shutil.which("valgrind") is None:
        print("valgrind is not installed: the instruction gate cannot be measured here")
        return 0 if not a.check else 1
    res = {"tries": a.tries, "tries5": a.tries5, "jobs": a.jobs, "load_start": load(),
           "rule": "instructions:1% (pytest) / --instructions --fail-if-slower 1 (CLI)"}
    names = [a.only] if a.only else ["pytest", "cli"]
    with tempfile.TemporaryDirectory(prefix="shp_igate_") as d:
        w = Path(d)
        (w / "gate_workloads.py").write_text(textwrap.dedent(WORKLOADS))
        (w / "test_suite.py").write_text(textwrap.dedent(SUITE))
        if not a.check:
            res["native_wall_s"] = dict(zip(("pytest", "cli"), native_walls(w)))
        tools, res["total_wall_s"] = run_tools(w, names, a.tries, a.tries5, a.jobs, a.log)
        res.update(tools)
    res["load_end"] = load()
    print(json.dumps(res, indent=2))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2) + "\n")
    bad = []
    for tool in ("pytest", "cli"):
        r = res.get(tool)
        if r is None:
            continue
        if r["identical"]["runs_failed"][0]:
            bad.append(f"{tool}: identical code failed the gate")
        for k in ("plus_2pct", "plus_5pct"):
            f, n = r[k]["runs_failed"]
            if f < n:
                bad.append(f"{tool}: a {k[5:]} change passed the gate {n - f} time(s)")
    for b in bad:
        print("FAIL:", b)
    return 1 if (a.check and bad) else 0


if __name__ == "__main__":
    raise SystemExit(main())
