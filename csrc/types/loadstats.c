/*
 * loadstats.c -- the LoadStats type: what a run under load measured, and a
 * result filled from its arrays.
 *
 * A heap type over one field table (fields.c), as BenchmarkStats.  Beside
 * the fields it owns four arrays, one value per completed request in arrival
 * order: the intended arrival (ms from the schedule's start), the latency
 * (intended arrival to completion), the service time (the call and its sync)
 * and the harness's lag (how long after the request could start the call
 * began).  They are exposed as read-only NumPy views that keep the buffer
 * alive, and travel in to_dict(samples=True) / to_json at full precision.
 */
#include "types/types.h"

#include <math.h>
#include <string.h>
#include <structmember.h>
#include <numpy/arrayobject.h>

#define L_OFF(m) offsetof(shp_LoadStats, m)
#define REQ(nm, kind, m, doc) {nm, kind, L_OFF(m), SHP_R_NONE, 1, 0, 0.0, SHP_SHOW_ALWAYS, doc}
#define KW(nm, kind, m, rnd, dflt, show, doc) {nm, kind, L_OFF(m), rnd, 0, 1, dflt, show, doc}
#define MS(nm, m, show, doc) KW(nm, SHP_F_OPT_DOUBLE, m, SHP_R_MS, 0, show, doc)

