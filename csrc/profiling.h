/*
 * profiling.h -- the one internal header of spatialhub.utils.profiling._native.
 *
 * The files are layers; a file calls only files in the layers above it in
 * this list (never one below, never in a circle: tests/test_layering.py
 * reads the sources and fails on a call cycle or a .c file over 620 lines).
 *
 *  0. leaves -- the platform and plain C-API helpers; call no other file
 *     (env.c: only the clock and memory.c; cuda.c: only dynlib.c; cudatime.c: only
 *     the driver binding)
 *     clock.c     monotonic nanosecond clock (the clock of time.perf_counter)
 *     memory.c    process RSS and the windowed peak-RSS (high-water mark)
 *     dynlib.c    the platform's dynamic loader (dlopen / LoadLibraryEx)
 *     rusage.c    page faults and context switches of the calling thread
 *     mallocstate.c glibc malloc's effective mmap threshold: read it, raise it
 *     cuda.c      the CUDA Driver API loaded at run time: contexts, sync, VRAM
 *                 (calls dynlib.c only)
 *     cudafork.c  that driver state in a fork() child (unavailable, lock reset)
 *     args.c      every argument conversion and the one keyword parser
 *     device.c    what a device label means (CPU / CUDA[:n] / providers / MPS)
 *     notes.c     PEP 678 notes on a user's exception
 *     instattrs.c a subclass instance's own attributes (pickle, copy)
 *     env.c       the environment record attached to every result
 *     cachecold.c the CPU's last-level cache: its size, evicting it
 *     nvml.c      NVML loaded at run time: clocks, throttling, power, processes
 *     cudatime.c  GPU time by CUDA events, the L2 flush (calls only cuda.c)
 *     constants.c the documented defaults and thresholds, as module constants
 *     perfctr.c   the CPU's counters of the thread: instructions, cycles (perf_event_open)
 *     callgrind.c the call callgrind counts, its zero / dump points, reading a dump
 *     docstrings.c the long help() texts (numpydoc) of the module functions
 *  1. computation -- pure functions on C arrays or strings
 *     summary.c   order statistics, percentiles, mean/std, CI of the median
 *     bootstrap.c ratio of two medians with a seeded bootstrap 95% CI
 *     markup.c    Markdown / HTML escaping
 *     scopedata.c a scope's bounded data: latency histogram, trace-event ring
 *     scoperss.c  the RSS a default scope reads: an enter shares a read of 1 us ago
 *     verdict.c   verdicts that hold across runs: level spreads, margin rule
 *     stability.c diagnostics of one run: CV, autocorrelation, drift, modes
 *  2. fields.c    table-driven attributes shared by the result types
 *     fielddoc.c  a field-table type's docstring and text signature
 *  3. rendering -- reads the result structs below, calls none of their functions
 *     flags.c     a result's doubt labels (noisy, busy machine, ...) from its fields
 *     cells.c     one cell's text: latencies, megabytes, a parameter, a verdict
 *     columns.c   the extra columns (columns=): their names, "auto", their cells
 *     table.c     format_benchmark_table: results as Markdown / HTML
 *  4. Python types -- one type (and its module functions) per file
 *     stats.c     BenchmarkStats
 *     warn.c      the one BenchmarkWarning of a benchmark call (causes, classes, frame)
 *     advice.c    a result filled from summary and diagnosis; its stability's causes
 *     gpumem.c    GPUMemoryInfo
 *     compare.c   the Comparison type and compare_benchmarks
 *     cudasync.c  the CudaSync type, get_cuda_sync_fn, get_gpu_vram_mb
 *     scopenode.c the ProfileNode type (one scope of the call tree)
 *     scopeframe.c where each thread / task is in a scope tree: enter, leave
 *     scope.c     ProfilerCore: the scope tree, per-thread / per-task nesting
 *     scopetimer.c the Timer type: a scope's enter and exit
 *  5. the run
 *     sync.c      what synchronises each iteration; calling a Python sync
 *     progress.c  the progress line on stderr
 *     gcguard.c   the collector held off / collected around the timed loop
 *     loop.c      the warm-up and timed loops, the sample buffers
 *     extras.c    a result's cold-start, GPU-time and NVML fields, their warnings
 *     counters.c  instructions and cycles per call around the timed loop
 *     bench.c     benchmark_callable: options, the overhead floor, the result
 *  6. module.c    module init, method table, module state, test hooks
 *
 * Where a new concern goes: docs/decisions.md ("Layers").
 *
 * Conventions (docs/design.md, "How the C reads"): functions that can fail return 0 / -1 (or NULL)
 * with a Python exception set, unless their comment says otherwise.  Times
 * are integer nanoseconds inside the extension; milliseconds only at the
 * edges (the sample buffer is converted once, when the summary is made).
 * Arguments follow one rule set (args.c); messages read
 * "<function>(): <param> must be <what>, not <type>".
 */
#ifndef SHP_PROFILING_H
#define SHP_PROFILING_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL shp_ARRAY_API
#ifndef SHP_IMPORT_ARRAY
#define NO_IMPORT_ARRAY
#endif

/* Python 3.9 lacks Py_NewRef and Py_XNewRef (3.10+). */
#if PY_VERSION_HEX < 0x030A0000
static inline PyObject *
shp_newref(PyObject *o)
{
    Py_INCREF(o);
    return o;
}
#define Py_NewRef(o) shp_newref((PyObject *)(o))
static inline PyObject *
shp_xnewref(PyObject *o)
{
    Py_XINCREF(o);
    return o;
}
#define Py_XNewRef(o) shp_xnewref((PyObject *)(o))
#endif

/* ---- platform ---------------------------------------------------------- */

#if defined(_WIN32)
#define SHP_WINDOWS 1
#elif defined(__APPLE__)
#define SHP_MACOS 1
#elif defined(__linux__)
#define SHP_LINUX 1
#endif

/* The distribution's version, a C string: setup.py passes it from
 * src/spatialhub/utils/profiling/_version.py (the one place it is written), so
 * the native core states the version it was built as (_native.__version__, the
 * environment record) and the package can refuse a stale in-place build. */
#ifndef SHP_VERSION
#error "SHP_VERSION is not defined: build through setup.py (pip install .), which reads it from _version.py"
#endif

#define SHP_MIB (1024.0 * 1024.0)
#define SHP_MAX_CUDA_DEVICES 64

/* ======================================================================== */
/* 0. leaves                                                                */
/* ======================================================================== */

/* ---- clock.c ------------------------------------------------------------ */

/* Monotonic time in integer nanoseconds: the clock of time.perf_counter. */
int64_t shp_now_ns(void);
/* Resolution of that clock in ns (clock_getres and friends); 1 if unknown. */
int64_t shp_clock_resolution_ns(void);
/* A short human name of the clock, for the environment record. */
const char *shp_clock_name(void);
/* CPU time of the whole process (all threads, user + system) in integer ns:
 * the clock of time.process_time.  0 if the OS refuses (never raises). */
int64_t shp_process_cpu_ns(void);

/* ---- memory.c ----------------------------------------------------------- */

/* Current resident set size in bytes; -1 (no exception) if unavailable. */
int64_t shp_rss_bytes(void);

/*
 * A peak-RSS window.  Opened before warm-up, closed after the timed loop.
 * On Linux the kernel's high-water mark is reset when a window opens; windows
 * may nest or overlap (re-entrant or threaded benchmarks), so before any reset
 * the current HWM is folded into every open window, and each window's peak is
 * exact for the process.  Where the reset is impossible, `method` is
 * SHP_PEAK_SAMPLED and the caller feeds samples with shp_window_sample().
 */
typedef enum { SHP_PEAK_OFF = 0, SHP_PEAK_HWM = 1, SHP_PEAK_SAMPLED = 2 } shp_peak_method;

typedef struct shp_hwm_node shp_hwm_node;   /* memory.c: the shared part, on the heap */

/* The opener's handle: only its own benchmark reads it, so it may live on a
 * C stack that a greenlet switch moves; what other windows update (the peak)
 * is in the node, which never moves. */
typedef struct shp_hwm_window {
    shp_hwm_node *node;       /* NULL once closed, or when it could not be made */
    shp_peak_method method;   /* fixed when opened */
} shp_hwm_window;

/* Open a window (never fails: falls back to sampling, or OFF if no RSS or
 * no memory for the node).  The list of open windows is process-wide (the
 * mark is) and survives fork(): a child keeps the forking thread's windows
 * open; another thread's become untracked there (closing one gives 0) and
 * are freed when closed.  Hold the GIL. */
void shp_window_open(shp_hwm_window *w);
/* Fold one RSS sample into a SAMPLED window; cheap, no Python calls. */
void shp_window_sample(shp_hwm_window *w);
/* Close a window and return peak - baseline in bytes (>= 0). Always call. */
int64_t shp_window_close(shp_hwm_window *w);
/* "hwm" / "sampled" / "off" */
const char *shp_peak_method_name(shp_peak_method m);
/* Test hook: when set, the HWM reset is reported as unavailable. */
extern int shp_force_sampled_rss;
/* The process's peak RSS in bytes, including what it was before this
 * module reset the kernel's record (which cannot be restored); -1 (no
 * exception) if unknown.  Reads /proc: not for a timed region. */
int64_t shp_process_peak_rss_bytes(void);

/* ---- dynlib.c: the platform's loader (no GIL needed, no exception) ------ */

#define SHP_CUDA_ENV "SPATIALHUB_LIBCUDA"
#if defined(SHP_WINDOWS)
#define SHP_CUDA_DEFAULT_LIB "nvcuda.dll"
#else
/* The driver's runtime name; the bare libcuda.so is the toolkit's stub. */
#define SHP_CUDA_DEFAULT_LIB "libcuda.so.1"
#endif
#if !defined(SHP_MACOS)
/* Load a library (an override is loaded as named, the default from the
 * system only); NULL with the reason in err. */
void *shp_dl_open(const char *path, int is_override, char *err, size_t errsize);
/* A symbol's address, NULL if absent. */
void *shp_dl_sym(void *lib, const char *name);
void shp_dl_close(void *lib);
/* SPATIALHUB_LIBCUDA into buf: 1 if set and non-empty, 0 if not, -1 if it
 * does not fit (never silently replaced by the default). */
int shp_cuda_override(char *buf, size_t size);
#endif

/* ---- rusage.c ----------------------------------------------------------- */

/* Counters of the calling thread since it started. */
typedef struct {
    int64_t minflt, majflt;   /* minor / major page faults */
    int64_t nvcsw, nivcsw;    /* voluntary / involuntary context switches */
    int ok;                   /* 0: not available on this platform (all zero) */
} shp_rusage;

/* Read them (getrusage(RUSAGE_THREAD) on Linux): 1 read, 0 not available.
 * No Python calls, no exception; needs no GIL. */
int shp_rusage_thread(shp_rusage *out);

/* ---- mallocstate.c ------------------------------------------------------ */

/* The effective mmap threshold of this process's malloc: the smallest
 * request (bytes, a page multiple) glibc would serve with a fresh mmap now,
 * read by probes that leave the threshold as it was.  -1 where unknown
 * (not glibc >= 2.33, or a malloc mallinfo2 does not describe).  No
 * Python calls, no exception. */
int64_t shp_malloc_mmap_threshold(void);
/* Raise the effective threshold to `bytes` (at most 32 MiB) as glibc does
 * itself, by freeing a mapped block of that size (the threshold stays
 * dynamic); never lowers it.  Returns the effective threshold afterwards,
 * -1 where unknown.  No Python calls, no exception. */
int64_t shp_malloc_raise_threshold(int64_t bytes);

/* Per-iteration page faults above which a result warns of allocator state. */
#define SHP_FAULTS_WARN 256.0
/* A median under this many times the harness's own floor is overhead-dominated. */
#define SHP_OVERHEAD_FACTOR 100.0
/* A median under this many times the clock's resolution: the timer is coarse for it. */
#define SHP_COARSE_TIMER_FACTOR 20.0
/* host_share above this: launch-bound (the GPU had little left when the call returned). */
#define SHP_LAUNCH_BOUND 0.8

/* ---- perfctr.c: the CPU's counters (no Python calls, no exception) ----- */

enum { SHP_CTR_INSTRUCTIONS, SHP_CTR_CYCLES, SHP_N_COUNTERS };

/* One group of counters of the calling thread, user space only. */
typedef struct {
    int fd[SHP_N_COUNTERS];   /* -1: not open */
    int slot[SHP_N_COUNTERS]; /* position of each in the group's read */
    int leader, n;
    unsigned want;            /* bits 1 << SHP_CTR_* */
} shp_perfctr;

/* Open the counters in `want` (disabled).  0, or -1 with the reason in `why`
 * (no PMU, refused, not Linux); nothing is left open then. */
