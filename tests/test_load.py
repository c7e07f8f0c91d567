"""Latency under load (issue 34): benchmark_load, LoadStats, find_peak_qps, the CLI and the
fixture.

Deterministic: no test reads a timing figure against a threshold.  What is checked is what
holds whatever the machine does -- the schedule a seed draws, the queue identity a run's
own records must satisfy (Lindley), the bookkeeping (every request completed, dropped or
unserved), the errors, Ctrl-C, the JSON round trip and the text.  The timing figures (M/D/1
against theory, the stall, the peak) are bench/bench_load.py's.
"""
import json
import math
import os
import pickle
import re
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import numpy as np
import pytest

import spatialhub.utils.profiling as prof
from spatialhub.utils.profiling import (BenchmarkInterrupted, LoadStats, _native, benchmark_load,
                                        find_peak_qps, format_load_table)

QUIET = dict(num_warmup=2)


def _os_threads():
    """The process's OS threads (Linux), or None where that is not readable."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return None


@pytest.fixture
def no_thread_left():
    """Every worker thread of the test's runs is gone when it ends."""
    before, py_before = _os_threads(), threading.active_count()
    yield
    for _ in range(50):      # a thread that has returned may take a moment to be reaped
        if _os_threads() == before:
            break
        time.sleep(0.01)
    assert _os_threads() == before
    assert threading.active_count() == py_before


def sleeper(seconds):
    def f():
        time.sleep(seconds)
    return f


def quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", prof.BenchmarkWarning)
        return fn(*args, **kwargs)


# ---- the schedule a seed draws --------------------------------------------------------

def test_a_seed_fixes_the_schedule_and_poisson_gaps_have_the_rate(no_thread_left):
    a = quiet(benchmark_load, _native._noop, qps=2000, duration_s=0.5, seed=7, **QUIET)
    b = quiet(benchmark_load, _native._noop, qps=2000, duration_s=0.5, seed=7, **QUIET)
    assert a.seed == 7 and a.requests == b.requests == a.completed
    assert np.array_equal(a.arrivals_ms, b.arrivals_ms)          # the schedule is the seed's
    gaps = np.diff(np.concatenate([[0.0], a.arrivals_ms]))
    # ~1,000 exponential gaps of mean 0.5 ms: mean and standard deviation alike
    assert abs(gaps.mean() - 0.5) < 0.05 and abs(gaps.std() / gaps.mean() - 1) < 0.1
    assert a.arrival_qps == a.requests / 0.5
    assert np.all(a.arrivals_ms < 500) and np.all(np.diff(a.arrivals_ms) >= 0)
    other = quiet(benchmark_load, _native._noop, qps=2000, duration_s=0.5, seed=8, **QUIET)
    assert not np.array_equal(other.arrivals_ms[:50], a.arrivals_ms[:50])
    fresh = quiet(benchmark_load, _native._noop, qps=100, duration_s=0.1, **QUIET)
    assert isinstance(fresh.seed, int) and fresh.seed >= 0     # drawn, and kept to repeat


def test_a_tiny_rate_draws_an_empty_schedule_and_says_so(tmp_path):
    """A qps whose first gap lies beyond the window -- past ~292 years the nanoseconds no
    longer fit an int64 -- draws no arrival (uniform: only the one at 0): the run returns
    at once and a NoRequestsWarning says why.  In a child limited to 1 GiB: a schedule
    that never ends fails there with MemoryError instead of taking the machine."""
    from reliability_support import UNDER_SANITIZER
    if UNDER_SANITIZER:
        pytest.skip("an address-space limit and ASan's shadow memory do not mix")
    script = tmp_path / "tiny.py"
    script.write_text(textwrap.dedent("""
        import json, resource, warnings
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        import spatialhub.utils.profiling as prof
        out = []
        for qps in (1e-10, 1e-300, 5e-324):
            for arrival in ("uniform", "poisson"):
                with warnings.catch_warnings(record=True) as w:
                    warnings.simplefilter("always")
                    s = prof.benchmark_load(lambda: None, qps=qps, duration_s=0.5,
                                            arrival=arrival, seed=1, num_warmup=0)
                said = [type(r.message).__name__ for r in w
                        if issubclass(r.category, prof.NoRequestsWarning)]
                out.append([arrival, s.requests, s.completed, s.p99_ms, said])
        print(json.dumps(out))
    """))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    for arrival, requests, completed, p99, said in json.loads(p.stdout):
        if arrival == "uniform":     # one arrival at 0, the next ages away
            assert (requests, completed, said) == (1, 1, []) and p99 is not None
        else:
            assert (requests, completed, p99, said) == (0, 0, None, ["NoRequestsWarning"])


def test_uniform_arrivals_are_one_every_1_over_qps():
    s = quiet(benchmark_load, _native._noop, qps=400, duration_s=0.25, arrival="uniform",
              **QUIET)
    assert s.requests == s.completed == 100
    assert np.allclose(s.arrivals_ms, np.arange(100) * 2.5, atol=1e-6)


# ---- the queue identity -----------------------------------------------------------------

def test_one_worker_latencies_satisfy_lindley_on_their_own_records(no_thread_left):
    """latency[i] = max(0, latency[i-1] - gap) + lag[i] + service[i]: what the run recorded
    is a FIFO single-server queue timed from the intended arrivals."""
    rng = np.random.default_rng(1)
    waits = iter(rng.uniform(0.0005, 0.004, 100000))

    def varied():
        time.sleep(next(waits))
    s = quiet(benchmark_load, varied, qps=300, duration_s=0.6, seed=3, **QUIET)
    a, lat, svc, lag = s.arrivals_ms, s.latencies_ms, s.service_ms, s.lag_ms
    assert len(a) == len(lat) == len(svc) == len(lag) == s.completed > 100
    assert np.all(lag >= 0) and np.all(svc > 0) and np.all(lat >= svc + lag - 1e-9)
    assert np.allclose(_native._fcfs_latencies(a, svc + lag), lat, rtol=0, atol=1e-6)
    # some requests queued (at ~0.68 utilisation): the identity was not trivial
    assert np.any(lat - svc - lag > 0.1)
    assert s.queue_share == pytest.approx(1 - svc.mean() / lat.mean())


