/*
 * render/ -- text: Markdown / HTML escaping (markup.c), a result's doubt
 * labels (flags.c), one cell (cells.c), the extra columns (columns.c), the
 * tables (table.c), the table of runs under load (loadtable.c).  Reads the
 * result structs (objects.h) and calls no function of types/; types/ calls
 * these for its reprs.
 */
#ifndef SHP_RENDER_RENDER_H
#define SHP_RENDER_RENDER_H

#include "objects.h"
#include "capi/capi.h"

/* ---- markup.c ----------------------------------------------------------- */

typedef enum { SHP_MD_HEADING, SHP_MD_CELL, SHP_MD_CODE } shp_md_mode;

/* Markdown text that renders as exactly `s` on one line (heading, table
 * cell or code-span content); new reference, or NULL (MemoryError). */
PyObject *shp_md_text(PyObject *s, shp_md_mode mode);
/* `s` as a Markdown code span (fence longer than any backtick run). */
PyObject *shp_md_code_span(PyObject *s);
/* `s` as a bold Markdown table cell that renders as exactly `s` (escaped). */
PyObject *shp_md_bold_cell(PyObject *s);
/* `s` with & < > " as HTML entities. */
PyObject *shp_html_escape(PyObject *s);

/* ---- flags.c ------------------------------------------------------------ */

#define SHP_MAX_FLAGS 8
/* The label of a cause ("noisy", "busy machine", "warm-up too short", ...);
 * a static string. */
const char *shp_cause_label(shp_cause c);
/* The causes read back from a result's fields (its flags: the first seven
 * of shp_cause), as bits.  Runs no Python, never fails. */
unsigned shp_stats_cause_mask(const shp_Stats *s);
/* The doubt labels of a result ("noisy", "multimodal", "drifting", "busy
 * machine", "launch-bound", "overhead-dominated", "page faults"), static
 * strings, in that order; returns how many.  Runs no Python, never fails. */
int shp_stats_flags(const shp_Stats *s, const char *out[SHP_MAX_FLAGS]);
/* The footnote under a table of `items` (a list of BenchmarkStats) whose
 * rows are called `labels` (a list of str, one per row): "Flags: multimodal,
 * busy machine (a, b batch=4); busy machine (c)." -- one clause per
 * distinct set of flags, naming its rows ("all rows" when every row has it;
 * just the flags in a one-row table), escaped
 * for Markdown or HTML ("<p>...</p>"); "" when no row has one.  New str, or
 * NULL with an exception. */
PyObject *shp_flags_footnote(PyObject *items, PyObject *labels, int html);

/* The load flags of a result ("overloaded", "requests dropped", "requests
 * unserved", "few requests", "scheduler lag", "busy machine"), static
 * strings in that order; returns how many.  Runs no Python, never fails. */
int shp_load_flags(const shp_LoadStats *s, const char *out[SHP_MAX_FLAGS]);
/* The footnote of a table of `items` (a list of LoadStats) whose rows are
 * called `labels`, as shp_flags_footnote.  New str, or NULL. */
PyObject *shp_load_footnote(PyObject *items, PyObject *labels, int html);

/* ---- cells.c: one cell's text (new str, or NULL with an exception) ------- */

/* prefix + x with `decimals` decimals + suffix, whatever its length. */
PyObject *shp_cell_num(const char *prefix, double x, int decimals, const char *suffix);
/* Milliseconds as the table prints them: the released module's two
 * decimals, or two significant digits where that would print a nonzero
 * value as 0.00. */
PyObject *shp_cell_ms(double x);
/* A count per call as people read it: "6,389,075" (rounded; "N/A" for NaN). */
PyObject *shp_cell_count(double x);
/* "<mean> +/- <std>", the std at the mean's decimal place. */
PyObject *shp_cell_spread(double mean, double std);
/* Megabytes: "+x.x MB", or "0.0 MB" when not above zero. */
PyObject *shp_cell_mb(double x);
/* 1 if a stored result's device label reads as CUDA (a label
 * benchmark_callable would refuse, "cuda:x", still counts); never fails. */
