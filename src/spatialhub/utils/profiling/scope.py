"""The scope profiler of the released module: ``Timer``, ``timeit``, ``HierarchicalProfiler``,
``ProfileNode`` and the module-level ``profiler``.

Enter and exit are native (``_native.ProfilerCore`` and ``_native.Timer``); what is here
is Python by nature: the decorator, the ``summary()`` log lines, the Markdown / HTML tree
tables (escaped by the core's one escaper: ``_native._md_text``, ``_html_escape``),
``to_dict`` / JSON and the Chrome trace export.  inspect and json are imported by the
functions that use them: importing the package stays as light as before.
"""
from __future__ import annotations

import functools
import logging
import os
import sys
from typing import IO, TYPE_CHECKING, Any, Callable, Literal, TypeVar, cast

from ._native import (ProfileNode, ProfilerCore, Timer, _html_escape, _md_text,
                      _set_default_profiler)

if TYPE_CHECKING:   # typing.ParamSpec is 3.10+; type checkers know typing_extensions'
    import inspect

    if sys.version_info >= (3, 10):
        from typing import ParamSpec
    else:
        from typing_extensions import ParamSpec
    _P = ParamSpec("_P")
_R = TypeVar("_R")

# The released module logs on logging.getLogger(__name__) of
# spatialhub/utils/profiling.py: the same name as this package.
logger = logging.getLogger("spatialhub.utils.profiling")

__all__ = ["HierarchicalProfiler", "ProfileNode", "Timer", "timeit", "profiler"]


def _ms(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x:.3g}" if x < 0.1 else f"{x:.2f}"


# The signatures inspect.signature reports for HierarchicalProfiler (the constructor) and
# for a call of one of its instances: ProfilerCore's, whose __init__ and tp_call are C.
def _profiler_init(name: str = "Root", device: str = "CPU", track_ram: bool | Literal["peak"] = True,
                   track_vram: bool | None = None, sync_cuda: bool | None = None,
                   device_id: int = 0, *, trace_capacity: int = 65536) -> None:
    """HierarchicalProfiler(...)"""


def _profiler_call(name: str, track_ram: bool | Literal["peak"] | None = None,
                   track_vram: bool | None = None, sync_cuda: bool | None = None) -> Timer:
    """profiler(name, ...)"""
    raise NotImplementedError   # a signature only


class _Signature:
    """``__signature__`` of a class whose instances are called: the constructor's on the
    class, the call's on an instance.  inspect.signature reads ``__signature__`` first, and
    finds nothing else on a C type's ``__init__`` and ``__call__`` (slot wrappers).  A
    Python ``__init__`` or ``__call__`` would do as well, but would put a Python frame on
    ``with prof("stage")``, a C vectorcall (docs/performance.md, figure 9).  A subclass
    that defines its own ``__init__`` / ``__new__`` (or ``__call__``) gets None, so
    inspect reads that one instead."""

    def __init__(self, init: Callable[..., Any], call: Callable[..., Any]) -> None:
        self._stubs = {False: init, True: call}
        self._owner: type | None = None
        self._cache: dict[bool, inspect.Signature] = {}

    def __set_name__(self, owner: type, name: str) -> None:
        self._owner = owner

    def __get__(self, obj: object, objtype: type | None = None) -> inspect.Signature | None:
        called = obj is not None
        cls = type(obj) if called else objtype
        own = ("__call__",) if called else ("__init__", "__new__")
        for klass in (cls.__mro__ if cls is not None else ()):
            if klass is self._owner:
                break
            if any(name in vars(klass) for name in own):
                return None
        sig = self._cache.get(called)
        if sig is None:
            import inspect

            sig = self._cache[called] = inspect.signature(self._stubs[called])
        return sig


