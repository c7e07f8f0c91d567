"""Benchmarks in a test suite, written for pytest-benchmark's fixture.

Runs with spatialhub's plugin (pip install spatialhub-profiling; pytest-benchmark not installed,
or switched off with ``-p no:benchmark``):

    pytest docs/examples/test_benchmarks_example.py --benchmark-json=bench.json
    pytest docs/examples/test_benchmarks_example.py --benchmark-save=base
    # ... change the code ...
    pytest docs/examples/test_benchmarks_example.py --benchmark-compare \
        --benchmark-compare-fail=median:10% --benchmark-markdown=summary.md
"""
import numpy as np
import pytest


def normalise(image):
    return np.clip(image * 1.5, 0.0, 1.0) > 0.6


@pytest.fixture(scope="module")
def image():
    return np.random.default_rng(0).random((1, 3, 120, 160), dtype=np.float32)


def test_normalise(benchmark, image):
    # benchmark(func, *args, **kwargs) times func and returns its result
    mask = benchmark(normalise, image)
    assert mask.shape == image.shape


@pytest.mark.benchmark(group="sort", min_rounds=20)
@pytest.mark.parametrize("n", [1_000, 10_000])
def test_sort(benchmark, n):
    data = np.random.default_rng(n).random(n)
    benchmark.extra_info["n"] = n
    result = benchmark(np.sort, data)
    assert result[0] <= result[-1]


def test_sort_in_place(benchmark):
    # pedantic: a fresh copy per round from setup (not timed), exact rounds
    rng = np.random.default_rng(1)

    def setup():
        return (rng.random(10_000),), {}

    benchmark.pedantic(np.ndarray.sort, setup=setup, rounds=50, warmup_rounds=2)
    assert benchmark.stats.stats.rounds == 50
