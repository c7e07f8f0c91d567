"""Check the CUDA layer on a real NVIDIA GPU: one command, one short table.

    python bench/gpu_check.py            # from a copy of the repository

It builds the extension in place first when the importable package is
missing or predates GPU time (python setup.py build_ext --inplace: needs a C
compiler, NumPy and setuptools, no network and no CUDA toolkit), then runs
in well under 5 minutes.  torch is optional: without it the workloads are
driver operations (cuMemsetD8Async, cuMemcpyDtoDAsync_v2) issued through
ctypes, timed by reference CUDA events made the same way; with it the
matmul, cold-cache and VRAM rows compare with torch.cuda.Event and torch's
allocator too.  The table (check | ours | reference | unit | verdict):

  1. sync wall vs our events vs reference events on the same work;
  2. cold vs warm cache on a memory-bound kernel (a copy that fits in L2);
  3. SM clock / throttle reasons / temperature / power before and after,
     from our NVML reading, against the device's rated clock;
  4. first call vs steady state (a fresh workload's first_call_ms);
  5. (torch) vram_delta_mb and process_used_mb vs torch's allocator, and
     the idle sync vs torch.cuda.synchronize().

Without a GPU it says so and exits 0; it exits 1 when a figure is outside
its tolerance, 2 when the build failed.  SPATIALHUB_LIBCUDA / _LIBNVML are
honoured, so the fake drivers of tests/ exercise every row without a GPU.
"""
import ctypes
import glob
import os
import statistics
import subprocess
import sys
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src")
ITERS = 30
WARMUP = 5
COPY_MIB = 8            # fits in any recent L2 (A100 40 MB, H100 50 MB, H200 60 MB)
MEMSET_MIB = 1024
KEEP_MIB = 1024
N = 8192                # matmul size: 2*N^3 = 1.1 TFLOP per call


def _has_gpu_time(prof):
    # the text signature, not __doc__: the numpydoc help says "cache : {...}"
    return "cache=" in (getattr(prof.benchmark_callable, "__text_signature__", None) or "")


def load_package():
    """The profiling package with GPU time, building it in place if needed."""
    try:
        import spatialhub.utils.profiling as prof
        if _has_gpu_time(prof):
            return prof
    except ImportError:
        pass
    for mod in [m for m in sys.modules if m.startswith("spatialhub")]:
        del sys.modules[mod]
    sys.path.insert(0, SRC)
    built = [p for p in glob.glob(os.path.join(SRC, "spatialhub", "utils", "profiling", "_native*"))
             if not p.endswith(".pyi")]   # the stub is no build: its age says nothing
    newest_src = max(os.path.getmtime(p) for p in glob.glob(os.path.join(ROOT, "csrc", "*")))
    if not built or min(os.path.getmtime(p) for p in built) < newest_src:
        print("gpu_check: building the extension in place (setup.py build_ext --inplace) ...",
              flush=True)
        done = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
                              cwd=ROOT, capture_output=True, text=True)
        if done.returncode != 0:
            print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
            print("gpu_check: the build failed (needs a C compiler, NumPy, setuptools)")
            sys.exit(2)
    import spatialhub.utils.profiling as prof
    return prof


