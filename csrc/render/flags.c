/*
 * flags.c -- the short labels of what makes a result's figures doubtful.
 *
 * "noisy", "multimodal", "drifting" (stability.c's label), "busy machine",
 * "launch-bound", "overhead-dominated", "page faults": each the cause of a
 * BenchmarkWarning, read back from the result's own fields, so that a result
 * loaded from JSON carries the same flags as the one measured.  The table
 * prints them in a footnote (never inside a cell: the released layout stays
 * byte for byte), `BenchmarkStats.flags` returns them.  A run under load
 * has labels of its own ("overloaded", "requests dropped", ...: LoadStats.flags),
 * read back from its fields the same way.
 *
 * Layer 3, beside table.c: reads the result struct; the labels themselves
 * run no Python code and never fail.
 */
#include "render/render.h"

#include <math.h>

/* The label of every cause (warn.c says them); the first seven are read back
 * from a result's fields, in this order, and are its flags. */
static const char *const labels[SHP_N_CAUSES] = {
    [SHP_CAUSE_NOISY] = "noisy",
    [SHP_CAUSE_MULTIMODAL] = "multimodal",
    [SHP_CAUSE_DRIFTING] = "drifting",
    [SHP_CAUSE_BUSY] = "busy machine",
    [SHP_CAUSE_LAUNCH_BOUND] = "launch-bound",
    [SHP_CAUSE_OVERHEAD] = "overhead-dominated",
    [SHP_CAUSE_PAGE_FAULTS] = "page faults",
    [SHP_CAUSE_WARMUP] = "warm-up too short",
    [SHP_CAUSE_COARSE_TIMER] = "coarse timer",
    [SHP_CAUSE_GPU_CLOCK] = "GPU clock moved",
    [SHP_CAUSE_THROTTLED] = "GPU throttled",
    [SHP_CAUSE_SHARED_GPU] = "shared GPU",
    [SHP_CAUSE_NO_SYNC] = "no device sync",
    [SHP_CAUSE_NO_VRAM] = "VRAM not tracked",
    [SHP_CAUSE_NO_GPU_TIME] = "GPU time not measured",
    [SHP_CAUSE_NO_COUNTERS] = "counters not available",
    [SHP_CAUSE_OVERLOADED] = "overloaded",
    [SHP_CAUSE_NO_REQUESTS] = "no requests",
};
#define N_FLAGS (SHP_CAUSE_PAGE_FAULTS + 1)

const char *
shp_cause_label(shp_cause c)
{
    return c < SHP_N_CAUSES ? labels[c] : "";
}

unsigned
shp_stats_cause_mask(const shp_Stats *s)
{
    unsigned m = 0;
    /* the stability label is a str field a user may set: compared, never read as C */
    if (s->stability != NULL && PyUnicode_Check(s->stability))
        for (int i = SHP_CAUSE_NOISY; i <= SHP_CAUSE_DRIFTING; i++)
            if (PyUnicode_CompareWithASCIIString(s->stability, labels[i]) == 0)
                m |= 1u << i;
    if (s->machine_busy == 1)
        m |= 1u << SHP_CAUSE_BUSY;
    if (!isnan(s->host_share) && s->host_share > SHP_LAUNCH_BOUND)
        m |= 1u << SHP_CAUSE_LAUNCH_BOUND;
    if (!isnan(s->overhead_ms) && s->overhead_ms > 0 &&
        s->median_ms < SHP_OVERHEAD_FACTOR * s->overhead_ms)
        m |= 1u << SHP_CAUSE_OVERHEAD;
    double minor = s->minor_faults_per_iter, major = s->major_faults_per_iter;
    if ((isnan(minor) ? 0.0 : minor) + (isnan(major) ? 0.0 : major) > SHP_FAULTS_WARN)
        m |= 1u << SHP_CAUSE_PAGE_FAULTS;
    return m;
}

int
shp_stats_flags(const shp_Stats *s, const char *out[SHP_MAX_FLAGS])
{
    unsigned m = shp_stats_cause_mask(s);
    int n = 0;
    for (int i = 0; i < N_FLAGS; i++)
        if (m & (1u << i))
            out[n++] = labels[i];
    return n;
}

/* The labels of mask (bits of names[0..nnames)), joined by ", ".  New str. */
static PyObject *
mask_text(unsigned mask, const char *const *names, int nnames)
{
    char buf[256];   /* every label fits three times over */
    size_t used = 0;
    buf[0] = '\0';
    for (int f = 0; f < nnames; f++)
        if (mask & (1u << f))
            used += (size_t)PyOS_snprintf(buf + used, sizeof(buf) - used, "%s%s",
                                          used ? ", " : "", names[f]);
    return PyUnicode_FromString(buf);
}

/* The flags as a footnote: one clause per distinct set of flags (mask[i] of
 * row i, bits of names[]), naming the rows that have it ("all rows" when
 * every row does; no names in a one-row table).  Takes `mask`. */
