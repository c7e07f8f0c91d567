/*
 * table.c -- format_benchmark_table: Markdown (and HTML for notebooks).
 *
 * The layout is the pure-Python predecessor's, so existing reports diff
 * cleanly; two of its habits are not kept: a latency under 0.1 ms keeps
 * four significant digits instead of printing 0.00, and a '|' in a name is
 * escaped instead of breaking the row.  Cells are built once as plain text
 * with a per-column decoration, then rendered as Markdown or HTML.
 */
#include "profiling.h"

#include <ctype.h>
#include <math.h>
#include <string.h>

typedef enum { DEC_PLAIN, DEC_BOLD, DEC_CODE } decoration;

#define MAX_COLS 16
#define FN "format_benchmark_table()"

typedef struct {
    int ncols;
    const char *header[MAX_COLS];
    PyObject *header_obj[MAX_COLS];   /* when the header is dynamic */
    decoration dec[MAX_COLS];
    PyObject *rows;                   /* list of lists of str */
} grid;

/* prefix + x with `decimals` decimals + suffix, as a str of whatever length
 * it takes (a fixed buffer cut 1e63 and beyond silently).  New reference. */
static PyObject *
num_text(const char *prefix, double x, int decimals, const char *suffix)
{
    char *digits = PyOS_double_to_string(x, 'f', decimals, 0, NULL);
    if (digits == NULL)
        return NULL;
    PyObject *r = PyUnicode_FromFormat("%s%s%s", prefix, digits, suffix);
    PyMem_Free(digits);
    return r;
}

/* Milliseconds: two decimals, or four significant digits below 0.1 ms. */
static PyObject *
fmt_ms(double x)
{
    double ax = fabs(x);
    if (ax != 0.0 && ax < 0.1 && isfinite(ax)) {
        int decimals = 3 - (int)floor(log10(ax));
        return num_text("", x, decimals > 12 ? 12 : decimals, "");
    }
    return num_text("", x, 2, "");
}

static PyObject *
fmt_mb(double x)
{
    if (x > 0)
        return num_text("+", x, 1, " MB");
    return num_text("", x == 0.0 ? 0.0 : x, 1, " MB");
}

/* A one-element list holding a new reference to o. */
static PyObject *
list_of_one(PyObject *o)
{
    PyObject *l = PyList_New(1);
    if (l != NULL)
        PyList_SET_ITEM(l, 0, Py_NewRef(o));
    return l;
}

/* A stored result's device label, read as benchmark_callable reads it; a
 * label it would refuse ("cuda:x") still counts as CUDA here. */
static int
is_cuda_label(PyObject *device)
{
    shp_device d;
    if (shp_device_parse(device, &d) < 0)
        PyErr_Clear();
    return d.kind == SHP_DEV_CUDA;
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

/* str(s.params[param]), "" when absent.  The lookup compares the user's
 * keys (their __eq__ runs) and str() runs the value's code: either may
 * reassign s.params, so the dict and the value are owned across both. */
static PyObject *
param_cell(shp_Stats *s, PyObject *param)
{
    if (s->params == NULL)
        return PyUnicode_FromString("");
    PyObject *params = Py_NewRef(s->params);
    PyObject *v = PyDict_GetItemWithError(params, param);   /* borrowed: owned below */
    Py_XINCREF(v);
    PyObject *r = v != NULL ? PyObject_Str(v)
                            : PyErr_Occurred() ? NULL : PyUnicode_FromString("");
    Py_XDECREF(v);
    Py_DECREF(params);
    return r;
}

/* The run sizes of s when they account for its `nsamples` samples (held:
 * shp_samples_take), else none. */
static int
sizes_of(shp_Stats *s, Py_ssize_t nsamples, Py_ssize_t **sizes, Py_ssize_t *n)
{
    if (shp_counts_array(s->run_sizes, sizes, n) < 0)
        return -1;
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < *n; i++)
        total += (*sizes)[i];
    if (*sizes != NULL && total != nsamples) {
        PyMem_Free(*sizes);
        *sizes = NULL;
        *n = 0;
    }
    if (*sizes == NULL)
        *n = 1;
    return 0;
}

