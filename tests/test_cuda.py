"""The CUDA layer, proven against a fake driver (tests/fake_cuda/fake_cuda.c).

Every scenario runs in a fresh interpreter with SPATIALHUB_LIBCUDA pointing at
the fake, because the module loads the driver once per process.  The fake
simulates asynchronous work (fake_enqueue_ns returns at once and
cuCtxSynchronize waits for it), per-thread current contexts, primary-context
retain counts, device memory and sticky errors, and counts every call.
"""
import json
import textwrap

import pytest

from cuda_support import run_with_fake_cuda  # fixtures come from conftest.py

IMPORT = (
    "import json\n"
    "from spatialhub.utils.profiling import (benchmark_callable, "
    "format_benchmark_table, get_cuda_sync_fn, get_gpu_vram_mb)\n"
)


def run(lib, code, env=None):
    """Run a scenario; its last stdout line is a JSON result."""
    out = run_with_fake_cuda(lib, IMPORT + textwrap.dedent(code), env=env)
    return json.loads(out.strip().splitlines()[-1])


# ---- loading --------------------------------------------------------------


def test_import_does_not_load_the_driver(fake_cuda_lib):
    r = run(fake_cuda_lib, """
        before = driver_mapped()
        benchmark_callable(lambda: None, device="CPU", num_warmup=1, num_iters=3)
        after_cpu = driver_mapped()
        s = get_cuda_sync_fn()
        print(json.dumps([before, after_cpu, driver_mapped(), count("cuInit")]))
    """)
    before, after_cpu, after_cuda, inits = r
    assert before is False, "importing the module loaded the CUDA driver"
    assert after_cpu is False, "a CPU benchmark loaded the CUDA driver"
    assert after_cuda is True
    assert inits == 1


# ---- timing ---------------------------------------------------------------


def test_cuda_device_times_the_gpu_work_not_the_dispatch(fake_cuda_lib):
    # 3 ms of "kernel" per call, queued asynchronously: only a device sync
    # makes the timer see it.
    r = run(fake_cuda_lib, """
        make_current(0)
        f = fake()
        def launch():
            f.fake_enqueue_ns(3_000_000)
        cuda = benchmark_callable(launch, name="k", device="CUDA", num_warmup=3, num_iters=20)
        cpu = benchmark_callable(launch, name="k", device="CPU", num_warmup=3, num_iters=20)
        print(json.dumps([cuda.median_ms, cuda.min_ms, cpu.median_ms]))
    """)
    cuda_median, cuda_min, cpu_median = r
    # every timed iteration waited for its work, and the fastest for nothing more (a
    # second wait would read 6 ms; on a loaded CI machine the median can read more)
    assert 2.9 <= cuda_min <= 6.0 and cuda_median >= 2.9, r
    assert cpu_median < 0.5, r


def test_sync_count_follows_the_protocol(fake_cuda_lib):
    # One sync before the first warm-up call (so first_call_ms holds only that
    # call), one after each warm-up call, one before and one after each timed call.
    # The first CUDA benchmark of a process also measures the harness's own
    # floor once (a native no-op through the same loop and sync), so the
    # counts are taken after it.
    r = run(fake_cuda_lib, """
        make_current(0)
        benchmark_callable(lambda: None, device="CUDA", num_warmup=0, num_iters=1)
        res = []
        for warm, iters in [(4, 10), (0, 1), (7, 3)]:
            c0 = count("cuCtxSynchronize")
            benchmark_callable(lambda: None, device="CUDA", num_warmup=warm, num_iters=iters)
            res.append(count("cuCtxSynchronize") - c0)
        print(json.dumps(res))
    """)
    assert r == [1 + 4 + 2 * 10, 0 + 2 * 1, 1 + 7 + 2 * 3]


@pytest.mark.parametrize("label", ["CUDA", "cuda", "Cuda:0", "CUDAExecutionProvider"])
def test_any_label_containing_cuda_is_synchronised(fake_cuda_lib, label):
    r = run(fake_cuda_lib, f"""
        make_current(0)
        benchmark_callable(lambda: None, device="CUDA", num_warmup=0, num_iters=1)
        c0 = count("cuCtxSynchronize")
        benchmark_callable(lambda: None, device={label!r}, num_warmup=1, num_iters=2)
        print(json.dumps(count("cuCtxSynchronize") - c0))
    """)
    assert r == 1 + 1 + 2 * 2


