/*
 * table.c -- format_benchmark_table: Markdown (and HTML for notebooks).
 *
 * By default the layout is the released module's, byte for byte for the
 * same stats (its columns, header text and cell formats: cells.c), so
 * reports made before and after switching line up.  Beyond it, without
 * breaking it: a latency that would print as 0.00 keeps two significant
 * digits, a '|' in a name is escaped instead of breaking the row, extra
 * columns come only when asked for (columns=: columns.c), and what makes a row's
 * figures doubtful (flags.c) is a footnote under the table, never a cell.
 * Cells are built once as plain text with a per-column decoration, then
 * rendered as Markdown or HTML.
 */
#include "render/render.h"

#include <assert.h>
#include <ctype.h>
#include <math.h>
#include <string.h>

typedef enum {
    DEC_PLAIN = SHP_CELL_PLAIN, DEC_BOLD = SHP_CELL_BOLD, DEC_CODE = SHP_CELL_CODE
} decoration;

#define MAX_COLS (10 + SHP_N_COLUMNS)   /* 7 released + VRAM + param + baseline + extras */
#define FN "format_benchmark_table()"

typedef struct {
    int ncols;
    const char *header[MAX_COLS];
    PyObject *header_obj[MAX_COLS];   /* when the header is dynamic */
    decoration dec[MAX_COLS];
    PyObject *rows;                   /* list of lists of str */
} grid;

/* A one-element list holding a new reference to o. */
static PyObject *
list_of_one(PyObject *o)
{
    PyObject *l = PyList_New(1);
    if (l != NULL)
        PyList_SET_ITEM(l, 0, Py_NewRef(o));
    return l;
}

static int
append_cell(PyObject *row, const char *text)
{
    PyObject *s = PyUnicode_FromString(text);
    if (s == NULL)
        return -1;
    int rc = PyList_Append(row, s);
    Py_DECREF(s);
    return rc;
}

static int
append_obj(PyObject *row, PyObject *s)
{
    if (s == NULL)
        return -1;
    int rc = PyList_Append(row, s);
    Py_DECREF(s);
    return rc;
}

static int
build_row(grid *g, shp_Stats *s, int vram, const shp_columns *x, PyObject *param, shp_Stats *base,
          double known, double margin)
{
    PyObject *row = PyList_New(0);
    if (row == NULL)
        return -1;
    if (append_obj(row, s->name ? Py_NewRef(s->name) : PyUnicode_FromString("")) < 0)
        goto error;
    if (param != NULL && append_obj(row, shp_cell_param(s, param)) < 0)
        goto error;
    if (append_obj(row, s->device ? Py_NewRef(s->device) : PyUnicode_FromString("")) < 0 ||
        append_obj(row, shp_cell_spread(s->mean_ms, s->std_ms)) < 0 ||
        append_obj(row, shp_cell_ms(s->median_ms)) < 0 ||
        append_obj(row, shp_cell_ms(s->p95_ms)) < 0 ||
        append_obj(row, shp_cell_num("", s->fps * (double)s->batch_size, 1, "")) < 0 ||
        append_obj(row, shp_cell_mb(s->ram_delta_mb)) < 0)
        goto error;
    /* the released rule: with any CUDA row, a VRAM column; N/A on the others */
    if (vram && append_obj(row, s->device != NULL && shp_cell_is_cuda(s->device)
                                    ? shp_cell_mb(s->vram_delta_mb)
                                    : PyUnicode_FromString("N/A")) < 0)
        goto error;
    for (int i = 0; i < x->n; i++)
        if (append_obj(row, shp_column_cell(s, x->id[i])) < 0)
            goto error;
    if (base != NULL && append_obj(row, shp_cell_baseline(s, base, known, margin)) < 0)
        goto error;
    if (PyList_Append(g->rows, row) < 0)
        goto error;
    Py_DECREF(row);
    return 0;
error:
    Py_DECREF(row);
    return -1;
}

/* The columns are bounded by construction -- name, param, device, the five
 * released figures, VRAM, each extra at most once, baseline: MAX_COLS. */
static void
add_col(grid *g, const char *h, PyObject *hobj, decoration d)
{
    assert(g->ncols < MAX_COLS);
    g->header[g->ncols] = h;
    g->header_obj[g->ncols] = hobj;
    g->dec[g->ncols] = d;
    g->ncols++;
}

static PyObject *
decorate(PyObject *cell, decoration d, int html)
{
    if (!html && d == DEC_CODE)
        return shp_md_code_span(cell);
    PyObject *esc = html ? shp_html_escape(cell) : shp_md_text(cell, SHP_MD_CELL);
    if (esc == NULL)
        return NULL;
    PyObject *r;
    if (d == DEC_PLAIN || (!html && PyUnicode_GET_LENGTH(esc) == 0))
        r = Py_NewRef(esc);   /* no "****" for an empty name */
    else if (d == DEC_BOLD)
        r = PyUnicode_FromFormat(html ? "<b>%U</b>" : "**%U**", esc);
    else
        r = PyUnicode_FromFormat("<code>%U</code>", esc);
    Py_DECREF(esc);
    return r;
}