static PyObject *
footnote(unsigned *mask, Py_ssize_t n, const char *const *label_of, int nlabels,
         PyObject *names_of, int html)
{
    PyObject *clauses = PyList_New(0), *res = NULL, *comma = PyUnicode_FromString(", ");
    if (mask == NULL || clauses == NULL || comma == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned m = mask[i];
        int first = m != 0;
        for (Py_ssize_t j = 0; first && j < i; j++)
            first = mask[j] != m;
        if (!first)
            continue;   /* no flags, or this set's clause is written */
        PyObject *names = PyList_New(0), *flags = mask_text(m, label_of, nlabels), *clause = NULL;
        for (Py_ssize_t j = i; names != NULL && j < n; j++) {
            if (mask[j] != m)
                continue;
            PyObject *label = PyList_GET_ITEM(names_of, j);   /* ours: a list of str */
            PyObject *esc = html ? shp_html_escape(label) : shp_md_text(label, SHP_MD_CELL);
            if (esc == NULL || PyList_Append(names, esc) < 0)
                Py_CLEAR(names);
            Py_XDECREF(esc);
        }
        if (names != NULL && flags != NULL) {
            if (n == 1)
                clause = Py_NewRef(flags);
            else if (PyList_GET_SIZE(names) == n)
                clause = PyUnicode_FromFormat("%U (all rows)", flags);
            else {
                PyObject *joined = PyUnicode_Join(comma, names);
                clause = joined ? PyUnicode_FromFormat("%U (%U)", flags, joined) : NULL;
                Py_XDECREF(joined);
            }
        }
        Py_XDECREF(names);
        Py_XDECREF(flags);
        if (clause == NULL || PyList_Append(clauses, clause) < 0) {
            Py_XDECREF(clause);
            goto done;
        }
        Py_DECREF(clause);
    }
    if (PyList_GET_SIZE(clauses) == 0) {
        res = PyUnicode_FromString("");
    }
    else {
        PyObject *sep = PyUnicode_FromString("; ");
        PyObject *body = sep ? PyUnicode_Join(sep, clauses) : NULL;
        Py_XDECREF(sep);
        if (body != NULL)
            res = PyUnicode_FromFormat(html ? "<p>Flags: %U.</p>" : "Flags: %U.", body);
        Py_XDECREF(body);
    }
done:
    if (mask == NULL)
        PyErr_NoMemory();
    PyMem_Free(mask);
    Py_XDECREF(clauses);
    Py_XDECREF(comma);
    return res;
}

PyObject *
shp_flags_footnote(PyObject *items, PyObject *names_of, int html)
{
    Py_ssize_t n = PyList_GET_SIZE(items);
    unsigned *mask = PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof(unsigned));
    for (Py_ssize_t i = 0; mask != NULL && i < n; i++)
        mask[i] = shp_stats_cause_mask((shp_Stats *)PyList_GET_ITEM(items, i));
    return footnote(mask, n, labels, N_FLAGS, names_of, html);
}

/* ---- a run under load ------------------------------------------------------ */

typedef enum {
    LF_OVERLOADED, LF_DROPPED, LF_UNSERVED, LF_FEW, LF_LAG, LF_BUSY, N_LOAD_FLAGS
} load_flag;

static const char *const load_labels[N_LOAD_FLAGS] = {
    [LF_OVERLOADED] = "overloaded",
    [LF_DROPPED] = "requests dropped",
    [LF_UNSERVED] = "requests unserved",
    [LF_FEW] = "few requests",
    [LF_LAG] = "scheduler lag",
    [LF_BUSY] = "busy machine",
};

static unsigned
load_mask(const shp_LoadStats *s)
{
    unsigned m = 0;
    if (s->overloaded == 1)
        m |= 1u << LF_OVERLOADED;
    if (s->dropped > 0)
        m |= 1u << LF_DROPPED;
    if (s->unserved > 0)
        m |= 1u << LF_UNSERVED;
    if (s->completed < SHP_LOAD_FEW_REQUESTS)
        m |= 1u << LF_FEW;
    if (!isnan(s->lag_p99_ms) && !isnan(s->p99_ms) && s->lag_p99_ms > SHP_LOAD_LAG_SHARE * s->p99_ms)
        m |= 1u << LF_LAG;
    if (s->machine_busy == 1)
        m |= 1u << LF_BUSY;
    return m;
}

int
shp_load_flags(const shp_LoadStats *s, const char *out[SHP_MAX_FLAGS])
{
    unsigned m = load_mask(s);
    int n = 0;
    for (int i = 0; i < N_LOAD_FLAGS; i++)
        if (m & (1u << i))
            out[n++] = load_labels[i];
    return n;
}

PyObject *
shp_load_footnote(PyObject *items, PyObject *names_of, int html)
{
    Py_ssize_t n = PyList_GET_SIZE(items);
    unsigned *mask = PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof(unsigned));
    for (Py_ssize_t i = 0; mask != NULL && i < n; i++)
        mask[i] = load_mask((shp_LoadStats *)PyList_GET_ITEM(items, i));
    return footnote(mask, n, load_labels, N_LOAD_FLAGS, names_of, html);
}
