"""The pytest plugin's regression gate: false failures on identical code, detection of a
real 1.5x slowdown.

Runs a small benchmark suite (three benchmarks: a pure-Python loop, a NumPy pipeline,
a sort) in fresh pytest processes, in the order

    base_1 (saved), slow_1, base_2 (saved), slow_2, ..., base_N (saved), slow_N

where every run is gated with ``--benchmark-compare --benchmark-compare-fail=median:10%``
against the latest saved run: base_k against base_{k-1} is identical code (a failure
there is a false failure), slow_k against base_k does 1.5x the work (a failure there is
a detection).  The same pairs are also judged by pytest-benchmark's raw rule (median
ratio > 1.10) for contrast.

    python bench/bench_pytest_gate.py              # N = 20 (inner pytest runs: minutes)
    python bench/bench_pytest_gate.py --pairs 10 --max-time 0.2 --json gate.json
    python bench/bench_pytest_gate.py --pairs 100 --json gate.json --keep runs/  # docs/guide.md

Needs the package installed (the plugin's entry point) and pytest; pytest-benchmark,
if installed, is switched off with -p no:benchmark.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

SUITE = """
    import os
    import numpy as np

    REPS = int(os.environ.get("GATE_REPS", "2"))     # 2: base; 3: 1.5x the work
    IMG = np.random.default_rng(0).random((1, 3, 120, 160), dtype=np.float32)
    DATA = np.random.default_rng(1).random(20_000)

    def python_loop():
        for _ in range(REPS):
            sum(i * i for i in range(1500))

    def numpy_pipeline():
        for _ in range(REPS):
            np.clip(IMG * 1.5, 0.0, 1.0) > 0.6

    def sort():
        for _ in range(REPS):
            np.sort(DATA)

    def test_python_loop(benchmark):
        benchmark(python_loop)

    def test_numpy_pipeline(benchmark):
        benchmark(numpy_pipeline)

    def test_sort(benchmark):
        benchmark(sort)
"""


def run(workdir, reps, max_time, save, extra=(), keep=None):
    out = workdir / "last.json"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:benchmark",
           "test_suite.py", f"--benchmark-max-time={max_time}", f"--benchmark-json={out}",
           "--benchmark-quiet", *extra]
    if (workdir / ".benchmarks").exists():
        cmd += ["--benchmark-compare", "--benchmark-compare-fail=median:10%"]
    if save:
        cmd.append("--benchmark-autosave")
    env = dict(os.environ, GATE_REPS=str(reps))
    env.pop("PYTEST_ADDOPTS", None)
    p = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=300)
    if p.returncode not in (0, 1):
        raise SystemExit(f"pytest failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    doc = json.loads(out.read_text())
    if keep is not None:    # every run's JSON (samples included), to study other rules
        keep.mkdir(parents=True, exist_ok=True)
        n = len(list(keep.glob("*.json")))
        (keep / f"{n:03d}_{'base' if save else 'slow'}.json").write_text(out.read_text())
    comps = [b["spatialhub"].get("comparison") for b in doc["benchmarks"]]
    return p.returncode, [c for c in comps if c is not None]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=20)
    ap.add_argument("--max-time", type=float, default=0.2)
    ap.add_argument("--json", help="write the counts here")
    ap.add_argument("--extra", default="", help="extra pytest options, e.g. --benchmark-reference=off")
    ap.add_argument("--keep", type=Path, help="copy every run's JSON (samples included) here")
    a = ap.parse_args(argv)
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        w = Path(d)
        (w / "test_suite.py").write_text(textwrap.dedent(SUITE))
        same_runs = same_fail_runs = slow_runs = slow_fail_runs = 0
        same_b, slow_b = [], []          # per-benchmark comparisons
        for k in range(a.pairs):
            rc, comps = run(w, 2, a.max_time, save=True, extra=a.extra.split(), keep=a.keep)
            if k > 0:
                same_runs += 1
                same_fail_runs += rc == 1
                same_b += comps
            rc, comps = run(w, 3, a.max_time, save=False, extra=a.extra.split(), keep=a.keep)
            slow_runs += 1
            slow_fail_runs += rc == 1
            slow_b += comps
            print(f"pair {k + 1}/{a.pairs}: identical-code runs failed {same_fail_runs}/"
                  f"{same_runs}, 1.5x runs failed {slow_fail_runs}/{slow_runs}", flush=True)

    def rate(xs, pred):
        return sum(1 for x in xs if pred(x)), len(xs)

    def raw(c):     # the plain ratio of medians, before the machine-speed correction
        return c["ratio"] * (c.get("machine_factor") or 1.0)

    def span(xs, f):
        return [round(min(map(f, xs)), 3), round(max(map(f, xs)), 3)] if xs else None

    res = {
        "pairs": a.pairs, "max_time_s": a.max_time, "threshold": "median:10%",
        "extra": a.extra,
        "identical_runs_failed": [same_fail_runs, same_runs],
        "slowdown_runs_failed": [slow_fail_runs, slow_runs],
        "identical_benchmarks_failed": rate(same_b, lambda c: c["fails"]),
        "slowdown_benchmarks_failed": rate(slow_b, lambda c: c["fails"]),
        "identical_benchmarks_raw_threshold": rate(same_b, lambda c: raw(c) > 1.10),
        "slowdown_benchmarks_raw_threshold": rate(slow_b, lambda c: raw(c) > 1.10),
        "identical_raw_ratio_range": span(same_b, raw),
        "slowdown_raw_ratio_range": span(slow_b, raw),
        "identical_corrected_ratio_range": span(same_b, lambda c: c["ratio"]),
        "slowdown_corrected_ratio_range": span(slow_b, lambda c: c["ratio"]),
        "machine_factor_range": span([c for c in same_b + slow_b if c.get("machine_factor")],
                                     lambda c: c["machine_factor"]),
        "wall_s": round(time.perf_counter() - t_start, 1),
        # every per-benchmark comparison, to study other rules on the same runs
        "identical_comparisons": same_b,
        "slowdown_comparisons": slow_b,
    }

    def pct(pair):
        n, m = pair
        return f"{n}/{m} = {100.0 * n / m:.1f}%" if m else "n/a"

    print()
    print("gate median:10% (ours: verdict slower on the widened interval, ratio above 1.10)")
    print(f"  false failures, identical code:  runs {pct(res['identical_runs_failed'])}, "
          f"benchmarks {pct(res['identical_benchmarks_failed'])}")
    print(f"  detections, 1.5x slowdown:        runs {pct(res['slowdown_runs_failed'])}, "
          f"benchmarks {pct(res['slowdown_benchmarks_failed'])}")
    print("raw threshold (pytest-benchmark's rule: median ratio > 1.10) on the same pairs:")
    print(f"  identical code: {pct(res['identical_benchmarks_raw_threshold'])}; "
          f"1.5x: {pct(res['slowdown_benchmarks_raw_threshold'])}")
    print(f"raw ratios seen: identical {res['identical_raw_ratio_range']}, "
          f"1.5x {res['slowdown_raw_ratio_range']}; machine factors {res['machine_factor_range']}")
    print(f"corrected ratios: identical {res['identical_corrected_ratio_range']}, "
          f"1.5x {res['slowdown_corrected_ratio_range']}")
    print(f"wall time {res['wall_s']} s")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
