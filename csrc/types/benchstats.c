/*
 * benchstats.c -- the BenchmarkStats type, and a result filled from its
 * summary and diagnosis.
 *
 * A heap type from PyType_Spec whose attributes come from one field table
 * (fields.c).  The released BenchmarkStats dataclass's 13 fields come first
 * and in order, so `BenchmarkStats(name, device, mean_ms, ...)` works as it
 * did; every other field is keyword-only and optional.
 * The raw samples live in a C buffer owned by the object and are exposed
 * as read-only NumPy views that keep the object (and so the buffer) alive.
 */
#include "types/types.h"

#include <math.h>
#include <string.h>
#include <structmember.h>
#include <numpy/arrayobject.h>

#define S_OFF(m) offsetof(shp_Stats, m)
#define REQ(nm, kind, m, rnd, doc) {nm, kind, S_OFF(m), rnd, 1, 0, 0.0, SHP_SHOW_ALWAYS, doc}
#define OPT(nm, kind, m, rnd, dflt, doc) {nm, kind, S_OFF(m), rnd, 0, 0, dflt, SHP_SHOW_ALWAYS, doc}
#define KW(nm, kind, m, rnd, dflt, show, doc) {nm, kind, S_OFF(m), rnd, 0, 1, dflt, show, doc}

