from dataclasses import Field
from typing import Any, Callable, ClassVar, Iterable, Literal, Optional, Sequence, SupportsIndex, Union

import numpy as np
import numpy.typing as npt

class BenchmarkWarning(UserWarning):
    # set on every warning a benchmark call raises (docs/statistics.md, Warnings)
    causes: tuple[str, ...]
    benchmark: Optional[str]
    stats: Optional["BenchmarkStats"]
    def __getattr__(self, name: str) -> Any: ...   # the numbers of each cause
class NoisyWarning(BenchmarkWarning): ...
class MultimodalWarning(BenchmarkWarning): ...
class DriftingWarning(BenchmarkWarning): ...
class BusyMachineWarning(BenchmarkWarning): ...
class LaunchBoundWarning(BenchmarkWarning): ...
class OverheadWarning(BenchmarkWarning): ...
class PageFaultWarning(BenchmarkWarning): ...
class WarmupWarning(BenchmarkWarning): ...
class CoarseTimerWarning(BenchmarkWarning): ...
class GPUClockWarning(BenchmarkWarning): ...
class ThrottledWarning(BenchmarkWarning): ...
class SharedGPUWarning(BenchmarkWarning): ...
class NoDeviceSyncWarning(BenchmarkWarning): ...
class VRAMNotTrackedWarning(BenchmarkWarning): ...
class GPUTimeWarning(BenchmarkWarning): ...
class CountersWarning(BenchmarkWarning): ...
class OverloadedWarning(BenchmarkWarning): ...
class NoRequestsWarning(BenchmarkWarning): ...

def suppressed_warnings() -> dict[str, int]: ...

ADAPTIVE_MIN_SAMPLES: int  # target_rel_ci is never judged on fewer samples
__version__: str  # the version the core was built as (_version.py)
# The documented defaults and thresholds (csrc/constants.c; docs/design.md lists them)
DEFAULT_MARGIN: float
DEFAULT_NUM_WARMUP: int
DEFAULT_NUM_ITERS: int
ASSUMED_RUN_SPREAD: float
ASSUMED_BUSY_RUN_SPREAD: float
BUSY_CPU_SHARE: float
BUSY_LOAD_PER_CPU: float
PAGE_FAULTS_WARN: float
OVERHEAD_FACTOR: float
COARSE_TIMER_FACTOR: float
LAUNCH_BOUND_HOST_SHARE: float
GPU_CLOCK_MOVE: float
SETTLE_TOL: float
SETTLE_WARN: float
NOISY_IQR: float
NOISY_P95: float
DRIFT: float
DRIFT_T: float
MODES_D: float
MODES_D_SMALL: float
MODE_SEPARATION: float
MODE_MIN_SHARE: float
ADAPTIVE_DEFAULT_TIME_S: float
ADAPTIVE_MAX_SAMPLES: int
SETTLE_MIN_TIMED: int
SETTLE_MAX_TAIL: int
BLOCKS_MAX: int
BLOCK_MIN_SAMPLES: int
MODES_N: int
MODE_MIN_SAMPLES: int
NOISY_MIN_SAMPLES: int
LLC_ASSUMED_BYTES: int
RSS_SHARE_NS: int
LOAD_DEFAULT_DURATION_S: float
LOAD_MAX_DURATION_S: float
LOAD_OVERLOAD_Z: float
LOAD_LAG_SHARE: float
LOAD_MAX_REQUESTS: int
LOAD_MAX_WORKERS: int
LOAD_FEW_REQUESTS: int
LOAD_MIN_TAIL: int
LOAD_OVERLOAD_MIN_ARRIVALS: int
LOAD_MIN_BLOCKS: int
LOAD_BOOT_REPS: int
LOAD_SPIN_NS: int

class BenchmarkInterrupted(KeyboardInterrupt):
    # a BenchmarkStats; [pool of a, pool of b] from compare_repeated; a LoadStats from
    # benchmark_load
    stats: Any
    partial: Any  # set by sweep(): the SweepResult of the values done so far

