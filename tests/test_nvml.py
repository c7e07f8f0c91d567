"""Clocks, throttling, temperature, power and per-process memory from NVML,
proven against a fake NVML (tests/fake_nvml/fake_nvml.c) beside the fake
CUDA driver.

The fake NVML numbers its two devices opposite to the fake driver's CUDA
ordinals, as real systems may (NVML ignores CUDA_VISIBLE_DEVICES and orders
by PCI bus): the harness must find the device by its PCI bus id.
"""
import json
import os
import textwrap

import pytest

from cuda_support import run_with_fake_cuda  # fixtures come from conftest.py

SETUP = """
import json, warnings
from spatialhub.utils.profiling import benchmark_callable, BenchmarkWarning
f = fake()
nv = ctypes.CDLL(os.environ["SPATIALHUB_LIBNVML"])
nv.fake_nvml_set.argtypes = [ctypes.c_int] + [ctypes.c_longlong] * 4
nv.fake_nvml_add_process.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_ulonglong]
nv.fake_nvml_calls.restype = ctypes.c_longlong
def bench(fn, **kw):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        s = benchmark_callable(fn, **kw)
    return s, [said(x) for x in w if issubclass(x.category, BenchmarkWarning)]
"""

NA = "not available"


def run(cuda, nvml, code, env=None):
    e = {"FAKE_CUDA_DEVICES": "2"}
    if nvml is not None:
        e["SPATIALHUB_LIBNVML"] = nvml
    e.update(env or {})
    prelude = SETUP if nvml is not None else SETUP.split("nv = ctypes")[0] + \
        "\ndef bench(fn, **kw):\n    with warnings.catch_warnings(record=True) as w:\n" \
        "        warnings.simplefilter('always')\n        s = benchmark_callable(fn, **kw)\n" \
        "    return s, [said(x) for x in w if issubclass(x.category, BenchmarkWarning)]\n"
    out = run_with_fake_cuda(cuda, prelude + textwrap.dedent(code), env=e)
    return json.loads(out.strip().splitlines()[-1])


def test_readings_at_start_and_end_of_the_right_device(fake_cuda_lib, fake_nvml_libs):
    # CUDA ordinal 1 is NVML index 0.  Its clock drops 3% and it warms up
    # from 40 to 71 C during the run; NVML index 1 (CUDA 0) is left alone.
    r = run(fake_cuda_lib, fake_nvml_libs["full"], """
        calls = [0]
        def model():
            calls[0] += 1
            if calls[0] == 4:
                nv.fake_nvml_set(0, 1920, -1, 71, 250000)
                nv.fake_nvml_set(1, 300, 0x40, 99, -1)     # the other device
            f.fake_enqueue_device_ns(1, 1_000_000)
        s, w = bench(model, device="cuda:1", num_warmup=2, num_iters=10)
        print(json.dumps([s.gpu_telemetry, s.to_dict()["gpu_telemetry"], w]))
    """)
    t, exported, warns = r
    assert exported == t
    assert t["nvml"] == "available"
    assert t["sm_clock_mhz_start"] == 1980 and t["sm_clock_mhz_end"] == 1920
    assert t["sm_clock_mhz_min"] == 1920 and t["sm_clock_mhz_max"] == 1980
    assert t["sm_clock_change_pct"] == pytest.approx(100 * 60 / 1980)
    assert t["temperature_c_start"] == 40 and t["temperature_c_end"] == 71
    assert t["temperature_c_max"] == 71
    assert t["power_w_start"] == 120.0 and t["power_w_end"] == 250.0 and t["power_w_max"] == 250.0
    assert t["throttle_reasons"] == []
    assert t["samples"] >= 2
    # a 3% move and no slowdown reason: nothing to warn about
    assert not [m for m in warns if "clock" in m or "throttled" in m], warns


def test_a_throttle_reason_set_mid_run_is_reported(fake_cuda_lib, fake_nvml_libs):
    # Thermal slowdown from the 5th to the 15th call (20 ms each, so the
    # rate-bounded sampler sees it), with the clock pulled down meanwhile.
    r = run(fake_cuda_lib, fake_nvml_libs["full"], """
        calls = [0]
        def model():
            calls[0] += 1
            if calls[0] == 5:
                nv.fake_nvml_set(1, 1200, 0x20 | 0x1, 88, -1)   # CUDA 0 is NVML 1
            if calls[0] == 15:
                nv.fake_nvml_set(1, 1980, 0, 80, -1)
            f.fake_enqueue_device_ns(0, 20_000_000)
        s, w = bench(model, device="cuda:0", num_warmup=0, num_iters=20)
        print(json.dumps([s.gpu_telemetry, w]))
    """)
    t, warns = r
    assert "sw_thermal_slowdown" in t["throttle_reasons"] and "gpu_idle" in t["throttle_reasons"]
    assert t["sm_clock_mhz_min"] == 1200 and t["sm_clock_mhz_end"] == 1980
    assert t["temperature_c_max"] == 88
    # one warning for the call, with both causes; their numbers are its attributes
    assert len(warns) == 1, warns
    assert "GPU throttled:" in warns[0] and "reasons=sw_thermal_slowdown" in warns[0], warns
    assert "gpu_idle" not in warns[0]     # idle is no slowdown
    # 1200 to 1980 MHz: a coarse 60% (the exact clocks are attributes)
    assert "GPU clock moved: the SM clock moved 60% -- lock the clocks" in warns[0], warns
    assert "clock_min_mhz=1200" in warns[0], warns


