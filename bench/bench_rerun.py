"""How well the rerun interval covers the medians of fresh processes (issue 22).

    python bench/bench_rerun.py              # calibration + 2 x 24 fresh processes, ~4 min
    python bench/bench_rerun.py --quick      # 2 x 6, smoke test

Two workloads -- ``sorted`` of 1,000 floats and the CLI's demo pipeline
(np.clip(frame * 1.5, 0, 1) > 0.6 on a 1x3x480x640 float32 frame, made as the demo makes
it) -- each run N times, alternating (A B B A ...), in a fresh interpreter started the
way a user reruns a script (``python -c``), 10 warm-up + 300 timed calls.  Each run's
rerun interval is judged against the medians of all the *other* runs of its workload:

* coverage: the share of other runs' medians inside the interval, averaged over runs
  (target >= 90%);
* width: log(high / low) over log(max / min) of the N medians (target <= 3);

for the interval a single run states (its basis: the assumed 15%, or 25% when it
started on a busy machine), the assumed 15% whatever the load (recomputed from the
samples), this machine's calibration (``calibrate_run_spread(20)``, measured *before*
the runs: out of sample), and from repetitions (windows of 5 consecutive runs pooled as benchmark_repeated pools
them, judged on the runs outside the window).  The CI of the median is shown beside
them for contrast.  Quoted in docs/statistics.md ("Rerun interval").
"""
import json
import math
import os
import sys

import _common
from _common import Figure

CHILD = r"""
import json, os, sys, warnings
import numpy as np
from spatialhub.utils.profiling import BenchmarkWarning, benchmark_callable
warnings.simplefilter("ignore", BenchmarkWarning)
if sys.argv[1] == "sort":
    values = list(np.random.default_rng(0).random(1000))
    func, args, kw = sorted, (values,), {}
else:
    frame = np.random.default_rng(0).random((1, 3, 480, 640)).astype(np.float32)
    def process_pipeline(image_tensor, threshold=0.5):
        return np.clip(image_tensor * 1.5, 0.0, 1.0) > threshold
    func, args, kw = process_pipeline, (frame,), {"threshold": 0.6}
s = benchmark_callable(func, *args, num_warmup=10, num_iters=int(sys.argv[2]), track_ram=False,
                       progress=False, **kw)
print(json.dumps({"median": s.median_ms, "ci": [s.ci95_low_ms, s.ci95_high_ms],
                  "rerun": [s.rerun_low_ms, s.rerun_high_ms], "basis": s.rerun_basis,
                  "busy": s.machine_busy, "samples": list(s.samples_ms),
                  "load": os.getloadavg()[0]}))
"""

WORKLOADS = {"sort": "sorted 1,000 floats", "pipeline": "demo pipeline 1x3x480x640"}


def _coverage(intervals, medians, exclude):
    """Mean over intervals of the share of the medians not excluded that fall inside."""
    shares = []
    for (lo, hi), skip in zip(intervals, exclude):
        others = [m for j, m in enumerate(medians) if j not in skip]
        shares.append(sum(lo <= m <= hi for m in others) / len(others))
    return sum(shares) / len(shares)


def _widths(intervals, medians):
    spread = math.log(max(medians) / min(medians))
    return sorted(math.log(hi / lo) / spread for lo, hi in intervals)


def run(quick=False):
    _common.ensure_importable()
    _common.quiet_warnings()
    import numpy as np

    from spatialhub.utils.profiling import _native
    from spatialhub.utils.profiling.calibrate import calibrate_run_spread
    from spatialhub.utils.profiling.runner import _pool

    n, iters = (6, 100) if quick else (24, 300)
    load0 = os.getloadavg()[0]
    cal = calibrate_run_spread(5 if quick else 20, save=False)
    runs = {k: [] for k in WORKLOADS}
    for r in range(n):
        for k in (list(WORKLOADS) if r % 2 == 0 else list(WORKLOADS)[::-1]):
            p = _common.run_child(["-c", CHILD, k, str(iters)])
            if p.returncode != 0:
                raise RuntimeError(p.stderr[-2000:])
            runs[k].append(json.loads(p.stdout.strip().splitlines()[-1]))
    load1 = os.getloadavg()[0]
    figs, rows = [], []
    old = _native._set_machine_run_spread(cal["run_spread"], cal["processes"])
    try:
        for k, rs in runs.items():
            med = [r["median"] for r in rs]
            alone = [{i} for i in range(n)]
            ci = [tuple(r["ci"]) for r in rs]
            assumed = [tuple(r["rerun"]) for r in rs]
            calibrated, quiet = [], []
            for r in rs:
                s = _native._stats_from_samples(np.array(r["samples"]))   # machine_busy None
                calibrated.append((s.rerun_low_ms, s.rerun_high_ms))
                _native._set_machine_run_spread(None, None)
                s = _native._stats_from_samples(np.array(r["samples"]))
                quiet.append((s.rerun_low_ms, s.rerun_high_ms))
                _native._set_machine_run_spread(cal["run_spread"], cal["processes"])
            w = 5
            windows, outside = [], []
            for i in range(n - w + 1):
                pool = []
                for r in rs[i:i + w]:
                    s = _native._stats_from_samples(np.array(r["samples"]))
                    s.machine_busy = r["busy"]
                    pool.append(s)
                p = _pool(pool, [len(r["samples"]) for r in rs[i:i + w]], k, fresh=True)
                windows.append((p.rerun_low_ms, p.rerun_high_ms))
                outside.append(set(range(i, i + w)))
            spread = float(np.std(np.log(med), ddof=1))
            rng = max(med) / min(med)
            bases = sorted({r["basis"] for r in rs})
            for label, iv, ex in (("CI of the median", ci, alone),
                                  (f"rerun as stated ({', '.join(bases)})", assumed, alone),
                                  ("rerun, 15% assumed whatever the load", quiet, alone),
                                  (f"rerun, calibrated {100 * cal['run_spread']:.1f}%",
                                   calibrated, alone),
                                  ("rerun, from 5 repetitions", windows, outside)):
                cov = _coverage(iv, med, ex)
                wd = _widths(iv, med)
                rows.append([WORKLOADS[k], label, len(iv), f"{100 * cov:.0f}%",
                             f"{wd[len(wd) // 2]:.2f}", f"{wd[-1]:.2f}"])
                if label.startswith("CI") or "whatever the load" in label:
                    continue
                figs.append(Figure("rerun", f"{WORKLOADS[k]}: {label}: coverage",
                                   f"{100 * cov:.0f}%", ">= 90%", cov >= 0.90 - 1e-9))
                figs.append(Figure("rerun", f"{WORKLOADS[k]}: {label}: median width / range",
                                   f"{wd[len(wd) // 2]:.2f}", "<= 3", wd[len(wd) // 2] <= 3))
            busy = sum(bool(r["busy"]) for r in rs)
            rows.append([WORKLOADS[k], f"(medians: {min(med):.3f}-{max(med):.3f} ms, range "
                         f"{rng:.2f}x, std of logs {100 * spread:.1f}%; busy in {busy} of {n})",
                         "", "", "", ""])
    finally:
        _native._set_machine_run_spread(*old)
    _common.print_details(
        f"rerun intervals against the other fresh processes' medians ({n} per workload, "
        f"load average {load0:.2f} before, {load1:.2f} after; calibration "
        f"{100 * cal['run_spread']:.1f}% over {cal['processes']} processes at load "
        f"{cal['load_before']:.2f})",
        ["workload", "interval", "intervals", "coverage", "median width / range",
         "max width / range"], rows)
    return figs


if __name__ == "__main__":
    sys.exit(_common.run_script(run))
