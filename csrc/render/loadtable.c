/*
 * loadtable.c -- the table of runs under load: format_load_table and a
 * LoadStats's Markdown / HTML.
 *
 * One row per run: the rate asked for and the one achieved, the latency's
 * p50, p99 with its 95% interval and p99.9, the share of latency spent
 * queueing, the requests completed.  The layout and escaping are table.c's
 * (shp_table_render), the cells cells.c's, the footnote of flags flags.c's.
 */
#include "render/render.h"

#include <math.h>

#define FN "format_load_table()"

static const char *const headers[] = {
    "Model / Target", "Device", "Arrival", "Offered (req/s)", "Achieved (req/s)",
    "p50 (ms)", "p99 (ms)", "p99 95% CI (ms)", "p99.9 (ms)", "Queueing", "Completed",
};
#define NCOLS ((int)(sizeof(headers) / sizeof(headers[0])))
static const shp_cell_style styles[NCOLS] = {
    SHP_CELL_BOLD, SHP_CELL_CODE, SHP_CELL_PLAIN, SHP_CELL_PLAIN, SHP_CELL_BOLD,
    SHP_CELL_PLAIN, SHP_CELL_BOLD, SHP_CELL_PLAIN, SHP_CELL_PLAIN, SHP_CELL_PLAIN,
    SHP_CELL_PLAIN,
};

static PyObject *
na(void)
{
    return PyUnicode_FromString("N/A");
}

static PyObject *
cell_ms(double x)
{
    return isnan(x) ? na() : shp_cell_ms(x);
}

static PyObject *
cell_rate(double x)
{
    return isnan(x) ? na() : shp_cell_num("", x, 1, "");
}

static PyObject *
cell_str(PyObject *s)
{
    return s != NULL && PyUnicode_Check(s) ? Py_NewRef(s) : PyUnicode_FromString("");
}

static int
append(PyObject *row, PyObject *cell)
{
    if (cell == NULL)
        return -1;
    int rc = PyList_Append(row, cell);
    Py_DECREF(cell);
    return rc;
}

static PyObject *
build_row(shp_LoadStats *s)
{
    PyObject *row = PyList_New(0);
    if (row == NULL)
        return NULL;
    PyObject *ci = NULL;
    if (isnan(s->p99_ci_low_ms) || isnan(s->p99_ci_high_ms)) {
        ci = na();
    }
    else {
        PyObject *lo = shp_cell_ms(s->p99_ci_low_ms);
        PyObject *hi = lo ? shp_cell_ms(s->p99_ci_high_ms) : NULL;
        ci = hi ? PyUnicode_FromFormat("%U - %U", lo, hi) : NULL;
        Py_XDECREF(lo);
        Py_XDECREF(hi);
    }
    if (append(row, cell_str(s->name)) < 0 || append(row, cell_str(s->device)) < 0 ||
        append(row, cell_str(s->arrival)) < 0 || append(row, cell_rate(s->offered_qps)) < 0 ||
        append(row, cell_rate(s->achieved_qps)) < 0 || append(row, cell_ms(s->p50_ms)) < 0 ||
        append(row, cell_ms(s->p99_ms)) < 0 || append(row, ci) < 0 ||
        append(row, cell_ms(s->p999_ms)) < 0 ||
        append(row, isnan(s->queue_share) ? na()
                                          : shp_cell_num("", 100.0 * s->queue_share, 0, "%")) < 0 ||
        append(row, shp_cell_count((double)s->completed)) < 0) {
        Py_DECREF(row);
        return NULL;
    }
    return row;
}