class HierarchicalProfiler(ProfilerCore):
    """Nested scopes aggregated into one call tree.

    Each ``with prof("stage"):`` is one call of the scope "stage", a child of the scope it
    is entered in; nesting is per thread and per asyncio task, and every thread and task
    records into the one tree: calls, wall and CPU totals, a latency histogram per scope
    (p50, p95, p99), peak RSS, device memory and CUDA sync.  Calling the profiler is
    :meth:`scope`.

    Parameters
    ----------
    name : str, default "Root"
        The root scope's name (``root_name``).
    device : str, default "CPU"
        Where the code runs; a label containing "cuda" ("cuda:1": ordinal 1) turns
        ``track_vram`` and ``sync_cuda`` on unless they are given.
    track_ram : bool or "peak", default True
        Host memory of each scope: True (RSS at exit minus at enter), "peak" (the true
        peak) or False.  The default of :meth:`scope`.
    track_vram : bool, optional
        Device memory of each scope (CUDA, device-wide).  None: whether ``device`` is CUDA.
    sync_cuda : bool, optional
        Sync the CUDA device at each scope's enter and exit.  None: as ``track_vram``.
    device_id : int, default 0
        The CUDA device's ordinal.
    trace_capacity : int, default 65536
        How many of the last scope calls :meth:`export_chrome_trace` can export.

    Examples
    --------
    >>> prof = HierarchicalProfiler("pipeline")
    >>> with prof("load"):
    ...     with prof("decode"):
    ...         pass
    >>> prof.root.children["load"].children["decode"].calls
    1
    >>> prof
    <HierarchicalProfiler 'pipeline' on CPU: 2 scopes, 2 calls>
    """

    __signature__ = _Signature(_profiler_init, _profiler_call)

    #: A repr counts the scopes of at most this many nodes (a tree can be huge).
    _REPR_NODES = 1000

    def __repr__(self) -> str:
        scopes, calls, complete = self._census(self._REPR_NODES)
        count = (f"{scopes:,} scope{'s' * (scopes != 1)}, {calls:,} call{'s' * (calls != 1)}"
                 if complete else f"over {self._REPR_NODES:,} scopes")
        return f"<{type(self).__name__} {self.root_name!r} on {self.device}: {count}>"

    def _census(self, limit: int) -> tuple[int, int, bool]:
        """(scopes below the root, their calls, complete): at most `limit` nodes are
        visited, and a node's children are listed only when they all fit."""
        scopes = calls = 0
        todo = [self.root]
        while todo:
            children = todo.pop().children
            if scopes + len(children) > limit:
                return scopes, calls, False
            for child in list(children.values()):
                scopes += 1
                calls += child.calls
                todo.append(child)
        return scopes, calls, True

    # ---- the released API (push / pop / reset / scope / __call__ are native) ----

    def timeit(
        self,
        name: str | None = None,
        track_ram: bool | Literal["peak"] | None = None,
        track_vram: bool | None = None,
        sync_cuda: bool | None = None,
    ) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
        """Decorator: every call of the function is a call of a scope of this profiler.

        Works on functions, methods, ``async def`` functions (the scope spans the awaited
        body) and generator functions (the scope spans the whole iteration), as
        :func:`timeit`.

        Parameters
        ----------
        name : str, optional
            The scope's name; None: the function's ``__name__``.
        track_ram, track_vram, sync_cuda : optional
            As for :meth:`scope`; None: the profiler's defaults.

        Returns
        -------
        callable
            The decorator; the decorated function keeps its signature and metadata.
        """

        def make(func: Callable[_P, _R]) -> Callable[_P, _R]:
            _check_decorated(func)
            scope_name = name if name else func.__name__
            return _wrap(func, lambda: self.scope(scope_name, track_ram, track_vram, sync_cuda))

        return make

    def summary(self) -> None:
        """Log the tree at INFO on the module's logger, line for line as the released
        module does (average wall and CPU seconds per call, CPU utilisation, peaks).

        Like the released one it prints nothing unless logging is configured to show INFO
        (``logging.basicConfig(level=logging.INFO)``); :meth:`print_summary` prints the
        same lines, :meth:`summary_text` returns them."""
        for line in self._summary_lines():
            logger.info(line)

    def summary_text(self) -> str:
        """The lines :meth:`summary` logs, as one str."""
        return "\n".join(self._summary_lines())

    def print_summary(self, file: IO[str] | None = None) -> None:
        """Print the lines :meth:`summary` logs, whatever the logging configuration.

        Parameters
        ----------
        file : text stream, optional
            Where to print; None: ``sys.stdout``.
        """
        print(self.summary_text(), file=file)

    def _summary_lines(self) -> list[str]:
        lines = ["\n=== Hierarchical Profiling Summary ==="]
        self._tree_lines(self.root, 0, lines)
        lines.append("======================================")
        return lines

    def _tree_lines(self, node: ProfileNode, depth: int, out: list[str]) -> None:
        if depth > 0:
            indent = "  " * (depth - 1) + "|-" if depth > 1 else ""
            calls = node.calls
            wall = node.total_wall_time / calls if calls > 0 else 0.0
            cpu = node.total_cpu_time / calls if calls > 0 else 0.0
            util = cpu / wall * 100.0 if wall > 0 else 0.0
            ram = node.peak_ram_delta_mb
            vram = node.peak_vram_delta_mb
            extra = (f" [RAM: +{ram:.1f}MB]" if ram > 1.0 else "") + (
                f" [VRAM: +{vram:.1f}MB]" if vram > 1.0 else "")
            out.append(f"{indent}{node.name:<32} | Calls: {calls:<4} | Wall: {wall:.4f}s | "
                       f"CPU: {cpu:.4f}s ({util:.0f}%){extra}")
        for child in list(node.children.values()):
            self._tree_lines(child, depth + 1, out)

    # ---- beyond the released one: tables, dict / JSON, Chrome trace ----

    def _rows(self) -> list[tuple[int, ProfileNode, float | None]]:
        """(depth, node, share of parent's total) in tree order, the root excluded."""
        rows: list[tuple[int, ProfileNode, float | None]] = []

        def walk(node: ProfileNode, depth: int) -> None:
            kids = list(node.children.values())
            # the root has no time of its own: its children share their sum
            base = node.total_wall_time if depth > 0 else sum(k.total_wall_time for k in kids)
            for k in kids:
                share = k.total_wall_time / base if base > 0 else None
                rows.append((depth + 1, k, share))
                walk(k, depth + 1)

        walk(self.root, 0)
        return rows

    _COLUMNS = ("Scope", "Calls", "Total (ms)", "Mean (ms)", "p50 (ms)", "p95 (ms)",
                "% of parent", "CPU %", "Peak RAM", "Peak VRAM")

    def _cells(self, node: ProfileNode, share: float | None) -> list[str]:
        calls = node.calls
        wall = node.total_wall_time
        util = f"{node.total_cpu_time / wall * 100:.0f}%" if wall > 0 else "–"
        return [
            str(calls), f"{wall * 1e3:.2f}", _ms(node.mean_ms), _ms(node.p50_ms),
            _ms(node.p95_ms), f"{share * 100:.1f}%" if share is not None else "–", util,
            f"+{node.peak_ram_delta_mb:.1f} MB", f"+{node.peak_vram_delta_mb:.1f} MB",
        ]

    def to_markdown(self) -> str:
        """The tree as a Markdown table; depth shown by indentation of the scope name."""
        lines = ["| " + " | ".join(self._COLUMNS) + " |",
                 "| :--- |" + " ---: |" * (len(self._COLUMNS) - 1)]
        for depth, node, share in self._rows():
            name = "&nbsp;&nbsp;" * (depth - 1) + ("└ " if depth > 1 else "") + _md_text(node.name)
            lines.append("| " + " | ".join([name] + self._cells(node, share)) + " |")
        return "\n".join(lines)

    def to_html(self) -> str:
        """The tree as an HTML table (what Jupyter shows)."""
        head = "".join(f"<th>{_html_escape(c)}</th>" for c in self._COLUMNS)
        body = []
        for depth, node, share in self._rows():
            pad = f' style="padding-left:{(depth - 1) * 1.2:.1f}em"'
            cells = "".join(f"<td>{_html_escape(c)}</td>" for c in self._cells(node, share))
            body.append(f"<tr><td{pad}>{_html_escape(node.name)}</td>{cells}</tr>")
        return (f"<table><caption>{_html_escape(self.root_name)}</caption><thead><tr>{head}"
                f"</tr></thead><tbody>{''.join(body)}</tbody></table>")

    def _repr_markdown_(self) -> str:
        return self.to_markdown()

    def _repr_html_(self) -> str:
        return self.to_html()

    def to_dict(self) -> dict[str, Any]:
        """The tree as nested dicts (JSON-ready): per node calls, totals (s), mean and
        percentiles (ms), peaks (MiB) and children (a list, first-entered order)."""

        def node_dict(node: ProfileNode) -> dict[str, Any]:
            return {
                "name": node.name,
                "calls": node.calls,
                "total_wall_time": node.total_wall_time,
                "total_cpu_time": node.total_cpu_time,
                "mean_ms": node.mean_ms,
                "p50_ms": node.p50_ms,
                "p95_ms": node.p95_ms,
                "p99_ms": node.p99_ms,
                "min_ms": node.min_ms,
                "max_ms": node.max_ms,
                "peak_ram_delta_mb": node.peak_ram_delta_mb,
                "peak_vram_delta_mb": node.peak_vram_delta_mb,
                "children": [node_dict(c) for c in list(node.children.values())],
            }

        return {"device": self.device, "root": node_dict(self.root)}

    def to_json(self, **kwargs: Any) -> str:
        """``json.dumps(self.to_dict(), **kwargs)``.

        Parameters
        ----------
        **kwargs
            Passed to ``json.dumps`` (``indent=2``, ...).
        """
        import json

        return json.dumps(self.to_dict(), **kwargs)

    def export_chrome_trace(self, path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
        """The last ``trace_capacity`` scope calls as Chrome Trace Event JSON (complete
        "X" events, microseconds), which Perfetto, chrome://tracing and speedscope open.

        Scopes of one thread nest; asyncio tasks that interleave on one thread are put on
        lanes of their own ("thread N / lane k") so that every lane nests properly.

        Parameters
        ----------
        path : str or os.PathLike, optional
            Where to write the JSON; None: nowhere.

        Returns
        -------
        dict
            The trace, written or not; ``otherData.events_dropped`` counts the calls
            the bounded buffer let go.

        Raises
        ------
        TypeError
            A path that is not a str or os.PathLike.
        """
        import json

        if path is not None and not isinstance(path, (str, bytes, os.PathLike)):
            # an int would be taken by open() as a file descriptor, written and closed
            raise TypeError(f"export_chrome_trace(): path must be a str or os.PathLike, "
                            f"not {type(path).__name__}")
        nodes, events, dropped = self._trace()
        index_of = {id(node): i for i, node in enumerate(nodes)}
        parents = [index_of.get(id(node.parent), -1) for node in nodes]
        # a node is registered after its parent: its path extends the parent's
        paths: list[str] = []
        for i, node in enumerate(nodes):
            up = parents[i]
            if node.parent is None:
                paths.append("")
            elif 0 <= up < i:
                top = nodes[up].parent is None      # a child of the root
                paths.append(node.name if top else f"{paths[up]}/{node.name}")
            else:
                names = []
                n: ProfileNode | None = node
                while n is not None and n.parent is not None:
                    names.append(n.name)
                    n = n.parent
                paths.append("/".join(reversed(names)))
        pid = os.getpid()
        t0 = min((e[2] for e in events), default=0)
        order, lanes = _assign_lanes(events, parents)
        out: list[dict[str, Any]] = []
        lane_ids: dict[tuple[int, int], int] = {}
        for i, lane in zip(order, lanes):
            node_id, thread, start, dur, depth = events[i]
            key = (thread, lane)
            if key not in lane_ids:
                lane_ids[key] = len(lane_ids) + 1
            node = nodes[node_id]
            out.append({
                "name": node.name, "cat": "scope", "ph": "X", "pid": pid,
                "tid": lane_ids[key], "ts": (start - t0) / 1e3, "dur": dur / 1e3,
                "args": {"path": paths[node_id], "depth": depth},
            })
        meta = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                 "args": {"name": f"spatialhub profiler {self.root_name}"}}]
        for (thread, lane), tid in lane_ids.items():
            label = f"thread {thread}" + (f" / lane {lane}" if lane else "")
            meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                         "args": {"name": label}})
        trace = {
            "traceEvents": meta + out,
            "displayTimeUnit": "ms",
            "otherData": {"profiler": self.root_name, "device": self.device,
                          "events_dropped": dropped, "trace_capacity": self.trace_capacity},
        }
        if path is not None:
            with open(path, "w", encoding="utf-8") as f:
                json.dump(trace, f)
        return trace


