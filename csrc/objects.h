/*
 * objects.h -- the data every layer above gpu/ and stats/ shares: the
 * module state, what a call diagnosed (causes and their numbers), and the
 * C structs behind the result types.  Data only: render/ reads the
 * structs, types/ owns their behaviour, run/ fills them.
 */
#ifndef SHP_OBJECTS_H
#define SHP_OBJECTS_H

#include "gpu/gpu.h"
#include "stats/stats.h"

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
    SHP_CAUSE_OVERLOADED,       /* benchmark_load: arrivals outpaced service */
    SHP_CAUSE_NO_REQUESTS,      /* benchmark_load: no arrival fell in the window */
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

struct shp_state {
    PyTypeObject *stats_type;       /* BenchmarkStats */
    PyTypeObject *gpumem_type;      /* GPUMemoryInfo */
    PyTypeObject *comparison_type;  /* Comparison */
    PyTypeObject *cuda_sync_type;   /* CudaSync (what get_cuda_sync_fn returns) */
    PyTypeObject *load_type;        /* LoadStats */
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
    PyObject *words;                /* ContextVar: the remedy words of the interface in use */
    int busy_said;                  /* the busy machine was said and has not cleared since */
    Py_ssize_t suppressed[SHP_N_CAUSES];   /* repeats not said, per cause */
    /* instruction counts (callgrind.c, counters.c) */
    shp_callgrind cg;
    double counter_floor[2][SHP_N_COUNTERS];   /* the loop's own count per iteration, per
                                                  sync kind (as overhead_ns); <0 unmeasured */
};

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

typedef struct {
    PyObject_HEAD
    /* the released dataclass's 13 fields, in order */
    PyObject *name;
    PyObject *device;
    double mean_ms, median_ms, std_ms, p95_ms, min_ms, max_ms, fps;
    Py_ssize_t warmup_iters, timed_iters;
    double ram_delta_mb, vram_delta_mb;
    /* keyword-only additions (NaN / -1 / NULL mean None) */
    double p50_ms, p90_ms, p99_ms, iqr_ms, ci95_low_ms, ci95_high_ms;
    Py_ssize_t outliers;
    double overhead_ms;
    double loop_overhead_ms;    /* awaited calls: the event loop's cost a call; NaN: none */
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

/* A read-only array of a result: x[0..n), owned by `owner` (a capsule that
 * frees it; NULL: no array), exposed as NumPy views whose base is the owner. */
typedef struct {
    double *x;
    Py_ssize_t n;
    PyObject *owner;
} shp_array;

/* The arrays of a run under load, one value per completed request in arrival
 * order (ms). */
typedef enum {
    SHP_LA_ARRIVALS, SHP_LA_LATENCIES, SHP_LA_SERVICE, SHP_LA_LAG, SHP_LA_N
} shp_load_array;

typedef struct {
    PyObject_HEAD
    PyObject *name, *device, *arrival;
    double offered_qps, arrival_qps, achieved_qps;   /* NaN: None */
    double duration_s;
    Py_ssize_t workers, warmup_iters;
    Py_ssize_t requests, completed, dropped, unserved;
    Py_ssize_t seed, max_queue;                      /* -1: None */
    double mean_ms, p50_ms, p90_ms, p99_ms, p999_ms, max_ms;
    double p50_ci_low_ms, p50_ci_high_ms, p99_ci_low_ms, p99_ci_high_ms;
    Py_ssize_t ci_block;                             /* -1: None */
    double service_mean_ms, service_p50_ms, service_p99_ms, service_max_ms;
    double queue_share;
    int overloaded;                                  /* -1 None, 0, 1 */
    double backlog_growth_qps;
    Py_ssize_t backlog_end;
    double lag_p50_ms, lag_p99_ms, lag_max_ms;
    Py_ssize_t batch_size;
    int machine_busy;                                /* -1 None, 0, 1 */
    PyObject *env, *search;                          /* dicts, or NULL */
    shp_array arr[SHP_LA_N];
    PyObject *weakreflist;
} shp_LoadStats;

#endif /* SHP_OBJECTS_H */