static const shp_field load_fields[] = {
    REQ("name", SHP_F_STR, name, "Label of the benchmark target."),
    REQ("device", SHP_F_STR, device, "Device or execution-provider label."),
    KW("arrival", SHP_F_OPT_STR, arrival, SHP_R_NONE, 0, SHP_SHOW_ALWAYS,
       "How requests arrived: 'poisson', 'uniform', 'closed' (each worker's next request "
       "when its last completed) or 'offline' (all at the start)."),
    KW("offered_qps", SHP_F_OPT_DOUBLE, offered_qps, SHP_R_FPS, 0, SHP_SHOW_ALWAYS,
       "The target rate asked for (requests per second); None for 'closed' and 'offline'."),
    KW("arrival_qps", SHP_F_OPT_DOUBLE, arrival_qps, SHP_R_FPS, 0, SHP_SHOW_ALWAYS,
       "The rate the drawn schedule realised: requests scheduled / duration_s."),
    KW("achieved_qps", SHP_F_OPT_DOUBLE, achieved_qps, SHP_R_FPS, 0, SHP_SHOW_ALWAYS,
       "Completions per second, from the start to the last completion."),
    KW("duration_s", SHP_F_DOUBLE, duration_s, SHP_R_NONE, 0.0, SHP_SHOW_IF_SET,
       "The arrival window (s): requests arrive in [0, duration_s)."),
    KW("workers", SHP_F_COUNT, workers, SHP_R_NONE, 1.0, SHP_SHOW_IF_SET,
       "Threads serving the requests in arrival order."),
    KW("warmup_iters", SHP_F_COUNT, warmup_iters, SHP_R_NONE, 0.0, SHP_SHOW_NEVER,
       "Warm-up calls made before the schedule started."),
    KW("requests", SHP_F_COUNT, requests, SHP_R_NONE, 0.0, SHP_SHOW_IF_SET,
       "Requests that arrived in the window (the schedule's length)."),
    KW("completed", SHP_F_COUNT, completed, SHP_R_NONE, 0.0, SHP_SHOW_ALWAYS,
       "Requests served; the arrays hold one value each."),
    KW("dropped", SHP_F_COUNT, dropped, SHP_R_NONE, 0.0, SHP_SHOW_IF_SET,
       "Requests refused on arrival because max_queue requests were waiting."),
    KW("unserved", SHP_F_COUNT, unserved, SHP_R_NONE, 0.0, SHP_SHOW_IF_SET,
       "Requests never started: still waiting when the run stopped (an overloaded run's "
       "backlog after the drain time, or an interrupted run's)."),
    KW("seed", SHP_F_OPT_COUNT, seed, SHP_R_NONE, 0, SHP_SHOW_NEVER,
       "The schedule's seed (drawn when none was given: the run can be repeated with it)."),
    KW("max_queue", SHP_F_OPT_COUNT, max_queue, SHP_R_NONE, 0, SHP_SHOW_IF_SET,
       "The most requests that may wait; None: no limit."),
    MS("mean_ms", mean_ms, SHP_SHOW_NEVER, "Mean latency (ms)."),
    MS("p50_ms", p50_ms, SHP_SHOW_ALWAYS,
       "Median latency (ms): intended arrival to completion, queueing included."),
    MS("p90_ms", p90_ms, SHP_SHOW_NEVER, "90th percentile of latency (ms)."),
    MS("p99_ms", p99_ms, SHP_SHOW_ALWAYS, "99th percentile of latency (ms)."),
    MS("p999_ms", p999_ms, SHP_SHOW_NEVER, "99.9th percentile of latency (ms)."),
    MS("max_ms", max_ms, SHP_SHOW_NEVER, "Largest latency (ms)."),
    MS("p50_ci_low_ms", p50_ci_low_ms, SHP_SHOW_NEVER,
       "Low end of the 95% interval of p50_ms (block bootstrap: correlated latencies)."),
    MS("p50_ci_high_ms", p50_ci_high_ms, SHP_SHOW_NEVER, "High end of that interval (ms)."),
    MS("p99_ci_low_ms", p99_ci_low_ms, SHP_SHOW_IF_SET,
       "Low end of the 95% interval of p99_ms (block bootstrap: correlated latencies)."),
    MS("p99_ci_high_ms", p99_ci_high_ms, SHP_SHOW_IF_SET, "High end of that interval (ms)."),
    KW("ci_block", SHP_F_OPT_COUNT, ci_block, SHP_R_NONE, 0, SHP_SHOW_NEVER,
       "Consecutive latencies per bootstrap block (from their correlation)."),
    MS("service_mean_ms", service_mean_ms, SHP_SHOW_NEVER,
       "Mean service time (ms): the call and its sync, queueing excluded."),
    MS("service_p50_ms", service_p50_ms, SHP_SHOW_NEVER, "Median service time (ms)."),
    MS("service_p99_ms", service_p99_ms, SHP_SHOW_NEVER, "99th percentile of service time (ms)."),
    MS("service_max_ms", service_max_ms, SHP_SHOW_NEVER, "Largest service time (ms)."),
    KW("queue_share", SHP_F_OPT_DOUBLE, queue_share, SHP_R_RATIO, 0, SHP_SHOW_IF_SET,
       "Share of the latency spent before the call began: 1 - mean service / mean latency."),
    KW("overloaded", SHP_F_OPT_BOOL, overloaded, SHP_R_NONE, 0, SHP_SHOW_IF_SET,
       "Arrivals outpaced service: the backlog grew through the second half of the window "
       "beyond what the arrivals' own noise explains; None: not judged (too few requests, "
       "or 'closed' / 'offline')."),
    KW("backlog_growth_qps", SHP_F_OPT_DOUBLE, backlog_growth_qps, SHP_R_FPS, 0,
       SHP_SHOW_IF_SET,
       "How fast requests not completed (dropped ones included) piled up over the second "
       "half of the window, per second; about 0 when the servers keep up."),
    KW("backlog_end", SHP_F_OPT_COUNT, backlog_end, SHP_R_NONE, 0, SHP_SHOW_NEVER,
       "Requests waiting or in service when the arrival window closed."),
    MS("lag_p50_ms", lag_p50_ms, SHP_SHOW_NEVER,
       "The harness's own lag (ms), median: how long after a request could start (its "
       "arrival, or its worker's previous completion) its call began."),
    MS("lag_p99_ms", lag_p99_ms, SHP_SHOW_NEVER, "99th percentile of that lag (ms)."),
    MS("lag_max_ms", lag_max_ms, SHP_SHOW_NEVER, "Largest lag (ms)."),
    KW("batch_size", SHP_F_COUNT, batch_size, SHP_R_NONE, 1.0, SHP_SHOW_IF_SET,
       "Items per request; throughput = achieved_qps * batch_size."),
    KW("machine_busy", SHP_F_OPT_BOOL, machine_busy, SHP_R_NONE, 0, SHP_SHOW_IF_SET,
       "The machine was busy when the run started (as BenchmarkStats.machine_busy)."),
    KW("env", SHP_F_OPT_DICT, env, SHP_R_NONE, 0, SHP_SHOW_NEVER,
       "Environment the numbers were taken in (as BenchmarkStats.env)."),
    KW("search", SHP_F_OPT_DICT, search, SHP_R_NONE, 0, SHP_SHOW_NEVER,
       "find_peak_qps: the bound, the percentile and every rate tried with its verdict."),
    {0},
};
#define N_LOAD_FIELDS (sizeof(load_fields) / sizeof(load_fields[0]) - 1)