class BenchmarkStats:
    # the seed's dataclass protocol (declared by the package's __init__)
    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]
    name: str
    device: str
    mean_ms: float
    median_ms: float
    std_ms: float
    p95_ms: float
    min_ms: float
    max_ms: float
    fps: float
    warmup_iters: int
    timed_iters: int
    ram_delta_mb: float
    vram_delta_mb: float
    p50_ms: Optional[float]
    p90_ms: Optional[float]
    p99_ms: Optional[float]
    iqr_ms: Optional[float]
    ci95_low_ms: Optional[float]
    ci95_high_ms: Optional[float]
    outliers: Optional[int]
    overhead_ms: Optional[float]
    loop_overhead_ms: Optional[float]
    ram_peak_method: Optional[str]
    target_met: Optional[bool]
    machine_busy: Optional[bool]
    batch_size: int
    torch_max_allocated_mb: Optional[float]
    params: Optional[dict[str, Any]]
    env: Optional[dict[str, Any]]
    first_call_ms: Optional[float]
    warmup_ms: Optional[tuple[float, ...]]
    settle_calls: Optional[int]
    cache: Optional[str]
    gpu_median_ms: Optional[float]
    gpu_p95_ms: Optional[float]
    host_share: Optional[float]
    gpu_samples_ms: Optional[tuple[float, ...]]
    gpu_telemetry: Optional[dict[str, Any]]
    stability: Optional[Literal["stable", "noisy", "multimodal", "drifting"]]
    cv: Optional[float]
    autocorr_lag1: Optional[float]
    effective_n: Optional[int]
    drift: Optional[float]
    multimodal: Optional[bool]
    minor_faults_per_iter: Optional[float]
    major_faults_per_iter: Optional[float]
    vol_ctx_switches_per_iter: Optional[float]
    invol_ctx_switches_per_iter: Optional[float]
    run_sizes: Optional[tuple[int, ...]]
    run_spread: Optional[float]
    rerun_low_ms: Optional[float]
    rerun_high_ms: Optional[float]
    rerun_basis: Optional[str]
    instructions_per_call: Optional[float]
    cycles_per_call: Optional[float]
    counter_source: Optional[Literal["callgrind", "perf_event"]]
    @property
    def samples_ms(self) -> Optional[npt.NDArray[np.float64]]: ...
    @property
    def throughput(self) -> float: ...
    @property
    def flags(self) -> tuple[str, ...]: ...
    def __init__(
        self,
        name: str,
        device: str,
        mean_ms: float,
        median_ms: float,
        std_ms: float,
        p95_ms: float,
        min_ms: float,
        max_ms: float,
        fps: float,
        warmup_iters: int,
        timed_iters: int,
        ram_delta_mb: float = 0.0,
        vram_delta_mb: float = 0.0,
        *,
        p50_ms: Optional[float] = None,
        p90_ms: Optional[float] = None,
        p99_ms: Optional[float] = None,
        iqr_ms: Optional[float] = None,
        ci95_low_ms: Optional[float] = None,
        ci95_high_ms: Optional[float] = None,
        outliers: Optional[int] = None,
        overhead_ms: Optional[float] = None,
        loop_overhead_ms: Optional[float] = None,
        ram_peak_method: Optional[str] = None,
        target_met: Optional[bool] = None,
        batch_size: int = 1,
        torch_max_allocated_mb: Optional[float] = None,
        params: Optional[dict[str, Any]] = None,
        env: Optional[dict[str, Any]] = None,
        first_call_ms: Optional[float] = None,
        warmup_ms: Optional[Sequence[float]] = None,
        settle_calls: Optional[int] = None,
        cache: Optional[str] = None,
        gpu_median_ms: Optional[float] = None,
        gpu_p95_ms: Optional[float] = None,
        host_share: Optional[float] = None,
        gpu_samples_ms: Optional[Sequence[float]] = None,
        gpu_telemetry: Optional[dict[str, Any]] = None,
        stability: Optional[str] = None,
        cv: Optional[float] = None,
        autocorr_lag1: Optional[float] = None,
        effective_n: Optional[int] = None,
        drift: Optional[float] = None,
        multimodal: Optional[bool] = None,
        minor_faults_per_iter: Optional[float] = None,
        major_faults_per_iter: Optional[float] = None,
        vol_ctx_switches_per_iter: Optional[float] = None,
        invol_ctx_switches_per_iter: Optional[float] = None,
        run_sizes: Optional[Iterable[int]] = None,
        run_spread: Optional[float] = None,
        rerun_low_ms: Optional[float] = None,
        rerun_high_ms: Optional[float] = None,
        rerun_basis: Optional[str] = None,
        instructions_per_call: Optional[float] = None,
        cycles_per_call: Optional[float] = None,
        counter_source: Optional[str] = None,
        samples_ms: Optional[Iterable[float]] = None,
    ) -> None: ...
    def to_dict(self, *, samples: bool = False, exact: bool = False) -> dict[str, Any]: ...
    def to_json(self, *, samples: bool = False, indent: Optional[int] = None) -> str: ...
    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "BenchmarkStats": ...
    def _repr_markdown_(self) -> str: ...
    def _repr_html_(self) -> str: ...

