"""The ``benchmark`` fixture: pytest-benchmark's calling conventions, our native loop.

Every timed call goes through ``benchmark_callable`` (C): the sync before and after
each call (``device=`` / ``sync_fn=``), integer-nanosecond clock, the sample buffer,
percentiles, the median's CI, peak RAM/VRAM.  What this module adds is the mapping
from pytest-benchmark's vocabulary (rounds, iterations, warm-up rounds, setup and
teardown) onto that loop.
"""
from __future__ import annotations

import functools
import math
import re
import warnings

import numpy as np

from .._native import BenchmarkStats, BenchmarkWarning, _stats_from_samples, benchmark_callable

__all__ = ["BenchmarkFixture", "FixtureAlreadyUsed", "BenchmarkMetadata", "RoundStats"]

# benchmark_callable's own keyword names: a func keyword argument with one of these
# names has to be bound with functools.partial instead of passed through.
_HARNESS_KEYWORDS = frozenset((
    "name", "device", "num_warmup", "num_iters", "track_ram", "track_vram", "sync_fn",
    "target_rel_ci", "max_time_s", "disable_gc", "progress",
))

# @pytest.mark.benchmark(...) keywords.  pytest-benchmark's own; the ones that tune
# its calibration of loops per round have no meaning here (we time every call) and are
# accepted, recorded in the JSON "options" and listed as ignored in the summary.
MARKER_OPTIONS = frozenset((
    "max_time", "min_rounds", "min_time", "timer", "group", "disable_gc", "warmup",
    "warmup_iterations", "calibration_precision", "cprofile",
    # ours
    "device", "sync_fn", "max_rounds", "track_ram", "track_vram", "reference",
))
IGNORED_OPTIONS = frozenset(("min_time", "timer", "calibration_precision", "cprofile"))


def reference_workload():
    """A fixed, interpreter-bound piece of work (~20 us) timed next to each CPU
    benchmark.  Its median says how fast the machine is at that moment; the gate divides
    a benchmark's change by the reference's change (docs/guide.md, "machine speed")."""
    return len("".join([str(i * 7) for i in range(300)]))


# A warning's figures, masked to tell warnings of one kind apart from another kind
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
# The reference next to benchmark(func): REF_BLOCK calls before each of up to
# REF_SEGMENTS segments of the timed rounds (REF_MIN_SEGMENT rounds each at least)
REF_SEGMENTS = 8
REF_MIN_SEGMENT = 5
REF_BLOCK = 20


def _pool_segments(parts):
    """One BenchmarkStats over the samples of consecutive segments of one run (no run
    identity: they are one run, cut to interleave the reference)."""
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    pooled = _stats_from_samples(np.concatenate([p.samples_ms for p in parts]))
    for attr in ("name", "device", "batch_size", "params", "env", "ram_peak_method",
                 "first_call_ms", "warmup_ms", "settle_calls", "cache"):
        try:
            setattr(pooled, attr, getattr(first, attr))
        except (AttributeError, TypeError):   # read-only where the summary owns it
            pass
    pooled.warmup_iters = sum(p.warmup_iters for p in parts)
    pooled.ram_delta_mb = max(p.ram_delta_mb for p in parts)
    pooled.vram_delta_mb = max(p.vram_delta_mb for p in parts)
    overheads = [p.overhead_ms for p in parts if p.overhead_ms is not None]
    pooled.overhead_ms = float(np.median(overheads)) if overheads else None
    allocated = [p.torch_max_allocated_mb for p in parts if p.torch_max_allocated_mb is not None]
    pooled.torch_max_allocated_mb = max(allocated) if allocated else None
    # OS counters per iteration: the segments' averages weighted by their iterations
    n = sum(p.timed_iters for p in parts)
    for attr in ("minor_faults_per_iter", "major_faults_per_iter",
                 "vol_ctx_switches_per_iter", "invol_ctx_switches_per_iter"):
        vals = [(getattr(p, attr), p.timed_iters) for p in parts]
        if n > 0 and all(v is not None for v, _ in vals):
            setattr(pooled, attr, sum(v * k for v, k in vals) / n)
    return pooled


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
    has_error = property(lambda self: self.fixture.has_error)

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


