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
