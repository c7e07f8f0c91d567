"""Test support for the CUDA layer: the fake driver and a subprocess runner.

tests/conftest.py pulls these in with ``from cuda_support import *``.

The fake driver (tests/fake_cuda/fake_cuda.c) is compiled once per session
with the system C compiler.  Every CUDA scenario runs in a fresh Python
process with SPATIALHUB_LIBCUDA pointing at it, because the profiling module
loads the driver once per process (and the fake keeps process-wide state).
"""
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

__all__ = ["fake_cuda_lib", "fake_nvml_libs", "run_with_fake_cuda", "FAKE_CUDA_PRELUDE"]

_HERE = Path(__file__).resolve().parent
_FAKE_SRC = _HERE / "fake_cuda" / "fake_cuda.c"
_FAKE_NVML_SRC = _HERE / "fake_nvml" / "fake_nvml.c"
# The children import the same spatialhub the tests import: the installed
# package in CI, a build in src/ during development, the sanitized tree under
# .ci/sanitize.sh.
import spatialhub.utils.profiling as _pkg  # noqa: E402

# spatialhub is a namespace package (no __file__): up from .../spatialhub/utils/profiling/
_PKG_ROOT = Path(_pkg.__file__).resolve().parents[3]

# Put in front of every snippet: ctypes access to the same copy of the fake
# the module loads (dlopen of one path yields one library), without loading
# it before the snippet asks.
FAKE_CUDA_PRELUDE = textwrap.dedent(
    """
    import ctypes, os, sys, threading, time

    _fake = None

    def fake():
        global _fake
        if _fake is None:
            lib = ctypes.CDLL(os.environ["SPATIALHUB_LIBCUDA"])
            lib.fake_count.restype = ctypes.c_longlong
            lib.fake_count.argtypes = [ctypes.c_char_p]
            lib.fake_enqueue_ns.argtypes = [ctypes.c_longlong]
            lib.fake_enqueue_device_ns.argtypes = [ctypes.c_int, ctypes.c_longlong]
            lib.fake_alloc.argtypes = [ctypes.c_size_t]
            lib.fake_free.argtypes = [ctypes.c_size_t]
            lib.fake_used_bytes.restype = ctypes.c_longlong
            lib.fake_set_mode.argtypes = [ctypes.c_char_p]
            _fake = lib
        return _fake

    def count(name):
        return fake().fake_count(name.encode())

    def make_current(device=0):
        # What PyTorch does on first use: retain the primary context and
        # make it current on this thread.
        ctx = ctypes.c_void_p()
        assert fake().cuInit(0) == 0
        assert fake().cuDevicePrimaryCtxRetain(ctypes.byref(ctx), device) == 0
        assert fake().cuCtxPushCurrent_v2(ctx) == 0
        return ctx

    def driver_mapped():
        with open("/proc/self/maps") as f:
            return os.environ["SPATIALHUB_LIBCUDA"] in f.read()

    MiB = 1 << 20

    class GilProbe:
        # A Python thread that notes the time every millisecond while it gets to run:
        # stamps inside a wait of the harness prove that the wait released the GIL.
        # `with GilProbe() as probe:` starts it (and lets it settle 20 ms).

        def __init__(self):
            self.stamps, self._stop = [], threading.Event()
            self._thread = threading.Thread(target=self._spin)

        def _spin(self):
            last = 0.0
            while not self._stop.is_set():
                now = time.perf_counter()
                if now - last >= 0.001:
                    self.stamps.append(now)
                    last = now

        def __enter__(self):
            self._thread.start()
            time.sleep(0.02)
            return self

        def __exit__(self, *exc):
            self._stop.set()
            self._thread.join()

        def inside(self, a, b, margin=0.0):
            # how many stamps fell in (a + margin, b - margin)
            return sum(1 for x in self.stamps if a + margin < x < b - margin)

    def said(w):
        # a recorded BenchmarkWarning as one str: its class, text and the numbers it
        # carries as attributes (the text itself is fixed per cause)
        m = w.message
        extra = sorted((k, v) for k, v in vars(m).items() if k not in ("stats", "causes"))
        return f"{w.category.__name__}: {m} | " + " ".join(f"{k}={v}" for k, v in extra)
    """
)


def build_test_library(src, tmp_path_factory, name, what, libs=()):
    """Compile the test-only C file `src` into a shared library; its path.

    Skips off Linux (the libraries are loaded with dlopen / LD_PRELOAD) and
    without a C compiler; `what` names the library in those messages."""
    if not sys.platform.startswith("linux"):
        pytest.skip(f"{what} is built and loaded on Linux only")
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip(f"no C compiler to build {what}")
    out = tmp_path_factory.mktemp(Path(name).stem) / name
    cmd = [cc, "-shared", "-fPIC", "-O1", "-pthread", str(src), "-o", str(out), *libs]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"building {what} failed:\n{done.stderr}")
    return str(out)


@pytest.fixture(scope="session")
def fake_cuda_lib(tmp_path_factory):
    """Path of the compiled fake libcuda (skips when no C compiler)."""
    return build_test_library(_FAKE_SRC, tmp_path_factory, "libfakecuda.so",
                              "the fake CUDA driver")


@pytest.fixture(scope="session")
def fake_nvml_libs(tmp_path_factory):
    """Paths of the fake NVML builds: "full" (current entry points), "old"
    (pre-r535 names, the first process-list ABI) and "minimal" (init and
    handles only)."""
    return {
        kind: build_test_library(_FAKE_NVML_SRC, tmp_path_factory, f"libfakenvml_{kind}.so",
                                 "the fake NVML", libs=flags)
        for kind, flags in [("full", ()), ("old", ("-DFAKE_NVML_OLD",)),
                            ("minimal", ("-DFAKE_NVML_MINIMAL",))]
    }


def run_with_fake_cuda(lib, code, *, env=None, timeout=120):
    """Run `code` in a fresh interpreter with SPATIALHUB_LIBCUDA=lib.

    `env` adds or overrides variables (FAKE_CUDA_MODE, FAKE_CUDA_DEVICES,
    or SPATIALHUB_LIBCUDA itself to point elsewhere).  The snippet runs after
    FAKE_CUDA_PRELUDE.  Returns stdout; raises AssertionError carrying stderr
    when the process fails.
    """
    full_env = dict(os.environ)
    for k in [k for k in full_env if k.startswith(("FAKE_CUDA_", "FAKE_NVML_"))]:
        del full_env[k]
    full_env.pop("SPATIALHUB_LIBNVML", None)
    full_env["SPATIALHUB_LIBCUDA"] = lib
    # The source tree, in case the extension was built in place.
    full_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(_PKG_ROOT), full_env.get("PYTHONPATH", "")) if p
    )
    if env:
        full_env.update(env)
    script = FAKE_CUDA_PRELUDE + "\n" + textwrap.dedent(code)
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True, text=True, env=full_env, timeout=timeout,
    )
    if done.returncode != 0:
        raise AssertionError(
            f"subprocess failed (rc={done.returncode})\n"
            f"--- stdout ---\n{done.stdout}\n--- stderr ---\n{done.stderr}"
        )
    return done.stdout
