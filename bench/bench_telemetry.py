"""Figure 3 -- the cost of RAM telemetry.

    python bench/bench_telemetry.py [--quick]

`lambda: None` timed with track_ram=True and track_ram=False, interleaved:
  * the median_ms ratio on / off (target <= 1.05: nothing of the telemetry
    sits in the timed region);
  * the whole call's wall time on / off (target <= 1.5: on Linux the peak
    comes from one high-water-mark reset and one read, not per-iteration
    polling), at the default num_iters=50 and at 10,000 iterations.
"""
import time

from _common import Figure, median, print_details, quiet_warnings, ensure_importable, run_script

# A default call in a process that has imported torch (if installed): the
# full collection before the timed loop scales with the whole heap.
TORCH_CHILD = """
import gc, json, statistics, time, warnings
warnings.simplefilter("ignore")
import torch  # noqa: F401
from spatialhub.utils.profiling import benchmark_callable
f = lambda: None
benchmark_callable(f)
call, coll = [], []
for _ in range(7):
    t = time.perf_counter(); benchmark_callable(f); call.append(time.perf_counter() - t)
    t = time.perf_counter(); gc.collect(); coll.append(time.perf_counter() - t)
print(json.dumps([statistics.median(call), statistics.median(coll), len(gc.get_objects())]))
"""

TARGET_MEDIAN = 1.05
TARGET_WALL = 1.5