def test_several_workers_never_start_a_request_before_it_arrived(no_thread_left):
    s = quiet(benchmark_load, sleeper(0.002), qps=600, duration_s=0.4, workers=3, seed=5,
              **QUIET)
    assert s.workers == 3 and s.completed == s.requests
    assert np.all(s.latencies_ms - s.service_ms - s.lag_ms >= -1e-9)
    assert np.all(s.lag_ms >= 0)


def test_fcfs_recursion_is_lindley_and_kiefer_wolfowitz():
    rng = np.random.default_rng(0)
    a = np.cumsum(rng.exponential(1.0, 500))
    svc = rng.exponential(0.8, 500)
    for servers in (1, 3):
        free, want = [-math.inf] * servers, []
        for ai, si in zip(a, svc):
            k = min(range(servers), key=free.__getitem__)
            start = max(ai, free[k])
            free[k] = start + si
            want.append(free[k] - ai)
        assert np.allclose(_native._fcfs_latencies(a, svc, servers), want, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="in order"):
        _native._fcfs_latencies([1.0, 0.5], [1.0, 1.0])
    with pytest.raises(ValueError, match="differ in length"):
        _native._fcfs_latencies([1.0], [1.0, 1.0])


# ---- bookkeeping, modes, sync ------------------------------------------------------------

def test_percentiles_are_numpy_linear_and_the_intervals_hold_them():
    s = quiet(benchmark_load, sleeper(0.0005), qps=500, duration_s=0.4, seed=2, **QUIET)
    lat = s.latencies_ms
    for field, q in (("p50_ms", 50), ("p90_ms", 90), ("p99_ms", 99), ("p999_ms", 99.9)):
        assert getattr(s, field) == np.percentile(lat, q)
    assert s.mean_ms == pytest.approx(lat.mean()) and s.max_ms == lat.max()
    assert s.service_p50_ms == np.percentile(s.service_ms, 50)
    assert s.lag_p99_ms == np.percentile(s.lag_ms, 99) and s.lag_max_ms == s.lag_ms.max()
    assert s.p50_ci_low_ms <= s.p50_ms <= s.p50_ci_high_ms
    assert s.p99_ci_low_ms <= s.p99_ci_high_ms and s.ci_block >= 1
    # percentile_ci is the same bootstrap (same seed, same blocks)
    assert s.percentile_ci(99) == (s.p99_ms, s.p99_ci_low_ms, s.p99_ci_high_ms)
    assert s.percentile_ci(90)[0] == s.p90_ms


def test_the_interval_accounts_for_correlated_latencies():
    """A queue's latencies come in correlated runs: the same values in their order get a
    wider interval of p99 than shuffled (independent) -- order statistics of independent
    samples would give both the same."""
    rng = np.random.default_rng(4)
    a = np.cumsum(rng.exponential(1.0, 4000))
    lat = _native._fcfs_latencies(a, np.full(4000, 0.9))        # M/D/1 at 0.9
    ordered = LoadStats("q", "CPU", seed=1, latencies_ms=lat)
    shuffled = LoadStats("q", "CPU", seed=1, latencies_ms=rng.permutation(lat))
    v1, lo1, hi1 = ordered.percentile_ci(99)
    v2, lo2, hi2 = shuffled.percentile_ci(99)
    assert v1 == v2 and lo1 <= v1 <= hi1
    assert hi1 - lo1 > 2 * (hi2 - lo2)


def test_overload_is_said_with_how_fast_the_backlog_grew(no_thread_left):
    # one worker on a 5 ms sleep serves at most 200/s; 400/s arrive
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        s = benchmark_load(sleeper(0.005), qps=400, duration_s=0.5, seed=1, **QUIET)
    assert s.overloaded is True and "overloaded" in s.flags
    assert s.backlog_growth_qps > 50 and s.backlog_end > 0
    said = [r.message for r in w if issubclass(r.category, prof.OverloadedWarning)]
    assert len(said) == 1 and said[0].stats is s
    assert said[0].backlog_growth_qps == s.backlog_growth_qps
    assert all(len(line) <= 110 for line in str(said[0]).splitlines()
               if "overloaded" in line)
    assert s.completed + s.dropped + s.unserved == s.requests


def test_max_queue_drops_on_arrival_and_every_request_is_counted(no_thread_left):
    s = quiet(benchmark_load, sleeper(0.005), qps=400, duration_s=0.5, seed=1, max_queue=0,
              **QUIET)
    assert s.max_queue == 0 and s.dropped > 0 and "requests dropped" in s.flags
    assert s.completed + s.dropped + s.unserved == s.requests
    # nothing waited behind another request: each waited at most its worker's lag
    assert np.all(s.latencies_ms - s.service_ms - s.lag_ms < 1.0)


def test_closed_loop_and_offline_and_the_mlperf_presets():
    c = quiet(prof.mlperf_single_stream, sleeper(0.001), duration_s=0.2, **QUIET)
    assert c.arrival == "closed" and c.offered_qps is None and c.workers == 1
    assert c.completed == c.requests > 10
    # each query issued when the last completed: it waited only for the hand-over
    assert np.allclose(c.latencies_ms, c.service_ms + c.lag_ms, atol=1e-6)
    o = quiet(prof.mlperf_offline, sorted, list(range(64)), batch_size=64, duration_s=0.1,
              workers=2, **QUIET)
    assert o.arrival == "offline" and np.all(o.arrivals_ms == 0)
    assert o.batch_size == 64 and o.throughput == o.achieved_qps * 64


def test_sync_fn_closes_every_request_and_the_warm_up():
    calls = []
    s = quiet(benchmark_load, _native._noop, qps=300, duration_s=0.2, seed=1, num_warmup=4,
              sync_fn=lambda: calls.append(1))
    assert len(calls) == 4 + s.completed


