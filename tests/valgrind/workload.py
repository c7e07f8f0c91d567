"""A focused workload for valgrind memcheck (.ci/valgrind.sh): every native entry point,
on the normal and the error paths, a few hundred times."""
import pickle
import warnings

import numpy as np

from spatialhub.utils.profiling import (BenchmarkStats, BenchmarkWarning, GPUMemoryInfo,
                                        benchmark_callable, compare_benchmarks,
                                        format_benchmark_table, get_cuda_sync_fn,
                                        get_gpu_vram_mb, get_ram_mb)
from spatialhub.utils.profiling import _native

warnings.simplefilter("ignore", BenchmarkWarning)


def boom():
    raise ValueError("x")


for i in range(200):
    s = benchmark_callable(_native._noop, num_warmup=2, num_iters=50, name="noop")
    t = benchmark_callable(int, "7", num_warmup=1, num_iters=30, track_ram=False)
    a = benchmark_callable(_native._noop, num_iters=5, target_rel_ci=0.5, max_time_s=0.05)
    format_benchmark_table([s, t, a], title="t", baseline=s)
    format_benchmark_table(s, format="html")
    s.to_dict(samples=True)
    s.to_json()
    pickle.loads(pickle.dumps(s))
    BenchmarkStats.from_dict(s.to_dict(samples=True))
    v = s.samples_ms
    del v
    _native._stats_from_samples(np.arange(1.0, 300.0))
    compare_benchmarks(s, t, resamples=100)
    GPUMemoryInfo(1.0, 0.5, 0.5).to_dict()
    get_ram_mb()
    get_cuda_sync_fn()
    get_gpu_vram_mb()
    for bad in (dict(num_iters=0), dict(name=3), dict(num_warmup=-1), dict(device="cuda:x")):
        try:
            benchmark_callable(_native._noop, **bad)
        except (TypeError, ValueError):
            pass
    try:
        benchmark_callable(boom)
    except ValueError:
        pass
    try:
        format_benchmark_table([s, 1])
    except TypeError:
        pass
print("workload done")
