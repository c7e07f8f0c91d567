"""Calls whose result is work still to do (issue 33): an async function is awaited,
each timed call run to completion on one event loop kept for the run, everywhere a
callable is taken; a generator is refused, since timing its creation times nothing.
Durations here are lower bounds (a 2 ms sleep cannot take less), never speed claims."""
import asyncio
import functools
import gc
import subprocess
import sys
import textwrap
import warnings

import pytest

from spatialhub.utils.profiling import (benchmark_callable, benchmark_repeated,
                                        compare_callables, sweep)

import _fresh

QUIET = dict(track_ram=False, progress=False)


async def sleep_ms(ms=2.0):
    await asyncio.sleep(ms / 1e3)
    return ms


async def add(a, b):
    return a + b


class AsyncCall:
    async def __call__(self):
        await asyncio.sleep(0.002)


def numbers(n=100_000):
    yield from range(n)


async def agen():
    yield 1


@pytest.fixture(autouse=True)
def no_unawaited_coroutine():
    """A coroutine left unawaited would say so when collected: none may be."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        yield
        gc.collect()


@pytest.mark.filterwarnings("ignore::spatialhub.utils.profiling.BenchmarkWarning")
def test_an_async_sleep_is_timed_to_its_end_not_its_creation():
    s = benchmark_callable(sleep_ms, 2.0, num_warmup=2, num_iters=20, **QUIET)
    # creating the coroutine took ~0.002 ms; the sleep itself cannot take less than 2 ms
    assert s.min_ms >= 2.0 and s.median_ms < 50.0
    assert s.loop_overhead_ms is not None and 0 < s.loop_overhead_ms < 1.0
    assert benchmark_callable(sorted, [2, 1], num_iters=5, **QUIET).loop_overhead_ms is None


@pytest.mark.filterwarnings("ignore::spatialhub.utils.profiling.BenchmarkWarning")
@pytest.mark.parametrize("make", [
    lambda: functools.partial(sleep_ms, 2.0),
    lambda: (lambda: sleep_ms(2.0)),            # found at its first call
    lambda: type("Server", (), {"__call__": lambda self: sleep_ms(2.0)})(),
    lambda: AsyncCall(),
], ids=["partial", "lambda", "returns-awaitable", "async-__call__"])
@pytest.mark.parametrize("num_warmup", [0, 2])
def test_every_kind_of_async_callable_is_awaited(make, num_warmup):
    s = benchmark_callable(make(), num_warmup=num_warmup, num_iters=8, **QUIET)
    assert s.timed_iters == 8 and s.min_ms >= 2.0


@pytest.mark.parametrize("func", [numbers, lambda: numbers(), functools.partial(numbers, 10),
                                  agen], ids=["function", "lambda", "partial", "async-gen"])
def test_a_generator_is_refused_with_the_fix_named(func):
    with pytest.raises(TypeError, match=r"returned (a|an async) generator.*"
                                        r"benchmark_callable\(lambda: list\(gen\(\)\)\)"):
        benchmark_callable(func, num_iters=5, **QUIET)


def test_a_coroutine_object_is_refused_and_closed():
    coro = sleep_ms()
    with pytest.raises(TypeError, match=r"func is a coroutine object.*pass the function itself"):
        benchmark_callable(coro, num_iters=5, **QUIET)
    assert coro.cr_frame is None   # closed: no "never awaited" when it is collected


def test_the_users_exception_in_an_awaited_call_propagates_with_its_note():
    async def fail():
        raise LookupError("nope")

    with pytest.raises(LookupError, match="nope") as info:
        benchmark_callable(fail, num_iters=3, **QUIET)
    assert any("warm-up iteration 1" in n for n in info.value.__notes__)


def test_inside_a_running_loop_the_error_says_how_to_benchmark_from_there():
    async def main():
        with pytest.raises(RuntimeError, match=r"asyncio.to_thread\(benchmark_callable, f\)"):
            benchmark_callable(add, 1, 2, num_iters=3, **QUIET)
        s = await asyncio.to_thread(benchmark_callable, add, 1, 2, num_iters=3, **QUIET)
        return s.timed_iters
    assert asyncio.run(main()) == 3


@pytest.mark.filterwarnings("ignore::spatialhub.utils.profiling.BenchmarkWarning")
def test_async_functions_in_the_comparison_the_sweep_and_fresh_processes():
    c = compare_callables(functools.partial(sleep_ms, 2.0), functools.partial(sleep_ms, 2.0),
                          rounds=3, block_iters=3)
    assert c.baseline_runs == 3
    sw = sweep(lambda ms: (sleep_ms, (ms,)), [2.0, 4.0], param="ms", num_warmup=1,
               num_iters=4, **QUIET)
    assert [r.min_ms >= ms for r, ms in zip(sw, (2.0, 4.0))] == [True, True]
    s = benchmark_repeated(_fresh.sleep_async, 2.0, repeat=2, num_warmup=1, num_iters=4,
                           track_ram=False)
    assert s.run_sizes == (4, 4) and s.min_ms >= 2.0


def test_the_fixture_awaits_and_returns_the_awaited_value(tmp_path):
    (tmp_path / "test_subject.py").write_text(textwrap.dedent("""
        import asyncio, functools

        async def sleep_ms(ms):
            await asyncio.sleep(ms / 1e3)
            return ms

        def test_call(benchmark):
            assert benchmark(sleep_ms, 2.0) == 2.0
            assert benchmark.stats.native.min_ms >= 2.0
            assert benchmark.stats.native.loop_overhead_ms > 0

        def test_pedantic(benchmark):
            r = benchmark.pedantic(sleep_ms, args=(2.0,), rounds=3, iterations=2)
            assert r == 2.0 and benchmark.stats.native.min_ms >= 2.0

        def test_generator_refused(benchmark):
            import pytest
            with pytest.raises(TypeError, match="generator"):
                benchmark(lambda: (i for i in range(3)))
    """))
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "-p", "no:benchmark", "-W", "error::RuntimeWarning",
                        "--benchmark-max-time=0.05", "--benchmark-reference=off"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