def test_kwargs_reach_func_and_num_iters_does_not_apply():
    seen = []

    def f(x, *, y):
        seen.append((x, y))
    quiet(benchmark_load, f, 1, y=2, qps=200, duration_s=0.05, seed=1, num_warmup=1)
    assert set(seen) == {(1, 2)}
    with pytest.raises(TypeError, match="num_iters does not apply"):
        benchmark_load(f, 1, y=2, qps=10, num_iters=5)


# ---- bad input ----------------------------------------------------------------------------

@pytest.mark.parametrize("kw, exc, text", [
    (dict(qps=0), ValueError, "qps must be a positive number of requests per second, got 0"),
    (dict(qps=-5), ValueError, "qps must be a positive number"),
    (dict(qps=float("nan")), ValueError, "got nan"),
    (dict(qps=float("inf")), ValueError, "got inf"),
    (dict(qps="10"), TypeError, "qps must be a real number, not str"),
    (dict(), TypeError, "qps= is required with arrival='poisson'"),
    (dict(qps=10, duration_s=0), ValueError, "duration_s must be a positive number of seconds"),
    (dict(qps=10, duration_s=-1.0), ValueError, "duration_s must be a positive"),
    (dict(qps=10, workers=0), ValueError, "workers must be >= 1, got 0"),
    (dict(qps=10, workers=257), ValueError, "workers must be <= 256"),
    (dict(qps=10, arrival="bursty"), ValueError, "arrival must be 'poisson', 'uniform'"),
    (dict(qps=10, arrival="closed"), ValueError, "qps does not apply to arrival='closed'"),
    (dict(arrival="offline", max_queue=3), ValueError, "max_queue does not apply"),
    (dict(qps=10, seed=-1), ValueError, "seed must be >= 0"),
    (dict(qps=10, max_queue=-1), ValueError, "max_queue must be >= 0"),
    (dict(qps=10, num_warmup=-1), ValueError, "num_warmup must be >= 0"),
    (dict(qps=1e9, duration_s=100), ValueError, "asks for 100000000000 requests"),
    # the count of a huge product is said as a number, never an overflowed int64
    (dict(qps=1e300, duration_s=1e-9), ValueError, "asks for about 1e+291 requests; at most"),
    (dict(qps=10**400), ValueError, "qps must be a positive number of requests per second, "
                                    "got a number too large for a float"),
])
def test_bad_input_is_refused_before_func_is_called(kw, exc, text):
    calls = []
    with pytest.raises(exc, match=re.escape(text)) as e:
        benchmark_load(lambda: calls.append(1), **kw)
    assert calls == []
    assert str(e.value).startswith("benchmark_load(): ")


def test_func_must_be_callable():
    with pytest.raises(TypeError, match="func must be callable"):
        benchmark_load(42, qps=10)


# ---- a failing request, Ctrl-C ---------------------------------------------------------------

def test_an_exception_in_request_37_propagates_with_what_was_measured(no_thread_left):
    count = [0]
    boom = ValueError("boom")

    def f():
        count[0] += 1
        if count[0] == 37:
            raise boom
    with pytest.raises(ValueError) as e:
        quiet(benchmark_load, f, qps=1000, duration_s=0.3, seed=1, num_warmup=0)
    assert e.value is boom and str(e.value) == "boom"            # the same object, unchanged
    notes = getattr(e.value, "__notes__", [])
    assert any("raised by func in request 37 of" in n for n in notes), notes
    assert e.value.stats.completed == 36 and isinstance(e.value.stats, LoadStats)
    assert e.traceback[-1].name == "f"                            # the worker's traceback


def test_a_worker_exception_with_its_own_stats_keeps_it_and_workers_are_joined(no_thread_left):
    class Mine(Exception):
        stats = "the user's"

    def f():
        time.sleep(0.001)
        raise Mine()
    with pytest.raises(Mine) as e:
        quiet(benchmark_load, f, qps=500, duration_s=0.5, workers=4, num_warmup=0, seed=2)
    assert e.value.stats == "the user's"
    assert any("raised by func in request" in n for n in e.value.__notes__)


@pytest.fixture
def sigint_raises():
    """Python's own SIGINT handler: a process started in the background by a
    non-interactive shell begins with SIGINT ignored, and interrupt_main() then does
    nothing (as a real Ctrl-C would not reach it either)."""
    import signal
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


def test_ctrl_c_stops_the_run_and_keeps_what_was_measured(no_thread_left, sigint_raises):
    # the Ctrl-C comes from inside the run (a worker's 20th call), whatever the set-up
    # before it costs: a signal that lands in the full collection before the warm-up is
    # lost in a finalizer, as Python loses any there
    calls = [0]

    def f():
        calls[0] += 1
        if calls[0] == 20:
            __import__("_thread").interrupt_main()
        time.sleep(0.002)
    t0 = time.monotonic()
    with pytest.raises(BenchmarkInterrupted) as e:
        quiet(benchmark_load, f, qps=200, duration_s=20, workers=2, seed=1, **QUIET)
    assert time.monotonic() - t0 < 10       # the run of 20 s ended, well before
    s = e.value.stats
    assert isinstance(s, LoadStats) and s.completed > 0 and s.unserved > 0
    assert s.completed + s.dropped + s.unserved == s.requests
    assert s.overloaded is None             # a stopped run says nothing of its backlog
    assert isinstance(e.value.__context__, KeyboardInterrupt)


def _interrupted(fn, *args, **kwargs):
    """The BenchmarkInterrupted fn raises; a plain KeyboardInterrupt (the result lost)
    or a normal return fails the test, without ending pytest's session."""
    try:
        fn(*args, **kwargs)
    except BenchmarkInterrupted as exc:
        return exc
    except KeyboardInterrupt as exc:
        pytest.fail(f"a plain {type(exc).__name__} escaped: the result was lost")
    pytest.fail("the Ctrl-C was not said")


