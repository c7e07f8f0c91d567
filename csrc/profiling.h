/*
 * profiling.h -- the one internal header of spatialhub.utils.profiling._native.
 *
 * What lives where:
 *   module.c   module init (multi-phase), method table, module state
 *   bench.c    benchmark_callable: argument checks, warm-up, timed loop
 *   clock.c    monotonic nanosecond clock (the clock of time.perf_counter)
 *   cuda.c     CUDA Driver API loaded at run time: sync, VRAM, device info
 *   memory.c   process RSS and the windowed peak-RSS (high-water mark)
 *   fields.c   table-driven attributes shared by the result types
 *   stats.c    BenchmarkStats and GPUMemoryInfo types
 *   compare.c  compare_benchmarks and the Comparison type
 *   summary.c  order statistics, percentiles, mean/std, CI of the median
 *   table.c    format_benchmark_table (Markdown)
 *   env.c      environment metadata attached to every result
 *
 * Conventions (see STYLE.md): functions that can fail return 0 / -1 (or NULL)
 * with a Python exception set, unless their comment says otherwise.  Times
 * are integer nanoseconds inside the extension; milliseconds only at the
 * edges (the sample buffer is converted once, when the summary is made).
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

/* Python 3.9 lacks Py_NewRef (3.10+). */
#if PY_VERSION_HEX < 0x030A0000
static inline PyObject *
shp_newref(PyObject *o)
{
    Py_INCREF(o);
    return o;
}
#define Py_NewRef(o) shp_newref((PyObject *)(o))
#endif

/* ---- platform ---------------------------------------------------------- */

#if defined(_WIN32)
#define SHP_WINDOWS 1
#elif defined(__APPLE__)
#define SHP_MACOS 1
#elif defined(__linux__)
#define SHP_LINUX 1
#endif

#define SHP_MIB (1024.0 * 1024.0)
#define SHP_MAX_CUDA_DEVICES 64

/* ---- CUDA driver table (cuda.c) ---------------------------------------- */

/* Just enough of the driver ABI to dlopen it: opaque handles and ints. */
typedef int shp_CUresult;
typedef int shp_CUdevice;
typedef struct shp_CUctx_st *shp_CUcontext;

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
    /* primary contexts this module retained, released at module teardown */
    shp_CUcontext primary[SHP_MAX_CUDA_DEVICES];
} shp_cuda;

/* ---- module state (module.c) ------------------------------------------- */

struct shp_hwm_window;

typedef struct {
    PyTypeObject *stats_type;       /* BenchmarkStats */
    PyTypeObject *gpumem_type;      /* GPUMemoryInfo */
    PyTypeObject *comparison_type;  /* Comparison */
    PyTypeObject *cuda_sync_type;   /* CudaSync (what get_cuda_sync_fn returns) */
    PyObject *warning;              /* BenchmarkWarning (UserWarning) */
    PyObject *interrupted;          /* BenchmarkInterrupted (KeyboardInterrupt) */
    PyObject *noop;                 /* native no-op used to measure overhead */
    PyObject *env_static;           /* cached part of the environment dict */
    double overhead_ns[2];          /* harness floor per sync kind; <0 unmeasured */
    shp_cuda cuda;
} shp_state;

/* The state of the module that defined `type` (or one of its bases). */
shp_state *shp_state_from_type(PyTypeObject *type);

/* ---- clock.c ------------------------------------------------------------ */

/* Monotonic time in integer nanoseconds: the clock of time.perf_counter. */
int64_t shp_now_ns(void);
/* Resolution of that clock in ns (clock_getres and friends); 1 if unknown. */
int64_t shp_clock_resolution_ns(void);
/* A short human name of the clock, for the environment record. */
const char *shp_clock_name(void);

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

typedef struct shp_hwm_window {
    struct shp_hwm_window *next;
    shp_peak_method method;
    int64_t baseline;     /* RSS at open, bytes */
    int64_t peak;         /* highest RSS seen so far, bytes */
    int statm_fd;         /* Linux: open /proc/self/statm for cheap sampling */
} shp_hwm_window;

/* Open a window (never fails: falls back to sampling, or OFF if no RSS).
 * The list of open windows is process-wide (the mark is); hold the GIL. */
