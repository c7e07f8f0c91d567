"""The parent's side of a repetition in a fresh interpreter (runner.py uses it).

:class:`Job` pickles ``func, args, kwargs`` once, checks before any process starts that
a fresh interpreter can load them, and records the parent's state; :meth:`Job.run` starts
one interpreter (_worker.py), sends it the job and returns its BenchmarkStats.  How a
function is sent:

* a function of an importable module: by module and qualified name (plain pickle);
* one of the script being run (``__main__`` with a file): by value with cloudpickle when
  it is installed, else the child loads the script as ``__mp_main__`` (its guarded code
  does not run; a script whose top level calls benchmark_repeated gets one clear
  RuntimeError, never a loop of processes);
* one of a notebook cell, the REPL or ``python -c`` (no file), a lambda or a local
  function: by value with cloudpickle, else a TypeError before any process starts.

Arguments travel as an in-process run holds them: NumPy arrays' data out of band
(pickle protocol 5), read by the child into NumPy-allocated memory at the same address
modulo 64; a non-contiguous array keeps its strides over the span of memory it covers,
and its dtype whole (pickled: fields, sub-arrays, metadata); one of objects keeps its
strides over its base's elements; read-only stays read-only.

The job is written while the reply is read (a child that fails before it has read the
job is heard, never left blocked on its report), and the children's warnings come back
as instances of the classes an in-process run raises, with their attributes
(:func:`relay_warnings`).
"""
from __future__ import annotations

import gc
import io
import os
import pickle
import pickletools
import subprocess
import sys
import threading
import warnings
from typing import TYPE_CHECKING, Any, Callable, Iterable

from . import _native, _words
from ._gather import user_stacklevel
from ._worker import _ALIGN, _LEN

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
# Windows has no pass_fds and cannot wait on pipes with select: there the result comes
# on the child's stdout and a thread sends the job while this one reads.  (A switch,
# so that the tests run that path on POSIX too.)
_STDOUT_PIPE = os.name != "posix"
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(_PACKAGE_DIR)))   # holds spatialhub/

if TYPE_CHECKING:
    from ._native import BenchmarkStats


def _cloudpickle():
    try:
        import cloudpickle
    except ImportError:
        return None
    return cloudpickle


# ---- arguments as the parent holds them -------------------------------------------

class _Span:
    """The bytes a strided array covers, as a 1-D uint8 array interface."""

    def __init__(self, owner, address, size):
        self._owner = owner
        self.__array_interface__ = {"data": (address, not owner.flags.writeable),
                                    "shape": (size,), "typestr": "|u1", "version": 3}


def _rebuild_strided(span, offset, shape, strides, dtype, writeable):
    import numpy as np

    a = np.ndarray(shape, dtype=dtype, buffer=span, offset=offset, strides=strides)
    if not writeable:
        a.flags.writeable = False
    return a


def _rebuild_object_strided(cover, first, shape, strides, writeable):
    from numpy.lib.stride_tricks import as_strided

    return as_strided(cover[first:], shape=shape, strides=strides, writeable=writeable)


