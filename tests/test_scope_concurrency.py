"""Scopes under threads and asyncio: each thread / task nests its own scopes, all
aggregate into one tree without corruption.

Each scenario is also run against a naive global-stack profiler (the released design,
reimplemented here in a few lines) to show the scenario tells the two apart: the same
checks fail on it."""
import asyncio
import sys
import threading
import time

import pytest

from spatialhub.utils.profiling import HierarchicalProfiler


class NaiveGlobalStack:
    """One stack for everybody, like the released module: for contrast only."""

    class Node:
        def __init__(self, name):
            self.name, self.calls, self.children = name, 0, {}

    class _Scope:
        def __init__(self, prof, name):
            self.prof, self.name = prof, name

        def __enter__(self):
            parent = self.prof.stack[-1]
            node = parent.children.setdefault(self.name, NaiveGlobalStack.Node(self.name))
            self.prof.stack.append(node)
            self.node = node
            return self

        def __exit__(self, *exc):
            self.node.calls += 1
            if len(self.prof.stack) > 1:
                self.prof.stack.pop()
            return False

    def __init__(self, name="Root", track_ram=False):
        self.root = self.Node(name)
        self.stack = [self.root]

    def __call__(self, name):
        return self._Scope(self, name)


def shape(node):
    """{name: (calls, {children...})} of a tree."""
    return {k: (c.calls, shape(c)) for k, c in node.children.items()}


# ---- threads -------------------------------------------------------------------------

def interleaved_threads(p):
    """Two threads open their outer scopes, then (in lockstep) their inner ones, so
    that each inner scope is opened while the other thread's outer scope is open."""
    barrier = threading.Barrier(2)

    def worker(tag):
        with p(f"outer-{tag}"):
            barrier.wait()
            with p(f"inner-{tag}"):
                barrier.wait()
            barrier.wait()

    ts = [threading.Thread(target=worker, args=(tag,)) for tag in "AB"]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return shape(p.root)


EXPECTED_THREADS = {
    "outer-A": (1, {"inner-A": (1, {})}),
    "outer-B": (1, {"inner-B": (1, {})}),
}


def test_threads_nest_their_own_scopes():
    p = HierarchicalProfiler("R", track_ram=False)
    assert interleaved_threads(p) == EXPECTED_THREADS
    assert p.stack == [p.root]


def test_the_thread_scenario_catches_a_global_stack():
    assert interleaved_threads(NaiveGlobalStack()) != EXPECTED_THREADS


