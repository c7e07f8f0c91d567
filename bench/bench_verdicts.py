"""Verdict rates across separate runs: identical code, and a real ~1.3x slowdown.

    python bench/bench_verdicts.py            # 40 fresh processes (~4.5 min at load 1.0-1.3)
    python bench/bench_verdicts.py --quick    # 4 processes (smoke test)

The workload is the issue's NumPy pipeline, np.clip(a * 1.5, 0, 1) > 0.6 on a
1x3x240x320 float32 array.  Each of N fresh interpreters (started one after another)
does three things:

1. compare_callables(f, f_copy, a): identical code, interleaved -> any faster/slower
   verdict is false (target: at most 5% of the N);
2. compare_callables(f, slow, a) where slow(x) = f(x) followed by f on the first 170
   of the 240 rows: a real slowdown of about 1.3x (its measured size is printed) ->
   called "slower" in at least 90% of the N;
3. one plain benchmark_callable(f, a) of 300 iterations and one of slow, kept for step 4.

4. Here, compare_benchmarks on consecutive processes' single runs (N - 1 pairs of
   separate runs of identical code: false verdicts at most 5%, with the run-to-run
   spread single runs are assumed to have), f against the next process's slow (how
   often single runs can call the slowdown: recorded), and pairs of 3-run groups
   (repeat-style pools, run identity kept).  SPATIALHUB_VERDICT_RAW=FILE keeps every
   child's output, to study other rules on the same runs.

The figures are quoted in docs/statistics.md.
"""
import json
import os
import sys

import _common
from _common import Figure

CHILD = r"""
import json, sys, warnings
import numpy as np
from spatialhub.utils.profiling import (BenchmarkWarning, benchmark_callable,
                                        compare_callables)
warnings.simplefilter("ignore", BenchmarkWarning)
a = np.random.default_rng(0).random((1, 3, 240, 320), dtype=np.float32)
part = a[:, :, :170, :].copy()
def f(x):
    return np.clip(x * 1.5, 0, 1) > 0.6
def f_copy(x):
    return np.clip(x * 1.5, 0, 1) > 0.6
def slow(x):
    f(x)
    return f(part)
seed = int(sys.argv[1])
same = compare_callables(f, f_copy, a, seed=seed)
slower = compare_callables(f, slow, a, seed=seed)
single = benchmark_callable(f, a, num_warmup=20, num_iters=300, track_ram=False,
                            track_vram=False, progress=False)
single_slow = benchmark_callable(slow, a, num_warmup=20, num_iters=300, track_ram=False,
                                 track_vram=False, progress=False)
print(json.dumps({"same": same.to_dict(), "slow": slower.to_dict(),
                  "samples": [float(x) for x in single.samples_ms],
                  "slow_samples": [float(x) for x in single_slow.samples_ms]}))
"""


def _pool(runs):
    import numpy as np
    from spatialhub.utils.profiling import _native
    s = _native._stats_from_samples(np.concatenate(runs))
    s.run_sizes = [len(r) for r in runs]
    return s


def run(quick=False):
    _common.ensure_importable()
    from spatialhub.utils.profiling import _native, compare_benchmarks

    n = 4 if quick else int(os.environ.get("SPATIALHUB_VERDICT_PAIRS", "40"))
    results = []
    for i in range(n):
        p = _common.run_child(["-c", CHILD, str(i)])
        if p.returncode != 0:
            raise RuntimeError(f"child {i} failed: {p.stderr[-2000:]}")
        results.append(json.loads(p.stdout.strip().splitlines()[-1]))
    raw = os.environ.get("SPATIALHUB_VERDICT_RAW")
    if raw:   # every child's output, to study other rules on the same runs
        with open(raw, "w") as fh:
            json.dump(results, fh)

    def rate(verdicts, which):
        return sum(v in which for v in verdicts) / len(verdicts)

    same_v = [r["same"]["verdict"] for r in results]
    slow_v = [r["slow"]["verdict"] for r in results]
    sizes = sorted(r["slow"]["ratio"] for r in results)
    false_il = rate(same_v, ("faster", "slower"))
    power_il = rate(slow_v, ("slower",))

    singles = [_native._stats_from_samples(r["samples"]) for r in results]
    pair_v = [compare_benchmarks(singles[i], singles[i + 1]).verdict for i in range(n - 1)]
    slows = [_native._stats_from_samples(r["slow_samples"]) for r in results if "slow_samples" in r]
    # the slowdown as single runs: f in one process against slow in the next
    slow_pair_v = [compare_benchmarks(singles[i], slows[i + 1]).verdict
                   for i in range(len(slows) - 1)]
    group_v = []
    for i in range(0, n - 5, 6):
        ga = _pool([r["samples"] for r in results[i:i + 3]])
        gb = _pool([r["samples"] for r in results[i + 3:i + 6]])
        group_v.append(compare_benchmarks(ga, gb).verdict)

    _common.print_details(
        "verdicts", ["comparison", "pairs", "faster", "slower", "same", "inconclusive"],
        [[label, len(v)] + [sum(x == k for x in v) for k in ("faster", "slower", "same", "inconclusive")]
         for label, v in (("interleaved, identical code", same_v),
                          ("interleaved, slowdown", slow_v),
                          ("single runs, identical code", pair_v),
                          ("single runs, slowdown", slow_pair_v),
                          ("3-run pools, identical code", group_v))])
    print(f"\nslowdown size (median of per-process interleaved ratios): "
          f"{sizes[len(sizes) // 2]:.3f} (range {sizes[0]:.3f}-{sizes[-1]:.3f})")
    figs = [
        Figure("verdicts", f"identical code, interleaved ({n} fresh processes): faster/slower",
               f"{100 * false_il:.0f}%", "<= 5%", false_il <= 0.05),
        Figure("verdicts", f"~{sizes[len(sizes) // 2]:.2f}x slowdown, interleaved ({n}): called slower",
               f"{100 * power_il:.0f}%", ">= 90%", power_il >= 0.90),
        Figure("verdicts", f"identical code, single runs in separate processes ({n - 1} pairs): "
               "faster/slower", f"{100 * rate(pair_v, ('faster', 'slower')):.0f}%", "<= 5%",
               rate(pair_v, ("faster", "slower")) <= 0.05),
    ]
    if slow_pair_v:
        figs.append(Figure("verdicts", f"slowdown, single runs in separate processes "
                           f"({len(slow_pair_v)} pairs): called slower (recorded: within the "
                           "assumed 15% run-to-run spread, single runs cannot call it)",
                           f"{100 * rate(slow_pair_v, ('slower',)):.0f}%", "-", None))
    if group_v:
        figs.append(Figure("verdicts", f"identical code, 3-run pools ({len(group_v)} pairs): "
                           "faster/slower", f"{100 * rate(group_v, ('faster', 'slower')):.0f}%",
                           "-", None))
    return figs


if __name__ == "__main__":
    sys.exit(_common.run_script(run))
