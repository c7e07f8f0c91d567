"""Reliability, issue 23: the scope profiler, the fork paths and the argument parser under a
hostile review.  One test (at least) per numbered item of the issue; each failed on the code
before the fix (855d3e2).  Anything that crashed the interpreter there runs in a fresh
subprocess, so a crash fails the test instead of killing pytest; under .ci/sanitize.sh the
children run sanitized too.  The class behind the items: docs/reliability.md ("Issue 23")."""
import asyncio
import contextvars
import gc
import inspect
import os
import sys
import threading
import time
import warnings

import pytest

from reliability_support import FINALIZER_STORM_SOURCE, run_python
from spatialhub.utils.profiling import HierarchicalProfiler, ProfileNode, Timer, timeit
from spatialhub.utils.profiling import _native

POSIX_FORK = hasattr(os, "fork") and sys.platform.startswith("linux")
SCOPE_VAR = "spatialhub.utils.profiling.scope"


def ok(done):
    """Assert a subprocess exited 0 (a signal shows as a negative code); its stdout."""
    assert done.returncode == 0, (
        f"rc={done.returncode}\n--- stdout ---\n{done.stdout}\n--- stderr ---\n{done.stderr[-4000:]}")
    return done.stdout


# ---- 1. export_chrome_trace while a finalizer enters scopes or resets ----------------


@pytest.mark.parametrize("finalizer", ["enter", "reset"])
def test_1_trace_export_while_finalizers_enter_scopes_or_reset(finalizer):
    # The events list was sized from the ring's count before the tuples were built; a
    # collection during the build ran a finalizer that entered scopes (the ring grew: the
    # loop wrote past the list -- heap overflow) or reset() (the ring was freed: NULL items).
    code = FINALIZER_STORM_SOURCE + f"""
from spatialhub.utils.profiling import HierarchicalProfiler
p = HierarchicalProfiler("R", track_ram=False)

def reenter():
    if {finalizer!r} == "enter":
        for _ in range(20):
            with p("fin"):
                pass
    else:
        p.reset()

fired = 0
for attempt in range(10):
    for _ in range(300):
        with p("a"):
            pass
    with finalizer_storm(reenter, budget=400) as storm:
        nodes, events, dropped = storm.run(p._trace)
        trace = storm.run(p.export_chrome_trace)
    fired += storm.fired_inside
    assert not storm.errors, storm.errors
    assert all(type(e) is tuple and len(e) == 5 for e in events)
    assert all(0 <= e[0] < len(nodes) for e in events)
    evs = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert all(isinstance(e, dict) and e["name"] in ("a", "fin") for e in evs)
print("ok" if fired > 0 else "the storm never hit")
"""
    assert ok(run_python(code)).strip() == "ok"


# ---- 2. a fork child frees a window a live Timer still points to -------------------


@pytest.mark.skipif(not POSIX_FORK, reason="fork")
@pytest.mark.parametrize("how", ["exit", "drop"])
def test_2_fork_child_closes_a_timer_another_thread_entered(how):
    # A Timer entered by another thread (start/stop style) holds a RAM window; the fork
    # child's handler freed the windows of the threads it lacks, and the Timer freed it
    # again when it exited or was dropped there: double free / heap-use-after-free.
    code = f"""
        import os, threading
        from spatialhub.utils.profiling import HierarchicalProfiler, Timer
        p = HierarchicalProfiler("R")
        t = Timer("held", profiler=p)          # track_memory=True: a RAM window
        th = threading.Thread(target=t.__enter__)
        th.start(); th.join()
        pid = os.fork()
        if pid == 0:
            code = 3
            try:
                if {how!r} == "exit":
                    try:
                        t.__exit__(None, None, None)
                    except RuntimeError:
                        pass                   # entered in another thread: refused, stays open
                del t                          # the window is closed (and freed) here
                with p("after") as a:
                    bytearray(8 << 20)
                code = 0 if a.ram_delta_mb >= 0.0 else 4
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        print(status)
    """
    assert ok(run_python(code)).strip() == "0"


# ---- 3. keyword values borrowed across user code -------------------------------------


_ORDER_PRELUDE = """
    import gc, sys, warnings
    from spatialhub.utils.profiling import HierarchicalProfiler, Timer, _native
    order = []

    class Victim:
        '''An int by __index__ that says when it is used and when it is freed.'''
        def __index__(self):
            order.append("index")
            return 10
        def __del__(self):
            order.append("del")

    def clear_dicts_holding(obj):
        # the call's own kwargs dict (a copy of the caller's) is reachable through gc
        for r in gc.get_referrers(obj):
            if isinstance(r, dict):
                r.clear()

    class Clearer:
        '''A flag whose truth test empties the kwargs dict it came in.'''
        def __bool__(self):
            order.append("bool")
            clear_dicts_holding(self)
            return False
"""


