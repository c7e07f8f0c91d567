"""Comparisons and repetitions that hold across runs (Python by nature: processes, order).

* :func:`compare_callables` times two callables in one process, in alternating short
  blocks whose order is drawn at random each round, and judges the per-round ratios:
  whatever the machine does slowly (frequency, neighbours, thermal state) hits both
  sides of a round alike and cancels out of the ratio.
* :func:`benchmark_repeated` runs the same benchmark in ``repeat`` fresh interpreters
  (started afresh, never forked: a forked CUDA context is unusable) in the parent's
  state (_launch.py, _worker.py) and pools their samples, keeping which run each came
  from (``run_sizes``), the spread between the runs (``run_spread``), which
  :func:`compare_benchmarks` then uses, and where one more run would land
  (``rerun_low_ms`` / ``rerun_high_ms``).
* :func:`compare_repeated` does that for two callables with their runs interleaved
  (A B, B A, A B, ...), so that a machine drifting during the runs weighs on both alike.

The timing itself is the native loop (``benchmark_callable``); the statistics and the
verdict are native too (``compare_benchmarks(..., paired=True)``, csrc/stats/verdict.c).
"""
from __future__ import annotations

import math
import random
import warnings
from typing import TYPE_CHECKING, Any, Callable, Sequence, Tuple

from ._native import (DEFAULT_NUM_WARMUP, BenchmarkInterrupted, BenchmarkStats, BenchmarkWarning,
                      Comparison,
                      benchmark_callable, compare_benchmarks)
from ._native import _count as _native_count
from ._native import _pool as _native_pool
from ._vocab import noting_near_options, options_of
from ._words import COMPARE, remedy_words
from ._worker import refuse_reentry

__all__ = ["benchmark_repeated", "compare_callables", "compare_repeated"]

_BLOCK_TARGET_MS = 20.0   # work per block: long enough to dwarf the harness, short enough to interleave
_MAX_BLOCK = 10_000
_MAX_ROUNDS = 1_000_000  # a bound on time and memory (each round keeps two blocks of samples)
# benchmark_callable options each block passes itself (a callable keyword of the same name clashes)
_BLOCK_OPTIONS = frozenset({"name"})
# each entry point's own options a keyword passed on to the callables may be a near miss
# of (the core knows its own, and warmup= / iters=)
_COMPARE_OPTIONS = options_of("rounds", "block_iters", "margin", "seed", "name_a", "name_b")
_REPEATED_OPTIONS = options_of("repeat")
_COMPARE_REPEATED_OPTIONS = options_of("repeat", "margin", "name_a", "name_b")


def _count(value: Any, what: str, fn: str, lowest: int, highest: int | None = None) -> int:
    """The core's count rule (``_native._count``) in ``fn()``'s words."""
    return _native_count(value, what, f"{fn}()", lowest, highest)


def _pool(runs: Sequence[BenchmarkStats], name: str | None,
          fresh: bool = False) -> BenchmarkStats:
    """One BenchmarkStats over the samples of several runs (in run order), with run identity
    (the core's one pooling rule, ``_native._pool``); fresh: the runs are fresh processes,
    so the pool gets their rerun interval."""
    return _native_pool(list(runs), name=name, runs=True, fresh=fresh)


# ---- interleaved A/B in one process -------------------------------------------------