def test_custom_sync_fn_replaces_the_native_sync(fake_cuda_lib):
    r = run(fake_cuda_lib, """
        make_current(0)
        calls = []
        c0 = count("cuCtxSynchronize")
        benchmark_callable(lambda: None, device="CUDA", num_warmup=2, num_iters=5,
                           sync_fn=lambda: calls.append(1))
        print(json.dumps([len(calls), count("cuCtxSynchronize") - c0]))
    """)
    assert r == [2 + 2 * 5, 0]   # the user's hook: never an extra call


def test_our_own_sync_fn_passed_back_is_called_natively(fake_cuda_lib):
    # get_cuda_sync_fn() passed as sync_fn takes the native path: the closing
    # timestamp is still taken before the GIL is re-acquired, and the 3 ms of
    # fake GPU work are measured.
    r = run(fake_cuda_lib, """
        make_current(0)
        sync = get_cuda_sync_fn()
        benchmark_callable(lambda: None, device="CUDA", num_iters=3)  # overhead measured
        c0 = count("cuCtxSynchronize")
        s = benchmark_callable(lambda: fake().fake_enqueue_ns(3_000_000), device="CPU",
                               num_warmup=2, num_iters=5, sync_fn=sync)
        print(json.dumps([count("cuCtxSynchronize") - c0, s.min_ms]))
    """)
    assert r[0] == 1 + 2 + 2 * 5
    assert 2.9 <= r[1] <= 6.0   # the fastest call: the 3 ms waited for, once


def test_sync_releases_the_gil(fake_cuda_lib):
    # While the harness waits for the device, other Python threads run: a
    # spinning thread leaves a time stamp every millisecond, and stamps must
    # appear well inside the waits (with the GIL held there would be none).
    r = run(fake_cuda_lib, """
        make_current(0)
        f = fake()
        with GilProbe() as probe:
            s = get_cuda_sync_fn()
            f.fake_enqueue_ns(150_000_000)
            a = time.perf_counter(); s(); b = time.perf_counter()
            a2 = time.perf_counter()
            benchmark_callable(lambda: f.fake_enqueue_ns(50_000_000), device="CUDA",
                               num_warmup=0, num_iters=3)
            b2 = time.perf_counter()
        print(json.dumps([probe.inside(a, b, 0.02), probe.inside(a2, b2, 0.02)]))
    """)
    during_sync_fn, during_bench = r
    # a wait that held the GIL would leave none; a loaded CI machine leaves fewer than
    # the ~130 of a quiet one (24 read once with both cores busy three times over)
    assert during_sync_fn >= 10, r
    assert during_bench >= 10, r


def test_module_teardown_releases_the_primary_contexts(fake_cuda_lib, tmp_path):
    # The fake writes its retain counts when the process exits, after the
    # interpreter has freed the module.
    report = tmp_path / "exit.json"
    run(fake_cuda_lib, """
        get_cuda_sync_fn()()
        benchmark_callable(lambda: None, device="cuda:1", num_warmup=0, num_iters=2)
        print(json.dumps([fake().fake_primary_refcount(0), fake().fake_primary_refcount(1)]))
    """, env={"FAKE_CUDA_DEVICES": "2", "FAKE_CUDA_EXIT_REPORT": str(report)})
    assert json.loads(report.read_text()) == {"primary_refcount": [0, 0], "releases": 2}


# ---- VRAM -----------------------------------------------------------------


def test_vram_delta_of_an_allocation_kept_from_the_first_call(fake_cuda_lib):
    r = run(fake_cuda_lib, """
        make_current(0)
        f = fake()
        calls = [0]
        def model():
            calls[0] += 1
            if calls[0] == 1:
                assert f.fake_alloc(300 * MiB) == 0   # weights, kept
        before = get_gpu_vram_mb()
        st = benchmark_callable(model, device="CUDA", num_warmup=2, num_iters=5)
        after = get_gpu_vram_mb()
        print(json.dumps([st.vram_delta_mb,
                          [before.total_mb, before.free_mb, before.used_mb],
                          [after.total_mb, after.free_mb, after.used_mb],
                          f.fake_used_bytes(0) / MiB]))
    """)
    delta, before, after, fake_used = r
    assert delta == pytest.approx(300.0, abs=1e-6)
    assert before == pytest.approx([81920.0, 81920.0 - 1024.0, 1024.0])
    assert after == pytest.approx([81920.0, 81920.0 - 1324.0, 1324.0])
    assert after[2] == pytest.approx(fake_used)


def test_vram_delta_of_steady_growth_counts_every_call(fake_cuda_lib):
    # 10 MiB leaked per call, 2 warm-up + 5 timed calls.
    r = run(fake_cuda_lib, """
        make_current(0)
        f = fake()
        st = benchmark_callable(lambda: f.fake_alloc(10 * MiB), device="CUDA",
                                num_warmup=2, num_iters=5)
        print(json.dumps(st.vram_delta_mb))
    """)
    assert r == pytest.approx(70.0, abs=1e-6)