@pytest.mark.parametrize("call", [
    "HierarchicalProfiler(**kw)",       # args.c's tuple parser (tp_init)
    "Sub(**kw)",                        # scopetimer.c's Timer_new (a subclass: no vectorcall)
])
def test_3_a_flag_that_empties_kwargs_does_not_free_the_other_values(call):
    kw = ('{"track_ram": Clearer(), "trace_capacity": Victim()}' if "Hier" in call
          else '{"name": "x", "track_memory": Clearer(), "device_id": Victim()}')
    code = _ORDER_PRELUDE + f"""
    class Sub(Timer):
        pass
    kw = {kw}
    obj = {call}
    del kw
    print(order)
    """
    out = ok(run_python(code)).strip()
    # the victim is read while it is alive, and freed after the parser let go of it
    assert out == "['bool', 'index', 'del']", out


def test_3_setstate_holds_the_value_while_setting_it():
    # Comparison.__setstate__ read each value borrowed from the state dict; a value whose
    # __float__ empties the dict was freed inside the conversion, before CPython had done
    # with it (its name in the DeprecationWarning for a float subclass was read from freed
    # memory).
    code = """
        import warnings
        from spatialhub.utils.profiling import _native
        order = []
        c = _native.Comparison("a", "b", 1.0, 1.0, 1.0, 0.9, 1.1, "same", 1000)
        class MyFloat(float):
            pass
        class EvilMargin:
            def __float__(self):
                order.append("float")
                state.clear()
                return MyFloat(0.07)
            def __del__(self):
                order.append("del")
        def show(message, *a, **k):
            order.append("warn:" + str(message).split(".")[0])
        warnings.showwarning = show
        warnings.simplefilter("always")
        state = {"margin": EvilMargin()}
        c.__setstate__(state)
        print(order, c.margin)
    """
    out = ok(run_python(code)).strip()
    assert out == "['float', 'warn:EvilMargin', 'del'] 0.07", out


def test_3_counts_are_copied_before_their_items_run_code():
    # a list of run sizes whose item's __index__ shrinks the list: the items are read from
    # a private copy (all of them, or a clear error), never past the list's new end
    from spatialhub.utils.profiling import BenchmarkStats
    s = _native._stats_from_samples(__import__("numpy").arange(1.0, 7.0))
    sizes = []

    class Shrinks:
        def __index__(self):
            sizes.clear()
            return 3

    sizes.extend([Shrinks(), 3])
    s.run_sizes = sizes
    assert s.run_sizes == (3, 3)
    assert isinstance(s, BenchmarkStats)


# ---- 4. the scope ContextVar's value is type-checked ---------------------------------


def test_4_a_foreign_value_in_the_scope_contextvar_is_a_type_error():
    # any code can set the profiler's ContextVar through contextvars.copy_context(); its
    # value was cast to a node unchecked: SIGSEGV
    code = f"""
        import contextvars
        from spatialhub.utils.profiling import HierarchicalProfiler
        p = HierarchicalProfiler("R", track_ram=False)
        with p("a"):
            ctx = contextvars.copy_context()
        var = next(v for v in ctx if v.name == {SCOPE_VAR!r})
        def hostile():
            out = []
            for value in (b"x" * 64, 12345, p.root, object()):
                var.set(value)
                for what in ("scope", "stack", "current", "push", "pop"):
                    try:
                        if what == "scope":
                            with p("b"):
                                pass
                        elif what == "push":
                            p.push("b")
                        elif what == "pop":
                            p.pop()
                        else:
                            getattr(p, what)
                        out.append("accepted")
                    except TypeError as e:
                        out.append("context variable holds" in str(e))
            var.set(None)                     # None is the root
            with p("c"):
                pass
            return out, [n.name for n in p.stack]
        out, stack = contextvars.copy_context().run(hostile)
        print(set(out), stack, sorted(p.root.children))
    """
    out = ok(run_python(code)).strip()
    assert out == "{True} ['R'] ['a', 'c']", out


def test_4_a_foreign_value_in_children_is_a_type_error():
    # ProfileNode.children is a dict users can reach; what a scope found there was cast
    # to a node unchecked: SIGSEGV
    code = """
        from spatialhub.utils.profiling import HierarchicalProfiler
        p = HierarchicalProfiler("R", track_ram=False)
        with p("a"):
            pass
        p.root.children["b"] = "not a node"
        try:
            with p("b"):
                pass
        except TypeError as e:
            print(e)
        with p("a"):
            pass
        print(p.stack == [p.root], p.root.children["a"].calls)
    """
    out = ok(run_python(code)).splitlines()
    assert "ProfileNode.children of 'R' holds a str under that name" in out[0], out
    assert out[1] == "True 2", out


