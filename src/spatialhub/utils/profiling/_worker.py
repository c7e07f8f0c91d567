"""The fresh interpreter of a repetition (benchmark_repeated, compare_repeated, --processes).

Started by _launch.py as ``python -c "...; from spatialhub.utils.profiling._worker import
main; main(FD)"`` -- never by re-running the parent's ``__main__``, so a script that calls
benchmark_repeated without the ``if __name__ == "__main__":`` guard is not re-run unless
the function itself lives in it -- it reads one job from stdin, puts itself in the
parent's state, runs ``benchmark_callable`` once and writes the result to file
descriptor FD (stdout on Windows, whose own stdout then goes to stderr).

The job on stdin: an 8-byte little-endian length and a pickled header (plain data: the
parent's ``sys.path``, where its ``__main__`` came from, its interpreter state), then
the payload's pickle stream (``func, args, kwargs``, protocol 5), then the out-of-band
buffers the stream refers to (NumPy arrays' data), each read straight into memory that
NumPy allocated and that sits at the same address modulo 64 as in the parent.

The parent's state, applied before the call (docs/statistics.md, "Repetitions"):
``sys.path``; CPU affinity; the collector's thresholds and whether it runs; the GIL's
switch interval; torch's intra- and inter-op thread counts and threadpoolctl's BLAS /
OpenMP limits where the parent had those modules loaded; and glibc's effective mmap
threshold, raised to the parent's (csrc/platform/mallocstate.c).  SIGINT is ignored: the parent
owns Ctrl-C and ends its children itself.
"""
import gc
import io
import mmap
import os
import pickle
import signal
import struct
import sys
import traceback
import warnings

# The header's first 8 bytes: its length.
_LEN = struct.Struct("<Q")
_ALIGN = 64   # buffers keep their address modulo this (a cache line, an AVX-512 vector)


# The script this fresh process is loading to find the function (_load_main), or None:
# a benchmark_repeated call made meanwhile is that script's unguarded top level.
_LOADING_MAIN = None


class MainGuardError(RuntimeError):
    """The script that defines the function calls benchmark_repeated at its top level."""


def _read_exact(f, view):
    got = 0
    n = len(view)
    while got < n:
        k = f.readinto(view[got:])
        if not k:
            raise EOFError(f"the job ended after {got} of {n} bytes")
        got += k


def _read_bytes(f, n):
    """n bytes from f; large ones in an anonymous mapping, not malloc: freeing a large
    malloc block would raise this interpreter's mmap threshold on its own."""
    if n < 65536:
        buf = bytearray(n)
        _read_exact(f, memoryview(buf))
        return buf, None
    m = mmap.mmap(-1, n)
    _read_exact(f, memoryview(m))
    return memoryview(m), m


def _read_buffers(f, specs):
    if not specs:
        return []
    import numpy as np

    out = []
    for size, align, readonly in specs:
        raw = np.empty(size + _ALIGN, dtype=np.uint8)
        start = (align - raw.__array_interface__["data"][0]) % _ALIGN
        view = raw[start:start + size]
        _read_exact(f, memoryview(view))
        if readonly:
            view.flags.writeable = False
        out.append(view)
    return out


def refuse_reentry(fn):
    """MainGuardError when called while this process loads its parent's script (runner.py
    calls it first thing in benchmark_repeated and compare_repeated)."""
    if _LOADING_MAIN is not None:
        raise MainGuardError(f"{fn}() called while a fresh process loads {_LOADING_MAIN}")


def _load_main(main):
    """Load the parent's __main__ as __mp_main__ (as multiprocessing's spawn does), so
    that the payload's references to __main__ resolve; its guarded code does not run."""
    import importlib
    import importlib.util
    import types

    global _LOADING_MAIN
    kind, where = main
    _LOADING_MAIN = where
    try:
        if kind == "name":   # python -m pkg.mod
            module = importlib.import_module(where)
        else:
            spec = importlib.util.spec_from_file_location("__mp_main__", where)
            module = importlib.util.module_from_spec(spec)
            sys.modules["__mp_main__"] = module
            spec.loader.exec_module(module)
    finally:
        _LOADING_MAIN = None
    if not isinstance(module, types.ModuleType):
        raise ImportError(f"cannot load {where}")
    sys.modules["__main__"] = sys.modules["__mp_main__"] = module