static PyObject *
header_text(grid *g, int c)
{
    return g->header_obj[c] ? PyObject_Str(g->header_obj[c]) : PyUnicode_FromString(g->header[c]);
}

/* One rendered line from a list of already-decorated cells. */
static PyObject *
join_line(PyObject *cells, const char *open, const char *sep, const char *close)
{
    PyObject *s = PyUnicode_FromString(sep);
    if (s == NULL)
        return NULL;
    PyObject *body = PyUnicode_Join(s, cells);
    Py_DECREF(s);
    if (body == NULL)
        return NULL;
    PyObject *r = PyUnicode_FromFormat("%s%U%s", open, body, close);
    Py_DECREF(body);
    return r;
}

/* Join `cells` (stolen) into one line and append it to `lines`; 0 / -1. */
static int
emit_line(PyObject *lines, PyObject *cells, const char *open, const char *sep, const char *close)
{
    if (cells == NULL)
        return -1;
    PyObject *line = join_line(cells, open, sep, close);
    Py_DECREF(cells);
    return append_obj(lines, line);
}

static PyObject *
render(grid *g, PyObject *title, PyObject *note, int html)
{
    PyObject *lines = PyList_New(0), *cells = NULL, *line = NULL, *res = NULL;
    if (lines == NULL)
        return NULL;
    const char *open = html ? "<tr><td>" : "| ";
    const char *sep = html ? "</td><td>" : " | ";
    const char *close = html ? "</td></tr>" : " |";
    if (title != NULL) {
        PyObject *t = html ? shp_html_escape(title) : shp_md_text(title, SHP_MD_HEADING);
        if (t == NULL)
            goto done;
        line = PyUnicode_FromFormat(html ? "<h3>%U</h3>" : "### %U", t);
        Py_DECREF(t);
        if (line == NULL || PyList_Append(lines, line) < 0)
            goto done;
        Py_CLEAR(line);
        if (!html && append_cell(lines, "") < 0)
            goto done;
    }
    if (html && append_cell(lines, "<table>\n<thead>") < 0)
        goto done;
    /* header */
    cells = PyList_New(0);
    if (cells == NULL)
        goto done;
    for (int c = 0; c < g->ncols; c++) {
        PyObject *h = header_text(g, c), *e;
        if (h == NULL)
            goto done;
        e = html ? shp_html_escape(h) : shp_md_text(h, SHP_MD_CELL);
        Py_DECREF(h);
        if (append_obj(cells, e) < 0)
            goto done;
    }
    PyObject *hdr = cells;
    cells = NULL;
    if (emit_line(lines, hdr, html ? "<tr><th>" : "| ", html ? "</th><th>" : " | ",
                  html ? "</th></tr>" : " |") < 0)
        goto done;
    if (html) {
        if (append_cell(lines, "</thead>\n<tbody>") < 0)
            goto done;
    }
    else {
        cells = PyList_New(0);
        if (cells == NULL)
            goto done;
        for (int c = 0; c < g->ncols; c++)
            if (append_cell(cells, ":---") < 0)
                goto done;
        PyObject *align = cells;
        cells = NULL;
        if (emit_line(lines, align, open, sep, close) < 0)
            goto done;
    }
    for (Py_ssize_t r = 0; r < PyList_GET_SIZE(g->rows); r++) {
        PyObject *row = PyList_GET_ITEM(g->rows, r);
        cells = PyList_New(0);
        if (cells == NULL)
            goto done;
        for (int c = 0; c < g->ncols; c++)
            if (append_obj(cells, decorate(PyList_GET_ITEM(row, c), g->dec[c], html)) < 0)
                goto done;
        PyObject *row_cells = cells;
        cells = NULL;
        if (emit_line(lines, row_cells, open, sep, close) < 0)
            goto done;
    }
    if (html && append_cell(lines, "</tbody>\n</table>") < 0)
        goto done;
    /* the flags: a footnote line under the table, after a blank line */
    if (PyUnicode_GET_LENGTH(note) > 0 &&
        ((!html && append_cell(lines, "") < 0) || PyList_Append(lines, note) < 0))
        goto done;
    PyObject *nl = PyUnicode_FromString("\n");
    if (nl == NULL)
        goto done;
    res = PyUnicode_Join(nl, lines);
    Py_DECREF(nl);
done:
    Py_XDECREF(line);
    Py_XDECREF(cells);
    Py_DECREF(lines);
    return res;
}

