"""Latency under load, beyond one run: the peak rate a latency budget allows, and MLPerf's
scenarios as presets.

The scheduler, the timing and every statistic are the native core's
(:func:`benchmark_load`, :class:`LoadStats`); this module only chooses the rates to try
(``find_peak_qps``) and names the arrival patterns MLPerf's loadgen calls scenarios.
docs/load.md explains the method.
"""
from __future__ import annotations

import math
import sys
import time
import warnings
from typing import Any, Callable, Literal, Optional

from ._native import (DEFAULT_NUM_WARMUP, LOAD_DEFAULT_DURATION_S, LOAD_MAX_DURATION_S,
                      LOAD_MAX_REQUESTS, LOAD_MIN_TAIL, BenchmarkInterrupted, BenchmarkWarning,
                      LoadStats, _count, _real, benchmark_load)

__all__ = ["find_peak_qps", "mlperf_single_stream", "mlperf_offline"]

#: find_peak_qps's defaults: each probe's arrival window, the search's time budget, and
#: the precision of the peak (the search stops when a rate that meets the bound and one
#: that misses it are within this fraction of each other).
PROBE_DURATION_S = LOAD_DEFAULT_DURATION_S
MAX_TIME_S = 300.0
TOLERANCE = 0.05
#: the closed-loop probe that estimates the service time before the search
CALIBRATION_S = 1.0

Verdict = Literal["meets", "misses", "inconclusive", "undecided"]


def _positive(value: Any, param: str, what: str) -> float:
    v = _real(value, param, "find_peak_qps()")
    if not (v > 0 and math.isfinite(v)):
        raise ValueError(f"find_peak_qps(): {param} must be {what}, got {value!r}")
    return v


def _needed(percentile: float) -> int:
    """Completed requests a probe needs for its percentile to have LOAD_MIN_TAIL latencies
    above it (p99: 1,000): fewer cannot bound the percentile from above."""
    return math.ceil(LOAD_MIN_TAIL / (1 - percentile / 100) - 1e-9)


def _probe_length(rate: float, percentile: float, probe_s: float) -> float:
    """A probe's arrival window at `rate`: duration_s, or longer when that would hold
    fewer requests than the percentile needs (with three Poisson deviations to spare)."""
    need = _needed(percentile)
    return max(probe_s, (need + 3 * math.sqrt(need)) / rate)


def _rate_cap(probe_s: float) -> float:
    """The highest rate whose probe fits benchmark_load's LOAD_MAX_REQUESTS."""
    cap = LOAD_MAX_REQUESTS / probe_s
    while cap * probe_s > LOAD_MAX_REQUESTS:
        cap = math.nextafter(cap, 0.0)
    return cap


def _judge(stats: LoadStats, percentile: float, bound_ms: float
           ) -> tuple[Verdict, Optional[float], Optional[float], Optional[float]]:
    """A probe against the bound: 'misses' when the queue did not keep up (overloaded,
    requests dropped or left unserved) or the percentile's 95% interval is all above the
    bound; 'undecided' when fewer than LOAD_MIN_TAIL completed latencies lie above the
    percentile (its interval cannot be bounded from above); 'meets' when the whole
    interval is within the bound; 'inconclusive' when it straddles it (the search counts
    that as a miss)."""
    value, lo, hi = stats.percentile_ci(percentile)
    if stats.overloaded or stats.dropped or stats.unserved or (lo is not None and lo > bound_ms) \
            or (value is not None and value > bound_ms and lo is None):
        return "misses", value, lo, hi
    if stats.completed < _needed(percentile):
        return "undecided", value, lo, hi
    if hi is not None and hi <= bound_ms:
        return "meets", value, lo, hi
    return "inconclusive", value, lo, hi


def _row(stats: LoadStats, verdict: Verdict, value: Optional[float], lo: Optional[float],
         hi: Optional[float]) -> dict[str, Any]:
    """One probe as the search keeps it: the rate, the searched percentile with its
    interval and verdict, and the run's fields (``LoadStats.from_dict`` reads them back,
    without the per-request arrays)."""
    fields = stats.to_dict()
    fields.pop("env", None)    # the result's own env stands for the search's
    return {"offered_qps": stats.offered_qps, "value_ms": value, "ci_low_ms": lo,
            "ci_high_ms": hi, "verdict": verdict, "stats": fields}


def _say(progress: bool, text: str) -> None:
    if progress:
        print(text, file=sys.stderr, flush=True)


def _pct(percentile: float) -> str:
    return f"p{percentile:g}"