static const shp_field stats_fields[] = {
    REQ("name", SHP_F_STR, name, SHP_R_NONE, "Label of the benchmark target."),
    REQ("device", SHP_F_STR, device, SHP_R_NONE, "Device or execution-provider label."),
    REQ("mean_ms", SHP_F_DOUBLE, mean_ms, SHP_R_MS, "Arithmetic mean latency (ms)."),
    REQ("median_ms", SHP_F_DOUBLE, median_ms, SHP_R_MS, "Median latency (ms), NumPy-linear."),
    REQ("std_ms", SHP_F_DOUBLE, std_ms, SHP_R_MS, "Sample standard deviation (n-1) of latency (ms)."),
    REQ("p95_ms", SHP_F_DOUBLE, p95_ms, SHP_R_MS, "95th percentile latency (ms), NumPy-linear."),
    REQ("min_ms", SHP_F_DOUBLE, min_ms, SHP_R_MS, "Fastest iteration (ms)."),
    REQ("max_ms", SHP_F_DOUBLE, max_ms, SHP_R_MS, "Slowest iteration (ms)."),
    REQ("fps", SHP_F_DOUBLE, fps, SHP_R_FPS, "Calls per second: 1000 / mean_ms (0.0 if mean_ms is 0)."),
    REQ("warmup_iters", SHP_F_COUNT, warmup_iters, SHP_R_NONE, "Warm-up iterations completed."),
    REQ("timed_iters", SHP_F_COUNT, timed_iters, SHP_R_NONE, "Timed iterations measured."),
    OPT("ram_delta_mb", SHP_F_DOUBLE, ram_delta_mb, SHP_R_MB, 0.0,
        "Peak RSS over warm-up and timed iterations minus the baseline (MiB, >= 0)."),
    OPT("vram_delta_mb", SHP_F_DOUBLE, vram_delta_mb, SHP_R_MB, 0.0,
        "Peak device used memory minus the baseline (MiB, device-wide; CUDA only)."),
    KW("p50_ms", SHP_F_OPT_DOUBLE, p50_ms, SHP_R_MS, 0, SHP_SHOW_IF_SET, "50th percentile (ms)."),
    KW("p90_ms", SHP_F_OPT_DOUBLE, p90_ms, SHP_R_MS, 0, SHP_SHOW_IF_SET, "90th percentile (ms)."),
    KW("p99_ms", SHP_F_OPT_DOUBLE, p99_ms, SHP_R_MS, 0, SHP_SHOW_IF_SET,
       "99th percentile (ms); from under 100 samples it is little more than max_ms."),
    KW("iqr_ms", SHP_F_OPT_DOUBLE, iqr_ms, SHP_R_MS, 0, SHP_SHOW_IF_SET, "Interquartile range p75 - p25 (ms)."),
    KW("ci95_low_ms", SHP_F_OPT_DOUBLE, ci95_low_ms, SHP_R_MS, 0, SHP_SHOW_IF_SET,
       "Lower end of the distribution-free 95% confidence interval of the median (ms)."),
    KW("ci95_high_ms", SHP_F_OPT_DOUBLE, ci95_high_ms, SHP_R_MS, 0, SHP_SHOW_IF_SET,
       "Upper end of the distribution-free 95% confidence interval of the median (ms)."),
    KW("outliers", SHP_F_OPT_COUNT, outliers, SHP_R_NONE, 0, SHP_SHOW_IF_SET,
       "Samples beyond Tukey's 1.5 IQR fences (counted, never dropped)."),
    KW("overhead_ms", SHP_F_OPT_DOUBLE, overhead_ms, SHP_R_MS, 0, SHP_SHOW_IF_SET,
       "The harness's own floor: median of a native no-op timed through the same loop (ms)."),
    KW("loop_overhead_ms", SHP_F_OPT_DOUBLE, loop_overhead_ms, SHP_R_MS, 0, SHP_SHOW_IF_SET,
       "Awaited calls (an async function): what the run's event loop costs a call, the median "
       "of an empty coroutine run to completion the same way (ms); None otherwise."),
    KW("ram_peak_method", SHP_F_OPT_STR, ram_peak_method, SHP_R_NONE, 0, SHP_SHOW_IF_SET,
       "How ram_delta_mb was measured: 'hwm', 'sampled' or 'off'."),
    KW("target_met", SHP_F_OPT_BOOL, target_met, SHP_R_NONE, 0, SHP_SHOW_IF_SET,
       "Adaptive runs: whether target_rel_ci was reached (None when not adaptive)."),
    KW("machine_busy", SHP_F_OPT_BOOL, machine_busy, SHP_R_NONE, 0, SHP_SHOW_IF_SET,
       "The machine was busy when the run started: other processes used over 25% of all CPU "
       "time just before (the load average where that is unknown); None: not measured."),
    KW("batch_size", SHP_F_COUNT, batch_size, SHP_R_NONE, 1.0, SHP_SHOW_IF_SET,
       "Items processed per call; throughput = fps * batch_size."),
    KW("torch_max_allocated_mb", SHP_F_OPT_DOUBLE, torch_max_allocated_mb, SHP_R_MB, 0, SHP_SHOW_IF_SET,
       "PyTorch's own peak allocated CUDA memory over the run (MiB), when profiled with torch."),
    KW("params", SHP_F_OPT_DICT, params, SHP_R_NONE, 0, SHP_SHOW_IF_SET,
       "Swept parameters of this run (e.g. {'batch_size': 16})."),
    KW("env", SHP_F_OPT_DICT, env, SHP_R_NONE, 0, SHP_SHOW_NEVER,
       "Environment the numbers were taken in (Python, CPU, NumPy, torch, driver, GPU)."),
    KW("first_call_ms", SHP_F_OPT_DOUBLE, first_call_ms, SHP_R_MS, 0, SHP_SHOW_IF_SET, "First call (ms), synced."),
    KW("warmup_ms", SHP_F_OPT_FLOATS, warmup_ms, SHP_R_MS, 0, SHP_SHOW_NEVER, "Each warm-up call (ms), in order."),
    KW("settle_calls", SHP_F_OPT_COUNT, settle_calls, SHP_R_NONE, 0, SHP_SHOW_IF_SET, "Calls until settled."),
    KW("cache", SHP_F_OPT_STR, cache, SHP_R_NONE, 0, SHP_SHOW_IF_SET, "'warm', or 'cold': caches evicted."),
    KW("gpu_median_ms", SHP_F_OPT_DOUBLE, gpu_median_ms, SHP_R_MS, 0, SHP_SHOW_IF_SET, "Median GPU time (ms)."),
    KW("gpu_p95_ms", SHP_F_OPT_DOUBLE, gpu_p95_ms, SHP_R_MS, 0, SHP_SHOW_NEVER, "95th pct of GPU time (ms)."),
    KW("host_share", SHP_F_OPT_DOUBLE, host_share, SHP_R_RATIO, 0, SHP_SHOW_IF_SET, "Host time / wall time."),
    KW("gpu_samples_ms", SHP_F_OPT_FLOATS, gpu_samples_ms, SHP_R_MS, 0, SHP_SHOW_NEVER, "Each GPU time (ms)."),
    KW("gpu_telemetry", SHP_F_OPT_DICT, gpu_telemetry, SHP_R_NONE, 0, SHP_SHOW_NEVER, "What NVML saw."),
    KW("stability", SHP_F_OPT_STR, stability, SHP_R_NONE, 0, SHP_SHOW_IF_SET,
       "'stable', 'noisy', 'multimodal' or 'drifting' (docs/statistics.md, Stability)."),
    KW("cv", SHP_F_OPT_DOUBLE, cv, SHP_R_RATIO, 0, SHP_SHOW_NEVER,
       "Coefficient of variation: std_ms / mean_ms."),
    KW("autocorr_lag1", SHP_F_OPT_DOUBLE, autocorr_lag1, SHP_R_RATIO, 0, SHP_SHOW_NEVER,
       "Lag-1 autocorrelation of the samples in iteration order."),
    KW("effective_n", SHP_F_OPT_COUNT, effective_n, SHP_R_NONE, 0, SHP_SHOW_NEVER,
       "Effective sample size (AR(1)); the median's CI uses it."),
    KW("drift", SHP_F_OPT_DOUBLE, drift, SHP_R_RATIO, 0, SHP_SHOW_NEVER,
       "Change of the block medians over the run, relative to the median (0.1 = +10%)."),
    KW("multimodal", SHP_F_OPT_BOOL, multimodal, SHP_R_NONE, 0, SHP_SHOW_NEVER,
       "The samples form two separate groups (Ashman's D on log times)."),
    KW("minor_faults_per_iter", SHP_F_OPT_DOUBLE, minor_faults_per_iter, SHP_R_FPS, 0,
       SHP_SHOW_NEVER, "Minor page faults per timed iteration (None: not available here)."),
    KW("major_faults_per_iter", SHP_F_OPT_DOUBLE, major_faults_per_iter, SHP_R_FPS, 0,
       SHP_SHOW_NEVER, "Major page faults (disk reads) per timed iteration."),
    KW("vol_ctx_switches_per_iter", SHP_F_OPT_DOUBLE, vol_ctx_switches_per_iter, SHP_R_FPS, 0,
       SHP_SHOW_NEVER, "Voluntary context switches (waits: I/O, locks, sleeps) per iteration."),
    KW("invol_ctx_switches_per_iter", SHP_F_OPT_DOUBLE, invol_ctx_switches_per_iter, SHP_R_FPS,
       0, SHP_SHOW_NEVER, "Involuntary context switches (preemptions) per iteration."),
    KW("run_sizes", SHP_F_OPT_COUNTS, run_sizes, SHP_R_NONE, 0, SHP_SHOW_IF_SET,
       "Samples of each fresh-process run, in order (repeat= / --processes); None: one run."),
    KW("run_spread", SHP_F_OPT_DOUBLE, run_spread, SHP_R_RATIO, 0, SHP_SHOW_IF_SET,
       "Between-run spread: std of the log medians of the runs (0.05 = 5%); None: one run."),
    KW("rerun_low_ms", SHP_F_OPT_DOUBLE, rerun_low_ms, SHP_R_MS, 0, SHP_SHOW_IF_SET,
       "Low end of where the median of the same benchmark, run again in a fresh process on "
       "this machine, is expected to fall (95%; docs/statistics.md, Rerun interval)."),
    KW("rerun_high_ms", SHP_F_OPT_DOUBLE, rerun_high_ms, SHP_R_MS, 0, SHP_SHOW_IF_SET,
       "High end of that rerun interval (ms)."),
    KW("rerun_basis", SHP_F_OPT_STR, rerun_basis, SHP_R_NONE, 0, SHP_SHOW_NEVER,
       "Where the rerun interval's between-run spread came from: 'runs' (measured by "
       "repetitions), 'given' (run_spread=), 'calibrated' (this machine's calibration), "
       "'assumed' (15%), 'assumed busy' (25%: the run started on a busy machine), 'slow "
       "variation' (the run's own, above those); for one run of two modes or a drift, no "
       "interval and the reason ('two modes: a rerun may land in either')."),
    KW("instructions_per_call", SHP_F_OPT_DOUBLE, instructions_per_call, SHP_R_FPS, 0,
       SHP_SHOW_IF_SET, "Instructions per timed call, warm-up excluded, the harness's own "
       "work not included (counter_source says how they were counted); None: not counted."),
    KW("cycles_per_call", SHP_F_OPT_DOUBLE, cycles_per_call, SHP_R_FPS, 0, SHP_SHOW_IF_SET,
       "CPU cycles per timed call in user space, the loop's own floor taken out "
       "(counters=('cycles',)); None: not counted."),
    KW("counter_source", SHP_F_OPT_STR, counter_source, SHP_R_NONE, 0, SHP_SHOW_IF_SET,
       "'callgrind' (valgrind counted the timed calls: spatialhub-bench --instructions, "
       "pytest --benchmark-instructions) or 'perf_event' (the CPU's counters, counters=)."),
    {0},
};
#define N_STATS_FIELDS (sizeof(stats_fields) / sizeof(stats_fields[0]) - 1)
#define N_SEED_FIELDS 13