PyObject *
shp_table_render(PyObject *title, int ncols, const char *const *headers,
                 const shp_cell_style *style, PyObject *rows, PyObject *note, int html)
{
    grid g;
    memset(&g, 0, sizeof(g));
    for (int c = 0; c < ncols && c < MAX_COLS; c++)
        add_col(&g, headers[c], NULL, (decoration)style[c]);
    g.rows = rows;
    return render(&g, title, note, html);
}

/* Render `items` (a list of BenchmarkStats, already checked). */
static PyObject *
format_table(PyObject *items, PyObject *title, PyObject *unit, PyObject *baseline,
             double known, double margin, PyObject *param, const shp_columns *asked, int html)
{
    grid g;
    memset(&g, 0, sizeof(g));
    shp_columns x = *asked;
    int vram = 0;
    Py_ssize_t n = PyList_GET_SIZE(items);
    for (Py_ssize_t i = 0; i < n; i++) {
        shp_Stats *s = (shp_Stats *)PyList_GET_ITEM(items, i);
        vram |= s->device != NULL && shp_cell_is_cuda(s->device);
    }
    if (x.auto_cols)
        shp_columns_resolve_auto(&x, items);
    PyObject *tput = PyUnicode_FromFormat("Throughput (%U)", unit), *note = NULL, *res = NULL;
    PyObject *labels = NULL;
    if (tput == NULL)
        return NULL;
    add_col(&g, "Model / Target", NULL, DEC_BOLD);
    if (param != NULL)
        add_col(&g, NULL, param, DEC_PLAIN);
    add_col(&g, "Device", NULL, DEC_CODE);
    add_col(&g, "Latency Mean (ms)", NULL, DEC_PLAIN);
    add_col(&g, "Median (ms)", NULL, DEC_PLAIN);
    add_col(&g, "P95 (ms)", NULL, DEC_PLAIN);
    add_col(&g, NULL, tput, DEC_BOLD);
    add_col(&g, "Peak RAM Delta", NULL, DEC_PLAIN);
    if (vram)
        add_col(&g, "Peak VRAM Delta", NULL, DEC_PLAIN);
    for (int i = 0; i < x.n; i++)
        add_col(&g, shp_column_header(x.id[i]), NULL, DEC_PLAIN);
    if (baseline != NULL)
        add_col(&g, "vs Baseline", NULL, DEC_PLAIN);
    g.rows = PyList_New(0);
    if (g.rows == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++)
        if (build_row(&g, (shp_Stats *)PyList_GET_ITEM(items, i), vram, &x, param,
                      (shp_Stats *)baseline, known, margin) < 0)
            goto done;
    /* the footnote calls a row by its name, and its parameter in a sweep */
    labels = PyList_New(n);
    for (Py_ssize_t i = 0; labels != NULL && i < n; i++) {
        PyObject *row = PyList_GET_ITEM(g.rows, i), *name = PyList_GET_ITEM(row, 0);
        PyObject *label = param == NULL ? Py_NewRef(name)
                                        : PyUnicode_FromFormat("%U %U=%U", name, param,
                                                               PyList_GET_ITEM(row, 1));
        if (label == NULL)
            Py_CLEAR(labels);
        else
            PyList_SET_ITEM(labels, i, label);
    }
    note = labels != NULL ? shp_flags_footnote(items, labels, html) : NULL;
    if (note != NULL)
        res = render(&g, title, note, html);
done:
    Py_XDECREF(labels);
    Py_XDECREF(note);
    Py_XDECREF(g.rows);
    Py_DECREF(tput);
    return res;
}

/* A list of the stats in `obj` (one stats or an iterable of them). */
static PyObject *
collect_stats(shp_state *st, PyObject *obj)
{
    if (PyObject_TypeCheck(obj, st->stats_type))
        return list_of_one(obj);
    if (PyUnicode_Check(obj) || PyBytes_Check(obj) || PyDict_Check(obj)) {
        PyErr_Format(PyExc_TypeError,
                     FN ": stats_list must be a BenchmarkStats or an iterable of them, not %.100s",
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    PyObject *it = PyObject_GetIter(obj);
    if (it == NULL) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError,
                         FN ": stats_list must be a BenchmarkStats or an iterable of them, not %.100s",
                         Py_TYPE(obj)->tp_name);
        }
        return NULL;
    }
    PyObject *list = PyList_New(0), *item;
    if (list == NULL) {
        Py_DECREF(it);
        return NULL;
    }
    Py_ssize_t i = 0;
    while ((item = PyIter_Next(it)) != NULL) {
        if (!PyObject_TypeCheck(item, st->stats_type)) {
            PyErr_Format(PyExc_TypeError,
                         FN ": stats_list[%zd] must be a BenchmarkStats, not %.100s", i,
                         Py_TYPE(item)->tp_name);
            Py_DECREF(item);
            goto error;
        }
        int rc = PyList_Append(list, item);
        Py_DECREF(item);
        if (rc < 0)
            goto error;
        i++;
    }
    if (PyErr_Occurred())
        goto error;
    Py_DECREF(it);
    return list;
