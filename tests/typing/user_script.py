"""A user's script touching every public name of spatialhub.utils.profiling.

Never run: tests/test_signatures.py type-checks it with ``mypy --strict``.  Every
result is bound to an annotated name, so a public function typed ``Any`` (or not
typed) fails the check, and the ``type: ignore`` comments below fail it too when
the error they expect is gone (strict includes --warn-unused-ignores): that is
how a decorator that erases a signature is caught.
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import numpy.typing as npt

import spatialhub.utils.profiling as sp
from spatialhub.utils.profiling import (
    BenchmarkInterrupted, BenchmarkStats, BenchmarkWarning, BusyMachineWarning,
    CoarseTimerWarning, Comparison, CudaSync, DriftingWarning, GPUClockWarning,
    GPUMemoryInfo, GPUTimeWarning, HierarchicalProfiler, LaunchBoundWarning, LoadStats,
    MultimodalWarning, NoDeviceSyncWarning, NoisyWarning, NoRequestsWarning, OverheadWarning,
    OverloadedWarning,
    PageFaultWarning, ProfileNode, SharedGPUWarning, SweepResult, ThrottledWarning,
    Timer, VRAMNotTrackedWarning, WarmupWarning, benchmark_callable, benchmark_load,
    benchmark_onnx, benchmark_repeated, calibrate_run_spread, compare_benchmarks,
    compare_callables, compare_repeated, find_peak_qps, forget_run_spread,
    format_benchmark_table, format_load_table, get_cuda_sync_fn, get_gpu_vram_mb, get_ram_mb,
    machine_run_spread, mlperf_offline, mlperf_single_stream, plot_latency, plot_load,
    plot_sweep, profile_model, profiler, suppressed_warnings, sweep, timeit)
from spatialhub.utils.profiling import OutputCheck, check_outputs, write_report


def work(n: int, *, reverse: bool = False) -> list[int]:
    return sorted(range(n), reverse=reverse)


def measure() -> None:
    stats: BenchmarkStats = benchmark_callable(work, 100, name="sort", num_iters=20)
    median: float = stats.median_ms
    samples: npt.NDArray[np.float64] | None = stats.samples_ms
    as_dict: dict[str, Any] = stats.to_dict(samples=True)
    again: BenchmarkStats = BenchmarkStats.from_dict(as_dict)
    table: str = format_benchmark_table([stats, again], title="t", columns="auto")
    verdict: Comparison = compare_benchmarks(stats, again, margin=0.05)
    ratio: float = verdict.ratio
    interleaved: Comparison = compare_callables(work, work, 100, rounds=4)
    repeated: BenchmarkStats = benchmark_repeated(work, 100, repeat=2)
    fresh: Comparison = compare_repeated(work, work, 100, repeat=2)
    swept: SweepResult = sweep(lambda n: (work, (n,)), [10, 100], param="n")
    rows: list[BenchmarkStats] = swept.stats
    onnx: SweepResult = benchmark_onnx("model.onnx", providers="CPUExecutionProvider")
    net: Any = None   # a torch.nn.Module (torch is optional, so not imported here)
    model: BenchmarkStats = profile_model(net, (1, 3, 8, 8), warmup=2, iters=5)
    batched: SweepResult = profile_model(net, (1, 3, 8, 8), batch_sizes=[1, 4])
    fig_a: Any = plot_latency(stats, "ecdf", title="latency")
    fig_b: Any = plot_sweep(swept, "sweep.png")
    said: dict[str, int] = suppressed_warnings()
    print(median, samples, table, ratio, interleaved, repeated, fresh, rows, onnx, model,
          batched, fig_a, fig_b, said)


def under_load() -> None:
    run: LoadStats = benchmark_load(work, 100, qps=50.0, duration_s=0.5, workers=2, seed=1)
    p99: float | None = run.p99_ms
    latencies: npt.NDArray[np.float64] | None = run.latencies_ms
    ci: tuple[float | None, float | None, float | None] = run.percentile_ci(90.0)
    back: LoadStats = LoadStats.from_dict(run.to_dict(samples=True))
    text: str = format_load_table([run, back], "under load")
    peak: LoadStats = find_peak_qps(work, 100, latency_bound_ms=5.0, duration_s=1.0)
    found: Any = (peak.search or {}).get("peak_qps")
    single: LoadStats = mlperf_single_stream(work, 100, duration_s=1.0)
    offline: LoadStats = mlperf_offline(work, 100, batch_size=8)
    samples_s: float | None = offline.throughput
    fig: Any = plot_load([run, single], latency_bound_ms=5.0)
    print(p99, latencies, ci, text, found, samples_s, fig)


def machine() -> None:
    sync: CudaSync | None = get_cuda_sync_fn()
    if sync is not None:
        sync()
    vram: GPUMemoryInfo | None = get_gpu_vram_mb(0)
    used: float = vram.used_mb if vram is not None else 0.0
    rss: float = get_ram_mb()
    spread: dict[str, Any] = calibrate_run_spread(4, save=False)
    known: dict[str, Any] | None = machine_run_spread()
    forgot: bool = forget_run_spread()
    print(used, rss, spread, known, forgot)


def scopes() -> None:
    prof = HierarchicalProfiler("pipeline", track_ram="peak")
    with prof("load") as t:
        pass
    wall: float = t.elapsed_wall
    node: ProfileNode = prof.root.children["load"]
    p95: float | None = node.p95_ms
    with Timer("decode", profiler=prof, track_memory=False):
        pass
    with profiler.scope("global"):
        pass
    text: str = prof.summary_text()
    trace: dict[str, Any] = prof.export_chrome_trace()

    @timeit(profiler=prof)
    def double(x: int, *, times: int = 2) -> int:
        return times * x

    @prof.timeit("tripled")
    def triple(x: float) -> float:
        return 3 * x

    d: int = double(21, times=3)
    tr: float = triple(1.5)
    double("x")  # type: ignore[arg-type]   # the signature survived the decorator
    triple()  # type: ignore[call-arg]
    print(wall, p95, text, trace, d, tr, repr(prof))


def readiness() -> None:
    x = np.ones((4, 3), dtype=np.float32)
    check: OutputCheck = check_outputs(np.tanh, lambda a: np.tanh(a).astype(np.float16), [x],
                                       rtol=1e-2, name="fp16")
    ok: bool = check.passed
    worst: tuple[int, ...] | None = check.worst_index
    top1: float | None = check.top1_agreement
    stats = benchmark_callable(np.tanh, x, num_iters=20)
    page = write_report([stats, check], "report.html", title="t", baseline=False,
                        budgets={"p99_ms": 30, "fp16": {"max_abs_error": 1e-3}},
                        outputs=[check], command="python bench.py")
    md = write_report(stats, "report.md", format="markdown")
    print(ok, worst, top1, page.name, md.suffix)


def filters() -> None:
    causes: list[type[BenchmarkWarning]] = [
        BusyMachineWarning, CoarseTimerWarning, DriftingWarning, GPUClockWarning,
        GPUTimeWarning, LaunchBoundWarning, MultimodalWarning, NoDeviceSyncWarning,
        NoisyWarning, OverheadWarning, PageFaultWarning, SharedGPUWarning,
        ThrottledWarning, VRAMNotTrackedWarning, WarmupWarning, OverloadedWarning,
        NoRequestsWarning]
    for cause in causes:
        warnings.filterwarnings("ignore", category=cause)
    try:
        measure()
    except BenchmarkInterrupted as e:
        partial: BenchmarkStats | list[BenchmarkStats] | LoadStats | None = e.stats
        print(partial)
    names: list[str] = sp.__all__
    print(names)