def _assign_lanes(events: list[tuple[int, int, int, int, int]],
                  parents: list[int]) -> tuple[list[int], list[int]]:
    """Per thread, a lane for every call such that the calls of one lane nest (a trace
    viewer draws a lane as one stack).  Calls in start order (longer first, shallower
    first); a call goes under an open call of its parent scope that contains it and is the
    innermost open call of its lane, or else into the lowest free lane, or a new one.
    Asyncio tasks that overlap on one thread so get lanes of their own, and a sibling
    inside another's time is never drawn as its child.

    O(n log n) in the number of events: a heap of the open calls by end (they leave their
    lanes in that order), a heap of free lanes, and per scope a heap of the lanes whose
    innermost open call is one of that scope's (stale entries dropped when met).  Returns
    (order, lanes): the event indices in the order drawn, and the lane of each."""
    import heapq

    order = sorted(range(len(events)),
                   key=lambda i: (events[i][2], -events[i][3], events[i][4]))
    lanes: list[int] = []
    # per thread: each lane's stack of open calls (end, node_id, event index), the open
    # calls by end, the free lanes, and node_id -> lanes whose top is a call of node_id
    state: dict[int, tuple[list[list[tuple[int, int, int]]], list[tuple[int, int, int, int]],
                           list[int], dict[int, list[tuple[int, int, int]]]]] = {}
    for i in order:
        node_id, thread, start, dur, _depth = events[i]
        end = start + dur
        st = state.get(thread)
        if st is None:
            st = state[thread] = ([], [], [], {})
        stacks, ending, free, tops = st
        # calls that ended by `start` leave their lanes (innermost first on a tie)
        while ending and ending[0][0] <= start:
            lane = heapq.heappop(ending)[2]
            stack = stacks[lane]
            stack.pop()
            if stack:
                t_end, t_node, t_index = stack[-1]
                heapq.heappush(tops.setdefault(t_node, []), (-t_end, lane, t_index))
            else:
                heapq.heappush(free, lane)
        # of the parent scope's calls on top of a lane, the one that ends last
        chosen = -1
        parent = parents[node_id] if 0 <= node_id < len(parents) else -1
        cand = tops.get(parent)
        while cand:
            neg_end, lane, index = cand[0]
            stack = stacks[lane]
            if not stack or stack[-1][2] != index:
                heapq.heappop(cand)      # no longer the top of that lane
                continue
            if -neg_end >= end:
                chosen = lane
            break
        if chosen < 0:
            if free:
                chosen = heapq.heappop(free)
            else:
                chosen = len(stacks)
                stacks.append([])
        stack = stacks[chosen]
        stack.append((end, node_id, i))
        heapq.heappush(ending, (end, -len(stack), chosen, i))
        heapq.heappush(tops.setdefault(node_id, []), (-end, chosen, i))
        lanes.append(chosen)
    return order, lanes


