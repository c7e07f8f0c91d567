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