static const char *const array_names[SHP_LA_N] = {
    "arrivals_ms", "latencies_ms", "service_ms", "lag_ms",
};

/* ---- lifecycle --------------------------------------------------------- */

static PyObject *
Load_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    (void)args;
    (void)kwargs;
    shp_LoadStats *self = (shp_LoadStats *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    shp_fields_set_defaults((PyObject *)self, load_fields);
    return (PyObject *)self;
}

shp_LoadStats *
shp_load_alloc(shp_state *st)
{
    return (shp_LoadStats *)Load_new(st->load_type, NULL, NULL);
}

#define SHP_LOAD_CAPSULE "spatialhub.load_array"

static void
array_capsule_free(PyObject *cap)
{
    PyMem_Free(PyCapsule_GetPointer(cap, SHP_LOAD_CAPSULE));
}

int
shp_load_adopt(shp_LoadStats *s, int which, double *x, Py_ssize_t n)
{
    /* owned by a capsule: views of the old array keep it alive when the
     * array is replaced (__init__ / __setstate__ again) */
    PyObject *owner = NULL;
    if (x != NULL) {
        owner = PyCapsule_New(x, SHP_LOAD_CAPSULE, array_capsule_free);
        if (owner == NULL) {
            PyMem_Free(x);
            return -1;
        }
    }
    Py_XSETREF(s->arr[which].owner, owner);
    s->arr[which].x = x;
    s->arr[which].n = x != NULL ? n : 0;
    return 0;
}

static void
drop_arrays(shp_LoadStats *s)
{
    for (int k = 0; k < SHP_LA_N; k++) {
        Py_CLEAR(s->arr[k].owner);
        s->arr[k].x = NULL;
        s->arr[k].n = 0;
    }
}

/* ci_block against the latencies it cuts into blocks: at most their number (a
 * block longer than the series would resample one wrapped series, an interval
 * of nothing).  0, or -1 with ValueError; `where` names the call. */
static int
check_block(const shp_LoadStats *s, const char *where)
{
    Py_ssize_t n = s->arr[SHP_LA_LATENCIES].n;
    if (s->ci_block > 0 && s->arr[SHP_LA_LATENCIES].owner != NULL && s->ci_block > n) {
        PyErr_Format(PyExc_ValueError, "%s ci_block must be at most the number of latencies "
                     "(%zd), got %zd; leave it None to have it drawn from their correlation",
                     where, n, s->ci_block);
        return -1;
    }
    return 0;
}

static int
Load_init(PyObject *op, PyObject *args, PyObject *kwargs)
{
    shp_LoadStats *self = (shp_LoadStats *)op;
    PyObject *kw = NULL, *given[SHP_LA_N] = {NULL};
    int rc = -1;
    if (kwargs != NULL) {
        kw = PyDict_Copy(kwargs);
        if (kw == NULL)
            return -1;
        for (int k = 0; k < SHP_LA_N; k++) {
            given[k] = PyDict_GetItemString(kw, array_names[k]);   /* borrowed */
            if (given[k] != NULL) {
                Py_INCREF(given[k]);
                if (PyDict_DelItemString(kw, array_names[k]) < 0)
                    goto done;
            }
        }
    }
    shp_fields_set_defaults(op, load_fields);   /* __init__ may run twice */
    drop_arrays(self);
    if (shp_fields_init(op, load_fields, args, kw) < 0)
        goto done;
    for (int k = 0; k < SHP_LA_N; k++) {
        if (given[k] == NULL || given[k] == Py_None)
            continue;
        if (PyUnicode_Check(given[k]) || PyBytes_Check(given[k])) {
            PyErr_Format(PyExc_TypeError, "LoadStats.%s must be a sequence of numbers, not %.100s",
                         array_names[k], Py_TYPE(given[k])->tp_name);
            goto done;
        }
        double *buf;
        Py_ssize_t n;
        if (shp_samples_from_object(given[k], &buf, &n) < 0)
            goto done;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (!isfinite(buf[i])) {
                PyObject *bad = PyFloat_FromDouble(buf[i]);
                PyMem_Free(buf);
                if (bad != NULL) {
                    PyErr_Format(PyExc_ValueError, "LoadStats.%s[%zd] must be a finite number "
                                 "of ms, got %R", array_names[k], i, bad);
                    Py_DECREF(bad);
                }
                goto done;
            }
        }
        if (shp_load_adopt(self, k, buf, n) < 0)
            goto done;
    }
    if (check_block(self, "LoadStats:") < 0)
        goto done;
    rc = 0;
