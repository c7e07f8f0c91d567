/*
 * compare.c -- compare_benchmarks and the Comparison type.
 *
 * The statistics are bootstrap.c's; this file is the Python face: the
 * result type (table-driven fields, fields.c) and the module function.
 */
#include "types/types.h"

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
    /* keyword-only: how the verdict was reached (verdict.c) */
    PyObject *reason;
    double margin;
    PyObject *method;
    Py_ssize_t baseline_runs, candidate_runs;
    double run_spread;
    double boot_low, boot_high;
} shp_Comparison;

#define C_OFF(m) offsetof(shp_Comparison, m)
#define CF(nm, kind, m, rnd, doc) {nm, kind, C_OFF(m), rnd, 1, 0, 0.0, SHP_SHOW_ALWAYS, doc}
#define CK(nm, kind, m, rnd, dflt, doc) {nm, kind, C_OFF(m), rnd, 0, 1, dflt, SHP_SHOW_IF_SET, doc}
static const shp_field comparison_fields[] = {
    CF("baseline", SHP_F_STR, baseline, SHP_R_NONE, "Name of the baseline benchmark."),
    CF("candidate", SHP_F_STR, candidate, SHP_R_NONE, "Name of the candidate benchmark."),
    CF("baseline_median_ms", SHP_F_DOUBLE, baseline_median_ms, SHP_R_MS, "Baseline median (ms)."),
    CF("candidate_median_ms", SHP_F_DOUBLE, candidate_median_ms, SHP_R_MS, "Candidate median (ms)."),
    CF("ratio", SHP_F_DOUBLE, ratio, SHP_R_RATIO, "candidate median / baseline median."),
    CF("ci95_low", SHP_F_DOUBLE, ci95_low, SHP_R_RATIO,
       "95% interval of the ratio, low end (between-block and between-run spread included)."),
    CF("ci95_high", SHP_F_DOUBLE, ci95_high, SHP_R_RATIO, "95% interval of the ratio, high end."),
    CF("verdict", SHP_F_STR, verdict, SHP_R_NONE,
       "'slower' / 'faster' (interval excludes 1 and the ratio is beyond the margin), 'same' "
       "(interval inside the margin) or 'inconclusive' (see reason)."),
    CF("resamples", SHP_F_COUNT, resamples, SHP_R_NONE, "Bootstrap resamples used."),
    CK("reason", SHP_F_OPT_STR, reason, SHP_R_NONE, 0, "Why this verdict, in one sentence."),
    CK("margin", SHP_F_DOUBLE, margin, SHP_R_RATIO, SHP_DEFAULT_MARGIN,
       "Practical-equivalence margin: differences under it count as the same (0.05 = 5%)."),
    CK("method", SHP_F_OPT_STR, method, SHP_R_NONE, 0,
       "What the interval rests on: 'samples' (single runs), 'runs' (repetitions) or "
       "'interleaved' (paired rounds)."),
    CK("baseline_runs", SHP_F_COUNT, baseline_runs, SHP_R_NONE, 1, "Runs (or rounds) of the baseline."),
    CK("candidate_runs", SHP_F_COUNT, candidate_runs, SHP_R_NONE, 1, "Runs (or rounds) of the candidate."),
    CK("run_spread", SHP_F_OPT_DOUBLE, run_spread, SHP_R_RATIO, 0,
       "Between-run spread used (std of log run medians), when measured or given."),
    CK("bootstrap_low", SHP_F_OPT_DOUBLE, boot_low, SHP_R_RATIO, 0,
       "The percentile-bootstrap 95% interval of the ratio alone (sampling error), low end."),
    CK("bootstrap_high", SHP_F_OPT_DOUBLE, boot_high, SHP_R_RATIO, 0,
       "... high end; ci95_low / ci95_high widen it by the block and run spread."),
    {0},
};

static PyGetSetDef comparison_getset[sizeof(comparison_fields) / sizeof(comparison_fields[0])];

