"""Check the CUDA layer against PyTorch on a real NVIDIA GPU.

    python bench/gpu_check.py

Needs the package installed (it builds nothing) and torch with CUDA.  Takes
well under a minute on a recent GPU.  Prints a Markdown table comparing:
  1. our benchmark_callable(device="CUDA") median with torch.cuda.Event
     timing of the same matmul (and the unsynchronised device="CPU" figure,
     which only sees the launch);
  2. vram_delta_mb with torch's own allocation figures for functions that
     allocate a known tensor;
  3. the idle cost of get_cuda_sync_fn()() against torch.cuda.synchronize().
Exits 0 with a message when no CUDA device is present; exits 1 when a figure
is outside its tolerance.
"""
import statistics
import sys
import time

N = 8192          # matmul size: 2*N^3 = 1.1 TFLOP per call
ITERS = 50
WARMUP = 10
KEEP_MIB = 1024   # the known allocation for the VRAM rows
IDLE_CALLS = 2000


def main():
    try:
        import torch
    except ImportError:
        print("gpu_check: torch is not installed; nothing to check.")
        return 0
    if not torch.cuda.is_available():
        print("gpu_check: no CUDA device visible to torch; nothing to check.")
        return 0

    from spatialhub.utils.profiling import (
        benchmark_callable, get_cuda_sync_fn, get_gpu_vram_mb,
    )

    sync = get_cuda_sync_fn()
    if sync is None:
        print("gpu_check: torch sees CUDA but get_cuda_sync_fn() is None: FAIL")
        return 1

    dev = torch.device("cuda:0")
    dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    a = torch.randn(N, N, device=dev, dtype=dtype)
    b = torch.randn(N, N, device=dev, dtype=dtype)
    c = torch.empty(N, N, device=dev, dtype=dtype)

    def matmul():
        torch.matmul(a, b, out=c)

    rows, failed = [], False

    def row(what, ours, ref, unit, ok):
        nonlocal failed
        failed |= not ok
        rows.append((what, ours, ref, unit, "ok" if ok else "FAIL"))

    # 1. timing: torch.cuda.Event around each call, then ours.
    for _ in range(WARMUP):
        matmul()
    torch.cuda.synchronize()
    ev = []
    for _ in range(ITERS):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        matmul()
        e.record()
        e.synchronize()
        ev.append(s.elapsed_time(e))
    ev_median = statistics.median(ev)
    st = benchmark_callable(matmul, name="matmul", device="CUDA",
                            num_warmup=WARMUP, num_iters=ITERS, track_vram=False)
    cpu = benchmark_callable(matmul, name="matmul", device="CPU",
                             num_warmup=WARMUP, num_iters=ITERS, track_vram=False)
    torch.cuda.synchronize()
    # Ours includes the launch and two driver round trips (some µs); it may
    # not be faster than the GPU's own clock nor much slower.
    row(f"{N}x{N} {str(dtype)[6:]} matmul median", f"{st.median_ms:.3f}",
        f"{ev_median:.3f}", "ms",
        0.97 * ev_median <= st.median_ms <= 1.10 * ev_median + 0.05)
    row("same, device=\"CPU\" (no sync: launch only)", f"{cpu.median_ms:.3f}",
        f"{ev_median:.3f}", "ms", cpu.median_ms < st.median_ms)

    # 2. VRAM: a tensor kept from the first call, and a temporary freed to
    # torch's caching allocator (still reserved, so the device sees it).
    def vram_case(label, keep):
        store = []

        def fn():
            if keep and store:
                return          # allocated once, in the first call, and kept
            t = torch.empty(KEEP_MIB * 2**20, dtype=torch.uint8, device=dev)
            if keep:
                store.append(t)

        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(dev)
        base_alloc = torch.cuda.memory_allocated(dev)
        base_res = torch.cuda.memory_reserved(dev)
        st = benchmark_callable(fn, name=label, device="CUDA", num_warmup=2, num_iters=5)
        peak_alloc = (torch.cuda.max_memory_allocated(dev) - base_alloc) / 2**20
        reserved = (torch.cuda.memory_reserved(dev) - base_res) / 2**20
        # Device-wide figure vs torch's reserved pool: equal up to the
        # allocator's rounding (and anything else on the device meanwhile).
        tol = 8 + 0.01 * KEEP_MIB
        row(f"vram_delta_mb, {label} (torch max_allocated {peak_alloc:.0f} MiB)",
            f"{st.vram_delta_mb:.1f}", f"{reserved:.1f}", "MiB",
            abs(st.vram_delta_mb - reserved) <= tol)
        store.clear()

    vram_case(f"{KEEP_MIB} MiB kept", True)
    vram_case(f"{KEEP_MIB} MiB temporary", False)
    torch.cuda.empty_cache()
    g = get_gpu_vram_mb(0)
    free_b, total_b = torch.cuda.mem_get_info(dev)
    row("get_gpu_vram_mb(0).total_mb", f"{g.total_mb:.0f}", f"{total_b / 2**20:.0f}", "MiB",
        abs(g.total_mb - total_b / 2**20) < 1)

    # 3. the idle sync, per call.
    def per_call_us(fn):
        for _ in range(100):
            fn()
        samples = []
        for _ in range(IDLE_CALLS):
            t0 = time.perf_counter_ns()
            fn()
            samples.append(time.perf_counter_ns() - t0)
        return statistics.median(samples) / 1e3

    ours_us, torch_us = per_call_us(sync), per_call_us(torch.cuda.synchronize)
    row("idle sync, median per call", f"{ours_us:.2f}", f"{torch_us:.2f}", "µs",
        ours_us <= 2 * torch_us + 5)

    print(f"GPU: {torch.cuda.get_device_name(dev)}; driver {st.env.get('cuda_driver')}; "
          f"torch {torch.__version__} (CUDA {torch.version.cuda}); {sync!r}\n")
    print("| check | ours | torch | unit | |")
    print("| :--- | ---: | ---: | :--- | :--- |")
    for what, ours, ref, unit, verdict in rows:
        print(f"| {what} | {ours} | {ref} | {unit} | {verdict} |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
