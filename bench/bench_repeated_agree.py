"""In-process and fresh-interpreter medians of the demo: do they measure the same thing?

    python bench/bench_repeated_agree.py          # 6 interleaved rounds, ~2 min
    python bench/bench_repeated_agree.py --quick  # 2 rounds

Each round runs, in an order that alternates from round to round:

* in-process: ``spatialhub-bench --iters 200`` (the demo: the NumPy pipeline on a
  1x3x480x640 float32 frame, timed in the process that made the frame);
* repeated:   ``spatialhub-bench --iters 200 --processes 3`` (three fresh interpreters
  put in the parent's state: sys.path, affinity, gc and thread settings, glibc's mmap
  threshold, the frame received out of band into aligned NumPy memory);
* before:     the launcher of the previous version, reproduced here: a multiprocessing
  ``spawn`` pool with the function and the frame pickled in band, three runs.

It prints each variant's median (of the pooled samples) and minor page faults per call,
and the ratio repeated / in-process per round; the figure is the median of those ratios
(target: within 15% of 1).  Quoted in docs/statistics.md ("Repetitions").
"""
import json
import os
import sys
import tempfile

import _common
from _common import Figure

BEFORE = r"""
import json, multiprocessing, pickle, sys, warnings
import numpy as np

def _run_one(payload):
    import warnings
    from spatialhub.utils.profiling import BenchmarkWarning, benchmark_callable
    warnings.simplefilter("ignore", BenchmarkWarning)
    func, args, kwargs = pickle.loads(payload)
    return benchmark_callable(func, *args, **kwargs)

if __name__ == "__main__":
    from spatialhub.utils.profiling.cli import process_pipeline
    frame = np.random.default_rng(0).random((1, 3, 480, 640)).astype(np.float32)
    payload = pickle.dumps((process_pipeline, (frame,), dict(threshold=0.6, num_warmup=5,
                            num_iters=int(sys.argv[1]), progress=False)))
    runs = []
    with multiprocessing.get_context("spawn").Pool(1, maxtasksperchild=1) as pool:
        for _ in range(3):
            runs.append(pool.apply(_run_one, (payload,)))
    samples = np.concatenate([r.samples_ms for r in runs])
    print(json.dumps({"median_ms": float(np.median(samples)),
                      "minor_faults_per_iter": float(np.median([r.minor_faults_per_iter
                                                                for r in runs]))}))
"""


def _cli(args, tmp):
    out = os.path.join(tmp, "r.json")
    p = _common.run_child(["-W", "ignore", "-m", "spatialhub.utils.profiling", "--no-progress",
                           "--json", out, *args])
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-2000:])
    with open(out, encoding="utf-8") as f:
        return json.load(f)


def _before(iters, tmp):
    path = os.path.join(tmp, "before.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(BEFORE)
    p = _common.run_child(["-W", "ignore", path, str(iters)])
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-2000:])
    return json.loads(p.stdout.strip().splitlines()[-1])


def run(quick=False):
    _common.ensure_importable()
    rounds, iters = (2, 50) if quick else (6, 200)
    variants = ["in-process", "repeated", "before"]
    got = {v: [] for v in variants}
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            for v in (variants if r % 2 == 0 else variants[::-1]):
                if v == "in-process":
                    d = _cli(["--iters", str(iters)], tmp)
                elif v == "repeated":
                    d = _cli(["--iters", str(iters), "--processes", "3"], tmp)
                else:
                    d = _before(iters, tmp)
                got[v].append((d["median_ms"], d.get("minor_faults_per_iter")))
    load1 = os.getloadavg()[0]
    rows = []
    for r in range(rounds):
        base = got["in-process"][r][0]
        rows.append([r + 1] + [f"{got[v][r][0]:.3f} ({got[v][r][1]:.0f})" for v in variants]
                    + [f"{got['repeated'][r][0] / base:.2f}", f"{got['before'][r][0] / base:.2f}"])
    _common.print_details(
        f"demo medians, ms (minor page faults per call), {iters} timed calls; load average "
        f"{load0:.2f} before, {load1:.2f} after",
        ["round"] + variants + ["repeated / in-process", "before / in-process"], rows)
    ratio = _common.median([got["repeated"][r][0] / got["in-process"][r][0] for r in range(rounds)])
    old = _common.median([got["before"][r][0] / got["in-process"][r][0] for r in range(rounds)])
    return [Figure("repeated", "demo: repeated / in-process median (median of rounds)",
                   f"{ratio:.2f}x", "0.85-1.15x", 0.85 <= ratio <= 1.15),
            Figure("repeated", "demo: the previous launcher / in-process", f"{old:.2f}x", "-")]


if __name__ == "__main__":
    sys.exit(_common.run_script(run))
