"""False verdicts of repetitions on identical code, on a busy machine (issue 22).

    python bench/bench_repeat_verdicts.py             # 20 interleaved + 10 sequential, ~8 min
    python bench/bench_repeat_verdicts.py --quick     # 2 + 1
    python bench/bench_repeat_verdicts.py --burn 2    # plus 2 CPU-bound processes of our own
    python bench/bench_repeat_verdicts.py --trials 0 --sequential 0 --detect 10
                                                      # how often a real slowdown is found

Two byte-identical functions (bench/_identical.py: the NumPy pipeline on a 1x3x240x320
float32 frame) are compared with repeat=5 fresh interpreters per side:

* interleaved: ``compare_repeated(a, b, frame, repeat=5)`` -- A1 B1 B2 A2 A3 B3 ...;
* sequential:  ``benchmark_repeated(a, ..., repeat=5)`` then the same for b, judged by
  ``compare_benchmarks`` (what the previous version offered).

Any "faster" or "slower" is false.  Target for the interleaved comparison: at most 1
in 20.  The load average and how many runs saw a busy machine are printed with the
figures; every reason of a busy run must carry the caveat.  Quoted in
docs/statistics.md ("Repetitions").
"""
import os
import subprocess
import sys

import _common
from _common import Figure

BURNER = "import time\nend = time.time() + 3600\nwhile time.time() < end:\n    pass\n"


def run(quick=False, burn=0, detect=0, trials=None, seq=None):
    _common.ensure_importable()
    _common.quiet_warnings()
    import warnings

    import numpy as np

    from _identical import pipeline_a, pipeline_b, pipeline_slower
    from spatialhub.utils.profiling import (BenchmarkWarning, benchmark_repeated,
                                            compare_benchmarks, compare_repeated)

    dt, ds = (2, 1) if quick else (20, 10)
    trials, seq = (dt if trials is None else trials), (ds if seq is None else seq)
    frame = np.random.default_rng(0).random((1, 3, 240, 320)).astype(np.float32)
    opts = dict(num_warmup=10, num_iters=50 if quick else 200, track_ram=False)
    burners = [subprocess.Popen([sys.executable, "-c", BURNER]) for _ in range(burn)]
    loads, results = [os.getloadavg()[0]], {"interleaved": [], "sequential": []}
    if detect:
        results["interleaved, candidate slower"] = []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", BenchmarkWarning)
            for t in range(trials + seq + detect):
                if t >= trials + seq:
                    c = compare_repeated(pipeline_a, pipeline_slower, frame, repeat=5, **opts)
                    kind = "interleaved, candidate slower"
                elif t < trials:
                    c = compare_repeated(pipeline_a, pipeline_b, frame, repeat=5, **opts)
                    kind = "interleaved"
                else:
                    pa = benchmark_repeated(pipeline_a, frame, repeat=5, name="a", **opts)
                    pb = benchmark_repeated(pipeline_b, frame, repeat=5, name="b", **opts)
                    c = compare_benchmarks(pa, pb)
                    kind = "sequential"
                results[kind].append((c.verdict, c.ratio, c.ci95_low, c.ci95_high,
                                      "caveat: the machine was busy" in c.reason))
                loads.append(os.getloadavg()[0])
    finally:
        for b in burners:
            b.kill()
            b.wait()
    rows, figs = [], []
    for kind, rs in results.items():
        if not rs:
            continue
        if kind == "interleaved, candidate slower":
            found = sum(v == "slower" for v, *_ in rs)
            ratio = np.exp(np.median(np.log([x[1] for x in rs])))
            figs.append(Figure("repeat verdicts", f"a {ratio:.2f}x slowdown, repeat=5, "
                               "interleaved: found", f"{found} of {len(rs)}", "-"))
        false = sum(v in ("faster", "slower") for v, *_ in rs) if "slower" not in kind else 0
        counts = {v: sum(x[0] == v for x in rs) for v in ("faster", "slower", "same", "inconclusive")}
        worst = max(rs, key=lambda x: abs(np.log(x[1])))
        rows.append([kind, len(rs), counts["faster"], counts["slower"], counts["same"],
                     counts["inconclusive"], f"{worst[1]:.3f} [{worst[2]:.3f}, {worst[3]:.3f}]",
                     sum(x[4] for x in rs)])
        if "slower" in kind:
            continue
        target = "<= 1 in 20" if kind == "interleaved" else "-"
        ok = (false <= max(1, len(rs) // 20)) if kind == "interleaved" else None
        figs.append(Figure("repeat verdicts", f"identical code, repeat=5, {kind}: false verdicts",
                           f"{false} of {len(rs)}", target, ok))
    _common.print_details(
        f"compare repeat=5 of identical code; load average {min(loads):.2f}-{max(loads):.2f} "
        f"(2 cores; {burn} burner(s) of ours)",
        ["order", "pairs", "faster", "slower", "same", "inconclusive", "widest ratio [interval]",
         "reasons with the busy caveat"], rows)
    return figs


if __name__ == "__main__":
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--burn", type=int, default=0, help="CPU-bound processes of our own")
    p.add_argument("--detect", type=int, default=0, metavar="N",
                   help="also N interleaved comparisons against a really slower candidate")
    p.add_argument("--trials", type=int, default=None, help="identical-code comparisons")
    p.add_argument("--sequential", type=int, default=None, help="sequential comparisons")
    a = p.parse_args()
    print(_common.machine_line())
    _common.print_figures(run(quick=a.quick, burn=a.burn, detect=a.detect,
                              trials=a.trials, seq=a.sequential))