done:
    for (int k = 0; k < SHP_LA_N; k++)
        Py_XDECREF(given[k]);
    Py_XDECREF(kw);
    return rc;
}

static int
Load_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    return shp_fields_traverse(self, load_fields, visit, arg);
}

static int
Load_clear(PyObject *self)
{
    shp_fields_clear(self, load_fields);
    return 0;
}

static void
Load_dealloc(PyObject *op)
{
    shp_LoadStats *self = (shp_LoadStats *)op;
    PyTypeObject *tp = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    if (self->weakreflist != NULL)
        PyObject_ClearWeakRefs(op);
    Load_clear(op);
    drop_arrays(self);
    tp->tp_free(op);
    Py_DECREF(tp);
}

/* ---- protocol ---------------------------------------------------------- */

static PyObject *
Load_repr(PyObject *self)
{
    return shp_fields_repr(self, load_fields);
}

static int
arrays_equal(shp_LoadStats *x, shp_LoadStats *y)
{
    for (int k = 0; k < SHP_LA_N; k++) {
        const shp_array *a = &x->arr[k], *b = &y->arr[k];
        if ((a->x == NULL) != (b->x == NULL) || a->n != b->n)
            return 0;
        for (Py_ssize_t i = 0; i < a->n; i++)
            if (!(a->x[i] == b->x[i] || (isnan(a->x[i]) && isnan(b->x[i]))))
                return 0;
    }
    return 1;
}