class GPUMemoryInfo:
    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]
    total_mb: float
    free_mb: float
    used_mb: float
    def __init__(self, total_mb: float, free_mb: float, used_mb: float) -> None: ...
    def to_dict(self) -> dict[str, float]: ...

class Comparison:
    baseline: str
    candidate: str
    baseline_median_ms: float
    candidate_median_ms: float
    ratio: float
    ci95_low: float
    ci95_high: float
    verdict: Literal["faster", "slower", "same", "inconclusive"]
    resamples: int
    reason: Optional[str]
    margin: float
    method: Optional[Literal["samples", "runs", "interleaved"]]
    baseline_runs: int
    candidate_runs: int
    run_spread: Optional[float]
    def to_dict(self, *, exact: bool = False) -> dict[str, Any]: ...
    def to_markdown(self) -> str: ...
    def to_html(self) -> str: ...
    def _repr_markdown_(self) -> str: ...
    def _repr_html_(self) -> str: ...

class CudaSync:
    def __call__(self) -> None: ...

Arrival = Literal["poisson", "uniform", "closed", "offline"]

class LoadStats:
    name: str
    device: str
    arrival: Optional[str]
    offered_qps: Optional[float]
    arrival_qps: Optional[float]
    achieved_qps: Optional[float]
    duration_s: float
    workers: int
    warmup_iters: int
    requests: int
    completed: int
    dropped: int
    unserved: int
    seed: Optional[int]
    max_queue: Optional[int]
    mean_ms: Optional[float]
    p50_ms: Optional[float]
    p90_ms: Optional[float]
    p99_ms: Optional[float]
    p999_ms: Optional[float]
    max_ms: Optional[float]
    p50_ci_low_ms: Optional[float]
    p50_ci_high_ms: Optional[float]
    p99_ci_low_ms: Optional[float]
    p99_ci_high_ms: Optional[float]
    ci_block: Optional[int]
    service_mean_ms: Optional[float]
    service_p50_ms: Optional[float]
    service_p99_ms: Optional[float]
    service_max_ms: Optional[float]
    queue_share: Optional[float]
    overloaded: Optional[bool]
    backlog_growth_qps: Optional[float]
    backlog_end: Optional[int]
    lag_p50_ms: Optional[float]
    lag_p99_ms: Optional[float]
    lag_max_ms: Optional[float]
    batch_size: int
    machine_busy: Optional[bool]
    env: Optional[dict[str, Any]]
    search: Optional[dict[str, Any]]
    @property
    def arrivals_ms(self) -> Optional[npt.NDArray[np.float64]]: ...
    @property
    def latencies_ms(self) -> Optional[npt.NDArray[np.float64]]: ...
    @property
    def service_ms(self) -> Optional[npt.NDArray[np.float64]]: ...
    @property
    def lag_ms(self) -> Optional[npt.NDArray[np.float64]]: ...
    @property
    def throughput(self) -> Optional[float]: ...
    @property
    def flags(self) -> tuple[str, ...]: ...
    def __init__(
        self,
        name: str,
        device: str,
        *,
        arrival: Optional[str] = None,
        offered_qps: Optional[float] = None,
        arrival_qps: Optional[float] = None,
        achieved_qps: Optional[float] = None,
        duration_s: float = 0.0,
        workers: int = 1,
        warmup_iters: int = 0,
        requests: int = 0,
        completed: int = 0,
        dropped: int = 0,
        unserved: int = 0,
        seed: Optional[int] = None,
        max_queue: Optional[int] = None,
        mean_ms: Optional[float] = None,
        p50_ms: Optional[float] = None,
        p90_ms: Optional[float] = None,
        p99_ms: Optional[float] = None,
        p999_ms: Optional[float] = None,
        max_ms: Optional[float] = None,
        p50_ci_low_ms: Optional[float] = None,
        p50_ci_high_ms: Optional[float] = None,
        p99_ci_low_ms: Optional[float] = None,
        p99_ci_high_ms: Optional[float] = None,
        ci_block: Optional[int] = None,
        service_mean_ms: Optional[float] = None,
        service_p50_ms: Optional[float] = None,
        service_p99_ms: Optional[float] = None,
        service_max_ms: Optional[float] = None,
        queue_share: Optional[float] = None,
        overloaded: Optional[bool] = None,
        backlog_growth_qps: Optional[float] = None,
        backlog_end: Optional[int] = None,
        lag_p50_ms: Optional[float] = None,
        lag_p99_ms: Optional[float] = None,
        lag_max_ms: Optional[float] = None,
        batch_size: int = 1,
        machine_busy: Optional[bool] = None,
        env: Optional[dict[str, Any]] = None,
        search: Optional[dict[str, Any]] = None,
        arrivals_ms: Optional[Iterable[float]] = None,
        latencies_ms: Optional[Iterable[float]] = None,
        service_ms: Optional[Iterable[float]] = None,
        lag_ms: Optional[Iterable[float]] = None,
    ) -> None: ...
    def to_dict(self, *, samples: bool = False) -> dict[str, Any]: ...
    def to_json(self, *, samples: bool = False, indent: Union[None, int, str] = None) -> str: ...
    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "LoadStats": ...
    def percentile_ci(
        self, percentile: float
    ) -> tuple[Optional[float], Optional[float], Optional[float]]: ...
    def _repr_markdown_(self) -> str: ...
    def _repr_html_(self) -> str: ...

