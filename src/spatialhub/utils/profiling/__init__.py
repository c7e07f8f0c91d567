"""Benchmark harness with a native core.

Everything below is implemented in C (``spatialhub.utils.profiling._native``):
the timing loop, the statistics, memory and CUDA telemetry and the tables.
"""
from . import _native
from ._version import __version__

if getattr(_native, "__version__", None) != __version__:
    # an in-place build (setup.py build_ext --inplace, an old editable install) left
    # from another version: every result would record the wrong version
    raise ImportError(
        f"spatialhub.utils.profiling {__version__}: its native core {_native.__file__} was "
        f"built as version {getattr(_native, '__version__', '(unknown)')}; rebuild it "
        "(pip install . or python setup.py build_ext --inplace)")

from ._native import (
    BenchmarkInterrupted,
    BenchmarkStats,
    BenchmarkWarning,
    Comparison,
    CudaSync,
    GPUMemoryInfo,
    LoadStats,
    benchmark_callable,
    benchmark_load,
    compare_benchmarks,
    format_benchmark_table,
    format_load_table,
    get_cuda_sync_fn,
    get_gpu_vram_mb,
    get_ram_mb,
    suppressed_warnings,
)
# One BenchmarkWarning subclass per cause (docs/statistics.md, Warnings): filter by class.
from ._native import (
    BusyMachineWarning,
    CoarseTimerWarning,
    CountersWarning,
    DriftingWarning,
    GPUClockWarning,
    GPUTimeWarning,
    LaunchBoundWarning,
    MultimodalWarning,
    NoDeviceSyncWarning,
    NoisyWarning,
    NoRequestsWarning,
    OverheadWarning,
    OverloadedWarning,
    PageFaultWarning,
    SharedGPUWarning,
    ThrottledWarning,
    VRAMNotTrackedWarning,
    WarmupWarning,
)

__all__ = [
    "BenchmarkInterrupted",
    "BenchmarkStats",
    "BenchmarkWarning",
    "Comparison",
    "CudaSync",
    "GPUMemoryInfo",
    "LoadStats",
    "benchmark_callable",
    "benchmark_load",
    "compare_benchmarks",
    "format_benchmark_table",
    "format_load_table",
    "get_cuda_sync_fn",
    "get_gpu_vram_mb",
    "get_ram_mb",
    "suppressed_warnings",
    "BusyMachineWarning",
    "CoarseTimerWarning",
    "CountersWarning",
    "DriftingWarning",
    "GPUClockWarning",
    "GPUTimeWarning",
    "LaunchBoundWarning",
    "MultimodalWarning",
    "NoDeviceSyncWarning",
    "NoisyWarning",
    "NoRequestsWarning",
    "OverheadWarning",
    "OverloadedWarning",
    "PageFaultWarning",
    "SharedGPUWarning",
    "ThrottledWarning",
    "VRAMNotTrackedWarning",
    "WarmupWarning",
]


def _declare_dataclass_fields() -> None:
    """The seed's BenchmarkStats (and GPUMemoryInfo) were dataclasses, and code written
    for them calls ``dataclasses.asdict``, ``fields``, ``replace``, ``is_dataclass`` and
    matches on positional patterns.  The native types keep that protocol: the seed's
    fields, in the seed's order, with the seed's defaults, described by a dataclass of
    the same shape.  (The keyword-only extras -- samples_ms, env, ... -- are not among
    them, so ``asdict`` gives the seed's 13 keys, as JSON-ready as before, and
    ``dataclasses.replace`` returns a result without the extras: ``copy.copy`` keeps
    everything.)"""
    import dataclasses
    from typing import Any

    shapes: dict[type, list[Any]] = {
        BenchmarkStats: [("name", str), ("device", str)]
        + [(n, float) for n in ("mean_ms", "median_ms", "std_ms", "p95_ms", "min_ms", "max_ms",
                                "fps")]
        + [("warmup_iters", int), ("timed_iters", int),
           ("ram_delta_mb", float, dataclasses.field(default=0.0)),
           ("vram_delta_mb", float, dataclasses.field(default=0.0))],
        GPUMemoryInfo: [("total_mb", float), ("free_mb", float), ("used_mb", float)],
    }
    for cls, fields in shapes.items():
        shape = dataclasses.make_dataclass(cls.__name__, fields)
        for attr in ("__dataclass_fields__", "__dataclass_params__", "__match_args__"):
            if hasattr(shape, attr):   # __match_args__: Python 3.10+
                setattr(cls, attr, getattr(shape, attr))


_declare_dataclass_fields()

# Python by nature: adapters over torch / ONNX Runtime, sweeps and plots.  Their
# modules import torch, onnxruntime and matplotlib only inside the functions.
from .onnx_models import benchmark_onnx  # noqa: E402
from .sweeps import SweepResult, sweep  # noqa: E402
from .torch_models import profile_model  # noqa: E402
from .plot import plot_latency, plot_load, plot_sweep  # noqa: E402
from .load import find_peak_qps, mlperf_offline, mlperf_single_stream  # noqa: E402
from .runner import benchmark_repeated, compare_callables, compare_repeated  # noqa: E402

__all__ += ["SweepResult", "benchmark_onnx", "profile_model", "sweep", "plot_latency",
            "plot_sweep", "benchmark_repeated", "compare_callables", "compare_repeated",
            "plot_load", "find_peak_qps", "mlperf_single_stream", "mlperf_offline"]

# The readiness report: outputs checked beside the speed, one offline page (report.py
# draws its figures itself, svg.py: no matplotlib).
from .outputs import OutputCheck, check_outputs  # noqa: E402
from .report import write_report  # noqa: E402

__all__ += ["OutputCheck", "check_outputs", "write_report"]

# This machine's between-run spread, if the user calibrated it (calibrate.py): the floor
# of single runs' rerun intervals instead of the assumed 15%.
from .calibrate import (calibrate_run_spread, forget_run_spread,  # noqa: E402
                        machine_run_spread, _load_at_import)

_load_at_import()
__all__ += ["calibrate_run_spread", "forget_run_spread", "machine_run_spread"]

# The released module's scope profiler (enter/exit native, see scope.py); `profiler` is
# the module-level instance Timer and timeit record into when given none.
from .scope import HierarchicalProfiler, ProfileNode, Timer, profiler, timeit  # noqa: E402

__all__ += ["HierarchicalProfiler", "ProfileNode", "Timer", "profiler", "timeit"]