/* Render `items` (a list of LoadStats, checked). */
static PyObject *
format_table(PyObject *items, PyObject *title, int html)
{
    Py_ssize_t n = PyList_GET_SIZE(items);
    PyObject *rows = PyList_New(n), *labels = PyList_New(n), *note = NULL, *res = NULL;
    for (Py_ssize_t i = 0; rows != NULL && labels != NULL && i < n; i++) {
        shp_LoadStats *s = (shp_LoadStats *)PyList_GET_ITEM(items, i);
        PyObject *row = build_row(s);
        if (row == NULL)
            goto done;
        PyList_SET_ITEM(rows, i, row);
        PyList_SET_ITEM(labels, i, Py_NewRef(PyList_GET_ITEM(row, 0)));
    }
    if (rows != NULL && labels != NULL)
        note = shp_load_footnote(items, labels, html);
    if (note != NULL)
        res = shp_table_render(title, NCOLS, headers, styles, rows, note, html);
done:
    Py_XDECREF(rows);
    Py_XDECREF(labels);
    Py_XDECREF(note);
    return res;
}

/* A list of the LoadStats in `obj` (one, or an iterable of them). */
static PyObject *
collect(shp_state *st, PyObject *obj)
{
    if (PyObject_TypeCheck(obj, st->load_type)) {
        PyObject *l = PyList_New(1);
        if (l != NULL)
            PyList_SET_ITEM(l, 0, Py_NewRef(obj));
        return l;
    }
    if (PyUnicode_Check(obj) || PyBytes_Check(obj) || PyDict_Check(obj))
        return shp_arg_type_error(FN, "results", "a LoadStats or an iterable of them", obj),
               NULL;
    PyObject *seq = PySequence_List(obj);
    if (seq == NULL) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            shp_arg_type_error(FN, "results", "a LoadStats or an iterable of them", obj);
        }
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(seq); i++) {
        PyObject *item = PyList_GET_ITEM(seq, i);
        if (!PyObject_TypeCheck(item, st->load_type)) {
            PyErr_Format(PyExc_TypeError, FN ": results[%zd] must be a LoadStats, not %.100s", i,
                         Py_TYPE(item)->tp_name);
            Py_DECREF(seq);
            return NULL;
        }
    }
    return seq;
}

PyObject *
shp_format_load_table(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                      PyObject *kwnames)
{
    static const char *const names[] = {"results", "title", "format"};
    static const shp_argspec spec = {"format_load_table", names, 3, 2, 1, 0};
    shp_state *st = PyModule_GetState(module);
    PyObject *v[3], *title = NULL;
    if (shp_args_parse(&spec, args, nargs, kwnames, v) < 0)
        return NULL;
    if (v[1] != NULL && shp_arg_str(v[1], FN, "title", 1, &title) < 0)
        return NULL;
    if (title != NULL && PyUnicode_GET_LENGTH(title) == 0)
        title = NULL;
    int html = 0;
    if (v[2] != NULL) {
        if (PyUnicode_Check(v[2]) && PyUnicode_CompareWithASCIIString(v[2], "html") == 0)
            html = 1;
        else if (!(PyUnicode_Check(v[2]) &&
                   PyUnicode_CompareWithASCIIString(v[2], "markdown") == 0))
            return shp_arg_value_error(FN, "format", "'markdown' or 'html'", v[2]), NULL;
    }
    Py_XINCREF(title);
    PyObject *items = collect(st, v[0]), *res = NULL;
    if (items != NULL && PyList_GET_SIZE(items) == 0)
        PyErr_SetString(PyExc_ValueError, FN ": results is empty");
    else if (items != NULL)
        res = format_table(items, title, html);
    Py_XDECREF(items);
    Py_XDECREF(title);
    return res;
}

static PyObject *
one_row(PyObject *load, int html)
{
    PyObject *items = PyList_New(1), *res = NULL;
    if (items == NULL)
        return NULL;
    PyList_SET_ITEM(items, 0, Py_NewRef(load));
    res = format_table(items, NULL, html);
    Py_DECREF(items);
    return res;
}

PyObject *
shp_load_markdown(PyObject *load)
{
    return one_row(load, 0);
}

PyObject *
shp_load_html(PyObject *load)
{
    return one_row(load, 1);
}
