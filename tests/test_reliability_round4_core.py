"""Reliability round 4, the native core: sums of user-given sizes are checked (an
overflowing run_sizes crashed compare_benchmarks), a loop of calls leaves the
interpreter's intern table alone (a 0.96 MB step after ~2,000 calls on 3.11), and a
run's buffers peak at two doubles a sample.  Each test failed on a601027 (findings:
docs/reliability.md, "Round 4")."""
import sys
import textwrap
import warnings

import numpy as np
import pytest

from spatialhub.utils.profiling import _native

from reliability_support import UNDER_SANITIZER, hwm_available, run_python

BIG = 2**62


def stats(samples, run_sizes=None):
    s = _native._stats_from_samples(np.asarray(samples, dtype=float))
    if run_sizes is not None:
        s.run_sizes = tuple(run_sizes)
    return s


# ---- sums of user-given sizes --------------------------------------------------------

def test_run_sizes_whose_sum_overflows_are_refused_where_they_are_set():
    """Four valid counts whose sum passes 2**63: a clear ValueError naming the field."""
    s = stats(np.linspace(1.0, 2.0, 8))
    with pytest.raises(ValueError, match=r"run_sizes must add up to at most 9223372036854775807"):
        s.run_sizes = (BIG, BIG, BIG, BIG + 8)
    assert s.run_sizes is None   # unchanged


def test_a_paired_comparison_of_overflowing_run_sizes_is_an_error_not_a_crash():
    """The hostile review's reproduction (it segfaulted, and UBSan stopped in
    run_sizes_of): run in a child, which must exit cleanly with the ValueError."""
    code = textwrap.dedent(f"""
        import numpy as np
        from spatialhub.utils.profiling import _native
        a = _native._stats_from_samples(np.linspace(1.0, 2.0, 8))
        b = _native._stats_from_samples(np.linspace(1.0, 2.0, 8))
        for sizes in [({BIG}, {BIG}, {BIG}, {BIG} + 8), (2**63 - 1, 2**63 - 1)]:
            for s in (a, b):
                try:
                    s.run_sizes = sizes
                except ValueError as exc:
                    print("refused:", exc)
        try:
            _native.compare_benchmarks(a, b, paired=True)
        except ValueError as exc:
            print("compare:", exc)
    """)
    p = run_python(code)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.count("refused: BenchmarkStats.run_sizes must add up to at most") == 4
    assert "compare: compare_benchmarks(): paired=True needs run_sizes" in p.stdout


def test_run_sizes_that_do_not_add_up_keep_their_clear_error():
    a, b = stats(np.linspace(1.0, 2.0, 8), (4, 5)), stats(np.linspace(1.0, 2.0, 8), (4, 4))
    with pytest.raises(ValueError, match=r"baseline.run_sizes add up to 9, but it has 8 samples"):
        _native.compare_benchmarks(a, b, paired=True)