def _object_cover(a, low, high):
    """The elements of a's outermost base between the addresses low and high, as a
    contiguous slice of that base (a's dtype holds objects: no raw bytes to send), or
    None when the base is not one such array."""
    import numpy as np

    b = a
    while isinstance(b.base, np.ndarray):
        b = b.base
    size = a.itemsize
    start = b.__array_interface__["data"][0]
    if (not b.flags.c_contiguous or b.dtype != a.dtype or low < start or
            high > start + b.nbytes or (low - start) % size or (high - low) % size or
            any(s % size for s in a.strides)):
        return None
    return b.reshape(-1)[(low - start) // size:(high - start) // size]


def _strided_reduce(a):
    """A non-contiguous array as the memory it covers (its bytes; for a dtype holding
    objects, its base's elements there), its offset, shape, strides and whole dtype."""
    import numpy as np

    if a.size == 0:
        return NotImplemented
    address = a.__array_interface__["data"][0]
    low = address + sum(min(0, (n - 1) * s) for n, s in zip(a.shape, a.strides))
    high = address + sum(max(0, (n - 1) * s) for n, s in zip(a.shape, a.strides)) + a.itemsize
    if high - low > 64 * a.nbytes:   # a sparse view of a huge array: send its elements
        return NotImplemented
    writeable = bool(a.flags.writeable)
    if a.dtype.hasobject:
        cover = _object_cover(a, low, high)
        if cover is None:
            return NotImplemented
        return (_rebuild_object_strided,
                (cover, (address - low) // a.itemsize, a.shape, a.strides, writeable))
    span = np.asarray(_Span(a, low, high - low))
    # the dtype itself, pickled: its str ("|V12") drops fields, sub-arrays and metadata
    return (_rebuild_strided, (span, address - low, a.shape, a.strides, a.dtype, writeable))


def _override(obj):
    np = sys.modules.get("numpy")
    if (np is not None and type(obj) is np.ndarray and not obj.flags.c_contiguous
            and not obj.flags.f_contiguous):
        return _strided_reduce(obj)
    return NotImplemented


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj):
        return _override(obj)


def _dumps(obj, cloud):
    """Protocol-5 stream and out-of-band buffers of obj (cloud: cloudpickle's pickler)."""
    buffers = []
    out = io.BytesIO()
    if cloud is not None:
        class Pickler(cloud.Pickler):
            def reducer_override(self, obj):
                r = _override(obj)
                return super().reducer_override(obj) if r is NotImplemented else r
        Pickler(out, protocol=5, buffer_callback=buffers.append).dump(obj)
    else:
        _Pickler(out, protocol=5, buffer_callback=buffers.append).dump(obj)
    return out.getvalue(), buffers


def _names_main(stream):
    """Whether a pickle stream refers to anything in __main__."""
    for op, arg, _ in pickletools.genops(stream):
        if op.name in ("GLOBAL", "INST") and str(arg).split(" ", 1)[0] == "__main__":
            return True
        if op.name in ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE") and \
                arg in ("__main__", "__mp_main__"):
            return True
    return False


def _main_origin():
    """How a fresh interpreter can load this process's __main__: ("name", module) for
    ``python -m``, ("file", path) for a script, None for a notebook, the REPL or -c."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and getattr(spec, "name", None) and spec.name != "__main__":
        return ("name", spec.name)
    path = getattr(main, "__file__", None)
    if path and os.path.isfile(path):
        return ("file", os.path.abspath(path))
    return None


def _buffer_specs(buffers):
    import numpy as np

    specs = []
    for pb in buffers:
        raw = pb.raw()
        address = np.frombuffer(raw, dtype=np.uint8).__array_interface__["data"][0] \
            if raw.nbytes else 0
        specs.append((raw.nbytes, address % _ALIGN, raw.readonly))
    return specs


# ---- the parent's state --------------------------------------------------------------

def _parent_state():
    state = {"gc": (gc.isenabled(), gc.get_threshold()),
             "switch_interval": sys.getswitchinterval(),
             "mmap_threshold": _native._malloc_mmap_threshold()}
    if hasattr(os, "sched_getaffinity"):
        state["affinity"] = sorted(os.sched_getaffinity(0))
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "get_num_threads"):
        state["torch_threads"] = (torch.get_num_threads(), torch.get_num_interop_threads())
    tpc = sys.modules.get("threadpoolctl")
    if tpc is not None:
        limits = {}
        for info in tpc.threadpool_info():
            api, n = info.get("user_api"), info.get("num_threads")
            if api and n:
                limits[api] = min(n, limits.get(api, n))
        state["blas_threads"] = limits
    return state


# ---- one job, run in as many fresh interpreters as asked ------------------------------

class Job:
    """func(*args, **kwargs) for benchmark_callable in fresh interpreters."""

    def __init__(self, fn: str, func: Callable[..., Any], args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> None:
        self.fn = fn
        label = getattr(func, "__qualname__", None) or type(func).__name__
        state = _parent_state()   # before our own pickling allocates anything
        cloud, main = None, None
        try:
            stream, buffers = _dumps((func, args, kwargs), None)
            failed = None
        except Exception as exc:   # noqa: BLE001 - PicklingError, AttributeError, TypeError
            failed = exc
        if failed is None and _names_main(stream):
            main = _main_origin()
            if main is None or main[0] == "file":
                cloud = _cloudpickle()   # by value: no script re-run, works in notebooks
                if cloud is not None:
                    main = None
                elif main is None:
                    raise TypeError(
                        f"{fn}(): {label!r} (or an argument) is defined in __main__ of an "
                        f"interactive session (a notebook cell, the REPL, python -c), which "
                        f"a fresh process cannot import: move it into a module and import "
                        f"it, or install cloudpickle to send it by value")
        elif failed is not None:
            cloud = _cloudpickle()
            if cloud is None:
                raise TypeError(
                    f"{fn}(): func and its arguments must be picklable to run in fresh "
                    f"processes (a module-level function, not a lambda or a local "
                    f"function; or install cloudpickle): {failed}") from failed
        if cloud is not None:
            try:
                stream, buffers = _dumps((func, args, kwargs), cloud)
            except Exception as exc:   # noqa: BLE001
                raise TypeError(f"{fn}(): func and its arguments cannot be sent to a fresh "
                                f"process, even with cloudpickle: {exc}") from exc
        self.label = label
        self.stream = stream
        self.buffers = buffers
        self.header = {"sys_path": list(sys.path), "main": main, "state": state,
                       "stream_len": len(stream), "buffers": _buffer_specs(buffers),
                       "words": _words.current()}
        self.by_value = cloud is not None
        # (run, the warning as _worker.py records it, that run's BenchmarkStats)
        self.warnings: list[tuple[int, tuple[Any, ...], Any]] = []

    def _command(self, fd):
        # SIGINT ignored first: the parent owns Ctrl-C and ends its children itself
        boot = (f"import signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                f"sys.path.insert(0, {_ROOT!r}); "
                f"from spatialhub.utils.profiling._worker import main; main({fd!r})")
        return [sys.executable, *subprocess._args_from_interpreter_flags(), "-c", boot]

    def run(self, k: int, of: int) -> BenchmarkStats:
        """The k-th (1-based) of `of` runs: a BenchmarkStats, or the child's exception."""
        if _STDOUT_PIPE:
            proc = subprocess.Popen(self._command(None), stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE)
            reader = proc.stdout
        else:
            rfd, wfd = os.pipe()
            try:
                proc = subprocess.Popen(self._command(wfd), stdin=subprocess.PIPE,
                                        pass_fds=(wfd,), close_fds=True)
            except BaseException:
                os.close(rfd)
                raise
            finally:
                os.close(wfd)
            reader = io.FileIO(rfd, "rb", closefd=True)
        writer = None
        try:
            if _STDOUT_PIPE:   # the job from a thread while this one reads the reply
                writer = threading.Thread(target=self._send, args=(proc.stdin,),
                                          name="spatialhub-job-writer", daemon=True)
                writer.start()
                reply = self._receive(reader)
            else:
                reply = self._exchange(proc.stdin, reader)
            proc.wait()
        except BaseException:
            _end(proc)
            raise
        finally:
            if writer is not None:   # the child has exited or been ended: the write is over
                writer.join()
            reader.close()
        return self._result(reply, proc.returncode, k, of)

    def _chunks(self):
        """The job as the child reads it: header length, header, stream, buffers."""
        header = pickle.dumps(self.header, protocol=4)
        views = [memoryview(_LEN.pack(len(header)) + header), memoryview(self.stream)]
        views += [pb.raw() for pb in self.buffers]
        return [v for v in views if v.nbytes]

    def _exchange(self, stdin, reader):
        """Send the job and read the reply at once, writing only what the pipe takes
        (POSIX): a child that reports a failure before it reads the whole job (a
        script that fails to load) is read, never left blocked on its reply while this
        process blocks on the job.  The reply, or None at end of file without one."""
        import selectors

        chunks = self._chunks()
        wfd, rfd = stdin.fileno(), reader.fileno()
        os.set_blocking(wfd, False)
        got = bytearray()
        try:
            with selectors.DefaultSelector() as sel:
                sel.register(rfd, selectors.EVENT_READ)
                if chunks:
                    sel.register(wfd, selectors.EVENT_WRITE)
                else:
                    stdin.close()
                while True:
                    for key, _ in sel.select():
                        if key.fd == wfd:
                            try:
                                n = os.write(wfd, chunks[0])
                            except BlockingIOError:
                                continue
                            except OSError:   # the child stopped reading: its reply says why
                                chunks.clear()
                            else:
                                chunks[0] = chunks[0][n:]
                                if not chunks[0].nbytes:
                                    del chunks[0]
                            if not chunks:
                                sel.unregister(wfd)
                                stdin.close()   # end of the job
                            continue
                        chunk = os.read(rfd, 1 << 16)
                        if not chunk:
                            return None
                        got += chunk
                        if len(got) >= _LEN.size and \
                                len(got) >= _LEN.size + _LEN.unpack_from(got)[0]:
                            del got[:_LEN.size]
                            return pickle.loads(got)
        finally:
            if not stdin.closed:   # the child answered before it read the whole job
                stdin.close()

    def _send(self, stdin):
        """Write the job (the stdout-pipe path's writer thread)."""
        try:
            try:
                for view in self._chunks():
                    stdin.write(view)
            finally:
                stdin.close()
        except (OSError, ValueError):   # the child stopped reading (its reply says why), or
            pass                        # was ended (the pipe broken, or closed by _end)

    @staticmethod
    def _receive(reader):
        head = reader.read(_LEN.size)
        if len(head) < _LEN.size:
            return None
        n = _LEN.unpack(head)[0]
        data = bytearray()
        while len(data) < n:
            chunk = reader.read(n - len(data))
            if not chunk:
                return None
            data += chunk
        return pickle.loads(data)

    def _result(self, reply, status, k, of):
        fn, where = self.fn, f"fresh process {k} of {of}"
        if reply is None:
            raise RuntimeError(f"{fn}(): the {where} exited with status {status} before it "
                               f"reported a result (its output, if any, is above)")
        kind = reply[0]
        if kind == "ok":
            self.warnings.extend((k, record, reply[1]) for record in reply[2])
            return reply[1]
        if kind == "main_guard":
            raise RuntimeError(
                f"{fn}(): {self.label!r} is defined in the script {reply[1]}, which a fresh "
                f"process has to run again to find it, and that script calls {fn} at its "
                f"top level. Put the calls under `if __name__ == \"__main__\":`, define "
                f"{self.label!r} in a module you import, or install cloudpickle (then it "
                f"is sent by value and the script is not run again)")
        blob, type_name, message, text = reply[1:]
        exc = None
        if blob is not None:
            try:
                exc = pickle.loads(blob)
            except Exception:   # noqa: BLE001 - cannot be rebuilt here: the text will do
                exc = None
        if kind == "load_error":
            raise RuntimeError(f"{fn}(): the {where} could not load the function or its "
                               f"arguments: {type_name}: {message}\n{text}") from exc
        if exc is None:
            raise RuntimeError(f"{fn}(): the function raised {type_name} in the {where}: "
                               f"{message}\n{text}")
        note = f"raised in the {where}; its traceback:\n{text.rstrip()}"
        try:   # the user's exception is raised whatever its notes do
            if hasattr(exc, "add_note"):
                exc.add_note(note)
            else:   # before 3.11: PEP 678's list, which pytest and our CLI read there too
                notes = exc.__dict__.setdefault("__notes__", [])
                if isinstance(notes, list):
                    notes.append(note)
        except Exception:   # noqa: BLE001 - a __notes__ that is not a list, an add_note that raises
            pass
        raise exc


def _end(proc):
    """Stop a child we started and reap it (Ctrl-C, an error of ours)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass


# ---- warnings of the children, said once in the parent --------------------------------

def _category(path):
    module, _, name = path.rpartition(".")
    mod = sys.modules.get(module)
    cat = getattr(mod, name, None) if mod is not None else None
    return cat if isinstance(cat, type) and issubclass(cat, Warning) else None


def _rebuilt(record, stats, suffix):
    """A child's warning as an instance of the class an in-process run gives it (for one
    of ours, the class of its causes: one cause's own, or their combination), with its
    attributes, its text ending in `suffix`; of a class this process cannot find, a
    UserWarning naming it, as before."""
    path, text, causes, attrs, result_keys = record
    cls = None
    if causes is not None:
        try:
            cls = _native._warning_class(causes)
        except (TypeError, ValueError):   # labels this build does not know
            cls = None
    if cls is None:
        cls = _category(path)
    if cls is None:
        return UserWarning(f"{path}: {text}{suffix}")
    head, sep, rest = text.partition("\n")
    if causes is not None and head.endswith(":"):   # ours: where, on the header line
        text, suffix = f"{head[:-1]},{suffix.replace(' (', ' ', 1)[:-1]}:{sep}{rest}", ""
    try:
        w = cls(text + suffix)
    except Exception:   # noqa: BLE001 - an __init__ that wants other arguments
        try:
            w = cls.__new__(cls, text + suffix)   # its attributes are set below
        except Exception:   # noqa: BLE001
            return UserWarning(f"{path}: {text}{suffix}")
    values = {key: stats for key in result_keys}
    if causes is not None:
        values["causes"] = causes
    for key, blob in attrs.items():
        try:
            values[key] = pickle.loads(blob)
        except Exception:   # noqa: BLE001 - a value of a class this process lacks
            continue
    for key, value in values.items():
        try:
            setattr(w, key, value)
        except Exception:   # noqa: BLE001 - a read-only attribute of the user's class
            pass
    return w


def relay_warnings(jobs: Iterable[Job], runs: int) -> None:
    """Re-issue the children's warnings once each, composed in this one place: the same
    cause (the class and the text with its numbers left out) from several runs is said
    once, with how many of the `runs` fresh processes said it, as an instance of the
    class an in-process run raises, carrying its attributes (the first run's) and, for
    ours, .causes, .benchmark and .stats (that run's BenchmarkStats); so filters match
    it as they would in process."""
    import re

    groups: dict[tuple[Any, ...], list[Any]] = {}
    for j, job in enumerate(jobs):
        for k, record, stats in job.warnings:
            path, text, causes = record[:3]
            key = (path, causes, re.sub(r"[-+]?\d[\d.,]*(e[-+]?\d+)?%?", "#", text))
            entry = groups.setdefault(key, [record, stats, set()])
            entry[2].add((j, k))   # a process said it (however many times)
        job.warnings = []
    level = user_stacklevel()
    for record, stats, said in groups.values():
        count = len(said)
        where = "a fresh process" if runs == 1 else f"{count} of {runs} fresh processes"
        suffix = f" (in {where}; the first shown)" if count > 1 else f" (in {where})"
        warnings.warn(_rebuilt(record, stats, suffix), stacklevel=level)
