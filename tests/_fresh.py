"""Callables for the fresh-interpreter tests (test_repeated.py), importable by name in the
child; this module imports nothing of pytest, so a child that has pytest loaded was forked."""
import gc
import json
import os
import sys


def record(path, arr=None, label=None):
    """Append what the calling process looks like to the JSON-lines file `path`."""
    from spatialhub.utils.profiling import _native

    row = {"pid": os.getpid(), "ppid": os.getppid(), "label": label,
           "pytest_loaded": "_pytest" in sys.modules, "gc": list(gc.get_threshold()),
           "gc_enabled": gc.isenabled(), "switch": sys.getswitchinterval(),
           "mmap_threshold": _native._malloc_mmap_threshold()}
    if hasattr(os, "sched_getaffinity"):
        row["affinity"] = sorted(os.sched_getaffinity(0))
    if arr is not None:
        row["arr"] = {"strides": list(arr.strides), "shape": list(arr.shape),
                      "c_contiguous": bool(arr.flags.c_contiguous),
                      "writeable": bool(arr.flags.writeable),
                      "align64": arr.__array_interface__["data"][0] % 64,
                      "sum": float(arr.sum())}
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")


def fail(kind):
    if kind == "key":
        raise KeyError("the user's own")
    if kind == "exit":
        os._exit(7)


def slow(path):
    """Record the pid, then take a while (for Ctrl-C)."""
    import time

    with open(path, "a", encoding="utf-8") as f:
        f.write(f"{os.getpid()}\n")
    time.sleep(0.05)


# ---- round 4 (tests/test_reliability_round4_launch.py): what crosses, as the child sees it

def _dtype_row(dt):
    import numpy as np

    return {"str": str(dt), "descr": repr(dt.descr), "names": list(dt.names or ()),
            # an empty mapping is no metadata: NumPy 1.x unpickles a datetime64 dtype
            # with {} where the original had None
            "metadata": dict(dt.metadata) if dt.metadata else None,
            "aligned_struct": bool(dt.isalignedstruct),
            "subarray": repr(dt.subdtype), "byteorder": dt.byteorder,
            "datetime_unit": np.datetime_data(dt)[0] if dt.kind in "mM" else None}


def describe(path, *arrays):
    """Append how the calling process holds each array to the JSON-lines file `path`."""
    rows = []
    for a in arrays:
        rows.append({"type": type(a).__name__, "dtype": _dtype_row(a.dtype),
                     "shape": list(a.shape), "strides": list(a.strides),
                     "c_contiguous": bool(a.flags.c_contiguous),
                     "f_contiguous": bool(a.flags.f_contiguous),
                     "writeable": bool(a.flags.writeable),
                     "values": repr(a.tolist())})
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(rows) + "\n")


class SlowPathWarning(UserWarning):
    """A user's own warning class, with an attribute."""


def warn_every_call():
    import warnings

    w = SlowPathWarning("took the slow path")
    w.path_taken = "slow"
    warnings.warn(w)


def warn_from(module):
    """Warn with a class of `module`, which only the calling process imports."""
    import importlib

    importlib.import_module(module).warn()


class Strict(Exception):
    """An exception whose __init__ takes a keyword-only argument: plain pickle cannot
    rebuild it (it calls Strict(*args))."""

    def __init__(self, message, *, code):
        super().__init__(message)
        self.code = code


def raise_strict():
    exc = Strict("refused", code=42)
    exc.__notes__ = ["the user's own note"]   # what add_note (3.11+) makes
    raise exc


def record_words(path):
    """Write the remedy words in effect in this (fresh) process to path, once."""
    if not os.path.exists(path):
        from spatialhub.utils.profiling import _words
        with open(path, "w") as f:
            json.dump(list(_words.current()), f)


async def sleep_async(ms):
    """An async function of an importable module, for fresh processes."""
    import asyncio
    await asyncio.sleep(ms / 1e3)