error:
    Py_DECREF(it);
    Py_DECREF(list);
    return NULL;
}

PyObject *
shp_format_benchmark_table(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames)
{
    static const char *const names[] = {"stats_list", "title", "throughput_unit",
                                        "baseline", "param", "format", "run_spread",
                                        "margin", "columns"};
    static const shp_argspec spec = {"format_benchmark_table", names, 9, 3, 1, 0};
    shp_state *st = PyModule_GetState(module);
    PyObject *v[9];
    shp_columns x;
    double known = -1.0, margin = SHP_DEFAULT_MARGIN;
    if (shp_args_parse(&spec, args, nargs, kwnames, v) < 0)
        return NULL;
    PyObject *title = v[1] == Py_None ? NULL : v[1];
    PyObject *unit = v[2] == NULL ? NULL : v[2];
    PyObject *baseline = v[3] == Py_None ? NULL : v[3];
    PyObject *param = v[4] == Py_None ? NULL : v[4];
    if ((title != NULL && shp_arg_str(title, FN, "title", 1, &title) < 0) ||
        (unit != NULL && shp_arg_str(unit, FN, "throughput_unit", 0, &unit) < 0) ||
        (param != NULL && shp_arg_str(param, FN, "param", 1, &param) < 0))
        return NULL;
    if (title != NULL && PyUnicode_GET_LENGTH(title) == 0)
        title = NULL;
    if (baseline != NULL && !PyObject_TypeCheck(baseline, st->stats_type))
        return shp_arg_type_error(FN, "baseline", "a BenchmarkStats or None", baseline), NULL;
    /* the between-run spread of compare_benchmarks(run_spread=...), for the
     * vs-Baseline verdicts */
    if (v[6] != NULL && v[6] != Py_None) {
        if (shp_arg_real(v[6], FN, "run_spread", &known) < 0)
            return NULL;
        if (!(known >= 0.0 && known < 1.0))
            return shp_arg_value_error(FN, "run_spread", "a number in [0, 1) (0.03 = 3%)",
                                       v[6]), NULL;
    }
    if (v[7] != NULL) {
        if (shp_arg_real(v[7], FN, "margin", &margin) < 0)
            return NULL;
        if (!(margin >= 0.0 && margin < 1.0))
            return shp_arg_value_error(FN, "margin", "a number in [0, 1) (0.05 = 5%)", v[7]),
                   NULL;
    }
    if (shp_columns_parse(v[8], &x) < 0)
        return NULL;
    int html = 0;
    if (v[5] != NULL) {
        if (PyUnicode_Check(v[5]) && PyUnicode_CompareWithASCIIString(v[5], "html") == 0)
            html = 1;
        else if (!(PyUnicode_Check(v[5]) && PyUnicode_CompareWithASCIIString(v[5], "markdown") == 0)) {
            shp_arg_value_error(FN, "format", "'markdown' or 'html'", v[5]);
            return NULL;
        }
    }
    PyObject *owned_param = NULL, *owned_unit = NULL, *res = NULL;
    /* A sweep result names its parameter: use it unless told otherwise. */
    if (v[4] == NULL && !PyObject_TypeCheck(v[0], st->stats_type)) {
        PyObject *p = PyObject_GetAttrString(v[0], "param");
        if (p == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError))
                return NULL;
            PyErr_Clear();
        }
        if (p != NULL && PyUnicode_Check(p))
            param = owned_param = p;
        else
            Py_XDECREF(p);
    }
    if (unit == NULL)
        unit = owned_unit = PyUnicode_FromString("FPS");
    PyObject *items = unit ? collect_stats(st, v[0]) : NULL;
    if (items != NULL)
        res = format_table(items, title, unit, baseline, known, margin, param, &x, html);
    Py_XDECREF(items);
    Py_XDECREF(owned_param);
    Py_XDECREF(owned_unit);
    return res;
}

/* The notebook reprs show more than the released layout: the extra
 * columns the result has figures for. */
static PyObject *
one_row(PyObject *stats, int html)
{
    PyObject *items = list_of_one(stats), *unit = PyUnicode_FromString("FPS"), *res = NULL;
    shp_columns x = {1, 0, {0}};
    if (items != NULL && unit != NULL)
        res = format_table(items, NULL, unit, NULL, -1.0, SHP_DEFAULT_MARGIN, NULL, &x, html);
    Py_XDECREF(items);
    Py_XDECREF(unit);
    return res;
}

PyObject *
shp_stats_markdown(PyObject *stats)
{
    return one_row(stats, 0);
}

PyObject *
shp_stats_html(PyObject *stats)
{
    return one_row(stats, 1);
}
