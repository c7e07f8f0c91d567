"""A focused workload over the native core, for valgrind and full-stack LSan.

Exercises the stats type, the summary, the tables, the comparison, the
benchmark loop with a native callable and the scope profiler -- success and error paths -- a few
rounds, so that a per-call leak shows as many blocks with one stack.  Pure
Python on top of the extension; no pytest (startup under valgrind is slow).

    python tests/sanitizer/native_workload.py [rounds]

Used by .ci/valgrind.sh and by the leak stage of .ci/sanitize.sh.
"""
import copy
import gc
import json
import os
import pickle
import sys
import warnings

import numpy as np

from spatialhub.utils import profiling as prof
from spatialhub.utils.profiling import _native

SEED = ("m", "CPU", 1.5, 1.25, 0.5, 2.5, 1.0, 3.0, 666.7, 10, 50)


def swallow(f, *a, **kw):
    try:
        f(*a, **kw)
    except BaseException:  # noqa: BLE001 -- the error paths are part of the workload
        pass


def stats_type():
    s = prof.BenchmarkStats(*SEED, samples_ms=np.linspace(0.5, 3.0, 200), params={"h": 1},
                            ram_peak_method="hwm", target_met=True, outliers=3, batch_size=4)
    for name in ("name", "device", "mean_ms", "p99_ms", "outliers", "target_met", "params",
                 "env", "samples_ms", "throughput"):
        getattr(s, name)
    s.mean_ms = 2.0
    s.params = {"h": 2}
    s.ram_peak_method = None
    for field, bad in (("mean_ms", "x"), ("timed_iters", -1), ("timed_iters", 2 ** 80),
                       ("target_met", 1), ("params", []), ("name", None)):
        swallow(setattr, s, field, bad)
    swallow(delattr, s, "name")
    d = s.to_dict(samples=True)
    prof.BenchmarkStats.from_dict(d)
    s.to_json(samples=True, indent=2)
    swallow(prof.BenchmarkStats(*SEED[:2], float("nan"), *SEED[3:]).to_json)
    pickle.loads(pickle.dumps(s))
    copy.deepcopy(s)
    repr(s)
    s == copy.copy(s)   # noqa: B015
    s._repr_markdown_()
    s._repr_html_()
    view = s.samples_ms
    s.__init__(*SEED, samples_ms=[1.0, 2.0])      # re-init while a view is alive
    float(view.sum())
    s.__setstate__(prof.BenchmarkStats(*SEED).__reduce__()[2])
    swallow(prof.BenchmarkStats, *SEED[:5])
    swallow(prof.BenchmarkStats, *SEED, bogus=1)
    swallow(prof.BenchmarkStats, *SEED, samples_ms="abc")
    swallow(prof.BenchmarkStats, *SEED, samples_ms=[[1.0]])
    swallow(prof.BenchmarkStats.from_dict, [])
    prof.BenchmarkStats.__new__(prof.BenchmarkStats).to_dict()
    g = prof.GPUMemoryInfo(80.0, 60.0, 20.0)
    g.to_dict()
    pickle.loads(pickle.dumps(g))
    repr(g)
    swallow(prof.GPUMemoryInfo, "x", 1, 2)


def summary():
    rng = np.random.default_rng(7)
    for n in (1, 2, 3, 17, 100, 1001, 20_000):
        x = rng.lognormal(size=n)
        _native._stats_from_samples(x)
        _native._stats_from_samples(np.sort(x))
        _native._stats_from_samples(np.sort(x)[::-1].copy())
        _native._stats_from_samples(np.round(x))          # ties
        _native._stats_from_samples(list(x[:50]))
    _native._stats_from_samples(np.zeros(5000))
    for bad in ([], [1.0, float("nan")], "abc", [[1.0]], None):
        swallow(_native._stats_from_samples, bad)


