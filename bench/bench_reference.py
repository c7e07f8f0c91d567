"""How well the pytest plugin's machine-speed reference tracks a benchmark across runs.

    python bench/bench_reference.py            # 16 fresh processes
    python bench/bench_reference.py --runs 30

Each fresh interpreter times the three benchmarks of bench_pytest_gate.py's suite (a
pure-Python loop, a NumPy pipeline, a sort; ~0.2 s each) twice, next to the plugin's
reference workload (pytest_plugin.fixture.reference_workload):

  before/after   150 reference calls before and 150 after the benchmark (the plugin's
                 pedantic() path, and benchmark(func) before session 4)
  interleaved    20 reference calls before each of 8 segments of the benchmark and after
                 the last (benchmark(func) now)

Printed per benchmark: the standard deviation, across the processes, of the log of the
raw median and of the median divided by the reference's median.  The smaller the
corrected spread, the smaller the run-to-run spread the regression gate has to allow,
and the smaller the slowdown it can catch (docs/guide.md, decision 37).  Run it on a
machine as busy as the one you gate on: on an idle one there is little to correct.
"""
import argparse
import json
import math
import statistics
import subprocess
import sys

import _common

CHILD = r'''
import json, warnings
import numpy as np
from spatialhub.utils.profiling import BenchmarkWarning, benchmark_callable
from spatialhub.utils.profiling.pytest_plugin.fixture import reference_workload
warnings.simplefilter("ignore", BenchmarkWarning)
IMG = np.random.default_rng(0).random((1, 3, 120, 160), dtype=np.float32)
DATA = np.random.default_rng(1).random(20_000)
def python_loop():
    for _ in range(2):
        sum(i * i for i in range(1500))
def numpy_pipeline():
    for _ in range(2):
        np.clip(IMG * 1.5, 0.0, 1.0) > 0.6
def sort():
    for _ in range(2):
        np.sort(DATA)
kw = dict(track_ram=False, track_vram=False, progress=False)
def ref(n):
    return list(benchmark_callable(reference_workload, num_warmup=2, num_iters=n, **kw).samples_ms)
out = {}
for f in (python_loop, numpy_pipeline, sort):
    rounds = max(5, int(200 / benchmark_callable(f, num_warmup=3, num_iters=3, **kw).median_ms))
    r0 = ref(150)
    s = benchmark_callable(f, num_warmup=5, num_iters=rounds, **kw)
    r1 = ref(150)
    segs, refs, samples = 8, [], []
    for i in range(segs):
        refs += ref(20)
        samples += list(benchmark_callable(f, num_warmup=1 if i == 0 else 0,
                                           num_iters=max(1, rounds // segs), **kw).samples_ms)
    refs += ref(20)
    out[f.__name__] = dict(ba_med=s.median_ms,
                           ba_ref=float(np.median(r0) * np.median(r1)) ** 0.5,
                           il_med=float(np.median(samples)), il_ref=float(np.median(refs)))
print(json.dumps(out))
'''


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=16, help="fresh processes (default 16)")
    a = ap.parse_args(argv)
    _common.ensure_importable()
    print(_common.machine_line())
    res = []
    for _ in range(a.runs):
        p = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(p.stderr[-2000:])
        res.append(json.loads(p.stdout.strip().splitlines()[-1]))

    def sd(xs):
        return statistics.stdev(xs)

    print(f"\nstd of log medians across {a.runs} fresh processes\n")
    print("| benchmark | raw | before/after-corrected | interleaved raw | interleaved-corrected |")
    print("| :--- | ---: | ---: | ---: | ---: |")
    for name in res[0]:
        r = [x[name] for x in res]
        print(f"| {name} | {sd([math.log(v['ba_med']) for v in r]):.3f} "
              f"| {sd([math.log(v['ba_med'] / v['ba_ref']) for v in r]):.3f} "
              f"| {sd([math.log(v['il_med']) for v in r]):.3f} "
              f"| {sd([math.log(v['il_med'] / v['il_ref']) for v in r]):.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