def test_a_ctrl_c_pending_when_the_run_ends_still_hands_over_the_result(no_thread_left,
                                                                        sigint_raises):
    """A Ctrl-C in the last request is pending when the workers are done: it is taken
    before any Python code runs for the result, so the user gets all 10 requests in
    .stats, not a KeyboardInterrupt from inside platform.py."""
    calls = [0]

    def f():
        calls[0] += 1
        if calls[0] == 10:           # the schedule's last request
            __import__("_thread").interrupt_main()
    e = _interrupted(quiet, benchmark_load, f, qps=100, duration_s=0.1, arrival="uniform",
                     num_warmup=0)
    assert e.stats.requests == e.stats.completed == 10


def test_a_second_ctrl_c_while_a_call_finishes_keeps_the_result(no_thread_left):
    """The first Ctrl-C is taken while request 1 is still in its call; a second one
    while the run waits for that call is the same request: both handlers run within the
    call, and the result (1 completed, the rest unserved) comes back."""
    import signal
    said = []
    taken = threading.Event()

    def handler(signum, frame):
        said.append(signum)
        taken.set()
        raise KeyboardInterrupt
    calls = [0]

    def f():
        calls[0] += 1
        if calls[0] == 1:
            __import__("_thread").interrupt_main()
            taken.wait(30)                          # the run is stopped meanwhile
            __import__("_thread").interrupt_main()  # a second Ctrl-C before the call ends
    old = signal.signal(signal.SIGINT, handler)
    try:
        e = _interrupted(quiet, benchmark_load, f, qps=100, duration_s=5, arrival="uniform",
                         num_warmup=0)
    finally:
        signal.signal(signal.SIGINT, old)
    assert len(said) == 2                  # both were taken by the call, none left over
    s = e.stats
    assert (s.requests, s.completed, s.unserved) == (500, 1, 499) and calls[0] == 1


def test_a_ctrl_c_while_the_warning_is_said_still_hands_over_the_result(sigint_raises):
    """The call's warning runs Python code (showwarning): a Ctrl-C there is the call's,
    with the result as .stats."""
    def interrupting(*args, **kwargs):
        __import__("_thread").interrupt_main()
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = interrupting
        e = _interrupted(benchmark_load, _native._noop, qps=1e-10, duration_s=0.5, seed=1,
                         num_warmup=0)
    assert e.stats.requests == 0 and isinstance(e.stats, LoadStats)


# ---- the result: JSON, pickle, table -----------------------------------------------------------

@pytest.fixture(scope="module")
def run():
    return quiet(benchmark_load, sleeper(0.0005), qps=400, duration_s=0.3, seed=9,
                 name="resize | v2", **QUIET)


def test_json_round_trip_at_full_precision(run):
    text = run.to_json(samples=True)
    back = LoadStats.from_dict(json.loads(text))
    assert back == run
    assert np.array_equal(back.latencies_ms, run.latencies_ms)
    d = run.to_dict()
    assert d["p99_ms"] == run.p99_ms and d["mean_ms"] == run.mean_ms   # not rounded
    assert "latencies_ms" not in d and len(run.to_dict(samples=True)["lag_ms"]) == run.completed
    assert pickle.loads(pickle.dumps(run)) == run
    assert json.loads(LoadStats("x", "CPU").to_json())["p99_ms"] is None   # no NaN in JSON
    with pytest.raises(ValueError):     # the arrays are read-only views
        run.latencies_ms[0] = 1.0


def test_the_table_and_the_notebook_reprs(run):
    other = LoadStats("idle", "cuda:0", arrival="uniform", offered_qps=10.0, completed=3,
                      overloaded=True)
    text = format_load_table([run, other], "Under load")
    lines = text.splitlines()
    assert lines[0] == "### Under load" and lines[1] == ""
    assert lines[2].startswith("| Model / Target | Device | Arrival | Offered (req/s) |")
    assert lines[3].count(":---") == 11
    assert lines[4].startswith(r"| **resize \| v2** | `CPU` | poisson | 400.0 |")
    assert lines[5] == ("| **idle** | `cuda:0` | uniform | 10.0 | **N/A** | N/A | **N/A** | N/A | "
                        "N/A | N/A | 3 |")
    assert lines[-1].startswith("Flags: ") and "overloaded, few requests (idle)" in lines[-1]
    assert not any("e+" in ln or "e-0" in ln or "nan" in ln for ln in lines)
    assert run._repr_markdown_().startswith("| Model / Target |")
    html = run._repr_html_()
    assert html.startswith("<table>") and "resize | v2" in html
    assert format_load_table(run, format="html") == html
    with pytest.raises(TypeError, match="results"):
        format_load_table("not a result")
    with pytest.raises(ValueError, match="empty"):
        format_load_table([])


def test_the_result_reads_as_a_result(run):
    assert run.name == "resize | v2" and run.device == "CPU" and run.env["python"]
    assert run.offered_qps == 400.0 and run.duration_s == 0.3 and run.warmup_iters == 2
    assert run.machine_busy in (True, False)
    assert "LoadStats(name='resize | v2'" in repr(run) and "latencies" not in repr(run)
    assert isinstance(run.flags, tuple)
    s = LoadStats("f", "CPU")
    assert s.latencies_ms is None and s.throughput is None and s.percentile_ci(99) == (
        None, None, None)
    with pytest.raises(TypeError):
        LoadStats("f", "CPU", completed="3")


@pytest.mark.parametrize("field, values, shown", [
    ("latencies_ms", [1.0, float("nan"), 2.0], "latencies_ms[1] must be a finite number of ms, got nan"),
    ("service_ms", [float("inf")], "service_ms[0] must be a finite number of ms, got inf"),
    ("lag_ms", [0.1, float("-inf")], "lag_ms[1] must be a finite number of ms, got -inf"),
])
def test_a_saved_result_with_a_nan_latency_is_refused_naming_the_field(field, values, shown):
    """A file edited by hand (json.loads reads NaN) must not load into a result whose
    percentiles and intervals quietly come out NaN."""
    d = dict(name="x", device="CPU", completed=len(values), **{field: values})
    with pytest.raises(ValueError, match=re.escape(f"LoadStats.{shown}")):
        LoadStats.from_dict(d)