int shp_perfctr_open(shp_perfctr *c, unsigned want, char *why, size_t whysize);
/* Reset and enable the group: 0, or -1. */
int shp_perfctr_start(shp_perfctr *c);
/* Disable the group and read it into out[SHP_CTR_*]: 0, or -1 with the
 * reason in `why` (a read that failed, a group multiplexed with other users:
 * never scaled). */
int shp_perfctr_stop(shp_perfctr *c, double out[SHP_N_COUNTERS], char *why, size_t whysize);
void shp_perfctr_close(shp_perfctr *c);
/* Test hook: software clocks stand in for the hardware events. */
extern int shp_perfctr_software;

/* ---- callgrind.c: instruction counts under valgrind --------------------- */

#define SHP_CALLGRIND_ENV "SPATIALHUB_CALLGRIND_DIR"

typedef struct {
    int under_valgrind;       /* valgrind's preload library is in this process */
    int on;                   /* ... and SHP_CALLGRIND_ENV names the dump folder */
    long dumps;               /* dumps made so far (callgrind numbers them 1, 2, ...) */
    char dir[2048];
} shp_callgrind;

/* The timed call: func(*args) through vectorcall, its result released.
 * Callgrind collects inside it only (--toggle-collect).  0, or -1 with the
 * function's exception. */
int shp_counted_call(PyObject *func, PyObject *const *args, size_t nargsf, PyObject *kwnames);
/* Markers callgrind acts on (--zero-before, --dump-after); no-ops otherwise. */
void shp_cg_zero_point(void);
void shp_cg_dump_point(void);
/* Read the environment once (module init). Never fails. */
void shp_cg_init(shp_callgrind *cg);
/* After shp_cg_dump_point(): that dump's total (instructions collected since
 * the zero point) into *ir; the file is removed.  0, or -1 with RuntimeError. */
int shp_cg_collect(shp_callgrind *cg, double *ir);

/* ---- cuda.c: the driver table ------------------------------------------ */

/* Just enough of the driver ABI to dlopen it: opaque handles and ints. */
typedef int shp_CUresult;
typedef int shp_CUdevice;
typedef struct shp_CUctx_st *shp_CUcontext;
typedef struct shp_CUstream_st *shp_CUstream;
typedef struct shp_CUevent_st *shp_CUevent;
typedef unsigned long long shp_CUdeviceptr;   /* 64-bit in the _v2 ABI */

typedef struct {
    void *lib;                 /* dlopen / LoadLibrary handle, NULL if not loaded */
    int load_state;            /* 0 not tried, 1 ready, -1 unavailable */
    shp_CUresult init_result;  /* result of cuInit(0) (0 = CUDA_SUCCESS) */
    char why[256];             /* when unavailable: the reason, for messages */
    int driver_version;        /* cuDriverGetVersion, 0 if unknown */
    int device_count;
    /* required */
    shp_CUresult (*cuInit)(unsigned int);
    shp_CUresult (*cuDeviceGetCount)(int *);
    shp_CUresult (*cuDeviceGet)(shp_CUdevice *, int);
    shp_CUresult (*cuCtxGetCurrent)(shp_CUcontext *);
    shp_CUresult (*cuCtxPushCurrent)(shp_CUcontext);      /* _v2 */
    shp_CUresult (*cuCtxPopCurrent)(shp_CUcontext *);     /* _v2 */
    shp_CUresult (*cuDevicePrimaryCtxRetain)(shp_CUcontext *, shp_CUdevice);
    shp_CUresult (*cuDevicePrimaryCtxRelease)(shp_CUdevice); /* _v2 */
    shp_CUresult (*cuCtxSynchronize)(void);
    shp_CUresult (*cuMemGetInfo)(size_t *, size_t *);     /* _v2 */
    /* optional: missing ones degrade gracefully */
    shp_CUresult (*cuDriverGetVersion)(int *);
    shp_CUresult (*cuDeviceGetName)(char *, int, shp_CUdevice);
    shp_CUresult (*cuCtxGetDevice)(shp_CUdevice *);
    shp_CUresult (*cuGetErrorName)(shp_CUresult, const char **);
    shp_CUresult (*cuGetErrorString)(shp_CUresult, const char **);
    /* optional, for GPU time and cache="cold" (cudatime.c); ABI names checked
     * against cuda.h: only cuEventDestroy and the allocation calls are versioned */
    shp_CUresult (*cuEventCreate)(shp_CUevent *, unsigned int);
    shp_CUresult (*cuEventRecord)(shp_CUevent, shp_CUstream);
    shp_CUresult (*cuEventElapsedTime)(float *, shp_CUevent, shp_CUevent);
    shp_CUresult (*cuEventDestroy)(shp_CUevent);                    /* _v2 */
    shp_CUresult (*cuStreamSynchronize)(shp_CUstream);
    shp_CUresult (*cuDeviceGetAttribute)(int *, int, shp_CUdevice);
    shp_CUresult (*cuMemAlloc)(shp_CUdeviceptr *, size_t);          /* _v2 */
    shp_CUresult (*cuMemFree)(shp_CUdeviceptr);                     /* _v2 */
    shp_CUresult (*cuMemsetD8Async)(shp_CUdeviceptr, unsigned char, size_t, shp_CUstream);
    shp_CUresult (*cuDeviceGetPCIBusId)(char *, int, shp_CUdevice);
    /* primary contexts this module retained, released at module teardown */
    shp_CUcontext primary[SHP_MAX_CUDA_DEVICES];
    /* serialises loading and retaining (which run without the GIL); made at
     * the first use, under the GIL; never waited for with the GIL held */
    PyThread_type_lock mu;
} shp_cuda;

/* ---- NVML table (nvml.c) ------------------------------------------------ */

typedef int shp_nvmlReturn;
typedef struct shp_nvmlDevice_st *shp_nvmlDevice;

typedef struct {
    void *lib;
    int load_state;            /* 0 not tried, 1 ready, -1 unavailable */
    char why[256];
    void *lock;                /* PyThread_type_lock around the load */
    /* required */
    shp_nvmlReturn (*nvmlInit)(void);                                        /* _v2 */
    shp_nvmlReturn (*nvmlShutdown)(void);
    shp_nvmlReturn (*nvmlDeviceGetHandleByIndex)(unsigned int, shp_nvmlDevice *); /* _v2 */
    /* optional: each missing one makes its readings "not available" */
    shp_nvmlReturn (*nvmlDeviceGetHandleByPciBusId)(const char *, shp_nvmlDevice *); /* _v2 */
    shp_nvmlReturn (*nvmlDeviceGetClockInfo)(shp_nvmlDevice, int, unsigned int *);
    shp_nvmlReturn (*nvmlDeviceGetClocksEventReasons)(shp_nvmlDevice, unsigned long long *);
    shp_nvmlReturn (*nvmlDeviceGetTemperature)(shp_nvmlDevice, int, unsigned int *);
    shp_nvmlReturn (*nvmlDeviceGetPowerUsage)(shp_nvmlDevice, unsigned int *);
    shp_nvmlReturn (*nvmlDeviceGetComputeRunningProcesses)(shp_nvmlDevice, unsigned int *, void *);
    int process_info_size;     /* 24 for the _v3 / _v2 layout, 16 for the first */
} shp_nvml;

/* ---- module state (defined here so that leaves can take it) ------------- */

struct shp_hwm_window;

/* What a benchmark call can find doubtful about its figures (warn.c): each a
 * subclass of BenchmarkWarning, said at most once per call. */
typedef enum {
    SHP_CAUSE_NOISY, SHP_CAUSE_MULTIMODAL, SHP_CAUSE_DRIFTING, SHP_CAUSE_BUSY,
    SHP_CAUSE_LAUNCH_BOUND, SHP_CAUSE_OVERHEAD, SHP_CAUSE_PAGE_FAULTS, SHP_CAUSE_WARMUP,
    SHP_CAUSE_COARSE_TIMER, SHP_CAUSE_GPU_CLOCK, SHP_CAUSE_THROTTLED, SHP_CAUSE_SHARED_GPU,
    SHP_CAUSE_NO_SYNC, SHP_CAUSE_NO_VRAM, SHP_CAUSE_NO_GPU_TIME,
    SHP_CAUSE_NO_COUNTERS,      /* counters= asked for what this machine cannot count */
    SHP_N_CAUSES
} shp_cause;

/* What a call diagnosed as it ran: causes (bits of shp_cause) and the numbers
 * behind them, which go on the warning's attributes.  Start zeroed; always
 * end with shp_diag_emit or shp_diag_clear (warn.c). */
typedef struct {
    unsigned causes;
    int busy_known;      /* the machine's load was read (busy or not) */
    PyObject *attrs;     /* dict str -> value, or NULL */
} shp_diag;

typedef struct {
    PyTypeObject *stats_type;       /* BenchmarkStats */
    PyTypeObject *gpumem_type;      /* GPUMemoryInfo */
    PyTypeObject *comparison_type;  /* Comparison */
    PyTypeObject *cuda_sync_type;   /* CudaSync (what get_cuda_sync_fn returns) */
    PyObject *warning;              /* BenchmarkWarning (UserWarning) */
    PyObject *interrupted;          /* BenchmarkInterrupted (KeyboardInterrupt) */
    PyObject *noop;                 /* native no-op used to measure overhead */
    PyObject *env_static;           /* cached part of the environment dict */
    PyTypeObject *node_type;        /* ProfileNode */
    PyTypeObject *profiler_type;    /* ProfilerCore (HierarchicalProfiler's base) */
    PyTypeObject *timer_type;       /* Timer */
    PyTypeObject *frame_type;       /* _ScopeEntry (scopeframe.c; not in the namespace) */
    PyObject *default_profiler;     /* where Timer(profiler=None) records, or NULL */
    double overhead_ns[2];          /* harness floor per sync kind; <0 unmeasured */
    /* this machine's calibrated between-run spread (std of log run medians)
     * and its degrees of freedom, set by the package from the user's cache
     * (calibrate.py); < 0: none, SHP_ASSUMED_RUN_SPREAD is used */
    double machine_spread, machine_spread_df;
    /* machine preflight (env.c): the last /proc/stat reading and what it gave */
    double cpu_busy_prev, cpu_total_prev, self_cpu_prev;   /* clock ticks; <0 none yet */
    double others_share;            /* last measured share of the CPUs others used; NaN */
    shp_cuda cuda;
    shp_nvml nvml;
    /* warnings (warn.c) */
    PyObject *cause_class[SHP_N_CAUSES];   /* NoisyWarning, ... (BenchmarkWarning's subclasses) */
    PyObject *combined_classes;     /* dict: cause mask -> the class of several causes */
    PyObject *package_dir;          /* str: this package's directory + separator, or NULL */
    int busy_said;                  /* the busy machine was said and has not cleared since */
    Py_ssize_t suppressed[SHP_N_CAUSES];   /* repeats not said, per cause */
    /* instruction counts (callgrind.c, counters.c) */
    shp_callgrind cg;
    double counter_floor[2][SHP_N_COUNTERS];   /* the loop's own count per iteration, per
                                                  sync kind (as overhead_ns); <0 unmeasured */
} shp_state;

/* The module definition (module.c); data, so reading it calls nothing. */
extern struct PyModuleDef shp_module_def;

/* The state of the module that defined `type` (or one of its bases), or
 * NULL with an exception set.  Inline so that the type layers reach the
 * module state without depending on module.c. */
static inline shp_state *
shp_state_from_type(PyTypeObject *type)
{
#if PY_VERSION_HEX >= 0x030B0000
    PyObject *m = PyType_GetModuleByDef(type, &shp_module_def);
    return m ? (shp_state *)PyModule_GetState(m) : NULL;
#else
    /* Subclasses defined in Python have no module: walk to our base. */
    PyObject *mro = type->tp_mro;
    for (Py_ssize_t i = 0; mro && i < PyTuple_GET_SIZE(mro); i++) {
        PyTypeObject *t = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        if (!(t->tp_flags & Py_TPFLAGS_HEAPTYPE))
            continue;
        PyObject *m = PyType_GetModule(t);
        if (m == NULL) {
            PyErr_Clear();
            continue;
        }
        if (PyModule_GetDef(m) == &shp_module_def)
            return (shp_state *)PyModule_GetState(m);
    }
    PyErr_SetString(PyExc_TypeError, "type does not come from spatialhub's native module");
    return NULL;
#endif
}

/* ---- cuda.c: the driver ------------------------------------------------- */

/* Load the driver once (lazily).  Returns 1 ready, 0 unavailable (reason in
 * st->cuda.why; no exception), never raises. */
int shp_cuda_load(shp_state *st);

/*
 * What the harness syncs: the context current on the calling thread when it
 * belongs to the wanted device, else that device's retained primary context,
 * pushed around the harness's own calls (never a new context).
 */
