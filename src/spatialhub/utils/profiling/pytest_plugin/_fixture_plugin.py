"""The `benchmark` fixture, registered by the plugin only when it owns the name."""
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
    fx = bs.make_fixture(request.node)
    yield fx
    if not fx._mode and not fx.skipped:
        request.node.warn(pytest.PytestWarning("Benchmark fixture was not used at all in this test!"))
