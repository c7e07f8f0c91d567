/*
 * rules.c -- the core's rules, given to the Python layer so that each is
 * written once: the t quantile and the margin rule of every verdict
 * (stats/verdict.c), Markdown and HTML escaping (render/markup.c), the count
 * rule of every argument (capi/args.c), the near-option note on a keyword meant
 * for the harness (capi/notes.c), the pooling of several runs or segments into
 * one result, and the queue recursion a run under load is held to
 * (stats/queueing.c).  The plugin's gate, the scope profiler's tables,
 * the runner and the CLI call these; none keeps a copy.
 */
#include "types/types.h"

#include <math.h>
#include <string.h>
#include <numpy/arrayobject.h>

/* _t975(df): Student's t two-sided 95% quantile (df may be inf). */
PyObject *
shp_t975_py(PyObject *module, PyObject *arg)
{
    (void)module;
    double df;
    if (shp_arg_real(arg, "_t975()", "df", &df) < 0)
        return NULL;
    if (isnan(df))
        return shp_arg_value_error("_t975()", "df", "a number", arg), NULL;
    return PyFloat_FromDouble(shp_t975(df));
}

/* _judge(ratio, lo, hi, margin): "slower" / "faster" / "same" / "inconclusive". */
PyObject *
shp_judge_py(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    (void)module;
    static const char *const names[] = {"ratio", "lo", "hi", "margin"};
    static const shp_argspec spec = {"_judge", names, 4, 4, 4, 0};
    PyObject *v[4];
    double x[4];
    if (shp_args_parse(&spec, args, nargs, kwnames, v) < 0)
        return NULL;
    for (int i = 0; i < 4; i++)
        if (shp_arg_real(v[i], "_judge()", names[i], &x[i]) < 0)
            return NULL;
    return PyUnicode_FromString(shp_judge(x[0], x[1], x[2], x[3]));
}

/* _md_text(text, mode='cell'): Markdown that renders as exactly text. */
PyObject *
shp_md_text_py(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    (void)module;
    static const char *const names[] = {"text", "mode"};
    static const shp_argspec spec = {"_md_text", names, 2, 2, 1, 0};
    PyObject *v[2], *text = NULL, *mode = NULL;
    if (shp_args_parse(&spec, args, nargs, kwnames, v) < 0 ||
        shp_arg_str(v[0], "_md_text()", "text", 0, &text) < 0 ||
        (v[1] != NULL && shp_arg_str(v[1], "_md_text()", "mode", 0, &mode) < 0))
        return NULL;
    if (mode == NULL || PyUnicode_CompareWithASCIIString(mode, "cell") == 0)
        return shp_md_text(text, SHP_MD_CELL);
    if (PyUnicode_CompareWithASCIIString(mode, "heading") == 0)
        return shp_md_text(text, SHP_MD_HEADING);
    if (PyUnicode_CompareWithASCIIString(mode, "code") == 0)
        return shp_md_code_span(text);
    return shp_arg_value_error("_md_text()", "mode", "'cell', 'heading' or 'code'", mode), NULL;
}

/* _html_escape(text): text with & < > " as entities. */
PyObject *
shp_html_escape_py(PyObject *module, PyObject *arg)
{
    (void)module;
    PyObject *text = NULL;
    if (shp_arg_str(arg, "_html_escape()", "text", 0, &text) < 0)
        return NULL;
    return shp_html_escape(text);
}

/* _count(value, param, owner=None, lowest=0, highest=None) -> int */
PyObject *
shp_count_py(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    (void)module;
    static const char *const names[] = {"value", "param", "owner", "lowest", "highest"};
    static const shp_argspec spec = {"_count", names, 5, 5, 2, 0};
    PyObject *v[5], *param = NULL, *owner = NULL;
    Py_ssize_t lowest = 0, highest = -1, out;
    if (shp_args_parse(&spec, args, nargs, kwnames, v) < 0 ||
        shp_arg_str(v[1], "_count()", "param", 0, &param) < 0 ||
        (v[2] != NULL && shp_arg_str(v[2], "_count()", "owner", 1, &owner) < 0) ||
        (v[3] != NULL && shp_arg_ssize(v[3], "_count()", "lowest", &lowest) < 0) ||
        (v[4] != NULL && v[4] != Py_None && shp_arg_ssize(v[4], "_count()", "highest", &highest) < 0))
        return NULL;
    const char *p = PyUnicode_AsUTF8(param), *o = owner ? PyUnicode_AsUTF8(owner) : NULL;
    if (p == NULL || (owner != NULL && o == NULL))
        return NULL;
    if (shp_arg_count(v[0], o, p, lowest, highest, &out) < 0)
        return NULL;
    return PyLong_FromSsize_t(out);
}

