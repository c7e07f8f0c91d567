/*
 * types/ -- the Python types and their module functions, one type a file:
 * BenchmarkStats and the filling of a result from statistics
 * (benchstats.c), the one BenchmarkWarning of a call (warn.c),
 * GPUMemoryInfo (gpumem.c), Comparison and compare_benchmarks (compare.c),
 * CudaSync (cudasync.c), LoadStats (loadstats.c), the core's rules for the
 * Python layer (rules.c).  Calls go down to render/, stats/, capi/, gpu/,
 * platform/.
 */
#ifndef SHP_TYPES_TYPES_H
#define SHP_TYPES_TYPES_H

#include "render/render.h"

/* ---- benchstats.c ------------------------------------------------------------ */

extern PyType_Spec shp_stats_spec;
/* New BenchmarkStats with every field at its default; NULL on error. */
shp_Stats *shp_stats_alloc(shp_state *st);
/* Take ownership of a PyMem_Malloc'd sample buffer (ms), or NULL for none.
 * 0, or -1 with MemoryError (the buffer is freed then). */
int shp_stats_adopt_samples(shp_Stats *s, double *samples, Py_ssize_t n);
/* A result over buf[0..n) (ms, n >= 1; the buffer is taken, freed on
 * failure): its summary, stability and single-run rerun interval, every
 * other field at its default.  ValueError for a sample that is not finite.
 * New reference, or NULL with an exception. */
shp_Stats *shp_stats_from_buffer(shp_state *st, double *buf, Py_ssize_t n);
/* Copy a 1-D sequence of real numbers into a new PyMem buffer; 0 / -1. */
int shp_samples_from_object(PyObject *obj, double **out, Py_ssize_t *n);
/* fill the stability fields of `s`; 0, or -1 with MemoryError. */
int shp_stats_apply_stability(shp_Stats *s, const shp_stability *d);
/* Add to d the cause of a diagnosis kept in s->stab that is not "stable"
 * (multimodal, drifting or noisy, with its numbers; nothing for a result
 * not diagnosed here).  0 / -1. */
int shp_stats_diagnose_stability(const shp_Stats *s, shp_diag *d);
/* fill the latency fields of `s` from a summary. */
void shp_stats_apply_summary(shp_Stats *s, const shp_summary *sm);
/* fill the rerun interval of `s` (rerun_low_ms, rerun_high_ms,
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

/* ---- loadstats.c ------------------------------------------------------------- */

extern PyType_Spec shp_load_spec;
/* New LoadStats with every field at its default; NULL on error. */
shp_LoadStats *shp_load_alloc(shp_state *st);
/* Take ownership of a PyMem_Malloc'd array x[0..n) (ms) as array `which`
 * (shp_load_array), or NULL for none.  0, or -1 with MemoryError (x is freed
 * then). */
int shp_load_adopt(shp_LoadStats *s, int which, double *x, Py_ssize_t n);
/* The latency, service and lag figures of s from its arrays (latencies of
 * n >= 1 requests; nothing when none): percentiles NumPy-linear, the 95%
 * intervals of p50 and p99 by queueing.c's block bootstrap seeded with
 * s->seed, ci_block, queue_share.  0, or -1 with MemoryError. */
int shp_load_summarize(shp_LoadStats *s);
void shp_load_prepare_spec(void);

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
/* The remedy words of the interface in use (warn.c): what its user changes. */
typedef enum {
    SHP_WORD_WARMUP, SHP_WORD_ITERS, SHP_WORD_REPEAT, SHP_WORD_COMPARE, SHP_WORD_COUNTED
} shp_word;
/* The word `which` in effect, valid while *hold lives (Py_XDECREF it after;
 * it may be NULL).  Never fails. */
const char *shp_remedy_word(shp_state *st, shp_word which, PyObject **hold);
/* Test hook _warning_texts(attrs): {class name: that cause's line} composed
 * from attrs (a dict of the numbers a warning carries, or None) with the
 * remedy words in effect (the context's _remedy_words, else
 * benchmark_callable's). */
PyObject *shp_warning_texts(PyObject *module, PyObject *attrs);
/* Private _warning_class(causes): the class of a warning with this tuple of
 * cause labels (the cause's own, or their cached combination).  New ref. */
PyObject *shp_warning_class(PyObject *module, PyObject *labels);
/* Test hook _warning_lines(causes, attrs): the cause lines of a warning with
 * these causes (a tuple of labels) and numbers (a dict or None), as a list. */
PyObject *shp_warning_lines(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

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

/* ---- rules.c: the core's rules, for the Python layer ------------------------ */

/* Module functions (new reference, or NULL with an exception):
 * _t975(df); _judge(ratio, lo, hi, margin); _md_text(text, mode='cell');
 * _html_escape(text); _count(value, param, owner=None, lowest=0,
 * highest=None); _real(value, param, owner=None): the real-number rule of
 * every argument (a float; TypeError for a bool, a str, anything without
 * __float__ or __index__); _pool(parts, *, name=None, runs=False, fresh=False): one
 * result over the samples of `parts` in order: their summary; the first
 * part's labels; cache and counter_source when every part agrees; the
 * warm-ups summed; memory peaks the largest; the overhead the median;
 * per-call counts, page faults and host_share weighted by calls; GPU times
 * pooled as the wall times are; target_met of the parts that had a target;
 * busy if any was (and the rerun interval then with the busy floor).
 * Segments of one run (runs=False) keep the first's cold start and
 * gpu_telemetry; runs=True
 * keeps run_sizes and the runs' spread, and fresh=True the rerun interval
 * of fresh processes (else none).  One part without runs= or name= is
 * returned as is. */
PyObject *shp_t975_py(PyObject *module, PyObject *arg);
PyObject *shp_judge_py(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames);
PyObject *shp_md_text_py(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                         PyObject *kwnames);
PyObject *shp_html_escape_py(PyObject *module, PyObject *arg);
PyObject *shp_count_py(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames);
PyObject *shp_real_py(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                      PyObject *kwnames);
PyObject *shp_pool_py(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                      PyObject *kwnames);
/* _note_near_option(exc, keywords, options) -> bool: capi.h's near-option rule
 * (shp_note_near_option) for the adapters' own options. */
PyObject *shp_note_near_option_py(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kwnames);
/* _fcfs_latencies(arrivals, service, servers=1): the latencies of a
 * first-come-first-served queue (queueing.c: Lindley's recursion for one
 * server), a float64 array; for tests and bench/ to hold a run to theory. */
PyObject *shp_fcfs_py(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                      PyObject *kwnames);

/* Fill the specs' getset tables from the field tables.  Called once per
 * process, before any type is made (PyInit__native). */
void shp_stats_prepare_spec(void);
void shp_gpumem_prepare_spec(void);
void shp_comparison_prepare_spec(void);

#endif /* SHP_TYPES_TYPES_H */