int shp_cell_is_cuda(PyObject *device);
/* str(s.params[param]), "" when absent (the user's __eq__ / __str__ run). */
PyObject *shp_cell_param(shp_Stats *s, PyObject *param);
/* "baseline" for the baseline itself, else "<ratio>x <verdict>" judged as
 * compare_benchmarks judges (known: the run spread given, or < 0). */
PyObject *shp_cell_baseline(shp_Stats *s, shp_Stats *base, double known, double margin);

/* ---- columns.c: the extra columns columns= asks for ---------------------- */

/* The columns beyond the released layout, by the names columns= takes. */
typedef enum {
    SHP_COL_RERUN, SHP_COL_FIRST_CALL, SHP_COL_P99, SHP_COL_CI95, SHP_COL_MIN, SHP_COL_MAX, SHP_COL_GPU,
    SHP_COL_HOST_SHARE, SHP_COL_CACHE, SHP_COL_INSTRUCTIONS, SHP_COL_CYCLES, SHP_N_COLUMNS
} shp_column_id;

typedef struct {
    int auto_cols;                /* columns="auto": those some row has a figure for */
    int n;
    shp_column_id id[SHP_N_COLUMNS]; /* in the order asked, each once */
} shp_columns;

/* columns= (None, "auto", one name, or an iterable of names) into *x;
 * 0, or -1 with TypeError / ValueError naming the choices (or the error of
 * the user's iterator). */
int shp_columns_parse(PyObject *v, shp_columns *x);
/* columns="auto": add the rerun interval, first call, GPU time and host
 * share, cache state and counts where some row of `items` (a list of
 * BenchmarkStats) has them.  Runs no Python, never fails. */
void shp_columns_resolve_auto(shp_columns *x, PyObject *items);
/* The header of an extra column; a static string. */
const char *shp_column_header(shp_column_id id);
/* One extra cell of row `s` ("N/A" where the row has no figure). */
PyObject *shp_column_cell(shp_Stats *s, shp_column_id id);

/* ---- loadtable.c: a run under load ---------------------------------------- */

/* format_load_table(results, title=None, format='markdown'): a module
 * function (METH_FASTCALL | METH_KEYWORDS); a new str, or NULL. */
PyObject *shp_format_load_table(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames);
/* The one-row Markdown / HTML table of one LoadStats (Jupyter); new str. */
PyObject *shp_load_markdown(PyObject *load);
PyObject *shp_load_html(PyObject *load);

/* ---- table.c ------------------------------------------------------------ */

/* How a column's cells are marked up. */
typedef enum { SHP_CELL_PLAIN, SHP_CELL_BOLD, SHP_CELL_CODE } shp_cell_style;
/* The one table layout: an optional `### title`, the header row of
 * headers[0..ncols) (ncols <= 21), the alignment row, `rows` (a list of lists
 * of ncols plain str, escaped here: Markdown, or HTML when `html`), then
 * `note` (a str, already escaped; "" for none) after a blank line.  New str,
 * or NULL with an exception. */
PyObject *shp_table_render(PyObject *title, int ncols, const char *const *headers,
                           const shp_cell_style *style, PyObject *rows, PyObject *note,
                           int html);

/* The module functions below are METH_FASTCALL | METH_KEYWORDS entry points:
 * a new reference, or NULL with an exception set. */
PyObject *shp_format_benchmark_table(PyObject *module, PyObject *const *args,
                                     Py_ssize_t nargs, PyObject *kwnames);
/* The one-row Markdown / HTML table of one stats object (for Jupyter); a
 * new str, or NULL with an exception set. */
PyObject *shp_stats_markdown(PyObject *stats);
PyObject *shp_stats_html(PyObject *stats);

#endif /* SHP_RENDER_RENDER_H */