def _apply_early(state):
    """What must hold before the payload's modules are imported."""
    affinity = state.get("affinity")
    if affinity and hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, affinity)
        except OSError:
            pass   # a CPU the parent had is gone (hotplug, cgroup): keep the inherited set
    enabled, thresholds = state["gc"]
    gc.set_threshold(*thresholds)
    (gc.enable if enabled else gc.disable)()
    sys.setswitchinterval(state["switch_interval"])


def _apply_late(state, record):
    """Thread pools of the modules the payload loaded, then the allocator, last."""
    torch = sys.modules.get("torch")
    threads = state.get("torch_threads")
    if torch is not None and threads is not None:
        intra, inter = threads
        torch.set_num_threads(intra)
        try:
            torch.set_num_interop_threads(inter)
        except RuntimeError:   # only possible before torch's first parallel work
            pass
        record["torch_threads"] = [torch.get_num_threads(), torch.get_num_interop_threads()]
    limits = state.get("blas_threads")
    if limits:
        try:
            import threadpoolctl
        except ImportError:
            pass
        else:
            # kept for the life of this process, which ends after the one run
            record["blas_limiter"] = threadpoolctl.threadpool_limits(limits=limits)
            record["blas_threads"] = limits
    from . import _native

    parent = state.get("mmap_threshold")
    before = _native._malloc_mmap_threshold()
    after = before
    if parent is not None and before is not None and parent > before:
        after = _native._malloc_raise_mmap_threshold(parent)
    record["mmap_threshold"] = {"parent": parent, "child_before": before, "child": after}


# A report's bounds: a child that fails before it has read the job writes its report
# while the parent may still be writing the job (the parent reads as it writes, and a
# bounded report keeps the failure a few lines, however long its message).
_MAX_TEXT = 32 * 1024          # characters of a traceback
_MAX_MESSAGE = 4 * 1024        # characters of an exception's str()
_MAX_LOAD_BLOB = 64 * 1024     # bytes of a load failure's pickled exception