def test_vram_delta_is_the_peak_not_the_end_value(fake_cuda_lib):
    # Calls hold 100 MiB, then the last timed call frees everything: the end
    # value equals the baseline, the peak does not.
    r = run(fake_cuda_lib, """
        make_current(0)
        f = fake()
        state = {"n": 0, "held": False}
        def model():
            state["n"] += 1
            if not state["held"]:
                f.fake_alloc(100 * MiB); state["held"] = True
            if state["n"] == 1 + 6:
                f.fake_free(100 * MiB); state["held"] = False
        st = benchmark_callable(model, device="CUDA", num_warmup=1, num_iters=6)
        print(json.dumps([st.vram_delta_mb, f.fake_used_bytes(0) / MiB]))
    """)
    delta, end_used = r
    assert delta == pytest.approx(100.0, abs=1e-6)
    assert end_used == pytest.approx(1024.0)


def test_vram_is_sampled_after_sync_so_a_freed_temporary_reads_zero(fake_cuda_lib):
    # Documented limit: the driver has no peak counter; a buffer allocated and
    # freed inside one call is invisible to samples taken between calls.
    r = run(fake_cuda_lib, """
        make_current(0)
        f = fake()
        def model():
            f.fake_alloc(500 * MiB)
            f.fake_free(500 * MiB)
        st = benchmark_callable(model, device="CUDA", num_warmup=1, num_iters=4)
        print(json.dumps(st.vram_delta_mb))
    """)
    assert r == 0.0


def test_get_gpu_vram_mb_arguments(fake_cuda_lib):
    r = run(fake_cuda_lib, """
        res = {}
        g = get_gpu_vram_mb(device_id=0)
        res["kw"] = [g.total_mb, g.free_mb, g.used_mb]
        for label, arg in [("neg", -1), ("one", 1), ("five", 5), ("bool", True),
                           ("float", 0.0), ("str", "0"), ("huge", 10**40)]:
            try:
                get_gpu_vram_mb(arg)
                res[label] = "ok"
            except Exception as e:
                res[label] = type(e).__name__
        print(json.dumps(res))
    """)
    assert r["kw"] == pytest.approx([81920.0, 80896.0, 1024.0])
    assert r["neg"] == r["one"] == r["five"] == r["huge"] == "ValueError"
    assert r["bool"] == r["float"] == r["str"] == "TypeError"


# ---- contexts -------------------------------------------------------------


def test_thread_without_a_current_context_syncs_the_primary_context(fake_cuda_lib):
    # Work is queued on device 0's primary context by "someone else"; the
    # benchmarking thread has no current context, so the harness must push
    # the primary context around each of its calls (and pop it again).
    r = run(fake_cuda_lib, """
        f = fake()
        out = {}
        def worker():
            p0, q0 = count("cuCtxPushCurrent_v2"), count("cuCtxPopCurrent_v2")
            st = benchmark_callable(lambda: f.fake_enqueue_device_ns(0, 3_000_000),
                                    device="CUDA", num_warmup=2, num_iters=10)
            out["median"], out["min"] = st.median_ms, st.min_ms
            out["pushes"] = count("cuCtxPushCurrent_v2") - p0
            out["pops"] = count("cuCtxPopCurrent_v2") - q0
            out["depth"] = f.fake_stack_depth()
            s = get_cuda_sync_fn()
            f.fake_enqueue_device_ns(0, 20_000_000)
            t0 = time.perf_counter(); s(); out["sync_fn_ms"] = (time.perf_counter() - t0) * 1e3
        t = threading.Thread(target=worker); t.start(); t.join()
        out["retains"] = count("cuDevicePrimaryCtxRetain")
        out["creates"] = count("cuCtxCreate_v2") + count("cuCtxCreate")
        print(json.dumps(out))
    """)
    assert 2.9 <= r["min"] <= 6.0 and r["median"] >= 2.9, r
    assert r["pushes"] >= 2 + 2 * 10, r
    assert r["pushes"] == r["pops"], r
    assert r["depth"] == 0, r
    assert r["sync_fn_ms"] >= 19.0, r
    assert r["retains"] == 1, r   # retained once, cached
    assert r["creates"] == 0, r


