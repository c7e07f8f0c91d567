"""Helpers shared by tests/test_reliability_*.py (issue 7).

Kept out of conftest.py on purpose: these are plain functions and context
managers that the reliability tests import by name.
"""
import contextlib
import gc
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import spatialhub.utils.profiling

__all__ = [
    "Hostile", "IndexRaises", "FloatRaises", "BoolRaises", "LenRaises", "Indexable",
    "Floatable", "MyInt", "MyStr", "MyFloat", "MyDict",
    "UNDER_SANITIZER", "UNDER_VALGRIND", "VALGRIND", "VALGRIND_PREFIX", "PKG_ROOT",
    "frozen_gc", "run_python", "valgrind_errors_in_native", "hwm_available",
    "FinalizerStorm", "finalizer_storm", "FINALIZER_STORM_SOURCE",
]


# ---- hostile and odd values ----------------------------------------------


class Hostile(Exception):
    """Raised by the dunder methods of the objects below."""


class IndexRaises:
    def __index__(self):
        raise Hostile("__index__")

    def __repr__(self):
        return "IndexRaises()"


class FloatRaises:
    def __float__(self):
        raise Hostile("__float__")

    def __repr__(self):
        return "FloatRaises()"


class BoolRaises:
    def __bool__(self):
        raise Hostile("__bool__")

    def __repr__(self):
        return "BoolRaises()"


class LenRaises:
    def __len__(self):
        raise Hostile("__len__")

    def __repr__(self):
        return "LenRaises()"


class Indexable:
    """An int by __index__ only (no __float__)."""

    def __init__(self, n):
        self.n = n

    def __index__(self):
        return self.n

    def __repr__(self):
        return f"Indexable({self.n!r})"


class Floatable:
    """A real number by __float__ only."""

    def __init__(self, x):
        self.x = x

    def __float__(self):
        return float(self.x)

    def __repr__(self):
        return f"Floatable({self.x!r})"


class MyInt(int):
    pass


class MyStr(str):
    # A str subclass whose conversions are poisoned: the C code must use the
    # str as it is, never call str() / repr() / format() on it.
    def __str__(self):
        raise Hostile("__str__")

    def __format__(self, spec):
        raise Hostile("__format__")


class MyFloat(float):
    pass


class MyDict(dict):
    pass


# ---- environment ------------------------------------------------------------


def _maps():
    try:
        with open("/proc/self/maps") as f:
            return f.read()
    except OSError:
        return ""


# ASan preloaded (the .ci/sanitize.sh run): RSS figures include the
# allocator's quarantine and shadow memory, so RSS bounds are meaningless.
UNDER_SANITIZER = "libasan" in _maps()
UNDER_VALGRIND = "vgpreload" in _maps()
VALGRIND = shutil.which("valgrind")
# --fullpath-after= prints source paths in full, so our frames read ".../csrc/x.c";
# the suppressions are CI's (.ci/valgrind.sh): the loader's, CPython's and NumPy's own
VALGRIND_PREFIX = [VALGRIND or "valgrind", "--tool=memcheck", "--error-limit=no",
                   "--num-callers=40", "--leak-check=no", "--fullpath-after=",
                   "--suppressions=" + str(Path(__file__).resolve().parent / "sanitizer" /
                                           "valgrind.supp")]

# The sys.path entry the package under test was imported from (src/, a
# sanitized copy, or site-packages): children import the same copy.
# (spatialhub is a namespace package: no __file__; go up from the profiling package.)
PKG_ROOT = str(Path(spatialhub.utils.profiling.__file__).resolve().parents[3])