def benchmark_load(
    func: Callable[..., Any],
    /,
    *args: Any,
    qps: Optional[float] = None,
    duration_s: float = 10.0,
    workers: int = 1,
    arrival: Arrival = "poisson",
    num_warmup: int = ...,
    seed: Optional[int] = None,
    max_queue: Optional[int] = None,
    name: str = "BenchmarkTarget",
    device: str = "CPU",
    sync_fn: Optional[Callable[[], Any]] = None,
    **kwargs: Any,
) -> LoadStats: ...
def format_load_table(
    results: Union[LoadStats, Iterable[LoadStats]],
    title: Optional[str] = None,
    *,
    format: Literal["markdown", "html"] = "markdown",
) -> str: ...
def _fcfs_latencies(
    arrivals: Iterable[float], service: Iterable[float], servers: SupportsIndex = 1
) -> npt.NDArray[np.float64]: ...

def benchmark_callable(
    func: Callable[..., Any],
    /,
    *args: Any,
    name: str = "BenchmarkTarget",
    device: str = "CPU",
    num_warmup: int = 10,
    num_iters: int = 50,
    track_ram: bool = True,
    track_vram: bool = True,
    sync_fn: Optional[Callable[[], Any]] = None,
    target_rel_ci: Optional[float] = None,
    max_time_s: Optional[float] = None,
    disable_gc: bool = False,
    progress: Optional[bool] = None,
    cache: Literal["warm", "cold"] = "warm",
    stream: Optional[Any] = None,
    run_spread: Optional[float] = None,
    counters: Union[None, Literal["instructions", "cycles"],
                    Iterable[Literal["instructions", "cycles"]]] = None,
    **kwargs: Any,
) -> BenchmarkStats: ...
# The names format_benchmark_table's columns= takes (and SweepResult.to_table's).
TableColumn = Literal["rerun", "first_call", "p99", "ci95", "min", "max", "gpu", "host_share",
                      "cache", "instructions", "cycles"]
TableColumns = Union[None, Literal["auto"], TableColumn, Iterable[TableColumn]]

def format_benchmark_table(
    stats_list: Union[BenchmarkStats, Iterable[BenchmarkStats]],
    title: Optional[str] = None,
    throughput_unit: str = "FPS",
    *,
    baseline: Optional[BenchmarkStats] = None,
    param: Optional[str] = None,
    format: Literal["markdown", "html"] = "markdown",
    run_spread: Optional[float] = None,
    margin: float = 0.05,
    columns: TableColumns = None,
) -> str: ...
def compare_benchmarks(
    baseline: BenchmarkStats,
    candidate: BenchmarkStats,
    *,
    resamples: SupportsIndex = 2000,
    seed: SupportsIndex = 0,
    margin: float = 0.05,
    run_spread: Optional[float] = None,
    paired: bool = False,
) -> Comparison: ...
def get_cuda_sync_fn() -> Optional[CudaSync]: ...
def get_gpu_vram_mb(device_id: SupportsIndex = 0) -> Optional[GPUMemoryInfo]: ...
def get_ram_mb() -> float: ...
def _stats_from_samples(samples_ms: Iterable[float], *, warn: bool = False) -> BenchmarkStats: ...
def _count(value: Any, param: str, owner: Optional[str] = None, lowest: int = 0,
           highest: Optional[int] = None) -> int: ...
def _real(value: Any, param: str, owner: Optional[str] = None) -> float: ...
def _noop() -> None: ...
def _clock_ns() -> int: ...
def _force_sampled_rss(flag: bool) -> bool: ...
def _rss_at_scope(now_ns: Optional[int]) -> tuple[int, int]: ...
def _overhead_ms() -> Optional[float]: ...
def _apply_rerun(stats: BenchmarkStats, run_spread: Optional[float] = None) -> BenchmarkStats: ...
def _set_machine_run_spread(
    spread: Optional[float], processes: Optional[SupportsIndex]
) -> tuple[Optional[float], Optional[int]]: ...
def _malloc_mmap_threshold() -> Optional[int]: ...
def _malloc_raise_mmap_threshold(bytes: SupportsIndex) -> Optional[int]: ...
def _perfctr_software(flag: bool) -> bool: ...
def _callgrind_active() -> bool: ...
def _warning_class(causes: tuple[str, ...]) -> type[BenchmarkWarning]: ...
def _note_near_option(exc: BaseException, keywords: tuple[str, ...],
                      options: dict[str, str]) -> bool: ...