/* ---- lifecycle --------------------------------------------------------- */

static PyObject *
Stats_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    (void)args;
    (void)kwargs;
    shp_Stats *self = (shp_Stats *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    shp_fields_set_defaults((PyObject *)self, stats_fields);
    return (PyObject *)self;
}

shp_Stats *
shp_stats_alloc(shp_state *st)
{
    return (shp_Stats *)Stats_new(st->stats_type, NULL, NULL);
}

#define SHP_SAMPLES_CAPSULE "spatialhub.samples"

static void
samples_capsule_free(PyObject *cap)
{
    PyMem_Free(PyCapsule_GetPointer(cap, SHP_SAMPLES_CAPSULE));
}

int
shp_stats_adopt_samples(shp_Stats *s, double *samples, Py_ssize_t n)
{
    /* The buffer is owned by a capsule, not by the stats object: views of
     * the old samples keep the old capsule (and buffer) alive when the
     * samples are replaced (__init__ / __setstate__ called again). */
    PyObject *owner = NULL;
    if (samples != NULL) {
        owner = PyCapsule_New(samples, SHP_SAMPLES_CAPSULE, samples_capsule_free);
        if (owner == NULL) {
            PyMem_Free(samples);
            return -1;
        }
    }
    Py_XSETREF(s->samples_owner, owner);
    s->samples = samples;
    s->nsamples = samples ? n : 0;
    return 0;
}