typedef struct {
    int ordinal;              /* device ordinal, >= 0 */
    int explicit_ordinal;     /* the label named the ordinal */
    shp_CUcontext primary;    /* retained primary context of `ordinal` */
} shp_cuda_target;

/* Resolve a target for `ordinal` (-1: current context's device, else 0).
 * -1 with RuntimeError (saying: pass sync_fn or use device="CPU") when no
 * driver or no such device; ValueError when the ordinal is out of range. */
int shp_cuda_target_init(shp_state *st, int ordinal, shp_cuda_target *t);

/* Synchronise the target's context.  Needs no GIL; returns the CUresult. */
shp_CUresult shp_cuda_sync_nogil(shp_state *st, const shp_cuda_target *t);

/* Device memory of the target's device in bytes.  Needs no GIL. */
shp_CUresult shp_cuda_meminfo_nogil(shp_state *st, const shp_cuda_target *t,
                                    size_t *free_b, size_t *total_b);

/* Run fn(&st->cuda, arg) with the target's context current: the thread's
 * own when it fits, else the primary context pushed around the call and
 * popped after it (also after a failure).  Needs no GIL; fn must not touch
 * Python.  Returns fn's CUresult, or the binding's when that failed. */
typedef shp_CUresult (*shp_cuda_bound_fn)(const shp_cuda *c, void *arg);
shp_CUresult shp_cuda_call_nogil(shp_state *st, const shp_cuda_target *t, shp_cuda_bound_fn fn,
                                 void *arg);

/* Set RuntimeError "<what>: CUDA_ERROR_X (code): description"; returns -1. */
int shp_cuda_raise(shp_state *st, shp_CUresult rc, const char *what);

/* cudafork.c.  Module exec: register (os.register_at_fork) the child handler that marks
 * CUDA unavailable in a fork child when the parent had started the driver
 * (or was starting it), abandoning a driver lock held by a thread the child
 * lacks.  Holds the module weakly.  0, or -1 with an exception. */
int shp_cuda_register_at_fork(PyObject *module);

/* Release retained primary contexts.  The driver stays loaded once cuInit
 * succeeded: it runs threads and exit hooks of its own. */
void shp_cuda_teardown(shp_state *st);

/* ---- args.c ------------------------------------------------------------- */

/*
 * One rule set (args.c's header): integers by __index__ but not bool; reals
 * int / float / __float__ / __index__ but not bool or str; flags by truth
 * value; strings must be str.  `owner` names the function ("f()": messages
 * read "f(): param must be ...") or the type ("BenchmarkStats": "Type.param
 * must be ..."); NULL for the bare parameter name.
 */

/* Set TypeError "<owner> <param> must be <want>, not <type of got>"; -1. */
int shp_arg_type_error(const char *owner, const char *param, const char *want, PyObject *got);
/* Set ValueError "<owner> <param> must be <want>, got <repr of got>"; -1. */
int shp_arg_value_error(const char *owner, const char *param, const char *want, PyObject *got);
/* An integer: new reference to an int, or NULL with TypeError. */
PyObject *shp_arg_index(PyObject *v, const char *owner, const char *param);
/* An integer into *out; ValueError outside Py_ssize_t; 0 / -1. */
int shp_arg_ssize(PyObject *v, const char *owner, const char *param, Py_ssize_t *out);
/* 1 if v is a real number by the rule above, else 0; never fails. */
int shp_arg_is_real(PyObject *v);
/* A real number into *out (its __float__ may raise); 0 / -1. */
int shp_arg_real(PyObject *v, const char *owner, const char *param, double *out);
/* bool(v) into *out; 0 / -1 (its __bool__ / __len__ may raise). */
int shp_arg_flag(PyObject *v, int *out);
/* What a scope measures of host memory (Timer track_memory, a profiler's
 * track_ram): nothing; RSS at enter and at exit (the default: reads of an
 * open /proc/self/statm, scoperss.c, the kernel's peak record untouched); or
 * the true peak through a high-water-mark window (memory.c), opt-in. */
typedef enum { SHP_MEM_OFF = 0, SHP_MEM_RSS = 1, SHP_MEM_PEAK = 2 } shp_mem_mode;
/* A memory mode: the str "peak", or any other object by its truth value
 * (True: SHP_MEM_RSS); any other str is a ValueError naming the choices.
 * 0 / -1. */
int shp_arg_memory(PyObject *v, const char *owner, const char *param, int *out);
/* v as one name or an iterable of names, each one of names[0..n): pick(ctx,
 * its index) for each, in order.  0, or -1 with TypeError (v neither a str
 * nor an iterable, or an item not a str) or ValueError (a name not among
 * names), both saying `choices` -- or the error of the user's iterator. */
int shp_arg_names(PyObject *v, const char *owner, const char *param, const char *choices,
                  const char *const *names, int n, void (*pick)(void *ctx, int index), void *ctx);
/* The mode as users pass it: False, True or 'peak'.  New reference. */
PyObject *shp_memory_mode_obj(int mode);
/* A str (or None when none_ok: *out = NULL); *out borrowed; 0 / -1. */
int shp_arg_str(PyObject *v, const char *owner, const char *param, int none_ok, PyObject **out);
/* A CUDA stream handle: an int (a raw CUstream), or an object with
 * __cuda_stream__() returning (version, handle) or a cuda_stream attribute;
 * may run the object's code.  0 / -1. */
int shp_arg_cuda_stream(PyObject *v, const char *owner, const char *param, void **out);
/* A callable (or None when none_ok: *out = NULL); *out borrowed; 0 / -1. */
int shp_arg_callable(PyObject *v, const char *owner, const char *param, int none_ok,
                     PyObject **out);

/* The signature of a METH_FASTCALL | METH_KEYWORDS entry point. */
typedef struct {
    const char *fname;          /* for messages: "compare_benchmarks" */
    const char *const *names;   /* every parameter, positional ones first */
    int n;                      /* number of names */
    int npos;                   /* the first npos may be given positionally */
    int nrequired;              /* the first nrequired are required */
    int pass_extra;             /* extra positionals and unknown keywords are
                                 * the callee's (benchmark_callable's func) */
} shp_argspec;

/*
 * The one keyword parser: out[0..spec->n) receives borrowed references
 * (NULL where absent).  TypeError in CPython's own words for too many
 * positionals, an unknown keyword, a repeated or a missing argument.
 */
int shp_args_parse(const shp_argspec *spec, PyObject *const *args, Py_ssize_t nargs,
                   PyObject *kwnames, PyObject **out);
/* The same for an (args tuple, kwargs dict or NULL) pair, as tp_new and
 * tp_init receive them.  out[] items are borrowed from args and from *hold:
 * a new reference (NULL when no keywords) that keeps the keyword values
 * alive whatever happens to kwargs; the caller releases it (Py_XDECREF) once
 * done with out[].  On failure *hold is NULL. */
#define SHP_ARGS_MAX 16
int shp_args_parse_tuple(const shp_argspec *spec, PyObject *args, PyObject *kwargs,
                         PyObject **out, PyObject **hold);
/* (args, kwargs) as a vectorcall stack: stack[0..nargs+nkw) borrowed from
 * args and from *hold (as above), *kwnames a new tuple of the keywords (NULL
 * when none).  More than `cap` arguments: TypeError "fname() takes at most
 * cap arguments".  0 / -1 (nothing to release then). */
int shp_args_unpack(const char *fname, PyObject *args, PyObject *kwargs, PyObject **stack,
                    Py_ssize_t cap, PyObject **kwnames, PyObject **hold);
/* Index of keyword `key` in spec->names, or -1 (never fails). */
int shp_args_find(const shp_argspec *spec, PyObject *key);
/* 1 if shp_args_parse took keyword `key` (with nargs positionals), else 0
 * (pass_extra: it is the callee's).  Never fails. */
int shp_args_takes(const shp_argspec *spec, PyObject *key, Py_ssize_t nargs);

/* ---- instattrs.c ------------------------------------------------------- */

/* A subclass instance's own attributes (its __dict__ and __slots__, via
 * `copyreg`'s _slotnames), as a new dict; empty for an instance of the base
 * type.  Runs user code (getattr).  New reference, or NULL with an exception. */
PyObject *shp_instance_attrs(PyObject *self, PyObject *copyreg);

/* ---- device.c ----------------------------------------------------------- */

typedef enum {
    SHP_DEV_CPU = 0, SHP_DEV_CUDA = 1, SHP_DEV_MPS = 2,
    SHP_DEV_OTHER = 3         /* an accelerator we cannot sync ("gpu", "xpu", ...) */
} shp_device_kind;

typedef struct {
    shp_device_kind kind;
    int ordinal;              /* CUDA: the ordinal after ':', -1 when none */
    PyObject *label;          /* borrowed: the label parsed (for messages) */
} shp_device;

/*
 * Read a device label (a str): a label containing "cuda" (any case) is
 * CUDA, "cuda:N" names ordinal N; "mps" / "mps:..." is MPS; "gpu", "xpu",
 * "rocm", "npu" and the other names of device.c's list (any case, ":N"
 * allowed) are SHP_DEV_OTHER; anything else the CPU.  0, or -1 with ValueError for a malformed ordinal ("cuda:x"; *out
 * then still says CUDA) or the str's UnicodeEncodeError (*out says CPU).
 */
int shp_device_parse(PyObject *label, shp_device *out);

/* ---- notes.c ------------------------------------------------------------ */

/* Attach "note" to exception `exc` (its add_note; before 3.11, where there is
 * usually none, an append to __notes__); keeps the original exception if
 * attaching fails.  Never fails, but a KeyboardInterrupt or SystemExit
 * raised by code it runs (a name's __repr__, an add_note override) is left
 * set: the caller lets it through. */
void shp_add_note(PyObject *exc, const char *fmt, ...);
/* Note fmt (PyUnicode_FromFormat's) on the exception now set, which stays
 * set (normalised, with its traceback) -- or is replaced by a Ctrl-C /
 * SystemExit that arrived while the note was made (its context then).
 * Never fails. */
void shp_note_current(const char *fmt, ...);
/* shp_note_current(fmt, name, phase, i + 1, n), typed: fmt takes %R, %s,
 * %zd, %zd ("benchmark 'f': raised by func in timed iteration 3 of 50"). */
void shp_note_iteration(const char *fmt, PyObject *name, const char *phase, Py_ssize_t i,
                        Py_ssize_t n);

/* ---- dropping an exception that does not matter ------------------------ */

/*
 * Metadata lookups, a broken stderr, a half-imported module: the harness
 * ignores their failures so that they never cost the user a measurement.
 * Only failures, i.e. subclasses of Exception, are dropped.  Every other
 * BaseException is a request to stop this code -- KeyboardInterrupt,
 * SystemExit, GeneratorExit, greenlet's GreenletExit, gevent.Timeout,
 * asyncio's CancelledError -- and lands wherever Python code happens to run
 * (a subprocess of platform.platform(), a stream's write(), a switch point
 * under gevent); clearing it loses the request.  These two are the only way
 * the extension drops an exception that Python code may have raised (static
 * inline: C-API only).
 */

/* 1 if an exception is pending and it is not a subclass of Exception (a
 * BaseException that asks to stop), 0 otherwise.  No Python code runs. */
static inline int
shp_error_is_fatal(void)
{
    return PyErr_Occurred() != NULL && !PyErr_ExceptionMatches(PyExc_Exception);
}

/* Drop the pending exception (if any) unless it is fatal in the sense above.
 * 0: nothing is set now; -1: the fatal exception is still set. */
static inline int
shp_clear_unless_fatal(void)
{
    if (PyErr_Occurred() == NULL)
        return 0;
    if (shp_error_is_fatal())
        return -1;
    PyErr_Clear();
    return 0;
}

/* ---- env.c -------------------------------------------------------------- */

/* What the machine was doing when a benchmark started. */
typedef struct {
    double load1;          /* 1-minute load average; NaN unknown */
    double others_share;   /* share of all CPUs used by other processes since the
                              previous reading (>= 50 ms earlier); NaN unknown */
    int ncpu;              /* online CPUs (0 unknown) */
    int busy;              /* others_share > 25%, or (load1 - 1) / ncpu > 0.5 when unknown */
} shp_preflight;

#define SHP_BUSY_SHARE 0.25
#define SHP_BUSY_LOAD 0.5

/* Take the CPU-time reading the next preflight is measured against (module
 * init).  Never fails, no exception. */
void shp_preflight_mark(shp_state *st);
/* Read the preflight (Linux: /proc/stat, getloadavg; elsewhere load only or
 * nothing) and take a new mark.  Never fails, no exception. */
void shp_preflight_read(shp_state *st, shp_preflight *out);
/* A new environment dict (cached static part: CPU, governor, turbo, ASLR,
 * isolated CPUs, ...; plus torch if imported, plus the preflight `pf` when
 * not NULL).  NULL with an exception on failure. */
PyObject *shp_env_dict(shp_state *st, const shp_preflight *pf);