class Driver:
    """Just enough of libcuda through ctypes for the reference timings."""

    def __init__(self):
        path = os.environ.get("SPATIALHUB_LIBCUDA") or (
            "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1")
        self.lib = ctypes.CDLL(path)
        u64, vp = ctypes.c_uint64, ctypes.c_void_p
        self.lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(u64), ctypes.c_size_t]
        self.lib.cuMemFree_v2.argtypes = [u64]
        self.lib.cuMemsetD8Async.argtypes = [u64, ctypes.c_ubyte, ctypes.c_size_t, vp]
        self.lib.cuMemcpyDtoDAsync_v2.argtypes = [u64, u64, ctypes.c_size_t, vp]
        self.lib.cuEventRecord.argtypes = [vp, vp]
        self.lib.cuEventElapsedTime.argtypes = [ctypes.POINTER(ctypes.c_float), vp, vp]
        self.lib.cuEventDestroy_v2.argtypes = [vp]
        self.lib.cuDevicePrimaryCtxRetain.argtypes = [ctypes.POINTER(vp), ctypes.c_int]
        self.lib.cuCtxPushCurrent_v2.argtypes = [vp]
        self.check(self.lib.cuInit(0), "cuInit")
        ctx = vp()
        self.check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0), "retain")
        cur = vp()
        self.check(self.lib.cuCtxGetCurrent(ctypes.byref(cur)), "cuCtxGetCurrent")
        if not cur.value:   # torch not loaded (or not yet): make the primary current
            self.check(self.lib.cuCtxPushCurrent_v2(ctx), "push")

    @staticmethod
    def check(rc, what):
        if rc != 0:
            raise RuntimeError(f"{what} failed: CUDA error {rc}")

    def alloc(self, nbytes):
        p = ctypes.c_uint64()
        self.check(self.lib.cuMemAlloc_v2(ctypes.byref(p), nbytes), "cuMemAlloc_v2")
        return p.value

    def attribute(self, attr):
        v = ctypes.c_int()
        self.check(self.lib.cuDeviceGetAttribute(ctypes.byref(v), attr, 0), "attribute")
        return v.value

    def event_ms(self, fn, iters=ITERS, warmup=WARMUP):
        """Median elapsed time of fn between two reference events."""
        a, b = ctypes.c_void_p(), ctypes.c_void_p()
        self.check(self.lib.cuEventCreate(ctypes.byref(a), 0), "cuEventCreate")
        self.check(self.lib.cuEventCreate(ctypes.byref(b), 0), "cuEventCreate")
        out = []
        for i in range(warmup + iters):
            self.check(self.lib.cuEventRecord(a, None), "record")
            fn()
            self.check(self.lib.cuEventRecord(b, None), "record")
            self.check(self.lib.cuCtxSynchronize(), "sync")
            ms = ctypes.c_float()
            self.check(self.lib.cuEventElapsedTime(ctypes.byref(ms), a, b), "elapsed")
            if i >= warmup:
                out.append(ms.value)
        self.lib.cuEventDestroy_v2(a)
        self.lib.cuEventDestroy_v2(b)
        return statistics.median(out)


