/*
 * compare.c -- compare_benchmarks and the Comparison type.
 *
 * The statistics are bootstrap.c's; this file is the Python face: the
 * result type (table-driven fields, fields.c) and the module function.
 */
#include "profiling.h"

#include <math.h>
#include <string.h>

/* ---- the Comparison type ------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    PyObject *baseline;
    PyObject *candidate;
    double baseline_median_ms, candidate_median_ms;
    double ratio, ci95_low, ci95_high;
    PyObject *verdict;
    Py_ssize_t resamples;
} shp_Comparison;

#define C_OFF(m) offsetof(shp_Comparison, m)
#define CF(nm, kind, m, rnd, doc) {nm, kind, C_OFF(m), rnd, 1, 0, 0.0, SHP_SHOW_ALWAYS, doc}
static const shp_field comparison_fields[] = {
    CF("baseline", SHP_F_STR, baseline, SHP_R_NONE, "Name of the baseline benchmark."),
    CF("candidate", SHP_F_STR, candidate, SHP_R_NONE, "Name of the candidate benchmark."),
    CF("baseline_median_ms", SHP_F_DOUBLE, baseline_median_ms, SHP_R_MS, "Baseline median (ms)."),
    CF("candidate_median_ms", SHP_F_DOUBLE, candidate_median_ms, SHP_R_MS, "Candidate median (ms)."),
    CF("ratio", SHP_F_DOUBLE, ratio, SHP_R_RATIO, "candidate median / baseline median."),
    CF("ci95_low", SHP_F_DOUBLE, ci95_low, SHP_R_RATIO, "Bootstrap 95% CI of the ratio, low end."),
    CF("ci95_high", SHP_F_DOUBLE, ci95_high, SHP_R_RATIO, "Bootstrap 95% CI of the ratio, high end."),
    CF("verdict", SHP_F_STR, verdict, SHP_R_NONE,
       "'faster' (CI below 1), 'slower' (CI above 1) or 'same' (CI contains 1)."),
    CF("resamples", SHP_F_COUNT, resamples, SHP_R_NONE, "Bootstrap resamples used."),
    {NULL},
};

static PyGetSetDef comparison_getset[sizeof(comparison_fields) / sizeof(comparison_fields[0])];

void
shp_comparison_prepare_spec(void)
{
    shp_fields_fill_getset(comparison_fields, NULL, comparison_getset);
}

static PyObject *
Cmp_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    (void)args;
    (void)kwargs;
    PyObject *self = type->tp_alloc(type, 0);
    if (self != NULL)
        shp_fields_set_defaults(self, comparison_fields);
    return self;
}

static int
Cmp_init(PyObject *self, PyObject *args, PyObject *kwargs)
{
    return shp_fields_init(self, comparison_fields, args, kwargs);
}

static int
Cmp_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    return shp_fields_traverse(self, comparison_fields, visit, arg);
}

static int
Cmp_clear(PyObject *self)
{
    shp_fields_clear(self, comparison_fields);
    return 0;
}

static void
Cmp_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    Cmp_clear(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyObject *
Cmp_repr(PyObject *self)
{
    return shp_fields_repr(self, comparison_fields);
}

static PyObject *
Cmp_to_dict(PyObject *self, PyObject *unused)
{
    (void)unused;
    return shp_fields_dict(self, comparison_fields, 1);
}

static PyObject *
Cmp_reduce(PyObject *op, PyObject *unused)
{
    (void)unused;
    shp_Comparison *c = (shp_Comparison *)op;
    /* shp_field_get: a Comparison made by __new__ alone has no strings yet */
    PyObject *b = shp_field_get(op, &comparison_fields[0]);
    PyObject *k = shp_field_get(op, &comparison_fields[1]);
    PyObject *v = shp_field_get(op, &comparison_fields[7]);
    PyObject *res = NULL;
    if (b != NULL && k != NULL && v != NULL)
        res = Py_BuildValue("O(OOdddddOn)", (PyObject *)Py_TYPE(op), b, k,
                            c->baseline_median_ms, c->candidate_median_ms, c->ratio,
                            c->ci95_low, c->ci95_high, v, c->resamples);
    Py_XDECREF(b);
    Py_XDECREF(k);
    Py_XDECREF(v);
    return res;
}