def test_sampling_is_rate_bounded(fake_cuda_lib, fake_nvml_libs):
    # 400 fast iterations: the sampler reads at most every 50 ms, not 400 times.
    r = run(fake_cuda_lib, fake_nvml_libs["full"], """
        t = time.perf_counter()
        s, w = bench(lambda: None, device="cuda:0", num_warmup=0, num_iters=400)
        print(json.dumps([s.gpu_telemetry["samples"], time.perf_counter() - t]))
    """)
    samples, took = r
    assert 2 <= samples <= 2 + took / 0.05 + 1, r


def test_per_process_memory_and_other_processes(fake_cuda_lib, fake_nvml_libs):
    r = run(fake_cuda_lib, fake_nvml_libs["full"], """
        nv.fake_nvml_add_process(1, os.getpid(), 700 << 20)
        nv.fake_nvml_add_process(1, 4242, 300 << 20)
        nv.fake_nvml_add_process(1, 4343, 100 << 20)
        nv.fake_nvml_add_process(0, 5555, 999 << 20)       # the other GPU
        s, w = bench(lambda: None, device="cuda:0", num_warmup=0, num_iters=3)
        print(json.dumps([s.gpu_telemetry, w]))
    """)
    t, warns = r
    assert t["process_used_mb"] == 700.0
    assert t["other_processes"] == 2 and t["other_processes_used_mb"] == 400.0
    others = [m for m in warns if "shared GPU:" in m]
    assert len(others) == 1 and "other_processes=2 " in others[0], warns
    assert "other_processes_mb=400.0" in others[0], warns


def test_old_driver_entry_points(fake_cuda_lib, fake_nvml_libs):
    # pre-r535 throttle-reason name, the first process-list ABI (16-byte records)
    r = run(fake_cuda_lib, fake_nvml_libs["old"], """
        nv.fake_nvml_add_process(1, os.getpid(), 64 << 20)
        nv.fake_nvml_add_process(1, 4242, 32 << 20)
        nv.fake_nvml_set(1, -1, 0x4, -1, -1)
        s, w = bench(lambda: None, device="cuda:0", num_warmup=0, num_iters=3)
        print(json.dumps(s.gpu_telemetry))
    """)
    assert r["throttle_reasons"] == ["sw_power_cap"]
    assert r["process_used_mb"] == 64.0 and r["other_processes_used_mb"] == 32.0


def test_missing_entry_points_read_not_available(fake_cuda_lib, fake_nvml_libs):
    # Only init and handles: every reading says so, the run is unaffected.
    # Without the PCI lookup the index is used (here: the wrong GPU, which is
    # why the bus id comes first).
    r = run(fake_cuda_lib, fake_nvml_libs["minimal"], """
        s, w = bench(lambda: f.fake_enqueue_device_ns(0, 1_000_000), device="cuda:0",
                     num_warmup=1, num_iters=3)
        print(json.dumps([s.gpu_telemetry, s.median_ms]))
    """)
    t, med = r
    assert t["nvml"] == "available" and med >= 0.9
    for k, v in t.items():
        if k not in ("nvml", "samples"):
            assert v == NA, (k, v)


@pytest.mark.parametrize("case", ["missing", "init_fails"])
def test_no_nvml_fails_nothing(fake_cuda_lib, fake_nvml_libs, tmp_path, case):
    nvml = str(tmp_path / "nope.so") if case == "missing" else fake_nvml_libs["full"]
    env = {"SPATIALHUB_LIBNVML": nvml}
    if case == "init_fails":
        env["FAKE_NVML_INIT_FAIL"] = "9"
    r = run(fake_cuda_lib, None, """
        s, w = bench(lambda: f.fake_enqueue_device_ns(0, 1_000_000), device="cuda:0",
                     num_warmup=1, num_iters=3)
        print(json.dumps([s.gpu_telemetry, s.median_ms, w]))
    """, env=env)
    t, med, warns = r
    want = "cannot load" if case == "missing" else "nvmlInit_v2 failed (NVML error 9)"
    assert t["nvml"].startswith("not available: ") and want in t["nvml"], t
    assert all(v == NA for k, v in t.items() if k != "nvml"), t
    assert med >= 0.9
    assert not [m for m in warns if "NVML" in m or "nvml" in m]


def test_cpu_runs_never_load_nvml(fake_cuda_lib, fake_nvml_libs):
    # (the snippet does not load the fake itself here)
    r = run(fake_cuda_lib, None, """
        s, w = bench(lambda: None, num_warmup=1, num_iters=3)
        with open("/proc/self/maps") as m:
            mapped = os.environ["SPATIALHUB_LIBNVML"] in m.read()
        print(json.dumps([s.gpu_telemetry, mapped]))
    """, env={"SPATIALHUB_LIBNVML": fake_nvml_libs["full"]})
    assert r == [None, False]


def test_teardown_shuts_nvml_down(fake_cuda_lib, fake_nvml_libs, tmp_path):
    report = tmp_path / "nvml.json"
    run(fake_cuda_lib, fake_nvml_libs["full"], """
        bench(lambda: None, device="cuda:0", num_warmup=0, num_iters=2)
        bench(lambda: None, device="cuda:1", num_warmup=0, num_iters=2)
        print(json.dumps(nv.fake_nvml_inits()))
    """, env={"FAKE_NVML_EXIT_REPORT": str(report)})
    assert json.loads(report.read_text()) == {"inits": 0}