def _check_decorated(func: object) -> None:
    if not callable(func):
        raise TypeError(f"timeit(): the decorated object must be callable, not "
                        f"{type(func).__name__}")


def _wrap(func: Callable[_P, _R], make_timer: Callable[[], Timer]) -> Callable[_P, _R]:
    """`func` with every call inside a fresh Timer: the same signature, to a type checker."""
    return cast("Callable[_P, _R]", _wrapped(func, make_timer))


def _wrapped(func: Callable[..., Any], make_timer: Callable[[], Timer]) -> Callable[..., Any]:
    """`func` with every call inside a fresh Timer, keeping its metadata (functools.wraps).

    A coroutine function stays one, a generator function stays one, an async generator
    function stays one: the scope spans the awaited body, or the whole iteration (from the
    first ``next()`` / ``send()`` to exhaustion, ``close()`` or an exception), not the
    creation.  Values, ``send()``, ``throw()`` and ``close()`` go through unchanged, and the
    scope is left on every way out, as a ``with`` block in the body would be."""
    import inspect

    if inspect.iscoroutinefunction(func):
        @functools.wraps(func)
        async def awrapper(*args: Any, **kwargs: Any) -> Any:
            with make_timer():
                return await func(*args, **kwargs)

        return awrapper

    if inspect.isasyncgenfunction(func):
        @functools.wraps(func)
        async def agwrapper(*args: Any, **kwargs: Any) -> Any:
            agen = func(*args, **kwargs)
            with make_timer():
                try:
                    value = await agen.__anext__()
                except StopAsyncIteration:
                    return
                while True:
                    try:
                        sent = yield value
                    except GeneratorExit:
                        await agen.aclose()
                        raise
                    except BaseException as exc:  # noqa: BLE001 -- thrown in: goes on into agen
                        try:
                            value = await agen.athrow(exc)
                        except StopAsyncIteration:
                            return
                    else:
                        try:
                            value = await agen.asend(sent)
                        except StopAsyncIteration:
                            return

        return agwrapper

    if inspect.isgeneratorfunction(func):
        @functools.wraps(func)
        def gwrapper(*args: Any, **kwargs: Any) -> Any:
            gen = func(*args, **kwargs)
            with make_timer():
                return (yield from gen)

        return gwrapper

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with make_timer():
            return func(*args, **kwargs)

    return wrapper


