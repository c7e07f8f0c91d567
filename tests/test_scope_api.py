"""The released scope-profiler API, item by item (issue 12, point 2): names, parameters,
defaults, attribute names and units.  Code written for the released module relies on
each of these."""
import functools
import inspect
import time

import pytest

import spatialhub.utils.profiling as prof_mod
from spatialhub.utils.profiling import HierarchicalProfiler, ProfileNode, Timer, timeit


def spin(seconds):
    """Busy CPU for `seconds` of wall time (CPU time ~ wall time)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


RELEASED_ALL = ["BenchmarkStats", "GPUMemoryInfo", "HierarchicalProfiler", "ProfileNode",
                "Timer", "benchmark_callable", "format_benchmark_table", "get_cuda_sync_fn",
                "get_gpu_vram_mb", "get_ram_mb", "timeit"]


def test_every_released_name_is_exported():
    for name in RELEASED_ALL + ["profiler"]:
        assert hasattr(prof_mod, name), name
    assert set(RELEASED_ALL) <= set(prof_mod.__all__)


# ---- ProfileNode --------------------------------------------------------------------

def test_profile_node_fields_and_defaults():
    n = ProfileNode("stage")
    assert n.name == "stage"
    assert n.calls == 0
    assert n.total_wall_time == 0.0 and n.total_cpu_time == 0.0
    assert n.peak_ram_delta_mb == 0.0 and n.peak_vram_delta_mb == 0.0
    assert n.children == {} and isinstance(n.children, dict)
    assert n.p50_ms is None and n.mean_ms is None   # no call yet


def test_profile_node_fields_are_writable_in_their_units():
    n = ProfileNode("x")
    n.calls = 4
    n.total_wall_time = 2.0          # seconds
    n.total_cpu_time += 1.5
    n.peak_ram_delta_mb = 12.5
    n.peak_vram_delta_mb = 3.0
    n.children["child"] = ProfileNode("child")
    assert (n.calls, n.total_wall_time, n.total_cpu_time) == (4, 2.0, 1.5)
    assert (n.peak_ram_delta_mb, n.peak_vram_delta_mb) == (12.5, 3.0)
    assert n.children["child"].name == "child"
    with pytest.raises(TypeError, match=r"ProfileNode\(\): name must be str, not int"):
        ProfileNode(3)


# ---- HierarchicalProfiler -----------------------------------------------------------

def test_profiler_signature_and_defaults():
    sig = inspect.signature(HierarchicalProfiler.timeit)
    assert list(sig.parameters)[1:] == ["name", "track_ram", "track_vram", "sync_cuda"]
    p = HierarchicalProfiler()
    assert p.root_name == "Root" and p.device == "CPU" and p.device_id == 0
    assert p.track_ram is True and p.track_vram is False and p.sync_cuda is False
    assert isinstance(p.root, ProfileNode) and p.root.name == "Root"
    assert p.stack == [p.root] and p.stack[0] is p.root


@pytest.mark.parametrize("device", ["CUDA", "cuda:0", "CUDAExecutionProvider"])
def test_cuda_device_turns_vram_and_sync_on_by_default(device):
    p = HierarchicalProfiler("R", device=device)
    assert p.track_vram is True and p.sync_cuda is True
    q = HierarchicalProfiler("R", device=device, track_vram=False, sync_cuda=False)
    assert q.track_vram is False and q.sync_cuda is False


def test_positional_arguments_in_released_order():
    p = HierarchicalProfiler("Pipe", "CPU", False, True, False, 0)
    assert (p.root_name, p.device, p.track_ram, p.track_vram, p.sync_cuda) == \
        ("Pipe", "CPU", False, True, False)


def test_push_reuses_children_and_pop_never_pops_root():
    p = HierarchicalProfiler("R")
    a = p.push("a")
    assert isinstance(a, ProfileNode) and p.stack == [p.root, a]
    b = p.push("b")
    assert p.stack[-1] is b and a.children["b"] is b
    p.pop()
    p.pop()
    p.pop()     # one more than pushed: the root stays
    p.pop()
    assert p.stack == [p.root]
    assert p.push("a") is a      # existing child reused
    p.pop()
    assert list(p.root.children) == ["a"]


def test_reset_starts_a_new_tree():
    p = HierarchicalProfiler("R")
    with p("a"):
        pass
    old = p.root
    p.push("left-open")
    p.reset()
    assert p.root is not old and p.root.name == "R" and p.root.children == {}
    assert p.stack == [p.root]   # a context still inside the old tree starts at the root
    with p("b"):
        pass
    assert list(p.root.children) == ["b"]


def test_scope_and_call_return_timers_with_overrides():
    p = HierarchicalProfiler("R", track_ram=False)
    t = p.scope("s")
    assert isinstance(t, Timer)
    assert t.name == "s" and t.profiler is p
    assert t.track_memory is False and t.track_vram is False and t.sync_cuda is False
    t2 = p("s", track_ram=True)
    assert isinstance(t2, Timer) and t2.track_memory is True
    t3 = p.scope(name="s", track_ram=None, track_vram=None, sync_cuda=None)
    assert t3.track_memory is False
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        p.scope("s", bogus=1)
    with pytest.raises(TypeError, match=r"scope\(\): name must be str, not int"):
        p(42)


def test_nested_scopes_build_the_tree_with_calls_and_seconds():
    p = HierarchicalProfiler("Pipeline", track_ram=False)
    for _ in range(3):
        with p("preprocess"):
            spin(0.002)
        with p.scope("inference"):
            with p("model"):
                spin(0.004)
    pre, inf = p.root.children["preprocess"], p.root.children["inference"]
    model = inf.children["model"]
    assert (pre.calls, inf.calls, model.calls) == (3, 3, 3)
    assert p.root.calls == 0
    # seconds, not ms: 3 x 2 ms of spinning is >= 6 ms and (on any machine) < 5 s
    assert 0.006 <= pre.total_wall_time < 5.0
    assert 0.012 <= model.total_wall_time <= inf.total_wall_time
    assert model.total_cpu_time > 0.0


def test_profiler_timeit_decorator_is_bound_to_the_profiler():
    p = HierarchicalProfiler("R", track_ram=False)

    @p.timeit()
    def step(x):
        """Doubles."""
        return 2 * x

    @p.timeit(name="custom")
    def other():
        return None

    assert step(21) == 42 and step.__name__ == "step" and step.__doc__ == "Doubles."
    other()
    assert p.root.children["step"].calls == 1 and p.root.children["custom"].calls == 1


# ---- Timer ------------------------------------------------------------------------------

def test_timer_signature_defaults_and_attributes():
    t = Timer("block", profiler=HierarchicalProfiler())
    assert (t.track_memory, t.track_vram, t.sync_cuda, t.device_id) == (True, False, False, 0)
    assert t.node is None
    assert (t.elapsed_wall, t.elapsed_cpu, t.ram_delta_mb, t.vram_delta_mb) == (0, 0, 0, 0)
    with t as entered:
        assert entered is t
        spin(0.003)
    assert 0.003 <= t.elapsed_wall < 5.0     # seconds
    assert 0.0 <= t.elapsed_cpu < 5.0
    assert t.ram_delta_mb >= 0.0 and t.vram_delta_mb == 0.0
    assert t.node is t.profiler.root.children["block"]


def test_timer_without_profiler_records_into_the_module_profiler():
    prof_mod.profiler.reset()
    with Timer("released-default", track_memory=False):
        pass
    assert prof_mod.profiler.root.children["released-default"].calls == 1
    prof_mod.profiler.reset()


def test_timer_pops_and_records_when_the_body_raises():
    p = HierarchicalProfiler("R", track_ram=False)
    err = ValueError("boom")
    with pytest.raises(ValueError) as info:
        with p("outer"):
            with Timer("inner", profiler=p, track_memory=False):
                raise err
    assert info.value is err                      # unchanged, same object
    assert p.stack == [p.root]                    # both scopes left
    assert p.root.children["outer"].children["inner"].calls == 1


def test_keyboard_interrupt_propagates_through_a_timer():
    p = HierarchicalProfiler("R")
    with pytest.raises(KeyboardInterrupt):
        with p("s"):
            raise KeyboardInterrupt
    assert p.stack == [p.root]


def test_timer_bad_input_names_the_parameter():
    with pytest.raises(TypeError, match=r"Timer\(\): name must be str, not NoneType"):
        Timer(None)
    with pytest.raises(TypeError, match=r"Timer\(\): profiler must be a HierarchicalProfiler "
                                        r"or None, not str"):
        Timer("x", profiler="nope")
    with pytest.raises(ValueError, match=r"Timer\(\): device_id must be a CUDA device ordinal"):
        Timer("x", device_id=-1)
    t = Timer("x", profiler=HierarchicalProfiler())
    with pytest.raises(RuntimeError, match="exited without being entered"):
        t.__exit__(None, None, None)
    with t:
        with pytest.raises(RuntimeError, match="already active"):
            t.__enter__()


def test_timer_is_reusable_and_accumulates():
    p = HierarchicalProfiler("R", track_ram=False)
    t = p("again")
    for _ in range(4):
        with t:
            pass
    assert p.root.children["again"].calls == 4


# ---- timeit -----------------------------------------------------------------------------

def test_timeit_signature_and_functools_wraps():
    sig = inspect.signature(timeit)
    assert list(sig.parameters) == ["name", "profiler", "track_memory", "track_vram", "sync_cuda"]
    assert [sig.parameters[k].default for k in sig.parameters] == [None, None, True, False, False]
    p = HierarchicalProfiler("R")

    @timeit(profiler=p, track_memory=False)
    def work(a, b=2):
        """Adds."""
        return a + b

    assert work(1, b=3) == 4
    assert work.__name__ == "work" and work.__doc__ == "Adds."
    assert work.__wrapped__.__name__ == "work"
    assert inspect.signature(work) == inspect.signature(work.__wrapped__)
    assert p.root.children["work"].calls == 1


def test_timeit_works_on_methods_and_records_into_module_profiler():
    prof_mod.profiler.reset()

    class Model:
        def __init__(self):
            self.k = 3

        @timeit(name="Model.forward", track_memory=False)
        def forward(self, x):
            return self.k * x

    m = Model()
    assert m.forward(2) == 6 and m.forward(3) == 9
    assert prof_mod.profiler.root.children["Model.forward"].calls == 2
    prof_mod.profiler.reset()


def test_timeit_on_a_coroutine_function_times_the_awaited_body():
    import asyncio
    p = HierarchicalProfiler("R", track_ram=False)

    @timeit(profiler=p)
    async def fetch():
        await asyncio.sleep(0.02)
        return "ok"

    assert inspect.iscoroutinefunction(fetch)
    assert asyncio.run(fetch()) == "ok"
    assert p.root.children["fetch"].total_wall_time >= 0.015


def test_exception_in_decorated_function_propagates_unchanged():
    p = HierarchicalProfiler("R", track_ram=False)
    err = KeyError("k")

    @p.timeit()
    def bad():
        raise err

    with pytest.raises(KeyError) as info:
        bad()
    assert info.value is err and p.stack == [p.root]
    assert p.root.children["bad"].calls == 1


def test_module_profiler_is_a_hierarchical_profiler():
    assert isinstance(prof_mod.profiler, HierarchicalProfiler)
    assert prof_mod.profiler.root_name == "Root"


def test_subclass_of_profiler_keeps_working():
    class Mine(HierarchicalProfiler):
        def extra(self):
            return len(self.stack)

    p = Mine("M", track_ram=False)
    with p("a"):
        assert p.extra() == 2
    assert p.root.children["a"].calls == 1
    assert functools.reduce(lambda acc, n: acc + n.calls, p.root.children.values(), 0) == 1


def test_timer_keywords_and_a_subclass_of_timer():
    p = HierarchicalProfiler("R")
    t = Timer(name="kw", profiler=p, track_memory=False, track_vram=False, sync_cuda=False,
              device_id=0)
    with t:
        pass
    assert p.root.children["kw"].calls == 1

    class Mine(Timer):     # no vectorcall constructor: comes through tp_new
        pass

    m = Mine("sub", p, False)
    with m:
        pass
    assert isinstance(m, Timer) and m.track_memory is False
    assert p.root.children["sub"].calls == 1
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        Mine("sub", nope=1)
    with pytest.raises(TypeError, match="missing required argument 'name'"):
        Timer(profiler=p)


def test_cuda_ordinal_in_the_device_label_is_the_device_id():
    assert HierarchicalProfiler("R", device="cuda:1").device_id == 1
    assert HierarchicalProfiler("R", device="cuda:1", device_id=0).device_id == 0
    with pytest.raises(ValueError, match=r"HierarchicalProfiler\(\): device_id"):
        HierarchicalProfiler(device_id=99)


def test_bad_targets_of_the_decorator_and_the_trace_export_are_type_errors(tmp_path):
    import os

    from spatialhub.utils.profiling import HierarchicalProfiler, timeit

    with pytest.raises(TypeError, match=r"timeit\(\): the decorated object must be callable, not int"):
        timeit()(3)
    prof = HierarchicalProfiler("r", track_ram=False)
    with pytest.raises(TypeError, match=r"path must be a str or os.PathLike, not int"):
        prof.export_chrome_trace(1)
    fd = os.open(tmp_path / "keep", os.O_WRONLY | os.O_CREAT)
    try:
        with pytest.raises(TypeError):
            prof.export_chrome_trace(fd)
        os.fstat(fd)   # still open: nothing was written into it or closed
    finally:
        os.close(fd)