def test_current_context_is_used_without_pushing(fake_cuda_lib):
    r = run(fake_cuda_lib, """
        make_current(0)
        p0 = count("cuCtxPushCurrent_v2")
        benchmark_callable(lambda: None, device="CUDA", num_warmup=2, num_iters=5)
        get_gpu_vram_mb(0)
        get_cuda_sync_fn()()
        print(json.dumps(count("cuCtxPushCurrent_v2") - p0))
    """)
    assert r == 0


def test_sync_fn_made_on_one_thread_works_on_another(fake_cuda_lib):
    r = run(fake_cuda_lib, """
        s = get_cuda_sync_fn()
        f = fake()
        out = {}
        def worker():
            f.fake_enqueue_device_ns(0, 10_000_000)
            t0 = time.perf_counter(); s(); out["ms"] = (time.perf_counter() - t0) * 1e3
        t = threading.Thread(target=worker); t.start(); t.join()
        print(json.dumps(out["ms"]))
    """)
    assert r >= 9.5


def test_cuda_ordinal_selects_the_device(fake_cuda_lib):
    # The thread's current context is device 0 (as after torch.cuda.init());
    # "cuda:1" must synchronise device 1's primary context instead.
    r = run(fake_cuda_lib, """
        make_current(0)
        f = fake()
        work1 = lambda: f.fake_enqueue_device_ns(1, 3_000_000)
        st1 = benchmark_callable(work1, device="cuda:1", num_warmup=2, num_iters=10)
        out = {"median1": st1.median_ms, "min1": st1.min_ms, "gpu1": st1.env.get("gpu")}
        st0 = benchmark_callable(lambda: None, device="CUDA", num_warmup=0, num_iters=3)
        out["gpu0"] = st0.env.get("gpu")
        out["vram1"] = get_gpu_vram_mb(1).total_mb
        import numpy as np   # ids from np.arange are numpy ints
        out["vram_np"] = [get_gpu_vram_mb(i).total_mb for i in np.arange(2)]
        for label, dev in [("five", "cuda:5"), ("two", "cuda:2"), ("bad", "cuda:x")]:
            try:
                benchmark_callable(lambda: None, device=dev, num_warmup=0, num_iters=1)
                out[label] = "ok"
            except Exception as e:
                out[label] = type(e).__name__
        for label, dev in [("vram5", 5), ("vram2", 2)]:
            try:
                get_gpu_vram_mb(dev)
                out[label] = "ok"
            except Exception as e:
                out[label] = type(e).__name__
        print(json.dumps(out))
    """, env={"FAKE_CUDA_DEVICES": "2"})
    assert 2.9 <= r["min1"] <= 6.0 and r["median1"] >= 2.9, r
    assert r["gpu1"] == "Fake GPU 1"
    assert r["gpu0"] == "Fake GPU 0"
    assert r["vram1"] == pytest.approx(81920.0)
    assert r["vram_np"] == pytest.approx([81920.0, 81920.0])
    assert r["five"] == r["two"] == r["bad"] == "ValueError", r
    assert r["vram5"] == r["vram2"] == "ValueError", r


def test_no_context_is_ever_created_and_the_legacy_meminfo_is_never_used(fake_cuda_lib):
    r = run(fake_cuda_lib, """
        get_gpu_vram_mb(0)
        get_cuda_sync_fn()()
        benchmark_callable(lambda: None, device="CUDA", num_warmup=1, num_iters=3)
        t = threading.Thread(target=lambda: get_gpu_vram_mb(0)); t.start(); t.join()
        print(json.dumps([count("cuCtxCreate_v2"), count("cuCtxCreate"),
                          count("cuMemGetInfo"), count("cuMemGetInfo_v2") > 0]))
    """)
    assert r == [0, 0, 0, True]


# ---- failures -------------------------------------------------------------


def test_sticky_device_error_raises_with_its_name(fake_cuda_lib):
    r = run(fake_cuda_lib, """
        make_current(0)
        f = fake()
        n = [0]
        def kernel():
            n[0] += 1
            if n[0] == 4:
                f.fake_inject_sticky(700)   # the kernel faults
        out = {}
        try:
            benchmark_callable(kernel, device="CUDA", num_warmup=2, num_iters=10)
            out["bench"] = "no error"
        except RuntimeError as e:
            out["bench"] = str(e)
        try:
            get_cuda_sync_fn()()
            out["sync_fn"] = "no error"
        except RuntimeError as e:
            out["sync_fn"] = str(e)
        out["calls"] = n[0]
        print(json.dumps(out))
    """)
    for key in ("bench", "sync_fn"):
        assert "CUDA_ERROR_ILLEGAL_ADDRESS" in r[key], r
        assert "700" in r[key], r
    assert "illegal memory access" in r["sync_fn"]
    assert r["calls"] == 4, r   # stopped at the first failed sync