def tables():
    rng = np.random.default_rng(3)
    a = prof.BenchmarkStats(*SEED, samples_ms=rng.lognormal(size=300), params={"h": 8})
    b = prof.BenchmarkStats("b|x\n", "cuda:0", *SEED[2:], samples_ms=rng.lognormal(size=300),
                            params={"h": 16})
    c = prof.BenchmarkStats("c", "CUDAExecutionProvider", *SEED[2:])
    prof.format_benchmark_table([a, b, c], title="T", throughput_unit="img/s")
    prof.format_benchmark_table([a, b, c], baseline=a, param="h")
    prof.format_benchmark_table([a, c], baseline=c)
    prof.format_benchmark_table(a)
    prof.format_benchmark_table([])
    prof.format_benchmark_table(iter([a, b]), "t")
    odd = prof.BenchmarkStats(*SEED, ram_delta_mb=1e300)
    odd.mean_ms, odd.fps, odd.std_ms = 1e-5, float("inf"), float("nan")
    prof.format_benchmark_table([odd])
    for bad in (1, "x", [a, 1], {}):
        swallow(prof.format_benchmark_table, bad)
    swallow(prof.format_benchmark_table, [a], title=1)
    swallow(prof.format_benchmark_table, [a], bogus=1)
    cmp = prof.compare_benchmarks(a, b, resamples=300, seed=5)
    cmp.to_dict()
    cmp.to_markdown()
    pickle.loads(pickle.dumps(cmp))
    repr(cmp)
    swallow(prof.compare_benchmarks, a, c)
    swallow(prof.compare_benchmarks, a, b, resamples=10)


def bench_loop():
    n = _native._noop
    prof.benchmark_callable(n, num_warmup=5, num_iters=500)
    prof.benchmark_callable(n, num_warmup=0, num_iters=3000, disable_gc=True)
    prof.benchmark_callable(n, num_warmup=1, num_iters=200, sync_fn=n, track_ram=False)
    prof.benchmark_callable(n, num_warmup=1, num_iters=5, target_rel_ci=0.2, max_time_s=0.05)
    prof.benchmark_callable(n, num_warmup=1, num_iters=100_000, max_time_s=0.01)
    prof.benchmark_callable(n, name="s", device="cuda:0", num_warmup=1, num_iters=10, sync_fn=n)
    prof.benchmark_callable(n, num_warmup=0, num_iters=50, progress=True)
    # cold start, warm-up analysis and cache="cold" (a 1 MiB "LLC", set in main())
    s = prof.benchmark_callable(n, num_warmup=25, num_iters=40, cache="cold")
    s.to_dict(), pickle.loads(pickle.dumps(s)), prof.format_benchmark_table([s])
    prof.benchmark_callable(n, num_warmup=0, num_iters=2500)
    for kw in ({"cache": "hot"}, {"cache": 1}, {"stream": "s"}, {"stream": -1},
               {"stream": 1}, {"stream": True}):
        swallow(prof.benchmark_callable, n, num_iters=2, **kw)
    t = prof.BenchmarkStats(*SEED, warmup_ms=[1.0, 2.0], gpu_samples_ms=(0.5,),
                            gpu_telemetry={"nvml": "x"}, first_call_ms=3.0, cache="cold",
                            gpu_median_ms=0.5, host_share=0.25)
    t.to_dict(), copy.deepcopy(t), prof.format_benchmark_table([t, s])
    swallow(setattr, t, "warmup_ms", [1.0, "x"])
    swallow(setattr, t, "warmup_ms", 3)
    # error paths
    for kw in ({"num_iters": 0}, {"num_warmup": -1}, {"num_iters": 2 ** 70},
               {"num_iters": 10 ** 13}, {"name": 1}, {"sync_fn": 3}, {"target_rel_ci": 2.0},
               {"max_time_s": float("nan")}, {"device": "cuda:x"}, {"device": "cuda"}):
        swallow(prof.benchmark_callable, n, **kw)
    swallow(prof.benchmark_callable, 42)
    swallow(prof.benchmark_callable, int, "not a number", num_warmup=2, num_iters=3)
    state = {"i": 0}

    def interrupt():
        state["i"] += 1
        if state["i"] == 5:
            raise KeyboardInterrupt

    swallow(prof.benchmark_callable, interrupt, num_warmup=1, num_iters=10)
    prof.benchmark_callable(lambda: prof.benchmark_callable(n, num_warmup=0, num_iters=3),
                            num_warmup=0, num_iters=3)
    prof.get_ram_mb()
    prof.get_gpu_vram_mb(0)
    swallow(prof.get_gpu_vram_mb, -1)
    prof.get_cuda_sync_fn()