/* docstrings.c: help() of benchmark_callable, format_benchmark_table,
 * compare_benchmarks and BenchmarkStats' to_dict / to_json / from_dict, each
 * starting with its text signature ("name($module, ...)\n--\n\n"). */
extern const char shp_doc_benchmark_callable[];
extern const char shp_doc_format_benchmark_table[];
extern const char shp_doc_compare_benchmarks[];
extern const char shp_doc_stats_to_dict[];
extern const char shp_doc_stats_to_json[];
extern const char shp_doc_stats_from_dict[];

/* ======================================================================== */
/* 1. computation                                                           */
/* ======================================================================== */

/* ---- cachecold.c: evicting the CPU's last-level cache --------------------- */

/* Size of the last-level cache of the CPU in bytes and where it came from
 * ("SPATIALHUB_LLC_BYTES" when that is set to a positive integer, "sysfs", "sysconf", "sysctl", "GetLogicalProcessorInformation", or
 * "assumed" with SHP_LLC_ASSUMED_BYTES when nothing answers).  Read once
 * and cached (process-wide: it is a property of the machine).  Never fails. */
#define SHP_LLC_ASSUMED_BYTES (32u << 20)
size_t shp_llc_bytes(const char **source);

/* A buffer that evicts the LLC when written and read: SHP_LLC_EVICT_FACTOR
 * times its size.  Created once per cold-cache run. */
#define SHP_LLC_EVICT_FACTOR 2
#define SHP_LLC_EVICT_MAX ((size_t)1 << 30)   /* 1 GiB at most */
typedef struct {
    unsigned char *buf;
    size_t size;
} shp_llc_evictor;

/* Allocate and touch the buffer (so its pages are resident before any RSS
 * baseline).  0, or -1 with MemoryError. */
int shp_llc_evictor_init(shp_llc_evictor *e);
/* Write every cache line of the buffer, then read it back; the GIL may be
 * released around it (no Python calls).  Never fails. */
void shp_llc_evict(shp_llc_evictor *e);
/* Free the buffer; safe on a zeroed or freed evictor. */
void shp_llc_evictor_free(shp_llc_evictor *e);

/* ---- cudatime.c: GPU time by CUDA events, the device L2 flush ----------- */

/*
 * Per-benchmark GPU instruments on one target and stream.  Events are
 * recorded around each timed call on `stream` (NULL: the legacy default
 * stream); the L2 buffer is memset on that stream before a cold call.
 */
typedef struct {
    shp_CUstream stream;
    shp_CUevent start, end;
    int events;                 /* events created: GPU time is measured */
    shp_CUdeviceptr l2_buf;
    size_t l2_bytes;            /* > 0: the L2 flush is ready */
    unsigned char fill;         /* memset value, changed every flush */
} shp_cuda_timer;

/* Create the two events.  0 and g->events = 1; 0 and g->events = 0 with
 * *why filled (missing entry points, or cuEventCreate failing: the run goes
 * on with wall time alone); never raises.  Takes the GIL as given and
 * releases it around the driver calls. */
int shp_cuda_timer_events(shp_state *st, const shp_cuda_target *t, shp_cuda_timer *g,
                          char *why, size_t why_size);
/* Allocate the L2 flush buffer (L2 size from cuDeviceGetAttribute).  0, or
 * -1 with RuntimeError (cache="cold" was asked for and cannot be given). */
int shp_cuda_timer_l2(shp_state *st, const shp_cuda_target *t, shp_cuda_timer *g);
/* Record the start event.  Needs no GIL; the CUresult. */
shp_CUresult shp_cuda_timer_start_nogil(shp_state *st, const shp_cuda_target *t,
                                        shp_cuda_timer *g);
/* Record the end event, then synchronise the context.  Needs no GIL. */
shp_CUresult shp_cuda_timer_stop_sync_nogil(shp_state *st, const shp_cuda_target *t,
                                            shp_cuda_timer *g);
/* Elapsed ms between the two (both complete after the sync).  No GIL. */
shp_CUresult shp_cuda_timer_elapsed_nogil(shp_state *st, const shp_cuda_target *t,
                                          shp_cuda_timer *g, float *ms);
/* Write the L2 flush buffer on the stream and wait for it.  No GIL. */
shp_CUresult shp_cuda_l2_flush_nogil(shp_state *st, const shp_cuda_target *t, shp_cuda_timer *g);
/* The PCI bus id of a CUDA device ("0000:65:00.0") into buf; 0, or -1
 * (no exception) when the driver cannot say.  Needs no context. */
int shp_cuda_pci_bus_id(shp_state *st, int ordinal, char *buf, int n);
/* Destroy the events and free the buffer (GIL released inside); never
 * fails (a failure at teardown only leaks device memory). */
void shp_cuda_timer_free(shp_state *st, const shp_cuda_target *t, shp_cuda_timer *g);

/* ---- nvml.c: clocks, throttling, temperature, power, per-process memory -- */

#define SHP_NVML_PERIOD_NS 50000000LL   /* at most 20 samples a second */
#define SHP_NVML_CLOCK_MOVE 0.10        /* warn when the SM clock moved > 10% */
/* Throttle reasons that slow a benchmark down (idle, application clocks and
 * display clocks are not slowdowns, and sync boost is a multi-GPU policy). */
#define SHP_NVML_SLOWDOWNS 0xECULL       /* SwPowerCap, HwSlowdown, Sw/HwThermal, PowerBrake */

/* What NVML saw of one device during one benchmark; -1: not available. */
typedef struct {
    shp_nvmlDevice dev;         /* NULL: NVML unavailable for this device */
    const char *why;            /* when dev is NULL: why (static storage) */
    long long clock_start, clock_end, clock_min, clock_max;   /* MHz */
    long long temp_start, temp_end, temp_max;                 /* C */
    long long power_start, power_end, power_max;              /* mW */
    unsigned long long reasons;  /* every throttle reason seen (OR) */
    int reasons_ok;
    Py_ssize_t samples;
    int64_t last_ns;
    /* per-process memory, read at the end */
    long long proc_bytes;        /* this process; -1 unknown */
    Py_ssize_t others;           /* other processes on the device; -1 unknown */
    long long others_bytes;
} shp_nvml_watch;

/* Load NVML once (libnvidia-ml.so.1 / nvml.dll / SPATIALHUB_LIBNVML) and
 * call nvmlInit_v2, with the GIL released around both under a lock.
 * 1 ready, 0 unavailable (reason in st->nvml.why); never raises; call with
 * the GIL held. */
int shp_nvml_load(shp_state *st);
/* Start watching CUDA device `ordinal` (NVML found by its PCI bus id when
 * given, else by index): the first sample.  Never fails (an unavailable
 * NVML leaves w->dev NULL); releases the GIL around the NVML calls. */
void shp_nvml_watch_begin(shp_state *st, shp_nvml_watch *w, int ordinal, const char *pci_bus_id,
                          int64_t now);
/* A sample, unless the last one is under SHP_NVML_PERIOD_NS older than `now`
 * (the caller's clock; force: take it anyway).  Never fails; releases the GIL when it samples. */
void shp_nvml_watch_sample(shp_state *st, shp_nvml_watch *w, int64_t now, int force);
/* The last sample and the per-process memory.  Never fails. */
void shp_nvml_watch_end(shp_state *st, shp_nvml_watch *w);
/* The gpu_telemetry dict of a watch (new reference), or NULL with an error. */
PyObject *shp_nvml_watch_dict(const shp_nvml_watch *w);
/* Names of the reasons in `mask`, comma-separated, into buf. */
void shp_nvml_reason_names(unsigned long long mask, char *buf, size_t n);
/* nvmlShutdown once loaded (module teardown). */
void shp_nvml_teardown(shp_state *st);

/* ---- constants.c: the documented defaults and thresholds ---------------- */

/* Add every default and threshold that docs/ and help texts state to module m
 * as a module constant (_native.ASSUMED_RUN_SPREAD, _native.PAGE_FAULTS_WARN,
 * ...; the list is docs/design.md's "Defaults and thresholds").  The values
 * are the macros the code uses, so a help string formatted from the constant
 * and tests/test_docs_consistency.py cannot drift from them.  0 / -1. */
int shp_constants_add(PyObject *m);

/* ---- summary.c ---------------------------------------------------------- */

typedef struct {
    double mean, std, min, max;
    double median, p50, p90, p95, p99;
    double q1, q3;              /* 25th / 75th percentiles */
    double ci_low, ci_high;     /* 95% CI of the median (order statistics) */
    Py_ssize_t outliers;        /* beyond Tukey's 1.5 IQR fences */
    double autocorr;            /* lag-1 autocorrelation (NaN if undefined) */
    double n_eff;               /* effective sample size the CI's ranks use */
} shp_summary;

/* Lag-1 autocorrelation of x[0..n) around `mean`; NaN if n < 3 or constant. */
double shp_lag1_autocorr(const double *x, Py_ssize_t n, double mean);
/* AR(1) effective sample size n (1 - r) / (1 + r) (at least 2), or n when
 * r1 <= 3 / sqrt(n) (not clearly correlated) or n < 20.  Never fails. */
double shp_effective_n(Py_ssize_t n, double r1);
/*
 * Summarise x[0..n) (n >= 1).  `scratch` must hold n doubles; it is
 * overwritten (order statistics are found by selection in it, x is left
 * untouched).  Percentiles follow NumPy's default method="linear".
 * Never fails.
 */
void shp_summarize(const double *x, Py_ssize_t n, double *scratch, shp_summary *out);

/*
 * Cold start: every call's time in order is warm[0..nwarm) then
 * timed[0..n_timed) (ms).  Returns the number of calls made before the series
 * settled -- the first index whose window of calls has a median within
 * SHP_SETTLE_TOL of the steady state (the median of the last half of the
 * timed calls, at most the last SHP_SETTLE_MAX_TAIL) or within `floor` of it
 * -- or -1 when there are too few timed calls to say (fewer than
 * SHP_SETTLE_MIN_TIMED).  *head receives the median of the first window of
 * timed calls and *steady the steady state (both NaN with -1).  No
 * allocation, never fails; O(SHP_SETTLE_MAX_TAIL + settle * window).
 */
#define SHP_SETTLE_TOL 0.10
#define SHP_SETTLE_MIN_TIMED 20
#define SHP_SETTLE_MAX_TAIL 1000
#define SHP_SETTLE_WARN 0.25   /* the warning: first timed window 25% above steady */
Py_ssize_t shp_settle_calls(const double *warm, Py_ssize_t nwarm, const double *timed,
                            Py_ssize_t n_timed, double floor, double *head, double *steady);
/* The window shp_settle_calls uses for n_timed timed calls. */
Py_ssize_t shp_settle_window(Py_ssize_t n_timed);

/* Only the median and its 95% CI (for adaptive stopping); same contract. */
void shp_median_ci(const double *x, Py_ssize_t n, double *scratch,
                   double *median, double *lo, double *hi);

/* NumPy-linear percentile q in [0, 1] of a[0..n), rearranging a (selection). */
double shp_percentile_inplace(double *a, Py_ssize_t n, double q);
/* Sort a[0..n) ascending in place (introsort; no NaN).  Never fails. */
void shp_sort_inplace(double *a, Py_ssize_t n);

/* 1-based ranks (j, k) of the distribution-free 95% CI of the median:
 * [x_(j), x_(k)] with k = n + 1 - j; j = 1 when n is too small. */
void shp_median_ci_ranks(Py_ssize_t n, Py_ssize_t *j, Py_ssize_t *k);

/* ---- bootstrap.c -------------------------------------------------------- */

/* Medians of a and b, their ratio b/a, and a seeded percentile-bootstrap
 * 95% CI of it (na, nb >= 1).  0, or -1 with MemoryError. */
int shp_compare_samples(const double *a, Py_ssize_t na, const double *b, Py_ssize_t nb,
                        uint64_t seed, Py_ssize_t resamples, double *med_a, double *med_b,
                        double *ratio, double *lo, double *hi);

/* ---- markup.c ----------------------------------------------------------- */

typedef enum { SHP_MD_HEADING, SHP_MD_CELL, SHP_MD_CODE } shp_md_mode;

/* Markdown text that renders as exactly `s` on one line (heading, table
 * cell or code-span content); new reference, or NULL (MemoryError). */
PyObject *shp_md_text(PyObject *s, shp_md_mode mode);
/* `s` as a Markdown code span (fence longer than any backtick run). */
PyObject *shp_md_code_span(PyObject *s);
/* `s` as a bold Markdown table cell that renders as exactly `s` (escaped). */
PyObject *shp_md_bold_cell(PyObject *s);
/* `s` with & < > " as HTML entities. */
PyObject *shp_html_escape(PyObject *s);

/* ---- scoperss.c: the RSS a scope reads at enter and exit --------------- */