int
shp_samples_from_object(PyObject *obj, double **out, Py_ssize_t *n)
{
    PyArrayObject *arr = (PyArrayObject *)PyArray_FROMANY(obj, NPY_DOUBLE, 1, 1,
                                                          NPY_ARRAY_CARRAY_RO | NPY_ARRAY_FORCECAST);
    if (arr == NULL)
        return -1;
    Py_ssize_t len = PyArray_DIM(arr, 0);
    double *buf = PyMem_Malloc(len > 0 ? (size_t)len * sizeof(double) : 1);
    if (buf == NULL) {
        Py_DECREF(arr);
        PyErr_NoMemory();
        return -1;
    }
    if (len > 0)
        memcpy(buf, PyArray_DATA(arr), (size_t)len * sizeof(double));
    Py_DECREF(arr);
    *out = buf;
    *n = len;
    return 0;
}

static int
set_samples(shp_Stats *self, PyObject *obj)
{
    if (obj == Py_None)
        return shp_stats_adopt_samples(self, NULL, 0);
    if (PyUnicode_Check(obj) || PyBytes_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "samples_ms must be a sequence of numbers, not %.100s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    double *buf;
    Py_ssize_t n;
    if (shp_samples_from_object(obj, &buf, &n) < 0)
        return -1;
    return shp_stats_adopt_samples(self, buf, n);
}

static int
Stats_init(PyObject *op, PyObject *args, PyObject *kwargs)
{
    shp_Stats *self = (shp_Stats *)op;
    PyObject *kw = NULL, *samples = NULL;
    int rc = -1;
    if (kwargs != NULL) {
        kw = PyDict_Copy(kwargs);
        if (kw == NULL)
            return -1;
        samples = PyDict_GetItemString(kw, "samples_ms");   /* borrowed */
        if (samples != NULL) {
            Py_INCREF(samples);
            if (PyDict_DelItemString(kw, "samples_ms") < 0)
                goto done;
        }
    }
    shp_fields_set_defaults(op, stats_fields);   /* __init__ may run twice */
    if (shp_stats_adopt_samples(self, NULL, 0) < 0)
        goto done;
    if (shp_fields_init(op, stats_fields, args, kw) < 0)
        goto done;
    if (samples != NULL && set_samples(self, samples) < 0)
        goto done;
    rc = 0;
done:
    Py_XDECREF(samples);
    Py_XDECREF(kw);
    return rc;
}

static int
Stats_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    return shp_fields_traverse(self, stats_fields, visit, arg);
}

static int
Stats_clear(PyObject *self)
{
    shp_fields_clear(self, stats_fields);
    return 0;
}

static void
Stats_dealloc(PyObject *op)
{
    shp_Stats *self = (shp_Stats *)op;
    PyTypeObject *tp = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    if (self->weakreflist != NULL)
        PyObject_ClearWeakRefs(op);
    Stats_clear(op);
    Py_CLEAR(self->samples_owner);
    self->samples = NULL;
    tp->tp_free(op);
    Py_DECREF(tp);
}

/* ---- protocol ---------------------------------------------------------- */

static PyObject *
Stats_repr(PyObject *self)
{
    return shp_fields_repr(self, stats_fields);
}

static PyObject *
Stats_richcompare(PyObject *a, PyObject *b, int op)
{
    shp_state *st = shp_state_from_type(Py_TYPE(a));
    if ((op != Py_EQ && op != Py_NE) || st == NULL ||
        !PyObject_TypeCheck(b, st->stats_type))
        Py_RETURN_NOTIMPLEMENTED;
    int eq = shp_fields_equal(a, b, stats_fields);
    if (eq < 0)
        return NULL;
    shp_Stats *x = (shp_Stats *)a, *y = (shp_Stats *)b;
    if (eq && x->nsamples != y->nsamples)
        eq = 0;
    for (Py_ssize_t i = 0; eq && i < x->nsamples; i++)
        eq = x->samples[i] == y->samples[i] || (isnan(x->samples[i]) && isnan(y->samples[i]));
    return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

/* ---- computed attributes ----------------------------------------------- */

static PyObject *
Stats_get_samples(PyObject *op, void *closure)
{
    (void)closure;
    shp_Stats *self = (shp_Stats *)op;
    shp_samples_ref r;
    shp_samples_take(self, &r);   /* buffer, length and owner of one moment */
    if (r.owner == NULL)
        Py_RETURN_NONE;
    npy_intp dim = (npy_intp)r.n;
    PyObject *arr = PyArray_SimpleNewFromData(1, &dim, NPY_DOUBLE, (void *)r.x);
    if (arr == NULL) {
        shp_samples_release(&r);
        return NULL;
    }
    PyArray_CLEARFLAGS((PyArrayObject *)arr, NPY_ARRAY_WRITEABLE);
    /* The view owns a reference to the buffer's owner (ours, given to it):
     * the buffer outlives every view, whatever later happens to this object. */
    if (PyArray_SetBaseObject((PyArrayObject *)arr, r.owner) < 0) {
        Py_DECREF(arr);
        return NULL;
    }
    return arr;
}

static PyObject *
Stats_get_throughput(PyObject *op, void *closure)
{
    (void)closure;
    shp_Stats *self = (shp_Stats *)op;
    return PyFloat_FromDouble(self->fps * (double)self->batch_size);
}

/* The doubt labels (flags.c) as a tuple of str. */
static PyObject *
Stats_get_flags(PyObject *op, void *closure)
{
    (void)closure;
    const char *labels[SHP_MAX_FLAGS];
    int n = shp_stats_flags((shp_Stats *)op, labels);
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t != NULL && i < n; i++) {
        PyObject *s = PyUnicode_FromString(labels[i]);
        if (s == NULL)
            Py_CLEAR(t);
        else
            PyTuple_SET_ITEM(t, i, s);
    }
    return t;
}