def find_peak_qps(
    func: Callable[..., Any],
    /,
    *args: Any,
    latency_bound_ms: float,
    percentile: float = 99.0,
    workers: int = 1,
    duration_s: float = PROBE_DURATION_S,
    max_time_s: float = MAX_TIME_S,
    tolerance: float = TOLERANCE,
    arrival: Literal["poisson", "uniform"] = "poisson",
    max_queue: Optional[int] = None,
    num_warmup: int = DEFAULT_NUM_WARMUP,
    seed: Optional[int] = None,
    name: str = "BenchmarkTarget",
    device: str = "CPU",
    sync_fn: Optional[Callable[[], Any]] = None,
    progress: bool = True,
    **kwargs: Any,
) -> LoadStats:
    """The highest request rate whose latency percentile meets a bound, with confidence.

    MLPerf's FindPeakPerformance for an in-process callable: a closed-loop probe
    estimates the service time, then runs of benchmark_load at chosen rates bracket the
    peak (doubling or halving from half the estimated capacity) and bisect it (on the
    log scale) until a rate that meets the bound and one that does not are within
    `tolerance` of each other.  A rate meets the bound when the whole 95% interval of
    its percentile is within it and the queue kept up (not overloaded, nothing dropped
    or left unserved); an interval across the bound counts as a miss.  Each probe holds
    enough requests for LOAD_MIN_TAIL (10) latencies to lie above the percentile (p99:
    1,000), longer than `duration_s` at low rates; a probe that still has fewer decides
    nothing ('undecided') and is run again twice as long.  No probe asks for more than
    LOAD_MAX_REQUESTS: the rates stop at that cap, and the result says when it bounded
    the search.  The plan is said before the first probe; the search stops before a
    probe that could pass `max_time_s`.

    Parameters
    ----------
    func : callable
        What each request calls.
    *args, **kwargs
        Passed to func unchanged.
    latency_bound_ms : float
        The latency budget (ms) the percentile must meet.
    percentile : float, default 99.0
        Which percentile of latency is held to the bound (MLPerf's Server: 99).
    workers : int, default 1
        Threads serving the requests (benchmark_load's).
    duration_s : float, default 10.0
        Each probe's arrival window at least, seconds: long enough that the interval,
        not the rate, rarely decides (an overloaded probe may take up to twice as long).
    max_time_s : float, default 300.0
        The whole search's time budget, seconds.
    tolerance : float, default 0.05
        The peak's relative precision: the search ends when the highest rate that meets
        the bound is within this fraction of the lowest that misses it.
    arrival : {'poisson', 'uniform'}, default 'poisson'
        The probes' arrivals.
    max_queue : int, optional
        The probes' benchmark_load max_queue (the closed-loop calibration has no
        queue); a probe that drops a request misses the bound.
    num_warmup : int, default 10
        Untimed calls before each probe.
    seed : int, optional
        The first probe's schedule seed (the next probes use the following seeds).
    name : str, default 'BenchmarkTarget'
        The label of the result.
    device : str, default 'CPU'
        As benchmark_load's.
    sync_fn : callable, optional
        As benchmark_load's.
    progress : bool, default True
        Say the plan and each probe on stderr, one line each.

    Returns
    -------
    LoadStats
        The run at the peak rate (the highest that met the bound), or, when no rate
        did, the lowest rate tried.  Its ``search`` holds the bound, the percentile,
        ``peak_qps`` (None when no rate met it), ``rate_cap_qps`` and ``capped`` (the
        request cap stopped the doubling: the peak is at least ``peak_qps``),
        ``min_requests`` (a probe's least), why the search stopped and every probe
        (rate, percentile with its interval, verdict), in the order run.

    Raises
    ------
    TypeError, ValueError
        A bad argument, before func is called.
    BenchmarkInterrupted
        Ctrl-C during the search (in a probe or between probes): .stats holds the
        result as the search would have returned it then -- the run at the highest
        rate that met the bound, else the lowest rate tried -- with its ``search``
        (``stopped`` says it was interrupted); a probe cut short is not in it.  During
        the calibration, before any probe: KeyboardInterrupt (nothing to keep yet).

    Examples
    --------
    >>> import time
    >>> peak = find_peak_qps(time.sleep, 0.001, latency_bound_ms=20.0, percentile=90,
    ...                      duration_s=0.3, max_time_s=20.0, progress=False)  # doctest: +SKIP
    >>> peak.search["peak_qps"] > 100  # doctest: +SKIP
    True
    """
    bound = _positive(latency_bound_ms, "latency_bound_ms", "a positive number of ms")
    pct = _real(percentile, "percentile", "find_peak_qps()")
    if not 0 < pct < 100:
        raise ValueError(f"find_peak_qps(): percentile must be in (0, 100), got {percentile!r}")
    probe_s = _positive(duration_s, "duration_s", "a positive number of seconds")
    if probe_s > LOAD_MAX_DURATION_S:
        raise ValueError(f"find_peak_qps(): duration_s must be at most {LOAD_MAX_DURATION_S:,.0f} "
                         f"seconds, got {duration_s!r}")
    budget = _positive(max_time_s, "max_time_s", "a positive number of seconds")
    tol = _positive(tolerance, "tolerance", "a fraction in (0, 1)")
    if tol >= 1:
        raise ValueError(f"find_peak_qps(): tolerance must be a fraction in (0, 1), got "
                         f"{tolerance!r}")
    step = math.log1p(tol)
    if not step > 1e-12:
        raise ValueError(f"find_peak_qps(): tolerance must be at least 1e-12 (rates closer "
                         f"than that are one rate), got {tolerance!r}")
    bisections = math.ceil(math.log2(math.log(2.0) / step))
    if not isinstance(arrival, str) or arrival not in ("poisson", "uniform"):
        raise ValueError(f"find_peak_qps(): arrival must be 'poisson' or 'uniform', got "
                         f"{arrival!r}")
    queue = None if max_queue is None else _count(max_queue, "max_queue", "find_peak_qps()", 0)
    first_seed = None if seed is None else _count(seed, "seed", "find_peak_qps()", 0)
    if "qps" in kwargs:
        raise TypeError("find_peak_qps(): qps does not apply: the search chooses the rates "
                        "(bind a qps of func's with functools.partial)")
    need = _needed(pct)
    if _probe_length(1.0, pct, 1.0) > LOAD_MAX_REQUESTS:
        raise ValueError(f"find_peak_qps(): percentile {pct:g} needs {need:,} completed "
                         f"requests a probe ({LOAD_MIN_TAIL} above it), and a probe asks for "
                         f"{_probe_length(1.0, pct, 1.0):,.0f} to hold them with a Poisson "
                         f"schedule's shortfall; at most {LOAD_MAX_REQUESTS:,} fit in one run")
    cap = _rate_cap(probe_s)
    common: dict[str, Any] = dict(workers=workers, num_warmup=num_warmup, name=name,
                                  device=device, sync_fn=sync_fn)
    started = time.monotonic()
    label = _pct(pct)

    # the service time, back to back: the capacity the search starts from
    calib_s = min(CALIBRATION_S, probe_s)
    calib = benchmark_load(func, *args, arrival="closed", duration_s=calib_s, **common, **kwargs)
    service_s = (calib.service_p50_ms or 0.0) / 1e3
    if not service_s > 0:
        service_s = 1e-6
    capacity = workers / service_s
    overhead = max(0.0, (time.monotonic() - started) - calib_s)   # warm-up, the result
    first = min(0.5 * capacity, cap)
    planned = 3 + bisections        # a typical bracket, then bisection to the tolerance
    first_len = _probe_length(first, pct, probe_s)
    _say(progress, f"find_peak_qps {name!r}: {label} <= {bound:g} ms; about {planned} probes "
                   f"of {first_len:.3g} s or more (each holds {need:,} requests or more, "
                   f"{LOAD_MIN_TAIL} above the {label}; about "
                   f"{planned * (overhead + first_len):.0f} s), at most {budget:g} s "
                   f"(max_time_s)")

    probes: list[dict[str, Any]] = []
    best: Optional[LoadStats] = None     # the highest rate that met the bound
    lowest: Optional[LoadStats] = None   # the lowest rate tried, for a search with no peak
    lo_rate: Optional[float] = None
    hi_rate: Optional[float] = None
    capped = False
    next_seed = first_seed
    value0, lo0, hi0 = calib.percentile_ci(pct)
    if lo0 is not None and lo0 > bound:
        # back to back, without any queue, the percentile is already over the bound
        stopped = "no rate: even back to back the percentile is over the bound"
        rate: Optional[float] = None
    else:
        stopped = "tolerance reached"
        rate = first
    length = 0.0
    retry = False       # the last probe was undecided: this one is twice as long
    interrupted: Optional[KeyboardInterrupt] = None
    try:
        while rate is not None:
            length = 2 * length if retry else _probe_length(rate, pct, probe_s)
            if length > LOAD_MAX_DURATION_S or rate * length > LOAD_MAX_REQUESTS:
                stopped = (f"a probe at {rate:,.1f} req/s would need {length:,.0f} s, more than "
                           f"one run may hold")
                break
            elapsed = time.monotonic() - started
            if elapsed + 2 * (overhead + length) > budget:
                stopped = "max_time_s reached"
                if length > probe_s:
                    stopped += (f": the probe at {rate:,.1f} req/s needs {length:,.3g} s to hold "
                                f"{need:,} requests ({LOAD_MIN_TAIL} above the {label})")
                break
            with warnings.catch_warnings():
                # probes above the peak are overloaded by design: their verdicts say so
                warnings.simplefilter("ignore", BenchmarkWarning)
                run = benchmark_load(func, *args, qps=rate, duration_s=length, arrival=arrival,
                                     seed=next_seed, max_queue=queue, **common, **kwargs)
            if next_seed is not None:   # the next probe's: within benchmark_load's range
                next_seed = next_seed + 1 if next_seed < sys.maxsize else 0
            verdict, value, lo, hi = _judge(run, pct, bound)
            probes.append(_row(run, verdict, value, lo, hi))
            shown = "N/A" if value is None else f"{value:.3g} ms"
            interval = "" if lo is None or hi is None else f" [{lo:.3g}, {hi:.3g}]"
            _say(progress, f"  {rate:,.1f} req/s for {length:.3g} s: {label} {shown}{interval}: "
                           f"{verdict}")
            if lowest is None or rate < (lowest.offered_qps or math.inf):
                lowest = run
            if verdict == "undecided":
                if not retry:
                    retry = True     # the same rate, twice as long
                    continue
                stopped = (f"undecided at {rate:,.1f} req/s: {run.completed:,} requests completed, "
                           f"{need:,} needed for {LOAD_MIN_TAIL} above the {label}")
                break
            retry = False
            if verdict == "meets":
                lo_rate = rate
                best = run
            else:
                hi_rate = rate
            if lo_rate is None:
                assert hi_rate is not None
                rate = hi_rate / 2
            elif hi_rate is None:
                if lo_rate >= cap:
                    capped = True
                    stopped = (f"the request cap: {cap:,.1f} req/s is the most a probe of "
                               f"{probe_s:g} s may ask for (LOAD_MAX_REQUESTS, "
                               f"{LOAD_MAX_REQUESTS:,}); the peak is at least that")
                    break
                rate = min(lo_rate * 2, cap)
            elif hi_rate / lo_rate <= 1 + tol:
                break
            else:
                rate = math.sqrt(lo_rate * hi_rate)
    except KeyboardInterrupt as exc:
        # Ctrl-C in a probe or between probes: the probes done are the result (a
        # probe cut short is not one of them)
        interrupted = exc
        stopped = f"interrupted (Ctrl-C) after {len(probes)} probe(s)"
    result = best if best is not None else (lowest if lowest is not None else calib)
    result.search = {
        "latency_bound_ms": bound, "percentile": pct, "peak_qps": lo_rate,
        "misses_at_qps": hi_rate, "tolerance": tol, "stopped": stopped,
        "elapsed_s": time.monotonic() - started, "max_time_s": budget,
        "probe_duration_s": probe_s, "min_requests": need, "rate_cap_qps": cap,
        "capped": capped, "max_queue": queue, "service_p50_ms": calib.service_p50_ms,
        "probes": probes,
    }
    peak = "none" if lo_rate is None else f"{lo_rate:,.1f} req/s" + (" or more" if capped else "")
    _say(progress, f"find_peak_qps {name!r}: peak {peak} ({stopped})")
    if interrupted is not None:
        held = (f"the run at the highest rate that met the bound so far ({peak})"
                if best is not None else "the lowest rate tried (none met the bound yet)"
                if lowest is not None else "the calibration run (no probe completed)")
        new = BenchmarkInterrupted(f"find_peak_qps interrupted after {len(probes)} probe(s): "
                                   f".stats holds {held}; its .search every probe completed")
        new.stats = result
        raise new from interrupted
    return result