class _SubStats(prof.BenchmarkStats):
    pass


def _under_asan():
    try:
        with open("/proc/self/maps") as f:
            return "libasan" in f.read()
    except OSError:
        return False


def round2():
    """Issue 13's paths: user code that drops what the C code is reading,
    greenlet switches inside open RAM windows, a fork child's window list,
    the rank bootstrap, huge table cells, interrupts in ignored lookups."""
    s = _native._stats_from_samples([1.0, 2.0, 3.0])

    class K:
        def __init__(self, n):
            self.n = n

        def __hash__(self):
            return 7

        def __eq__(self, other):
            s.params = {"replaced": True}
            return isinstance(other, K) and other.n == self.n

    for _ in range(2):
        d = {K(i): i for i in range(12)}
        for _ in range(9):
            del d[next(iter(d))]
        s.params = d
        s.to_dict()
        s.params = d
        copy.copy(s)

    class Key(str):
        def __hash__(self):
            return hash("bs")

        def __eq__(self, other):
            s.params = None
            return str.__eq__(self, other)

    s.params = {Key("bs"): 8}
    prof.format_benchmark_table([s], param="bs")
    big = _native._stats_from_samples([1.0, 2.0])
    big.mean_ms = big.fps = big.ram_delta_mb = 1.7e308
    prof.format_benchmark_table([big, s], baseline=s)
    sub = _SubStats(*SEED, samples_ms=[1.0, 2.0])
    sub.note = "x"
    pickle.loads(pickle.dumps(sub))
    copy.deepcopy(sub)
    rng = np.random.default_rng(0)
    prof.compare_benchmarks(_native._stats_from_samples(rng.random(2001)),
                            _native._stats_from_samples(rng.random(1000)), resamples=300)
    n = _native._noop
    try:
        import greenlet
    except ImportError:
        greenlet = None
    # greenlet copies live stack frames with memcpy, which ASan reports inside
    # greenlet itself: the greenlet part runs under valgrind only
    if greenlet is not None and _under_asan():
        greenlet = None
    if greenlet is not None:
        main_g = greenlet.getcurrent()

        def body(tag):
            def f():
                main_g.switch()
            return prof.benchmark_callable(f, num_warmup=1, num_iters=4, name=tag,
                                           disable_gc=tag == "b")
        gs = [greenlet.greenlet(lambda t=t: body(t)) for t in "abc"]
        while not all(g.dead for g in gs):
            for g in gs:
                if not g.dead:
                    g.switch()
    if hasattr(os, "fork"):
        def forking():
            pid = os.fork()
            if pid == 0:
                prof.benchmark_callable(n, num_warmup=0, num_iters=3)
                os._exit(0)
            os.waitpid(pid, 0)
        prof.benchmark_callable(forking, num_warmup=0, num_iters=1)
    prof.benchmark_callable(n, num_warmup=0, num_iters=1, target_rel_ci=0.5, max_time_s=1)
def scopes():
    p = prof.HierarchicalProfiler("R", trace_capacity=8)
    for i in range(20):
        with p("a"):
            with p(f"b{i % 3}", track_ram=False):
                pass
    t = prof.Timer("t", profiler=p, track_memory=True)
    with t:
        np.ones(1000).sum()
    swallow(lambda: p("raise").__exit__(None, None, None))
    try:
        with p("err"):
            raise ValueError("x")
    except ValueError:
        pass
    node = p.root.children["a"]
    (node.p50_ms, node.p99_ms, node.min_ms, node.max_ms, node.mean_ms, node.percentile(90))
    node.total_wall_time = 1.5
    swallow(setattr, node, "total_wall_time", "x")
    swallow(node.percentile, 200)
    p.push("manual")
    p.stack
    p.pop()
    p.pop()
    p.to_dict()
    p.to_markdown()
    p.to_html()
    p.export_chrome_trace()
    abandoned = p("abandoned")
    abandoned.__enter__()
    del abandoned                 # entered, never exited: the window must be released
    p.reset()
    swallow(prof.Timer, 3)
    swallow(prof.Timer, "x", profiler=3)
    swallow(prof.HierarchicalProfiler, trace_capacity=-1)
    swallow(p.scope, "x", bogus=1)
    swallow(prof.Timer("x", sync_cuda=True).__enter__)
    prof.ProfileNode("free")

    class Sub(prof.Timer):
        pass

    with Sub("sub", p, False):
        pass