static PyObject *
Load_richcompare(PyObject *a, PyObject *b, int op)
{
    shp_state *st = shp_state_from_type(Py_TYPE(a));
    if ((op != Py_EQ && op != Py_NE) || st == NULL || !PyObject_TypeCheck(b, st->load_type))
        Py_RETURN_NOTIMPLEMENTED;
    int eq = shp_fields_equal(a, b, load_fields);
    if (eq < 0)
        return NULL;
    if (eq) {
        /* held: the comparison of a dict field above may have run user code */
        Py_INCREF(a);
        Py_INCREF(b);
        eq = arrays_equal((shp_LoadStats *)a, (shp_LoadStats *)b);
        Py_DECREF(a);
        Py_DECREF(b);
    }
    return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

/* ---- computed attributes ----------------------------------------------- */

static PyObject *
Load_get_array(PyObject *op, void *closure)
{
    shp_LoadStats *self = (shp_LoadStats *)op;
    const shp_array *a = &self->arr[(int)(intptr_t)closure];
    if (a->owner == NULL)
        Py_RETURN_NONE;
    PyObject *owner = Py_NewRef(a->owner);   /* the buffer of this moment */
    npy_intp dim = (npy_intp)a->n;
    PyObject *arr = PyArray_SimpleNewFromData(1, &dim, NPY_DOUBLE, (void *)a->x);
    if (arr == NULL) {
        Py_DECREF(owner);
        return NULL;
    }
    PyArray_CLEARFLAGS((PyArrayObject *)arr, NPY_ARRAY_WRITEABLE);
    if (PyArray_SetBaseObject((PyArrayObject *)arr, owner) < 0) {   /* steals owner */
        Py_DECREF(arr);
        return NULL;
    }
    return arr;
}

static PyObject *
Load_get_throughput(PyObject *op, void *closure)
{
    (void)closure;
    shp_LoadStats *self = (shp_LoadStats *)op;
    if (isnan(self->achieved_qps))
        Py_RETURN_NONE;
    return PyFloat_FromDouble(self->achieved_qps * (double)self->batch_size);
}

static PyObject *
Load_get_flags(PyObject *op, void *closure)
{
    (void)closure;
    const char *labels[SHP_MAX_FLAGS];
    int n = shp_load_flags((shp_LoadStats *)op, labels);
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

static const PyGetSetDef load_extra_getset[] = {
    {"arrivals_ms", Load_get_array, NULL,
     "Each completed request's intended arrival (ms from the schedule's start), in arrival "
     "order: a read-only float64 NumPy view, or None.", (void *)(intptr_t)SHP_LA_ARRIVALS},
    {"latencies_ms", Load_get_array, NULL,
     "Each completed request's latency (ms): intended arrival to completion, queueing "
     "included; arrival order.", (void *)(intptr_t)SHP_LA_LATENCIES},
    {"service_ms", Load_get_array, NULL,
     "Each completed request's service time (ms): its call and the sync after it.",
     (void *)(intptr_t)SHP_LA_SERVICE},
    {"lag_ms", Load_get_array, NULL,
     "Each completed request's harness lag (ms): how long after it could start (its "
     "arrival, or its worker's previous completion) its call began.  With one worker, "
     "latency[i] = max(0, latency[i-1] - (arrival[i] - arrival[i-1])) + lag[i] + "
     "service[i] exactly (Lindley).", (void *)(intptr_t)SHP_LA_LAG},
    {"throughput", Load_get_throughput, NULL, "achieved_qps * batch_size: items per second.",
     NULL},
    {"flags", Load_get_flags, NULL,
     "What makes the figures doubtful, as short labels (a tuple of str): 'overloaded', "
     "'requests dropped', 'requests unserved', 'few requests', 'scheduler lag', 'busy "
     "machine'.  Read from the other fields; the table prints them as a footnote.", NULL},
    {0},
};

static PyGetSetDef load_getset[N_LOAD_FIELDS + 7];

/* ---- methods ----------------------------------------------------------- */

static PyObject *
array_list(const shp_array *a)
{
    PyObject *owner = Py_NewRef(a->owner);   /* making the list may run a finalizer */
    PyObject *l = PyList_New(a->n);
    for (Py_ssize_t i = 0; l != NULL && i < a->n; i++) {
        PyObject *v = PyFloat_FromDouble(a->x[i]);
        if (v == NULL)
            Py_CLEAR(l);
        else
            PyList_SET_ITEM(l, i, v);
    }
    Py_DECREF(owner);
    return l;
}

/* Every field at full precision, the arrays too when `arrays`. */
static PyObject *
load_dict(shp_LoadStats *self, int arrays)
{
    PyObject *d = shp_fields_dict((PyObject *)self, load_fields, 0);
    for (int k = 0; d != NULL && arrays && k < SHP_LA_N; k++) {
        if (self->arr[k].owner == NULL)
            continue;
        shp_array a = self->arr[k];
        PyObject *l = array_list(&a);
        if (l == NULL || shp_dict_set(d, array_names[k], l) < 0)
            Py_CLEAR(d);
        Py_XDECREF(l);
    }
    return d;
}

static int
parse_flags(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, const char *fname,
            int *samples, PyObject **indent)
{
    static const char *const names[] = {"samples", "indent"};
    shp_argspec spec = {fname, names, indent != NULL ? 2 : 1, 0, 0, 0};
    PyObject *v[2];
    *samples = 0;
    if (shp_args_parse(&spec, args, nargs, kwnames, v) < 0)
        return -1;
    if (v[0] != NULL && shp_arg_flag(v[0], samples) < 0)
        return -1;
    if (indent != NULL && v[1] != NULL)
        *indent = v[1];
    return 0;
}

static PyObject *
Load_to_dict(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    int samples;
    if (parse_flags(args, nargs, kwnames, "to_dict", &samples, NULL) < 0)
        return NULL;
    return load_dict((shp_LoadStats *)self, samples);
}

static PyObject *
Load_to_json(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    int samples;
    PyObject *indent = Py_None, *json = NULL, *dumps = NULL, *d = NULL, *a = NULL, *kw = NULL;
    PyObject *res = NULL;
    if (parse_flags(args, nargs, kwnames, "to_json", &samples, &indent) < 0)
        return NULL;
    Py_INCREF(indent);
    if ((d = load_dict((shp_LoadStats *)self, samples)) == NULL ||
        (json = PyImport_ImportModule("json")) == NULL ||
        (dumps = PyObject_GetAttrString(json, "dumps")) == NULL ||
        (a = PyTuple_Pack(1, d)) == NULL ||
        (kw = Py_BuildValue("{sOsO}", "indent", indent, "allow_nan", Py_False)) == NULL)
        goto done;
    res = PyObject_Call(dumps, a, kw);   /* floats by repr: they read back exactly */
done:
    Py_XDECREF(kw);
    Py_XDECREF(a);
    Py_XDECREF(dumps);
    Py_XDECREF(json);
    Py_XDECREF(d);
    Py_DECREF(indent);
    return res;
}

static PyObject *
Load_from_dict(PyObject *cls, PyObject *d)
{
    if (!PyDict_Check(d))
        return shp_arg_type_error("LoadStats.from_dict()", "d", "a dict", d), NULL;
    PyObject *args = PyTuple_New(0);
    if (args == NULL)
        return NULL;
    PyObject *res = PyObject_Call(cls, args, d);
    Py_DECREF(args);
    return res;
}

static PyObject *
Load_reduce(PyObject *self, PyObject *unused)
{
    (void)unused;
    PyObject *copyreg = PyImport_ImportModule("copyreg");
    PyObject *newobj = copyreg ? PyObject_GetAttrString(copyreg, "__newobj__") : NULL;
    PyObject *state = newobj ? load_dict((shp_LoadStats *)self, 1) : NULL;
    PyObject *res = state ? Py_BuildValue("O(O)O", newobj, (PyObject *)Py_TYPE(self), state)
                          : NULL;
    Py_XDECREF(state);
    Py_XDECREF(newobj);
    Py_XDECREF(copyreg);
    return res;
}

static PyObject *
Load_setstate(PyObject *self, PyObject *state)
{
    if (!PyDict_Check(state))
        return shp_arg_type_error("LoadStats.__setstate__()", "state", "a dict", state), NULL;
    PyObject *args = PyTuple_New(0);
    Py_INCREF(state);
    int rc = args != NULL ? Load_init(self, args, state) : -1;
    Py_DECREF(state);
    Py_XDECREF(args);
    return rc < 0 ? NULL : Py_NewRef(Py_None);
}

/* percentile_ci(percentile): (value, low, high) of that percentile of the
 * latencies, the interval by the same block bootstrap as p99's. */
static PyObject *
Load_percentile_ci(PyObject *op, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"percentile"};
    static const shp_argspec spec = {"percentile_ci", names, 1, 1, 1, 0};
    shp_LoadStats *self = (shp_LoadStats *)op;
    PyObject *v[1];
    double pct;
    if (shp_args_parse(&spec, args, nargs, kwnames, v) < 0 ||
        shp_arg_real(v[0], "percentile_ci()", "percentile", &pct) < 0)
        return NULL;
    if (!(pct >= 0.0 && pct <= 100.0))
        return shp_arg_value_error("percentile_ci()", "percentile", "a number in [0, 100]",
                                   v[0]), NULL;
    shp_array a = self->arr[SHP_LA_LATENCIES];
    if (a.owner == NULL || a.n == 0)
        return Py_BuildValue("(OOO)", Py_None, Py_None, Py_None);
    if (check_block(self, "LoadStats.percentile_ci():") < 0)
        return NULL;
    Py_INCREF(a.owner);
    double value = NAN, lo = NAN, hi = NAN, q = pct / 100.0;
    double *copy = PyMem_Malloc((size_t)a.n * sizeof(double));
    int rc = -1;
    if (copy == NULL) {
        PyErr_NoMemory();
    }
    else {
        memcpy(copy, a.x, (size_t)a.n * sizeof(double));
        value = shp_percentile_inplace(copy, a.n, q);
        Py_ssize_t block = self->ci_block > 0 ? self->ci_block : shp_block_length(a.x, a.n);
        uint64_t seed = self->seed >= 0 ? (uint64_t)self->seed : 0;
        rc = shp_percentile_block_ci(a.x, a.n, &q, 1, block, seed, shp_bootstrap_reps(a.n),
                                     &lo, &hi);
        PyMem_Free(copy);
    }
    Py_DECREF(a.owner);
    if (rc < 0)
        return NULL;
    if (isnan(lo))
        return Py_BuildValue("(dOO)", value, Py_None, Py_None);
    return Py_BuildValue("(ddd)", value, lo, hi);
}

static PyObject *
Load_repr_markdown(PyObject *self, PyObject *unused)
{
    (void)unused;
    return shp_load_markdown(self);
}

static PyObject *
Load_repr_html(PyObject *self, PyObject *unused)
{
    (void)unused;
    return shp_load_html(self);
}

static PyMethodDef load_methods[] = {
    {"to_dict", (PyCFunction)(void (*)(void))Load_to_dict, METH_FASTCALL | METH_KEYWORDS,
     "to_dict($self, /, *, samples=False)\n--\n\n"
     "Every field as a dict, at full precision.\n\n"
     "Parameters\n----------\nsamples : bool, default False\n"
     "    Also the arrays (arrivals_ms, latencies_ms, service_ms, lag_ms) as lists.\n\n"
     "Returns\n-------\ndict\n    LoadStats.from_dict reads it back as an equal result."},
    {"to_json", (PyCFunction)(void (*)(void))Load_to_json, METH_FASTCALL | METH_KEYWORDS,
     "to_json($self, /, *, samples=False, indent=None)\n--\n\n"
     "The result as JSON, every number at full precision (None for a missing figure).\n\n"
     "Parameters\n----------\nsamples : bool, default False\n"
     "    Also the arrays.\nindent : int or str or None, default None\n"
     "    As json.dumps.\n\n"
     "Returns\n-------\nstr\n    LoadStats.from_dict(json.loads(text)) reads it back as an "
     "equal result."},
    {"from_dict", Load_from_dict, METH_O | METH_CLASS,
     "from_dict($cls, d, /)\n--\n\n"
     "A LoadStats from what to_dict or to_json wrote.\n\n"
     "Parameters\n----------\nd : dict\n    The fields, and the arrays when saved.\n\n"
     "Returns\n-------\nLoadStats"},
    {"percentile_ci", (PyCFunction)(void (*)(void))Load_percentile_ci,
     METH_FASTCALL | METH_KEYWORDS,
     "percentile_ci($self, /, percentile)\n--\n\n"
     "A latency percentile and its 95% interval, as p99_ms has it.\n\n"
     "The interval is a seeded circular block bootstrap over the latencies in arrival\n"
     "order, with ci_block latencies per block: consecutive latencies of a queue are\n"
     "correlated, so independent order statistics would be too narrow.\n\n"
     "Parameters\n----------\npercentile : float\n    In [0, 100], e.g. 90.0.\n\n"
     "Returns\n-------\ntuple of float\n"
     "    (value_ms, low_ms, high_ms); None in place of what fewer than two latencies\n"
     "    cannot give."},
    {"__reduce__", Load_reduce, METH_NOARGS, "Pickle support (all fields and arrays)."},
    {"__setstate__", Load_setstate, METH_O, "Pickle support."},
    {"_repr_markdown_", Load_repr_markdown, METH_NOARGS, "The one-row Markdown table (Jupyter)."},
    {"_repr_html_", Load_repr_html, METH_NOARGS, "The one-row HTML table (Jupyter)."},
    {0},
};

static PyMemberDef load_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(shp_LoadStats, weakreflist), READONLY, NULL},
    {0},
};