def timeit(
    name: str | None = None,
    profiler: HierarchicalProfiler | None = None,
    track_memory: bool | Literal["peak"] = True,
    track_vram: bool = False,
    sync_cuda: bool = False,
) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """Decorator: every call of the function runs inside a :class:`Timer`.

    Works on functions, methods, ``async def`` functions (the scope spans the awaited
    body), and generator and async-generator functions, which stay such functions: the
    scope spans the whole iteration, from the first ``next()`` to exhaustion, ``close()``
    or an exception.

    Parameters
    ----------
    name : str, optional
        The scope's name; None: the function's ``__name__``.
    profiler : HierarchicalProfiler, optional
        Where the calls are recorded; None: the module-level ``profiler``.
    track_memory : bool or "peak", default True
        Host memory of each call, as for :class:`Timer`.
    track_vram : bool, default False
        Device memory of each call (CUDA, device-wide).
    sync_cuda : bool, default False
        Sync the CUDA device before and after each call.

    Returns
    -------
    callable
        The decorator; the decorated function keeps its signature (for type checkers
        too) and its ``functools.wraps`` metadata.

    Raises
    ------
    TypeError
        Decorating something that is not callable.

    Examples
    --------
    >>> prof = HierarchicalProfiler("demo")
    >>> @timeit(profiler=prof)
    ... def double(x: int) -> int:
    ...     return 2 * x
    >>> double(21), prof.root.children["double"].calls
    (42, 1)
    """

    def make(func: Callable[_P, _R]) -> Callable[_P, _R]:
        _check_decorated(func)
        timer_name = name if name else func.__name__
        return _wrap(func, lambda: Timer(timer_name, profiler=profiler,
                                         track_memory=track_memory, track_vram=track_vram,
                                         sync_cuda=sync_cuda))

    return make


#: The module-level profiler that ``Timer`` and ``timeit`` record into when given none.
profiler = HierarchicalProfiler()
_set_default_profiler(profiler)
