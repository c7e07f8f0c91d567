/*
 * bootstrap.c -- the ratio of two medians and its bootstrap 95% CI.
 *
 * "Is B faster than A?" answered with an interval, not two means: the
 * ratio of medians (candidate / baseline) with a percentile-bootstrap 95%
 * confidence interval, resampling both sample sets.  The generator is
 * seeded (xoshiro256**), so the same inputs always give the same verdict.
 * Each resampled median is drawn by rank from its exact law (an order
 * statistic of uniforms, see resampled_median): O(1) per resample after one
 * sort, so two 300,000-sample runs compare in a fraction of a second.
 *
 * Pure computation on C arrays (it calls only summary.c); used by
 * compare_benchmarks (compare.c) and the table's "vs Baseline" column.
 */
#include "stats/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- generator: xoshiro256** (stats.h) ---------------------------------- */

typedef shp_rng rng;
#define rng_seed shp_rng_seed
#define rng_open01 shp_rng_open01

/* Standard normal (Box-Muller; one of the pair is used: simple, and the
 * generator is cheap next to the logs). */
static double
rng_normal(rng *r)
{
    double u = rng_open01(r), v = rng_open01(r);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* Gamma(a, 1) for a >= 1: Marsaglia and Tsang (2000). */
static double
rng_gamma(rng *r, double a)
{
    double d = a - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x = rng_normal(r), v = 1.0 + c * x;
        if (v <= 0.0)
            continue;
        v = v * v * v;
        double u = rng_open01(r);
        if (log(u) < 0.5 * x * x + d - d * v + d * log(v))
            return d * v;
    }
}

/* Beta(a, b) for a, b >= 1. */
static double
rng_beta(rng *r, double a, double b)
{
    double x = rng_gamma(r, a), y = rng_gamma(r, b);
    return x / (x + y);
}

/* The value at uniform position u in the sorted sample: index floor(u n). */
static inline double
at(const double *sorted, Py_ssize_t n, double u)
{
    Py_ssize_t i = (Py_ssize_t)(u * (double)n);
    return sorted[i < 0 ? 0 : i >= n ? n - 1 : i];
}

/*
 * The median of one bootstrap resample of sorted[0..n), drawn exactly in
 * distribution without drawing the resample.  A resample takes n indices
 * floor(U_k n), U_k uniform; with the sample sorted, value order is index
 * order, so its median is the value at the median of the U_k -- an order
 * statistic of n uniforms.  Odd n: U_(m), m = (n+1)/2, is Beta(m, n-m+1).
 * Even n (NumPy's median averages the middle two): U_(k), k = n/2, is
 * Beta(k, k+1), and given it, U_(k+1) is the least of the other k uniforms
 * on (U_(k), 1): U_(k) + (1 - U_(k)) Beta(1, k), and Beta(1, k) is
 * 1 - V^(1/k).  O(1) per resample instead of O(n).
 */
static double
resampled_median(rng *r, const double *sorted, Py_ssize_t n)
{
    if (n == 1)
        return sorted[0];
    if (n % 2) {
        double m = (double)((n + 1) / 2);
        return at(sorted, n, rng_beta(r, m, (double)n - m + 1.0));
    }
    double k = (double)(n / 2);
    double u1 = rng_beta(r, k, k + 1.0);
    double u2 = u1 + (1.0 - u1) * (1.0 - pow(rng_open01(r), 1.0 / k));
    return (at(sorted, n, u1) + at(sorted, n, u2)) / 2.0;
}

static int
cmp_double(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

int
shp_compare_samples(const double *a, Py_ssize_t na, const double *b, Py_ssize_t nb,
                    uint64_t seed, Py_ssize_t resamples, double *med_a, double *med_b,
                    double *ratio, double *lo, double *hi)
{
    if (na < 1 || nb < 1) {   /* a median of nothing reads outside the buffer */
        PyErr_SetString(PyExc_ValueError, "a bootstrap comparison needs samples on both sides");
        return -1;
    }
    double *sa = PyMem_Malloc((size_t)na * sizeof(double));
    double *sb = PyMem_Malloc((size_t)nb * sizeof(double));
    double *ratios = PyMem_Malloc((size_t)resamples * sizeof(double));
    int rc = -1;
    if (sa == NULL || sb == NULL || ratios == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* Sorted copies: the medians, and the resampled medians by rank.  A copy
     * also keeps the caller's buffers out of it (the sort takes no GIL-free
     * time, but the signal checks below run Python code). */
    memcpy(sa, a, (size_t)na * sizeof(double));
    memcpy(sb, b, (size_t)nb * sizeof(double));
    qsort(sa, (size_t)na, sizeof(double), cmp_double);
    qsort(sb, (size_t)nb, sizeof(double), cmp_double);
    double ma = na % 2 ? sa[na / 2] : (sa[na / 2 - 1] + sa[na / 2]) / 2.0;
    double mb = nb % 2 ? sb[nb / 2] : (sb[nb / 2 - 1] + sb[nb / 2]) / 2.0;
    *med_a = ma;
    *med_b = mb;
    *ratio = mb / ma;

    rng r;
    rng_seed(&r, seed ^ 0x5eedb0075eedULL);
    for (Py_ssize_t i = 0; i < resamples; i++) {
        if ((i & 0xffff) == 0xffff && PyErr_CheckSignals() < 0)
            goto done;   /* a million resamples take ~1 s: answer Ctrl-C */
        double ra = resampled_median(&r, sa, na);
        double rb = resampled_median(&r, sb, nb);
        ratios[i] = rb / ra;
    }
    *lo = shp_percentile_inplace(ratios, resamples, 0.025);
    *hi = shp_percentile_inplace(ratios, resamples, 0.975);
    rc = 0;
done:
    PyMem_Free(sa);
    PyMem_Free(sb);
    PyMem_Free(ratios);
    return rc;
}
