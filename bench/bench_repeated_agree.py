"""In-process and fresh-interpreter medians of the demo: do they measure the same thing?

    python bench/bench_repeated_agree.py          # 20 rounds, ~5 min
    python bench/bench_repeated_agree.py --quick  # 3 rounds

Each round is a new parent process that makes the demo's frame as the CLI does (float64,
then float32: freeing the float64 array raises glibc's mmap threshold) and times the
demo pipeline (np.clip(frame * 1.5, 0, 1) > 0.6 on 1x3x480x640 float32, 5 warm-up + 200
timed calls) two ways, in an order that alternates from round to round:

* in-process: ``benchmark_callable`` three times in the parent, the samples pooled (a
  pool of three runs against a pool of three: under bursts of load a single run's median
  is inflated more often than a pool's);
* repeated:   ``benchmark_repeated(..., repeat=3)``: three fresh interpreters put in the
  parent's state (sys.path, affinity, gc and thread settings, glibc's mmap threshold,
  the frame received out of band into aligned NumPy memory), pooled.

In the first three rounds the parent also runs the launcher of the previous version,
reproduced here ("before": a multiprocessing ``spawn`` pool, the function and the frame
pickled in band, three runs).  A new parent per round matters: a process sits at a level
of its own (the between-run spread), so one parent's in-process runs are one draw.  The
figure is the geometric mean of the per-round ratios repeated / in-process with its 95%
interval (t, rounds - 1 df), and the median of the ratios with its distribution-free
95% interval (robust to a round hit by a burst); target: within 15% of 1.  Minor page faults per call are
printed beside each median.  Quoted in docs/statistics.md ("Repetitions").
"""
import json
import os
import sys
import tempfile

import _common
from _common import Figure

PARENT = r"""
import json, multiprocessing, pickle, sys, warnings
import numpy as np

def _run_one(payload):
    import warnings
    from spatialhub.utils.profiling import BenchmarkWarning, benchmark_callable
    warnings.simplefilter("ignore", BenchmarkWarning)
    func, args, kwargs = pickle.loads(payload)
    return benchmark_callable(func, *args, **kwargs)

def before(func, frame, kw):   # the previous version's benchmark_repeated, as it was
    payload = pickle.dumps((func, (frame,), kw))
    runs = []
    with multiprocessing.get_context("spawn").Pool(1, maxtasksperchild=1) as pool:
        for _ in range(3):
            runs.append(pool.apply(_run_one, (payload,)))
    return (float(np.median(np.concatenate([r.samples_ms for r in runs]))),
            float(np.median([r.minor_faults_per_iter for r in runs])))

if __name__ == "__main__":
    from spatialhub.utils.profiling import BenchmarkWarning, benchmark_callable, benchmark_repeated
    from spatialhub.utils.profiling.cli import process_pipeline
    warnings.simplefilter("ignore", BenchmarkWarning)
    frame = np.random.default_rng(0).random((1, 3, 480, 640)).astype(np.float32)   # as the CLI
    kw = dict(threshold=0.6, num_warmup=5, num_iters=int(sys.argv[1]), progress=False)
    order = ["in-process", "repeated"] if sys.argv[2] == "0" else ["repeated", "in-process"]
    if sys.argv[3] == "1":
        order.append("before")
    out = {}
    for v in order:
        if v == "in-process":   # three runs pooled, as the three repetitions are
            runs = [benchmark_callable(process_pipeline, frame, **kw) for _ in range(3)]
            out[v] = (float(np.median(np.concatenate([r.samples_ms for r in runs]))),
                      float(np.median([r.minor_faults_per_iter for r in runs])))
        elif v == "repeated":
            s = benchmark_repeated(process_pipeline, frame, repeat=3, **kw)
            out[v] = (s.median_ms, s.minor_faults_per_iter)
        else:
            out[v] = before(process_pipeline, frame, kw)
    print(json.dumps(out))
"""


def run(quick=False):
    _common.ensure_importable()
    import math

    rounds, iters = (3, 50) if quick else (20, 200)
    got = []
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "parent.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(PARENT)
        for r in range(rounds):
            p = _common.run_child(["-W", "ignore", path, str(iters), str(r % 2),
                                   "1" if r < 3 else "0"])
            if p.returncode != 0:
                raise RuntimeError(p.stderr[-2000:])
            got.append(json.loads(p.stdout.strip().splitlines()[-1]))
    load1 = os.getloadavg()[0]
    cell = (lambda d, v: f"{d[v][0]:.3f} ({d[v][1]:.0f})" if v in d else "")
    rows = [[r + 1, cell(d, "in-process"), cell(d, "repeated"), cell(d, "before"),
             f"{d['repeated'][0] / d['in-process'][0]:.2f}",
             f"{d['before'][0] / d['in-process'][0]:.1f}" if "before" in d else ""]
            for r, d in enumerate(got)]
    _common.print_details(
        f"demo medians, ms (minor page faults per call), {iters} timed calls, one parent "
        f"process per round; load average {load0:.2f} before, {load1:.2f} after",
        ["round", "in-process", "repeated (3)", "before (3)", "repeated / in-process",
         "before / in-process"], rows)
    logs = [math.log(d["repeated"][0] / d["in-process"][0]) for d in got]
    mean = sum(logs) / len(logs)
    sd = (sum((x - mean) ** 2 for x in logs) / (len(logs) - 1)) ** 0.5
    t = {2: 4.303, 19: 2.093}.get(len(logs) - 1, 2.0)
    half = t * sd / len(logs) ** 0.5
    gm, lo, hi = math.exp(mean), math.exp(mean - half), math.exp(mean + half)
    from spatialhub.utils.profiling import _native

    ratios = _native._stats_from_samples([d["repeated"][0] / d["in-process"][0] for d in got])
    old = _common.median([d["before"][0] / d["in-process"][0] for d in got if "before" in d])
    faults = _common.median([d["repeated"][1] for d in got])
    return [Figure("repeated", "demo: repeated / in-process, geometric mean of rounds [95%]",
                   f"{gm:.2f}x [{lo:.2f}, {hi:.2f}]", "0.85-1.15x", 0.85 <= gm <= 1.15),
            Figure("repeated", "demo: repeated / in-process, median of rounds [95%]",
                   f"{ratios.median_ms:.2f}x [{ratios.ci95_low_ms:.2f}, "
                   f"{ratios.ci95_high_ms:.2f}]", "0.85-1.15x",
                   0.85 <= ratios.median_ms <= 1.15),
            Figure("repeated", "demo: minor page faults per call, repeated", f"{faults:.0f}", "-"),
            Figure("repeated", "demo: the previous launcher / in-process", f"{old:.1f}x", "-")]


if __name__ == "__main__":
    sys.exit(_common.run_script(run))
