"""The main entry points with a finalizer storm raging (issue 23): cyclic garbage whose
__del__ calls into the same API, the collector's threshold at 1, so that a collection --
and so a finalizer -- can run at every allocation the entry point makes.  C code that held
a count, an index or a borrowed reference across such an allocation wrote past a list, read
freed memory, or returned a half-built object (docs/reliability.md, "Issue 23").

Each test states what a user expects -- the same result as without the storm, or a clear
exception -- and checks that the storm really hit inside the call (`fired_inside > 0`), so a
test whose storm missed fails instead of passing vacuously.  The variants whose finalizers
mutate the very objects being read (reset(), new samples, new fields) run in a child, where
a crash fails the test instead of killing pytest.  Reuse: `finalizer_storm(reenter)` and
`FINALIZER_STORM_SOURCE` in tests/reliability_support.py.
"""
import pickle
import warnings

import numpy as np
import pytest

from reliability_support import FINALIZER_STORM_SOURCE, finalizer_storm, run_python
from spatialhub.utils.profiling import (BenchmarkStats, BenchmarkWarning, HierarchicalProfiler,
                                        Timer, benchmark_callable, compare_benchmarks,
                                        format_benchmark_table)
from spatialhub.utils.profiling import _native


def stats(seed, n=300, level=1.0, runs=None):
    x = level * np.exp(np.random.default_rng(seed).normal(0.0, 0.02, n))
    s = _native._stats_from_samples(x)
    s.name = f"s{seed}"
    if runs:
        s.run_sizes = tuple(runs)
    return s


def storm_run(reenter, fn, *args, budget=200, **kwargs):
    with finalizer_storm(reenter, budget=budget) as storm:
        out = storm.run(fn, *args, **kwargs)
    assert storm.fired_inside > 0, "the storm never hit inside the call"
    assert not storm.errors, storm.errors[:3]
    return out


# ---- the scope profiler --------------------------------------------------------------


def test_scopes_entered_by_finalizers_during_enter_and_exit():
    p = HierarchicalProfiler("R", track_ram=False)

    def reenter():
        with p("fin"):
            with p("inner"):
                pass

    def body():
        for _ in range(50):
            with p("outer"):
                with p("mid"):
                    pass
        return p.stack

    stack = storm_run(reenter, body)
    assert stack == [p.root] and p.stack == [p.root]
    outer = p.root.children["outer"]
    assert outer.calls == 50 and outer.children["mid"].calls == 50
    # a finalizer's scopes nest wherever the collection happened, and are all left
    fin = [n for n in _walk(p.root) if n.name == "fin"]
    assert fin and all(n.children["inner"].calls == n.calls for n in fin)


def _walk(node):
    yield node
    for c in list(node.children.values()):
        yield from _walk(c)


def test_trace_export_with_finalizers_entering_scopes():
    p = HierarchicalProfiler("R", track_ram=False, trace_capacity=500)
    for _ in range(400):
        with p("a"):
            pass

    def reenter():
        for _ in range(10):
            with p("fin"):
                pass

    trace = storm_run(reenter, p.export_chrome_trace)
    evs = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(evs) >= 400 and {e["name"] for e in evs} <= {"a", "fin"}
    nodes, events, dropped = storm_run(reenter, p._trace)
    assert len(events) == 500 and all(0 <= e[0] < len(nodes) for e in events)


def test_timer_subclass_and_profiler_construction():
    class T(Timer):
        pass

    made = []

    def reenter():
        made.append(HierarchicalProfiler(name="fin", track_ram=False, trace_capacity=8))

    kw = {"name": "x", "track_memory": False, "device_id": 0}
    t = storm_run(reenter, T, **kw)
    assert t.name == "x" and t.track_memory is False
    p = storm_run(reenter, HierarchicalProfiler, name="P", device="cuda:1", track_ram=False,
                  track_vram=False, sync_cuda=False, trace_capacity=16)
    assert (p.root_name, p.device, p.device_id, p.trace_capacity) == ("P", "cuda:1", 1, 16)
    assert made


def test_the_hostile_finalizers_of_the_scope_profiler():
    # finalizers that reset() the profiler, push / pop, rename the root and re-init it
    # while scopes are entered, left and exported (child: a crash must fail the test)
    code = FINALIZER_STORM_SOURCE + """
import random
from spatialhub.utils.profiling import HierarchicalProfiler, Timer
p = HierarchicalProfiler("R", track_ram=False, trace_capacity=64)
rnd = random.Random(1)

def reenter():
    k = rnd.randrange(6)
    if k == 0:
        p.reset()
    elif k == 1:
        p.push("pushed")
    elif k == 2:
        p.pop()
    elif k == 3:
        p.root_name = "R%d" % rnd.randrange(3)
    elif k == 4:
        with p("fin"):
            pass
    else:
        p.export_chrome_trace()

def body():
    for i in range(200):
        with p("a"):
            with Timer("b", profiler=p, track_memory=False):
                pass
        if i % 20 == 0:
            p.export_chrome_trace()
    return p.export_chrome_trace()

with finalizer_storm(reenter, budget=2000) as storm:
    trace = storm.run(body)
assert not storm.errors, storm.errors[:3]
assert storm.fired_inside > 100, storm.fired_inside
assert all(e["ph"] in "XM" for e in trace["traceEvents"])
print("ok")
"""
    done = run_python(code)
    assert done.returncode == 0 and done.stdout.strip() == "ok", (done.returncode,
                                                                   done.stderr[-3000:])


