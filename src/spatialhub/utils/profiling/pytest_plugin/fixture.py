"""The ``benchmark`` fixture: pytest-benchmark's calling conventions, our native loop.

Every timed round goes through ``benchmark_callable`` (C): the sync before and after
each round (``device=`` / ``sync_fn=``), integer-nanosecond clock, the sample buffer,
percentiles, the median's CI, peak RAM/VRAM.  What this module adds is the mapping
from pytest-benchmark's vocabulary (calibrated iterations per round, rounds, warm-up,
setup and teardown, cProfile, aspectlib weaving) onto that loop.

``benchmark(func)`` calibrates as pytest-benchmark does: a function faster than the
round target (``--benchmark-min-time``, 5 us, or ``calibration_precision`` times the
timer's precision) is called in loops of N iterations, one timed round per loop, and
each round's time divided by N is one sample.  For the default timer the precision is
the native loop's own per-round cost (~40 ns here, where pytest-benchmark's Python timer
reads ~100 ns), so ``--benchmark-min-time`` can be set finer than pytest-benchmark can
honour.  Any other ``--benchmark-timer`` / ``timer=`` times the rounds in Python with
that timer, as pytest-benchmark does.

The private attributes pytest-benchmark's fixture keeps (``_timer``, ``_min_time``,
``_min_rounds``, ``_max_time``, ``_calibration_precision``, ``_precision``,
``_confidence``, ``_mode``, ``_run_until_precise``) are kept under the same names and
read when the fixture runs: suites (and its own tests) that set them keep working.
"""
from __future__ import annotations

import contextlib
import functools
import gc
import inspect
import math
import re
import statistics
import time
import warnings

import numpy as np

from .._native import (BenchmarkWarning, _apply_rerun, _stats_from_samples,
                       benchmark_callable, benchmark_load)
from .._native import _is_async, _loop_overhead_ms
from .._native import _pool as _native_pool
from .._words import PYTEST, remedy_words
from .options import MARKER_OPTIONS, TIMER_DEFAULT, load_timer, timer_name  # noqa: F401

__all__ = ["BenchmarkFixture", "FixtureAlreadyUsed", "BenchmarkMetadata", "RoundStats"]

# benchmark_callable's own keyword names, read from its signature (a list kept by hand
# here once missed a new option): pytest-benchmark passes every keyword on to func, so
# a func keyword argument with one of these names is bound with functools.partial first.
_HARNESS_KEYWORDS = frozenset(
    p.name for p in inspect.signature(benchmark_callable).parameters.values()
    if p.kind is p.KEYWORD_ONLY)
# a loop of calls never grows past this many iterations per round (a timer that does
# not move would otherwise keep the calibration multiplying by 10)
MAX_LOOPS = 10 ** 9
# a first call shorter than this is re-timed warm (five rounds, the fastest) before the
# calibration decides on it
WARM_RECHECK_S = 1e-3


def reference_workload():
    """A fixed, interpreter-bound piece of work (~20 us) timed next to each CPU
    benchmark.  Its median says how fast the machine is at that moment; the gate divides
    a benchmark's change by the reference's change (docs/guide.md, "machine speed")."""
    return len("".join([str(i * 7) for i in range(300)]))


# The reference next to benchmark(func): REF_BLOCK calls before each of up to
# REF_SEGMENTS segments of the timed rounds (REF_MIN_SEGMENT rounds each at least)
REF_SEGMENTS = 8
REF_MIN_SEGMENT = 5
REF_BLOCK = 20


def _with_busy(stats, busy):
    """``stats`` with ``machine_busy`` set and its rerun interval computed again: a run
    that started on a busy machine allows the busy floor between runs (csrc/types/benchstats.c)."""
    stats.machine_busy = busy
    if busy:
        _apply_rerun(stats)
    return stats


@contextlib.contextmanager
def _awaited(func):
    """An async function under the fixture: every call (calibration, rounds, the call that
    gives benchmark() its return value) runs to completion on one event loop kept for the
    benchmark and closed after it -- as benchmark_callable awaits each call
    (csrc/run/aio.c).  Other callables pass as they are."""
    if not _is_async(func):
        yield func, None
        return
    import asyncio

    loop = asyncio.new_event_loop()

    @functools.wraps(func)
    def run_to_completion(*args, **kwargs):
        return loop.run_until_complete(func(*args, **kwargs))
    try:
        yield run_to_completion, loop
    finally:
        loop.close()


def _pool_segments(parts):
    """One BenchmarkStats over the samples of consecutive segments of one run (no run
    identity: they are one run, cut to interleave the reference): the core's one pooling
    rule (``_native._pool``), which keeps every field a direct ``benchmark_callable``
    result has (the test compares the sets)."""
    return _native_pool(parts)


# The busy-machine warning is said once per process while the machine stays busy
# (csrc/warn.c), by whichever run sees it first: often one of the harness's own runs
# (a calibration step, the reference workload, the session's environment probe), whose
# remarks are not the user's.  Its line is kept here until a result measured on the busy
# machine takes it (``BenchmarkFixture._record``); a run that reads the machine quiet
# drops it, as the C side forgets it then.
_BUSY_CAUSE = "busy machine"
_busy_note = []


#: The cause lines a benchmark's note holds at most (a warning shows four, and a fifth
#: naming the rest: warn.c).
MAX_NOTE_LINES = 5


def _cause_label(line):
    """The cause a warning's line names ("  noisy: IQR ..." -> "noisy")."""
    return line.strip().split(":", 1)[0]


def _busy_line(message):
    """The busy-machine line of a BenchmarkWarning's text (one line per cause)."""
    for line in str(message).splitlines():
        if line.strip().startswith(_BUSY_CAUSE + ":"):
            return line.strip()
    return None


