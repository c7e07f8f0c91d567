/*
 * columns.c -- the table's extra columns: the names columns= takes, the
 * choice columns="auto" makes from the rows, and one extra cell's text.
 *
 * The released layout (table.c) has seven columns; everything beyond them
 * is asked for by name here: a new column is an entry in shp_column_id
 * (render.h), in the name and header lists and EXTRA_CHOICES below, a
 * case in shp_column_cell and, if "auto" should pick it, a line in
 * shp_columns_resolve_auto.
 */
#include "render/render.h"

#include <math.h>
#include <string.h>

#define FN "format_benchmark_table()"

static const char *const column_keys[SHP_N_COLUMNS] = {
    "rerun", "first_call", "p99", "ci95", "min", "max", "gpu", "host_share", "cache",
    "instructions", "cycles",
};
static const char *const column_headers[SHP_N_COLUMNS] = {
    "Rerun 95% (ms)", "First Call (ms)", "P99 (ms)", "95% CI (ms)", "Min (ms)", "Max (ms)",
    "GPU Median (ms)", "Host Share", "Cache",
    "Instructions / call", "Cycles / call",
};
#define EXTRA_CHOICES "None, 'auto', or names from rerun, first_call, p99, ci95, min, max, " \
                      "gpu, host_share, cache, instructions, cycles"

static PyObject *
opt_ms(double x)
{
    return isnan(x) ? PyUnicode_FromString("N/A") : shp_cell_ms(x);
}

/* "<lo> to <hi>", or "N/A" when either end is None. */
static PyObject *
range_cell(double low, double high)
{
    if (isnan(low) || isnan(high))
        return PyUnicode_FromString("N/A");
    PyObject *lo = shp_cell_ms(low), *hi = lo ? shp_cell_ms(high) : NULL;
    PyObject *r = hi ? PyUnicode_FromFormat("%U to %U", lo, hi) : NULL;
    Py_XDECREF(lo);
    Py_XDECREF(hi);
    return r;
}

PyObject *
shp_column_cell(shp_Stats *s, shp_column_id id)
{
    switch (id) {
    case SHP_COL_RERUN:   /* none, for a reason: say which (two modes, drifting) */
        if ((isnan(s->rerun_low_ms) || isnan(s->rerun_high_ms)) && s->rerun_basis != NULL &&
            PyUnicode_Check(s->rerun_basis) && PyUnicode_FindChar(s->rerun_basis, ':', 0,
                                                                 PY_SSIZE_T_MAX, 1) > 0) {
            Py_ssize_t colon = PyUnicode_FindChar(s->rerun_basis, ':', 0, PY_SSIZE_T_MAX, 1);
            PyObject *why = PyUnicode_Substring(s->rerun_basis, 0, colon);
            PyObject *r = why ? PyUnicode_FromFormat("none (%U)", why) : NULL;
            Py_XDECREF(why);
            return r;
        }
        return range_cell(s->rerun_low_ms, s->rerun_high_ms);
    case SHP_COL_FIRST_CALL: return opt_ms(s->first_call_ms);
    case SHP_COL_P99: return opt_ms(s->p99_ms);
    case SHP_COL_CI95: return range_cell(s->ci95_low_ms, s->ci95_high_ms);
    case SHP_COL_MIN: return shp_cell_ms(s->min_ms);
    case SHP_COL_MAX: return shp_cell_ms(s->max_ms);
    case SHP_COL_GPU: return opt_ms(s->gpu_median_ms);
    case SHP_COL_HOST_SHARE:
        return isnan(s->host_share) ? PyUnicode_FromString("N/A")
                                    : shp_cell_num("", s->host_share * 100.0, 0, "%");
    case SHP_COL_CACHE:
        return s->cache != NULL ? Py_NewRef(s->cache) : PyUnicode_FromString("N/A");
    case SHP_COL_INSTRUCTIONS: return shp_cell_count(s->instructions_per_call);
    case SHP_COL_CYCLES: return shp_cell_count(s->cycles_per_call);
    default:
        break;
    }
    PyErr_SetString(PyExc_SystemError, "unknown table column");
    return NULL;
}

static void
add_column(shp_columns *x, shp_column_id id)
{
    for (int i = 0; i < x->n; i++)
        if (x->id[i] == id)
            return;
    x->id[x->n++] = id;
}

static void
pick_column(void *x, int i)
{
    add_column((shp_columns *)x, (shp_column_id)i);
}

int
shp_columns_parse(PyObject *v, shp_columns *x)
{
    memset(x, 0, sizeof(*x));
    if (v == NULL || v == Py_None)
        return 0;
    if (PyUnicode_Check(v) && PyUnicode_CompareWithASCIIString(v, "auto") == 0) {
        x->auto_cols = 1;
        return 0;
    }
    return shp_arg_names(v, FN, "columns", EXTRA_CHOICES, column_keys, SHP_N_COLUMNS,
                         pick_column, x);
}

void
shp_columns_resolve_auto(shp_columns *x, PyObject *items)
{
    int rerun = 0, first = 0, gpu = 0, cold = 0, instr = 0, cycles = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); i++) {
        shp_Stats *s = (shp_Stats *)PyList_GET_ITEM(items, i);
        /* an interval, or the reason a run has none ("none (two modes)"): the column
         * stays, so the table's shape does not change with the samples */
        rerun |= (!isnan(s->rerun_low_ms) && !isnan(s->rerun_high_ms)) ||
                 (s->rerun_basis != NULL && s->rerun_basis != Py_None);
        first |= !isnan(s->first_call_ms);
        gpu |= !isnan(s->gpu_median_ms);
        cold |= s->cache != NULL && PyUnicode_CompareWithASCIIString(s->cache, "cold") == 0;
        instr |= !isnan(s->instructions_per_call);
        cycles |= !isnan(s->cycles_per_call);
    }
    if (rerun)
        add_column(x, SHP_COL_RERUN);
    if (first)
        add_column(x, SHP_COL_FIRST_CALL);
    if (gpu) {
        add_column(x, SHP_COL_GPU);
        add_column(x, SHP_COL_HOST_SHARE);
    }
    if (cold)
        add_column(x, SHP_COL_CACHE);
    if (instr)
        add_column(x, SHP_COL_INSTRUCTIONS);
    if (cycles)
        add_column(x, SHP_COL_CYCLES);
}

const char *
shp_column_header(shp_column_id id)
{
    return column_headers[id];
}