def test_many_threads_aggregate_counts_exactly():
    p = HierarchicalProfiler("R", track_ram=False)
    n_threads, n_iter = 8, 300
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)    # switch threads as often as possible
    try:
        def worker(i):
            for _ in range(n_iter):
                with p("stage"):
                    with p(f"sub-{i % 2}"):
                        with p("leaf"):
                            pass

        ts = [threading.Thread(target=worker, args=(i,)) for i in range(n_threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    finally:
        sys.setswitchinterval(old)
    stage = p.root.children["stage"]
    assert list(p.root.children) == ["stage"]
    assert stage.calls == n_threads * n_iter
    assert sorted(stage.children) == ["sub-0", "sub-1"]
    for sub in stage.children.values():
        assert sub.calls == n_threads // 2 * n_iter
        assert list(sub.children) == ["leaf"]
        assert sub.children["leaf"].calls == n_threads // 2 * n_iter
    # every call also made it into the latency histogram
    assert stage.histogram_calls == n_threads * n_iter


def test_a_new_thread_starts_at_the_root():
    p = HierarchicalProfiler("R", track_ram=False)
    seen = []
    with p("main-scope"):
        t = threading.Thread(target=lambda: seen.append([n.name for n in p.stack]))
        t.start()
        t.join()
        assert [n.name for n in p.stack] == ["R", "main-scope"]
    assert seen == [["R"]]


# ---- asyncio -------------------------------------------------------------------------

def interleaved_tasks(p):
    """Two tasks each open a scope, await (letting the other run inside its scope),
    then open an inner scope."""
    async def task(tag, mine, theirs):
        with p(f"task-{tag}"):
            mine.set()
            await theirs.wait()
            await asyncio.sleep(0)
            with p("inner"):
                await asyncio.sleep(0.001)
            await asyncio.sleep(0)

    async def main():
        ea, eb = asyncio.Event(), asyncio.Event()
        with p("main"):
            await asyncio.gather(task("A", ea, eb), task("B", eb, ea))

    asyncio.run(main())
    return shape(p.root)


EXPECTED_TASKS = {
    "main": (1, {
        "task-A": (1, {"inner": (1, {})}),
        "task-B": (1, {"inner": (1, {})}),
    }),
}


def test_scopes_across_awaits_nest_by_task():
    p = HierarchicalProfiler("R", track_ram=False)
    assert interleaved_tasks(p) == EXPECTED_TASKS
    assert p.stack == [p.root]


def test_the_task_scenario_catches_a_global_stack():
    assert interleaved_tasks(NaiveGlobalStack()) != EXPECTED_TASKS


def test_a_task_scope_spans_its_await():
    p = HierarchicalProfiler("R", track_ram=False)

    async def slow():
        with p("slow"):
            await asyncio.sleep(0.05)

    async def fast():
        for _ in range(5):
            with p("fast"):
                await asyncio.sleep(0)

    async def main():
        await asyncio.gather(slow(), fast())

    asyncio.run(main())
    slow_n, fast_n = p.root.children["slow"], p.root.children["fast"]
    assert slow_n.calls == 1 and fast_n.calls == 5
    assert slow_n.children == {} and fast_n.children == {}
    assert slow_n.total_wall_time >= 0.045
    assert fast_n.total_wall_time < slow_n.total_wall_time


def test_threads_running_event_loops():
    """Threads with their own loops, tasks in each: one tree, exact counts."""
    p = HierarchicalProfiler("R", track_ram=False)

    async def job(i):
        with p("job"):
            await asyncio.sleep(0)
            with p("step"):
                await asyncio.sleep(0)

    def run():
        async def main():
            await asyncio.gather(*(job(i) for i in range(20)))
        asyncio.run(main())

    ts = [threading.Thread(target=run) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert shape(p.root) == {"job": (80, {"step": (80, {})})}


@pytest.mark.parametrize("switch", [1e-6, 5e-3])
def test_reset_while_threads_run_never_corrupts(switch):
    p = HierarchicalProfiler("R", track_ram=False)
    stop = time.perf_counter() + 0.3
    errors = []
    old = sys.getswitchinterval()
    sys.setswitchinterval(switch)

    def worker():
        try:
            while time.perf_counter() < stop:
                with p("a"):
                    with p("b"):
                        pass
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    try:
        ts = [threading.Thread(target=worker) for _ in range(3)]
        for t in ts:
            t.start()
        while time.perf_counter() < stop:
            p.reset()
            time.sleep(0.01)
        for t in ts:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert errors == []
    # The current tree is well formed.  A thread inside "a" of an old tree when reset()
    # ran continues at the new root (as with the released module's reset), so "b" may
    # sit at the top; nothing else may appear anywhere.
    assert set(p.root.children) <= {"a", "b"}
    for top in p.root.children.values():
        assert set(top.children) <= {"b"}
        for b in top.children.values():
            assert b.children == {} and b.calls <= top.calls + 3
    assert p.stack == [p.root]


def test_a_scope_left_in_another_thread_or_task_is_refused_not_corrupted():
    import asyncio
    import threading

    from spatialhub.utils.profiling import HierarchicalProfiler, Timer

    prof = HierarchicalProfiler("root", track_ram=False)
    t = Timer("a", profiler=prof, track_memory=False)
    t.__enter__()
    errors = []

    def leave():
        try:
            t.__exit__(None, None, None)
        except RuntimeError as e:
            errors.append(str(e))

    th = threading.Thread(target=leave)
    th.start()
    th.join()
    assert errors and "different thread or asyncio task" in errors[0]
    # the scope is still open where it was entered, and leaving it there works
    with prof("b"):
        pass
    t.__exit__(None, None, None)
    with prof("c"):
        pass
    a = prof.root.children["a"]
    assert a.calls == 1 and "b" in a.children
    assert "c" in prof.root.children and "c" not in a.children   # not nested under "a"

    async def main():
        t2 = Timer("x", profiler=prof, track_memory=False)
        t2.__enter__()

        async def other():
            t2.__exit__(None, None, None)

        try:
            await asyncio.create_task(other())
        except RuntimeError as e:
            errors.append(str(e))
        t2.__exit__(None, None, None)

    asyncio.run(main())
    assert len(errors) == 2 and "different thread or asyncio task" in errors[1]
    assert prof.root.children["x"].calls == 1