void
shp_comparison_prepare_spec(void)
{
    static char doc[3072];
    shp_fields_fill_getset(comparison_fields, NULL, comparison_getset);
    shp_fields_spec_doc(
        &shp_comparison_spec, comparison_fields, NULL,
        "Candidate against baseline: the ratio of their medians, its 95% interval and a\n"
        "verdict with its reason.\n\n"
        "What compare_benchmarks, compare_callables and compare_repeated return; made by\n"
        "hand, it takes its fields as arguments.",
        NULL,
        "\n\nExamples\n--------\n"
        ">>> c = Comparison('old', 'new', 2.0, 1.0, 0.5, 0.45, 0.55, 'faster', 2000)\n"
        ">>> c.ratio, c.verdict\n(0.5, 'faster')",
        doc, sizeof doc);
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
Cmp_to_dict(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"exact"};
    static const shp_argspec spec = {"to_dict", names, 1, 0, 0, 0};
    PyObject *v[1];
    int exact = 0;
    if (shp_args_parse(&spec, args, nargs, kwnames, v) < 0 ||
        (v[0] != NULL && shp_arg_flag(v[0], &exact) < 0))
        return NULL;
    return shp_fields_dict(self, comparison_fields, !exact);
}

/* The keyword-only fields, unrounded, as a dict (pickle state). */
static PyObject *
keyword_state(PyObject *op)
{
    PyObject *d = PyDict_New();
    if (d == NULL)
        return NULL;
    for (const shp_field *f = comparison_fields; f->name != NULL; f++) {
        if (!f->keyword_only)
            continue;
        PyObject *v = shp_field_get(op, f);
        if (v == NULL || shp_dict_set(d, f->name, v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(v);
    }
    return d;
}

static PyObject *
Cmp_setstate(PyObject *op, PyObject *state)
{
    if (!PyDict_Check(state)) {
        PyErr_SetString(PyExc_TypeError, "Comparison.__setstate__ needs a dict");
        return NULL;
    }
    /* each value is held while it is set: its __float__ / __index__ may
     * empty the dict (the dict itself is the caller's argument) */
    for (const shp_field *f = comparison_fields; f->name != NULL; f++) {
        if (!f->keyword_only)
            continue;
        PyObject *key = PyUnicode_FromString(f->name);
        if (key == NULL)
            return NULL;
        PyObject *v = PyDict_GetItemWithError(state, key);   /* an exact str key: no user code */
        Py_DECREF(key);
        if (v == NULL && PyErr_Occurred())
            return NULL;
        if (v == NULL)
            continue;
        Py_INCREF(v);
        int rc = shp_field_set(op, f, v);
        Py_DECREF(v);
        if (rc < 0)
            return NULL;
    }
    Py_RETURN_NONE;
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
    PyObject *res = NULL, *state = NULL;
    if (b != NULL && k != NULL && v != NULL)
        state = keyword_state(op);
    if (state != NULL)
        res = Py_BuildValue("O(OOdddddOn)O", (PyObject *)Py_TYPE(op), b, k,
                            c->baseline_median_ms, c->candidate_median_ms, c->ratio,
                            c->ci95_low, c->ci95_high, v, c->resamples, state);
    Py_XDECREF(state);
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
    {"to_dict", (PyCFunction)(void (*)(void))Cmp_to_dict, METH_FASTCALL | METH_KEYWORDS,
     "to_dict($self, /, *, exact=False)\n"
     "--\n"
     "\n"
     "The fields as a dict, ratios rounded to 4 decimals for reading.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "exact : bool, default False\n"
     "    Every value unrounded, as a saved verdict needs (the CLI's --json writes it).\n"
     "\n"
     "Returns\n"
     "-------\n"
     "dict"},
    {"__reduce__", Cmp_reduce, METH_NOARGS, "Pickle support."},
    {"__setstate__", Cmp_setstate, METH_O, "Pickle support."},
    {"_repr_markdown_", Cmp_markdown, METH_NOARGS, "Markdown table (Jupyter)."},
    {"_repr_html_", Cmp_html, METH_NOARGS, "HTML table (Jupyter)."},
    {"to_markdown", Cmp_markdown, METH_NOARGS,
     "to_markdown($self, /)\n"
     "--\n"
     "\n"
     "The comparison as a Markdown table (names escaped to render as given)."},
    {"to_html", Cmp_html, METH_NOARGS,
     "to_html($self, /)\n"
     "--\n"
     "\n"
     "The comparison as an HTML table."},
    {0},
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
    {Py_tp_doc, "Candidate against baseline: the ratio of their medians and a verdict."},
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

/* A side's run sizes as a C array (NULL, 1 for no run_sizes), for its n
 * samples (held: shp_samples_take); 0 / -1. */
static int
run_sizes_of(shp_Stats *s, Py_ssize_t n, const char *what, Py_ssize_t **sizes,
             Py_ssize_t *nruns)
{
    Py_ssize_t total;
    if (shp_counts_array(s->run_sizes, sizes, nruns, &total) < 0)
        return -1;
    if (*sizes == NULL) {
        *nruns = 1;
        return 0;
    }
    if (total != n) {
        PyMem_Free(*sizes);
        *sizes = NULL;
        if (total < 0)
            PyErr_Format(PyExc_ValueError, "compare_benchmarks(): %s.run_sizes add up to more "
                         "than %zd, but it has %zd samples", what, PY_SSIZE_T_MAX, n);
        else
            PyErr_Format(PyExc_ValueError, "compare_benchmarks(): %s.run_sizes add up to %zd, "
                         "but it has %zd samples", what, total, n);
        return -1;
    }
    return 0;
}

/* What the comparison decided, before it becomes a Comparison. */
typedef struct {
    double ma, mb, ratio, lo, hi, run_spread;
    Py_ssize_t runs_a, runs_b;
    const char *method;
    char basis[200];
    char advice[160];
    int decides;         /* the between-run spread was measured or given (verdict.c) */
} judged;

/* Interleaved rounds (paired=True): round i of a against round i of b. */
static int
judge_paired(const shp_samples_ref *a, const shp_samples_ref *b, const Py_ssize_t *sa,
             Py_ssize_t ra, const Py_ssize_t *sb, Py_ssize_t rb, judged *j)
{
    if (sa == NULL || sb == NULL || ra != rb || ra < 2) {
        PyErr_SetString(PyExc_ValueError,
                        "compare_benchmarks(): paired=True needs run_sizes on both sides with the "
                        "same number (>= 2) of rounds, as compare_callables makes");
        return -1;
    }
    if (shp_paired_rounds(a->x, b->x, sa, sb, ra, &j->ratio, &j->lo, &j->hi) < 0)
        return -1;
    j->method = "interleaved";
    j->runs_a = j->runs_b = ra;
    PyOS_snprintf(j->basis, sizeof(j->basis),
                  "%zd interleaved rounds, distribution-free interval of the median round ratio%s",
                  ra, ra < 6 ? "; under 6 rounds its coverage is below 95%" : "");
    PyOS_snprintf(j->advice, sizeof j->advice, "; more rounds narrow it");
    j->decides = 1;
    return 0;
}

/* Separate runs: bootstrap of the pooled medians, widened by the block and run spreads. */
static int
judge_levels(const shp_samples_ref *a, const shp_samples_ref *b, const Py_ssize_t *sa,
             Py_ssize_t ra, const Py_ssize_t *sb, Py_ssize_t rb, double known, double blo,
             double bhi, const char *repeat, const char *compare, judged *j)
{
    shp_interval iv;
    if (shp_widen_interval(a->x, a->n, sa, ra, b->x, b->n, sb, rb, known, j->ratio, blo, bhi,
                           &iv) < 0)
        return -1;
    j->runs_a = ra;
    j->runs_b = rb;
    j->decides = shp_interval_decides(&iv, known);
    j->method = ra > 1 || rb > 1 ? "runs" : "samples";
    j->lo = iv.lo;
    j->hi = iv.hi;
    double sa_ = iv.a.run_spread, sb_ = iv.b.run_spread;
    double spread = isnan(sa_) ? sb_ : isnan(sb_) ? sa_ : sa_ > sb_ ? sa_ : sb_;
    double ea = iv.a.between, eb = iv.b.between;
    double single = isnan(ea) ? eb : isnan(eb) ? ea : ea > eb ? ea : eb;
    int mixed = (ra > 1) != (rb > 1);   /* one side repeated, the other a single run */
    int floored = known >= 0.0 && (iv.a.known_floor || iv.b.known_floor);
    if (ra > 1 || rb > 1)   /* the spread that widened the interval, whichever it was */
        j->run_spread = fmax(isnan(spread) ? 0.0 : spread,
                             fmax(mixed ? single : 0.0, floored ? known : 0.0));
    else
        j->run_spread = known >= 0.0 ? known : single;
    if (!iv.widened) {
        PyOS_snprintf(j->basis, sizeof(j->basis),
                      "bootstrap of the medians only: a median <= 0 has no log scale to widen "
                      "the interval on");
        j->advice[0] = '\0';
    }
    else if (mixed) {
        int as = ra > 1 ? iv.b.assumed : iv.a.assumed;
        PyOS_snprintf(j->basis, sizeof(j->basis),
                      "%zd and %zd runs: between-run spread ±%.1f%% measured on the repeated "
                      "side, ±%.1f%% %s for the single run", ra, rb, 100.0 * spread,
                      100.0 * single, known >= 0.0 ? "given" : as ? "assumed" : "(its slow "
                      "variation)");
        PyOS_snprintf(j->advice, sizeof j->advice, "; repeat both sides (%s)", repeat);
    }
    else if (ra > 1 || rb > 1) {
        if (floored)
            PyOS_snprintf(j->basis, sizeof(j->basis),
                          "%zd and %zd runs, between-run spread ±%.1f%% measured, the given "
                          "±%.1f%% used as its floor", ra, rb, 100.0 * spread, 100.0 * known);
        else
            PyOS_snprintf(j->basis, sizeof(j->basis),
                          "%zd and %zd runs, between-run spread ±%.1f%%", ra, rb, 100.0 * spread);
        PyOS_snprintf(j->advice, sizeof j->advice, "; more runs (%s) narrow it, or %s",
                      repeat, compare);
    }
    else if (known >= 0.0) {
        PyOS_snprintf(j->basis, sizeof(j->basis),
                      "single runs with the given between-run spread ±%.1f%%", 100.0 * known);
        PyOS_snprintf(j->advice, sizeof j->advice, "; %s narrows it", compare);
    }
    else if (iv.a.assumed && iv.b.assumed) {
        PyOS_snprintf(j->basis, sizeof(j->basis),
                      "single runs: a run-to-run spread of ±%.0f%% assumed, as separate runs "
                      "of identical code showed", 100.0 * SHP_ASSUMED_RUN_SPREAD);
        PyOS_snprintf(j->advice, sizeof j->advice, "; %s measures it, or %s", repeat, compare);
    }
    else {
        PyOS_snprintf(j->basis, sizeof(j->basis),
                      "single runs: their slow variation ±%.1f%% (above the ±%.0f%% assumed) "
                      "stands in for the unmeasured run-to-run spread", 100.0 * single,
                      100.0 * SHP_ASSUMED_RUN_SPREAD);
        PyOS_snprintf(j->advice, sizeof j->advice, "; %s measures it, or %s", repeat, compare);
    }
    return 0;
}

/* The busy-machine caveat the verdict carries when either side was measured
 * with other processes using over a quarter of the CPU (machine_busy, set
 * per run by bench.c and for any of the runs of a pool). */
static void
busy_caveat(shp_Stats *a, shp_Stats *b, const char *method, char *reason, size_t size)
{
    if (a->machine_busy != 1 && b->machine_busy != 1)
        return;
    size_t len = strlen(reason);
    PyOS_snprintf(reason + len, size - len,
                  "; caveat: the machine was busy while %s was measured (other processes used "
                  "over 25%% of the CPU)%s",
                  a->machine_busy == 1 && b->machine_busy == 1 ? "each side"
                  : a->machine_busy == 1 ? "the baseline" : "the candidate",
                  strcmp(method, "interleaved") == 0
                      ? ": interleaving cancels what it does to both sides alike, not a change "
                        "within a round"
                      : ", which moves separate runs apart: rerun on an idle machine, or "
                        "compare interleaved (compare_callables, compare_repeated)");
}

PyObject *
shp_compare_benchmarks(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames)
{
    shp_state *st = PyModule_GetState(module);
    static const char *const names[] = {"baseline", "candidate", "resamples", "seed",
                                        "margin", "run_spread", "paired"};
    static const shp_argspec spec = {"compare_benchmarks", names, 7, 2, 2, 0};
    PyObject *v[7];
    if (shp_args_parse(&spec, args, nargs, kwnames, v) < 0)
        return NULL;
    Py_ssize_t resamples = 2000;
    unsigned long long seed = 0;
    double margin = SHP_DEFAULT_MARGIN, known = -1.0;
    int paired = 0;
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
    for (int i = 4; i < 6; i++) {
        double d;
        if (v[i] == NULL || (i == 5 && v[i] == Py_None))
            continue;
        if (shp_arg_real(v[i], FN, names[i], &d) < 0)
            return NULL;
        if (!(d >= 0.0 && d < 1.0))
            return shp_arg_value_error(FN, names[i], "a number in [0, 1) (0.05 = 5%)", v[i]),
                   NULL;
        if (i == 4)
            margin = d;
        else
            known = d;
    }
    if (v[6] != NULL && shp_arg_flag(v[6], &paired) < 0)
        return NULL;
    if (check_stats(st, v[0], "baseline") < 0 || check_stats(st, v[1], "candidate") < 0)
        return NULL;
    shp_Stats *a = (shp_Stats *)v[0], *b = (shp_Stats *)v[1];
    Py_ssize_t *sa = NULL, *sb = NULL, ra = 1, rb = 1;
    shp_Comparison *c = NULL;
    judged j;
    memset(&j, 0, sizeof(j));
    j.run_spread = NAN;
    double blo, bhi;
    /* The samples as they are now, held: the bootstrap answers Ctrl-C, and a
     * signal handler (or a finalizer run by any allocation below) may give
     * a or b new samples; the run sizes are checked against these. */
    shp_samples_ref xa, xb;
    shp_samples_take(a, &xa);
    shp_samples_take(b, &xb);
    if (run_sizes_of(a, xa.n, "baseline", &sa, &ra) < 0 ||
        run_sizes_of(b, xb.n, "candidate", &sb, &rb) < 0)
        goto error;
    if (shp_compare_samples(xa.x, xa.n, xb.x, xb.n, (uint64_t)seed, resamples, &j.ma, &j.mb,
                            &j.ratio, &blo, &bhi) < 0)
        goto error;
    /* Two single runs on a machine whose spread between runs was measured
     * (calibrate_run_spread, spatialhub-bench --calibrate): that measurement,
     * t-adjusted for the processes it came from, decides as a given spread
     * does -- unless a run started on a busy machine, which a calibration on a
     * quiet one does not describe. */
    int calibrated = 0;
    if (known < 0.0 && !paired && ra <= 1 && rb <= 1 && st->machine_spread >= 0.0 &&
        a->machine_busy != 1 && b->machine_busy != 1) {
        known = fmin(st->machine_spread * shp_t975(st->machine_spread_df) / shp_t975(INFINITY),
                     0.99);
        calibrated = 1;
    }
    PyObject *hold = NULL, *hold2 = NULL;
    const char *repeat = shp_remedy_word(st, SHP_WORD_REPEAT, &hold);
    const char *compare = shp_remedy_word(st, SHP_WORD_COMPARE, &hold2);
    int rc = paired ? judge_paired(&xa, &xb, sa, ra, sb, rb, &j)
                    : judge_levels(&xa, &xb, sa, ra, sb, rb, known, blo, bhi, repeat, compare, &j);
    if (rc == 0 && calibrated)
        PyOS_snprintf(j.basis, sizeof(j.basis), "single runs with this machine's calibrated "
                      "between-run spread ±%.1f%% (from %.0f processes, t-adjusted)",
                      100.0 * known, st->machine_spread_df + 1.0);
    const char *verdict = rc == 0 ? shp_judge(j.ratio, j.lo, j.hi, margin) : NULL;
    char reason[768];
    int same_samples = xa.n == xb.n && ra == rb &&
                       memcmp(xa.x, xb.x, (size_t)xa.n * sizeof(double)) == 0 &&
                       (sa == NULL || memcmp(sa, sb, (size_t)ra * sizeof(Py_ssize_t)) == 0);
    if (rc < 0) {
        Py_XDECREF(hold);
        Py_XDECREF(hold2);
        goto error;
    }
    if (same_samples) {
        /* the same measurement on both sides (a file compared with itself): no
         * spread between runs enters, there was one */
        verdict = "same";
        j.lo = j.hi = j.ratio = 1.0;
        PyOS_snprintf(reason, sizeof(reason), "the same samples on both sides: one measurement "
                      "compared with itself");
    }
    else if (!paired && !j.decides) {
        /* two single runs: the spread between runs was only assumed, and an
         * assumption may explain, never decide */
        int beyond = j.lo > 1.0 || j.hi < 1.0;
        verdict = "inconclusive";
        PyOS_snprintf(reason, sizeof(reason),
                      "no between-run spread measured, so no verdict: the ratio is %.3f, the "
                      "runs' own interval [%.3f, %.3f]; allowing for what separate runs move "
                      "(%s) it is [%.3f, %.3f], %s; %s measures the spread",
                      j.ratio, blo, bhi, j.basis, j.lo, j.hi,
                      beyond ? "which excludes 1" : "which includes 1",
                      repeat);
    }
    else if (paired && ra < 6) {
        /* the interval of the per-round ratios is [min, max] below 6 rounds: no
         * verdict, whatever the ratio, and the remedy is rounds, not the margin */
        verdict = "inconclusive";
        PyOS_snprintf(reason, sizeof(reason),
                      "only %zd round(s): a verdict on per-round ratios needs at least 6 "
                      "(ratio %.3f over those); use rounds= of 6 or more (default 20)",
                      ra, j.ratio);
    }
    else {
        shp_judge_reason(verdict, j.ratio, j.lo, j.hi, margin, j.basis, j.advice, reason,
                         sizeof(reason));
    }
    Py_XDECREF(hold);
    Py_XDECREF(hold2);
    if (!same_samples)   /* one measurement: nothing moved between its sides */
        busy_caveat(a, b, j.method, reason, sizeof(reason));
    c = (shp_Comparison *)Cmp_new(st->comparison_type, NULL, NULL);
    if (c == NULL)
        goto error;
    c->baseline = Py_NewRef(a->name ? a->name : Py_None);
    c->candidate = Py_NewRef(b->name ? b->name : Py_None);
    c->baseline_median_ms = j.ma;
    c->candidate_median_ms = j.mb;
    c->ratio = j.ratio;
    c->ci95_low = j.lo;
    c->ci95_high = j.hi;
    c->resamples = resamples;
    c->margin = margin;
    c->baseline_runs = j.runs_a;
    c->candidate_runs = j.runs_b;
    c->run_spread = j.run_spread;
    c->boot_low = blo;
    c->boot_high = bhi;
    c->verdict = PyUnicode_FromString(verdict);
    c->reason = PyUnicode_FromString(reason);
    c->method = PyUnicode_FromString(j.method);
    if (c->verdict == NULL || c->reason == NULL || c->method == NULL)
        goto error;
    PyMem_Free(sa);
    PyMem_Free(sb);
    shp_samples_release(&xa);
    shp_samples_release(&xb);
    return (PyObject *)c;
error:
    Py_XDECREF(c);
    PyMem_Free(sa);
    PyMem_Free(sb);
    shp_samples_release(&xa);
    shp_samples_release(&xb);
    return NULL;
}