@contextlib.contextmanager
def frozen_gc():
    """Move everything alive now out of the collector's sight.

    benchmark_callable runs a full collection before every timed loop; in a
    test process with a large heap (hypothesis, numpy, pytest) that costs
    ~15 ms a call.  Freezing the existing heap makes it ~30 us, which is what
    lets the leak tests make 10k calls.
    """
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def run_python(code, *, env=None, timeout=180, args=(), executable=None, prefix=()):
    """Run `code` in a fresh interpreter importing the package under test."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (PKG_ROOT, full_env.get("PYTHONPATH", "")) if p)
    if env:
        full_env.update(env)
    cmd = list(prefix) + [executable or sys.executable, "-c", textwrap.dedent(code)] + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, env=full_env, timeout=timeout)


def valgrind_errors_in_native(code, *, timeout=300):
    """Run `code` under valgrind memcheck (PYTHONMALLOC=malloc).

    Returns (completed_process, records) where records are the memcheck error
    records (invalid reads/writes, uses of uninitialised values, invalid
    frees) that have a frame in the native module.  Errors wholly inside
    CPython, NumPy or the dynamic loader are not ours and are ignored.
    """
    env = {"PYTHONMALLOC": "malloc"}
    done = run_python(code, env=env, timeout=timeout,
                      prefix=VALGRIND_PREFIX)
    return done, native_records(done.stderr)


def native_records(log, kinds=("Invalid read", "Invalid write", "uninitialised",
                                "Invalid free", "Mismatched free", "overlap")):
    """Memcheck error records of `log` that pass through the native module."""
    records, cur = [], []
    for line in log.splitlines():
        body = line.split("== ", 1)[1] if line.startswith("==") and "== " in line else None
        if body is None:
            continue
        if body and not body.startswith(" "):
            if cur:
                records.append(cur)
            cur = [body]
        elif cur:
            cur.append(body)
    if cur:
        records.append(cur)
    ours = []
    for rec in records:
        head = rec[0]
        if not any(k in head for k in kinds):
            continue
        text = "\n".join(rec)
        # our frames: ".../csrc/run/bench.c:123" (debug info) or "(in .../_native...so)"
        if "/csrc/" in text or "_native" in text:
            ours.append(text)
    return ours


def hwm_available():
    """True when the kernel's high-water-mark reset works here."""
    from spatialhub.utils.profiling import _native
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = _native.benchmark_callable(_native._noop, num_warmup=0, num_iters=1)
    return s.ram_peak_method == "hwm"


# ---- the finalizer storm (issue 23) ------------------------------------------------

FINALIZER_STORM_SOURCE = '''
import contextlib as _contextlib
import gc as _gc


class FinalizerStorm:
    """Cyclic garbage whose finalizers call `reenter()`, kept coming: each finalizer makes
    the next piece of garbage, so with the collector's threshold at 1 every allocation of
    a tracked object -- in Python or inside the C code under test -- can run a collection,
    and that collection runs `reenter()` in the middle of whatever allocated.  C code that
    holds a count, an index or a borrowed reference across an allocation then sees the
    profiler, the list, the dict it was reading change under it.

    `fired` counts finalizer runs, `fired_inside` those while `inside` (set by `run`), and
    `errors` what `reenter()` raised (a finalizer's exception would otherwise only reach
    sys.unraisablehook).  `budget` bounds the storm (finalizer runs in all)."""

    def __init__(self, reenter, budget=200):
        self.reenter = reenter
        self.budget = budget
        self.fired = 0
        self.fired_inside = 0
        self.inside = False
        self.errors = []

    def seed(self, n=4):
        was = _gc.isenabled()
        _gc.disable()
        try:
            for _ in range(n):
                _Bomb(self)
        finally:
            if was:
                _gc.enable()

    def run(self, fn, *args, **kwargs):
        """fn(*args, **kwargs) with the storm raging; its result."""
        self.seed()
        self.inside = True
        try:
            return fn(*args, **kwargs)
        finally:
            self.inside = False


class _Bomb:
    def __init__(self, storm):
        self.storm = storm
        self.me = self              # a cycle: only the collector frees it

    def __del__(self):
        storm = self.storm
        if storm.budget <= 0:
            return
        storm.budget -= 1
        storm.fired += 1
        if storm.inside:
            storm.fired_inside += 1
        _Bomb(storm)                # the next collection finds garbage again
        try:
            storm.reenter()
        except Exception as exc:  # noqa: BLE001 -- recorded for the test to judge
            storm.errors.append(exc)


@_contextlib.contextmanager
def finalizer_storm(reenter, budget=200, threshold=1):
    """A FinalizerStorm with the collector on and its threshold at `threshold` (restored
    after): `with finalizer_storm(lambda: api(...)) as storm: storm.run(api, ...)`."""
    was_enabled, was_threshold = _gc.isenabled(), _gc.get_threshold()
    storm = FinalizerStorm(reenter, budget)
    _gc.enable()
    _gc.set_threshold(threshold, 1, 1)
    try:
        yield storm
    finally:
        storm.budget = 0            # what is still garbage dies quietly
        _gc.set_threshold(*was_threshold)
        _gc.collect()
        if not was_enabled:
            _gc.disable()
'''
# The same source runs here and in children (run_python(FINALIZER_STORM_SOURCE + code)),
# where a crash must not take pytest down.
exec(compile(FINALIZER_STORM_SOURCE, __file__ + ":FINALIZER_STORM_SOURCE", "exec"))
