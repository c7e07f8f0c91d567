/*
 * stability.c -- how far one run's samples can be trusted (pure computation).
 *
 * Every result says whether its samples look like draws from one steady
 * process, at a cost per sample well under the summary's (the mode test's
 * sort is capped; bench_callgrind.py splits the figure out).  The label uses robust measures (IQR, P95, block medians, log
 * modes): a few preempted calls on a busy machine inflate the CV without
 * making the median untrustworthy.  Four diagnostics, each O(n) but the mode test (a sort of at
 * most SHP_STAB_MAX_SORT samples):
 *
 *   cv         std / mean.
 *   autocorr   lag-1 autocorrelation and the AR(1) effective sample size
 *              n (1 - r) / (1 + r) (computed by summary.c, whose CI of the
 *              median uses it).
 *   drift      least-squares slope of the medians of 10 consecutive
 *              blocks, as the relative change over the run, with its t.
 *   modes      the best split of the sorted log samples into two groups
 *              (Otsu: largest between-group variance, each group >= 5%),
 *              and Ashman's D = sqrt(2) |m1 - m2| / sqrt(s1^2 + s2^2) with
 *              robust centres and spreads (median, 1.4826 MAD).  Unimodal
 *              timing shapes (normal, lognormal, gamma, exponential,
 *              uniform, Pareto, t3) stay under 3.7 at n = 300 and under 8.4
 *              at n = 50; two clean modes give 6 to 15 (docs/statistics.md).
 *
 * Calls only summary.c (for medians).
 */
#include "stats/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SHP_STAB_MAX_SORT 1000     /* the mode test looks at a subsample above this */

/* Slope of the consecutive block medians: relative change over the run, t. */
static void
block_trend(const double *x, Py_ssize_t n, double median, double *scratch, double *drift,
            double *t)
{
    double y[SHP_MAX_BLOCKS];
    Py_ssize_t b = shp_block_count(n);
    *drift = NAN;
    *t = NAN;
    if (b < 3 || !(median > 0.0))
        return;
    for (Py_ssize_t i = 0; i < b; i++) {
        Py_ssize_t s = n * i / b, e = n * (i + 1) / b;
        memcpy(scratch, x + s, (size_t)(e - s) * sizeof(double));
        y[i] = shp_percentile_inplace(scratch, e - s, 0.5);
    }
    double xm = (double)(b - 1) / 2.0, ym = 0.0, sxx = 0.0, sxy = 0.0, sse = 0.0;
    for (Py_ssize_t i = 0; i < b; i++)
        ym += y[i];
    ym /= (double)b;
    for (Py_ssize_t i = 0; i < b; i++) {
        sxx += ((double)i - xm) * ((double)i - xm);
        sxy += ((double)i - xm) * (y[i] - ym);
    }
    double slope = sxy / sxx;
    for (Py_ssize_t i = 0; i < b; i++) {
        double r = y[i] - ym - slope * ((double)i - xm);
        sse += r * r;
    }
    double se = b > 2 ? sqrt(sse / (double)(b - 2) / sxx) : NAN;
    *drift = slope * (double)(b - 1) / median;
    *t = se > 0.0 ? slope / se : (slope != 0.0 ? copysign(INFINITY, slope) : 0.0);
}

/* Median and 1.4826 * MAD of sorted v[0..m) (m >= 1); `tmp` holds m doubles. */
static void
robust(const double *v, Py_ssize_t m, double *tmp, double *center, double *spread)
{
    double med = shp_percentile_inplace(memcpy(tmp, v, (size_t)m * sizeof(double)), m, 0.5);
    for (Py_ssize_t i = 0; i < m; i++)
        tmp[i] = fabs(v[i] - med);
    *center = med;
    *spread = 1.4826 * shp_percentile_inplace(tmp, m, 0.5);
}

/* The two-group test on log samples; fills the mode fields of `out`.
 * Without memory for its buffer the test is skipped (fields stay NaN). */