def _note_busy(caught, stats=None):
    """Keep the busy line of the warnings ``caught`` in one of the harness's own runs;
    forget a kept one when ``stats`` read the machine quiet."""
    for w in caught:
        if (issubclass(w.category, BenchmarkWarning)
                and _BUSY_CAUSE in (getattr(w.message, "causes", None) or ())):
            line = _busy_line(w.message)
            if line is not None:
                _busy_note[:] = [line]
    if stats is not None and stats.machine_busy is False:
        _busy_note.clear()


def internal_run(func, *args, **kw):
    """``benchmark_callable`` for the harness's own purposes (the reference workload,
    the environment probe, a calibration step): its remarks are dropped, except a
    busy-machine warning, kept for the first result measured on the busy machine."""
    with warnings.catch_warnings(record=True) as caught, remedy_words(PYTEST):
        warnings.simplefilter("always", BenchmarkWarning)
        stats = benchmark_callable(func, *args, **kw)
    for w in caught:
        if not issubclass(w.category, BenchmarkWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    _note_busy(caught, stats)
    return stats


class FixtureAlreadyUsed(Exception):
    """The fixture was called a second time in one test (as in pytest-benchmark)."""


class RoundStats:
    """pytest-benchmark's ``Stats``: the per-round figures in seconds.

    Computed from the native samples.  Quartiles are NumPy-linear (type 7), as every
    percentile in this package; pytest-benchmark's own quartile rule differs slightly
    for small odd counts (see docs/migration.md)."""

    fields = ("min", "max", "mean", "stddev", "rounds", "median", "iqr", "q1", "q3",
              "iqr_outliers", "stddev_outliers", "outliers", "ld15iqr", "hd15iqr", "ops",
              "total")

    def __init__(self, data_s):
        import numpy as np

        d = np.asarray(data_s, dtype=np.float64)
        self.data = [float(x) for x in d]
        n = d.size
        self.rounds = int(n)
        self.min = float(d.min())
        self.max = float(d.max())
        self.mean = float(d.mean())
        self.stddev = float(d.std(ddof=1)) if n > 1 else 0.0
        self.median = float(np.percentile(d, 50))
        self.q1 = float(np.percentile(d, 25))
        self.q3 = float(np.percentile(d, 75))
        self.iqr = self.q3 - self.q1
        lo, hi = self.q1 - 1.5 * self.iqr, self.q3 + 1.5 * self.iqr
        self.iqr_outliers = int(((d < lo) | (d > hi)).sum())
        self.stddev_outliers = int(((d < self.mean - self.stddev)
                                    | (d > self.mean + self.stddev)).sum())
        self.outliers = f"{self.stddev_outliers};{self.iqr_outliers}"
        inside = d[(d >= lo) & (d <= hi)]
        self.ld15iqr = float(inside.min()) if inside.size else self.min
        self.hd15iqr = float(inside.max()) if inside.size else self.max
        self.total = float(d.sum())
        self.ops = self.rounds / self.total if self.total > 0 else 0.0

    def as_dict(self):
        return {f: getattr(self, f) for f in self.fields}


class BenchmarkMetadata:
    """What ``benchmark.stats`` is after a run: pytest-benchmark's ``Metadata`` shape
    (``.stats`` with the per-round figures, ``benchmark.stats["median"]``), plus
    ``.native``, our ``BenchmarkStats`` with percentiles, CI and memory."""

    def __init__(self, fixture, native, iterations, options):
        self.fixture = fixture
        self.native = native
        self.iterations = iterations
        self.options = options
        self.stats = RoundStats(native.samples_ms / 1e3)

    name = property(lambda self: self.fixture.name)
    fullname = property(lambda self: self.fixture.fullname)
    group = property(lambda self: self.fixture.group)
    param = property(lambda self: self.fixture.param)
    params = property(lambda self: self.fixture.params)
    extra_info = property(lambda self: self.fixture.extra_info)
    cprofile_stats = property(lambda self: self.fixture.cprofile_stats)

    @property
    def has_error(self):
        return self.fixture.has_error

    @has_error.setter
    def has_error(self, value):   # a generate_json hook wrapper may clear it
        self.fixture.has_error = value

    def as_dict(self, include_data=True, flat=False, stats=True, cprofile=None):
        """The JSON entry of this result (pytest-benchmark's keys and ours)."""
        from . import report

        d = report.bench_to_json(self.fixture, include_data)
        if not stats:
            d.pop("stats", None)
        elif flat:
            d.update(d.pop("stats"))
        return d

    def __bool__(self):
        return self.stats.rounds > 0

    def __getitem__(self, key):
        try:
            return getattr(self.stats, key)
        except AttributeError:
            return getattr(self, key)

    def get(self, key, default=None):
        try:
            return self[key]
        except AttributeError:
            return default


class _RoundDriver:
    """setup/teardown for pedantic rounds, run inside the native loop's sync hook.

    The native loop runs ``sync; t0; func(); sync; t1`` for each timed call
    (docs/methodology.md).  Called with ``num_warmup=0`` the sync hook is therefore
    called alternately before the clock starts (odd calls) and before it stops (even
    calls).  The opening call is where the previous round's ``teardown`` and the next
    round's ``setup`` run: outside the timed region.  The closing call only does the
    device sync."""

    def __init__(self, make_arguments, teardown, device_sync):
        self.make_arguments = make_arguments
        self.teardown = teardown
        self.device_sync = device_sync
        self.args = ()
        self.kwargs = {}
        self.pending = False     # a round's arguments were used and wait for teardown
        self.calls = 0
        self.last = None         # the latest round's result

    def finish(self):
        if self.pending:
            self.pending = False
            if self.teardown is not None:
                self.teardown(*self.args, **self.kwargs)

    def sync(self):
        self.calls += 1
        if self.device_sync is not None:
            self.device_sync()
        if self.calls % 2 == 1:          # opening: before t0
            self.last = None
            self.finish()
            self.args, self.kwargs = self.make_arguments()
            self.pending = True


def _fmt_time(seconds):
    """``12.34us``: pytest-benchmark's compact time format (its verbose log reads so)."""
    for unit, scale in (("", 1.0), ("m", 1e3), ("u", 1e6)):
        if seconds >= 1.0 / scale:
            return f"{seconds * scale:.2f}{unit}"
    return f"{seconds * 1e9:.2f}n"


def _slug(name):
    return re.sub(r"[\\/:*?<>| ]+", "_", name)


def _z(confidence):
    return statistics.NormalDist().inv_cdf(0.5 + confidence / 2.0)


def _timer_precision(timer):
    """The smallest step a Python-level timer shows between two reads (seconds): up to
    100 readings, one second at most."""
    best = None
    points = 0
    deadline = time.monotonic() + 1.0
    prev = timer()
    while points < 100 and time.monotonic() < deadline:
        for _ in range(10):
            t1 = timer()
            t2 = timer()
            dt = t2 - t1
            if dt > 0:
                break
        else:
            dt = t2 - prev
            if not dt > 0:
                continue
        best = dt if best is None else min(best, dt)
        points += 1
        prev = timer()
    return best if best is not None else 1e-9


class BenchmarkFixture:
    """The object a test receives as ``benchmark``.

    ``benchmark(func, *args, **kwargs)`` times ``func`` and returns its result;
    ``benchmark.pedantic(target, args=(), kwargs=None, setup=None, teardown=None,
    rounds=1, warmup_rounds=0, iterations=1)`` gives exact control;
    ``benchmark.weave(target, **aspectlib_options)`` times the first call of ``target``
    made by the test (aspectlib); ``benchmark.load(func, *args, qps=..., **options)`` runs
    it under load (``benchmark_load``) and returns the ``LoadStats``.  Only one of them may
    be used, once, per test (``FixtureAlreadyUsed``)."""

    _precisions = {}     # Python-level timer -> its precision (seconds), per process

    def __init__(self, node, options, add_stats, disabled, logger=None, warner=None):
        self.name = node.name
        self.fullname = node.nodeid
        callspec = getattr(node, "callspec", None)
        self.param = callspec.id if callspec is not None else None
        self.params = dict(callspec.params) if callspec is not None else None
        self.group = options.get("group")
        self.extra_info = {}
        self.disabled = disabled
        self.has_error = False
        self.skipped = False
        self.stats = None
        self.warnings = []
        self.reference_s = None      # median of reference_workload around this benchmark
        self.native_clock = True     # the rounds were timed by the C loop
        # pytest-benchmark's names (read when the fixture runs; see the module doc)
        timer = options.get("timer") or TIMER_DEFAULT
        self._timer = load_timer(timer) if isinstance(timer, str) else timer
        self._min_rounds = int(options.get("min_rounds", 5))
        self._max_time = float(options.get("max_time", 1.0))
        self._min_time = float(options.get("min_time", 0.000005))
        self._calibration_precision = int(options.get("calibration_precision", 10))
        precision, confidence = options.get("precision"), options.get("confidence", 0.99)
        self._precision = float(precision) if precision and confidence else None
        self._confidence = float(confidence) if precision and confidence else None
        self._disable_gc = bool(options.get("disable_gc", False))
        self._warmup = options.get("warmup", "auto")
        self._warmup_iterations = int(options.get("warmup_iterations", 100000))
        self._options = options      # ours: max_rounds, device, sync_fn, track_*, reference
        # --benchmark-instructions: this process runs under callgrind; count, do not time
        self._instructions = bool(options.get("instructions"))
        self.cprofile = bool(options.get("cprofile"))
        self.cprofile_loops = options.get("cprofile_loops", 1)
        self.cprofile_dump = options.get("cprofile_dump") or None
        self.cprofile_stats = None
        self.load_stats = None       # benchmark.load(...)'s LoadStats
        self._add_stats = add_stats
        self._logger = logger
        self._warner = warner
        self._cleanup_callbacks = []
        self._mode = None

    def __repr__(self):
        # pytest shows a failing test's arguments: say which interface this is (the
        # name pytest-benchmark users and tools look for) and who provides it
        return (f"<pytest_benchmark.fixture.BenchmarkFixture object at {id(self):#x} "
                f"(spatialhub.utils.profiling.pytest_plugin)>")

    @property
    def enabled(self):
        return not self.disabled

    # -- the calling conventions -----------------------------------------------------

    def __call__(self, function_to_benchmark, *args, **kwargs):
        self._claim("benchmark(...)")
        try:
            # every run of the fixture's own (calibration, reference, rounds) speaks the
            # plugin's options
            with remedy_words(PYTEST), _awaited(function_to_benchmark) as (func, loop):
                result = self._raw(func, args, kwargs)
                self._loop_overhead(loop)
                return result
        except BaseException:
            self.has_error = True
            raise

    def pedantic(self, target, args=(), kwargs=None, setup=None, teardown=None, rounds=1,
                 warmup_rounds=0, iterations=1):
        self._claim("benchmark.pedantic(...)")
        try:
            with remedy_words(PYTEST), _awaited(target) as (func, loop):
                result = self._raw_pedantic(func, args, kwargs, setup, teardown, rounds,
                                            warmup_rounds, iterations)
                self._loop_overhead(loop)
                return result
        except BaseException:
            self.has_error = True
            raise

    def _loop_overhead(self, loop):
        """An async function's result says what its event loop costs a call."""
        native = getattr(self.stats, "native", None)
        if loop is not None and native is not None:
            native.loop_overhead_ms = _loop_overhead_ms(loop)

    def load(self, func, *args, qps=None, **kwargs):
        """Latency under load: ``benchmark_load(func, *args, qps=qps, **kwargs)``, with the
        plugin's ``device`` and ``sync_fn`` unless given.  Returns the ``LoadStats``
        (also ``benchmark.load_stats``); the test's row in the report holds its latencies
        (intended arrival to completion) and ``extra_info['load']`` its figures.  A run
        that completed no request (``qps * duration_s`` under one arrival) has no row:
        its LoadStats (every figure None) comes back and its ``NoRequestsWarning`` reaches
        the test as a warning.  Keywords are benchmark_load's options; bind func's own
        with functools.partial.  Disabled (--benchmark-disable): func is called once and
        None returned."""
        self._claim("benchmark.load(...)")
        try:
            return self._raw_load(func, args, qps, kwargs)
        except BaseException:
            self.has_error = True
            raise

    def weave(self, target, **kwargs):
        """Benchmark the first call of ``target`` (an object, or a ``'module.name'``
        string) the test makes: aspectlib weaves a wrapper in, rolled back when the
        test ends.  ``kwargs`` go to ``aspectlib.weave`` (``lazy=True``, ...)."""
        try:
            import aspectlib
        except ImportError as exc:
            raise ImportError(
                "benchmark.weave / benchmark_weave needs aspectlib: pip install aspectlib") from exc

        def aspect(function):
            def wrapper(*args, **kw):
                return self(function, *args, **kw)
            return wrapper

        self._cleanup_callbacks.append(aspectlib.weave(target, aspect, **kwargs).rollback)

    patch = weave

    def _cleanup(self):
        while self._cleanup_callbacks:
            self._cleanup_callbacks.pop()()
        if not self._mode and not self.skipped and self._logger is not None:
            self._logger.warning("Benchmark fixture was not used at all in this test!",
                                 warner=self._warner, suspend=True)

    # -- internals -----------------------------------------------------------------------

    def _keep_warning(self, msg):
        """One note per benchmark, one line per cause: the segments and runs of one
        benchmark say the same causes with their own figures (the first line of each
        cause is kept); a cause not said yet joins the note, up to MAX_NOTE_LINES."""
        lines = [line for line in msg.split("\n") if line.strip()]
        if not self.warnings:
            self.warnings.append("\n".join(lines[:1 + MAX_NOTE_LINES]))
            return
        said = {_cause_label(line) for line in self.warnings[0].split("\n")[1:]}
        new = [line for line in lines[1:] if _cause_label(line) not in said]
        room = 1 + MAX_NOTE_LINES - len(self.warnings[0].split("\n"))
        if new and room > 0:
            self.warnings[0] += "\n" + "\n".join(new[:room])

    def _claim(self, mode):
        if self._mode:
            self.has_error = True
            raise FixtureAlreadyUsed(
                f"Fixture can only be used once. Previously it was used in {self._mode} mode.")
        self._mode = mode

    def _debug(self, text, **markup):
        if self._logger is not None:
            self._logger.debug(text, **markup)

    def _native_timer(self):
        return self._timer is time.perf_counter

    def _native_kw(self):
        o = self._options
        kw = dict(device=o.get("device") or "CPU", track_ram=bool(o.get("track_ram", True)),
                  track_vram=bool(o.get("track_vram", True)),
                  # counting: a collection landing among the counted calls moves the mean
                  disable_gc=self._disable_gc or self._instructions,
                  progress=False, name=self.name)
        if o.get("sync_fn") is not None:
            kw["sync_fn"] = o["sync_fn"]
        return kw

    def _run_native(self, func, args, kwargs, keep_warnings=True, **kw):
        """benchmark_callable with the harness's warnings kept for the report (a test
        suite run with -W error must not fail on a remark about the measurement)."""
        if kwargs and not _HARNESS_KEYWORDS.isdisjoint(kwargs):
            func, args, kwargs = functools.partial(func, *args, **kwargs), (), {}
        with warnings.catch_warnings(record=True) as caught, remedy_words(PYTEST):
            warnings.simplefilter("always", BenchmarkWarning)
            stats = benchmark_callable(func, *args, **kw, **kwargs)
        said_busy = False
        for w in caught:
            if issubclass(w.category, BenchmarkWarning):
                if not keep_warnings or self._instructions:   # (counting: remarks on
                    continue                                    # valgrind's times)
                msg = str(w.message)
                said_busy = said_busy or _busy_line(msg) is not None
                self._keep_warning(msg)
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        if not self._instructions:   # (counting: the load does not move a count)
            if not keep_warnings:    # a calibration step: its busy warning is kept
                _note_busy(caught, stats)
            elif said_busy:          # said to the user with this result: none is due
                _busy_note.clear()
        return stats

    def _reference_on(self):
        """The reference is timed for CPU benchmarks on the native clock only: not with a
        device or sync_fn (device time does not follow the CPU's speed), nor another
        timer, nor when switched off."""
        o = self._options
        return (not self._instructions and bool(o.get("reference", True))
                and o.get("sync_fn") is None
                and (o.get("device") or "CPU").upper() == "CPU" and self._native_timer())

    def _reference_samples(self, n, warmup=5):
        """``n`` timed calls of ``reference_workload`` (milliseconds)."""
        s = internal_run(reference_workload, name="reference", num_warmup=warmup,
                         num_iters=n, track_ram=False, track_vram=False, progress=False)
        return s.samples_ms

    def _reference(self):
        """Median (s) of ``reference_workload`` now, or None when not measured."""
        if not self._reference_on():
            return None
        return float(np.median(self._reference_samples(150))) / 1e3

    # -- calibration, shared by both clocks ---------------------------------------------

    def _precision_of_timer(self):
        """The timer's precision (s).  The native clock's is the loop's own cost of one
        round (the overhead it measures on a native no-op): ~40 ns here."""
        if self._native_timer():
            from .._native import _noop, _overhead_ms

            if _overhead_ms() is None:
                internal_run(_noop, num_warmup=0, num_iters=1, track_ram=False,
                             track_vram=False, progress=False)
            ms = _overhead_ms()
            if ms is not None and ms > 0:
                return ms / 1e3
        timer = self._timer
        if timer not in self._precisions:
            self._precisions[timer] = _timer_precision(timer)
            self._debug(f"  Computing precision for {timer_name(timer)} ... "
                        f"{_fmt_time(self._precisions[timer])}s.", blue=True, bold=True)
        return self._precisions[timer]

    def _calibrate_timer(self, runner):
        """Iterations per round: ``runner(loops)`` times one round of ``loops`` calls (s).
        Grow 10x until a round reaches half a tenth of the target, then estimate; stop
        once a round lasts ``max(min_time, calibration_precision x timer precision)``."""
        precision = self._precision_of_timer()
        cal = max(1, int(self._calibration_precision))
        min_time = max(self._min_time, precision * cal)
        estimate_at = min_time * 5 / cal
        clock = (f"{timer_name(self._timer)} (native clock)" if self._native_timer()
                 else timer_name(self._timer))
        self._debug("")
        self._debug(f"  Calibrating to target round {_fmt_time(min_time)}s; will estimate when "
                    f"reaching {_fmt_time(estimate_at)}s (using: {clock}, precision: "
                    f"{_fmt_time(precision)}s).", yellow=True, bold=True)
        loops = 1
        while True:
            duration = runner(loops)
            self._debug(f"    Measured {loops} iterations: {_fmt_time(duration)}s.", yellow=True)
            if duration >= min_time or loops >= MAX_LOOPS:
                break
            if duration >= estimate_at:
                loops = max(1, math.ceil(min_time * loops / duration))
                self._debug(f"    Estimating {loops} iterations.", green=True)
                if loops == 1:
                    break
            else:
                loops = min(loops * 10, MAX_LOOPS)
        return duration, loops

    def _rounds_for(self, duration):
        rounds = math.ceil(self._max_time / duration) if duration > 0 else self._max_rounds()
        return max(self._min_rounds, min(rounds, self._max_rounds()))

    def _max_rounds(self):
        return int(self._options.get("max_rounds", 10000))

    def _warmup_rounds(self, duration, loops):
        w = self._warmup
        if w in (False, "off", None, 0):
            return 0
        cap = 10 if w == "auto" else max(1, self._warmup_iterations // loops)
        budget = int(0.1 * self._max_time / duration) if duration > 0 else cap
        return max(1, min(cap, budget))

    def _precise_enough(self, data):
        """pytest-benchmark 5.3's stopping rule: the mean's relative margin of error at
        ``_confidence`` is under ``_precision`` (after ``_min_rounds``, 2 at least)."""
        n = len(data)
        if n < max(2, self._min_rounds):
            return False
        d = np.asarray(data, dtype=np.float64)
        mean = float(d.mean())
        if not mean > 0:
            return False
        margin = _z(self._confidence) * float(d.std(ddof=1)) / math.sqrt(n) / mean
        if margin <= self._precision:
            self._debug(f"  Reached precision ±{margin:.2%} (target ±{self._precision:.2%}) "
                        f"after {n} rounds.", yellow=True)
            return True
        return False

    def _run_until_precise(self, runner, loops_range, stats, max_rounds):
        """Rounds of ``runner(loops_range)`` into ``stats.update`` until the precision
        rule holds or ``max_rounds`` ran (the Python-timer path; running sums)."""
        z = _z(self._confidence)
        mean = m2 = 0.0
        for n in range(1, max_rounds + 1):
            d = runner(loops_range)
            stats.update(d)
            delta = d - mean
            mean += delta / n
            m2 += delta * (d - mean)
            if n >= self._min_rounds and n >= 2 and mean > 0:
                margin = z * math.sqrt(m2 / (n - 1)) / math.sqrt(n) / mean
                if margin <= self._precision:
                    self._debug(f"  Reached precision ±{margin:.2%} (target "
                                f"±{self._precision:.2%}) after {n} rounds.", yellow=True)
                    return

    # -- benchmark(func) -----------------------------------------------------------------

    def _raw(self, func, args, kwargs):
        if not callable(func):
            raise TypeError(f"benchmark(): the function to benchmark must be callable, got "
                            f"{type(func).__name__}")
        loops = 1
        if self.enabled:
            if self._instructions:
                loops = self._raw_counted(func, args, kwargs)
            elif self._native_timer():
                loops = self._raw_native(func, args, kwargs)
            else:
                loops = self._raw_python(func, args, kwargs)
        if self.enabled and self.cprofile:
            return self._profile(func, args, kwargs, loops)
        return func(*args, **kwargs)

    def _raw_counted(self, func, args, kwargs):
        """--benchmark-instructions: ``instructions.WARMUP`` warm-up calls (none with
        --benchmark-warmup=off), then --benchmark-min-rounds counted rounds of one call.
        No calibration and no reference workload: a count needs neither, and each call
        costs ~50x its native time under callgrind.  The harness's remarks on the times
        (valgrind's) are not kept."""
        from ..instructions import WARMUP

        warmup = 0 if self._warmup in (False, "off") else WARMUP
        rounds = max(1, self._min_rounds)
        self._debug(f"  Counting {rounds} rounds x 1 iteration after {warmup} warm-up calls "
                    "(callgrind) ...", yellow=True, bold=True)
        native = self._run_native(func, args, kwargs, keep_warnings=False, **self._native_kw(),
                                  num_warmup=warmup, num_iters=rounds)
        self._record(native, 1)
        return 1

    def _raw_native(self, func, args, kwargs):
        kw = self._native_kw()
        quiet = dict(kw, track_ram=False, track_vram=False)

        calls = [0]
        first = []      # the function's first call (ms): the calibration's first step

        def runner(loops):
            # the first round is the function's first call (cold, maybe slow): when it is
            # short, five warm rounds follow and the fastest stands for the step, as
            # later steps do (one cold call would under-count the iterations)
            if loops == 1:
                fn, a, k = func, args, kwargs
            else:
                fn, a, k = _looped(func, loops, args, kwargs), (), {}
            s = self._run_native(fn, a, k, keep_warnings=False, **quiet,
                                 num_warmup=0, num_iters=1 if calls[0] == 0 else 5)
            if calls[0] == 0:
                first.append(float(s.samples_ms[0]))
            calls[0] += 1
            best = float(np.min(s.samples_ms)) / 1e3
            if calls[0] == 1 and best < WARM_RECHECK_S:
                best = min(best, runner(loops))
            return best

        duration, loops = self._calibrate_timer(runner)
        if loops == 1:
            round_fn, a, k = func, args, kwargs
        else:
            round_fn, a, k = _looped(func, loops, args, kwargs), (), {}
        rounds = self._rounds_for(duration)
        num_warmup = self._warmup_rounds(duration, loops)
        self._debug(f"  Running {rounds} rounds x {loops} iterations ...", yellow=True, bold=True)
        started = time.monotonic()
        native, self.reference_s = self._timed_rounds(round_fn, a, k, kw, num_warmup, rounds)
        self._debug(f"  Ran for {_fmt_time(time.monotonic() - started)}s.", yellow=True, bold=True)
        if loops > 1:
            native = _per_iteration(native, loops)
        if first:
            # the first call of the function in this benchmark was the calibration's (the
            # timed rounds' own first call is a warm one, and with loops a round's)
            native.first_call_ms = first[0]
        self._record(native, loops)
        return loops

    def _timed_rounds(self, round_fn, args, kwargs, kw, num_warmup, rounds):
        """The timed rounds in up to REF_SEGMENTS segments.  With the reference on, a
        short block of the reference workload runs before each segment and after the
        last: the machine's speed is sampled all through the benchmark's own window, not
        only before and after it (on a busy 2-core VM the corrected median's run-to-run
        spread was smaller in 10 of 12 measurements: bench/bench_reference.py,
        docs/guide.md).  With ``--benchmark-precision`` the rule is checked after each
        segment.  Returns the pooled stats and the reference's median (s) or None."""
        ref = self._reference_on()
        if ref or self._precision is not None:
            segments = max(1, min(REF_SEGMENTS, rounds // REF_MIN_SEGMENT))
        else:
            segments = 1
        sizes = [rounds // segments + (i < rounds % segments) for i in range(segments)]
        refs, parts, data = [], [], []
        for i, size in enumerate(sizes):
            if ref:
                refs.append(self._reference_samples(REF_BLOCK, warmup=5 if i == 0 else 1))
            # later segments: no warm-up call, the function is warm; its first call after
            # the reference block is a sample like any other (the median does not mind)
            part = self._run_native(round_fn, args, kwargs, **kw,
                                    num_warmup=num_warmup if i == 0 else 0, num_iters=size)
            parts.append(part)
            if self._precision is not None and i + 1 < len(sizes):
                data.extend(float(x) for x in part.samples_ms)
                if self._precise_enough(data):
                    break
        if ref:
            refs.append(self._reference_samples(REF_BLOCK, warmup=1))
        ref_s = float(np.median(np.concatenate(refs))) / 1e3 if ref else None
        return _pool_segments(parts), ref_s

    def _make_runner(self, func, args, kwargs):
        """pytest-benchmark's runner: one round of ``loops_range`` calls timed by
        ``self._timer`` in Python (seconds); with no range, one call and its result."""
        def runner(loops_range, timer=None):
            timer = timer or self._timer
            gc_was = gc.isenabled()
            if self._disable_gc:
                gc.disable()
            try:
                if loops_range:
                    start = timer()
                    for _ in loops_range:
                        func(*args, **kwargs)
                    return timer() - start
                start = timer()
                result = func(*args, **kwargs)
                return timer() - start, result
            finally:
                if gc_was:
                    gc.enable()
        return runner

    def _raw_python(self, func, args, kwargs):
        """Another timer than the native clock: rounds timed in Python with it."""
        runner = self._make_runner(func, args, kwargs)
        duration, loops = self._calibrate_timer(lambda n: runner(range(n)))
        rounds = self._rounds_for(duration)
        loops_range = range(loops)
        for _ in range(self._warmup_rounds(duration, loops)):
            runner(loops_range)
        self._debug(f"  Running {rounds} rounds x {loops} iterations ...", yellow=True, bold=True)
        started = time.monotonic()
        collected = _Collector()
        if self._precision is None:
            for _ in range(rounds):
                collected.update(runner(loops_range))
        else:
            self._run_until_precise(runner, loops_range, collected, rounds)
        self._debug(f"  Ran for {_fmt_time(time.monotonic() - started)}s.", yellow=True, bold=True)
        self.native_clock = False
        self._record(_python_stats(self.name, collected.data, loops), loops)
        return loops

    def _profile(self, func, args, kwargs, loops):
        """One more run of the function under cProfile (after the timed rounds, so the
        profiler's cost is in no sample); its result is the call's."""
        import cProfile

        n = self.cprofile_loops if self.cprofile_loops is not None else loops
        profile = cProfile.Profile()
        result = None
        for _ in range(max(1, int(n))):
            result = profile.runcall(func, *args, **kwargs)
        self._save_cprofile(profile)
        return result

    def _save_cprofile(self, profile):
        import pstats
        from pathlib import Path

        from ..instructions import probing

        self.cprofile_stats = pstats.Stats(profile)
        if self.cprofile_dump and not (self._instructions and probing()):   # (a probe)
            path = Path(f"{self.cprofile_dump}-{_slug(self.name)}.prof")
            path.parent.mkdir(parents=True, exist_ok=True)
            self.cprofile_stats.dump_stats(str(path))
            if self._logger is not None:
                self._logger.info(f"Saved profile: {path}", bold=True)

    def _record(self, native, iterations, ref_before=None):
        if self._instructions:   # the lowest count of the counted runs (instructions.RUNS)
            from ..instructions import lowest

            native.instructions_per_call = lowest(self.fullname, native.instructions_per_call)
        elif _busy_note and native.machine_busy:
            # the busy-machine warning one of the harness's own runs got (said once per
            # process): this is the first result measured on the busy machine
            if not any(_busy_line(w) is not None for w in self.warnings):
                self._keep_warning(f"benchmark {self.name!r} (statistics.md#the-causes):\n"
                                   f"  {_busy_note[0]}")
            _busy_note.clear()
        elif native.machine_busy is False:   # measured on a quiet machine: none is due
            _busy_note.clear()
        ref_after = self._reference() if ref_before is not None else None
        if ref_before and ref_after:
            self.reference_s = math.sqrt(ref_before * ref_after)
        o = self._options
        options = {
            "disable_gc": self._disable_gc,
            "timer": getattr(self._timer, "__name__", repr(self._timer)),
            "min_rounds": self._min_rounds,
            "max_time": self._max_time,
            "min_time": self._min_time,
            "precision": self._precision,
            "confidence": self._confidence,
            "warmup": self._warmup,
            "device": o.get("device") or "CPU",
        }
        self.stats = BenchmarkMetadata(self, native, iterations, options)
        self._add_stats(self)
        return self.stats

    # -- benchmark.load(...) -------------------------------------------------------------

    def _raw_load(self, func, args, qps, kwargs):
        if not callable(func):
            raise TypeError(f"benchmark.load(): func must be callable, got {type(func).__name__}")
        if not self.enabled:
            func(*args)
            return None
        if self._instructions:
            import pytest

            pytest.skip("benchmark.load: latency under load is wall time, which "
                        "--benchmark-instructions does not measure")
        o = self._options
        kw = dict(name=self.name, device=o.get("device") or "CPU")
        if o.get("sync_fn") is not None:
            kw["sync_fn"] = o["sync_fn"]
        kw.update(kwargs)
        with warnings.catch_warnings(record=True) as caught, remedy_words(PYTEST):
            warnings.simplefilter("always", BenchmarkWarning)
            result = benchmark_load(func, *args, qps=qps, **kw)
        measured = result.completed > 0
        for w in caught:
            if issubclass(w.category, BenchmarkWarning) and measured:
                self._keep_warning(str(w.message))
            else:   # a run with no row: its warning is the test's only word of it
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        figures = result.to_dict()
        figures.pop("env", None)
        self.extra_info["load"] = figures
        self.load_stats = result
        if measured:
            native = _stats_from_samples(result.latencies_ms)
            native.name, native.device = self.name, result.device
            native.machine_busy = result.machine_busy
            self._record(native, 1)
        return result

    # -- benchmark.pedantic(...) ---------------------------------------------------------

    def _raw_pedantic(self, target, args, kwargs, setup, teardown, rounds, warmup_rounds,
                      iterations):
        if kwargs is None:
            kwargs = {}
        has_args = bool(args or kwargs)
        if not isinstance(iterations, int) or isinstance(iterations, bool) or iterations < 1:
            raise ValueError("Must have positive int for `iterations`.")
        if not isinstance(rounds, int) or isinstance(rounds, bool) or rounds < 1:
            raise ValueError("Must have positive int for `rounds`.")
        if (not isinstance(warmup_rounds, int) or isinstance(warmup_rounds, bool)
                or warmup_rounds < 0):
            raise ValueError("Must have positive int for `warmup_rounds`.")
        if iterations > 1 and setup:
            raise ValueError("Can't use more than 1 `iterations` with a `setup` function.")
        if not callable(target):
            raise TypeError(f"benchmark.pedantic(): target must be callable, got "
                            f"{type(target).__name__}")

        def make_arguments(args=args, kwargs=kwargs):
            if setup:
                maybe = setup()
                if maybe:
                    if has_args:
                        raise TypeError(
                            "Can't use `args` or `kwargs` if `setup` returns the arguments.")
                    args, kwargs = maybe
            return args, kwargs

        if self.disabled:
            a, k = make_arguments()
            return target(*a, **k)
        if self._instructions or self._native_timer():
            result = self._pedantic_native(target, args, kwargs, make_arguments, setup,
                                           teardown, rounds, warmup_rounds, iterations)
        else:
            result = self._pedantic_python(target, make_arguments, teardown, rounds,
                                           warmup_rounds, iterations)
        if self.cprofile:
            import cProfile

            n = self.cprofile_loops if self.cprofile_loops is not None else iterations
            profile = cProfile.Profile()
            a, k = make_arguments()
            for _ in range(max(1, int(n))):
                profile.runcall(target, *a, **k)
                if teardown is not None:
                    teardown(*a, **k)
            self._save_cprofile(profile)
        return result

    def _pedantic_python(self, target, make_arguments, teardown, rounds, warmup_rounds,
                         iterations):
        loops_range = range(iterations) if iterations > 1 else None
        for _ in range(warmup_rounds):
            a, k = make_arguments()
            self._make_runner(target, a, k)(loops_range)
            if teardown is not None:
                teardown(*a, **k)
        durations, result = [], None
        for _ in range(rounds):
            a, k = make_arguments()
            runner = self._make_runner(target, a, k)
            if loops_range:
                durations.append(runner(loops_range))
            else:
                d, result = runner(None)
                durations.append(d)
            if teardown is not None:
                teardown(*a, **k)
        self.native_clock = False
        self._record(_python_stats(self.name, durations, iterations), iterations)
        if loops_range:
            a, k = make_arguments()
            result = target(*a, **k)
            if teardown is not None:
                teardown(*a, **k)
        return result

    def _pedantic_native(self, target, args, kwargs, make_arguments, setup, teardown, rounds,
                         warmup_rounds, iterations):
        kw = self._native_kw()
        box = {}
        count = [0]
        ref = self._reference()

        if setup is None and teardown is None:
            # fixed arguments: the native loop calls the round directly.
            if iterations == 1:
                def round_fn(*a, **k):
                    r = target(*a, **k)
                    count[0] += 1
                    if count[0] == warmup_rounds + rounds:
                        box["result"] = r    # the last timed round's result
                    return r
            else:
                def round_fn(*a, **k):
                    for _ in range(iterations):
                        target(*a, **k)
            native = self._run_native(round_fn, tuple(args), dict(kwargs), **kw,
                                      num_warmup=warmup_rounds, num_iters=rounds)
        else:
            native = self._pedantic_with_setup(target, make_arguments, teardown, rounds,
                                               warmup_rounds, iterations, kw, box)
        if iterations > 1:
            native = _per_iteration(native, iterations)
        self._record(native, iterations, ref)
        if "result" in box:
            return box["result"]
        # looped rounds keep no result: one more call for it, as pytest-benchmark does
        a, k = make_arguments()
        result = target(*a, **k)
        if teardown is not None:
            teardown(*a, **k)
        return result

    def _pedantic_with_setup(self, target, make_arguments, teardown, rounds, warmup_rounds,
                             iterations, kw, box):
        device_sync = kw.pop("sync_fn", None)
        if device_sync is None and "cuda" in kw["device"].lower():
            from .._native import get_cuda_sync_fn

            device_sync = get_cuda_sync_fn()
            if device_sync is None:
                raise RuntimeError(
                    f"benchmark.pedantic(): device={kw['device']!r} but no CUDA driver or "
                    "device was found; pass sync_fn= in @pytest.mark.benchmark or use "
                    "device='CPU'")
        # warm-up rounds: untimed, so plainly in Python (with the device sync).
        for _ in range(warmup_rounds):
            a, k = make_arguments()
            for _ in range(iterations):
                target(*a, **k)
            if device_sync is not None:
                device_sync()
            if teardown is not None:
                teardown(*a, **k)
        driver = _RoundDriver(make_arguments, teardown, device_sync)
        d = driver
        if iterations == 1:
            def round_fn():
                # the result stays referenced until the next opening sync, so that it
                # is released outside the timed region; the last one is returned.
                r = d.last = target(*d.args, **d.kwargs)
                return r
        else:
            loops = range(iterations)

            def round_fn():
                for _ in loops:
                    target(*d.args, **d.kwargs)

        try:
            native = self._run_native(round_fn, (), {}, **kw, sync_fn=driver.sync,
                                      num_warmup=0, num_iters=rounds)
        except BaseException:
            driver.pending = False   # no teardown after a failing round: as pytest-benchmark
            raise
        if iterations == 1:
            box["result"] = driver.last
        driver.last = None
        driver.finish()
        return native


class _Collector:
    """What ``_run_until_precise`` feeds: ``update(duration)`` per round."""

    def __init__(self):
        self.data = []

    def update(self, duration):
        self.data.append(duration)


def _looped(func, loops, args=(), kwargs=None):
    """One round of ``loops`` calls of ``func(*args, **kwargs)``, the arguments bound
    here.  The loop's own cost (some 15-30 ns a call, the least without arguments) is in
    the round, as it is in pytest-benchmark's."""
    r = range(loops)
    if kwargs:
        def round_of_calls():
            for _ in r:
                func(*args, **kwargs)
    elif args:
        def round_of_calls():
            for _ in r:
                func(*args)
    else:
        def round_of_calls():
            for _ in r:
                func()
    return round_of_calls


def _per_iteration(native, loops):
    """The stats of rounds of ``loops`` calls, each round's time divided by ``loops``:
    every field of ``native`` is kept, per call where it is a time or a count per round
    (the first call and the warm-up are those of the first rounds, per call; settling is
    counted in calls)."""
    per_call = _stats_from_samples(native.samples_ms / loops)
    for attr in ("name", "device", "ram_delta_mb", "vram_delta_mb", "ram_peak_method", "env",
                 "overhead_ms", "torch_max_allocated_mb", "counter_source", "batch_size",
                 "params", "cache", "target_met", "gpu_telemetry", "host_share"):
        try:
            setattr(per_call, attr, getattr(native, attr))
        except (AttributeError, TypeError):
            pass
    for attr in ("instructions_per_call", "cycles_per_call", "first_call_ms", "gpu_median_ms",
                 "gpu_p95_ms", "minor_faults_per_iter", "major_faults_per_iter",
                 "vol_ctx_switches_per_iter", "invol_ctx_switches_per_iter"):
        v = getattr(native, attr)   # a round's figure / its calls
        setattr(per_call, attr, None if v is None else v / loops)
    for attr in ("warmup_ms", "gpu_samples_ms"):
        v = getattr(native, attr)
        if v is not None:
            setattr(per_call, attr, tuple(float(x) / loops for x in v))
    if native.settle_calls is not None:
        per_call.settle_calls = native.settle_calls * loops
    per_call.warmup_iters = native.warmup_iters
    return _with_busy(per_call, native.machine_busy)


def _python_stats(name, durations_s, loops):
    """Stats of rounds timed in Python (another timer): per-iteration samples, no memory."""
    s = _stats_from_samples([float(d) / loops * 1e3 for d in durations_s])
    s.name = name
    return s
