"""The machine around a benchmark: preflight in env, a warning when it is busy; device
labels that cannot be synchronised; MPS checked before func runs."""
import os
import subprocess
import sys
import time
import types
import warnings

import pytest

from spatialhub.utils.profiling import BenchmarkWarning, benchmark_callable

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc and /sys")


def quick(func=lambda: None, **kw):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        s = benchmark_callable(func, num_warmup=1, num_iters=5, track_ram=False, **kw)
    # the text, then the numbers it carries as attributes
    return s, [f"{m.message} | {vars(m.message)}" for m in w
               if issubclass(m.category, BenchmarkWarning)]


@linux
def test_env_has_the_machine_preflight():
    s, _ = quick()
    env = s.env
    for key in ("cpu_governor", "turbo", "aslr", "isolated_cpus", "load_avg_1min",
                "other_processes_cpu_share"):
        assert key in env, key
    assert env["aslr"] in ("0", "1", "2")
    assert env["turbo"] in (True, False, None)
    assert env["cpu_governor"] is None or isinstance(env["cpu_governor"], str)
    assert isinstance(env["load_avg_1min"], float) and env["load_avg_1min"] >= 0
    share = env["other_processes_cpu_share"]
    assert share is None or 0.0 <= share <= 1.0


@linux
def test_a_busy_machine_is_measured_and_warned_about():
    quick()   # the reading the next one is measured against
    n = len(os.sched_getaffinity(0))
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        time.sleep(1.0)   # the hogs own the CPUs before the benchmark starts
        s, w = quick()
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    assert s.env["other_processes_cpu_share"] > 0.25, s.env
    assert s.machine_busy is True and "busy machine" in s.flags
    # said once per process while the machine stays busy (the repeats are counted):
    # this process may have said it already
    said = [m for m in w if "busy machine" in m]
    assert len(said) <= 1
    if said:
        assert "others used" in said[0] and "compare_callables" in said[0]


@pytest.mark.parametrize("label", ["gpu", "XPU", "rocm", "npu", "xpu:1", "tpu"])
def test_an_accelerator_label_without_a_sync_warns(label):
    s, w = quick(device=label)
    assert s.device == label
    assert any("no device sync: work queued on this device is not timed" in m and "sync_fn" in m
               for m in w), w
    calls = []
    s, w = quick(device=label, sync_fn=lambda: calls.append(1))   # the user syncs: fine
    assert calls and not any("no device sync" in m for m in w)


@pytest.mark.parametrize("label", ["CPU", "cpu", "CPUExecutionProvider", "OpenVINOExecutionProvider",
                                   "my laptop", "gpu-box"])
def test_other_labels_stay_plain(label):
    _, w = quick(device=label)
    assert not any("no device sync" in m for m in w)


def test_mps_unavailable_raises_before_func_is_called(monkeypatch):
    calls = []
    fake = types.ModuleType("torch")
    fake.mps = types.SimpleNamespace(synchronize=lambda: None)
    fake.backends = types.SimpleNamespace(mps=types.SimpleNamespace(is_available=lambda: False))
    monkeypatch.setitem(sys.modules, "torch", fake)
    with pytest.raises(RuntimeError, match="MPS is not available.*nothing was called"):
        benchmark_callable(lambda: calls.append(1), device="mps")
    assert calls == []
    fake.backends.mps.is_available = lambda: True
    s, _ = quick(lambda: calls.append(1), device="mps")
    assert len(calls) == 6 and s.device == "mps"


def test_mps_label_with_a_sync_fn_of_ones_own_is_not_refused(monkeypatch):
    # torch imported, MPS not available: the caller's own sync_fn decides, as for "gpu"
    fake = types.ModuleType("torch")
    fake.backends = types.SimpleNamespace(mps=types.SimpleNamespace(is_available=lambda: False))
    monkeypatch.setitem(sys.modules, "torch", fake)
    syncs = []
    s = benchmark_callable(lambda: None, device="mps", sync_fn=lambda: syncs.append(1),
                           num_warmup=1, num_iters=3)
    assert s.device == "mps" and s.timed_iters == 3 and len(syncs) == 1 + 2 * 3