/* _real(value, param, owner=None) -> float */
PyObject *
shp_real_py(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    (void)module;
    static const char *const names[] = {"value", "param", "owner"};
    static const shp_argspec spec = {"_real", names, 3, 3, 2, 0};
    PyObject *v[3], *param = NULL, *owner = NULL;
    double out;
    if (shp_args_parse(&spec, args, nargs, kwnames, v) < 0 ||
        shp_arg_str(v[1], "_real()", "param", 0, &param) < 0 ||
        (v[2] != NULL && shp_arg_str(v[2], "_real()", "owner", 1, &owner) < 0))
        return NULL;
    const char *p = PyUnicode_AsUTF8(param), *o = owner ? PyUnicode_AsUTF8(owner) : NULL;
    if (p == NULL || (owner != NULL && o == NULL))
        return NULL;
    if (shp_arg_real(v[0], o, p, &out) < 0)
        return NULL;
    return PyFloat_FromDouble(out);
}

/* _note_near_option(exc, keywords, options) -> bool: capi.h's near-option rule on
 * `exc` (an adapter's options beside the core's): True when it added the note. */
PyObject *
shp_note_near_option_py(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                        PyObject *kwnames)
{
    (void)module;
    static const char *const names[] = {"exc", "keywords", "options"};
    static const shp_argspec spec = {"_note_near_option", names, 3, 3, 3, 0};
    PyObject *v[3];
    if (shp_args_parse(&spec, args, nargs, kwnames, v) < 0)
        return NULL;
    if (!PyExceptionInstance_Check(v[0]))
        return shp_arg_type_error("_note_near_option()", "exc", "an exception", v[0]), NULL;
    if (!PyTuple_Check(v[1]))
        return shp_arg_type_error("_note_near_option()", "keywords", "a tuple of str", v[1]), NULL;
    if (!PyDict_Check(v[2]))
        return shp_arg_type_error("_note_near_option()", "options", "a dict of str to str", v[2]),
               NULL;
    int rc = shp_note_near_option(v[0], v[1], v[2]);
    if (rc < 0)
        return NULL;
    return PyBool_FromLong(rc);
}

/* _fcfs_latencies(arrivals, service, servers=1) -> float64 array */
PyObject *
shp_fcfs_py(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    (void)module;
    static const char *const names[] = {"arrivals", "service", "servers"};
    static const shp_argspec spec = {"_fcfs_latencies", names, 3, 3, 2, 0};
    PyObject *v[3], *res = NULL;
    Py_ssize_t servers = 1, na = 0, ns = 0;
    double *a = NULL, *s = NULL;
    if (shp_args_parse(&spec, args, nargs, kwnames, v) < 0 ||
        (v[2] != NULL && shp_arg_count(v[2], "_fcfs_latencies()", "servers", 1, -1, &servers) < 0) ||
        shp_samples_from_object(v[0], &a, &na) < 0 || shp_samples_from_object(v[1], &s, &ns) < 0)
        goto done;
    if (na != ns) {
        PyErr_Format(PyExc_ValueError, "_fcfs_latencies(): arrivals and service differ in "
                     "length (%zd, %zd)", na, ns);
        goto done;
    }
    for (Py_ssize_t i = 1; i < na; i++)
        if (!(a[i] >= a[i - 1])) {
            PyErr_Format(PyExc_ValueError, "_fcfs_latencies(): arrivals must be in order "
                         "(arrivals[%zd] < arrivals[%zd])", i, i - 1);
            goto done;
        }
    npy_intp dim = (npy_intp)na;
    res = PyArray_SimpleNew(1, &dim, NPY_DOUBLE);
    if (res != NULL && shp_fcfs_latencies(a, s, na, servers,
                                          (double *)PyArray_DATA((PyArrayObject *)res)) < 0)
        Py_CLEAR(res);
done:
    PyMem_Free(a);
    PyMem_Free(s);
    return res;
}

/* ---- pooling ---------------------------------------------------------------------- */