# ---- benchmark_callable --------------------------------------------------------------


def test_benchmark_callable_with_finalizers_benchmarking():
    def work(n):
        return [i * i for i in range(n)]

    def reenter():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", BenchmarkWarning)
            benchmark_callable(_native._noop, num_warmup=0, num_iters=2, track_ram=False,
                               progress=False)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BenchmarkWarning)
        s = storm_run(reenter, benchmark_callable, work, 50, name="work", num_warmup=2,
                      num_iters=20, progress=False, budget=40)
    assert s.name == "work" and s.timed_iters == 20 and len(s.samples_ms) == 20
    assert np.all(np.isfinite(s.samples_ms)) and s.median_ms > 0


# ---- results: compare, table, fields, pickle -----------------------------------------


def test_compare_and_table_with_finalizers_comparing():
    a, b = stats(1, runs=[100, 100, 100]), stats(2, level=1.3, runs=[150, 150])
    want = compare_benchmarks(a, b, resamples=500)
    want_table = format_benchmark_table([a, b], baseline=a, param=None)

    def reenter():
        compare_benchmarks(a, b, resamples=100)
        format_benchmark_table([a, b], baseline=a)

    got = storm_run(reenter, compare_benchmarks, a, b, resamples=500)
    assert (got.ratio, got.ci95_low, got.ci95_high, got.verdict) == (
        want.ratio, want.ci95_low, want.ci95_high, want.verdict)
    assert storm_run(reenter, format_benchmark_table, [a, b], baseline=a) == want_table


def test_stats_fields_dict_and_pickle_with_finalizers():
    s = stats(3)
    s.params = {"batch": 8}
    s.run_sizes = (100, 200)
    kw = s.to_dict(samples=True)

    def reenter():
        BenchmarkStats(**kw).to_dict(samples=True)
        pickle.loads(pickle.dumps(s))

    t = storm_run(reenter, BenchmarkStats, **kw)
    assert t == BenchmarkStats(**kw)
    assert storm_run(reenter, s.to_dict, samples=True) == s.to_dict(samples=True)
    assert storm_run(reenter, lambda: pickle.loads(pickle.dumps(s))) == s
    c = compare_benchmarks(stats(4), stats(5))
    assert storm_run(reenter, lambda: pickle.loads(pickle.dumps(c))).to_dict() == c.to_dict()


def test_the_hostile_finalizers_of_the_results():
    # finalizers that give the very results being read new samples, run sizes, params and
    # gpu fields (child: a crash must fail the test)
    code = FINALIZER_STORM_SOURCE + """
import pickle, random
import numpy as np
from spatialhub.utils.profiling import BenchmarkStats, compare_benchmarks, format_benchmark_table
from spatialhub.utils.profiling import _native
rnd = random.Random(2)

def make(seed, n):
    s = _native._stats_from_samples(np.exp(np.random.default_rng(seed).normal(0, 0.02, n)))
    s.name = "s%d" % seed
    return s

a, b = make(1, 400), make(2, 300)
a.gpu_samples_ms = tuple(float(x) for x in range(50))
fields = make(9, 10).to_dict()

def reenter():
    k = rnd.randrange(5)
    victim = a if rnd.random() < 0.5 else b
    if k == 0:
        n = rnd.choice([5, 40, 900])
        victim.__init__(**fields, samples_ms=list(np.linspace(1.0, 2.0, n)))
    elif k == 1:
        victim.run_sizes = None
    elif k == 2:
        victim.params = {"p": rnd.random()}
    elif k == 3:
        victim.gpu_samples_ms = tuple(float(x) for x in range(rnd.randrange(1, 80)))
    else:
        victim.__setstate__(make(rnd.randrange(9), rnd.choice([10, 600])).__reduce__()[2])

results = []
def body():
    for _ in range(30):
        for fn in (lambda: compare_benchmarks(a, b, resamples=200),
                   lambda: format_benchmark_table([a, b], baseline=a, param="p"),
                   lambda: a.to_dict(samples=True), lambda: pickle.dumps(b),
                   lambda: a == b, lambda: repr(a), lambda: b.samples_ms.sum()):
            try:
                results.append(fn())
            except ValueError as e:          # e.g. run sizes that no longer add up
                results.append(e)

with finalizer_storm(reenter, budget=3000) as storm:
    storm.run(body)
assert not storm.errors, storm.errors[:3]
assert storm.fired_inside > 100, storm.fired_inside
print("ok", len(results))
"""
    done = run_python(code, timeout=600)
    assert done.returncode == 0 and done.stdout.startswith("ok"), (done.returncode,
                                                                    done.stderr[-3000:])