def main():
    prof = load_package()
    warnings.simplefilter("ignore", prof.BenchmarkWarning)
    sync = prof.get_cuda_sync_fn()
    if sync is None:
        print("gpu_check: no GPU (get_cuda_sync_fn() is None: no NVIDIA driver or no "
              "CUDA device here); nothing to check.")
        return 0
    try:
        import torch
        have_torch = torch.cuda.is_available()
    except ImportError:
        torch, have_torch = None, False
    if have_torch:
        torch.cuda.init()   # its context first, so that ours is the same primary one
    drv = Driver()
    bench = prof.benchmark_callable
    rows, failed = [], [False]

    def row(what, ours, ref, unit, ok):
        failed[0] |= ok is False
        rows.append((what, ours, ref, unit, {True: "ok", False: "FAIL", None: "info"}[ok]))

    # 1. sync wall vs our events vs reference events, on the same work
    buf = drv.alloc(MEMSET_MIB << 20)

    def memset():
        drv.lib.cuMemsetD8Async(buf, 7, MEMSET_MIB << 20, None)

    ref = drv.event_ms(memset)
    st = bench(memset, name="memset", device="CUDA", num_warmup=WARMUP, num_iters=ITERS)
    row(f"{MEMSET_MIB} MiB cuMemsetD8Async: our events (gpu_median_ms)",
        f"{st.gpu_median_ms:.4f}", f"{ref:.4f}", "ms",
        abs(st.gpu_median_ms - ref) <= 0.05 * ref + 0.005)
    row("same: our synced wall median (>= events)", f"{st.median_ms:.4f}", f"{ref:.4f}", "ms",
        st.median_ms >= 0.98 * st.gpu_median_ms)
    row("same: host share (launch only: near 0)", f"{st.host_share:.3f}", "-", "ratio",
        st.host_share < 0.5)
    first_st = None
    if have_torch:
        dev = torch.device("cuda:0")
        dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        a = torch.randn(N, N, device=dev, dtype=dtype)
        b = torch.randn(N, N, device=dev, dtype=dtype)
        c = torch.empty(N, N, device=dev, dtype=dtype)

        def matmul():
            torch.matmul(a, b, out=c)

        tev = []
        for i in range(WARMUP + ITERS):
            s0, e0 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s0.record()
            matmul()
            e0.record()
            e0.synchronize()
            if i >= WARMUP:
                tev.append(s0.elapsed_time(e0))
        tref = statistics.median(tev)
        st = bench(matmul, name="matmul", device="CUDA", num_warmup=WARMUP, num_iters=ITERS,
                   stream=torch.cuda.current_stream())
        row(f"{N}x{N} {str(dtype)[6:]} matmul: our events vs torch.cuda.Event",
            f"{st.gpu_median_ms:.3f}", f"{tref:.3f}", "ms",
            abs(st.gpu_median_ms - tref) <= 0.05 * tref + 0.01)
        row("same: our synced wall median vs torch.cuda.Event", f"{st.median_ms:.3f}",
            f"{tref:.3f}", "ms", 0.97 * tref <= st.median_ms <= 1.10 * tref + 0.05)
        small = torch.randn(64, 64, device=dev)
        st = bench(lambda: small.add_(1.0), name="tiny", device="CUDA", num_warmup=WARMUP,
                   num_iters=ITERS)
        row("64x64 add_: host share (launch-bound: high)", f"{st.host_share:.3f}",
            f"gpu {st.gpu_median_ms:.4f} / wall {st.median_ms:.4f} ms", "ratio", None)

    # 2. cold vs warm: a device-to-device copy that fits in L2
    l2 = drv.attribute(38)
    src, dst = drv.alloc(COPY_MIB << 20), drv.alloc(COPY_MIB << 20)

    def copy():
        drv.lib.cuMemcpyDtoDAsync_v2(dst, src, COPY_MIB << 20, None)

    warm = bench(copy, name="copy", device="CUDA", num_warmup=WARMUP, num_iters=ITERS)
    cold = bench(copy, name="copy", device="CUDA", num_warmup=WARMUP, num_iters=ITERS,
                 cache="cold")
    row(f"{COPY_MIB} MiB D2D copy, GPU median: cold vs warm (L2 {l2 >> 20} MiB)",
        f"{cold.gpu_median_ms:.4f}", f"{warm.gpu_median_ms:.4f}", "ms",
        cold.gpu_median_ms >= 0.98 * warm.gpu_median_ms)
    if have_torch:
        x = torch.randn(COPY_MIB << 18, device=dev)     # 8 MiB of float32
        w = bench(x.sum, name="sum", device="CUDA", num_warmup=WARMUP, num_iters=ITERS)
        cd = bench(x.sum, name="sum", device="CUDA", num_warmup=WARMUP, num_iters=ITERS,
                   cache="cold")
        row(f"{COPY_MIB} MiB torch sum, GPU median: cold vs warm", f"{cd.gpu_median_ms:.4f}",
            f"{w.gpu_median_ms:.4f}", "ms", cd.gpu_median_ms >= 0.98 * w.gpu_median_ms)

    # 3. clocks and throttling over a ~3 s load
    st = bench(memset, name="load", device="CUDA", num_warmup=0, num_iters=10_000,
               max_time_s=3.0)
    t = st.gpu_telemetry or {}
    try:
        rated = drv.attribute(13) // 1000   # CU_DEVICE_ATTRIBUTE_CLOCK_RATE, kHz
    except RuntimeError:
        rated = "?"                          # deprecated attribute: newer drivers may refuse
    row(f"SM clock start -> end (min..max) over {st.timed_iters} memsets, MHz",
        f"{t.get('sm_clock_mhz_start')} -> {t.get('sm_clock_mhz_end')} "
        f"({t.get('sm_clock_mhz_min')}..{t.get('sm_clock_mhz_max')})", f"rated {rated}", "MHz",
        t.get("nvml") == "available")
    row("throttle reasons seen; temperature start -> max; power start -> max",
        f"{t.get('throttle_reasons')}; {t.get('temperature_c_start')} -> "
        f"{t.get('temperature_c_max')} C; {t.get('power_w_start')} -> {t.get('power_w_max')} W",
        f"{t.get('samples')} samples", "-", None)

    # 4. first call vs steady state: a fresh kind of work in this process
    if have_torch:
        conv_x = torch.randn(8, 64, 56, 56, device=dev)
        conv_w = torch.randn(64, 64, 3, 3, device=dev)
        first_st = bench(torch.nn.functional.conv2d, conv_x, conv_w, name="conv", device="CUDA",
                         num_warmup=5, num_iters=ITERS)
        label = "conv2d 8x64x56x56 (cuDNN's first use)"
    else:
        other = drv.alloc(64 << 20)
        first_st = bench(lambda: drv.lib.cuMemsetD8Async(other, 1, 64 << 20, None),
                         name="memset64", device="CUDA", num_warmup=5, num_iters=ITERS)
        label = "64 MiB memset (fresh buffer)"
    row(f"{label}: first_call_ms vs steady median (settled after {first_st.settle_calls})",
        f"{first_st.first_call_ms:.3f}", f"{first_st.median_ms:.3f}", "ms",
        first_st.first_call_ms >= 0.9 * first_st.median_ms)

    # 5. (torch) memory and the idle sync
    if have_torch:
        store = []

        def keep():
            if not store:
                store.append(torch.empty(KEEP_MIB << 20, dtype=torch.uint8, device=dev))

        torch.cuda.empty_cache()
        base_res = torch.cuda.memory_reserved(dev)
        st = bench(keep, name="keep", device="CUDA", num_warmup=2, num_iters=5)
        reserved = (torch.cuda.memory_reserved(dev) - base_res) / 2**20
        row(f"vram_delta_mb, {KEEP_MIB} MiB kept vs torch reserved growth",
            f"{st.vram_delta_mb:.1f}", f"{reserved:.1f}", "MiB",
            abs(st.vram_delta_mb - reserved) <= 8 + 0.01 * KEEP_MIB)
        pu = (st.gpu_telemetry or {}).get("process_used_mb")
        row("process_used_mb (NVML, this process) vs torch reserved + context",
            f"{pu}", f">= {torch.cuda.memory_reserved(dev) / 2**20:.0f}", "MiB",
            None if not isinstance(pu, float) else pu >= torch.cuda.memory_reserved(dev) / 2**20)
        store.clear()

        def per_call_us(fn):
            for _ in range(100):
                fn()
            samples = []
            for _ in range(2000):
                t0 = time.perf_counter_ns()
                fn()
                samples.append(time.perf_counter_ns() - t0)
            return statistics.median(samples) / 1e3

        ours_us, torch_us = per_call_us(sync), per_call_us(torch.cuda.synchronize)
        row("idle sync, median per call (ours vs torch.cuda.synchronize)", f"{ours_us:.2f}",
            f"{torch_us:.2f}", "µs", ours_us <= 2 * torch_us + 5)

    env = first_st.env if first_st is not None else {}
    print(f"GPU: {env.get('gpu', '?')}; driver "
          f"{env.get('cuda_driver')}; torch "
          f"{torch.__version__ + ' (CUDA ' + str(torch.version.cuda) + ')' if have_torch else 'absent'}"
          f"; {sync!r}; {time.strftime('%Y-%m-%d %H:%M %Z')}\n")
    print("| check | ours | reference | unit | |")
    print("| :--- | ---: | ---: | :--- | :--- |")
    for what, ours, ref, unit, verdict in rows:
        print(f"| {what} | {ours} | {ref} | {unit} | {verdict} |")
    return 1 if failed[0] else 0


if __name__ == "__main__":
    sys.exit(main())