static PyType_Slot load_slots[] = {
    {Py_tp_new, Load_new},
    {Py_tp_init, Load_init},
    {Py_tp_dealloc, Load_dealloc},
    {Py_tp_traverse, Load_traverse},
    {Py_tp_clear, Load_clear},
    {Py_tp_repr, Load_repr},
    {Py_tp_richcompare, Load_richcompare},
    {Py_tp_hash, PyObject_HashNotImplemented},
    {Py_tp_methods, load_methods},
    {Py_tp_getset, load_getset},
    {Py_tp_members, load_members},
    {Py_tp_doc, "Latency under load: what benchmark_load measured."},
    {0, NULL},
};

PyType_Spec shp_load_spec = {
    .name = "spatialhub.utils.profiling.LoadStats",
    .basicsize = sizeof(shp_LoadStats),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = load_slots,
};

void
shp_load_prepare_spec(void)
{
    static char doc[8192];
    shp_fields_fill_getset(load_fields, load_extra_getset, load_getset);
    shp_fields_spec_doc(
        &shp_load_spec, load_fields,
        "arrivals_ms=None, latencies_ms=None, service_ms=None, lag_ms=None",
        "Latency under load: what benchmark_load measured.\n\n"
        "Requests arrived on a schedule fixed in advance; each latency runs from the\n"
        "request's intended arrival to its completion, so waiting behind a slow call\n"
        "counts.  Percentiles are NumPy-linear over the completed requests; their\n"
        "intervals come from a block bootstrap (docs/load.md).  Every field is readable\n"
        "and settable, type-checked; the arrays, throughput and flags are read-only.",
        "arrivals_ms, latencies_ms, service_ms, lag_ms : sequence of float, optional\n"
        "    The per-request arrays (ms) in arrival order; read back as read-only\n"
        "    float64 arrays.\n",
        "\n\nExamples\n--------\n"
        ">>> s = LoadStats('f', 'CPU', offered_qps=50.0, completed=2, latencies_ms=[1.0, 3.0])\n"
        ">>> float(s.latencies_ms.max())\n3.0\n"
        ">>> LoadStats.from_dict(s.to_dict(samples=True)) == s\nTrue",
        doc, sizeof doc);
}

