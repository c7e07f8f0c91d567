/*
 * cells.c -- the text of one table cell: latencies, megabytes, a swept
 * parameter, the vs-Baseline verdict.
 *
 * Layer 3, beside table.c, which lays the cells out: the formats are the
 * pure-Python predecessor's, so existing reports diff cleanly.
 */
#include "render/render.h"

#include <math.h>

/* prefix + x with `decimals` decimals + suffix, as a str of whatever length
 * it takes (a fixed buffer cut 1e63 and beyond silently).  New reference. */
PyObject *
shp_cell_num(const char *prefix, double x, int decimals, const char *suffix)
{
    char *digits = PyOS_double_to_string(x, 'f', decimals, 0, NULL);
    if (digits == NULL)
        return NULL;
    PyObject *r = PyUnicode_FromFormat("%s%s%s", prefix, digits, suffix);
    PyMem_Free(digits);
    return r;
}

/* The decimals x is printed with: the released module's two, unless that
 * prints a nonzero value as 0.00 -- then two significant digits, so that
 * 0.0037 ms reads 0.0037 (the released table printed 0.00 for anything
 * under 5 us).  12 at most. */
static int
ms_decimals(double x)
{
    double ax = fabs(x);
    if (ax == 0.0 || !isfinite(ax) || ax >= 0.005)
        return 2;
    int d = 1 - (int)floor(log10(ax));
    /* 0.00995 rounds up to 0.010 at 3 decimals: one digit fewer keeps two */
    if (d > 2 && round(ax * pow(10.0, d - 1)) >= 10.0)
        d--;
    return d > 12 ? 12 : d;
}

PyObject *
shp_cell_count(double x)
{
    if (isnan(x))
        return PyUnicode_FromString("N/A");
    PyObject *n = PyLong_FromDouble(round(x));
    PyObject *spec = n ? PyUnicode_FromString(",") : NULL;
    PyObject *r = spec ? PyObject_Format(n, spec) : NULL;
    Py_XDECREF(spec);
    Py_XDECREF(n);
    return r;
}

PyObject *
shp_cell_ms(double x)
{
    return shp_cell_num("", x, ms_decimals(x), "");
}

PyObject *
shp_cell_spread(double mean, double std)
{
    int d = ms_decimals(mean);
    PyObject *m = shp_cell_num("", mean, d, ""), *s = m ? shp_cell_num("", std, d, "") : NULL;
    PyObject *r = s ? PyUnicode_FromFormat("%U +/- %U", m, s) : NULL;
    Py_XDECREF(m);
    Py_XDECREF(s);
    return r;
}

PyObject *
shp_cell_mb(double x)
{
    /* the released module's rule: not above zero (negative, NaN) reads 0.0 MB */
    if (x > 0)
        return shp_cell_num("+", x, 1, " MB");
    return PyUnicode_FromString("0.0 MB");
}

/* A stored result's device label, read as benchmark_callable reads it; a
 * label it would refuse ("cuda:x") still counts as CUDA here. */
int
shp_cell_is_cuda(PyObject *device)
{
    shp_device d;
    if (shp_device_parse(device, &d) < 0)
        PyErr_Clear();
    return d.kind == SHP_DEV_CUDA;
}

/* str(s.params[param]), "" when absent.  The lookup compares the user's
 * keys (their __eq__ runs) and str() runs the value's code: either may
 * reassign s.params, so the dict and the value are owned across both. */
PyObject *
shp_cell_param(shp_Stats *s, PyObject *param)
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
    Py_ssize_t total;
    if (shp_counts_array(s->run_sizes, sizes, n, &total) < 0)
        return -1;
    if (*sizes != NULL && total != nsamples) {
        PyMem_Free(*sizes);
        *sizes = NULL;
        *n = 0;
    }
    if (*sizes == NULL)
        *n = 1;
    return 0;
}

PyObject *
shp_cell_baseline(shp_Stats *s, shp_Stats *base, double known, double margin)
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
        /* an assumed spread may explain, never decide (verdict.c) */
        verdict = known >= 0.0 ? shp_judge(ratio, lo, hi, margin) : "inconclusive";
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
        verdict = shp_interval_decides(&iv, known) ? shp_judge(ratio, iv.lo, iv.hi, margin)
                                                   : "inconclusive";
    }
    if (verdict != NULL) {
        char tail[16];
        PyOS_snprintf(tail, sizeof(tail), "x %s", verdict);
        return shp_cell_num("", ratio, 2, tail);
    }
    return shp_cell_num("", ratio, 2, "x");
}