def test_a_ci_block_longer_than_the_latencies_is_refused_with_its_bound():
    with pytest.raises(ValueError, match=r"ci_block must be at most the number of latencies "
                                         r"\(3\), got 50"):
        LoadStats.from_dict(dict(name="x", device="CPU", ci_block=50,
                                 latencies_ms=[1.0, 2.0, 3.0]))
    # saved without the arrays, the block length is only a record: it loads
    assert LoadStats.from_dict(dict(name="x", device="CPU", ci_block=50)).ci_block == 50
    s = LoadStats("x", "CPU", latencies_ms=[1.0, 2.0, 3.0, 4.0], ci_block=4)
    assert s.percentile_ci(50)[0] == 2.5
    s.ci_block = 9      # set afterwards: the interval refuses it rather than wrap one series
    with pytest.raises(ValueError, match=r"percentile_ci\(\): ci_block must be at most the "
                                         r"number of latencies \(4\), got 9"):
        s.percentile_ci(50)


# ---- find_peak_qps, the CLI, the fixture -------------------------------------------------------

def test_find_peak_qps_says_its_plan_and_keeps_every_rate_tried(capsys):
    with pytest.raises(ValueError, match="latency_bound_ms must be a positive number"):
        find_peak_qps(_native._noop, latency_bound_ms=0)
    with pytest.raises(ValueError, match="percentile must be in"):
        find_peak_qps(_native._noop, latency_bound_ms=5, percentile=100)
    s = quiet(find_peak_qps, sleeper(0.001), latency_bound_ms=20.0, percentile=90,
              duration_s=0.2, max_time_s=4.0, seed=1, num_warmup=1)
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("find_peak_qps 'BenchmarkTarget': p90 <= 20 ms; about ")
    assert "each holds 100 requests or more, 10 above the p90" in err[0]
    assert "at most 4 s (max_time_s)" in err[0]
    search = s.search
    assert search["latency_bound_ms"] == 20.0 and search["percentile"] == 90.0
    assert search["min_requests"] == 100 and search["capped"] is False
    assert search["probes"] and search["elapsed_s"] <= 4.0 + 2.0
    verdicts = {p["verdict"] for p in search["probes"]}
    assert verdicts <= {"meets", "misses", "inconclusive", "undecided"}
    if search["peak_qps"] is not None:
        assert s.offered_qps == search["peak_qps"]
        assert max(p["offered_qps"] for p in search["probes"] if p["verdict"] == "meets") == \
            search["peak_qps"]
    back = LoadStats.from_dict(json.loads(s.to_json()))
    assert back.search == s.search


class FakeLoad:
    """benchmark_load's stand-in for the search's logic (no timing): the latencies of a
    rate are `latency(rate)` ms each, every request served; it refuses what the core
    refuses (max_queue with 'closed', more than load.LOAD_MAX_REQUESTS requests).
    `short` completed counts replace the first timed probes' (a probe that came out
    short)."""

    def __init__(self, latency=lambda rate: 1.0, short=()):
        self.latency, self.short, self.calls = latency, list(short), []

    def __call__(self, func, *args, qps=None, duration_s=10.0, arrival="poisson",
                 max_queue=None, seed=None, **kw):
        from spatialhub.utils.profiling import load

        self.calls.append(dict(qps=qps, duration_s=duration_s, arrival=arrival,
                               max_queue=max_queue, seed=seed))
        if arrival == "closed":
            if max_queue is not None:
                raise ValueError("benchmark_load(): max_queue does not apply to "
                                 "arrival='closed'")
            n, value = 200, 0.001
        else:
            if qps * duration_s > load.LOAD_MAX_REQUESTS:
                raise ValueError(f"benchmark_load(): qps * duration_s asks for "
                                 f"{qps * duration_s:.0f} requests")
            n, value = int(qps * duration_s), self.latency(qps)
            if self.short:
                n = self.short.pop(0)
        return LoadStats(kw.get("name", "f"), "CPU", arrival=arrival, offered_qps=qps,
                         duration_s=duration_s, requests=n, completed=n, overloaded=False,
                         seed=0, latencies_ms=[value] * min(n, 3000),
                         service_ms=[0.001] * min(n, 3000), service_p50_ms=0.001)


@pytest.fixture
def fake_load(monkeypatch):
    from spatialhub.utils.profiling import load

    def install(**kw):
        fake = FakeLoad(**kw)
        monkeypatch.setattr(load, "benchmark_load", fake)
        return fake
    return install


def test_a_short_probe_is_never_judged_on_too_few_latencies_above_its_percentile(fake_load):
    """Every probe holds enough requests for 10 latencies above the p99 (1,000), however
    short duration_s: a p99 over 25 requests is their maximum, and its interval cannot
    bound the percentile from above, so a 'meets' there would be a guess."""
    fake = fake_load(latency=lambda rate: 1.0 if rate < 3000 else 50.0)
    s = find_peak_qps(_native._noop, latency_bound_ms=20.0, duration_s=0.05, max_time_s=60,
                      progress=False)
    timed = [c for c in fake.calls if c["arrival"] != "closed"]
    assert timed and all(c["qps"] * c["duration_s"] >= 1000 for c in timed), timed
    for probe in s.search["probes"]:
        assert probe["stats"]["completed"] >= 1000
    assert 3000 / 1.05 <= s.search["peak_qps"] < 3000 and s.search["min_requests"] == 1000


def test_a_probe_that_cannot_tell_is_run_again_longer_not_counted_as_a_miss(fake_load):
    """A probe that came out with fewer than 1,000 completed requests (p99) says nothing of
    the rate: it is 'undecided', and the same rate runs again twice as long."""
    fake = fake_load(short=[400])
    s = find_peak_qps(_native._noop, latency_bound_ms=20.0, duration_s=1.0, max_time_s=60,
                      progress=False, tolerance=0.5)
    probes = s.search["probes"]
    assert probes[0]["verdict"] == "undecided" and probes[1]["verdict"] == "meets"
    assert probes[0]["offered_qps"] == probes[1]["offered_qps"]
    timed = [c for c in fake.calls if c["arrival"] != "closed"]
    assert timed[1]["duration_s"] == 2 * timed[0]["duration_s"]
    assert s.search["misses_at_qps"] != probes[0]["offered_qps"]    # not taken as a miss