class BenchmarkFixture:
    """The object a test receives as ``benchmark``.

    ``benchmark(func, *args, **kwargs)`` times ``func`` and returns its result;
    ``benchmark.pedantic(target, args=(), kwargs=None, setup=None, teardown=None,
    rounds=1, warmup_rounds=0, iterations=1)`` gives exact control.  Only one of the
    two may be used, once, per test (``FixtureAlreadyUsed``)."""

    def __init__(self, node, options, add_stats, disabled):
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
        self._warning_keys = set()
        self.reference_s = None      # median of reference_workload around this benchmark
        self._options = options
        self._add_stats = add_stats
        self._mode = None

    @property
    def enabled(self):
        return not self.disabled

    # -- the two calling conventions -------------------------------------------------

    def __call__(self, function_to_benchmark, *args, **kwargs):
        self._claim("benchmark(...)")
        try:
            return self._raw(function_to_benchmark, args, kwargs)
        except BaseException:
            self.has_error = True
            raise

    def pedantic(self, target, args=(), kwargs=None, setup=None, teardown=None, rounds=1,
                 warmup_rounds=0, iterations=1):
        self._claim("benchmark.pedantic(...)")
        try:
            return self._raw_pedantic(target, args, kwargs, setup, teardown, rounds,
                                      warmup_rounds, iterations)
        except BaseException:
            self.has_error = True
            raise

    def weave(self, *args, **kwargs):
        raise NotImplementedError(
            "benchmark.weave / benchmark_weave (aspectlib) is not supported by spatialhub's "
            "benchmark fixture; call benchmark(func, ...) around the code instead")

    patch = weave

    # -- internals -----------------------------------------------------------------------

    def _claim(self, mode):
        if self._mode:
            self.has_error = True
            raise FixtureAlreadyUsed(
                f"Fixture can only be used once. Previously it was used in {self._mode} mode.")
        self._mode = mode

    def _native_kw(self):
        o = self._options
        kw = dict(device=o.get("device") or "CPU", track_ram=bool(o.get("track_ram", True)),
                  track_vram=bool(o.get("track_vram", True)),
                  disable_gc=bool(o.get("disable_gc", False)), progress=False,
                  name=self.name)
        if o.get("sync_fn") is not None:
            kw["sync_fn"] = o["sync_fn"]
        return kw

    def _run_native(self, func, args, kwargs, **kw):
        """benchmark_callable with the harness's warnings kept for the report (a test
        suite run with -W error must not fail on a remark about the measurement)."""
        if kwargs and not _HARNESS_KEYWORDS.isdisjoint(kwargs):
            func, args, kwargs = functools.partial(func, *args, **kwargs), (), {}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", BenchmarkWarning)
            stats = benchmark_callable(func, *args, **kw, **kwargs)
        for w in caught:
            if issubclass(w.category, BenchmarkWarning):
                # one note per kind: the segments of one benchmark(func) run say the same
                # thing with their own figures (the first segment's is kept)
                msg = str(w.message)
                key = _NUMBER.sub("#", msg)
                if key not in self._warning_keys:
                    self._warning_keys.add(key)
                    self.warnings.append(msg)
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return stats

    def _reference_on(self):
        """The reference is timed for CPU benchmarks only: not with a device or sync_fn
        (device time does not follow the CPU's speed), nor when switched off."""
        o = self._options
        return (bool(o.get("reference", True)) and o.get("sync_fn") is None
                and (o.get("device") or "CPU").upper() == "CPU")

    def _reference_samples(self, n, warmup=5):
        """``n`` timed calls of ``reference_workload`` (milliseconds)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", BenchmarkWarning)
            s = benchmark_callable(reference_workload, name="reference", num_warmup=warmup,
                                   num_iters=n, track_ram=False, track_vram=False,
                                   progress=False)
        return s.samples_ms

    def _reference(self):
        """Median (s) of ``reference_workload`` now, or None when not measured."""
        if not self._reference_on():
            return None
        return float(np.median(self._reference_samples(150))) / 1e3

    def _run_interleaved(self, func, args, kwargs, kw, num_warmup, rounds):
        """The timed rounds in up to REF_SEGMENTS segments, a short block of the reference
        workload before each and after the last: the machine's speed is sampled all
        through the benchmark's own window, not only before and after it: on a busy 2-core
        VM the corrected median's run-to-run spread was smaller in 10 of 12 measurements
        (bench/bench_reference.py; docs/guide.md).  Returns the pooled stats and the
        reference's median (s)."""
        segments = max(1, min(REF_SEGMENTS, rounds // REF_MIN_SEGMENT))
        sizes = [rounds // segments + (i < rounds % segments) for i in range(segments)]
        refs, parts = [], []
        for i, size in enumerate(sizes):
            refs.append(self._reference_samples(REF_BLOCK, warmup=5 if i == 0 else 1))
            # later segments: no warm-up call, the function is warm; its first call after
            # the reference block is a sample like any other (the median does not mind)
            parts.append(self._run_native(func, args, kwargs, **kw,
                                          num_warmup=num_warmup if i == 0 else 0,
                                          num_iters=size))
        refs.append(self._reference_samples(REF_BLOCK, warmup=1))
        return _pool_segments(parts), float(np.median(np.concatenate(refs))) / 1e3

    def _record(self, native, iterations, ref_before=None):
        ref_after = self._reference() if ref_before is not None else None
        if ref_before and ref_after:
            self.reference_s = math.sqrt(ref_before * ref_after)
        opts = self._options
        options = {
            "disable_gc": bool(opts.get("disable_gc", False)),
            "timer": "spatialhub native clock (perf_counter's clock)",
            "min_rounds": opts.get("min_rounds"),
            "max_time": opts.get("max_time"),
            "min_time": opts.get("min_time"),
            "warmup": opts.get("warmup"),
            "device": opts.get("device") or "CPU",
        }
        self.stats = BenchmarkMetadata(self, native, iterations, options)
        self._add_stats(self)
        return self.stats

    def _raw(self, func, args, kwargs):
        if not callable(func):
            raise TypeError(f"benchmark(): the function to benchmark must be callable, got "
                            f"{type(func).__name__}")
        if self.enabled:
            o = self._options
            min_rounds = int(o.get("min_rounds", 5))
            max_time = float(o.get("max_time", 1.0))
            max_rounds = int(o.get("max_rounds", 10000))
            kw = self._native_kw()
            # 1. one untimed-for-the-report call to learn the cost of a call (cold).
            probe = self._run_native(func, args, kwargs, **dict(kw, track_ram=False,
                                                                track_vram=False),
                                     num_warmup=0, num_iters=1)
            per_call_s = max(probe.median_ms / 1e3, 1e-9)
            # 2. warm-up: pytest-benchmark's --benchmark-warmup off means none; our
            #    default ("auto") spends at most a tenth of max_time, 1 to 10 calls.
            warmup = o.get("warmup", "auto")
            if warmup in (False, "off"):
                num_warmup = 0
            else:
                cap = int(o.get("warmup_iterations", 10 if warmup == "auto" else 100000))
                num_warmup = max(1, min(cap, int(0.1 * max_time / per_call_s)))
            # 3. the timed rounds: as many as fit in max_time, at least min_rounds.
            rounds = math.ceil(max_time / per_call_s)
            rounds = max(min_rounds, min(rounds, max_rounds))
            if self._reference_on():
                native, self.reference_s = self._run_interleaved(func, args, kwargs, kw,
                                                                 num_warmup, rounds)
            else:
                native = self._run_native(func, args, kwargs, **kw, num_warmup=num_warmup,
                                          num_iters=rounds)
            self._record(native, 1)
        return func(*args, **kwargs)

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
            samples = native.samples_ms / iterations
            per_call = _stats_from_samples(samples)
            for attr in ("name", "device", "ram_delta_mb", "vram_delta_mb",
                         "ram_peak_method", "env", "overhead_ms", "torch_max_allocated_mb"):
                setattr(per_call, attr, getattr(native, attr))
            per_call.warmup_iters = native.warmup_iters
            native = per_call
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


def empty_stats(name):
    """A placeholder result (never timed)."""
    return BenchmarkStats(name, "CPU", 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, 0)