def issue23():
    """The scope entries, the fork path, the held keywords and the snapshots of issue 23."""
    import contextvars
    import threading
    p = prof.HierarchicalProfiler("R", track_ram=False, trace_capacity=64)

    def gen():
        with p("gen"):
            yield 1
            yield 2

    g = gen()
    next(g)
    th = threading.Thread(target=g.close)       # left in another thread: abandoned
    th.start()
    th.join()
    t = prof.Timer("dropped", profiler=p, track_memory=False)
    t.__enter__()
    del t                                       # dropped while entered: abandoned
    with p("a"):
        ctx = contextvars.copy_context()
    var = next(v for v in ctx if v.name == "spatialhub.utils.profiling.scope")

    def foreign():
        var.set(b"x" * 32)
        swallow(lambda: p("b").__enter__())
        var.set(None)
        with p("c"):
            pass
    contextvars.copy_context().run(foreign)
    p.root.children["x"] = "not a node"
    swallow(lambda: p("x").__enter__())
    del p.root.children["x"]
    node = p.root.children["a"]
    node.calls = 2**63 - 1
    with p("a"):
        pass
    swallow(setattr, node, "calls", -1)

    @p.timeit()
    def produce():
        yield from range(3)
    list(produce())

    class Cycle:
        def __init__(self):
            self.me = self

        def __del__(self):
            with p("fin"):
                pass
    was = gc.get_threshold()
    gc.set_threshold(1, 1, 1)
    for _ in range(5):
        gc.disable()
        for _ in range(5):
            Cycle()
        gc.enable()
        p.export_chrome_trace()
        p.reset()
    gc.set_threshold(*was)
    kw = {"name": "kw", "track_ram": False, "trace_capacity": 4}
    prof.HierarchicalProfiler(**kw)

    class Sub(prof.Timer):
        pass
    Sub(**{"name": "s", "track_memory": False, "device_id": 0})
    c = prof.compare_benchmarks(_native._stats_from_samples(np.linspace(1, 2, 50)),
                                _native._stats_from_samples(np.linspace(1, 3, 50)),
                                resamples=100)
    c.__setstate__({"margin": 0.1, "reason": "r", "baseline_runs": 1})
    s = _native._stats_from_samples(np.linspace(1, 2, 40))
    s.gpu_samples_ms = (1.0, 2.0)
    s.to_dict(samples=True)
    if hasattr(os, "fork"):
        q = prof.HierarchicalProfiler("F")
        held = prof.Timer("held", profiler=q)  # a RAM window, entered by another thread
        th = threading.Thread(target=held.__enter__)
        th.start()
        th.join()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                del held
                gc.collect()
                with q("after"):
                    pass
                code = 0
            finally:
                os._exit(code)
        os.waitpid(pid, 0)
        del held


def verdicts_and_stability():
    rng = np.random.default_rng(2)
    x = 1 + 0.02 * rng.standard_normal(600)
    shapes = (x, np.where(rng.random(600) < 0.7, 1.0, 1.6) * x, np.linspace(1, 1.4, 600) * x,
              rng.uniform(0.2, 2.0, 600), np.concatenate([x[:300], 1.1 * x[300:]]))
    for y in shapes:
        _native._stats_from_samples(y, warn=True)
    a, b = _native._stats_from_samples(x), _native._stats_from_samples(1.2 * x)
    a.run_sizes, b.run_sizes = [100] * 6, (100,) * 6
    for kw in ({}, {"margin": 0.01}, {"run_spread": 0.05}, {"paired": True},
               {"margin": 0.2, "run_spread": None}):
        c = prof.compare_benchmarks(a, b, resamples=200, **kw)
        pickle.loads(pickle.dumps(c)).to_dict()
        c.to_markdown()
    small = _native._stats_from_samples([1.0, 2.0, 3.0])
    prof.compare_benchmarks(small, small, resamples=100)
    prof.format_benchmark_table([a, b], baseline=a)
    for bad in ({"margin": 2.0}, {"margin": "x"}, {"run_spread": -1.0}, {"paired": True}):
        swallow(prof.compare_benchmarks, a, small, **bad)
    for bad in ([], [0, 600], [1.5], "12", [True], [10] * 3):
        swallow(setattr, a, "run_sizes", bad)
        swallow(prof.compare_benchmarks, a, b)
    for dev in ("gpu", "xpu:1", "mps"):
        swallow(prof.benchmark_callable, _native._noop, device=dev, num_warmup=0, num_iters=3)