def compare_callables(a: Callable[..., Any], b: Callable[..., Any], *args: Any,
                      rounds: int = 20, block_iters: int | None = None,
                      num_warmup: int = DEFAULT_NUM_WARMUP, num_iters: int | None = None,
                      margin: float = 0.05, seed: int = 0, name_a: str | None = None,
                      name_b: str | None = None, device: str = "CPU",
                      sync_fn: Callable[[], Any] | None = None, **kwargs: Any) -> Comparison:
    """Compare two callables interleaved in one process: is b faster or slower than a?

    Each round times one block of ``block_iters`` calls of ``a`` and one of ``b`` (one
    untimed call before each block), in an order drawn at random per round.  The
    verdict is judged on the per-round ratios of block medians: whatever the machine
    does slowly hits both sides of a round alike.

    Parameters
    ----------
    a, b : callable
        The baseline and the candidate.
    *args, **kwargs
        Passed to both; a keyword named like an option here or of
        ``benchmark_callable`` is the harness's (bind it first, functools.partial).
        When a callable rejects a keyword that is a near miss of an option
        (``round=``, ``num_iter=``), its TypeError has a note naming the option.
    rounds : int, default 20
        Rounds (>= 2).
    block_iters : int, optional
        Calls per block; None: from ``num_iters`` when given, else about 20 ms of the
        slower callable, at least 3.
    num_warmup : int, default 10
        Untimed calls of each before the rounds.
    num_iters : int, optional
        Timed calls of each callable in all, spread over the rounds: blocks of
        ``ceil(num_iters / rounds)`` calls (so at least ``num_iters``, and at least one
        call a block).  Not with ``block_iters``.
    margin : float, default 0.05
        Practical-equivalence margin in [0, 1): a ratio within it is "same".
    seed : int, default 0
        Seed of the block order (and the bootstrap).
    name_a, name_b : str, optional
        Labels; None: the callables' ``__name__``.
    device : str, default "CPU"
        As for ``benchmark_callable``.
    sync_fn : callable, optional
        As for ``benchmark_callable``.

    Returns
    -------
    Comparison
        ``ratio`` (b / a, the median per-round ratio), its distribution-free 95%
        interval and the verdict, ``method="interleaved"``.

    Raises
    ------
    TypeError, ValueError
        A bad argument (``num_iters`` and ``block_iters`` both given), before anything
        runs.
    BenchmarkInterrupted
        Ctrl-C in a block's timed loop: ``.comparison`` is the Comparison of the rounds
        both sides completed (None under 2), ``.stats`` the interrupted block's.

    Examples
    --------
    >>> data = list(range(2000))
    >>> c = compare_callables(sorted, lambda x: sorted(x, reverse=True), data, rounds=4)
    >>> c.method, c.baseline
    ('interleaved', 'sorted')
    """
    fn = "compare_callables"
    if not callable(a) or not callable(b):
        raise TypeError(f"{fn}(): a and b must be callable, not "
                        f"{type(a if not callable(a) else b).__name__}")
    rounds = _count(rounds, "rounds", fn, 2, _MAX_ROUNDS)
    num_warmup = _count(num_warmup, "num_warmup", fn, 0)
    if block_iters is not None:
        block_iters = _count(block_iters, "block_iters", fn, 1)
    if num_iters is not None:
        if block_iters is not None:
            raise TypeError(f"{fn}(): num_iters={num_iters!r} and block_iters={block_iters!r} "
                            f"both set the calls per block (num_iters in all, spread over the "
                            f"{rounds} rounds); give one")
        num_iters = _count(num_iters, "num_iters", fn, 1)
        block_iters = -(-num_iters // rounds)
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0 <= margin < 1:
        raise ValueError(f"{fn}(): margin must be a number in [0, 1) (0.05 = 5%), not {margin!r}")
    seed = _count(seed, "seed", fn, 0)
    names = (name_a if name_a is not None else getattr(a, "__name__", "A"),
             name_b if name_b is not None else getattr(b, "__name__", "B"))
    if names[0] == names[1]:
        names = (names[0] + " (a)", names[1] + " (b)")
    opts: dict[str, Any] = dict(device=device, sync_fn=sync_fn, track_ram=False,
                                track_vram=False, progress=False)
    taken = sorted(set(kwargs) & (set(opts) | _BLOCK_OPTIONS))
    if taken:
        raise TypeError(f"{fn}(): keyword argument {taken[0]!r} is an option of the harness, "
                        f"not passed to a and b; to give it to the callables, bind it first "
                        f"(functools.partial(a, {taken[0]}=...))")

    runs: tuple[list[BenchmarkStats], list[BenchmarkStats]] = ([], [])
    block: list[int | None] = [None]   # the block size, once the rounds start (None: still calibrating)
    try:
        with warnings.catch_warnings(), remedy_words(COMPARE), \
                noting_near_options(kwargs, _COMPARE_OPTIONS):
            # the per-block warnings (few samples, p99) speak of blocks, not of the comparison
            warnings.simplefilter("ignore", BenchmarkWarning)
            first = [benchmark_callable(f, *args, name=n, num_warmup=num_warmup, num_iters=3,
                                        **opts, **kwargs) for f, n in zip((a, b), names)]
            if block_iters is None:
                slow = max(s.median_ms for s in first)
                block_iters = 3 if slow <= 0 else min(_MAX_BLOCK,
                                                      max(3, math.ceil(_BLOCK_TARGET_MS / slow)))
            block[0] = block_iters
            order = random.Random(seed)
            for _ in range(rounds):
                sides = (0, 1) if order.random() < 0.5 else (1, 0)
                for side in sides:
                    f = (a, b)[side]
                    runs[side].append(benchmark_callable(f, *args, name=names[side], num_warmup=1,
                                                         num_iters=block_iters, **opts, **kwargs))
    except BenchmarkInterrupted as exc:
        # benchmark_callable's own message speaks of one block; say what the comparison kept
        raise _interrupted(exc, runs, rounds, block[0], names, margin, seed) from exc
    except KeyboardInterrupt as exc:
        # Ctrl-C outside a timed loop (a block's untimed call, calibration): the interrupt
        # itself propagates unchanged, carrying the completed rounds as sweep() carries .partial
        if block[0] is not None:
            exc.comparison = _completed(runs, block[0], names, margin, seed)  # type: ignore[attr-defined]
        raise
    comparison = _completed(runs, block_iters, names, margin, seed)
    assert comparison is not None   # rounds >= 2, all completed
    return comparison


if TYPE_CHECKING:   # not at run time: typing's cache of Sequence[BenchmarkStats] would
    # keep the native module alive past its teardown (its CUDA contexts unreleased)
    _Runs = Tuple[Sequence[BenchmarkStats], Sequence[BenchmarkStats]]


def _completed(runs: _Runs, block_iters: int, names: tuple[str, str], margin: float,
               seed: int) -> Comparison | None:
    """The Comparison of the rounds both sides completed, or None under 2 such rounds."""
    done = min(len(runs[0]), len(runs[1]))
    if done < 2:
        return None
    pa, pb = _pool(runs[0][:done], names[0]), _pool(runs[1][:done], names[1])
    return compare_benchmarks(pa, pb, paired=True, margin=margin, seed=seed)


def _interrupted(exc: BenchmarkInterrupted, runs: _Runs, rounds: int, block_iters: int | None,
                 names: tuple[str, str], margin: float, seed: int) -> BenchmarkInterrupted:
    """compare_callables' BenchmarkInterrupted for Ctrl-C in a block's timed loop."""
    done = min(len(runs[0]), len(runs[1]))
    comparison = None if block_iters is None else _completed(runs, block_iters, names, margin, seed)
    stats = getattr(exc, "stats", None)
    if block_iters is None:
        where, run = "while calibrating the block size, before round 1", "calibration run"
    else:
        where, run = f"in round {done + 1} of {rounds}", "block"
    kept = (f".comparison holds the Comparison of those {done} rounds" if comparison is not None
            else ".comparison is None (a comparison needs 2 completed rounds)")
    held = ("" if stats is None else f"; .stats holds the interrupted {run}'s "
            f"{stats.timed_iters} timed iteration(s) of {stats.name!r}")
    new = BenchmarkInterrupted(
        f"compare_callables interrupted {where}: {done} of {rounds} rounds completed; {kept}{held}")
    new.comparison = comparison  # type: ignore[attr-defined]
    new.stats = stats  # type: ignore[assignment]
    return new


# ---- repetitions in fresh processes ---------------------------------------------------

def _checked(fn: str, func: object, repeat: object) -> int:
    refuse_reentry(fn)
    if not callable(func):
        raise TypeError(f"{fn}(): func must be callable, not {type(func).__name__}")
    return _count(repeat, "repeat", fn, 1)


def _interrupted_runs(fn: str, done: int, repeat: int,
                      sides: Sequence[tuple[Sequence[BenchmarkStats], str | None]]
                      ) -> BenchmarkInterrupted | None:
    """BenchmarkInterrupted for Ctrl-C during the runs (each child is ended by then,
    _launch.py), .stats pooling the completed runs of each side; None when no run
    completed (the KeyboardInterrupt itself propagates then)."""
    if not any(runs for runs, _ in sides):
        return None
    pools = [_pool(runs, name, fresh=True) if runs else None
             for runs, name in sides]
    counts = " and ".join(str(len(runs)) for runs, _ in sides)
    new = BenchmarkInterrupted(f"{fn} interrupted in round {done + 1} of {repeat}: .stats "
                               f"holds the pool of the {counts} completed run(s)")
    new.stats = pools[0] if len(pools) == 1 else pools  # type: ignore[assignment]
    return new


def benchmark_repeated(func: Callable[..., Any], *args: Any, repeat: int = 5,
                       **kwargs: Any) -> BenchmarkStats:
    """benchmark_callable(func, *args, **kwargs) in ``repeat`` fresh interpreters, pooled.

    The runs go one after another, each in a new interpreter (never a fork) put in this
    process's state first (``sys.path``, CPU affinity, collector settings, thread counts,
    glibc's mmap threshold), so that a run there measures what a run here would
    (docs/statistics.md, "Repetitions").

    ``func`` and the arguments travel by pickle: a function of an importable module by
    name; one defined in the running script, a notebook cell, a lambda or a local
    function by value with cloudpickle when it is installed.  Without cloudpickle a
    script's function is found by loading the script again as ``__mp_main__`` (code
    under its ``__main__`` guard does not run).

    Parameters
    ----------
    func : callable
        What to time.
    *args, **kwargs
        As for ``benchmark_callable``: its options (``num_warmup``, ``num_iters``, ...),
        the rest passed to ``func``; when ``func`` rejects a near miss of an option
        (``num_iter=``, ``repeats=``), its TypeError has a note naming the option.
    repeat : int, default 5
        Fresh interpreters, one run each (>= 1).

    Returns
    -------
    BenchmarkStats
        The runs' samples pooled in run order: ``run_sizes`` (samples per run),
        ``run_spread`` (std of the log run medians: 0.05 = runs differ by about 5%) and
        ``rerun_low_ms`` / ``rerun_high_ms`` (where one more run's median is expected).

    Raises
    ------
    TypeError, ValueError
        A bad argument, or a function that cannot be sent, before any process starts.
    RuntimeError
        A child that died without a result, or a script without its ``__main__`` guard.
    BenchmarkInterrupted
        Ctrl-C: the running child is ended; ``.stats`` pools the completed runs (a plain
        KeyboardInterrupt before the first completes).

    Any exception of ``func`` in a child is raised here, with the child's traceback
    as a note.

    Examples
    --------
    >>> stats = benchmark_repeated(sorted, list(range(1000)), repeat=3,
    ...                            num_iters=20)  # doctest: +SKIP
    >>> stats.run_sizes  # doctest: +SKIP
    (20, 20, 20)
    """
    from ._launch import Job, relay_warnings

    fn = "benchmark_repeated"
    repeat = _checked(fn, func, repeat)
    name = kwargs.get("name")
    kwargs.setdefault("progress", False)
    job = Job(fn, func, args, kwargs)
    runs: list[BenchmarkStats] = []
    try:
        with noting_near_options(kwargs, _REPEATED_OPTIONS):
            for k in range(repeat):
                runs.append(job.run(k + 1, repeat))
    except KeyboardInterrupt as exc:
        new = _interrupted_runs(fn, len(runs), repeat, [(runs, name)])
        if new is None:
            raise
        raise new from exc
    relay_warnings([job], repeat)
    return _pool(runs, name, fresh=True)


def compare_repeated(a: Callable[..., Any], b: Callable[..., Any], *args: Any,
                     repeat: int = 5, margin: float = 0.05, name_a: str | None = None,
                     name_b: str | None = None, **kwargs: Any) -> Comparison:
    """Compare two callables over fresh interpreters, their runs interleaved.

    The runs alternate A B, B A, A B, ... (each as ``benchmark_repeated`` runs them), so
    that a machine that changes speed meanwhile slows both sides alike; each side's runs
    are pooled and judged by ``compare_benchmarks``, which allows for the spread between
    the runs.  The reason says so when the machine was busy.

    Parameters
    ----------
    a, b : callable
        The baseline and the candidate.
    *args, **kwargs
        As for ``benchmark_callable``: its options (``num_warmup``, ``num_iters``, ...),
        the rest passed to both callables; when one rejects a near miss of an option
        (``num_iter=``, ``repeats=``), its TypeError has a note naming the option.
    repeat : int, default 5
        Runs per side (>= 2).
    margin : float, default 0.05
        Practical-equivalence margin in [0, 1): a ratio within it is "same".
    name_a, name_b : str, optional
        Labels; None: the callables' ``__name__``.

    Returns
    -------
    Comparison
        ``ratio`` (b / a) of the pooled medians, its 95% interval and the verdict.

    Raises
    ------
    TypeError, ValueError
        A bad argument, before any process starts.
    BenchmarkInterrupted
        Ctrl-C: the running child is ended; ``.stats`` is [pool of a, pool of b] of the
        completed runs (None for a side without one).

    Examples
    --------
    >>> c = compare_repeated(sorted, lambda x: sorted(x, reverse=True),
    ...                      list(range(1000)), repeat=2, num_iters=20)  # doctest: +SKIP
    >>> c.baseline_runs, c.candidate_runs  # doctest: +SKIP
    (2, 2)
    """
    from ._launch import Job, relay_warnings

    fn = "compare_repeated"
    repeat = _checked(fn, a, repeat)
    if not callable(b):
        raise TypeError(f"{fn}(): b must be callable, not {type(b).__name__}")
    if repeat < 2:
        raise ValueError(f"{fn}(): repeat must be >= 2 (a spread needs two runs), "
                         f"got {repeat!r}")
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0 <= margin < 1:
        raise ValueError(f"{fn}(): margin must be a number in [0, 1) (0.05 = 5%), not {margin!r}")
    names = (name_a if name_a is not None else getattr(a, "__name__", "A"),
             name_b if name_b is not None else getattr(b, "__name__", "B"))
    if names[0] == names[1]:
        names = (names[0] + " (a)", names[1] + " (b)")
    if "name" in kwargs:
        raise TypeError(f"{fn}(): name is set per side: use name_a= and name_b=")
    kwargs.setdefault("progress", False)
    jobs = (Job(fn, a, args, dict(kwargs, name=names[0])),
            Job(fn, b, args, dict(kwargs, name=names[1])))
    runs: tuple[list[BenchmarkStats], list[BenchmarkStats]] = ([], [])
    try:
        with noting_near_options(kwargs, _COMPARE_REPEATED_OPTIONS):
            for r in range(repeat):
                for side in ((0, 1) if r % 2 == 0 else (1, 0)):
                    runs[side].append(jobs[side].run(r + 1, repeat))
    except KeyboardInterrupt as exc:
        new = _interrupted_runs(fn, min(map(len, runs)), repeat,
                                [(runs[0], names[0]), (runs[1], names[1])])
        if new is None:
            raise
        raise new from exc
    relay_warnings(jobs, 2 * repeat)
    pa = _pool(runs[0], names[0], fresh=True)
    pb = _pool(runs[1], names[1], fresh=True)
    return compare_benchmarks(pa, pb, margin=margin)