def test_the_baseline_column_with_huge_run_sizes_renders_without_them():
    """cells.c summed run_sizes without a check; sizes that cannot account for the samples
    are ignored there (as before for sizes that merely differ)."""
    from spatialhub.utils.profiling import format_benchmark_table

    a = stats(np.linspace(1.0, 2.0, 8))
    a.name = "a"
    b = stats(np.linspace(2.0, 4.0, 8), (BIG // 2, 2))
    b.name = "b"
    text = format_benchmark_table([a, b], baseline=a)
    assert "| **b** |" in text and "2.00x" in text


# ---- the intern table ---------------------------------------------------------------

_INTERN_PROBE = textwrap.dedent("""
    import gc, sys, warnings
    from spatialhub.utils.profiling import BenchmarkWarning, benchmark_callable

    def strings_of(result, caught):
        out = []
        def walk(o):
            if isinstance(o, dict):
                for k, v in o.items():
                    if isinstance(k, str):
                        out.append(k)
                    walk(v)
            elif isinstance(o, (tuple, list)):
                for v in o:
                    walk(v)
            elif isinstance(o, str):
                out.append(o)
        for o in (result.env, result.flags, result.stability, result.rerun_basis):
            walk(o)
        for w in caught:
            walk(vars(w.message))
        return out

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", BenchmarkWarning)
        r = benchmark_callable(lambda: None, num_iters=10, num_warmup=1, track_ram=False)
    names = strings_of(r, caught)
    assert caught and "process_peak_rss_mb" in names and "causes" in names, names
    # the interned instances among them (a fresh equal string interns to them); strings
    # of one character and the empty string are singletons, always alive
    fresh = lambda s: (s + ".")[:-1]
    # (kept as copies: holding the instances would keep them alive)
    interned = sorted({fresh(s) for s in names if len(s) > 1 and sys.intern(fresh(s)) is s})
    del r, caught, names
    gc.collect()
    print([s for s in interned if (lambda p: sys.intern(p) is p)(fresh(s))])
""")


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="interned strings are immortal from 3.12")
def test_a_result_never_holds_the_only_reference_to_an_interned_string():
    """On 3.11 an interned string leaves the intern table when it dies, and a table that
    strings keep entering and leaving resizes with the calls: a loop of 3,000
    benchmark_callable calls kept a 961,216-byte table (2**16 slots) from call ~2,000 on.
    So a string a result (or its warning) interned must outlive it.  In a fresh
    interpreter: under pytest other code holds most of these strings alive."""
    p = run_python(_INTERN_PROBE)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip() == "[]", f"interned by a result and freed with it: {p.stdout}"


def test_a_loop_of_three_thousand_calls_keeps_under_200_kb():
    """The issue's figure, in a fresh interpreter: 200 warm calls, then 3,000 under
    tracemalloc (warnings ignored); the traced growth stays under 200 kB."""
    code = textwrap.dedent("""
        import gc, tracemalloc, warnings
        warnings.simplefilter("ignore")
        from spatialhub.utils.profiling import benchmark_callable
        f = lambda: None
        for _ in range(200):
            benchmark_callable(f, num_iters=2, num_warmup=0, track_ram=False)
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(3000):
            benchmark_callable(f, num_iters=2, num_warmup=0, track_ram=False)
        gc.collect()
        print(tracemalloc.get_traced_memory()[0] - before)
    """)
    p = run_python(code, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    grew = int(p.stdout.split()[-1])
    assert grew < 200_000, f"3,000 calls kept {grew:,} bytes"


# ---- the run's buffers ---------------------------------------------------------------

@pytest.mark.skipif(not hwm_available(), reason="needs /proc/self/clear_refs and VmHWM")
def test_a_million_iterations_peak_at_two_doubles_a_sample():
    """1,000,000 iterations of an empty call: the samples (8 B) and one working copy
    (8 B); the rerun interval's copy used to come on top of both (24 B a sample,
    23.2 MiB).  Measured as the growth of the kernel's high-water mark in a child."""
    from reliability_support import UNDER_SANITIZER
    if UNDER_SANITIZER:
        pytest.skip("ASan's redzones and quarantine change the peak: a figure of the normal build")
    code = textwrap.dedent("""
        import gc
        from spatialhub.utils.profiling import benchmark_callable
        def status(key):
            with open("/proc/self/status") as f:
                for line in f:
                    if line.startswith(key + ":"):
                        return int(line.split()[1]) * 1024
        f = lambda: None
        benchmark_callable(f, num_iters=1000, num_warmup=0, track_ram=False)
        gc.collect()
        rss0 = status("VmRSS")
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        r = benchmark_callable(f, num_iters=1_000_000, num_warmup=0, track_ram=False)
        print(status("VmHWM") - rss0)
    """)
    p = run_python(code, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    grew = int(p.stdout.split()[-1])
    # 16,000,000 bytes of buffers, plus page granularity and the result's small objects
    assert grew <= 17.0 * 2**20, f"{grew / 2**20:.1f} MiB for 1,000,000 samples"


# ---- remedies in the words of the interface the user called ---------------------------

def test_the_pytest_fixture_passes_its_own_words_down(tmp_path):
    """Under pytest the remedies named num_iters, num_warmup and benchmark_repeated, which
    the fixture does not take: the fixture now passes the plugin's option names down, and
    the core composes every remedy from them."""
    import subprocess
    (tmp_path / "test_subject.py").write_text(textwrap.dedent("""
        from spatialhub.utils.profiling import _native, _words
        seen = []

        def test_words(benchmark):
            benchmark(lambda: seen.append((_words.current(), _native._warning_texts(None))))
            # (the call that gives benchmark() its return value is made outside the run)
            timed = [texts for words, texts in seen if words == _words.PYTEST]
            assert len(timed) >= 5, [w for w, _ in seen][:3]
            said = " ".join(timed[0].values())
            assert "raise --benchmark-min-rounds" in said
            assert "num_iters" not in said and "num_warmup" not in said
            assert "benchmark_repeated" not in said
    """))
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "-p", "no:benchmark", "--benchmark-max-time=0.05",
                        "--benchmark-reference=off"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]


def test_a_direct_call_keeps_benchmark_callables_words_and_a_nested_one_its_callers():
    from spatialhub.utils.profiling import _words

    assert "raise num_iters" in _native._warning_texts(None)["NoisyWarning"]
    with _words.remedy_words(_words.CLI):
        assert "raise --iters" in _native._warning_texts(None)["NoisyWarning"]
        with _words.remedy_words(_words.MODELS):
            assert "raise iters" in _native._warning_texts(None)["NoisyWarning"]
        assert "raise --iters" in _native._warning_texts(None)["NoisyWarning"]
    assert _words.current() == _words.CALLABLE


# ---- any num_iters (issue 33) ----------------------------------------------------------

_HUGE = textwrap.dedent("""
    import os, signal, sys, threading, time
    from spatialhub.utils.profiling import BenchmarkInterrupted, benchmark_callable

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    first, sent = [], []

    def interrupt():
        sent.append(time.perf_counter())
        os.kill(os.getpid(), signal.SIGINT)

    def f():
        if not first:
            first.append((time.perf_counter() - t0, rss() - r0))
            threading.Timer(1.0, interrupt).start()

    benchmark_callable(sorted, [1], num_iters=3, num_warmup=0, progress=False)   # set-up done
    r0, t0 = rss(), time.perf_counter()
    try:
        benchmark_callable(f, num_iters=10**9, num_warmup=0, progress=False)
    except BenchmarkInterrupted as exc:
        print(first[0][0], first[0][1], time.perf_counter() - sent[0], exc.stats.timed_iters)
""")


@pytest.mark.skipif(UNDER_SANITIZER, reason="ASan's shadow memory and checks slow every step")
def test_a_billion_iterations_start_at_once_and_stop_at_ctrl_c():
    """num_iters=10**9 sized and touched 16 GB of buffers before the first call (no call
    after 3 s; Ctrl-C unanswered for ~50 s).  The buffers now grow as samples arrive: the
    first call within 0.1 s, at most 64 MiB more before it, and a Ctrl-C one second in
    answered (the samples so far summarised and kept) within 1.5 s."""
    p = run_python(_HUGE, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    first_s, grew, answered_s, kept = p.stdout.split()
    assert float(first_s) < 0.1 and int(grew) <= 64 * 2**20, p.stdout
    assert float(answered_s) < 1.5 and int(kept) > 1000, p.stdout