void shp_window_open(shp_hwm_window *w);
/* Fold one RSS sample into a SAMPLED window; cheap, no Python calls. */
void shp_window_sample(shp_hwm_window *w);
/* Close a window and return peak - baseline in bytes (>= 0). Always call. */
int64_t shp_window_close(shp_hwm_window *w);
/* "hwm" / "sampled" / "off" */
const char *shp_peak_method_name(shp_peak_method m);
/* Test hook: when set, the HWM reset is reported as unavailable. */
extern int shp_force_sampled_rss;

/* ---- cuda.c ------------------------------------------------------------- */

/*
 * Parse a device label.  Returns 1 if it names a CUDA device (contains
 * "cuda", any case), 0 if not; *ordinal receives the ordinal after a colon
 * ("cuda:1") or -1 when none was given.  -1 with ValueError for a malformed
 * ordinal ("cuda:x").
 */
int shp_cuda_parse_device(const char *device, int *ordinal);

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

/* Set RuntimeError "<what>: CUDA_ERROR_X (code): description"; returns -1. */
int shp_cuda_raise(shp_state *st, shp_CUresult rc, const char *what);

/* Device name and driver version into `env` (a dict); 0 / -1. */
int shp_cuda_describe(shp_state *st, const shp_cuda_target *t, PyObject *env);

/* Release retained primary contexts.  The driver stays loaded once cuInit
 * succeeded: it runs threads and exit hooks of its own. */
void shp_cuda_teardown(shp_state *st);

/* 1 and *t filled if obj is one of our CudaSync callables, else 0. */
int shp_cuda_sync_unwrap(shp_state *st, PyObject *obj, shp_cuda_target *t);

/* The CudaSync type spec and the two module functions. */
extern PyType_Spec shp_cuda_sync_spec;
PyObject *shp_get_cuda_sync_fn(PyObject *module, PyObject *unused);
PyObject *shp_get_gpu_vram_mb(PyObject *module, PyObject *const *args,
                              Py_ssize_t nargs, PyObject *kwnames);

/* ---- summary.c ---------------------------------------------------------- */

typedef struct {
    double mean, std, min, max;
    double median, p50, p90, p95, p99;
    double q1, q3;              /* 25th / 75th percentiles */
    double ci_low, ci_high;     /* 95% CI of the median (order statistics) */
    Py_ssize_t outliers;        /* beyond Tukey's 1.5 IQR fences */
} shp_summary;

/*
 * Summarise x[0..n) (n >= 1).  `scratch` must hold n doubles; it is
 * overwritten (order statistics are found by selection in it, x is left
 * untouched).  Percentiles follow NumPy's default method="linear".
 * Never fails.
 */
void shp_summarize(const double *x, Py_ssize_t n, double *scratch, shp_summary *out);

/* Only the median and its 95% CI (for adaptive stopping); same contract. */
void shp_median_ci(const double *x, Py_ssize_t n, double *scratch,
                   double *median, double *lo, double *hi);

/* NumPy-linear percentile q in [0, 1] of a[0..n), rearranging a (selection). */
double shp_percentile_inplace(double *a, Py_ssize_t n, double q);

/* 1-based ranks (j, k) of the distribution-free 95% CI of the median:
 * [x_(j), x_(k)] with k = n + 1 - j; j = 1 when n is too small. */
void shp_median_ci_ranks(Py_ssize_t n, Py_ssize_t *j, Py_ssize_t *k);

/* ---- fields.c: table-driven attributes ---------------------------------- */

typedef enum {
    SHP_F_STR,        /* PyObject* str */
    SHP_F_OPT_STR,    /* PyObject* str or None (NULL) */
    SHP_F_DOUBLE,     /* double, any real number */
    SHP_F_OPT_DOUBLE, /* double, NaN means None */
    SHP_F_COUNT,      /* Py_ssize_t >= 0 */
    SHP_F_OPT_COUNT,  /* Py_ssize_t >= 0, -1 means None */
    SHP_F_OPT_BOOL,   /* int: -1 None, 0 False, 1 True */
    SHP_F_OPT_DICT,   /* PyObject* dict or None (NULL) */
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

/* ---- stats.c ------------------------------------------------------------ */

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
    Py_ssize_t batch_size;
    double torch_max_allocated_mb;
    PyObject *params;
    PyObject *env;
    /* raw samples (ms), owned by samples_owner (a capsule that frees them);
     * exposed as read-only NumPy views whose base is that capsule */
    double *samples;
    Py_ssize_t nsamples;
    PyObject *samples_owner;
    PyObject *weakreflist;
} shp_Stats;