/* How old a read an enter may take (ns): see below. */
#define SHP_RSS_SHARE_NS 1000
/* RSS in bytes at a scope's enter that happens at `now_ns` (shp_now_ns): the
 * last enter's or exit's read when it returned at most SHP_RSS_SHARE_NS
 * before (and not after now_ns), else a fresh shp_rss_bytes(), stamped with
 * shp_now_ns() as it returns.  The next frame's enter after this one's exit,
 * a nested scope's enter after its parent's, share one read: the scope's RSS
 * window then opens at most 1 us before its clocks start (docs/memory.md).
 * When the read returned goes to *read_ns unless read_ns is NULL.  -1 (no
 * exception) if unavailable.  Hold the GIL; no Python calls. */
int64_t shp_rss_at_enter(int64_t now_ns, int64_t *read_ns);
/* RSS in bytes at a scope's exit: always a fresh read, kept for the next
 * enter; when it returned goes to *read_ns unless read_ns is NULL.  -1 (no
 * exception) if unavailable.  Hold the GIL; no Python calls. */
int64_t shp_rss_at_exit(int64_t *read_ns);

/* ---- scopedata.c: a scope's bounded data (pure leaf, never fails) ------- */

/*
 * Latency histogram with log-spaced buckets: any percentile it reports is
 * within 1 % of NumPy's method="linear" percentile of the same durations;
 * min, max and count are exact.  Memory grows with the span of durations
 * seen (log-scale), never with their number.  Hold the GIL (PyMem).
 */
typedef struct {
    uint64_t *counts;     /* buckets lo .. lo + len - 1, PyMem; NULL when empty */
    int32_t lo, len;
    uint64_t zeros;       /* durations of 0 ns */
    uint64_t n;           /* every recorded duration, dropped ones included */
    uint64_t dropped;     /* not bucketed: out of memory */
    int64_t min_ns, max_ns;
} shp_hist;

void shp_hist_init(shp_hist *h);
void shp_hist_free(shp_hist *h);
/* Count one duration (negative counts as 0).  Never fails. */
void shp_hist_record(shp_hist *h, int64_t ns);
/* Percentile q in [0, 1] in ns (NumPy "linear" within 1 %); NaN when empty. */
double shp_hist_quantile(const shp_hist *h, double q);

/* One finished scope call, for the Chrome trace export. */
typedef struct {
    int64_t start_ns;     /* shp_now_ns() at enter */
    int64_t dur_ns;
    uint64_t thread;      /* PyThread_get_thread_ident() */
    uint32_t node_id;     /* index in the profiler's node registry */
    uint32_t depth;       /* 1 for a child of the root */
} shp_event;

/* A ring of the last `capacity` events; the oldest make room (counted in
 * `dropped`).  The buffer is allocated at the first push. */
typedef struct {
    shp_event *ev;
    Py_ssize_t capacity, head, count;
    uint64_t dropped;
} shp_ring;

void shp_ring_init(shp_ring *r, Py_ssize_t capacity);
/* Forget every event and free the buffer (capacity kept). */
void shp_ring_clear(shp_ring *r);
/* Append a copy of *e.  Never fails (out of memory: counted as dropped). */
void shp_ring_push(shp_ring *r, const shp_event *e);
/* The i-th oldest event, 0 <= i < r->count; borrowed pointer into the ring. */
const shp_event *shp_ring_at(const shp_ring *r, Py_ssize_t i);

/* ---- verdict.c ---------------------------------------------------------- */

#define SHP_DEFAULT_MARGIN 0.05   /* practical-equivalence margin: 5% */
#define SHP_MAX_BLOCKS 10         /* blocks per run for the between-block spread */
#define SHP_MIN_BLOCK 5           /* samples per block at least */
/* Run-to-run spread (std of log run medians) assumed for a single run when
 * nothing measured it: what separate fresh-process runs of identical code
 * showed on the reference machine (docs/statistics.md, bench_verdicts.py). */
#define SHP_ASSUMED_RUN_SPREAD 0.15
/* The same for the rerun interval of a run that started on a busy machine
 * (machine_busy): fresh-process medians of two workloads on the reference
 * 2-core machine at load average 6-7 spread 22-24% (bench_rerun.py,
 * docs/statistics.md "Rerun interval"); a calibration below it does not
 * narrow a busy run's interval. */
#define SHP_ASSUMED_BUSY_RUN_SPREAD 0.25

/* How uncertain one side's level (the log of its median) is. */
typedef struct {
    Py_ssize_t runs;      /* fresh-process runs pooled (1: a single run) */
    Py_ssize_t blocks;    /* blocks per run (0: too few samples for blocks) */
    double var;           /* variance of the side's log level; NaN: unknown */
    double df;            /* its degrees of freedom; NaN when var is */
    double run_spread;    /* std of the log run medians; NaN when runs < 2 */
    double block_spread;  /* pooled std of the log block medians; NaN if none */
    double slow_spread;   /* single run: std of its slow variation; else NaN */
    double between;       /* single run: the between-run std used (the known
                             spread, else the larger of the slow variation and
                             SHP_ASSUMED_RUN_SPREAD); else NaN */
    int assumed;          /* single run: `between` is the floor spread */
    int known_floor;      /* runs >= 2: the known spread, not the runs', set var */
    int from_runs;        /* var is the spread of the run medians */
    double center;        /* mean of the log run medians (one run: log median) */
    double sampling;      /* sampling variance of the level from the blocks; NaN if none */
    double dfw;           /* the blocks' degrees of freedom (0: no blocks) */
} shp_level;

/* Two-sided 95% quantile of Student's t with df degrees of freedom (df may
 * be fractional or INFINITY; below 1 counts as 1).  Never fails. */
double shp_t975(double df);
/* Blocks a run of n samples is cut into: min(10, n / 5).  Never fails. */
Py_ssize_t shp_block_count(Py_ssize_t n);
/*
 * Level variance of one side: x[0..n) in run order, `sizes` the samples of
 * each of `nruns` runs (NULL: one run), `known_spread` a between-run std of
 * log medians the caller knows (< 0: none), `floor_spread` the one assumed
 * when nothing is known (SHP_ASSUMED_RUN_SPREAD, or this machine's
 * calibrated spread).  0, or -1 with an exception (MemoryError; ValueError
 * when sizes do not add up to n).  A single run counts a between-run term
 * (known, or its slow variation, never below floor_spread); under 15
 * samples that term alone (df infinite).  var stays NaN when a median is <= 0.
 */
int shp_level_estimate(const double *x, Py_ssize_t n, const Py_ssize_t *sizes, Py_ssize_t nruns,
                       double known_spread, double floor_spread, shp_level *out);

/* Where the between-run spread of a rerun interval came from. */
typedef enum {
    SHP_RERUN_NONE,         /* no interval (a median <= 0) */
    SHP_RERUN_RUNS,         /* measured: the spread of the repetitions' medians */
    SHP_RERUN_GIVEN,        /* run_spread= */
    SHP_RERUN_CALIBRATED,   /* this machine's remembered calibration */
    SHP_RERUN_ASSUMED,      /* SHP_ASSUMED_RUN_SPREAD */
    SHP_RERUN_SLOW,         /* the run's own slow variation, above the floor */
} shp_rerun_basis;

typedef struct {
    double lo, hi;          /* where a fresh-process rerun's median falls (95%), ms; NaN: none */
    double spread;          /* the between-run std (log) that went in */
    shp_rerun_basis basis;
} shp_rerun;

/*
 * The rerun interval of x[0..n) (ms, run order; sizes / nruns as
 * shp_level_estimate).  One run: its median times exp(+-q), q the t
 * quantile of twice (this run's and the rerun's) the level variance --
 * the larger of the blocks' sampling variance and the one the CI of the
 * median [ci_lo, ci_hi] implies (NaN: none), plus the between-run spread
 * (known_spread >= 0 as given; else the slow variation, never below
 * floor_spread: a machine's calibrated spread with floor_df degrees of
 * freedom, or SHP_ASSUMED_RUN_SPREAD with floor_df INFINITY, a constant).  Repetitions (nruns >= 2): the prediction interval of one
 * more run median, exp(mean log run median +- t(R-1) s_r sqrt(1 + 1/R)),
 * s_r never below what the blocks' sampling allows nor below known_spread.
 * 0, or -1 with an exception (as shp_level_estimate).
 */
int shp_rerun_interval(const double *x, Py_ssize_t n, const Py_ssize_t *sizes, Py_ssize_t nruns,
                       double known_spread, double floor_spread, double floor_df,
                       double ci_lo, double ci_hi, shp_rerun *out);
/* The basis as the word results carry ("runs", "given", "calibrated",
 * "assumed", "slow variation"); NULL for SHP_RERUN_NONE. */
const char *shp_rerun_basis_name(shp_rerun_basis b);
/* The interval of a ratio of medians (candidate b / baseline a) widened by
 * both sides' level spreads. */
typedef struct {
    double ratio, lo, hi;   /* the ratio and its interval */
    shp_level a, b;         /* the two sides' level estimates */
    int widened;            /* 0: too few samples, [lo, hi] is the bootstrap's */
} shp_interval;

/*
 * Widen the bootstrap interval [blo, bhi] of `ratio` (from the medians of
 * a[0..na) and b[0..nb)) by the between-block / between-run variances of
 * both sides (runs and sizes as shp_level_estimate), with a Welch-
 * Satterthwaite t quantile; the bootstrap's own width is the floor.
 * 0, or -1 with an exception (as shp_level_estimate).
 */
int shp_widen_interval(const double *a, Py_ssize_t na, const Py_ssize_t *sa, Py_ssize_t ra,
                       const double *b, Py_ssize_t nb, const Py_ssize_t *sb, Py_ssize_t rb,
                       double known_spread, double ratio, double blo, double bhi,
                       shp_interval *out);
/*
 * Interleaved rounds: per round r the ratio of medians b_r / a_r; *ratio is
 * their median (on the log scale) and [lo, hi] its distribution-free 95%
 * interval (order statistics; [min, max] below 6 rounds).  The sizes give
 * each round's samples on both sides.  0, or -1 with an exception
 * (MemoryError; ValueError on a median <= 0).
 */
int shp_paired_rounds(const double *a, const double *b, const Py_ssize_t *sizes_a,
                      const Py_ssize_t *sizes_b, Py_ssize_t rounds, double *ratio, double *lo,
                      double *hi);
/* "slower" (lo > 1 and ratio > 1 + margin), "faster" (hi < 1 and ratio <
 * 1 / (1 + margin)), "same" (interval inside the margin) or "inconclusive"
 * (anything else, a NaN included).  A static string; never fails. */
const char *shp_judge(double ratio, double lo, double hi, double margin);
/* One sentence saying why `verdict` was given, into buf (always
 * terminated).  `basis` names what the interval holds, `advice` (may be "")
 * is appended to an undecided verdict.  Never fails. */
void shp_judge_reason(const char *verdict, double ratio, double lo, double hi, double margin,
                      const char *basis, const char *advice, char *buf, size_t size);

/* ---- stability.c -------------------------------------------------------- */

/* Thresholds of the `stability` label (docs/statistics.md, "Stability"). */
#define SHP_STAB_MODES_D 5.0        /* Ashman's D of the two-group split, n >= 200 */
#define SHP_STAB_MODES_D_SMALL 8.5  /* ... for 40 <= n < 200 (no test below 40) */
#define SHP_STAB_DRIFT 0.10         /* |change of the block medians over the run| */
#define SHP_STAB_DRIFT_T 4.0        /* ... and |t| of that slope */
#define SHP_STAB_IQR 0.10           /* IQR / median */
#define SHP_STAB_TAIL 2.0           /* p95 / median: over 5% of calls at 2x the median */
#define SHP_STAB_MODES_N 200        /* from this many samples the mode test uses SHP_STAB_MODES_D */
#define SHP_STAB_MIN_MODE_N 40      /* no mode test below this */
#define SHP_STAB_MIN_FRAC 0.05      /* each group of a split: at least 5% of the samples */
#define SHP_STAB_MODE_SEP 0.10      /* modes 10% apart at least, or they do not matter */
#define SHP_STAB_MIN_NOISY_N 10     /* fewer samples say nothing about the spread */

typedef struct {
    double cv;              /* std / mean; NaN when mean <= 0 */
    double autocorr;        /* lag-1 autocorrelation; NaN when undefined */
    double n_eff;           /* effective sample size (AR(1)); n when r1 is not clearly > 0 */
    double drift;           /* change of the block medians over the run / median; NaN < 3 blocks */
    double drift_t;         /* t statistic of that slope */
    double modes_d;         /* Ashman's D of the best two-group split; NaN untested */
    double mode_low, mode_high;   /* the two groups' medians (ms) */
    double mode_high_frac;  /* share of samples in the upper group */
    int multimodal, drifting, noisy;
    const char *label;      /* "multimodal" > "drifting" > "noisy" > "stable" (static) */
} shp_stability;