static const PyGetSetDef stats_extra_getset[] = {
    {"samples_ms", Stats_get_samples, NULL,
     "Raw per-iteration latencies (ms) in iteration order: a read-only float64 NumPy view "
     "of the buffer this object owns, or None.", NULL},
    {"throughput", Stats_get_throughput, NULL, "fps * batch_size: items per second.", NULL},
    {"flags", Stats_get_flags, NULL,
     "What makes the figures doubtful, as short labels (a tuple of str, empty when "
     "nothing): 'noisy', 'multimodal', 'drifting', 'busy machine', 'launch-bound', "
     "'overhead-dominated', 'page faults'.  Read from the other fields; the table prints "
     "them as a footnote.", NULL},
    {0},
};

static PyGetSetDef stats_getset[N_STATS_FIELDS + 4];

/* ---- methods ----------------------------------------------------------- */

/* The samples as a list.  Held as they are before the list is made: making
 * it can run a finalizer that gives self other samples (__init__ again). */
static PyObject *
samples_list(shp_Stats *self)
{
    shp_samples_ref r;
    shp_samples_take(self, &r);
    PyObject *l = PyList_New(r.n);
    for (Py_ssize_t i = 0; l != NULL && i < r.n; i++) {
        PyObject *v = PyFloat_FromDouble(r.x[i]);
        if (v == NULL)
            Py_CLEAR(l);
        else
            PyList_SET_ITEM(l, i, v);
    }
    shp_samples_release(&r);
    return l;
}

/* dict of the fields, the released dataclass's keys first; samples_ms appended on demand. */
static PyObject *
stats_dict(shp_Stats *self, int rounded, int with_samples)
{
    PyObject *d = shp_fields_dict((PyObject *)self, stats_fields, rounded);
    if (d == NULL || !with_samples || self->samples == NULL)
        return d;
    PyObject *l = samples_list(self);
    if (l == NULL || shp_dict_set(d, "samples_ms", l) < 0) {
        Py_XDECREF(l);
        Py_DECREF(d);
        return NULL;
    }
    Py_DECREF(l);
    return d;
}

/* to_dict(*, samples=False, exact=False) / to_json(*, samples=False, indent=None). */
static int
parse_samples_flag(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                   const char *fname, int *samples, PyObject **indent, int *exact)
{
    static const char *const dict_names[] = {"samples", "exact"};
    static const char *const json_names[] = {"samples", "indent"};
    shp_argspec spec = {fname, indent != NULL ? json_names : dict_names, 2, 0, 0, 0};
    PyObject *v[2];
    *samples = 0;
    if (shp_args_parse(&spec, args, nargs, kwnames, v) < 0)
        return -1;
    if (v[0] != NULL && shp_arg_flag(v[0], samples) < 0)
        return -1;
    if (indent != NULL && v[1] != NULL)
        *indent = v[1];
    if (exact != NULL && v[1] != NULL && shp_arg_flag(v[1], exact) < 0)
        return -1;
    return 0;
}

static PyObject *
Stats_to_dict(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    int samples, exact = 0;
    if (parse_samples_flag(args, nargs, kwnames, "to_dict", &samples, NULL, &exact) < 0)
        return NULL;
    return stats_dict((shp_Stats *)self, !exact, samples);
}

static PyObject *
Stats_to_json(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    int samples;
    PyObject *indent = Py_None, *json = NULL, *d = NULL, *res = NULL;
    if (parse_samples_flag(args, nargs, kwnames, "to_json", &samples, &indent, NULL) < 0)
        return NULL;
    d = stats_dict((shp_Stats *)self, 0, samples);   /* saved: full precision */
    if (d == NULL)
        goto done;
    json = PyImport_ImportModule("json");
    if (json == NULL)
        goto done;
    PyObject *dumps = PyObject_GetAttrString(json, "dumps");
    if (dumps == NULL)
        goto done;
    PyObject *kw = Py_BuildValue("{sOsO}", "indent", indent, "allow_nan", Py_False);
    if (kw != NULL) {
        PyObject *a = PyTuple_Pack(1, d);
        if (a != NULL)
            res = PyObject_Call(dumps, a, kw);
        Py_XDECREF(a);
        Py_DECREF(kw);
    }
    Py_DECREF(dumps);
done:
    Py_XDECREF(json);
    Py_XDECREF(d);
    return res;
}