static void
mode_test(const double *x, Py_ssize_t n, shp_stability *out)
{
    out->modes_d = NAN;
    out->mode_low = out->mode_high = out->mode_high_frac = NAN;
    if (n < SHP_STAB_MIN_MODE_N)
        return;
    Py_ssize_t m = n < SHP_STAB_MAX_SORT ? n : SHP_STAB_MAX_SORT;
    double *v = PyMem_Malloc((size_t)(2 * m) * sizeof(double)), *tmp = v + m;
    if (v == NULL)
        return;
    for (Py_ssize_t i = 0; i < m; i++) {
        /* a golden-ratio sequence of positions when subsampling: a fixed
         * stride could alias with a periodic pattern (every third call slow) */
        double pos = m == n ? (double)i : fmod(0.5 + (double)i * 0.6180339887498949, 1.0) * (double)n;
        Py_ssize_t k = (Py_ssize_t)pos;
        double s = x[k < n ? k : n - 1];
        if (!(s > 0.0)) {
            PyMem_Free(v);
            return;   /* a log needs positive times */
        }
        v[i] = log(s);
    }
    shp_sort_inplace(v, m);
    double total = 0.0;
    for (Py_ssize_t i = 0; i < m; i++)
        total += v[i] - v[0];   /* shifted: no cancellation in the sums */
    Py_ssize_t lo = (Py_ssize_t)ceil(SHP_STAB_MIN_FRAC * (double)m), hi = m - lo, best_k = -1;
    double cum = 0.0, best = -1.0;
    for (Py_ssize_t k = 1; k < m; k++) {
        cum += v[k - 1] - v[0];
        if (k < lo || k > hi)
            continue;
        double m1 = cum / (double)k, m2 = (total - cum) / (double)(m - k);
        double between = (double)k * (double)(m - k) * (m2 - m1) * (m2 - m1);
        if (between > best) {
            best = between;
            best_k = k;
        }
    }
    if (best_k < 1) {
        PyMem_Free(v);
        return;
    }
    double c1, s1, c2, s2;
    robust(v, best_k, tmp, &c1, &s1);
    robust(v + best_k, m - best_k, tmp, &c2, &s2);
    double spread = sqrt(s1 * s1 + s2 * s2);
    out->modes_d = spread > 0.0 ? sqrt(2.0) * fabs(c2 - c1) / spread : (c2 > c1 ? INFINITY : 0.0);
    out->mode_low = exp(c1);
    out->mode_high = exp(c2);
    out->mode_high_frac = (double)(m - best_k) / (double)m;
    PyMem_Free(v);
}

void
shp_stability_compute(const double *x, Py_ssize_t n, double *scratch, const shp_summary *sm,
                      shp_stability *out)
{
    memset(out, 0, sizeof(*out));
    out->cv = sm->mean > 0.0 ? sm->std / sm->mean : NAN;
    out->autocorr = sm->autocorr;   /* summary.c: its CI of the median already uses n_eff */
    out->n_eff = sm->n_eff;
    block_trend(x, n, sm->median, scratch, &out->drift, &out->drift_t);
    mode_test(x, n, out);

    double rel_iqr = sm->median > 0.0 ? (sm->q3 - sm->q1) / sm->median : NAN;
    double dmax = n >= SHP_STAB_MODES_N ? SHP_STAB_MODES_D : SHP_STAB_MODES_D_SMALL;
    out->multimodal = !isnan(out->modes_d) && out->modes_d > dmax &&
                      out->mode_high > (1.0 + SHP_STAB_MODE_SEP) * out->mode_low;
    out->drifting = !isnan(out->drift) && fabs(out->drift) > SHP_STAB_DRIFT &&
                    fabs(out->drift_t) > SHP_STAB_DRIFT_T;
    out->noisy = n >= SHP_STAB_MIN_NOISY_N && ((!isnan(rel_iqr) && rel_iqr > SHP_STAB_IQR) ||
                 (sm->median > 0.0 && sm->p95 > SHP_STAB_TAIL * sm->median));
    out->label = out->multimodal ? "multimodal" : out->drifting ? "drifting"
               : out->noisy ? "noisy" : "stable";
}