def test_the_search_stops_at_the_request_cap_and_says_the_peak_is_at_least_that(fake_load,
                                                                               monkeypatch):
    """A callable that meets the bound at any rate: the doubling stops at the most one run
    may hold (LOAD_MAX_REQUESTS / duration_s; here a cap of 5,000 stands in for 10
    million) instead of asking for more and failing mid-search."""
    from spatialhub.utils.profiling import load

    monkeypatch.setattr(load, "LOAD_MAX_REQUESTS", 5000, raising=False)
    fake = fake_load()
    s = find_peak_qps(_native._noop, latency_bound_ms=20.0, duration_s=1.0, max_time_s=60,
                      progress=False)
    timed = [c for c in fake.calls if c["arrival"] != "closed"]
    assert all(c["qps"] * c["duration_s"] <= 5000 for c in timed)
    search = s.search
    assert search["capped"] is True and search["rate_cap_qps"] == pytest.approx(5000)
    assert search["peak_qps"] == search["rate_cap_qps"] and search["misses_at_qps"] is None
    assert "the request cap" in search["stopped"] and "at least" in search["stopped"]


def test_a_ctrl_c_between_probes_keeps_the_search_done(fake_load):
    """Ctrl-C after the third probe (outside benchmark_load: judging a probe takes a third
    of a search's time): BenchmarkInterrupted whose .stats is the result as the search had
    it -- the highest rate that met the bound, with every completed probe in .search."""
    from spatialhub.utils.profiling import load

    fake = fake_load()
    judge = load._judge

    def judge_then_ctrl_c(stats, *a):
        out = judge(stats, *a)
        if len([c for c in fake.calls if c["arrival"] != "closed"]) == 3:
            raise KeyboardInterrupt
        return out
    import unittest.mock
    with unittest.mock.patch.object(load, "_judge", judge_then_ctrl_c):
        with pytest.raises(BenchmarkInterrupted, match="after 2 probe") as e:
            find_peak_qps(_native._noop, latency_bound_ms=20.0, duration_s=1.0, max_time_s=60,
                          progress=False)
    s = e.value.stats
    assert isinstance(s, LoadStats) and isinstance(e.value.__cause__, KeyboardInterrupt)
    assert len(s.search["probes"]) == 2 and s.search["stopped"].startswith("interrupted")
    assert s.search["peak_qps"] == s.offered_qps == s.search["probes"][1]["offered_qps"]


def test_a_ctrl_c_in_a_probe_keeps_the_probes_before_it(fake_load):
    """Ctrl-C inside the second probe's benchmark_load: the first probe is the result; the
    cut one is not in .search."""
    fake = fake_load()
    real = fake.__call__

    def interrupting(func, *args, **kw):
        if kw.get("arrival") != "closed" and len(fake.calls) == 2:
            fake.calls.append(kw)
            raise BenchmarkInterrupted("cut")
        return real(func, *args, **kw)
    from spatialhub.utils.profiling import load
    import unittest.mock
    with unittest.mock.patch.object(load, "benchmark_load", interrupting):
        with pytest.raises(BenchmarkInterrupted, match="after 1 probe") as e:
            find_peak_qps(_native._noop, latency_bound_ms=20.0, duration_s=1.0, max_time_s=60,
                          progress=False)
    assert len(e.value.stats.search["probes"]) == 1


def test_the_largest_seed_wraps_for_the_next_probes_instead_of_failing_mid_search(fake_load):
    """seed=sys.maxsize is a valid seed: the probes after it take 0, 1, ... (benchmark_load's
    range), not a seed the user never gave refused after the first probe."""
    import sys
    fake = fake_load()
    find_peak_qps(_native._noop, latency_bound_ms=20.0, duration_s=1.0, max_time_s=60,
                  seed=sys.maxsize, progress=False, tolerance=0.5)
    seeds = [c["seed"] for c in fake.calls if c["arrival"] != "closed"]
    assert seeds[:3] == [sys.maxsize, 0, 1]


@pytest.mark.parametrize("tol", [5e-324, 1e-320, 1e-13])
def test_a_tolerance_too_small_to_bisect_is_refused_before_func_runs(tol):
    calls = []
    with pytest.raises(ValueError, match="tolerance must be at least 1e-12"):
        find_peak_qps(lambda: calls.append(1), latency_bound_ms=5.0, tolerance=tol,
                      progress=False)
    assert calls == []


def test_max_queue_goes_to_the_probes_only(fake_load):
    fake = fake_load()
    s = find_peak_qps(_native._noop, latency_bound_ms=20.0, duration_s=1.0, max_time_s=60,
                      max_queue=8, progress=False, tolerance=0.5)
    closed = [c for c in fake.calls if c["arrival"] == "closed"]
    timed = [c for c in fake.calls if c["arrival"] != "closed"]
    assert [c["max_queue"] for c in closed] == [None]
    assert timed and all(c["max_queue"] == 8 for c in timed)
    assert s.search["max_queue"] == 8


def test_a_probe_that_dropped_requests_misses_the_bound():
    s = LoadStats("f", "CPU", offered_qps=100.0, requests=2000, completed=1990, dropped=10,
                  overloaded=False, latencies_ms=[1.0] * 1990)
    from spatialhub.utils.profiling.load import _judge
    assert _judge(s, 99.0, 20.0)[0] == "misses"