SCENARIOS_WITHOUT_CUDA = {
    "missing": ({"SPATIALHUB_LIBCUDA": "/nonexistent/libcuda.so.1"}, "cannot load"),
    "stub": ({"FAKE_CUDA_MODE": "stub"}, "stub"),
    "nodevice": ({"FAKE_CUDA_MODE": "nodevice"}, "CUDA_ERROR_NO_DEVICE"),
    "zero-devices": ({"FAKE_CUDA_DEVICES": "0"}, "no CUDA device"),
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS_WITHOUT_CUDA))
def test_without_driver_or_device(fake_cuda_lib, scenario):
    env, reason = SCENARIOS_WITHOUT_CUDA[scenario]
    r = run(fake_cuda_lib, """
        out = {"sync_fn": repr(get_cuda_sync_fn()), "vram": repr(get_gpu_vram_mb()),
               "vram3": repr(get_gpu_vram_mb(3))}
        try:
            get_gpu_vram_mb(-1)
            out["neg"] = "ok"
        except ValueError:
            out["neg"] = "ValueError"
        try:
            benchmark_callable(lambda: None, device="CUDA", num_warmup=1, num_iters=2)
            out["error"] = None
        except RuntimeError as e:
            out["error"] = str(e)
        calls = []
        st = benchmark_callable(lambda: None, device="CUDA", num_warmup=1, num_iters=2,
                                sync_fn=lambda: calls.append(1))
        out["custom"] = [len(calls), st.vram_delta_mb]
        print(json.dumps(out))
    """, env=env)
    assert r["sync_fn"] == "None"
    assert r["vram"] == "None" and r["vram3"] == "None"
    assert r["neg"] == "ValueError"
    assert r["error"] is not None, "timed the asynchronous dispatch silently"
    assert "sync_fn" in r["error"] and '"CPU"' in r["error"], r["error"]
    assert reason in r["error"], r["error"]
    assert r["custom"] == [1 + 2 * 2, 0.0]


# ---- the sync callable, the environment, the table -------------------------


def test_sync_fn_is_a_native_callable_with_a_repr(fake_cuda_lib):
    r = run(fake_cuda_lib, """
        make_current(0)
        f = fake()
        s = get_cuda_sync_fn()
        f.fake_enqueue_ns(30_000_000)
        t0 = time.perf_counter(); ret = s(); ms = (time.perf_counter() - t0) * 1e3
        out = {"repr": repr(s), "ret": repr(ret), "ms": ms,
               "type": type(s).__module__ + "." + type(s).__qualname__}
        for label, call in [("args", lambda: s(1)), ("kwargs", lambda: s(x=1)),
                            ("new", lambda: type(s)())]:
            try:
                call()
                out[label] = "ok"
            except TypeError:
                out[label] = "TypeError"
        print(json.dumps(out))
    """)
    assert r["repr"] == "<CudaSync device=0 driver=12.4>"
    assert r["ret"] == "None"
    assert r["ms"] >= 29.0
    assert r["type"] == "spatialhub.utils.profiling.CudaSync"
    assert r["args"] == r["kwargs"] == r["new"] == "TypeError"


def test_environment_records_driver_and_gpu(fake_cuda_lib):
    r = run(fake_cuda_lib, """
        make_current(0)
        st = benchmark_callable(lambda: None, device="CUDA", num_warmup=0, num_iters=2)
        print(json.dumps([st.env.get("cuda_driver"), st.env.get("gpu")]))
    """)
    assert r == ["12.4", "Fake GPU 0"]


def test_table_shows_peak_vram_for_cuda_rows(fake_cuda_lib):
    r = run(fake_cuda_lib, """
        make_current(0)
        f = fake()
        n = [0]
        def model():
            n[0] += 1
            if n[0] == 1:
                f.fake_alloc(300 * MiB)
        cuda = benchmark_callable(model, name="model", device="CUDA", num_warmup=1, num_iters=3)
        cpu = benchmark_callable(lambda: None, name="cpu", device="CPU", num_warmup=1, num_iters=3)
        print(json.dumps(format_benchmark_table([cuda, cpu])))
    """)
    lines = r.splitlines()
    header = next(line for line in lines if "Peak VRAM Delta" in line)
    cuda_row = next(line for line in lines if "**model**" in line)
    cpu_row = next(line for line in lines if "**cpu**" in line)
    col = [c.strip() for c in header.split("|")].index("Peak VRAM Delta")
    assert [c.strip() for c in cuda_row.split("|")][col] == "+300.0 MB"
    assert [c.strip() for c in cpu_row.split("|")][col] == "N/A"