def run(quick=False):
    ensure_importable()
    quiet_warnings()
    from spatialhub.utils.profiling import benchmark_callable

    f = lambda: None  # noqa: E731
    iters = 2_000 if quick else 20_000
    rounds = 25 if quick else 61
    method = benchmark_callable(f, num_iters=10).ram_peak_method

    # medians
    ratios, on_m, off_m = [], [], []
    for r in range(rounds):
        got = {}
        for tr in ((True, False) if r % 2 == 0 else (False, True)):
            got[tr] = benchmark_callable(f, num_warmup=200, num_iters=iters, track_ram=tr).median_ms
        on_m.append(got[True])
        off_m.append(got[False])
        ratios.append(got[True] / got[False])
    med_ratio = median(ratios)

    # wall time of whole calls
    walls = {}
    for label, kw, reps in (("defaults (num_iters=50)", {}, 10 if quick else 60),
                            ("num_iters=10,000", {"num_iters": 10_000}, 3 if quick else 15)):
        on, off = [], []
        for r in range(reps):
            for tr in ((True, False) if r % 2 == 0 else (False, True)):
                t = time.perf_counter()
                benchmark_callable(f, track_ram=tr, **kw)
                (on if tr else off).append(time.perf_counter() - t)
        walls[label] = (median(on), median(off))

    # what a default call costs next to the pure-Python harness, and how
    # much of it is the full gc.collect() the harness makes before timing
    import gc
    from pure_python_harness import benchmark_callable_py
    d_ours, d_pure, d_gc = [], [], []
    for r in range(10 if quick else 60):
        t = time.perf_counter()
        benchmark_callable(f)
        d_ours.append(time.perf_counter() - t)
        t = time.perf_counter()
        benchmark_callable_py(f)
        d_pure.append(time.perf_counter() - t)
        t = time.perf_counter()
        gc.collect()
        d_gc.append(time.perf_counter() - t)
    d_ours, d_pure, d_gc = median(d_ours), median(d_pure), median(d_gc)

    # the fallback used where the high-water mark cannot be reset (macOS,
    # Windows, a read-only /proc): one RSS read per iteration, outside the
    # timed region.  Forced here through the test hook, for scale.
    from spatialhub.utils.profiling import _native
    sm_on, sm_off, sw_on, sw_off = [], [], [], []
    old = _native._force_sampled_rss(True)
    try:
        s_method = benchmark_callable(f, num_iters=10).ram_peak_method
        for r in range(3 if quick else 9):
            for tr in ((True, False) if r % 2 == 0 else (False, True)):
                t = time.perf_counter()
                s = benchmark_callable(f, num_warmup=200, num_iters=10_000, track_ram=tr)
                (sw_on if tr else sw_off).append(time.perf_counter() - t)
                (sm_on if tr else sm_off).append(s.median_ms)
    finally:
        _native._force_sampled_rss(old)

    torch_row = None
    if not quick:
        import importlib.util
        import json
        from _common import run_child
        if importlib.util.find_spec("torch") is not None:
            p = run_child(["-c", TORCH_CHILD], timeout=300)
            if p.returncode == 0:
                torch_row = json.loads(p.stdout.strip().splitlines()[-1])

    rows = [("median_ms", f"{median(on_m) * 1e6:.0f} ns", f"{median(off_m) * 1e6:.0f} ns",
             f"{med_ratio:.3f} ({min(ratios):.3f}-{max(ratios):.3f})")]
    for label, (a, b) in walls.items():
        rows.append((f"wall time, {label}", f"{a * 1e3:.3f} ms", f"{b * 1e3:.3f} ms",
                     f"{a / b:.3f} ({(a - b) * 1e6:+.0f} us)"))
    rows.append(("wall time, defaults: ours vs pure-Python harness", f"{d_ours * 1e3:.3f} ms",
                 f"{d_pure * 1e3:.3f} ms (pure)", f"{d_ours / d_pure:.1f}x; gc.collect() alone "
                 f"{d_gc * 1e3:.3f} ms ({len(gc.get_objects())} objects)"))
    if torch_row:
        rows.append(("wall time, defaults, torch imported (fresh process)",
                     f"{torch_row[0] * 1e3:.3f} ms", "-", f"gc.collect() alone {torch_row[1] * 1e3:.3f} ms "
                     f"({torch_row[2]} objects)"))
    rows.append((f"forced {s_method!r} fallback, 10,000 iterations: median", f"{median(sm_on) * 1e6:.0f} ns",
                 f"{median(sm_off) * 1e6:.0f} ns", f"{median(sm_on) / median(sm_off):.3f}"))
    rows.append((f"forced {s_method!r} fallback, 10,000 iterations: wall", f"{median(sw_on) * 1e3:.3f} ms",
                 f"{median(sw_off) * 1e3:.3f} ms", f"{median(sw_on) / median(sw_off):.2f} "
                 f"(+{(median(sw_on) - median(sw_off)) / 10_000 * 1e9:.0f} ns / iteration)"))
    print_details(f"3. telemetry on/off, lambda: None (ram_peak_method={method!r}; median of "
                  f"{rounds} rounds of {iters} iterations; wall: median of interleaved calls)",
                  ["figure", "track_ram=True", "track_ram=False", "on / off"], rows)
    figs = [Figure("3 telemetry", "no-op median, track_ram on / off", f"{med_ratio:.3f}",
                   f"<= {TARGET_MEDIAN}", med_ratio <= TARGET_MEDIAN)]
    for label, (a, b) in walls.items():
        figs.append(Figure("3 telemetry", f"whole-call wall time on / off, {label}",
                           f"{a / b:.3f}", f"<= {TARGET_WALL}", a / b <= TARGET_WALL))
    figs.append(Figure("3 telemetry", f"forced {s_method!r} fallback (no HWM reset): median, wall "
                       "on / off, 10,000 iterations",
                       f"{median(sm_on) / median(sm_off):.3f}, {median(sw_on) / median(sw_off):.2f}",
                       "- (not Linux's path)", None))
    figs.append(Figure("3 telemetry", "whole call at defaults, ours / pure-Python (gc.collect() "
                       "alone)", f"{d_ours * 1e3:.2f} / {d_pure * 1e3:.2f} ms ({d_gc * 1e3:.2f} ms)",
                       "-", None))
    if torch_row:
        figs.append(Figure("3 telemetry", "whole call at defaults with torch imported (gc.collect() "
                           "alone)", f"{torch_row[0] * 1e3:.1f} ms ({torch_row[1] * 1e3:.1f} ms)",
                           "-", None))
    return figs


if __name__ == "__main__":
    raise SystemExit(run_script(run))