static PyObject *
Stats_from_dict(PyObject *cls, PyObject *d)
{
    if (!PyDict_Check(d))
        return shp_arg_type_error("BenchmarkStats.from_dict()", "d", "a dict", d), NULL;
    PyObject *args = PyTuple_New(0);
    if (args == NULL)
        return NULL;
    PyObject *res = PyObject_Call(cls, args, d);
    Py_DECREF(args);
    return res;
}

/* state: the fields (a dict, as before), or (fields, attributes) for a
 * subclass instance with attributes of its own, which pickle and copy
 * used to lose. */
static PyObject *
Stats_reduce(PyObject *self, PyObject *unused)
{
    (void)unused;
    PyObject *copyreg = NULL, *newobj = NULL, *state = NULL, *attrs = NULL, *res = NULL;
    copyreg = PyImport_ImportModule("copyreg");
    if (copyreg == NULL)
        goto done;
    newobj = PyObject_GetAttrString(copyreg, "__newobj__");
    if (newobj == NULL)
        goto done;
    state = stats_dict((shp_Stats *)self, 0, 1);
    attrs = state ? shp_instance_attrs(self, copyreg) : NULL;
    if (attrs == NULL)
        goto done;
    if (PyDict_GET_SIZE(attrs) > 0) {
        PyObject *both = PyTuple_Pack(2, state, attrs);
        if (both == NULL)
            goto done;
        Py_SETREF(state, both);
    }
    res = Py_BuildValue("O(O)O", newobj, (PyObject *)Py_TYPE(self), state);
done:
    Py_XDECREF(attrs);
    Py_XDECREF(state);
    Py_XDECREF(newobj);
    Py_XDECREF(copyreg);
    return res;
}

static PyObject *
Stats_setstate(PyObject *self, PyObject *state)
{
    PyObject *fields = state, *attrs = NULL, *items = NULL, *args = NULL, *res = NULL;
    if (PyTuple_Check(state) && PyTuple_GET_SIZE(state) == 2) {
        fields = PyTuple_GET_ITEM(state, 0);
        attrs = PyTuple_GET_ITEM(state, 1);
    }
    if (!PyDict_Check(fields) || (attrs != NULL && !PyDict_Check(attrs)))
        return shp_arg_type_error("BenchmarkStats.__setstate__()", "state",
                                  "a dict or a (dict, dict) tuple", state), NULL;
    Py_INCREF(state);   /* owns fields and attrs while their code runs */
    args = PyTuple_New(0);
    if (args == NULL || Stats_init(self, args, fields) < 0)
        goto done;
    /* a snapshot: a property's setter may change the dict */
    items = attrs != NULL ? PyDict_Items(attrs) : NULL;
    if (attrs != NULL && items == NULL)
        goto done;
    for (Py_ssize_t i = 0; items != NULL && i < PyList_GET_SIZE(items); i++) {
        PyObject *kv = PyList_GET_ITEM(items, i);   /* our list's tuple */
        if (PyObject_SetAttr(self, PyTuple_GET_ITEM(kv, 0), PyTuple_GET_ITEM(kv, 1)) < 0)
            goto done;
    }
    res = Py_NewRef(Py_None);
done:
    Py_XDECREF(items);
    Py_XDECREF(args);
    Py_DECREF(state);
    return res;
}

static PyObject *
Stats_repr_markdown(PyObject *self, PyObject *unused)
{
    (void)unused;
    return shp_stats_markdown(self);
}

static PyObject *
Stats_repr_html(PyObject *self, PyObject *unused)
{
    (void)unused;
    return shp_stats_html(self);
}

static PyMethodDef stats_methods[] = {
    {"to_dict", (PyCFunction)(void (*)(void))Stats_to_dict, METH_FASTCALL | METH_KEYWORDS,
     shp_doc_stats_to_dict},
    {"to_json", (PyCFunction)(void (*)(void))Stats_to_json, METH_FASTCALL | METH_KEYWORDS,
     shp_doc_stats_to_json},
    {"from_dict", Stats_from_dict, METH_O | METH_CLASS,
     shp_doc_stats_from_dict},
    {"__reduce__", Stats_reduce, METH_NOARGS, "Pickle support (all fields and samples, unrounded)."},
    {"__setstate__", Stats_setstate, METH_O, "Pickle support."},
    {"_repr_markdown_", Stats_repr_markdown, METH_NOARGS, "The one-row Markdown table (Jupyter)."},
    {"_repr_html_", Stats_repr_html, METH_NOARGS, "The one-row HTML table (Jupyter)."},
    {0},
};

static PyMemberDef stats_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(shp_Stats, weakreflist), READONLY, NULL},
    {0},
};

