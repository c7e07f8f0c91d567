"""Benchmark harness with a native core.

Everything below is implemented in C (``spatialhub.utils.profiling._native``):
the timing loop, the statistics, memory and CUDA telemetry and the tables.
"""
from ._native import (
    BenchmarkInterrupted,
    BenchmarkStats,
    BenchmarkWarning,
    Comparison,
    CudaSync,
    GPUMemoryInfo,
    benchmark_callable,
    compare_benchmarks,
    format_benchmark_table,
    get_cuda_sync_fn,
    get_gpu_vram_mb,
    get_ram_mb,
)

__all__ = [
    "BenchmarkInterrupted",
    "BenchmarkStats",
    "BenchmarkWarning",
    "Comparison",
    "CudaSync",
    "GPUMemoryInfo",
    "benchmark_callable",
    "compare_benchmarks",
    "format_benchmark_table",
    "get_cuda_sync_fn",
    "get_gpu_vram_mb",
    "get_ram_mb",
]

# Python by nature: adapters over torch / ONNX Runtime, sweeps and plots.  Their
# modules import torch, onnxruntime and matplotlib only inside the functions.
from .adapters import SweepResult, benchmark_onnx, profile_model, sweep  # noqa: E402
from .plot import plot_latency, plot_sweep  # noqa: E402

__all__ += ["SweepResult", "benchmark_onnx", "profile_model", "sweep", "plot_latency",
            "plot_sweep"]