@pytest.mark.parametrize("kw, exc, text", [
    (dict(percentile="99"), TypeError, "find_peak_qps(): percentile must be a real number, not str"),
    (dict(latency_bound_ms="5"), TypeError, "latency_bound_ms must be a real number, not str"),
    (dict(seed=-1), ValueError, "find_peak_qps(): seed must be >= 0, got -1"),
    (dict(seed="1"), TypeError, "find_peak_qps(): seed must be"),
    (dict(max_queue=-1), ValueError, "find_peak_qps(): max_queue must be >= 0, got -1"),
    (dict(arrival="closed"), ValueError, "arrival must be 'poisson' or 'uniform'"),
    (dict(qps=10), TypeError, "qps does not apply: the search chooses the rates"),
    (dict(duration_s=2e6), ValueError, "duration_s must be at most 1,000,000 seconds"),
    (dict(percentile=99.99999), ValueError, "at most 10,000,000 fit in one run"),
])
def test_find_peak_qps_refuses_a_bad_argument_before_func_runs(kw, exc, text):
    calls = []
    args = dict(latency_bound_ms=5.0, progress=False)
    args.update(kw)
    with pytest.raises(exc, match=re.escape(text)):
        find_peak_qps(lambda: calls.append(1), **args)
    assert calls == []


def test_find_peak_qps_takes_numpy_numbers(fake_load):
    fake_load()
    s = find_peak_qps(_native._noop, latency_bound_ms=np.float32(20.0),
                      percentile=np.float64(99.0), duration_s=np.float32(1.0),
                      tolerance=np.float32(0.5), seed=np.int64(3), max_time_s=60,
                      progress=False)
    assert s.search["latency_bound_ms"] == 20.0 and s.search["peak_qps"] is not None


@pytest.mark.parametrize("preset, kw, text", [
    (prof.mlperf_single_stream, dict(workers=2),
     "mlperf_single_stream(): workers does not apply: SingleStream is one query at a time"),
    (prof.mlperf_single_stream, dict(arrival="poisson"),
     "mlperf_single_stream(): arrival does not apply"),
    (prof.mlperf_offline, dict(arrival="closed"), "mlperf_offline(): arrival does not apply"),
    (prof.mlperf_offline, dict(qps=10), "mlperf_offline(): qps does not apply"),
])
def test_an_mlperf_preset_refuses_a_keyword_that_would_change_its_scenario(preset, kw, text):
    calls = []
    with pytest.raises(TypeError, match=re.escape(text)):
        preset(lambda: calls.append(1), duration_s=0.05, **kw)
    assert calls == []


def test_the_command_line_runs_under_load(tmp_path, capsys):
    from spatialhub.utils.profiling import cli

    out = tmp_path / "load.json"
    rc = cli.main(["--qps", "40", "--duration", "0.3", "--seed", "3", "--warmup", "1",
                   "--json", str(out), "--name", "demo"])
    got = capsys.readouterr()
    printed = got.out
    assert rc == 0 and "### Latency under load" in printed and "| **demo** |" in printed
    # what the run will do is said before it starts, on stderr: a 10 s run is not a silence
    assert got.err.splitlines()[0] == ("spatialhub-bench: 'demo' under load: 40 requests/s "
                                       "(poisson) for 0.3 s, about 12 requests, 1 worker")
    rc = cli.main(["--arrival", "closed", "--duration", "0.05", "--workers", "2", "--warmup",
                   "0", "--name", "demo", "--no-progress"])
    got = capsys.readouterr()
    assert rc == 0 and "under load" not in got.err
    rc = cli.main(["--arrival", "closed", "--duration", "0.05", "--workers", "2", "--warmup",
                   "0", "--name", "demo"])
    assert capsys.readouterr().err.splitlines()[0] == (
        "spatialhub-bench: 'demo' under load: requests as fast as they are served (closed) "
        "for 0.05 s, 2 workers")
    saved = LoadStats.from_dict(json.loads(out.read_text()))
    assert saved.seed == 3 and saved.offered_qps == 40.0 and len(saved.latencies_ms) == \
        saved.completed
    for argv in (["--qps", "10", "--iters", "5"], ["--find-peak"], ["--latency-bound", "3"],
                 ["--qps", "10", "--find-peak", "--latency-bound", "3"],
                 ["--workers", "2"], ["--qps", "0"], ["--arrival", "closed", "--qps", "5"]):
        assert cli.main(argv) == 2, argv
    capsys.readouterr()


def test_the_command_line_finds_the_peak(tmp_path, capsys):
    from spatialhub.utils.profiling import cli

    target = tmp_path / "target.py"
    target.write_text("import time\ndef work():\n    time.sleep(0.001)\n")
    rc = cli.main(["--callable", f"{target}:work", "--find-peak", "--latency-bound", "20",
                   "--percentile", "90", "--duration", "0.2", "--max-time", "4", "--warmup",
                   "1", "--seed", "1"])
    got = capsys.readouterr()
    assert rc == 0
    assert got.out.startswith("Peak: ") and "### Probes, in the order run" in got.out
    assert "find_peak_qps 'work': p90 <= 20 ms" in got.err


def test_the_command_line_says_no_rate_when_even_back_to_back_is_over_the_bound(tmp_path,
                                                                                capsys):
    """A 3 ms call against a 1 ms bound: stdout and stderr say the same thing -- no rate,
    because one request at a time is already over it -- not 'not searched'."""
    from spatialhub.utils.profiling import cli

    target = tmp_path / "slow.py"
    target.write_text("import time\ndef work():\n    time.sleep(0.003)\n")
    rc = cli.main(["--callable", f"{target}:work", "--find-peak", "--latency-bound", "1",
                   "--duration", "0.3", "--warmup", "1"])
    got = capsys.readouterr()
    assert rc == 0
    assert got.out.startswith("Peak: none: even back to back"), got.out[:200]
    assert "not searched" not in got.out and "even back to back" in got.err


def test_the_command_line_hands_max_queue_to_the_peak_search(monkeypatch, capsys):
    from spatialhub.utils.profiling import cli

    seen = {}

    def search(func, *args, **kw):
        seen.update(kw)
        s = LoadStats("demo", "CPU", offered_qps=10.0)
        s.search = {"latency_bound_ms": 5.0, "percentile": 99.0, "peak_qps": None,
                    "probes": [], "probe_duration_s": 10.0, "elapsed_s": 1.0,
                    "stopped": "max_time_s reached"}
        return s
    monkeypatch.setattr(cli, "find_peak_qps", search)
    assert cli.main(["--find-peak", "--latency-bound", "5", "--max-queue", "4"]) == 0
    assert seen["max_queue"] == 4
    out = capsys.readouterr().out
    assert out.startswith("Peak: not searched: the search stopped before its first probe")