static PyType_Slot stats_slots[] = {
    {Py_tp_new, Stats_new},
    {Py_tp_init, Stats_init},
    {Py_tp_dealloc, Stats_dealloc},
    {Py_tp_traverse, Stats_traverse},
    {Py_tp_clear, Stats_clear},
    {Py_tp_repr, Stats_repr},
    {Py_tp_richcompare, Stats_richcompare},
    {Py_tp_hash, PyObject_HashNotImplemented},
    {Py_tp_methods, stats_methods},
    {Py_tp_getset, stats_getset},
    {Py_tp_members, stats_members},
    {Py_tp_doc, "Aggregated latency, throughput and memory figures of one benchmark."},
    {0, NULL},
};

PyType_Spec shp_stats_spec = {
    .name = "spatialhub.utils.profiling.BenchmarkStats",
    .basicsize = sizeof(shp_Stats),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = stats_slots,
};

void
shp_stats_prepare_spec(void)
{
    static char doc[8192];
    shp_fields_fill_getset(stats_fields, stats_extra_getset, stats_getset);
    shp_fields_spec_doc(
        &shp_stats_spec, stats_fields, "samples_ms=None",
        "Aggregated latency, throughput and memory figures of one benchmark.\n\n"
        "What benchmark_callable and the adapters return; made by hand, it takes its fields\n"
        "as arguments.  The first 13 are the released dataclass's fields, in order\n"
        "(dataclasses.fields, asdict, replace and match patterns work on them); the rest are\n"
        "keyword-only.  Every field is readable and settable, type-checked; samples_ms,\n"
        "throughput and flags are read-only.",
        "samples_ms : sequence of float, optional\n"
        "    The per-iteration latencies (ms) in iteration order; read back as a read-only\n"
        "    float64 array.\n",
        "\n\nExamples\n--------\n"
        ">>> s = BenchmarkStats('resize', 'CPU', 2.0, 1.9, 0.3, 2.5, 1.7, 3.1, 500.0, 10, 50)\n"
        ">>> s.throughput\n500.0\n"
        ">>> BenchmarkStats.from_dict(s.to_dict()) == s\nTrue",
        doc, sizeof doc);
}

/* ---- a result filled from its summary and diagnosis ---------------------- */

void
shp_stats_apply_summary(shp_Stats *s, const shp_summary *sm)
{
    s->mean_ms = sm->mean;
    s->median_ms = sm->median;
    s->std_ms = sm->std;
    s->p95_ms = sm->p95;
    s->min_ms = sm->min;
    s->max_ms = sm->max;
    s->fps = sm->mean > 0 ? 1000.0 / sm->mean : 0.0;
    s->p50_ms = sm->p50;
    s->p90_ms = sm->p90;
    s->p99_ms = sm->p99;
    s->iqr_ms = sm->q3 - sm->q1;
    s->ci95_low_ms = sm->ci_low;
    s->ci95_high_ms = sm->ci_high;
    s->outliers = sm->outliers;
}

int
shp_stats_apply_stability(shp_Stats *s, const shp_stability *d)
{
    PyObject *label = PyUnicode_FromString(d->label);
    if (label == NULL)
        return -1;
    Py_XSETREF(s->stability, label);
    s->cv = d->cv;
    s->autocorr_lag1 = d->autocorr;
    s->effective_n = (Py_ssize_t)floor(d->n_eff);
    s->drift = d->drift;
    s->multimodal = d->multimodal;
    s->stab = *d;
    return 0;
}

int
shp_stats_diagnose_stability(const shp_Stats *s, shp_diag *d)
{
    const shp_stability *st = &s->stab;
    if (st->label == NULL)   /* not diagnosed (a result built by hand or loaded) */
        return 0;
    /* one cause, the label's, as flags.c reads it back */
    if (st->multimodal) {
        shp_diag_cause(d, SHP_CAUSE_MULTIMODAL);
        return shp_diag_number(d, "mode_low_ms", st->mode_low) < 0 ||
               shp_diag_number(d, "mode_high_ms", st->mode_high) < 0 ||
               shp_diag_number(d, "slow_share", st->mode_high_frac) < 0 ? -1 : 0;
    }
    if (st->drifting) {
        shp_diag_cause(d, SHP_CAUSE_DRIFTING);
        return shp_diag_number(d, "drift", st->drift);
    }
    if (st->noisy) {
        shp_diag_cause(d, SHP_CAUSE_NOISY);
        double med = s->median_ms;
        return shp_diag_number(d, "iqr_share", med > 0 ? s->iqr_ms / med : NAN) < 0 ||
               shp_diag_number(d, "p95_share", med > 0 ? s->p95_ms / med : NAN) < 0 ? -1 : 0;
    }
    return 0;
}

/* The run's stability label says "drifting" (a str a user may set: compared,
 * never read as C). */
static int
is_drifting(const shp_Stats *s)
{
    return s->stab.drifting || (s->stability != NULL && PyUnicode_Check(s->stability) &&
                                PyUnicode_CompareWithASCIIString(s->stability, "drifting") == 0);
}