/*
 * Diagnose x[0..n) (n >= 1) given its summary `sm` (autocorrelation and
 * n_eff come from it); `scratch` holds n doubles (overwritten).  Never
 * fails: without memory for the mode test its fields stay NaN.
 */
void shp_stability_compute(const double *x, Py_ssize_t n, double *scratch,
                           const shp_summary *sm, shp_stability *out);

/* ======================================================================== */
/* 2. fields.c: table-driven attributes                                     */
/* ======================================================================== */

typedef enum {
    SHP_F_STR,        /* PyObject* str */
    SHP_F_OPT_STR,    /* PyObject* str or None (NULL) */
    SHP_F_DOUBLE,     /* double, any real number */
    SHP_F_OPT_DOUBLE, /* double, NaN means None */
    SHP_F_COUNT,      /* Py_ssize_t >= 0 */
    SHP_F_OPT_COUNT,  /* Py_ssize_t >= 0, -1 means None */
    SHP_F_OPT_BOOL,   /* int: -1 None, 0 False, 1 True */
    SHP_F_OPT_DICT,   /* PyObject* dict or None (NULL) */
    SHP_F_OPT_FLOATS, /* PyObject* tuple of floats or None (NULL); a list in to_dict */
    SHP_F_OPT_COUNTS, /* PyObject* tuple of ints >= 1 or None (NULL) */
} shp_field_kind;

typedef enum { SHP_R_NONE, SHP_R_MS, SHP_R_FPS, SHP_R_MB, SHP_R_RATIO } shp_round;

typedef enum { SHP_SHOW_ALWAYS, SHP_SHOW_IF_SET, SHP_SHOW_NEVER } shp_show;

typedef struct {
    const char *name;
    shp_field_kind kind;
    Py_ssize_t offset;
    shp_round round;          /* rounding applied by to_dict() */
    int required;             /* positional-or-keyword without a default */
    int keyword_only;         /* keyword-only, optional */
    double dflt;              /* default of DOUBLE / COUNT fields */
    shp_show show;            /* in repr */
    const char *doc;
} shp_field;

/* A SHP_F_OPT_COUNTS value (a tuple of ints, or NULL) as a new PyMem array
 * in *out (NULL and *n = 0 for NULL).  0, or -1 with MemoryError. */
int shp_counts_array(PyObject *tuple, Py_ssize_t **out, Py_ssize_t *n);
/* A NULL-name-terminated table per type. */
PyObject *shp_field_get(PyObject *self, const shp_field *f);
int shp_field_set(PyObject *self, const shp_field *f, PyObject *value);
/* Put every field's default into self (no Python calls, never fails). */
void shp_fields_set_defaults(PyObject *self, const shp_field *fields);
/* Rounded (or not) value for to_dict; new reference. */
PyObject *shp_field_export(PyObject *self, const shp_field *f, int rounded);
/* Number of entries in a NULL-name-terminated field table. */
Py_ssize_t shp_fields_count(const shp_field *fields);
/* Fill the fields from args/kwargs like a dataclass __init__. */
int shp_fields_init(PyObject *self, const shp_field *fields, PyObject *args,
                    PyObject *kwargs);
/* Fill `out` (room for count(fields) + count(extra) + 1) with one getset
 * per field (closure = the field), then the `extra` entries, then NULL. */
void shp_fields_fill_getset(const shp_field *fields, const PyGetSetDef *extra,
                            PyGetSetDef *out);
/* Dataclass-style repr over the fields per their `show`. */
PyObject *shp_fields_repr(PyObject *self, const shp_field *fields);
/* 1 equal, 0 not, -1 error: field-wise, NaN == NaN. */
int shp_fields_equal(PyObject *a, PyObject *b, const shp_field *fields);
/* dict of all fields (in table order), rounded per field when `rounded`. */
PyObject *shp_fields_dict(PyObject *self, const shp_field *fields, int rounded);
/* Visit / clear the PyObject* fields. */
int shp_fields_traverse(PyObject *self, const shp_field *fields, visitproc visit, void *arg);
void shp_fields_clear(PyObject *self, const shp_field *fields);
/* Round like Python's round(x, ndigits) into *out; 0 / -1. */
int shp_round_digits(double x, int ndigits, double *out);
/* The short name of a type ("BenchmarkStats"), for messages. */
const char *shp_type_short_name(PyTypeObject *tp);
/* fielddoc.c.  Put into the spec's Py_tp_doc slot the docstring of a type whose __init__
 * is shp_fields_init over `fields`, built in buf[size] (static storage; the
 * type copies it): the text signature "Short(a, b=0.0, *, c=None, <extra_sig>)"
 * that inspect.signature reads (CPython 3.10+), then `intro`, a numpydoc
 * Parameters section naming the fields by kind, `extra_params` (entries for
 * keywords __init__ takes beside the table; or NULL), a Notes section pointing
 * at the attributes, and `outro` (or NULL).  When buf is too small the slot keeps the
 * spec's own doc (no signature: tests/test_help_and_types.py fails).  Call
 * before the type is made; no Python calls, never fails. */
void shp_fields_spec_doc(PyType_Spec *spec, const shp_field *fields, const char *extra_sig,
                         const char *intro, const char *extra_params, const char *outro,
                         char *buf, size_t size);

/* ======================================================================== */
/* 3. table.c, over the result structs                                      */
/* ======================================================================== */

typedef struct {
    PyObject_HEAD
    /* the seed's 13 fields, in order */
    PyObject *name;
    PyObject *device;
    double mean_ms, median_ms, std_ms, p95_ms, min_ms, max_ms, fps;
    Py_ssize_t warmup_iters, timed_iters;
    double ram_delta_mb, vram_delta_mb;
    /* keyword-only additions (NaN / -1 / NULL mean None) */
    double p50_ms, p90_ms, p99_ms, iqr_ms, ci95_low_ms, ci95_high_ms;
    Py_ssize_t outliers;
    double overhead_ms;
    PyObject *ram_peak_method;
    int target_met;
    int machine_busy;           /* -1 None (not measured), 0, 1 */
    Py_ssize_t batch_size;
    double torch_max_allocated_mb;
    shp_stability stab;         /* the full diagnosis (C only: for the warning) */
    PyObject *stability;        /* interned label, or NULL */
    double minor_faults_per_iter, major_faults_per_iter;   /* NaN: not available */
    double vol_ctx_switches_per_iter, invol_ctx_switches_per_iter;
    double cv, autocorr_lag1, drift;
    Py_ssize_t effective_n;
    int multimodal;
    PyObject *run_sizes;        /* tuple of ints, or NULL */
    double run_spread;
    double rerun_low_ms, rerun_high_ms;   /* where a fresh process's median falls (95%) */
    PyObject *rerun_basis;      /* interned word (shp_rerun_basis_name), or NULL */
    PyObject *params;
    PyObject *env;
    /* cold start and cache state (NaN / -1 / NULL mean None) */
    double first_call_ms;
    PyObject *warmup_ms;        /* tuple of floats, the warm-up calls' times */
    Py_ssize_t settle_calls;
    PyObject *cache;            /* "warm" / "cold" */
    /* GPU time by CUDA events (NaN / NULL: not measured) */
    double gpu_median_ms, gpu_p95_ms, host_share;
    double host_median_ms;      /* not a field: quoted by the launch-bound warning */
    PyObject *gpu_samples_ms;   /* tuple of floats */
    PyObject *gpu_telemetry;    /* dict: NVML clocks, throttling, power, processes */
    /* instructions and cycles per timed call (NaN / NULL: not counted) */
    double instructions_per_call, cycles_per_call;
    PyObject *counter_source;   /* "callgrind" / "perf_event" */
    /* raw samples (ms), owned by samples_owner (a capsule that frees them);
     * exposed as read-only NumPy views whose base is that capsule */
    double *samples;
    Py_ssize_t nsamples;
    PyObject *samples_owner;
    PyObject *weakreflist;
} shp_Stats;

/* A result's samples held for a computation that can run Python code (a
 * signal handler, a finalizer) which may replace them: the buffer, its
 * length and its owner as they were when taken.  Never fails. */
typedef struct {
    const double *x;
    Py_ssize_t n;
    PyObject *owner;   /* strong; NULL when no samples */
} shp_samples_ref;

static inline void
shp_samples_take(const shp_Stats *s, shp_samples_ref *r)
{
    r->owner = s->samples != NULL ? Py_XNewRef(s->samples_owner) : NULL;
    r->x = r->owner != NULL ? s->samples : NULL;
    r->n = r->owner != NULL ? s->nsamples : 0;
}

static inline void
shp_samples_release(shp_samples_ref *r)
{
    r->x = NULL;
    r->n = 0;
    Py_CLEAR(r->owner);
}

typedef struct {
    PyObject_HEAD
    double total_mb, free_mb, used_mb;
} shp_GPUMemoryInfo;

/* ---- flags.c ------------------------------------------------------------ */

#define SHP_MAX_FLAGS 8
/* The label of a cause ("noisy", "busy machine", "warm-up too short", ...);
 * a static string. */
const char *shp_cause_label(shp_cause c);
/* The causes read back from a result's fields (its flags: the first seven
 * of shp_cause), as bits.  Runs no Python, never fails. */
unsigned shp_stats_cause_mask(const shp_Stats *s);
/* The doubt labels of a result ("noisy", "multimodal", "drifting", "busy
 * machine", "launch-bound", "overhead-dominated", "page faults"), static
 * strings, in that order; returns how many.  Runs no Python, never fails. */
int shp_stats_flags(const shp_Stats *s, const char *out[SHP_MAX_FLAGS]);
/* The footnote under a table of `items` (a list of BenchmarkStats) whose
 * rows are called `labels` (a list of str, one per row): "Flags: multimodal,
 * busy machine (a, b batch=4); busy machine (c)." -- one clause per
 * distinct set of flags, naming its rows ("all rows" when every row has it;
 * just the flags in a one-row table), escaped
 * for Markdown or HTML ("<p>...</p>"); "" when no row has one.  New str, or
 * NULL with an exception. */
PyObject *shp_flags_footnote(PyObject *items, PyObject *labels, int html);

/* ---- cells.c: one cell's text (new str, or NULL with an exception) ------- */

/* prefix + x with `decimals` decimals + suffix, whatever its length. */
PyObject *shp_cell_num(const char *prefix, double x, int decimals, const char *suffix);
/* Milliseconds as the table prints them: the released module's two
 * decimals, or two significant digits where that would print a nonzero
 * value as 0.00. */
PyObject *shp_cell_ms(double x);
/* A count per call as people read it: "6,389,075" (rounded; "N/A" for NaN). */
PyObject *shp_cell_count(double x);
/* "<mean> +/- <std>", the std at the mean's decimal place. */
PyObject *shp_cell_spread(double mean, double std);
/* Megabytes: "+x.x MB", or "0.0 MB" when not above zero. */
PyObject *shp_cell_mb(double x);
/* 1 if a stored result's device label reads as CUDA (a label
 * benchmark_callable would refuse, "cuda:x", still counts); never fails. */
int shp_cell_is_cuda(PyObject *device);
/* str(s.params[param]), "" when absent (the user's __eq__ / __str__ run). */
PyObject *shp_cell_param(shp_Stats *s, PyObject *param);
/* "baseline" for the baseline itself, else "<ratio>x <verdict>" judged as
 * compare_benchmarks judges (known: the run spread given, or < 0). */
PyObject *shp_cell_baseline(shp_Stats *s, shp_Stats *base, double known, double margin);

/* ---- columns.c: the extra columns columns= asks for ---------------------- */

/* The columns beyond the released layout, by the names columns= takes. */
typedef enum {
    SHP_COL_RERUN, SHP_COL_FIRST_CALL, SHP_COL_P99, SHP_COL_CI95, SHP_COL_MIN, SHP_COL_MAX, SHP_COL_GPU,
    SHP_COL_HOST_SHARE, SHP_COL_CACHE, SHP_COL_INSTRUCTIONS, SHP_COL_CYCLES, SHP_N_COLUMNS
} shp_column_id;

typedef struct {
    int auto_cols;                /* columns="auto": those some row has a figure for */
    int n;
    shp_column_id id[SHP_N_COLUMNS]; /* in the order asked, each once */
} shp_columns;

/* columns= (None, "auto", one name, or an iterable of names) into *x;
 * 0, or -1 with TypeError / ValueError naming the choices (or the error of
 * the user's iterator). */
int shp_columns_parse(PyObject *v, shp_columns *x);
/* columns="auto": add the rerun interval, first call, GPU time and host
 * share, cache state and counts where some row of `items` (a list of
 * BenchmarkStats) has them.  Runs no Python, never fails. */