/* The one-row comparison table, as Markdown or as HTML (Jupyter). */
static PyObject *
Cmp_table(PyObject *op, int html)
{
    shp_Comparison *c = (shp_Comparison *)op;
    /* numbers as long as they need to be (fixed buffers cut huge ones) */
    char *b = PyOS_double_to_string(c->baseline_median_ms, 'f', 4, 0, NULL);
    char *k = PyOS_double_to_string(c->candidate_median_ms, 'f', 4, 0, NULL);
    char *ratio = PyOS_double_to_string(c->ratio, 'f', 3, 0, NULL);
    char *lo = PyOS_double_to_string(c->ci95_low, 'f', 3, 0, NULL);
    char *hi = PyOS_double_to_string(c->ci95_high, 'f', 3, 0, NULL);
    PyObject *names[3] = {NULL, NULL, NULL}, *res = NULL;
    static const int which[3] = {0, 1, 7};   /* baseline, candidate, verdict */
    int ok = b != NULL && k != NULL && ratio != NULL && lo != NULL && hi != NULL;
    for (int i = 0; i < 3 && ok; i++) {
        PyObject *v = shp_field_get(op, &comparison_fields[which[i]]);
        names[i] = v == NULL ? NULL : html ? shp_html_escape(v) : shp_md_bold_cell(v);
        Py_XDECREF(v);
        ok = names[i] != NULL;
    }
    if (ok && html)
        res = PyUnicode_FromFormat(
            "<table>\n<thead>\n<tr><th>Baseline</th><th>Candidate</th><th>Baseline median (ms)"
            "</th><th>Candidate median (ms)</th><th>Ratio</th><th>95%% CI</th><th>Verdict</th>"
            "</tr>\n</thead>\n<tbody>\n<tr><td><b>%U</b></td><td><b>%U</b></td><td>%s</td>"
            "<td>%s</td><td>%sx</td><td>[%s, %s]</td><td><b>%U</b></td></tr>\n</tbody>\n</table>",
            names[0], names[1], b, k, ratio, lo, hi, names[2]);
    else if (ok)
        res = PyUnicode_FromFormat(
            "| Baseline | Candidate | Baseline median (ms) | Candidate median (ms) | Ratio | 95%% CI | Verdict |\n"
            "| :--- | :--- | :--- | :--- | :--- | :--- | :--- |\n"
            "| %U | %U | %s | %s | %sx | [%s, %s] | %U |",
            names[0], names[1], b, k, ratio, lo, hi, names[2]);
    for (int i = 0; i < 3; i++)
        Py_XDECREF(names[i]);
    PyMem_Free(b);
    PyMem_Free(k);
    PyMem_Free(ratio);
    PyMem_Free(lo);
    PyMem_Free(hi);
    return res;
}

static PyObject *
Cmp_markdown(PyObject *op, PyObject *unused)
{
    (void)unused;
    return Cmp_table(op, 0);
}

static PyObject *
Cmp_html(PyObject *op, PyObject *unused)
{
    (void)unused;
    return Cmp_table(op, 1);
}

static PyMethodDef comparison_methods[] = {
    {"to_dict", Cmp_to_dict, METH_NOARGS, "to_dict() -> dict (ratios rounded to 4 decimals)."},
    {"__reduce__", Cmp_reduce, METH_NOARGS, "Pickle support."},
    {"_repr_markdown_", Cmp_markdown, METH_NOARGS, "Markdown table (Jupyter)."},
    {"_repr_html_", Cmp_html, METH_NOARGS, "HTML table (Jupyter)."},
    {"to_markdown", Cmp_markdown, METH_NOARGS, "The comparison as a Markdown table."},
    {"to_html", Cmp_html, METH_NOARGS, "The comparison as an HTML table."},
    {NULL},
};

