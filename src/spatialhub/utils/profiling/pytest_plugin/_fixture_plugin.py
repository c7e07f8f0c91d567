"""The ``benchmark`` and ``benchmark_weave`` fixtures, registered by the plugin only when
it owns the names."""
import pytest


def _session(config):
    return getattr(config, "_spatialhub_benchmark", None)


@pytest.fixture
def benchmark(request):
    """pytest-benchmark's fixture on spatialhub's native loop (see the module doc)."""
    bs = _session(request.config)
    if bs is None:   # not reachable when pytest-benchmark owns the name
        pytest.skip("spatialhub's benchmark plugin is inactive")
    if bs.skip:
        pytest.skip("Benchmarks are skipped (--benchmark-skip was used).")
    fx = bs.make_fixture(request)
    yield fx
    fx._cleanup()


@pytest.fixture
def benchmark_weave(benchmark):
    """``benchmark.weave``: time the first call of a function the test makes (aspectlib)."""
    return benchmark.weave