void shp_columns_resolve_auto(shp_columns *x, PyObject *items);
/* The header of an extra column; a static string. */
const char *shp_column_header(shp_column_id id);
/* One extra cell of row `s` ("N/A" where the row has no figure). */
PyObject *shp_column_cell(shp_Stats *s, shp_column_id id);

/* ---- table.c ------------------------------------------------------------ */

/* The module functions below are METH_FASTCALL | METH_KEYWORDS entry points:
 * a new reference, or NULL with an exception set. */
PyObject *shp_format_benchmark_table(PyObject *module, PyObject *const *args,
                                     Py_ssize_t nargs, PyObject *kwnames);
/* The one-row Markdown / HTML table of one stats object (for Jupyter); a
 * new str, or NULL with an exception set. */
PyObject *shp_stats_markdown(PyObject *stats);
PyObject *shp_stats_html(PyObject *stats);

/* ======================================================================== */
/* 4. Python types                                                          */
/* ======================================================================== */

/* ---- stats.c ------------------------------------------------------------ */

extern PyType_Spec shp_stats_spec;
/* New BenchmarkStats with every field at its default; NULL on error. */
shp_Stats *shp_stats_alloc(shp_state *st);
/* Take ownership of a PyMem_Malloc'd sample buffer (ms), or NULL for none.
 * 0, or -1 with MemoryError (the buffer is freed then). */
int shp_stats_adopt_samples(shp_Stats *s, double *samples, Py_ssize_t n);
/* Copy a 1-D sequence of real numbers into a new PyMem buffer; 0 / -1. */
int shp_samples_from_object(PyObject *obj, double **out, Py_ssize_t *n);
/* advice.c: fill the stability fields of `s`; 0, or -1 with MemoryError. */
int shp_stats_apply_stability(shp_Stats *s, const shp_stability *d);
/* Add to d the cause of a diagnosis kept in s->stab that is not "stable"
 * (multimodal, drifting or noisy, with its numbers; nothing for a result
 * not diagnosed here).  0 / -1. */
int shp_stats_diagnose_stability(const shp_Stats *s, shp_diag *d);
/* advice.c: fill the latency fields of `s` from a summary. */
void shp_stats_apply_summary(shp_Stats *s, const shp_summary *sm);
/* advice.c: fill the rerun interval of `s` (rerun_low_ms, rerun_high_ms,
 * rerun_basis) from its samples, run_sizes and CI (verdict.c's
 * shp_rerun_interval); known_spread >= 0 is the caller's run_spread, else
 * the floor is this machine's calibrated spread (module state) or
 * SHP_ASSUMED_RUN_SPREAD, and at least SHP_ASSUMED_BUSY_RUN_SPREAD when
 * s->machine_busy.  No samples: the fields stay as they are.
 * 0, or -1 with an exception (MemoryError; ValueError when run_sizes do
 * not add up to the samples). */
int shp_stats_apply_rerun(shp_state *st, shp_Stats *s, double known_spread);
/* _apply_rerun(stats, run_spread=None): the above from Python (runner.py,
 * for results pooled from repetitions); returns stats. */
PyObject *shp_apply_rerun_py(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames);

/* ---- warn.c: the one BenchmarkWarning of a benchmark call ---------------- */

void shp_diag_cause(shp_diag *d, shp_cause c);
/* Put value (stolen; NULL: the error of making it) on the warning as `key`;
 * 0 / -1. */
int shp_diag_object(shp_diag *d, const char *key, PyObject *value);
int shp_diag_number(shp_diag *d, const char *key, double v);
void shp_diag_clear(shp_diag *d);
/* Say d as one warning about benchmark `name` (a str, or NULL) whose result
 * is `stats` (or NULL), at the user's frame; nothing when there is no cause
 * (a busy machine already said counts as none).  Clears d.  0 / -1 (a
 * warnings filter of "error" raises here). */
int shp_diag_emit(shp_state *st, shp_diag *d, PyObject *name, PyObject *stats);
/* Module exec: the cause classes on m, the combination cache.  0 / -1. */
int shp_warn_init(PyObject *m, shp_state *st);
/* A new exception class `qualname` ("pkg.Name") deriving from `base`, with
 * the docstring `doc` and the text signature Name(*args) (what
 * inspect.signature reads; tp_doc keeps it, __doc__ is `doc` alone).  New
 * reference, or NULL with an exception. */
PyObject *shp_exception_class(const char *qualname, const char *doc, PyObject *base);
/* suppressed_warnings(): {label: count} of the repeats not said. */
PyObject *shp_suppressed_warnings(PyObject *module, PyObject *unused);
/* Test hook _warning_texts(entry): {class name: text} as said to a user of
 * `entry` ("benchmark_callable", "benchmark_onnx", "profile_model",
 * "compare_callables", "cli"). */
PyObject *shp_warning_texts(PyObject *module, PyObject *entry);
/* Private _warning_class(causes): the class of a warning with this tuple of
 * cause labels (the cause's own, or their cached combination).  New ref. */
PyObject *shp_warning_class(PyObject *module, PyObject *labels);

/* ---- gpumem.c ----------------------------------------------------------- */

extern PyType_Spec shp_gpumem_spec;
/* New GPUMemoryInfo from byte counts; NULL on error. */
PyObject *shp_gpumem_new(shp_state *st, size_t total_b, size_t free_b);

/* ---- compare.c ---------------------------------------------------------- */

extern PyType_Spec shp_comparison_spec;
/* compare_benchmarks(baseline, candidate, *, resamples=2000, seed=0): a new
 * Comparison, or NULL with an exception set. */
PyObject *shp_compare_benchmarks(PyObject *module, PyObject *const *args,
                                 Py_ssize_t nargs, PyObject *kwnames);

/* ---- cudasync.c --------------------------------------------------------- */

/* Device name and driver version into `env` (a dict); 0 / -1. */
int shp_cuda_describe(shp_state *st, const shp_cuda_target *t, PyObject *env);

/* 1 and *t filled if obj is one of our CudaSync callables, else 0. */
int shp_cuda_sync_unwrap(shp_state *st, PyObject *obj, shp_cuda_target *t);

/* The CudaSync type spec and the two module functions: get_cuda_sync_fn()
 * -> a new CudaSync or None (no driver); get_gpu_vram_mb(device_id=0) -> a
 * new GPUMemoryInfo or None; NULL with an exception set on error. */
extern PyType_Spec shp_cuda_sync_spec;
PyObject *shp_get_cuda_sync_fn(PyObject *module, PyObject *unused);
PyObject *shp_get_gpu_vram_mb(PyObject *module, PyObject *const *args,
                              Py_ssize_t nargs, PyObject *kwnames);

/* ---- the scope profiler: scopenode.c, scope.c, scopetimer.c ------------- */

/*
 * The released module's Timer / HierarchicalProfiler / ProfileNode with enter
 * and exit in C.  Calls go one way: scopetimer.c and scope.c -> scopeframe.c
 * -> scopenode.c.  The structs are here because scope.c makes Timers (fills
 * the struct, calls no function of scopetimer.c) and scopetimer.c updates
 * nodes and the ring.
 */
#define SHP_SCOPE_NO_ID UINT32_MAX

/* One scope of the call tree (ProfileNode). */
typedef struct shp_Node {
    PyObject_HEAD
    PyObject *name;          /* str */
    PyObject *children;      /* dict: name -> ProfileNode */
    PyObject *parent;        /* the node this one hangs under; NULL for a root */
    long long calls;
    int64_t wall_ns, cpu_ns; /* totals */
    double peak_ram_mb, peak_vram_mb;
    uint64_t gen;            /* generation of the profiler tree it belongs to */
    uint32_t id;             /* index in the profiler's node registry, or NO_ID */
    uint32_t depth;          /* 0 for a root */
    shp_hist hist;           /* per-call wall times */
    PyObject *weakreflist;
} shp_Node;

/* The profiler core (ProfilerCore, HierarchicalProfiler's base). */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;   /* profiler("stage") without an argument tuple */
    PyObject *root_name;         /* str */
    PyObject *device;            /* str */
    PyObject *root;              /* shp_Node */
    PyObject *var;               /* ContextVar: the calling context's innermost entry
                                  * (shp_Frame; None or unset: the root) */
    PyObject *nodes;             /* list: node registry of this generation, index = id */
    PyTypeObject *node_type;
    PyTypeObject *timer_type;
    PyTypeObject *frame_type;
    char track_ram;              /* shp_mem_mode */
    char track_vram, sync_cuda;
    int device_id;
    uint64_t gen;
    shp_ring ring;
    PyObject *weakreflist;
} shp_Profiler;

/* One `with` scope (Timer). */
typedef struct {
    PyObject_HEAD
    PyObject *name;            /* str */
    PyObject *profiler;        /* shp_Profiler, or NULL: records nowhere */
    PyObject *node;            /* the node entered, NULL before the first enter */
    PyObject *token;           /* the entry (shp_Frame, from shp_scope_push) while entered */
    char track_memory;         /* shp_mem_mode */
    char track_vram, sync_cuda;
    char active, window_open, rss_open, have_cuda;
    int device_id;
    int64_t t0_ns, c0_ns;
    int64_t rss0;              /* SHP_MEM_RSS: RSS at enter, bytes (rss_open) */
    double elapsed_wall, elapsed_cpu, ram_delta_mb, vram_delta_mb;
    size_t vram_used0;
    shp_cuda_target cuda;
    shp_hwm_window win;
    PyObject *weakreflist;
} shp_Timer;

/* scopenode.c.  A new root node named `name` (a str; not checked): new
 * reference, or NULL with MemoryError. */
extern PyType_Spec shp_node_spec;
shp_Node *shp_node_new(PyTypeObject *node_type, PyObject *name);
/* scopenode.c.  A duration in seconds as people read it in a repr: 3
 * significant digits in ns, us, ms or s ("309 us", "1.25 s"), never an
 * exponent; into buf (32 bytes suffice).  No Python calls. */
void shp_format_seconds(double s, char *buf, size_t size);

/* One entry of a scope: what a profiler's ContextVar holds (scopeframe.c). */
typedef struct shp_Frame {
    PyObject_HEAD
    PyObject *node;              /* shp_Node entered */
    struct shp_Frame *prev;      /* the entry it was entered from; NULL: the root */
    PyObject *token;             /* ContextVar token restoring `prev`; NULL once used */
    char abandoned;              /* left elsewhere for good: contexts skip it */
} shp_Frame;

extern PyType_Spec shp_frame_spec;

/* scopeframe.c: the position of each context (thread, task) in a tree. */
/* The calling context's node (new reference) and, when `frame` is not NULL,
 * its innermost live entry (new reference; NULL at the root).  NULL with
 * TypeError when the profiler's ContextVar holds something foreign. */
PyObject *shp_scope_position(shp_Profiler *p, shp_Frame **frame);
/* Enter `name` (a str) in the calling thread's / task's context: returns the
 * new current node and puts the entry in *entry (both new references; the
 * entry restores the previous position, and only in this context), or NULL
 * with an exception set (nothing changed then). */
shp_Node *shp_scope_push(shp_Profiler *p, PyObject *name, PyObject **entry);
/* Leave the scope entered as `entry` (from shp_scope_push): the calling
 * context's position is again the one before it, inner scopes left open
 * included.  In another thread / task than the one that entered: when
 * `closing` (a generator is being closed there: GeneratorExit passes through,
 * the scope can never be left where it was entered) the entry is abandoned
 * and 0 returned; otherwise -1 with RuntimeError and nothing changed (the
 * scope can still be left where it was entered).  -1 on another error. */
int shp_scope_leave(shp_Profiler *p, PyObject *name, PyObject *entry, int closing);
/* An entry that will never be left (its Timer is being freed while entered):
 * the context that entered it continues at the scope's parent.  Never fails. */
void shp_scope_abandon(PyObject *entry);
/* pop(): the calling context moves to the entry it was in before its current
 * one (never above the root).  0 / -1. */
int shp_scope_pop(shp_Profiler *p);

/* scope.c. */
extern PyType_Spec shp_profiler_spec;
/* _set_default_profiler(p): p a ProfilerCore or None; returns None. */
PyObject *shp_set_default_profiler(PyObject *module, PyObject *p);
/* _scope_clock_floor_ns(n): mean ns of the four clock reads one scope makes
 * (bench hook: the floor under any scope profiler measuring CPU time too). */
PyObject *shp_scope_clock_floor(PyObject *module, PyObject *n);

/* scopetimer.c. */
extern PyType_Spec shp_timer_spec;
/* Timer's constructor as a vectorcall; module.c sets it as the Timer type's
 * tp_vectorcall (not inherited: subclasses take tp_new).  New Timer or NULL. */
PyObject *shp_timer_vectorcall(PyObject *type, PyObject *const *args, size_t nargsf,
                               PyObject *kwnames);

/* Fill the specs' getset tables from the field tables.  Called once per
 * process, before any type is made (PyInit__native). */