# ---- 5. a scope in an abandoned (async) generator ------------------------------------


def test_5_scope_in_an_async_generator_abandoned_by_break():
    # asyncio closes the abandoned generator in a task of its own; __exit__ raised "left
    # in a different task", the scope stayed open in the consumer, and every later scope
    # of the consumer nested under it
    p = HierarchicalProfiler("R", track_ram=False)
    errors = []

    async def agen():
        with p("gen"):
            for i in range(3):
                yield i
                await asyncio.sleep(0)

    async def main():
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda loop, ctx: errors.append(ctx.get("exception")))
        async for _ in agen():
            break
        for _ in range(5):
            await asyncio.sleep(0)           # the loop runs the generator's aclose()
        with p("after"):
            pass
        return [n.name for n in p.stack]

    stack = asyncio.run(main())
    assert stack == ["R"]
    assert sorted(p.root.children) == ["after", "gen"]
    assert p.root.children["gen"].children == {}
    assert p.root.children["gen"].calls == 1          # the closed scope is recorded
    assert errors == []


def test_5_generator_closed_in_another_thread_and_a_dropped_timer():
    p = HierarchicalProfiler("R", track_ram=False)

    def gen():
        with p("gen"):
            yield 1
            yield 2

    g = gen()
    next(g)
    th = threading.Thread(target=g.close)      # GeneratorExit in another thread
    th.start()
    th.join()
    with p("after"):
        pass
    t = Timer("manual", profiler=p, track_memory=False)
    t.__enter__()
    del t                                      # dropped while entered
    gc.collect()
    with p("later"):
        pass
    assert sorted(p.root.children) == ["after", "gen", "later", "manual"]
    assert p.root.children["gen"].children == {} and p.stack == [p.root]
    assert p.root.children["gen"].calls == 1 and p.root.children["manual"].calls == 0


# Fault 5 (a scope left in another thread without closing is refused, and still
# leaves where it was entered): tests/test_scope_concurrency.py::
# test_a_scope_left_in_another_thread_or_task_is_refused_not_corrupted.


# ---- 6. ProfileNode.calls: range-checked, never wraps --------------------------------


def test_6_calls_is_range_checked_and_stops_at_its_maximum():
    p = HierarchicalProfiler("R", track_ram=False)
    with p("a"):
        pass
    n = p.root.children["a"]
    n.calls = 2**63 - 1                        # the released API let code assign it
    with p("a"):
        pass
    assert n.calls == 2**63 - 1                # was -2**63 (signed overflow)
    n.calls = 7
    assert n.calls == 7 and n.mean_ms is not None
    with pytest.raises(ValueError, match=r"ProfileNode.calls must be an int in \[0, 2\*\*63 - 1\], got -1"):
        n.calls = -1
    with pytest.raises(ValueError, match=r"got 9223372036854775808"):
        n.calls = 2**63
    for bad in (True, 1.5, "3", None):
        with pytest.raises(TypeError, match="ProfileNode.calls must be an int"):
            n.calls = bad
    with pytest.raises(AttributeError):
        del n.calls
    assert n.calls == 7
    free = ProfileNode("x")
    free.calls = __import__("numpy").int64(4)
    assert free.calls == 4


# ---- 7. @timeit on generator and async generator functions ---------------------------


def test_7_timeit_on_a_generator_spans_the_iteration():
    p = HierarchicalProfiler("R", track_ram=False)

    @p.timeit()
    def produce(n):
        for i in range(n):
            time.sleep(0.02)
            yield i
        return "done"

    assert inspect.isgeneratorfunction(produce) and produce.__name__ == "produce"
    g = produce(5)
    assert p.root.children == {}               # creating it is not a call
    assert list(g) == [0, 1, 2, 3, 4]
    node = p.root.children["produce"]
    assert node.calls == 1
    assert node.total_wall_time >= 0.1          # five sleeps of 20 ms (was ~1 us)

    # send / throw / close / return value go through; the scope is left on each way out
    @timeit(profiler=p, track_memory=False)
    def echo():
        got = yield "ready"
        try:
            while True:
                got = yield got * 2
        except KeyError:
            yield "caught"
        return "finished"

    g = echo()
    assert next(g) == "ready" and g.send(4) == 8 and g.throw(KeyError) == "caught"
    with pytest.raises(StopIteration) as stop:
        next(g)
    assert stop.value.value == "finished"
    g = echo()
    next(g)
    g.close()
    g = echo()
    next(g)
    with pytest.raises(ValueError):
        g.throw(ValueError("boom"))
    assert p.root.children["echo"].calls == 3 and p.stack == [p.root]