int
shp_stats_apply_rerun(shp_state *st, shp_Stats *s, double known_spread)
{
    if (s->samples == NULL || s->nsamples < 1)
        return 0;
    Py_ssize_t *sizes = NULL, nruns = 0, total;
    if (shp_counts_array(s->run_sizes, &sizes, &nruns, &total) < 0)
        return -1;
    /* the floor of a single run: this machine's calibration, else the assumed
     * spread; a run that started on a busy machine allows at least what busy
     * runs showed, whatever a calibration said */
    int calibrated = st->machine_spread >= 0.0, busy = s->machine_busy == 1;
    double floor = calibrated ? st->machine_spread : SHP_ASSUMED_RUN_SPREAD;
    double floor_df = calibrated ? st->machine_spread_df : INFINITY;
    if (busy && floor < SHP_ASSUMED_BUSY_RUN_SPREAD) {
        floor = SHP_ASSUMED_BUSY_RUN_SPREAD;
        floor_df = INFINITY;
    }
    shp_rerun rr;
    int rc = shp_rerun_interval(s->samples, s->nsamples, sizes, nruns, known_spread, floor,
                                floor_df, s->ci95_low_ms, s->ci95_high_ms, &rr);
    PyMem_Free(sizes);
    if (rc < 0)
        return -1;
    const char *basis = rr.basis == SHP_RERUN_ASSUMED && busy ? "assumed busy"
                                                               : shp_rerun_basis_name(rr.basis);
    /* One run whose samples do not describe one level: where a rerun lands is not
     * known from it -- no interval, the reason instead (repetitions measure one) */
    int modes = s->multimodal == 1, drifting = is_drifting(s);
    if (nruns <= 1 && basis != NULL && (modes || drifting)) {
        basis = modes ? SHP_RERUN_NONE_MODES : SHP_RERUN_NONE_DRIFT;
        rr.lo = rr.hi = NAN;
    }
    else if (basis != NULL) {   /* never below half the fastest sample, above twice the slowest */
        rr.lo = fmax(rr.lo, 0.5 * s->min_ms);
        rr.hi = fmin(rr.hi, 2.0 * s->max_ms);
    }
    PyObject *word = basis ? PyUnicode_FromString(basis) : NULL;
    if (basis != NULL && word == NULL)
        return -1;
    s->rerun_low_ms = basis ? rr.lo : NAN;
    s->rerun_high_ms = basis ? rr.hi : NAN;
    Py_XSETREF(s->rerun_basis, word);
    return 0;
}

PyObject *
shp_apply_rerun_py(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"stats", "run_spread"};
    static const shp_argspec spec = {"_apply_rerun", names, 2, 1, 1, 0};
    shp_state *st = PyModule_GetState(module);
    PyObject *v[2];
    double known = -1.0;
    if (shp_args_parse(&spec, args, nargs, kwnames, v) < 0)
        return NULL;
    if (!PyObject_TypeCheck(v[0], st->stats_type))
        return shp_arg_type_error("_apply_rerun()", "stats", "a BenchmarkStats", v[0]), NULL;
    if (v[1] != NULL && v[1] != Py_None) {
        if (shp_arg_real(v[1], "_apply_rerun()", "run_spread", &known) < 0)
            return NULL;
        if (!(known >= 0.0 && known < 1.0))
            return shp_arg_value_error("_apply_rerun()", "run_spread",
                                       "a number in [0, 1) (0.03 = 3%)", v[1]), NULL;
    }
    if (shp_stats_apply_rerun(st, (shp_Stats *)v[0], known) < 0)
        return NULL;
    return Py_NewRef(v[0]);
}

shp_Stats *
shp_stats_from_buffer(shp_state *st, double *buf, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!isfinite(buf[i])) {
            PyMem_Free(buf);
            PyErr_Format(PyExc_ValueError, "sample %zd is not finite", i);
            return NULL;
        }
    }
    double *scratch = PyMem_Malloc((size_t)n * sizeof(double));
    shp_Stats *s = scratch ? shp_stats_alloc(st) : NULL;
    if (s == NULL) {
        PyMem_Free(buf);
        PyMem_Free(scratch);
        return scratch ? NULL : (shp_Stats *)PyErr_NoMemory();
    }
    shp_summary sm;
    shp_stability stab;
    shp_summarize(buf, n, scratch, &sm);
    shp_stability_compute(buf, n, scratch, &sm, &stab);
    PyMem_Free(scratch);
    shp_stats_apply_summary(s, &sm);
    if (shp_stats_apply_stability(s, &stab) < 0) {
        PyMem_Free(buf);
        Py_DECREF(s);
        return NULL;
    }
    if (shp_stats_adopt_samples(s, buf, n) < 0) {
        Py_DECREF(s);
        return NULL;
    }
    s->timed_iters = n;
    if (shp_stats_apply_rerun(st, s, -1.0) < 0) {
        Py_DECREF(s);
        return NULL;
    }
    return s;
}