/* The median of x[0..n) through a copy in scratch. */
static double
median_copy(const double *x, Py_ssize_t n, double *scratch)
{
    memcpy(scratch, x, (size_t)n * sizeof(double));
    return shp_percentile_inplace(scratch, n, 0.5);
}

/* x[i] over the parts, NaN ones left out: their median (NaN when none). */
static double
median_known(double *x, Py_ssize_t n)
{
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (!isnan(x[i]))
            x[k++] = x[i];
    return k > 0 ? shp_percentile_inplace(x, k, 0.5) : NAN;
}

#define PART(seq, i) ((shp_Stats *)PyTuple_GET_ITEM((seq), (i)))

/* The per-iteration figures pooled: weighted by each part's timed calls, and
 * only when every part has the figure. */
static double
per_iteration(PyObject *seq, Py_ssize_t n, size_t offset)
{
    double sum = 0.0, calls = 0.0;
    for (Py_ssize_t i = 0; i < n; i++) {
        double v = *(const double *)((const char *)PART(seq, i) + offset);
        if (isnan(v))
            return NAN;
        sum += v * (double)PART(seq, i)->timed_iters;
        calls += (double)PART(seq, i)->timed_iters;
    }
    return calls > 0 ? sum / calls : NAN;
}

/* The parts' value of an object field when they all have the same one (by
 * ==), else NULL; new reference.  -1 on error. */
static int
agreed(PyObject *seq, Py_ssize_t n, size_t offset, PyObject **out)
{
    *out = NULL;
    PyObject *first = *(PyObject **)((char *)PART(seq, 0) + offset);
    if (first == NULL)
        return 0;
    Py_INCREF(first);   /* the comparison may run Python code */
    for (Py_ssize_t i = 1; i < n; i++) {
        PyObject *o = *(PyObject **)((char *)PART(seq, i) + offset);
        if (o == NULL) {
            Py_DECREF(first);
            return 0;
        }
        Py_INCREF(o);
        int eq = PyObject_RichCompareBool(first, o, Py_EQ);
        Py_DECREF(o);
        if (eq <= 0) {
            Py_DECREF(first);
            return eq;
        }
    }
    *out = first;
    return 0;
}

/* GPU times pooled as the wall times are, when every part has them.  0 / -1. */
static int
pool_gpu(shp_Stats *s, PyObject *seq, Py_ssize_t n)
{
    PyObject *parts = PyTuple_New(n), *all = NULL;
    if (parts == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *g = PART(seq, i)->gpu_samples_ms;
        if (g == NULL || !PyTuple_Check(g) || PyTuple_GET_SIZE(g) == 0) {
            Py_DECREF(parts);
            return 0;
        }
        PyTuple_SET_ITEM(parts, i, Py_NewRef(g));
    }
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        total += PyTuple_GET_SIZE(PyTuple_GET_ITEM(parts, i));   /* tuples held: sizes fixed */
    all = PyTuple_New(total);
    double *x = all ? PyMem_Malloc((size_t)total * 2 * sizeof(double)) : NULL;
    if (x == NULL) {
        Py_XDECREF(all);
        Py_DECREF(parts);
        return all ? (PyErr_NoMemory(), -1) : -1;
    }
    for (Py_ssize_t i = 0, k = 0; i < n; i++) {
        PyObject *g = PyTuple_GET_ITEM(parts, i);
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(g); j++, k++) {
            PyObject *v = PyTuple_GET_ITEM(g, j);   /* floats: the field's setter made them */
            x[k] = PyFloat_AsDouble(v);
            PyTuple_SET_ITEM(all, k, Py_NewRef(v));
        }
    }
    Py_DECREF(parts);
    shp_summary sm;
    shp_summarize(x, total, x + total, &sm);
    PyMem_Free(x);
    Py_XSETREF(s->gpu_samples_ms, all);
    s->gpu_median_ms = sm.median;
    s->gpu_p95_ms = sm.p95;
    return 0;
}

/* The figures of the pooled result that come from its parts, not from its
 * samples.  The labels are the first part's; what describes how every part
 * was made (cache, counter_source) when they agree; a segment's cold start
 * is its run's, which fresh runs do not share.  0 / -1. */