void shp_stats_prepare_spec(void);
void shp_gpumem_prepare_spec(void);
void shp_comparison_prepare_spec(void);

/* ======================================================================== */
/* 5. the run                                                               */
/* ======================================================================== */

/* ---- sync.c ------------------------------------------------------------- */

typedef enum { SHP_SYNC_NONE = 0, SHP_SYNC_NATIVE = 1, SHP_SYNC_PYTHON = 2 } shp_sync_kind;

/* What synchronises each iteration (resolved once per run). */
typedef struct {
    shp_sync_kind kind;
    PyObject *fn;             /* SHP_SYNC_PYTHON: owned reference */
    shp_cuda_target cuda;     /* SHP_SYNC_NATIVE, and VRAM telemetry */
    int have_cuda;            /* cuda is initialised */
    shp_state *st;
    shp_cuda_timer gt;        /* CUDA events and the L2 flush buffer (cudatime.c) */
    int recording;            /* this sync also records gt.end, just before it */
} shp_sync;

/*
 * Decide the sync from p->fn (the user's sync_fn, owned, or NULL) and the
 * device: our CudaSync becomes the native sync, another callable is called,
 * a CUDA device gets the driver, MPS torch.mps.synchronize (RuntimeError
 * when torch is not imported).  On a CUDA device synced by the user's hook,
 * the driver is still bound for VRAM telemetry when track_vram, or d records
 * why not (and an accelerator label without a sync).  0 / -1;
 * shp_sync_clear() either way.
 */
int shp_sync_resolve(shp_state *st, const shp_device *dev, int track_vram, shp_sync *p,
                     shp_diag *d);
/* Drop the reference p holds, free its events and L2 buffer.  Never fails. */
void shp_sync_clear(shp_sync *p);
/* Call the Python sync; *t_after (if given) is read right after it returns.
 * A non-zero integer result is an error code: RuntimeError.  0 / -1. */
int shp_sync_python(shp_sync *p, int64_t *t_after);

/* The native sync that also records the end event just before it, in the
 * same GIL-released block (p->recording); like shp_sync_call.  0 / -1. */
int shp_sync_native_recording(shp_sync *p, int64_t *t_after);

/* Sync; *t_after (if given) is read right after the sync completes and, for
 * the native sync, before the GIL is taken back.  0 / -1.  Inline: it runs
 * inside the timed region, twice per iteration. */
static inline int
shp_sync_call(shp_sync *p, int64_t *t_after)
{
    switch (p->kind) {
    case SHP_SYNC_NATIVE: {
        shp_CUresult rc;
        int64_t t = 0;
        if (p->recording)
            return shp_sync_native_recording(p, t_after);
        Py_BEGIN_ALLOW_THREADS
        rc = shp_cuda_sync_nogil(p->st, &p->cuda);
        t = shp_now_ns();
        Py_END_ALLOW_THREADS
        if (t_after)
            *t_after = t;
        if (rc != 0)
            return shp_cuda_raise(p->st, rc, "cuCtxSynchronize failed");
        return 0;
    }
    case SHP_SYNC_PYTHON:
        return shp_sync_python(p, t_after);
    default:
        if (t_after)
            *t_after = shp_now_ns();
        return 0;
    }
}

/* ---- progress.c --------------------------------------------------------- */

/* Adaptive stopping never judges target_rel_ci on fewer samples: at n <= 5
 * the median's CI is [min, max] (zero wide at n = 1); at 10 it is
 * [x(2), x(9)].  Exported as _native.ADAPTIVE_MIN_SAMPLES. */
#define SHP_ADAPTIVE_MIN_SAMPLES 10
#define SHP_ADAPTIVE_MAX_SAMPLES 10000000       /* 80 MB of samples */
#define SHP_ADAPTIVE_DEFAULT_TIME_S 30.0        /* max_time_s of an adaptive run */
#define SHP_PROGRESS_PERIOD_NS 100000000LL      /* 0.1 s between redraws */
#define SHP_PROGRESS_DECIDE_NS 500000000LL      /* auto mode decides after 0.5 s */

/* Progress line state. */
typedef struct {
    int mode;                         /* -1 undecided, 0 off, 1 on */
    int drawn;
    int last_len;                     /* bytes of the last line drawn (padding) */
    int64_t last_ns;
    PyObject *name;                   /* borrowed from the run */
} shp_progress;

/* The per-iteration work behind shp_progress_tick.  0, or -1 with a
 * KeyboardInterrupt set (from the stream's own code). */
int shp_progress_update(shp_progress *pl, Py_ssize_t i, Py_ssize_t total, int64_t now,
                        int64_t start);
/* Between timed iterations (i done of total, 0 = open-ended).  0, or -1 with
 * a KeyboardInterrupt set: a Ctrl-C that landed in the stream's write()
 * stops the run like one landing anywhere else.  Inline: the common case
 * (nothing to draw) costs a few compares. */
static inline int
shp_progress_tick(shp_progress *pl, Py_ssize_t i, Py_ssize_t total, int64_t now, int64_t start)
{
    if (pl == NULL || pl->mode == 0)
        return 0;
    if (pl->mode < 0 ? now - start < SHP_PROGRESS_DECIDE_NS
                     : pl->drawn && now - pl->last_ns < SHP_PROGRESS_PERIOD_NS)
        return 0;
    return shp_progress_update(pl, i, total, now, start);
}
/* The closing line, after the loop; may run with an exception set, which is
 * kept untouched (a Ctrl-C / SystemExit from the stream is then dropped).
 * 0, or -1 with a KeyboardInterrupt / SystemExit from the stream when no
 * exception was set. */
int shp_progress_close(shp_progress *pl, Py_ssize_t i, Py_ssize_t total, int64_t elapsed_ns);

/* ---- gcguard.c ---------------------------------------------------------- */

/* Hold the collector off (counted per interpreter: overlapping runs never
 * switch it back on under each other).  0, or -1 with an exception set. */
int shp_gc_hold(void);
/* Undo one shp_gc_hold() of this thread; the last holder restores the state
 * the first one found.  Keeps any exception that is set.  Never fails. */
void shp_gc_release(void);
/* A full collection whatever the collector's switch says, without touching
 * the switch.  Call with no exception set.  0, or -1 with a KeyboardInterrupt
 * / SystemExit set (raised by Python code the collection ran). */
int shp_full_collect(void);
/* Once per interpreter (module init): have forked children drop the
 * collector holds of threads that did not survive the fork.  0 / -1. */
int shp_gc_register_at_fork(void);

/* ---- loop.c ------------------------------------------------------------- */

/* How to make one call and its syncs (prepared once). */
typedef struct {
    PyObject *func;
    PyObject **argv;          /* argv[0] is the PY_VECTORCALL_ARGUMENTS_OFFSET slot */
    Py_ssize_t nargv;         /* positional + keyword values, after argv[0] */
    size_t nargsf;
    PyObject *kwnames;        /* user's keyword names, or NULL */
    shp_sync sync;
    int cold;                 /* cache="cold": evict before every call */
    shp_llc_evictor llc;      /* cold: the CPU's eviction buffer */
    shp_nvml_watch nv;        /* NVML readings of the CUDA device */
    int nv_on;
} shp_call;

/* The sample buffers and what the timed loop reports back. */
typedef struct {
    double *samples, *scratch;
    Py_ssize_t cap, n;
    Py_ssize_t max_iters;
    int target_met;                   /* -1 not adaptive */
    int64_t harness_bytes;            /* RSS our own buffer growth added */
    size_t vram_peak_used;
    int64_t start_ns;
    double *warm;                     /* each warm-up call's time (ns), or NULL */
    double *gpu;                      /* each timed call's GPU time (ns), or NULL */
    double *host;                     /* with gpu: t0 to the call's return (ns) */
} shp_run;

/* Drop every reference the call holds (and its sync's), free the eviction
 * buffer.  Never fails. */
void shp_call_clear(shp_call *p);
/* Allocate (and touch) both sample buffers for `cap` samples; 0, or -1 with
 * MemoryError.  shp_run_free() either way. */
int shp_run_alloc(shp_run *run, Py_ssize_t cap, Py_ssize_t max_iters);
/* Also the buffers of each warm-up call's time (nwarm) and, when `gpu`, of
 * the GPU and host times per timed call; 0, or -1 with MemoryError. */
int shp_run_alloc_extras(shp_run *run, Py_ssize_t nwarm, int gpu);
void shp_run_free(shp_run *run);
/* n warm-up calls, each followed by a sync and timed into run->warm (when
 * allocated); one sync before the first, so the first call's time is its
 * own.  ram / vram: sample memory between calls (ram may be NULL).  0, or
 * -1 with the exception set (a note says which iteration of `name` raised). */
int shp_warmup_loop(shp_call *p, Py_ssize_t n, shp_hwm_window *ram, int vram, shp_run *run,
                    PyObject *name);
/*
 * The timed loop.  Runs at least `min_iters` iterations; with a target
 * (> 0) it goes on until the median's CI is narrow enough, max_time_ns is
 * spent or run->max_iters is reached.  Returns 0, or -1 with the exception
 * set; run->n is the number of completed (stored) iterations either way.
 * pl may be NULL (no progress line).
 */
int shp_timed_loop(shp_call *p, shp_run *run, Py_ssize_t min_iters, double target,
                   int64_t max_time_ns, shp_hwm_window *ram, int vram, shp_progress *pl,
                   PyObject *name);

/* ---- extras.c: cold start, GPU time and NVML on the result ---------------- */

/* What the warnings quote. */
typedef struct {
    double head_ms, steady_ms;        /* first timed window's median, steady state */
} shp_extras;

/* Events (stream: where they are recorded; 0 the default stream) on the
 * native CUDA path, and the L2 flush buffer when cold; d records why when
 * events are not available.  A stream comes only with a call the harness
 * syncs with CUDA (bench.c refuses it otherwise, with the option's note).
 * 0, or -1 with an exception (cold and the flush impossible). */
int shp_extras_setup(shp_state *st, shp_call *p, int cold, shp_CUstream stream, shp_diag *d);
/* The NVML watch of the call's CUDA device, from before the first call. */
void shp_extras_watch_begin(shp_state *st, shp_call *p);
/* first_call_ms, warmup_ms, settle_calls, the gpu_* / host_* fields and
 * gpu_telemetry into s; run->samples are in ms already.  0 / -1. */
int shp_extras_fill(shp_Stats *s, shp_run *run, Py_ssize_t nwarm, double overhead_ns,
                    const shp_call *p, shp_extras *x);
/* Add to d what those figures make doubtful (launch-bound, a too-short
 * warm-up, the GPU's clock, throttling, other processes).  0 / -1. */
int shp_extras_diagnose(const shp_Stats *s, const shp_extras *x, const shp_call *p, shp_diag *d);

/* ---- counters.c: instructions and cycles per call ----------------------- */

typedef struct {
    unsigned want;            /* counters= : bits 1 << SHP_CTR_* */
    int hw;                   /* the CPU's counters are open */
    int cg;                   /* callgrind counts this process's timed calls */
    int from_cg;              /* total[SHP_CTR_INSTRUCTIONS] is callgrind's */
    shp_perfctr pc;
    double total[SHP_N_COUNTERS];   /* over the timed loop; NaN: none */
    char why[256];            /* why a counter asked for is not available */
} shp_counters;

/* counters= : None, a name, or an iterable of "instructions" / "cycles".
 * 0, or -1 with TypeError / ValueError. */
int shp_counters_parse(PyObject *v, unsigned *want);
/* Open what `want` asks for (and note the callgrind mode).  Never fails: a
 * counter that cannot be had leaves its reason in c->why. */
void shp_counters_setup(shp_state *st, shp_counters *c, unsigned want);
/* Just before the timed loop / just after it (outside every timed region).
 * stop: 0; or -1 with an exception: the one already set when it was called
 * (the loop's, kept), else a RuntimeError (callgrind's dump unreadable). */
void shp_counters_start(shp_counters *c);
int shp_counters_stop(shp_state *st, shp_counters *c);
/* The per-call fields of s from n timed calls (floor: the loop's own count
 * per iteration, NaN unknown, for the CPU's counters); what was asked for
 * and is missing goes into d with its reason.  0 / -1. */
int shp_counters_fill(shp_Stats *s, const shp_counters *c, Py_ssize_t n,
                      const double floor[SHP_N_COUNTERS], shp_diag *d);
void shp_counters_close(shp_counters *c);

/* ---- bench.c ------------------------------------------------------------ */

/* benchmark_callable(func, *args, <options>, **kwargs): a new BenchmarkStats,
 * or NULL with an exception set (BenchmarkInterrupted carries .stats). */
PyObject *shp_benchmark_callable(PyObject *module, PyObject *const *args,
                                 Py_ssize_t nargs, PyObject *kwnames);

#endif /* SHP_PROFILING_H */
