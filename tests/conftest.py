"""Shared fixtures.  The fake CUDA driver's helpers live in cuda_support.py."""
import gc
import sys

import pytest

sys.path.insert(0, __import__("os").path.dirname(__file__))
# A developer's own calibration (calibrate.py) must not change what the tests see: the
# package, and every process the tests start, read this empty cache directory instead.
__import__("os").environ["SPATIALHUB_CACHE_DIR"] = __import__("tempfile").mkdtemp(
    prefix="spatialhub-test-cache-")
from cuda_support import *  # noqa: E402,F401,F403  (fixtures: fake driver, subprocess runner)

import spatialhub.utils.profiling as prof  # noqa: E402
from spatialhub.utils.profiling import _native  # noqa: E402


@pytest.fixture
def native():
    return _native


@pytest.fixture(scope="session")
def released():
    """The released spatialhub 0.1.7's profiling.py, loaded under its own name beside ours,
    from its wheel unpacked where SPATIALHUB_RELEASED_DIR points (default /tmp/rel/whl: `pip
    download --no-deps spatialhub==0.1.7` and unzip it there; CI does)."""
    import importlib.util
    import os
    from pathlib import Path

    root = Path(os.environ.get("SPATIALHUB_RELEASED_DIR", "/tmp/rel/whl"))
    path = root / "spatialhub" / "utils" / "profiling.py"
    if not path.is_file():
        pytest.skip("the released spatialhub 0.1.7 is not unpacked here")
    spec = importlib.util.spec_from_file_location("released_profiling", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["released_profiling"] = mod   # its dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def make_stats():
    """A BenchmarkStats with the seed's 13 fields, overridable by keyword."""

    def make(**kw):
        base = dict(
            name="Model", device="CPU", mean_ms=1.5, median_ms=1.25, std_ms=0.5,
            p95_ms=2.5, min_ms=1.0, max_ms=3.0, fps=666.6667, warmup_iters=10,
            timed_iters=50,
        )
        base.update(kw)
        return prof.BenchmarkStats(**base)

    return make


@pytest.fixture
def gc_state():
    """Restore the collector whatever a test does to it."""
    was = gc.isenabled()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()