static int
pool_fields(shp_Stats *s, PyObject *seq, Py_ssize_t n, int runs, double *scratch)
{
    shp_Stats *first = PART(seq, 0);
    Py_XSETREF(s->name, Py_XNewRef(first->name));
    Py_XSETREF(s->device, Py_XNewRef(first->device));
    Py_XSETREF(s->ram_peak_method, Py_XNewRef(first->ram_peak_method));
    Py_XSETREF(s->params, Py_XNewRef(first->params));
    Py_XSETREF(s->env, Py_XNewRef(first->env));
    s->batch_size = first->batch_size;
    if (!runs) {   /* segments of one run: its cold start and its device's readings */
        Py_XSETREF(s->warmup_ms, Py_XNewRef(first->warmup_ms));
        Py_XSETREF(s->gpu_telemetry, Py_XNewRef(first->gpu_telemetry));
        s->first_call_ms = first->first_call_ms;
        s->settle_calls = first->settle_calls;
    }
    Py_ssize_t warmup = 0;
    int busy = -1, met = -1;
    double ram = 0.0, vram = 0.0, torch_mb = NAN;
    for (Py_ssize_t i = 0; i < n; i++) {
        shp_Stats *p = PART(seq, i);
        if (shp_size_add(warmup, p->warmup_iters, &warmup) < 0) {
            PyErr_SetString(PyExc_ValueError, "_pool(): warmup_iters add up to too many");
            return -1;
        }
        ram = fmax(ram, p->ram_delta_mb);
        vram = fmax(vram, p->vram_delta_mb);
        if (!isnan(p->torch_max_allocated_mb))
            torch_mb = isnan(torch_mb) ? p->torch_max_allocated_mb
                                       : fmax(torch_mb, p->torch_max_allocated_mb);
        if (p->machine_busy >= 0)
            busy = busy == 1 || p->machine_busy == 1;
        if (p->target_met >= 0)   /* met by every part that had a target */
            met = (met < 0 || met) && p->target_met;
        scratch[i] = p->overhead_ms;
    }
    s->warmup_iters = warmup;
    s->ram_delta_mb = ram;
    s->vram_delta_mb = vram;
    s->torch_max_allocated_mb = torch_mb;
    s->machine_busy = busy;
    s->target_met = met;
    s->overhead_ms = median_known(scratch, n);
    s->minor_faults_per_iter = per_iteration(seq, n, offsetof(shp_Stats, minor_faults_per_iter));
    s->major_faults_per_iter = per_iteration(seq, n, offsetof(shp_Stats, major_faults_per_iter));
    s->vol_ctx_switches_per_iter =
        per_iteration(seq, n, offsetof(shp_Stats, vol_ctx_switches_per_iter));
    s->invol_ctx_switches_per_iter =
        per_iteration(seq, n, offsetof(shp_Stats, invol_ctx_switches_per_iter));
    s->instructions_per_call = per_iteration(seq, n, offsetof(shp_Stats, instructions_per_call));
    s->cycles_per_call = per_iteration(seq, n, offsetof(shp_Stats, cycles_per_call));
    s->host_share = per_iteration(seq, n, offsetof(shp_Stats, host_share));
    PyObject *cache, *source;
    if (agreed(seq, n, offsetof(shp_Stats, cache), &cache) < 0)
        return -1;
    Py_XSETREF(s->cache, cache);
    if (agreed(seq, n, offsetof(shp_Stats, counter_source), &source) < 0)
        return -1;
    Py_XSETREF(s->counter_source, source);
    return pool_gpu(s, seq, n);
}