def test_the_helper_bites():
    """The storm reaches inside C code that allocates: a node made by push() (an object
    the collector tracks, from no free list) runs finalizers while the profiler is at
    work; each sees the stack as it stands."""
    p = HierarchicalProfiler("R", track_ram=False)
    seen = []

    def reenter():
        seen.append([n.name for n in p.stack])

    with finalizer_storm(reenter, budget=20) as storm:
        storm.run(lambda: [p.push(f"n{i}") for i in range(5)])
    assert [n.name for n in p.stack] == ["R", "n0", "n1", "n2", "n3", "n4"]
    assert storm.fired_inside > 0 and seen
    assert all(s == ["R"] + [f"n{i}" for i in range(len(s) - 1)] for s in seen), seen


# ---- found by the audit (docs/reliability.md, "Issue 23"): each failed before it -----


def test_samples_replaced_by_a_finalizer_while_listed():
    # to_dict(samples=True) sized the list from the sample count, made it (a collection: a
    # finalizer gave the stats more samples), then filled it up to the new count: a write
    # past the list.  The list's free list is drained first, so that making it allocates.
    code = FINALIZER_STORM_SOURCE + """
import numpy as np
from spatialhub.utils.profiling import _native
s = _native._stats_from_samples(np.linspace(1.0, 2.0, 300))
fields = s.to_dict()
n = [300]

def reenter():
    n[0] *= 2
    s.__init__(**fields, samples_ms=np.linspace(1.0, 2.0, n[0]))

for attempt in range(20):
    keep = [[] for _ in range(200)]      # no list left in CPython's free list
    with finalizer_storm(reenter, budget=6) as storm:
        before = len(s.samples_ms)
        d = storm.run(s.to_dict, samples=True)
    assert not storm.errors, storm.errors
    assert len(d["samples_ms"]) >= before and all(type(x) is float for x in d["samples_ms"])
    n[0] = 300
    s.__init__(**fields, samples_ms=np.linspace(1.0, 2.0, 300))
print("ok")
"""
    done = run_python(code)
    assert done.returncode == 0 and done.stdout.strip() == "ok", (done.returncode,
                                                                   done.stderr[-3000:])


def test_gpu_samples_replaced_by_a_finalizer_while_exported():
    # to_dict() read a tuple field borrowed while it built the list of its items: a
    # finalizer that reassigned the field freed the tuple being read (use after free; the
    # sanitizer run sees it)
    code = FINALIZER_STORM_SOURCE + """
import numpy as np
from spatialhub.utils.profiling import _native
s = _native._stats_from_samples(np.linspace(1.0, 2.0, 50))
k = [0]

def reenter():
    k[0] += 1
    s.gpu_samples_ms = tuple(float(k[0]) for _ in range(40))

for attempt in range(20):
    s.gpu_samples_ms = tuple(0.5 + i for i in range(40))
    keep = [[] for _ in range(200)]
    with finalizer_storm(reenter, budget=6) as storm:
        d = storm.run(s.to_dict)
    got = d["gpu_samples_ms"]
    assert len(got) == 40 and (got == [0.5 + i for i in range(40)] or len(set(got)) == 1), got
print("ok")
"""
    done = run_python(code)
    assert done.returncode == 0 and done.stdout.strip() == "ok", (done.returncode,
                                                                   done.stderr[-3000:])


def test_a_signal_handler_replacing_samples_during_compare():
    # compare_benchmarks' bootstrap answers Ctrl-C (a signal check every 65,536
    # resamples), so a signal handler runs in the middle of it; one that gave the baseline
    # new samples made the rest of the comparison read 20,000 samples from a buffer of 5
    # with the old run sizes (out of bounds, or a ValueError about sizes that were right).
    # The comparison is of the samples as they were when it began.
    code = """
import signal
import numpy as np
from spatialhub.utils.profiling import compare_benchmarks, _native

def make(seed, level):
    s = _native._stats_from_samples(
        level * np.exp(np.random.default_rng(seed).normal(0, 0.02, 20000)))
    s.run_sizes = (10000, 10000)
    return s

a, b = make(1, 1.0), make(2, 1.2)
fields = a.to_dict()
want = compare_benchmarks(a, b, resamples=1000000)   # about 1 s of bootstrap
hits = []

def handler(signum, frame):
    hits.append(1)
    a.__init__(**fields, samples_ms=[9.0, 9.0, 9.0, 9.0, 9.0])

signal.signal(signal.SIGALRM, handler)
signal.setitimer(signal.ITIMER_REAL, 0.1)            # once, well inside the bootstrap
got = compare_benchmarks(a, b, resamples=1000000)
signal.setitimer(signal.ITIMER_REAL, 0)
assert hits and len(a.samples_ms) == 5, "the handler did not run during the comparison"
assert (got.ratio, got.ci95_low, got.ci95_high, got.verdict) == (
    want.ratio, want.ci95_low, want.ci95_high, want.verdict), (got, want)
print("ok")
"""
    done = run_python(code, timeout=600)
    assert done.returncode == 0 and done.stdout.strip() == "ok", (done.returncode, done.stdout,
                                                                   done.stderr[-3000:])
