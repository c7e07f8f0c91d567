"""Figure 2 -- the harness's own memory, and the whole call's wall time.

    python bench/bench_memory.py [--quick]

Each measurement runs in a fresh child process: import, one small warm call
(lazy initialisation, the cached overhead measurement), gc.collect(), then
  rss0 = VmRSS; reset the high-water mark (echo 5 > /proc/self/clear_refs);
  t = perf_counter(); harness(lambda: None, num_iters=N); wall = perf_counter() - t
  growth = VmHWM - rss0
so the growth is the peak RSS the call added, temporaries included (where
the reset is impossible, ru_maxrss growth is used and the row says so).
Ours with track_ram=True resets the mark itself when its window opens; it
opens it after its own buffers are allocated and touched, so they still
count; the track_ram=False row, which does no reset, cross-checks that.
Targets at N = 1,000,000: ours <= 16 MiB (8 bytes a sample plus one copy)
and ours' wall time <= 0.5 x the pure-Python harness's (median of the
per-round ratios, the children of one round run back to back).

And what a loop of calls keeps (issue 30): in a fresh child, 200 warm calls,
then 3,000 calls of benchmark_callable(lambda: None, num_iters=2) under
tracemalloc, warnings ignored; the traced growth after a collection.  Target:
under 200 kB (a 0.96 MB step of the intern table came at call ~2,000 on 3.11).
"""
import gc
import json
import os
import resource
import sys
import time

from _common import Figure, median, print_details, run_child, run_script

MIB = 2**20
TARGET_MIB = 16.0
TARGET_WALL = 0.5
LOOP_CALLS = 3000
TARGET_LOOP_KB = 200.0


def _status_kib(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return -1


def _reset_hwm():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def child(which, n):
    from _common import ensure_importable, quiet_warnings
    ensure_importable()
    quiet_warnings()
    from spatialhub.utils.profiling import benchmark_callable
    from pure_python_harness import benchmark_callable_py

    f = lambda: None  # noqa: E731
    if which == "pure":
        call = lambda k: benchmark_callable_py(f, num_iters=k)  # noqa: E731
    elif which == "ours":
        call = lambda k: benchmark_callable(f, num_iters=k)  # noqa: E731
    elif which == "ours_noram":
        call = lambda k: benchmark_callable(f, num_iters=k, track_ram=False)  # noqa: E731
    else:
        raise SystemExit(f"unknown harness {which!r}")
    call(1000)
    gc.collect()
    rss0 = _status_kib("VmRSS") * 1024
    ru0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    hwm_ok = _reset_hwm()
    t = time.perf_counter()
    result = call(n)
    wall = time.perf_counter() - t
    ru1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if hwm_ok:
        growth, method = _status_kib("VmHWM") * 1024 - rss0, "VmHWM"
    else:
        growth, method = ru1 - max(ru0, rss0), "ru_maxrss"
    del result
    print(json.dumps({"growth": max(growth, 0), "wall": wall, "method": method}))


def loop_child(calls):
    from _common import ensure_importable
    ensure_importable()
    import tracemalloc
    import warnings
    warnings.simplefilter("ignore")
    from spatialhub.utils.profiling import benchmark_callable

    f = lambda: None  # noqa: E731
    for _ in range(200):
        benchmark_callable(f, num_iters=2, num_warmup=0, track_ram=False)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for _ in range(calls):
        benchmark_callable(f, num_iters=2, num_warmup=0, track_ram=False)
    gc.collect()
    print(json.dumps({"kept": tracemalloc.get_traced_memory()[0] - before}))


def _measure(which, n):
    p = run_child([os.path.abspath(__file__), "--loop-child" if which == "loop" else "--child",
                   *([] if which == "loop" else [which]), str(n)])
    if p.returncode != 0:
        raise RuntimeError(f"memory child {which} failed ({p.returncode}): {p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def run(quick=False):
    n = 20_000 if quick else 1_000_000
    rounds = 1 if quick else 3
    # at 1M: 16 MiB; the quick run scales the budget and allows 1 MiB of
    # page-granularity noise.
    budget = TARGET_MIB if not quick else 16 * n / MIB + 1.0
    res = {k: [] for k in ("ours", "pure", "ours_noram")}
    ratios = []
    methods = set()
    for r in range(rounds):
        order = ["ours", "pure", "ours_noram"] if r % 2 == 0 else ["pure", "ours_noram", "ours"]
        got = {w: _measure(w, n) for w in order}
        for w, v in got.items():
            res[w].append(v)
            methods.add(v["method"])
        ratios.append(got["ours"]["wall"] / got["pure"]["wall"])
    g = {w: median([v["growth"] for v in vs]) / MIB for w, vs in res.items()}
    wall = {w: median([v["wall"] for v in vs]) for w, vs in res.items()}
    ratio = median(ratios)
    label = {"ours": "ours (defaults)", "ours_noram": "ours (track_ram=False)",
             "pure": "pure-Python harness"}
    rows = [(label[w], f"{g[w]:.2f} MiB", f"{g[w] * MIB / n:.1f}", f"{wall[w]:.3f} s")
            for w in ("ours", "ours_noram", "pure")]
    print_details(f"2. harness memory, lambda: None x {n:,} iterations, fresh process each "
                  f"(median of {rounds}; peak from {'/'.join(sorted(methods))})",
                  ["harness", "peak RSS growth", "bytes / iteration", "wall time of the call"], rows)
    tgt = f"<= {budget:.2f} MiB" + ("" if not quick else " (scaled)")
    calls = 300 if quick else LOOP_CALLS
    kept = _measure("loop", calls)["kept"] / 1000.0
    print(f"   a loop of {calls:,} calls kept {kept:.1f} kB (tracemalloc)")
    return [
        Figure("2 memory", f"kept by a loop of {calls:,} calls (tracemalloc)", f"{kept:.1f} kB",
               f"< {TARGET_LOOP_KB:.0f} kB", kept < TARGET_LOOP_KB),
        Figure("2 memory", f"peak RSS growth, ours, {n:,} iterations", f"{g['ours']:.2f} MiB", tgt,
               g["ours"] <= budget),
        Figure("2 memory", "peak RSS growth, ours track_ram=False / pure-Python",
               f"{g['ours_noram']:.2f} / {g['pure']:.1f} MiB", "-", None),
        Figure("2 memory", f"whole-call wall time, ours / pure-Python, {n:,} iterations",
               f"{ratio:.3f}", f"<= {TARGET_WALL}", ratio <= TARGET_WALL),
    ]


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]))
    elif len(sys.argv) >= 2 and sys.argv[1] == "--loop-child":
        loop_child(int(sys.argv[2]))
    else:
        raise SystemExit(run_script(run))