def test_7_timeit_on_an_async_generator_spans_the_iteration():
    p = HierarchicalProfiler("R", track_ram=False)

    @p.timeit("agen")
    async def ticks(n):
        for i in range(n):
            await asyncio.sleep(0.02)
            yield i

    @timeit(profiler=p, track_memory=False)
    async def echo():
        got = yield "ready"
        try:
            while True:
                got = yield got * 2
        except KeyError:
            yield "caught"

    @p.timeit()
    async def coro():
        await asyncio.sleep(0.02)
        return 5

    async def main():
        out = [i async for i in ticks(5)]
        e = echo()
        r = [await e.asend(None), await e.asend(3), await e.athrow(KeyError)]
        with pytest.raises(StopAsyncIteration):
            await e.asend(None)
        e = echo()
        await e.asend(None)
        await e.aclose()
        return out, r, await coro(), [n.name for n in p.stack]

    assert inspect.isasyncgenfunction(ticks)
    out, r, c, stack = asyncio.run(main())
    assert out == [0, 1, 2, 3, 4] and r == ["ready", 6, "caught"] and c == 5 and stack == ["R"]
    assert p.root.children["agen"].calls == 1
    assert p.root.children["agen"].total_wall_time >= 0.1
    assert p.root.children["echo"].calls == 2
    assert p.root.children["coro"].total_wall_time >= 0.02


# ---- 8. trace lanes: O(n log n), and every lane nests --------------------------------


def lanes_nest(x_events):
    by_lane = {}
    for e in x_events:
        by_lane.setdefault(e["tid"], []).append(e)
    for lane in by_lane.values():
        lane.sort(key=lambda e: (e["ts"], -e["dur"], e["args"]["depth"]))
        open_calls = []
        for e in lane:
            start, end = e["ts"], e["ts"] + e["dur"]
            while open_calls and open_calls[-1][0] <= start + 1e-9:
                open_calls.pop()
            if open_calls:
                top_end, top_depth = open_calls[-1]
                assert end <= top_end + 1e-9 and top_depth < e["args"]["depth"], e
            open_calls.append((end, e["args"]["depth"]))
    return len(by_lane)


def test_8_lanes_for_thousands_of_overlapping_tasks():
    from spatialhub.utils.profiling.scope import _assign_lanes

    # 4,000 tasks of one scope each, all open at once (took 2.7 s to export): 4,000 lanes,
    # one per task -- the fewest that nest; the figures are bench/bench_trace_export.py's
    n = 4000
    events = [(1, 7, i, 10 * n, 1) for i in range(n)]
    order, lanes = _assign_lanes(events, [-1, 0])
    assert sorted(lanes) == list(range(n))
    # inner scopes go under an open call of their parent scope on top of a lane: no lane
    # more, and each under a "task" call that contains it
    events = [(1, 7, 10 * i, 100 * n, 1) for i in range(n)]
    events += [(2, 7, 10 * i + 1, 5, 2) for i in range(n)]   # "step", child of "task"
    order, lanes = _assign_lanes(events, [-1, 0, 1])
    lane_of = dict(zip(order, lanes))
    assert max(lanes) == n - 1
    task_on = {lane_of[i]: i for i in range(n)}
    for i in range(n):
        task = events[task_on[lane_of[n + i]]]
        assert task[2] <= events[n + i][2] and events[n + i][2] + 5 <= task[2] + task[3]


def test_8_a_real_trace_of_interleaved_tasks_nests_in_every_lane():
    p = HierarchicalProfiler("R", track_ram=False)

    async def task(i):
        with p("task"):
            await asyncio.sleep(0.001 * (i % 4))
            with p("io"):
                await asyncio.sleep(0.001 * (i % 3))
            with p("cpu"):
                pass

    async def main():
        with p("main"):
            await asyncio.gather(*(task(i) for i in range(200)))

    asyncio.run(main())
    evs = [e for e in p.export_chrome_trace()["traceEvents"] if e["ph"] == "X"]
    assert len(evs) == 1 + 3 * 200
    n_lanes = lanes_nest(evs)
    # overlapping tasks need lanes of their own (how many depends on the interleaving)
    assert 2 <= n_lanes <= len(evs)
    # sequential code on one thread needs one lane
    q = HierarchicalProfiler("Q", track_ram=False)
    for _ in range(50):
        with q("frame"):
            with q("pre"):
                pass
            with q("model"):
                with q("conv"):
                    pass
    evs = [e for e in q.export_chrome_trace()["traceEvents"] if e["ph"] == "X"]
    assert lanes_nest(evs) == 1 and len(evs) == 200


# ---- 9. the sanitizer log scan fails on every fatal message: test_sanitizer_scan.py ----