typedef struct {
    PyObject_HEAD
    double total_mb, free_mb, used_mb;
} shp_GPUMemoryInfo;

extern PyType_Spec shp_stats_spec;
extern PyType_Spec shp_gpumem_spec;

/* New BenchmarkStats with every field at its default; NULL on error. */
shp_Stats *shp_stats_alloc(shp_state *st);
/* Take ownership of a PyMem_Malloc'd sample buffer (ms), or NULL for none.
 * 0, or -1 with MemoryError (the buffer is freed then). */
int shp_stats_adopt_samples(shp_Stats *s, double *samples, Py_ssize_t n);
/* Copy a 1-D sequence of real numbers into a new PyMem buffer; 0 / -1. */
int shp_samples_from_object(PyObject *obj, double **out, Py_ssize_t *n);
/* Fill the latency fields of `s` from a summary. */
void shp_stats_apply_summary(shp_Stats *s, const shp_summary *sm);
/* New GPUMemoryInfo from byte counts. */
PyObject *shp_gpumem_new(shp_state *st, size_t total_b, size_t free_b);
/* Fill the specs' getset tables from the field tables (before type creation). */
void shp_stats_prepare_spec(void);
void shp_gpumem_prepare_spec(void);
void shp_comparison_prepare_spec(void);

/* ---- table.c ------------------------------------------------------------ */

PyObject *shp_format_benchmark_table(PyObject *module, PyObject *const *args,
                                     Py_ssize_t nargs, PyObject *kwnames);
/* The Markdown / HTML table of one stats object (for Jupyter). */
PyObject *shp_stats_markdown(shp_state *st, PyObject *stats);
PyObject *shp_stats_html(shp_state *st, PyObject *stats);
/* `s` as a bold Markdown table cell that renders as exactly `s` (escaped). */
PyObject *shp_md_bold_cell(PyObject *s);
/* `s` with & < > " as HTML entities. */
PyObject *shp_html_escape(PyObject *s);

/* ---- compare.c ---------------------------------------------------------- */

extern PyType_Spec shp_comparison_spec;

/* Medians of a and b, their ratio b/a, and a seeded percentile-bootstrap
 * 95% CI of it (na, nb >= 1).  0, or -1 with MemoryError. */
int shp_compare_samples(const double *a, Py_ssize_t na, const double *b, Py_ssize_t nb,
                        uint64_t seed, Py_ssize_t resamples, double *med_a, double *med_b,
                        double *ratio, double *lo, double *hi);
/* "faster" / "slower" / "same" for a CI of candidate/baseline. */
const char *shp_verdict(double lo, double hi);
PyObject *shp_compare_benchmarks(PyObject *module, PyObject *const *args,
                                 Py_ssize_t nargs, PyObject *kwnames);

/* ---- env.c -------------------------------------------------------------- */

/* A new environment dict (cached static part + torch if imported). */
PyObject *shp_env_dict(shp_state *st);

/* ---- bench.c ------------------------------------------------------------ */

PyObject *shp_benchmark_callable(PyObject *module, PyObject *const *args,
                                 Py_ssize_t nargs, PyObject *kwnames);
/* Test-only: summary of an arbitrary sample sequence, as BenchmarkStats. */
PyObject *shp_stats_from_samples(PyObject *module, PyObject *const *args,
                                 Py_ssize_t nargs, PyObject *kwnames);

/* An integer argument: anything with __index__ (int, numpy.int64, ...) but
 * bool, where True as a count or id is a bug.  New reference to an int, or
 * NULL with TypeError "<what> must be an int, not <type>". */
PyObject *shp_index_arg(PyObject *v, const char *what);

/* Attach "note" to exception `exc` (its add_note; before 3.11, where there is
 * usually none, an append to __notes__); keeps the original exception if
 * attaching fails.  Never fails. */
void shp_add_note(PyObject *exc, const char *fmt, ...);

#endif /* SHP_PROFILING_H */