def _bounded(text, limit):
    """text, or its head and tail around a mark saying how much was cut."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[{len(text) - 2 * half:,} characters cut]\n{text[-half:]}"


class _Rebuilt:
    """Pickles an exception as its class, args and attributes, rebuilt without calling
    its __init__: plain pickle calls ``type(exc)(*exc.args)``, which a class whose
    __init__ takes other arguments (keyword-only, computed messages) refuses."""

    def __init__(self, exc):
        self.exc = exc

    def __reduce__(self):
        exc = self.exc
        return (_new_exception, (type(exc), exc.args, dict(vars(exc))))


def _new_exception(cls, args, attrs):
    exc = cls.__new__(cls, *args)
    exc.args = args
    for key, value in attrs.items():   # __notes__ and what its __init__ set
        setattr(exc, key, value)
    return exc


def _exception_blob(exc):
    """exc pickled so that it loads (as itself, or rebuilt from its parts), or None."""
    for obj in (exc, _Rebuilt(exc)):
        try:
            blob = pickle.dumps(obj)
            pickle.loads(blob)
        except Exception:   # noqa: BLE001 - any failure: the next way, then the text only
            continue
        return blob
    return None


def _describe(exc, load=False):
    """An exception as the parent can rebuild it: (pickled or None, type name, text,
    traceback), the texts bounded; load: a failure to load the job, whose pickled
    exception is bounded too (the user's own exception is sent whole)."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    try:
        message = str(exc)
    except Exception:   # noqa: BLE001 - a __str__ that fails: the traceback says the rest
        message = f"<{type(exc).__name__}: str() failed>"
    blob = _exception_blob(exc)
    if load and blob is not None and len(blob) > _MAX_LOAD_BLOB:
        blob = None
    return (blob, f"{type(exc).__module__}.{type(exc).__qualname__}",
            _bounded(message, _MAX_MESSAGE), _bounded(text, _MAX_TEXT))


def _warning_record(w, stats):
    """A caught warning as the parent rebuilds it (_launch.relay_warnings): its class's
    path, its text, its causes (ours: the tuple of labels that names the class), its
    other attributes pickled one by one (one that does not pickle stays here), and the
    names of those that are this run's result (sent once, with the reply)."""
    from ._native import BenchmarkWarning

    m = w.message
    cat = w.category
    try:
        text = str(m)
    except Exception:   # noqa: BLE001
        text = f"<{cat.__name__}: str() failed>"
    causes = getattr(m, "causes", None) if isinstance(m, BenchmarkWarning) else None
    if not (isinstance(causes, tuple) and causes and all(type(c) is str for c in causes)):
        causes = None
    attrs, result_keys = {}, []
    for key, value in list(vars(m).items()) if isinstance(m, BaseException) else ():
        if key == "causes" and causes is not None:
            continue
        if value is stats:
            result_keys.append(key)
            continue
        try:
            attrs[key] = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:   # noqa: BLE001
            pass
    return (f"{cat.__module__}.{cat.__qualname__}", text, causes, attrs, tuple(result_keys))


def _send(out, reply):
    data = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(_LEN.pack(len(data)))
    out.write(data)
    out.flush()


def _run(stdin, header, record):
    sys.path[:] = header["sys_path"]
    state = header["state"]
    _apply_early(state)
    if header["main"] is not None:
        try:
            _load_main(header["main"])
        except MainGuardError:
            return ("main_guard", header["main"][1])
        except BaseException as exc:   # noqa: BLE001 - reported to the parent
            return ("load_error",) + _describe(exc, load=True)
    stream, mapping = _read_bytes(stdin, header["stream_len"])
    buffers = _read_buffers(stdin, header["buffers"])
    try:
        func, args, kwargs = pickle.loads(stream, buffers=buffers)
    except BaseException as exc:   # noqa: BLE001
        return ("load_error",) + _describe(exc, load=True)
    finally:
        del stream
        if mapping is not None:
            mapping.close()
    _apply_late(state, record)
    from ._native import benchmark_callable
    from ._words import CALLABLE, remedy_words

    # the remedies in the words of the interface the parent's user called (the CLI's
    # --warmup under --processes, not num_warmup)
    with warnings.catch_warnings(record=True) as caught, \
            remedy_words(header.get("words", CALLABLE)):
        warnings.simplefilter("always")
        try:
            stats = benchmark_callable(func, *args, **kwargs)
        except BaseException as exc:   # noqa: BLE001 - the user's exception, to the parent
            return ("error",) + _describe(exc)
    env = dict(stats.env or {})
    env["worker"] = {k: v for k, v in record.items() if k != "blas_limiter"}
    stats.env = env
    relayed, seen = [], set()
    for w in caught:   # a warning said every call: once
        said = _warning_record(w, stats)
        if said[:3] not in seen:
            seen.add(said[:3])
            relayed.append(said)
    return ("ok", stats, relayed)


def main(fd=None):
    """The child's entry point; fd: the descriptor to write the result to (None: stdout)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if fd is None:   # Windows: the result takes stdout; the user's prints go to stderr
        fd = os.dup(1)
        os.dup2(2, 1)
    out = io.FileIO(fd, "wb", closefd=True)
    stdin = io.FileIO(0, "rb", closefd=False)
    head = bytearray(_LEN.size)
    _read_exact(stdin, memoryview(head))
    raw = bytearray(_LEN.unpack(head)[0])
    _read_exact(stdin, memoryview(raw))
    header = pickle.loads(raw)
    record = {}
    try:
        reply = _run(stdin, header, record)
    except BaseException as exc:   # noqa: BLE001 - a failure of ours: report it, never hang
        reply = ("load_error",) + _describe(exc, load=True)
    try:
        _send(out, reply)
    except Exception as exc:   # noqa: BLE001 - e.g. a result that does not pickle
        _send(out, ("error",) + _describe(exc))
    out.close()