/* _pool(parts, *, name=None, runs=False, fresh=False) -> BenchmarkStats */
PyObject *
shp_pool_py(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    shp_state *st = PyModule_GetState(module);
    static const char *const names[] = {"parts", "name", "runs", "fresh"};
    static const shp_argspec spec = {"_pool", names, 4, 1, 1, 0};
    static const char *const fn = "_pool()";
    PyObject *v[4], *name = NULL, *seq = NULL, *sizes_t = NULL;
    int runs = 0, fresh = 0;
    double *buf = NULL, *scratch = NULL, spread = NAN;
    Py_ssize_t *sizes = NULL;
    shp_Stats *s = NULL;
    if (shp_args_parse(&spec, args, nargs, kwnames, v) < 0 ||
        (v[1] != NULL && shp_arg_str(v[1], fn, "name", 1, &name) < 0) ||
        (v[2] != NULL && shp_arg_flag(v[2], &runs) < 0) ||
        (v[3] != NULL && shp_arg_flag(v[3], &fresh) < 0))
        return NULL;
    if (name != NULL)
        Py_INCREF(name);   /* a flag's __bool__ above ran Python: hold what we use */
    seq = PySequence_Tuple(v[0]);
    if (seq == NULL)
        goto done;
    Py_ssize_t n = PyTuple_GET_SIZE(seq), total = 0;
    if (n < 1) {
        PyErr_SetString(PyExc_ValueError, "_pool(): parts must not be empty");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PyTuple_GET_ITEM(seq, i);
        if (!PyObject_TypeCheck(o, st->stats_type)) {
            shp_arg_type_error(fn, "parts", "BenchmarkStats", o);
            goto done;
        }
        if (PART(seq, i)->samples == NULL || PART(seq, i)->nsamples < 1) {
            PyErr_Format(PyExc_ValueError, "%R has no samples to pool", PART(seq, i)->name);
            goto done;
        }
        if (shp_size_add(total, PART(seq, i)->nsamples, &total) < 0) {
            PyErr_SetString(PyExc_ValueError, "_pool(): the parts hold too many samples");
            goto done;
        }
    }
    if (n == 1 && !runs && name == NULL) {   /* one segment is the run itself */
        Py_INCREF(PART(seq, 0));
        s = PART(seq, 0);
        goto done;
    }
    /* every sample and every part's median first: nothing below runs Python
     * until the samples are copied */
    buf = PyMem_Malloc((size_t)total * sizeof(double));
    scratch = PyMem_Malloc((size_t)(total + n) * sizeof(double));
    sizes = PyMem_New(Py_ssize_t, (size_t)n);
    if (buf == NULL || scratch == NULL || sizes == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    double *logmed = scratch + total;
    int positive = 1;
    for (Py_ssize_t i = 0, off = 0; i < n; i++) {
        shp_Stats *p = PART(seq, i);
        sizes[i] = p->nsamples;
        memcpy(buf + off, p->samples, (size_t)p->nsamples * sizeof(double));
        double med = median_copy(p->samples, p->nsamples, scratch);
        positive = positive && med > 0.0 && isfinite(med);
        logmed[i] = positive ? log(med) : 0.0;
        off += p->nsamples;
    }
    if (runs && n > 1 && positive) {
        double mean = 0.0, ss = 0.0;
        for (Py_ssize_t i = 0; i < n; i++)
            mean += logmed[i] / (double)n;
        for (Py_ssize_t i = 0; i < n; i++)
            ss += (logmed[i] - mean) * (logmed[i] - mean);
        spread = sqrt(ss / (double)(n - 1));
    }
    if (runs) {
        sizes_t = PyTuple_New(n);
        for (Py_ssize_t i = 0; sizes_t != NULL && i < n; i++) {
            PyObject *k = PyLong_FromSsize_t(sizes[i]);
            if (k == NULL)
                Py_CLEAR(sizes_t);
            else
                PyTuple_SET_ITEM(sizes_t, i, k);
        }
        if (sizes_t == NULL)
            goto done;
    }
    s = shp_stats_from_buffer(st, buf, total);
    buf = NULL;   /* taken */
    if (s == NULL || pool_fields(s, seq, n, runs, scratch) < 0)
        goto error;
    if (name != NULL)
        Py_XSETREF(s->name, Py_NewRef(name));
    /* a busy part allows the busy floor between runs: the interval again */
    if (!runs && s->machine_busy == 1 && shp_stats_apply_rerun(st, s, -1.0) < 0)
        goto error;
    if (runs) {
        Py_XSETREF(s->run_sizes, Py_NewRef(sizes_t));
        s->run_spread = spread;
        if (fresh) {   /* fresh processes: where another would land */
            if (shp_stats_apply_rerun(st, s, -1.0) < 0)
                goto error;
        }
        else {   /* blocks of one process say nothing of a fresh process */
            s->rerun_low_ms = s->rerun_high_ms = NAN;
            Py_CLEAR(s->rerun_basis);
        }
    }
    goto done;
error:
    Py_CLEAR(s);
done:
    PyMem_Free(buf);
    PyMem_Free(scratch);
    PyMem_Free(sizes);
    Py_XDECREF(sizes_t);
    Py_XDECREF(seq);
    Py_XDECREF(name);
    return (PyObject *)s;
}