def rerun_and_malloc():
    """Issue 22: the rerun interval (single runs, repetitions, the table column), the
    machine spread, and the mmap-threshold probe (None under a malloc it cannot read)."""
    rng = np.random.default_rng(7)
    s = _native._stats_from_samples(rng.lognormal(size=200))
    _native._apply_rerun(s, run_spread=0.03)
    s.run_sizes = (50, 50, 100)
    _native._apply_rerun(s)
    swallow(setattr, s, "run_sizes", (10, 10))
    swallow(_native._apply_rerun, s)
    swallow(_native._apply_rerun, s, run_spread=2.0)
    swallow(_native._apply_rerun, 1)
    old = _native._set_machine_run_spread(0.05, 20)
    _native._stats_from_samples(rng.lognormal(size=40))
    swallow(_native._set_machine_run_spread, 2.0, 20)
    _native._set_machine_run_spread(*old)
    _native._stats_from_samples(np.zeros(30))
    prof.format_benchmark_table([s], columns=["rerun", "ci95"])
    prof.format_benchmark_table([s], columns="auto", format="html")
    t = _native._malloc_mmap_threshold()
    if t is not None:
        _native._malloc_raise_mmap_threshold(t)
    swallow(_native._malloc_raise_mmap_threshold, "x")


def under_load():
    """Issue 34: benchmark_load's threads, records and result -- a run, a failing request,
    overload with drops, the closed and offline modes -- and LoadStats's own paths."""
    import threading
    import time

    s = prof.benchmark_load(_native._noop, qps=500, duration_s=0.05, workers=2, seed=1,
                            num_warmup=1)
    back = prof.LoadStats.from_dict(json.loads(s.to_json(samples=True)))
    pickle.loads(pickle.dumps(back))
    s.percentile_ci(90)
    prof.format_load_table([s, back], "t")
    s._repr_html_()
    view = s.latencies_ms
    s.__init__("x", "CPU", latencies_ms=[1.0, 2.0])    # re-init while a view is alive
    float(view.sum())
    count = [0]

    def bad():
        count[0] += 1
        if count[0] == 5:
            raise ValueError("boom")
    swallow(prof.benchmark_load, bad, qps=500, duration_s=0.05, workers=3, num_warmup=0)
    prof.benchmark_load(lambda: time.sleep(0.002), qps=2000, duration_s=0.03, max_queue=1,
                        num_warmup=0)
    prof.benchmark_load(_native._noop, arrival="closed", duration_s=0.02, num_warmup=0)
    prof.benchmark_load(_native._noop, arrival="offline", duration_s=0.02, workers=2,
                        num_warmup=0)
    threading.Timer(0.02, __import__("_thread").interrupt_main).start()
    swallow(prof.benchmark_load, lambda: time.sleep(0.001), qps=200, duration_s=1.0,
            num_warmup=0)
    for bad_kw in ({"qps": 0}, {"qps": "x"}, {}, {"qps": 1, "workers": 0},
                   {"qps": 1, "num_iters": 3}, {"arrival": "closed", "qps": 1}):
        swallow(prof.benchmark_load, _native._noop, **bad_kw)
    _native._fcfs_latencies([0.0, 1.0, 2.0], [1.5, 1.5, 1.5], 2)
    swallow(_native._fcfs_latencies, [1.0, 0.0], [1.0, 1.0])


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    warnings.simplefilter("ignore")
    import os
    os.environ.setdefault("SPATIALHUB_LLC_BYTES", str(1 << 20))   # read at first use
    for _ in range(rounds):
        stats_type()
        summary()
        tables()
        bench_loop()
        round2()
        scopes()
        issue23()
        verdicts_and_stability()
        rerun_and_malloc()
        under_load()
        gc.collect()
    print(json.dumps({"rounds": rounds, "ok": True}))


if __name__ == "__main__":
    main()
