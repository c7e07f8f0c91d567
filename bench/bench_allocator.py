"""Allocator state decides the number: the demo pipeline with and without page faults.

    python bench/bench_allocator.py            # 3 rounds x 3 variants of fresh processes
    python bench/bench_allocator.py --quick

The CLI's demo workload (np.clip(frame * 1.5, 0, 1) > 0.6 on a 1x3x480x640 float32
frame: two 3.7 MB temporaries per call) is timed in fresh interpreters, three ways,
interleaved over rounds:

* default:   the frame made directly as float32 (the demo's frame before it was made
             like the README's example's);
* env:       MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=134217728, so glibc
             keeps freed blocks instead of handing them back to the kernel;
* freed 7MB: an unrelated 7 MB array allocated and freed before the benchmark (as the
             README's example and the demo do): glibc's dynamic mmap threshold rises past 3.7 MB
             and the temporaries come from the heap from then on.

Each prints the median and the minor page faults per call (getrusage(RUSAGE_THREAD),
read around the timed loop).  Quoted in docs/methodology.md ("Allocator state").
"""
import json
import sys

import _common
from _common import Figure

CHILD = r"""
import json, sys, warnings
import numpy as np
from spatialhub.utils.profiling import BenchmarkWarning, benchmark_callable
warnings.simplefilter("ignore", BenchmarkWarning)
if sys.argv[1] == "freed":
    junk = np.ones(7 * 1024 * 1024 // 8)
    del junk
frame = np.random.default_rng(0).random((1, 3, 480, 640), dtype=np.float32)
def process_pipeline(image_tensor, threshold=0.5):
    return np.clip(image_tensor * 1.5, 0.0, 1.0) > threshold
s = benchmark_callable(process_pipeline, frame, threshold=0.6, num_warmup=5, num_iters=int(sys.argv[2]),
                       track_ram=False, progress=False)
print(json.dumps({"median": s.median_ms, "faults": s.minor_faults_per_iter,
                  "invol": s.invol_ctx_switches_per_iter}))
"""

VARIANTS = {
    "default": {},
    "env": {"MALLOC_MMAP_THRESHOLD_": "33554432", "MALLOC_TRIM_THRESHOLD_": "134217728"},
    "freed 7MB": {},
}


def run(quick=False):
    _common.ensure_importable()
    rounds, iters = (1, 20) if quick else (3, 50)
    got = {k: [] for k in VARIANTS}
    for _ in range(rounds):
        for label, extra in VARIANTS.items():
            env = _common.child_env()
            for var in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"):
                env.pop(var, None)
            env.update(extra)
            import subprocess
            p = subprocess.run([sys.executable, "-c", CHILD, "freed" if label == "freed 7MB" else "-",
                                str(iters)], capture_output=True, text=True, env=env, timeout=600)
            if p.returncode != 0:
                raise RuntimeError(p.stderr[-2000:])
            got[label].append(json.loads(p.stdout.strip().splitlines()[-1]))
    rows = []
    for label, rs in got.items():
        med = _common.median([r["median"] for r in rs])
        faults = _common.median([r["faults"] for r in rs]) if rs[0]["faults"] is not None else None
        rows.append((label, med, faults))
    _common.print_details("allocator state (median of rounds)",
                          ["variant", "median (ms)", "minor faults / call", "vs default"],
                          [[lb, f"{m:.3f}", "n/a" if f is None else f"{f:.0f}",
                            f"{m / rows[0][1]:.2f}x"] for lb, m, f in rows])
    base = rows[0]
    figs = [Figure("allocator", f"{lb}: median vs default", f"{m / base[1]:.2f}x", "-", None)
            for lb, m, _ in rows[1:]]
    figs += [Figure("allocator", f"{lb}: minor faults per call", "n/a" if f is None else f"{f:.0f}",
                    "-", None) for lb, _, f in rows]
    return figs


if __name__ == "__main__":
    sys.exit(_common.run_script(run))