static PyObject *
baseline_cell(shp_Stats *s, shp_Stats *base, double known, double margin)
{
    if (s == base)
        return PyUnicode_FromString("baseline");
    if (!(base->median_ms > 0)) {
        return PyUnicode_FromString("n/a");
    }
    double ratio = s->median_ms / base->median_ms, ma, mb, lo, hi;
    const char *verdict = NULL;
    /* an empty samples_ms is no samples: its "median" would be read before the buffer */
    int have_samples = s->samples != NULL && base->samples != NULL &&
                       s->nsamples > 0 && base->nsamples > 0;
    int have_ci = !isnan(s->ci95_low_ms) && !isnan(base->ci95_low_ms) && base->ci95_low_ms > 0;
    if (have_ci && !have_samples) {
        /* No raw samples (a stats loaded from JSON without them): the ratio
         * of the two medians' own CIs bounds the ratio's CI (conservatively). */
        lo = s->ci95_low_ms / base->ci95_high_ms;
        hi = s->ci95_high_ms / base->ci95_low_ms;
        /* and, as compare_benchmarks does for single runs, the run-to-run
         * spread neither run can see (verdict.c): known, or assumed */
        double q = shp_t975(INFINITY) * (known >= 0.0 ? known : SHP_ASSUMED_RUN_SPREAD) *
                   sqrt(2.0);
        lo = fmin(lo, ratio * exp(-q));
        hi = fmax(hi, ratio * exp(q));
        verdict = shp_judge(ratio, lo, hi, margin);
    }
    else if (have_samples) {
        /* the rule of compare_benchmarks (verdict.c), 300,000 samples a side in
         * ~0.1 s.  It answers Ctrl-C: a signal handler may give either side new
         * samples, so both are held as they are now, sizes checked on them */
        Py_ssize_t *sa = NULL, *sb = NULL, ra, rb;
        shp_interval iv;
        shp_samples_ref xb, xs;
        shp_samples_take(base, &xb);
        shp_samples_take(s, &xs);
        int rc = sizes_of(base, xb.n, &sa, &ra) < 0 || sizes_of(s, xs.n, &sb, &rb) < 0 ? -1 : 0;
        if (rc == 0)
            rc = shp_compare_samples(xb.x, xb.n, xs.x, xs.n, 0, 2000, &ma, &mb, &ratio, &lo,
                                     &hi);
        if (rc == 0)
            rc = shp_widen_interval(xb.x, xb.n, sa, ra, xs.x, xs.n, sb, rb, known, ratio, lo,
                                    hi, &iv);
        PyMem_Free(sa);
        PyMem_Free(sb);
        shp_samples_release(&xb);
        shp_samples_release(&xs);
        if (rc < 0)
            return NULL;
        verdict = shp_judge(ratio, iv.lo, iv.hi, margin);
    }
    if (verdict != NULL) {
        char tail[16];
        PyOS_snprintf(tail, sizeof(tail), "x %s", verdict);
        return num_text("", ratio, 2, tail);
    }
    return num_text("", ratio, 2, "x");
}

/* The optional columns: each appears when some row has its figure. */
typedef struct {
    int vram, first_call, gpu, cache;
} extra_cols;

/* The median, marked "(noisy)" etc. when the run was not stable
 * (stability.c): the headline figure is where the doubt belongs. */
static PyObject *
median_cell(shp_Stats *s)
{
    PyObject *med = fmt_ms(s->median_ms);
    if (med == NULL || s->stability == NULL ||
        PyUnicode_CompareWithASCIIString(s->stability, "stable") == 0)
        return med;
    PyObject *cell = PyUnicode_FromFormat("%U (%U)", med, s->stability);
    Py_DECREF(med);
    return cell;
}