_NO_RATE = "queries come as fast as they are served (benchmark_load(func, qps=...) for a rate)"


def _fixed(owner: str, kwargs: dict[str, Any], scenario: dict[str, str]) -> None:
    """A preset's own settings are not options: a keyword that would change one is
    refused, saying what the scenario fixes, rather than override it or clash with it."""
    for key, why in scenario.items():
        if key in kwargs:
            raise TypeError(f"{owner}: {key} does not apply: {why}")


def mlperf_single_stream(
    func: Callable[..., Any],
    /,
    *args: Any,
    duration_s: float = PROBE_DURATION_S,
    num_warmup: int = DEFAULT_NUM_WARMUP,
    name: str = "BenchmarkTarget",
    device: str = "CPU",
    sync_fn: Optional[Callable[[], Any]] = None,
    **kwargs: Any,
) -> LoadStats:
    """MLPerf's SingleStream scenario: one query at a time, each issued when the last one
    completed; its figure is the 90th percentile of latency (``p90_ms``, with its
    interval from ``percentile_ci(90)``).

    ``benchmark_load(func, arrival='closed', workers=1)`` for duration_s seconds; the
    latency counts the harness's hand-over between queries (``lag_ms``), which MLPerf's
    loadgen leaves out.  docs/load.md sets its definitions beside ours.

    Parameters
    ----------
    func : callable
        One query.
    *args, **kwargs
        Passed to func unchanged.
    duration_s : float, default 10.0
        How long queries are issued, seconds.
    num_warmup : int, default 10
        Untimed queries first.
    name : str, default 'BenchmarkTarget'
        The label of the result.
    device : str, default 'CPU'
        As benchmark_load's.
    sync_fn : callable, optional
        As benchmark_load's.

    Returns
    -------
    LoadStats
        ``arrival`` 'closed'; latencies are the queries' back-to-back times.

    Examples
    --------
    >>> s = mlperf_single_stream(sum, range(100), duration_s=0.1)
    >>> s.arrival, s.p90_ms is not None
    ('closed', True)
    """
    _fixed("mlperf_single_stream()", kwargs, {
        "workers": "SingleStream is one query at a time (benchmark_load(func, "
                   "arrival='closed', workers=N) runs N back-to-back streams)",
        "arrival": "SingleStream's arrivals are 'closed'", "qps": _NO_RATE,
        "max_queue": _NO_RATE})
    return benchmark_load(func, *args, arrival="closed", workers=1, duration_s=duration_s,
                          num_warmup=num_warmup, name=name, device=device, sync_fn=sync_fn,
                          **kwargs)


