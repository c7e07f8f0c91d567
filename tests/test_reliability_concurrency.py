"""Concurrency, fork, sub-interpreters and resource limits (issue 7, items 6-7).

RSS is a property of the process, not of a thread: a benchmark's
ram_delta_mb counts whatever any thread allocated during its window.  What
the harness guarantees is that windows never erase each other -- opening one
(which resets the kernel's high-water mark) first credits the current mark
to every window already open, so a nested or concurrent benchmark cannot hide
the peak of another.  docs/memory.md and docs/reliability.md say so.
"""
import json
import os
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

import spatialhub.utils.profiling as prof
from spatialhub.utils.profiling import _native
from reliability_support import PKG_ROOT, UNDER_SANITIZER, hwm_available, run_python

pytestmark = pytest.mark.filterwarnings("ignore::spatialhub.utils.profiling.BenchmarkWarning")

bc = prof.benchmark_callable
MiB = 1 << 20
HWM = sys.platform.startswith("linux") and hwm_available()
needs_hwm = pytest.mark.skipif(not HWM, reason="the kernel's high-water-mark reset is not available")


def touch_temporary(mb):
    """Allocate `mb` MiB, write every page, free it before returning."""
    a = np.ones(mb * MiB // 8)
    a[::512] = 2.0
    del a


def run_threads(targets):
    errors = []

    def wrap(fn):
        def inner():
            try:
                fn()
            except BaseException as e:  # noqa: BLE001
                errors.append(e)
        return inner

    threads = [threading.Thread(target=wrap(t)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a benchmark thread hung"
    return errors


# ---- threads ---------------------------------------------------------------------

def test_threads_benchmarking_at_once_count_their_own_calls():
    n_threads = 8
    barrier = threading.Barrier(n_threads)
    results, calls = {}, {}

    def worker(i):
        def target():
            count = {"n": 0}

            def work():
                count["n"] += 1
                sum(range(50 + 10 * i))
                if count["n"] % 3 == 0:
                    time.sleep(0)        # hand the GIL over mid-run

            barrier.wait()
            results[i] = bc(work, name=f"t{i}", num_warmup=i, num_iters=20 + 7 * i,
                            track_ram=i % 2 == 0, disable_gc=i % 3 == 0)
            calls[i] = count["n"]
        return target

    was = __import__("gc").isenabled()
    errors = run_threads([worker(i) for i in range(n_threads)])
    assert not errors, errors
    assert __import__("gc").isenabled() == was, "disable_gc runs restore the process-wide state"
    for i in range(n_threads):
        s = results[i]
        assert s.name == f"t{i}"
        assert s.warmup_iters == i and s.timed_iters == 20 + 7 * i == len(s.samples_ms)
        assert calls[i] == i + 20 + 7 * i
        assert s.ram_peak_method == ("off" if i % 2 else ("hwm" if HWM else "sampled"))


def test_overlapping_disable_gc_runs_keep_the_collector_off_until_the_last_ends():
    # A enters its timed loop, B enters its own, A finishes first: B's loop
    # must still run with the collector off, and the state from before A
    # comes back only when B is done.
    gc = __import__("gc")
    a_in_loop, b_in_loop, a_done = threading.Event(), threading.Event(), threading.Event()
    seen_by_b = []

    def a_work():
        if not a_in_loop.is_set():
            a_in_loop.set()
            assert b_in_loop.wait(30)

    def b_work():
        b_in_loop.set()
        seen_by_b.append((a_done.is_set(), gc.isenabled()))
        time.sleep(0.001)

    def run_a():
        bc(a_work, name="a", num_warmup=0, num_iters=3, disable_gc=True)
        a_done.set()

    def run_b():
        assert a_in_loop.wait(30)
        bc(b_work, name="b", num_warmup=0, num_iters=200, disable_gc=True)

    gc.enable()
    try:
        assert not run_threads([run_a, run_b])
        after_a = [on for done, on in seen_by_b if done]
        assert len(after_a) > 10, "B kept running after A finished"
        assert not any(on for _, on in seen_by_b), "the collector came on inside B's loop"
        assert gc.isenabled(), "the state from before the first run is restored by the last"
    finally:
        gc.enable()


def test_a_failing_thread_does_not_disturb_the_others():
    class Boom(Exception):
        pass

    barrier = threading.Barrier(4)
    out = {}

    def worker(i):
        def target():
            n = {"k": 0}

            def work():
                n["k"] += 1
                time.sleep(0.0002)
                if i == 2 and n["k"] == 6:
                    raise Boom(i)

            barrier.wait()
            try:
                out[i] = bc(work, name=f"w{i}", num_warmup=2, num_iters=10)
            except Boom as e:
                out[i] = e
        return target

    assert not run_threads([worker(i) for i in range(4)])
    assert isinstance(out[2], Boom)
    assert out[2].__notes__ == ["benchmark 'w2': raised by func in timed iteration 4 of 10"]
    for i in (0, 1, 3):
        assert out[i].timed_iters == 10 and out[i].name == f"w{i}"


@needs_hwm
def test_concurrent_windows_share_the_process_rss():
    # A allocates 100 MiB temporaries; B allocates nothing.  A must see its
    # peak; B, being timed in the same process at the same time, may see it
    # too (RSS is process-wide) -- it is only required to be a valid figure.
    started = threading.Event()
    out = {}

    def a():
        started.wait()
        out["a"] = bc(touch_temporary, 100, name="alloc", num_warmup=1, num_iters=5)

    def b():
        started.set()
        out["b"] = bc(time.sleep, 0.002, name="idle", num_warmup=1, num_iters=40)

    assert not run_threads([a, b])
    assert out["a"].ram_delta_mb >= 90
    assert 0.0 <= out["b"].ram_delta_mb < 1024


@needs_hwm
def test_a_window_opened_later_does_not_erase_an_earlier_peak():
    # A's only timed call: allocate and free 100 MiB, then let B run a whole
    # benchmark (whose window reset the high-water mark) before returning.
    a_allocated, b_done = threading.Event(), threading.Event()
    out = {}

    def work_a():
        touch_temporary(100)
        a_allocated.set()
        assert b_done.wait(60)

    def a():
        out["a"] = bc(work_a, name="A", num_warmup=0, num_iters=1)

    def b():
        assert a_allocated.wait(60)
        out["b"] = bc(_native._noop, name="B", num_warmup=0, num_iters=5)
        b_done.set()

    assert not run_threads([a, b])
    assert out["a"].ram_delta_mb >= 90, out["a"].ram_delta_mb
    assert out["b"].ram_delta_mb < 50


@needs_hwm
def test_nested_windows_each_see_their_own_peak():
    inner = []

    def outer_then_inner():
        touch_temporary(100)                    # the outer's temporary, freed first
        inner.append(bc(_native._noop, num_warmup=0, num_iters=3))

    s = bc(outer_then_inner, num_warmup=0, num_iters=2)
    assert s.ram_delta_mb >= 90
    assert all(x.ram_delta_mb < 50 for x in inner)

    inner.clear()

    def outer_of_alloc():
        inner.append(bc(touch_temporary, 100, num_warmup=0, num_iters=2))

    s = bc(outer_of_alloc, num_warmup=0, num_iters=2)
    assert s.ram_delta_mb >= 90
    assert all(x.ram_delta_mb >= 90 for x in inner)


# Regression (fixed in e56d525): the window list lived in the module state while the
# kernel's mark is per process, so a second module instance (re-import, or a
# sub-interpreter) erased the first one's peak (0.0 MB instead of 100).
@needs_hwm
def test_windows_of_two_module_instances_do_not_erase_each_other():
    done = run_python("""
        import importlib, json, sys, warnings
        warnings.simplefilter("ignore")
        import numpy as np
        import spatialhub.utils.profiling._native as A
        del sys.modules["spatialhub.utils.profiling._native"]
        B = importlib.import_module("spatialhub.utils.profiling._native")
        assert A is not B
        def outer():
            t = np.ones(100 * 2**20 // 8); t[::512] = 2.0; del t
            B.benchmark_callable(B._noop, num_warmup=0, num_iters=1)
        print(json.dumps(A.benchmark_callable(outer, num_warmup=0, num_iters=1).ram_delta_mb))
    """)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1]) >= 90


def test_sampled_fallback_is_labelled_and_sane():
    old = _native._force_sampled_rss(True)
    try:
        assert _native._force_sampled_rss(True) is True
        held = []

        def keep_50mb():
            if not held:
                a = np.ones(50 * MiB // 8)
                a[::512] = 2.0
                held.append(a)

        s = bc(keep_50mb, num_warmup=1, num_iters=5)
        assert s.ram_peak_method == "sampled"
        assert 40 <= s.ram_delta_mb <= 120
        # the documented limit of sampling: a temporary freed inside the call
        # is gone before the sample is taken
        t = bc(touch_temporary, 100, num_warmup=1, num_iters=3)
        assert t.ram_peak_method == "sampled" and t.ram_delta_mb >= 0.0
        if not UNDER_SANITIZER:          # (ASan's quarantine keeps freed memory resident)
            assert t.ram_delta_mb < 90
        off = bc(_native._noop, num_warmup=0, num_iters=2, track_ram=False)
        assert off.ram_peak_method == "off" and off.ram_delta_mb == 0.0
    finally:
        _native._force_sampled_rss(old)
    assert _native._force_sampled_rss(old) is old


@pytest.fixture(scope="module")
def deny_clear_refs(tmp_path_factory):
    """An LD_PRELOAD shim under which opening /proc/self/clear_refs fails (EACCES)."""
    from cuda_support import build_test_library
    src = Path(__file__).resolve().parent / "deny_clear_refs" / "deny_clear_refs.c"
    return build_test_library(src, tmp_path_factory, "deny_clear_refs.so",
                              "the clear_refs shim", libs=["-ldl"])


def test_the_real_fallback_when_the_kernel_refuses_the_hwm_reset(deny_clear_refs):
    # Not the _force_sampled_rss hook: the real open() of /proc/self/clear_refs
    # fails, as in a sandbox, and memory.c must fall back to sampling by itself.
    preload = " ".join(p for p in (os.environ.get("LD_PRELOAD", ""), deny_clear_refs) if p)
    done = run_python("""
        import json, warnings
        import numpy as np
        warnings.simplefilter("ignore")
        from spatialhub.utils.profiling import benchmark_callable
        from spatialhub.utils.profiling._native import _force_sampled_rss
        assert _force_sampled_rss(False) is False     # the hook is not what is tested
        try:
            open("/proc/self/clear_refs", "w")
            denied = False
        except PermissionError:
            denied = True
        held = []
        def keep_8mb():
            a = np.ones(2**20); a[::512] = 2.0; held.append(a)
        s = benchmark_callable(keep_8mb, num_warmup=0, num_iters=20)
        print(json.dumps({"denied": denied, "method": s.ram_peak_method, "mb": s.ram_delta_mb}))
    """, env={"LD_PRELOAD": preload})
    assert done.returncode == 0, done.stderr[-2000:]
    r = json.loads(done.stdout.splitlines()[-1])
    assert r["denied"] is True, r
    assert r["method"] == "sampled", r
    assert 120 <= r["mb"] <= 400, r      # 20 x 8 MiB kept


# ---- fork ---------------------------------------------------------------------------

def _fork_and_run(child):
    """Run `child()` in a forked child; its return value (JSON) comes back."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                                   # pragma: no cover - child
        code = 1
        try:
            os.close(r)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                payload = json.dumps(child()).encode()
            os.write(w, payload)
            code = 0
        except BaseException as e:  # noqa: BLE001
            os.write(w, json.dumps({"error": repr(e)}).encode())
        finally:
            os._exit(code)
    os.close(w)
    chunks = []
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    out = json.loads(b"".join(chunks) or b"null")
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, out
    return out


def _child_benchmark():
    calls = {"n": 0}

    def work():
        calls["n"] += 1
        touch_temporary(40)

    s = bc(work, name="child", num_warmup=2, num_iters=6)
    return {"timed": s.timed_iters, "calls": calls["n"], "ram": s.ram_delta_mb,
            "method": s.ram_peak_method, "pid": os.getpid(), "rss": prof.get_ram_mb()}


needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork")


@needs_fork
def test_forked_child_can_benchmark():
    bc(_native._noop, num_warmup=0, num_iters=3)          # parent state exists first
    out = _fork_and_run(_child_benchmark)
    assert out["timed"] == 6 and out["calls"] == 8 and out["pid"] != os.getpid()
    assert out["method"] == ("hwm" if HWM else "sampled")
    if HWM:
        assert out["ram"] >= 35
    assert bc(_native._noop, num_warmup=0, num_iters=3).timed_iters == 3


@needs_fork
def test_fork_while_another_thread_is_mid_benchmark():
    started, forked = threading.Event(), threading.Event()
    out = {}

    def work():
        started.set()
        time.sleep(0.001)

    def t():
        out["t"] = bc(work, name="bg", num_warmup=0, num_iters=150)

    th = threading.Thread(target=t)
    th.start()
    try:
        assert started.wait(30)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)   # 3.12+: fork with threads
            child = _fork_and_run(_child_benchmark)
        forked.set()
    finally:
        th.join(60)
    assert child["timed"] == 6 and child["calls"] == 8
    if HWM:
        assert child["ram"] >= 35
    assert out["t"].timed_iters == 150 and out["t"].name == "bg"


@needs_fork
def test_fork_from_inside_a_benchmarked_call():
    children = []

    def work():
        if not children:
            children.append(_fork_and_run(_child_benchmark))

    s = bc(work, num_warmup=1, num_iters=4)
    assert s.timed_iters == 4 and children[0]["timed"] == 6


# ---- sub-interpreters -----------------------------------------------------------------

SUBINTERP_DRIVER = """
import json, sys
try:
    import _interpreters as I
except ImportError:
    try:
        import _xxsubinterpreters as I
    except ImportError:
        print(json.dumps({"skip": "no sub-interpreter module"})); sys.exit(0)
mode = sys.argv[1]
# NumPy 2 loads in one interpreter per process only ("cannot load module more
# than once per process"): the main interpreter here never imports it.
try:
    if mode == "legacy":
        try:
            iid = I.create(isolated=False)
        except TypeError:
            iid = I.create("legacy")
    else:
        iid = I.create()
except Exception as e:
    print(json.dumps({"skip": f"cannot create a {mode} interpreter: {e!r}"})); sys.exit(0)
code = '''
import json, os, sys, warnings
warnings.simplefilter("ignore")
sys.path.insert(0, %r)
result = {}
try:
    from spatialhub.utils.profiling import _native as N
    result["imported"] = True
    s = N.benchmark_callable(N._noop, num_warmup=1, num_iters=5)
    result["timed"] = s.timed_iters
    result["table"] = N.format_benchmark_table([s]).split("\\\\n\\\\n")[0].count("\\\\n")  # not the flags footnote
except BaseException as e:
    result["error"] = repr(e)
with open(%r, "w") as f:
    json.dump(result, f)
''' % (sys.argv[2], sys.argv[3])
runner = getattr(I, "run_string", None) or getattr(I, "exec")
runner(iid, code)
I.destroy(iid)
print(json.dumps(json.load(open(sys.argv[3]))))
"""


def _subinterp(mode, tmp_path):
    out = tmp_path / "sub.json"
    done = run_python(SUBINTERP_DRIVER, args=[mode, PKG_ROOT, str(out)])
    assert done.returncode == 0, done.stderr[-3000:]
    r = json.loads(done.stdout.strip().splitlines()[-1])
    if "skip" in r:
        pytest.skip(r["skip"])
    return r


def test_subinterpreter_sharing_the_gil_imports_and_benchmarks(tmp_path):
    r = _subinterp("legacy", tmp_path)
    assert r == {"imported": True, "timed": 5, "table": 2}, r


# An "isolated" interpreter: on 3.11 one that refuses subprocesses (and more);
# from 3.12 one with its own GIL, where only extensions that declare support for
# a per-interpreter GIL may load.  NumPy does not (it fails to import there), so
# neither do we: the import must fail with a clean ImportError, not crash.
OWN_GIL = sys.version_info >= (3, 12)


# Regression (fixed in e56d525): env metadata called platform.platform(), whose
# `uname -p` subprocess isolated sub-interpreters refuse, so every benchmark failed.
@pytest.mark.skipif(OWN_GIL, reason="3.12+: an isolated interpreter has its own GIL (below)")
def test_isolated_subinterpreter_imports_and_benchmarks(tmp_path):
    r = _subinterp("isolated", tmp_path)
    assert r == {"imported": True, "timed": 5, "table": 2}, r


@pytest.mark.skipif(not OWN_GIL, reason="a per-interpreter GIL exists from 3.12")
def test_an_interpreter_with_its_own_gil_refuses_the_import_cleanly(tmp_path):
    r = _subinterp("isolated", tmp_path)
    assert "imported" not in r and r["error"].startswith("ImportError("), r
    assert "does not support loading in subinterpreters" in r["error"], r


# ---- CUDA: threads without a current context (fake driver) -----------------------------

def test_cuda_benchmarks_from_threads_without_a_current_context(fake_cuda_lib):
    from cuda_support import run_with_fake_cuda
    out = run_with_fake_cuda(fake_cuda_lib, textwrap.dedent("""
        import json, warnings
        warnings.simplefilter("ignore")
        from spatialhub.utils.profiling import benchmark_callable, get_cuda_sync_fn
        f = fake()
        barrier = threading.Barrier(4)
        res, errors = {}, []
        def worker(i):
            try:
                barrier.wait()
                st = benchmark_callable(lambda: f.fake_enqueue_device_ns(0, 2_000_000),
                                        device="cuda:0", name=f"g{i}", num_warmup=1,
                                        num_iters=8)
                s = get_cuda_sync_fn()
                s()
                res[i] = [st.timed_iters, st.median_ms, f.fake_stack_depth()]
            except BaseException as e:
                errors.append(repr(e))
        p0, q0 = count("cuCtxPushCurrent_v2"), count("cuCtxPopCurrent_v2")
        ts = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
        [t.start() for t in ts]; [t.join() for t in ts]
        print(json.dumps({"res": res, "errors": errors,
                          "pushes": count("cuCtxPushCurrent_v2") - p0,
                          "pops": count("cuCtxPopCurrent_v2") - q0,
                          "created": count("cuCtxCreate_v2") + count("cuCtxCreate"),
                          "main_depth": f.fake_stack_depth()}))
    """))
    r = json.loads(out.strip().splitlines()[-1])
    assert r["errors"] == []
    assert sorted(r["res"]) == ["0", "1", "2", "3"]
    for timed, median_ms, depth in r["res"].values():
        assert timed == 8
        assert median_ms >= 1.5, "the sync waited for the queued device work"
        assert depth == 0, "every push was popped on the thread that pushed"
    assert r["pushes"] == r["pops"] > 0
    assert r["created"] == 0 and r["main_depth"] == 0


# ---- resource limits ---------------------------------------------------------------------

def _overcommit_always():
    try:
        with open("/proc/sys/vm/overcommit_memory") as f:
            return f.read().strip() == "1"
    except OSError:
        return False


@pytest.mark.parametrize("num_iters", [10 ** 12, 2 ** 55, 2 ** 59 - 1, 2 ** 70, 10 ** 100])
@pytest.mark.parametrize("adaptive", [False, True])
def test_too_many_iterations_is_a_memory_error_before_any_call(num_iters, adaptive):
    kw = dict(target_rel_ci=0.1, max_time_s=0.01) if adaptive else {}
    if num_iters == 10 ** 12 and _overcommit_always() and not UNDER_SANITIZER:
        # with vm.overcommit_memory=1 an 8 TB malloc may "succeed": prove the
        # path in a child whose address space is capped instead
        done = run_python(f"""
            import resource
            resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))
            from spatialhub.utils.profiling import benchmark_callable
            calls = []
            try:
                benchmark_callable(lambda: calls.append(1), num_iters={num_iters}, **{kw!r})
            except MemoryError:
                print("MemoryError", len(calls))
        """)
        assert done.stdout.split() == ["MemoryError", "0"], done.stderr[-2000:]
        return
    calls = []
    with pytest.raises(MemoryError):
        bc(lambda: calls.append(1), num_warmup=3, num_iters=num_iters, **kw)
    assert calls == []
    # nothing was left half-open: the next benchmark in this thread is normal
    s = bc(_native._noop, num_warmup=0, num_iters=3)
    assert s.timed_iters == 3


def test_memory_error_message_says_what_was_asked():
    with pytest.raises(MemoryError, match="10000000000000"):
        bc(_native._noop, num_iters=10 ** 13)
    with pytest.raises(MemoryError, match="num_iters"):
        bc(_native._noop, num_iters=2 ** 70)


@pytest.mark.skipif(not sys.platform.startswith("linux"),
                    reason="RLIMIT_AS is enforced on Linux only")
def test_a_capped_address_space_gives_memory_error_not_a_crash():
    if UNDER_SANITIZER:
        pytest.skip("ASan reserves terabytes of shadow memory: RLIMIT_AS cannot be capped")
    done = run_python("""
        import resource, warnings
        warnings.simplefilter("ignore")
        from spatialhub.utils.profiling import benchmark_callable, _native
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
        calls = []
        for n in (300_000_000, 10 ** 9):          # 4.8 / 16 GB of sample buffers
            try:
                benchmark_callable(lambda: calls.append(1), num_iters=n)
                print("ran", n)
            except MemoryError:
                print("MemoryError", n, len(calls))
        print("after", benchmark_callable(_native._noop, num_warmup=0, num_iters=3).timed_iters)
    """)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:3] == ["MemoryError 300000000 0", "MemoryError 1000000000 0",
                                           "after 3"]