static int
build_row(grid *g, shp_Stats *s, const extra_cols *x, PyObject *param, shp_Stats *base,
          double known, double margin)
{
    PyObject *row = PyList_New(0);
    if (row == NULL)
        return -1;
    if (append_obj(row, s->name ? Py_NewRef(s->name) : PyUnicode_FromString("")) < 0)
        goto error;
    if (param != NULL && append_obj(row, param_cell(s, param)) < 0)
        goto error;
    if (append_obj(row, s->device ? Py_NewRef(s->device) : PyUnicode_FromString("")) < 0)
        goto error;
    PyObject *mean = fmt_ms(s->mean_ms), *std = mean ? fmt_ms(s->std_ms) : NULL;
    PyObject *spread = std ? PyUnicode_FromFormat("%U +/- %U", mean, std) : NULL;
    Py_XDECREF(mean);
    Py_XDECREF(std);
    if (append_obj(row, spread) < 0 ||
        append_obj(row, median_cell(s)) < 0 ||
        append_obj(row, fmt_ms(s->p95_ms)) < 0 ||
        append_obj(row, num_text("", s->fps * (double)s->batch_size, 1, "")) < 0 ||
        append_obj(row, fmt_mb(s->ram_delta_mb)) < 0)
        goto error;
    if (x->vram) {
        PyObject *cell = s->device != NULL && is_cuda_label(s->device)
                             ? fmt_mb(s->vram_delta_mb) : PyUnicode_FromString("N/A");
        if (append_obj(row, cell) < 0)
            goto error;
    }
    if (x->first_call &&
        append_obj(row, isnan(s->first_call_ms) ? PyUnicode_FromString("N/A")
                                                : fmt_ms(s->first_call_ms)) < 0)
        goto error;
    if (x->gpu &&
        (append_obj(row, isnan(s->gpu_median_ms) ? PyUnicode_FromString("N/A")
                                                 : fmt_ms(s->gpu_median_ms)) < 0 ||
         append_obj(row, isnan(s->host_share) ? PyUnicode_FromString("N/A")
                                              : num_text("", s->host_share * 100.0, 0, "%")) < 0))
        goto error;
    if (x->cache &&
        append_obj(row, s->cache != NULL ? Py_NewRef(s->cache) : PyUnicode_FromString("N/A")) < 0)
        goto error;
    if (base != NULL && append_obj(row, baseline_cell(s, base, known, margin)) < 0)
        goto error;
    if (PyList_Append(g->rows, row) < 0)
        goto error;
    Py_DECREF(row);
    return 0;
error:
    Py_DECREF(row);
    return -1;
}

static void
add_col(grid *g, const char *h, PyObject *hobj, decoration d)
{
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
render(grid *g, PyObject *title, int html)
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

/* Render `items` (a list of BenchmarkStats, already checked). */
static PyObject *
format_table(PyObject *items, PyObject *title, PyObject *unit, PyObject *baseline,
             double known, double margin, PyObject *param, int html)
{
    grid g;
    memset(&g, 0, sizeof(g));
    extra_cols x = {0, 0, 0, 0};
    Py_ssize_t n = PyList_GET_SIZE(items);
    for (Py_ssize_t i = 0; i < n; i++) {
        shp_Stats *s = (shp_Stats *)PyList_GET_ITEM(items, i);
        x.vram |= s->device != NULL && is_cuda_label(s->device);
        x.first_call |= !isnan(s->first_call_ms);
        x.gpu |= !isnan(s->gpu_median_ms);
        x.cache |= s->cache != NULL && PyUnicode_CompareWithASCIIString(s->cache, "cold") == 0;
    }
    PyObject *tput = PyUnicode_FromFormat("Throughput (%U)", unit), *res = NULL;
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
    if (x.vram)
        add_col(&g, "Peak VRAM Delta", NULL, DEC_PLAIN);
    if (x.first_call)
        add_col(&g, "First Call (ms)", NULL, DEC_PLAIN);
    if (x.gpu) {
        add_col(&g, "GPU Median (ms)", NULL, DEC_PLAIN);
        add_col(&g, "Host Share", NULL, DEC_PLAIN);
    }
    if (x.cache)
        add_col(&g, "Cache", NULL, DEC_PLAIN);
    if (baseline != NULL)
        add_col(&g, "vs Baseline", NULL, DEC_PLAIN);
    g.rows = PyList_New(0);
    if (g.rows == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++)
        if (build_row(&g, (shp_Stats *)PyList_GET_ITEM(items, i), &x, param,
                      (shp_Stats *)baseline, known, margin) < 0)
            goto done;
    res = render(&g, title, html);
done:
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
                                        "margin"};
    static const shp_argspec spec = {"format_benchmark_table", names, 8, 3, 1, 0};
    shp_state *st = PyModule_GetState(module);
    PyObject *v[8];
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
        res = format_table(items, title, unit, baseline, known, margin, param, html);
    Py_XDECREF(items);
    Py_XDECREF(owned_param);
    Py_XDECREF(owned_unit);
    return res;
}

static PyObject *
one_row(PyObject *stats, int html)
{
    PyObject *items = list_of_one(stats), *unit = PyUnicode_FromString("FPS"), *res = NULL;
    if (items != NULL && unit != NULL)
        res = format_table(items, NULL, unit, NULL, -1.0, SHP_DEFAULT_MARGIN, NULL, html);
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