def mlperf_offline(
    func: Callable[..., Any],
    /,
    *args: Any,
    batch_size: int = 1,
    workers: int = 1,
    duration_s: float = PROBE_DURATION_S,
    num_warmup: int = DEFAULT_NUM_WARMUP,
    name: str = "BenchmarkTarget",
    device: str = "CPU",
    sync_fn: Optional[Callable[[], Any]] = None,
    **kwargs: Any,
) -> LoadStats:
    """MLPerf's Offline scenario: every query present from the start, served as fast as
    `workers` threads can; its figure is samples per second (``throughput`` =
    ``achieved_qps * batch_size``, with func processing a batch of `batch_size` samples
    a call).

    ``benchmark_load(func, arrival='offline')`` for duration_s seconds.  Latencies
    here are the time since the start and mean nothing; docs/load.md sets MLPerf's
    definitions beside ours.

    Parameters
    ----------
    func : callable
        One batch of queries.
    *args, **kwargs
        Passed to func unchanged.
    batch_size : int, default 1
        Samples func processes per call (>= 1).
    workers : int, default 1
        Threads calling func.
    duration_s : float, default 10.0
        How long batches are issued, seconds.
    num_warmup : int, default 10
        Untimed calls first.
    name : str, default 'BenchmarkTarget'
        The label of the result.
    device : str, default 'CPU'
        As benchmark_load's.
    sync_fn : callable, optional
        As benchmark_load's.

    Returns
    -------
    LoadStats
        ``arrival`` 'offline', ``batch_size`` set: read ``throughput``.

    Examples
    --------
    >>> s = mlperf_offline(sorted, list(range(64)), batch_size=64, duration_s=0.1)
    >>> s.throughput > s.achieved_qps
    True
    """
    _fixed("mlperf_offline()", kwargs, {
        "arrival": "Offline's queries are all present at the start ('offline')",
        "qps": _NO_RATE, "max_queue": _NO_RATE})
    size = _count(batch_size, "batch_size", "mlperf_offline()", 1)
    stats = benchmark_load(func, *args, arrival="offline", workers=workers,
                           duration_s=duration_s, num_warmup=num_warmup, name=name,
                           device=device, sync_fn=sync_fn, **kwargs)
    stats.batch_size = size
    return stats