@pytest.mark.parametrize("argv, said", [
    (["--qps", "1e9", "--duration", "100"],
     "--qps 1000000000 for 100 s (--duration) asks for 100,000,000,000 requests; at most "
     "10,000,000 fit in one run (lower --qps or --duration)"),
    (["--qps", "2e6"], "asks for 20,000,000 requests"),
    (["--qps", "10", "--duration", "2e6"],
     "argument --duration: must be at most 1,000,000 seconds, got '2e6'"),
    (["--qps", "10", "--duration", "1e-12"], "argument --duration: must be at least a nanosecond"),
    (["--qps", "10", "--workers", "1000"], "argument --workers: must be <= 256, got 1000"),
    (["--find-peak", "--latency-bound", "5", "--arrival", "closed"],
     "--find-peak searches a rate: --arrival closed has none (use poisson or uniform)"),
    (["--find-peak", "--latency-bound", "5", "--percentile", "99.99999"],
     "--percentile 99.99999 needs 100,000,000 requests a probe"),
    (["--find-peak", "--latency-bound", "5", "--qps", "3"], "--find-peak chooses the rates itself"),
])
def test_a_load_usage_error_is_status_2_in_the_command_lines_words(argv, said, capsys):
    """Refused before anything runs, as argparse refuses: status 2, the options as typed,
    never a Python name (qps * duration_s) or a traceback."""
    from spatialhub.utils.profiling import cli

    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert said in err, err
    assert "Traceback" not in err and "duration_s" not in err and "benchmark_load()" not in err


def test_compare_refuses_a_load_result_saying_how_runs_under_load_are_set_side_by_side(
        tmp_path, capsys):
    from spatialhub.utils.profiling import cli

    saved = tmp_path / "load.json"
    saved.write_text(LoadStats("demo", "CPU", offered_qps=40.0, completed=3,
                               latencies_ms=[1.0, 2.0, 3.0]).to_json(samples=True))
    assert cli.main(["--compare", str(saved), str(saved)]) == 2
    err = capsys.readouterr().err
    assert f"{saved} holds a run under load (--qps / --find-peak)" in err
    assert "--compare compares back-to-back timings, not runs under load" in err
    assert "--report" in err and "Traceback" not in err


def test_the_command_line_writes_a_readiness_report_of_a_run_under_load(tmp_path, capsys):
    """--report and --budget apply under load as to any run: the budget is a load result's
    figure (achieved_qps a floor, p99_ms a ceiling), stated met or failed in the page."""
    from spatialhub.utils.profiling import cli

    page = tmp_path / "load.md"
    rc = cli.main(["--qps", "40", "--duration", "0.3", "--seed", "3", "--warmup", "1",
                   "--name", "demo", "--report", str(page), "--budget", "achieved_qps=1000",
                   "--budget", "p99_ms=10000"])
    capsys.readouterr()
    assert rc == 0
    text = page.read_text()
    assert "## Latency under load" in text and "| demo |" in text
    assert "demo: achieved_qps" in text and "FAILED" in text     # 40/s is not 1,000/s
    assert "few requests (demo)" in text                          # its own flag, explained
    # a budget on a figure a load result does not have is refused before anything runs
    assert cli.main(["--qps", "40", "--report", str(page), "--budget", "fps=3"]) == 1
    assert "a result has no figure 'fps'" in capsys.readouterr().err


def test_the_pytest_fixture_runs_under_load(tmp_path):
    (tmp_path / "test_subject.py").write_text(textwrap.dedent("""
        import time
        from spatialhub.utils.profiling import LoadStats

        def test_load(benchmark):
            s = benchmark.load(time.sleep, 0.001, qps=100, duration_s=0.3, seed=2,
                               num_warmup=1)
            assert isinstance(s, LoadStats) and benchmark.load_stats is s
            assert s.completed == s.requests
            assert benchmark.extra_info["load"]["p99_ms"] == s.p99_ms
            assert benchmark.stats.native.timed_iters == s.completed
    """))
    env = dict(os.environ)
    env.pop("PYTEST_ADDOPTS", None)
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "-p", "no:benchmark", "--benchmark-json", "out.json"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stdout + p.stderr
    saved = json.loads((tmp_path / "out.json").read_text())["benchmarks"][0]
    assert saved["extra_info"]["load"]["arrival"] == "poisson"


def test_the_fixture_hands_back_a_run_with_no_requests_and_warns(tmp_path):
    """qps * duration_s under one arrival: no request was made.  The test gets the
    LoadStats (every figure None) and the NoRequestsWarning, not a TypeError from inside
    the fixture; the benchmark has no row, since nothing was timed."""
    (tmp_path / "test_subject.py").write_text(textwrap.dedent("""
        import pytest
        from spatialhub.utils.profiling import LoadStats, NoRequestsWarning

        def test_empty(benchmark):
            with pytest.warns(NoRequestsWarning, match="no requests"):
                s = benchmark.load(lambda: None, qps=1e-10, duration_s=0.1, seed=1,
                                   num_warmup=0)
            assert isinstance(s, LoadStats) and benchmark.load_stats is s
            assert s.requests == s.completed == 0 and s.p99_ms is None
            assert benchmark.extra_info["load"]["completed"] == 0
    """))
    env = dict(os.environ)
    env.pop("PYTEST_ADDOPTS", None)
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "-p", "no:benchmark", "--benchmark-json", "out.json"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "TypeError" not in p.stdout + p.stderr
    out = tmp_path / "out.json"      # nothing timed: no file, or one with no benchmark
    assert not out.exists() or json.loads(out.read_text())["benchmarks"] == []


def test_plot_load_draws_the_rates(run):
    pytest.importorskip("matplotlib")
    fig = prof.plot_load([run, run])
    ax = fig.axes[0]
    assert ax.get_xlabel() == "offered rate (requests/s)"
    assert {t.get_text() for t in ax.get_legend().get_texts()} >= {"p50", "p99"}
