/*
 * flags.c -- the short labels of what makes a result's figures doubtful.
 *
 * "noisy", "multimodal", "drifting" (stability.c's label), "busy machine",
 * "launch-bound", "overhead-dominated", "page faults": each the cause of a
 * BenchmarkWarning, read back from the result's own fields, so that a result
 * loaded from JSON carries the same flags as the one measured.  The table
 * prints them in a footnote (never inside a cell: the released layout stays
 * byte for byte), `BenchmarkStats.flags` returns them.
 *
 * Layer 3, beside table.c: reads the result struct; the labels themselves
 * run no Python code and never fail.
 */
#include "profiling.h"

#include <math.h>

static const char *const unstable[] = {"noisy", "multimodal", "drifting"};

int
shp_stats_flags(const shp_Stats *s, const char *out[SHP_MAX_FLAGS])
{
    int n = 0;
    /* the stability label is a str field a user may set: compared, never read as C */
    if (s->stability != NULL && PyUnicode_Check(s->stability))
        for (size_t i = 0; i < sizeof(unstable) / sizeof(unstable[0]); i++)
            if (PyUnicode_CompareWithASCIIString(s->stability, unstable[i]) == 0)
                out[n++] = unstable[i];
    if (s->machine_busy == 1)
        out[n++] = "busy machine";
    if (!isnan(s->host_share) && s->host_share > SHP_LAUNCH_BOUND)
        out[n++] = "launch-bound";
    if (!isnan(s->overhead_ms) && s->overhead_ms > 0 &&
        s->median_ms < SHP_OVERHEAD_FACTOR * s->overhead_ms)
        out[n++] = "overhead-dominated";
    double minor = s->minor_faults_per_iter, major = s->major_faults_per_iter;
    if ((isnan(minor) ? 0.0 : minor) + (isnan(major) ? 0.0 : major) > SHP_FAULTS_WARN)
        out[n++] = "page faults";
    return n;
}

/* Append `part` (stolen; NULL: the error of making it) to `parts`.  0 / -1. */
static int
append_part(PyObject *parts, PyObject *part)
{
    if (part == NULL)
        return -1;
    int rc = PyList_Append(parts, part);
    Py_DECREF(part);
    return rc;
}

PyObject *
shp_flags_footnote(PyObject *items, int html)
{
    PyObject *parts = PyList_New(0), *res = NULL;
    if (parts == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); i++) {
        shp_Stats *s = (shp_Stats *)PyList_GET_ITEM(items, i);
        const char *labels[SHP_MAX_FLAGS];
        int n = shp_stats_flags(s, labels);
        if (n == 0)
            continue;
        PyObject *name = s->name != NULL ? Py_NewRef(s->name) : PyUnicode_FromString("");
        PyObject *esc = name ? (html ? shp_html_escape(name) : shp_md_text(name, SHP_MD_CELL)) : NULL;
        Py_XDECREF(name);
        PyObject *part = esc ? PyUnicode_FromFormat("%U (%s", esc, labels[0]) : NULL;
        Py_XDECREF(esc);
        for (int k = 1; part != NULL && k < n; k++)
            Py_SETREF(part, PyUnicode_FromFormat("%U, %s", part, labels[k]));
        if (part != NULL)
            Py_SETREF(part, PyUnicode_FromFormat("%U)", part));
        if (append_part(parts, part) < 0)
            goto done;
    }
    if (PyList_GET_SIZE(parts) == 0) {
        res = PyUnicode_FromString("");
    }
    else {
        PyObject *sep = PyUnicode_FromString("; ");
        PyObject *body = sep ? PyUnicode_Join(sep, parts) : NULL;
        Py_XDECREF(sep);
        if (body != NULL)
            res = PyUnicode_FromFormat(html ? "<p>Flags: %U.</p>" : "Flags: %U.", body);
        Py_XDECREF(body);
    }
done:
    Py_DECREF(parts);
    return res;
}
