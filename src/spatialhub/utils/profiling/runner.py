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
verdict are native too (``compare_benchmarks(..., paired=True)``, csrc/verdict.c).
"""
import math
import operator
import random
import warnings

import numpy as np

from ._native import (BenchmarkInterrupted, BenchmarkWarning, _apply_rerun, _stats_from_samples,
                      benchmark_callable, compare_benchmarks)

__all__ = ["benchmark_repeated", "compare_callables", "compare_repeated"]

# Set by _worker.py while a fresh process loads the parent's script to find the function:
# a benchmark_repeated call then is that script's unguarded top level (the path).
_LOADING_MAIN = None

_BLOCK_TARGET_MS = 20.0   # work per block: long enough to dwarf the harness, short enough to interleave
_MAX_BLOCK = 10_000
_MAX_ROUNDS = 1_000_000  # a bound on time and memory (each round keeps two blocks of samples)
# benchmark_callable options each block passes itself (a callable keyword of the same name clashes)
_BLOCK_OPTIONS = frozenset({"name", "num_warmup", "num_iters"})


def _count(value, what, fn, lowest, highest=None):
    try:
        n = operator.index(value)
    except TypeError:
        raise TypeError(f"{fn}(): {what} must be an int, not {type(value).__name__}") from None
    if isinstance(value, bool) or n < lowest:
        raise ValueError(f"{fn}(): {what} must be an int >= {lowest}, got {value!r}")
    if highest is not None and n > highest:
        raise ValueError(f"{fn}(): {what} must be an int <= {highest}, got {value!r}")
    return n


def _pool(runs, sizes, name, fresh=False):
    """One BenchmarkStats over the samples of several runs (in run order), with run identity;
    fresh: the runs are fresh processes, so the pool gets their rerun interval."""
    samples = np.concatenate([r.samples_ms for r in runs])
    pooled = _stats_from_samples(samples)
    first = runs[0]
    pooled.name = name if name is not None else first.name
    pooled.device = first.device
    pooled.warmup_iters = sum(r.warmup_iters for r in runs)
    pooled.ram_delta_mb = max(r.ram_delta_mb for r in runs)
    pooled.vram_delta_mb = max(r.vram_delta_mb for r in runs)
    pooled.ram_peak_method = first.ram_peak_method
    pooled.batch_size = first.batch_size
    pooled.params = first.params
    pooled.env = first.env
    overheads = [r.overhead_ms for r in runs if r.overhead_ms is not None]
    pooled.overhead_ms = float(np.median(overheads)) if overheads else None
    for counter in ("minor_faults_per_iter", "major_faults_per_iter",
                    "vol_ctx_switches_per_iter", "invol_ctx_switches_per_iter"):
        per_run = [getattr(r, counter) for r in runs if getattr(r, counter) is not None]
        if per_run:   # the typical run's, as the pool's median is the typical sample's
            setattr(pooled, counter, float(np.median(per_run)))
    pooled.run_sizes = tuple(sizes)
    busy = [r.machine_busy for r in runs if r.machine_busy is not None]
    pooled.machine_busy = any(busy) if busy else None
    with np.errstate(divide="ignore", invalid="ignore"):
        medians = np.log([float(np.median(r.samples_ms)) for r in runs])
    if len(runs) > 1 and np.all(np.isfinite(medians)):
        pooled.run_spread = float(np.std(medians, ddof=1))
    if fresh:
        _apply_rerun(pooled)
    else:   # blocks of one process say nothing of a fresh process
        pooled.rerun_low_ms = pooled.rerun_high_ms = pooled.rerun_basis = None
    return pooled


# ---- interleaved A/B in one process -------------------------------------------------

def compare_callables(a, b, *args, rounds=20, block_iters=None, num_warmup=10, margin=0.05,
                      seed=0, name_a=None, name_b=None, device="CPU", sync_fn=None, **kwargs):
    """Compare two callables interleaved in one process; returns a Comparison.

    Each of ``rounds`` rounds times one block of ``block_iters`` calls of ``a`` and one of
    ``b`` (plus one untimed call before each block), in an order drawn at random per
    round (seeded by ``seed``).  The verdict is judged on the per-round ratios of block
    medians: their median is ``ratio``, the distribution-free 95% interval of that median
    is ``[ci95_low, ci95_high]``, and ``margin`` is the practical-equivalence margin
    (see compare_benchmarks).  ``block_iters=None`` sizes a block to about 20 ms of the
    slower callable (3 calls at least).  ``args`` and ``kwargs`` go to both callables.

    Ctrl-C in a block's timed loop raises a BenchmarkInterrupted (chained from the one of
    the block) whose ``.comparison`` is the Comparison of the rounds both sides completed
    (None under 2) and whose ``.stats`` is the interrupted block's; a Ctrl-C in a block's
    untimed call propagates unchanged, carrying the same ``.comparison``.
    """
    fn = "compare_callables"
    if not callable(a) or not callable(b):
        raise TypeError(f"{fn}(): a and b must be callable, not "
                        f"{type(a if not callable(a) else b).__name__}")
    rounds = _count(rounds, "rounds", fn, 2, _MAX_ROUNDS)
    num_warmup = _count(num_warmup, "num_warmup", fn, 0)
    if block_iters is not None:
        block_iters = _count(block_iters, "block_iters", fn, 1)
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0 <= margin < 1:
        raise ValueError(f"{fn}(): margin must be a number in [0, 1) (0.05 = 5%), not {margin!r}")
    seed = _count(seed, "seed", fn, 0)
    names = (name_a if name_a is not None else getattr(a, "__name__", "A"),
             name_b if name_b is not None else getattr(b, "__name__", "B"))
    if names[0] == names[1]:
        names = (names[0] + " (a)", names[1] + " (b)")
    opts = dict(device=device, sync_fn=sync_fn, track_ram=False, track_vram=False, progress=False)
    taken = sorted(set(kwargs) & (set(opts) | _BLOCK_OPTIONS))
    if taken:
        raise TypeError(f"{fn}(): keyword argument {taken[0]!r} is an option of the harness, "
                        f"not passed to a and b; to give it to the callables, bind it first "
                        f"(functools.partial(a, {taken[0]}=...))")

    runs = ([], [])
    block = [None]   # the block size, once the rounds start (None: still calibrating)
    try:
        with warnings.catch_warnings():
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
            exc.comparison = _completed(runs, block[0], names, margin, seed)
        raise
    return _completed(runs, block_iters, names, margin, seed)


def _completed(runs, block_iters, names, margin, seed):
    """The Comparison of the rounds both sides completed, or None under 2 such rounds."""
    done = min(len(runs[0]), len(runs[1]))
    if done < 2:
        return None
    sizes = [block_iters] * done
    pa, pb = _pool(runs[0][:done], sizes, names[0]), _pool(runs[1][:done], sizes, names[1])
    return compare_benchmarks(pa, pb, paired=True, margin=margin, seed=seed)


def _interrupted(exc, runs, rounds, block_iters, names, margin, seed):
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
    new.comparison = comparison
    new.stats = stats
    return new


# ---- repetitions in fresh processes ---------------------------------------------------

def _refuse_reentry(fn):
    if _LOADING_MAIN is not None:
        from ._worker import MainGuardError
        raise MainGuardError(f"{fn}() called while a fresh process loads {_LOADING_MAIN}")


def _checked(fn, func, repeat):
    _refuse_reentry(fn)
    if not callable(func):
        raise TypeError(f"{fn}(): func must be callable, not {type(func).__name__}")
    return _count(repeat, "repeat", fn, 1)


def _interrupted_runs(fn, done, repeat, sides):
    """BenchmarkInterrupted for Ctrl-C during the runs (each child is ended by then,
    _launch.py), .stats pooling the completed runs of each side; None when no run
    completed (the KeyboardInterrupt itself propagates then)."""
    if not any(runs for runs, _ in sides):
        return None
    pools = [_pool(runs, [r.timed_iters for r in runs], name, fresh=True) if runs else None
             for runs, name in sides]
    counts = " and ".join(str(len(runs)) for runs, _ in sides)
    new = BenchmarkInterrupted(f"{fn} interrupted in round {done + 1} of {repeat}: .stats "
                               f"holds the pool of the {counts} completed run(s)")
    new.stats = pools[0] if len(pools) == 1 else pools
    return new


def benchmark_repeated(func, *args, repeat=5, **kwargs):
    """benchmark_callable(func, *args, **kwargs) in ``repeat`` fresh interpreters, pooled.

    The runs go one after another (never side by side: they would time each other), each
    in a new interpreter (never a fork) put in this process's state first: its
    ``sys.path``, CPU affinity, collector settings, torch / threadpoolctl thread counts
    and glibc's mmap threshold, so that a run there measures what a run here would
    (docs/statistics.md, "Repetitions").  The result's samples are the runs' samples in
    run order; ``run_sizes`` says how many came from each run, ``run_spread`` is the
    standard deviation of the logs of the run medians (0.05: runs differ by about 5%),
    and ``rerun_low_ms`` / ``rerun_high_ms`` is where the median of one more such run is
    expected (95%).

    ``func`` and the arguments are sent by pickle: a function of an importable module
    goes by name (a script that calls this needs no ``__main__`` guard then); one defined
    in the running script, a notebook cell, a lambda or a local function goes by value
    with cloudpickle when it is installed.  Without cloudpickle, a notebook's or a
    lambda's function gets a TypeError before any process starts, and a script's is
    found by loading the script again (as ``__mp_main__``: code under the guard does not
    run; a script without the guard gets one RuntimeError saying so).  Ctrl-C ends the
    running child and raises BenchmarkInterrupted with ``.stats`` pooling the completed
    runs (a plain KeyboardInterrupt before the first completes).
    """
    from ._launch import Job, relay_warnings

    fn = "benchmark_repeated"
    repeat = _checked(fn, func, repeat)
    name = kwargs.get("name")
    kwargs.setdefault("progress", False)
    job = Job(fn, func, args, kwargs)
    runs = []
    try:
        for k in range(repeat):
            runs.append(job.run(k + 1, repeat))
    except KeyboardInterrupt as exc:
        new = _interrupted_runs(fn, len(runs), repeat, [(runs, name)])
        if new is None:
            raise
        raise new from exc
    relay_warnings([job], repeat)
    return _pool(runs, [r.timed_iters for r in runs], name, fresh=True)


def compare_repeated(a, b, *args, repeat=5, margin=0.05, name_a=None, name_b=None,
                     **kwargs):
    """Compare two callables over ``repeat`` fresh interpreters each, interleaved; a Comparison.

    The runs alternate, A B then B A, round after round (A1 B1 B2 A2 A3 B3 ...), each in
    a fresh interpreter in this process's state (as benchmark_repeated), so that a
    machine that changes speed during the comparison slows both sides alike; each side's
    runs are pooled and judged by compare_benchmarks, which allows for the spread
    between the runs it sees.  ``margin`` is the practical-equivalence margin; the other
    keyword arguments go to benchmark_callable and, beyond its options, to both
    callables.  The reason says so when the machine was busy.  Ctrl-C ends the running
    child and raises BenchmarkInterrupted with ``.stats`` = [pool of A, pool of B] of
    the completed runs (None for a side without one).
    """
    from ._launch import Job, relay_warnings

    fn = "compare_repeated"
    repeat = _checked(fn, a, repeat)
    if not callable(b):
        raise TypeError(f"{fn}(): b must be callable, not {type(b).__name__}")
    if repeat < 2:
        raise ValueError(f"{fn}(): repeat must be an int >= 2 (a spread needs two runs), "
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
    runs = ([], [])
    try:
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
    pa = _pool(runs[0], [r.timed_iters for r in runs[0]], names[0], fresh=True)
    pb = _pool(runs[1], [r.timed_iters for r in runs[1]], names[1], fresh=True)
    return compare_benchmarks(pa, pb, margin=margin)