/* ---- a result filled from its arrays -------------------------------------- */

/* NumPy-linear percentiles q[0..nq) of x[0..n) (n >= 1) into out; the mean
 * and max too.  0, or -1 with MemoryError. */
static int
summarise(const double *x, Py_ssize_t n, const double *q, int nq, double *out, double *mean,
          double *max)
{
    double *c = PyMem_Malloc((size_t)n * sizeof(double));
    if (c == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(c, x, (size_t)n * sizeof(double));
    double sum = 0.0, mx = -INFINITY;
    for (Py_ssize_t i = 0; i < n; i++) {
        sum += x[i];
        mx = x[i] > mx ? x[i] : mx;
    }
    for (int j = 0; j < nq; j++)
        out[j] = shp_percentile_inplace(c, n, q[j]);
    PyMem_Free(c);
    if (mean != NULL)
        *mean = sum / (double)n;
    if (max != NULL)
        *max = mx;
    return 0;
}

int
shp_load_summarize(shp_LoadStats *s)
{
    const shp_array *lat = &s->arr[SHP_LA_LATENCIES], *svc = &s->arr[SHP_LA_SERVICE];
    const shp_array *lag = &s->arr[SHP_LA_LAG];
    Py_ssize_t n = lat->x != NULL ? lat->n : 0;
    if (n == 0)
        return 0;
    /* as NumPy turns percentiles into fractions: 99.9 / 100 is not the literal 0.999 */
    static const double q[4] = {50 / 100.0, 90 / 100.0, 99 / 100.0, 99.9 / 100.0};
    double p[4];
    if (summarise(lat->x, n, q, 4, p, &s->mean_ms, &s->max_ms) < 0)
        return -1;
    s->p50_ms = p[0];
    s->p90_ms = p[1];
    s->p99_ms = p[2];
    s->p999_ms = p[3];
    if (svc->x != NULL && svc->n == n) {
        double sp[2];
        static const double sq[2] = {0.5, 0.99};
        if (summarise(svc->x, n, sq, 2, sp, &s->service_mean_ms, &s->service_max_ms) < 0)
            return -1;
        s->service_p50_ms = sp[0];
        s->service_p99_ms = sp[1];
        s->queue_share = s->mean_ms > 0 ? 1.0 - s->service_mean_ms / s->mean_ms : NAN;
    }
    if (lag->x != NULL && lag->n == n) {
        double lp[2];
        static const double lq[2] = {0.5, 0.99};
        if (summarise(lag->x, n, lq, 2, lp, NULL, &s->lag_max_ms) < 0)
            return -1;
        s->lag_p50_ms = lp[0];
        s->lag_p99_ms = lp[1];
    }
    s->ci_block = shp_block_length(lat->x, n);
    static const double cq[2] = {0.5, 0.99};
    double lo[2], hi[2];
    if (shp_percentile_block_ci(lat->x, n, cq, 2, s->ci_block,
                                s->seed >= 0 ? (uint64_t)s->seed : 0, shp_bootstrap_reps(n),
                                lo, hi) < 0)
        return -1;
    s->p50_ci_low_ms = lo[0];
    s->p50_ci_high_ms = hi[0];
    s->p99_ci_low_ms = lo[1];
    s->p99_ci_high_ms = hi[1];
    return 0;
}