static PyType_Slot comparison_slots[] = {
    {Py_tp_new, Cmp_new},
    {Py_tp_init, Cmp_init},
    {Py_tp_dealloc, Cmp_dealloc},
    {Py_tp_traverse, Cmp_traverse},
    {Py_tp_clear, Cmp_clear},
    {Py_tp_repr, Cmp_repr},
    {Py_tp_hash, PyObject_HashNotImplemented},
    {Py_tp_methods, comparison_methods},
    {Py_tp_getset, comparison_getset},
    {Py_tp_doc, "Result of compare_benchmarks(baseline, candidate)."},
    {0, NULL},
};

PyType_Spec shp_comparison_spec = {
    .name = "spatialhub.utils.profiling.Comparison",
    .basicsize = sizeof(shp_Comparison),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = comparison_slots,
};

/* ---- compare_benchmarks ------------------------------------------------- */

#define FN "compare_benchmarks()"

static int
check_stats(shp_state *st, PyObject *o, const char *what)
{
    if (!PyObject_TypeCheck(o, st->stats_type))
        return shp_arg_type_error(FN, what, "a BenchmarkStats", o);
    shp_Stats *s = (shp_Stats *)o;
    if (s->samples == NULL || s->nsamples < 1) {
        PyErr_Format(PyExc_ValueError,
                     FN ": %s has no raw samples (samples_ms is None or empty): compare needs "
                     "the stats returned by benchmark_callable, or built with samples_ms=...",
                     what);
        return -1;
    }
    return 0;
}

PyObject *
shp_compare_benchmarks(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames)
{
    shp_state *st = PyModule_GetState(module);
    static const char *const names[] = {"baseline", "candidate", "resamples", "seed"};
    static const shp_argspec spec = {"compare_benchmarks", names, 4, 2, 2, 0};
    PyObject *v[4];
    if (shp_args_parse(&spec, args, nargs, kwnames, v) < 0)
        return NULL;
    Py_ssize_t resamples = 2000;
    unsigned long long seed = 0;
    if (v[2] != NULL) {
        PyObject *idx = shp_arg_index(v[2], FN, "resamples");
        if (idx == NULL)
            return NULL;
        int overflow = 0;
        long long r = PyLong_AsLongLongAndOverflow(idx, &overflow);
        if (r == -1 && PyErr_Occurred()) {
            Py_DECREF(idx);
            return NULL;
        }
        if (overflow != 0 || r < 100 || r > 1000000) {
            PyErr_Format(PyExc_ValueError, FN ": resamples must be in [100, 1000000], got %S",
                         idx);
            Py_DECREF(idx);
            return NULL;
        }
        Py_DECREF(idx);
        resamples = (Py_ssize_t)r;
    }
    if (v[3] != NULL) {
        PyObject *idx = shp_arg_index(v[3], FN, "seed");
        if (idx == NULL)
            return NULL;
        seed = PyLong_AsUnsignedLongLongMask(idx);
        Py_DECREF(idx);
        if (PyErr_Occurred())
            return NULL;
    }
    if (check_stats(st, v[0], "baseline") < 0 || check_stats(st, v[1], "candidate") < 0)
        return NULL;
    shp_Stats *a = (shp_Stats *)v[0], *b = (shp_Stats *)v[1];
    double ma, mb, ratio, lo, hi;
    if (shp_compare_samples(a->samples, a->nsamples, b->samples, b->nsamples,
                            (uint64_t)seed, resamples, &ma, &mb, &ratio, &lo, &hi) < 0)
        return NULL;
    shp_Comparison *c = (shp_Comparison *)Cmp_new(st->comparison_type, NULL, NULL);
    if (c == NULL)
        return NULL;
    c->baseline = Py_NewRef(a->name ? a->name : Py_None);
    c->candidate = Py_NewRef(b->name ? b->name : Py_None);
    c->baseline_median_ms = ma;
    c->candidate_median_ms = mb;
    c->ratio = ratio;
    c->ci95_low = lo;
    c->ci95_high = hi;
    c->resamples = resamples;
    c->verdict = PyUnicode_FromString(shp_verdict(lo, hi));
    if (c->verdict == NULL) {
        Py_DECREF(c);
        return NULL;
    }
    return (PyObject *)c;
}