def _warning_texts(attrs: Optional[dict[str, Any]]) -> dict[str, str]: ...
# the one escaper (types/rules.c): every name the Python layer writes goes through it
def _html_escape(text: str) -> str: ...
def _md_text(text: str, mode: Literal["cell", "heading", "code"] = "cell") -> str: ...

# ---- the scope profiler (scopenode.c, scope.c, scopetimer.c) -------------------------

class ProfileNode:
    name: str
    calls: int
    total_wall_time: float          # seconds
    total_cpu_time: float           # seconds
    peak_ram_delta_mb: float
    peak_vram_delta_mb: float
    children: dict[str, "ProfileNode"]
    @property
    def parent(self) -> Optional["ProfileNode"]: ...
    @property
    def depth(self) -> int: ...
    @property
    def p50_ms(self) -> Optional[float]: ...
    @property
    def p95_ms(self) -> Optional[float]: ...
    @property
    def p99_ms(self) -> Optional[float]: ...
    @property
    def min_ms(self) -> Optional[float]: ...
    @property
    def max_ms(self) -> Optional[float]: ...
    @property
    def mean_ms(self) -> Optional[float]: ...
    @property
    def histogram_calls(self) -> int: ...
    def __init__(self, name: str) -> None: ...
    def percentile(self, q: float) -> Optional[float]: ...

class Timer:
    name: str
    track_memory: Union[bool, Literal["peak"]]
    track_vram: bool
    sync_cuda: bool
    @property
    def device_id(self) -> int: ...
    @property
    def elapsed_wall(self) -> float: ...
    @property
    def elapsed_cpu(self) -> float: ...
    @property
    def ram_delta_mb(self) -> float: ...
    @property
    def vram_delta_mb(self) -> float: ...
    @property
    def node(self) -> Optional[ProfileNode]: ...
    @property
    def profiler(self) -> Optional["ProfilerCore"]: ...
    @property
    def start_wall(self) -> float: ...
    @property
    def start_cpu(self) -> float: ...
    @property
    def active(self) -> bool: ...
    def __init__(
        self,
        name: str,
        profiler: Optional["ProfilerCore"] = None,
        track_memory: Union[bool, Literal["peak"]] = True,
        track_vram: bool = False,
        sync_cuda: bool = False,
        device_id: SupportsIndex = 0,
    ) -> None: ...
    def __enter__(self) -> "Timer": ...
    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool: ...

class ProfilerCore:
    track_ram: Union[bool, Literal["peak"]]
    track_vram: bool
    sync_cuda: bool
    root_name: str
    @property
    def device(self) -> str: ...
    @property
    def device_id(self) -> int: ...
    @property
    def root(self) -> ProfileNode: ...
    @property
    def stack(self) -> list[ProfileNode]: ...
    @property
    def current(self) -> ProfileNode: ...
    @property
    def trace_capacity(self) -> int: ...
    def __init__(
        self,
        name: str = "Root",
        device: str = "CPU",
        track_ram: Union[bool, Literal["peak"]] = True,
        track_vram: Optional[bool] = None,
        sync_cuda: Optional[bool] = None,
        device_id: SupportsIndex = 0,
        *,
        trace_capacity: SupportsIndex = 65536,
    ) -> None: ...
    def push(self, name: str) -> ProfileNode: ...
    def pop(self) -> None: ...
    def reset(self) -> None: ...
    def scope(
        self,
        name: str,
        track_ram: Union[None, bool, Literal["peak"]] = None,
        track_vram: Optional[bool] = None,
        sync_cuda: Optional[bool] = None,
    ) -> Timer: ...
    def __call__(
        self,
        name: str,
        track_ram: Union[None, bool, Literal["peak"]] = None,
        track_vram: Optional[bool] = None,
        sync_cuda: Optional[bool] = None,
    ) -> Timer: ...
    def _trace(self) -> tuple[list[ProfileNode], list[tuple[int, int, int, int, int]], int]: ...

def _set_default_profiler(p: Optional[ProfilerCore]) -> None: ...
def _scope_clock_floor_ns(n: SupportsIndex) -> float: ...
