/*
 * queueing.c -- the arithmetic of a run under load: the arrival schedule
 * drawn in advance, the FCFS queue recursions (Lindley for one server,
 * Kiefer-Wolfowitz for several), the backlog's growth, and the interval of
 * a latency percentile when consecutive latencies are correlated.
 *
 * Latencies of a queue are not independent: a request that waits behind a
 * slow one makes its successors wait too, so order statistics of
 * independent samples (summary.c's interval of the median) are too narrow.
 * The interval here is a circular block bootstrap (Politis and Romano
 * 1992): blocks of consecutive latencies, long enough to hold the
 * correlation (its length from the data by blocking: Flyvbjerg and
 * Petersen 1989), resampled with the package's seeded generator; each
 * replicate's percentile is summary.c's NumPy-linear one.
 */
#include "stats/stats.h"

#include <math.h>
#include <string.h>

/* ---- the schedule --------------------------------------------------------- */

int
shp_load_schedule(int poisson, double qps, int64_t window_ns, uint64_t seed, int64_t **out,
                  Py_ssize_t *n)
{
    *out = NULL;
    *n = 0;
    double expected = qps * (double)window_ns / 1e9;
    Py_ssize_t cap = (Py_ssize_t)(expected + 6.0 * sqrt(expected) + 16.0), k = 0;
    int64_t *t = PyMem_Malloc((size_t)cap * sizeof(int64_t));
    if (t == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    shp_rng r;
    shp_rng_seed(&r, seed);
    double s = 0.0;   /* seconds since the window opened */
    for (;;) {
        if (poisson)
            s += -log(shp_rng_open01(&r)) / qps;   /* exponential gaps: a Poisson process */
        else
            s = (double)k / qps;
        /* compared before rounding: past ~292 years (a tiny qps) the
         * nanoseconds do not fit an int64 (llround's result is undefined) */
        double at = s * 1e9;
        if (!(at < (double)window_ns))
            break;
        int64_t ns = (int64_t)llround(at);
        if (ns >= window_ns)
            break;
        if (k == cap) {
            Py_ssize_t ncap;
            int64_t *grown = shp_size_mul(cap, 2, &ncap) == 0
                                 ? PyMem_Realloc(t, (size_t)ncap * sizeof(int64_t)) : NULL;
            if (grown == NULL) {
                PyMem_Free(t);
                PyErr_NoMemory();
                return -1;
            }
            t = grown;
            cap = ncap;
        }
        t[k++] = ns;
    }
    *out = t;
    *n = k;
    return 0;
}

/* ---- the queue recursions --------------------------------------------------- */

int
shp_fcfs_latencies(const double *arrival, const double *service, Py_ssize_t n, Py_ssize_t servers,
                   double *out)
{
    if (servers == 1) {
        /* Lindley: W_i = max(0, W_{i-1} + S_{i-1} - (A_i - A_{i-1})) */
        double prev_done = -INFINITY;
        for (Py_ssize_t i = 0; i < n; i++) {
            double start = arrival[i] > prev_done ? arrival[i] : prev_done;
            prev_done = start + service[i];
            out[i] = prev_done - arrival[i];
        }
        return 0;
    }
    /* Kiefer-Wolfowitz: the request goes to the server free earliest */
    double *free_at = PyMem_Malloc((size_t)servers * sizeof(double));
    if (free_at == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t k = 0; k < servers; k++)
        free_at[k] = -INFINITY;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t best = 0;
        for (Py_ssize_t k = 1; k < servers; k++)
            if (free_at[k] < free_at[best])
                best = k;
        double start = arrival[i] > free_at[best] ? arrival[i] : free_at[best];
        free_at[best] = start + service[i];
        out[i] = free_at[best] - arrival[i];
    }
    PyMem_Free(free_at);
    return 0;
}

/* ---- the backlog ---------------------------------------------------------------- */

/* How many of sorted[0..n) are < t. */
static Py_ssize_t
count_below(const int64_t *sorted, Py_ssize_t n, int64_t t)
{
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (sorted[mid] < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void
shp_load_backlog(const int64_t *arrivals, Py_ssize_t na, const int64_t *done, Py_ssize_t nd,
                 const int64_t *dropped, Py_ssize_t ndrop, int64_t window_ns, shp_backlog *out)
{
    int64_t half = window_ns / 2;
    Py_ssize_t a_half = count_below(arrivals, na, half);
    Py_ssize_t a_end = count_below(arrivals, na, window_ns);
    Py_ssize_t c_half = count_below(done, nd, half), c_end = count_below(done, nd, window_ns);
    Py_ssize_t d_end = count_below(dropped, ndrop, window_ns);
    /* not completed, drops included: what the servers did not keep up with */
    Py_ssize_t b_half = a_half - c_half, b_end = a_end - c_end;
    out->arrived_second_half = a_end - a_half;
    out->growth = b_end - b_half;
    double half_s = (double)(window_ns - half) / 1e9;
    out->growth_per_s = half_s > 0 ? (double)out->growth / half_s : NAN;
    out->backlog_end = b_end - d_end;
    /* A queue that keeps up ends the window about where it was half-way;
     * Poisson arrivals alone move that by ~sqrt(arrivals).  Too few arrivals
     * say nothing. */
    if (out->arrived_second_half < SHP_LOAD_OVERLOAD_MIN_ARRIVALS)
        out->overloaded = -1;
    else
        out->overloaded = (double)out->growth >
                          SHP_LOAD_OVERLOAD_Z * sqrt((double)out->arrived_second_half) + 1.0;
}

/* ---- the interval of a percentile ------------------------------------------------- */

Py_ssize_t
shp_block_length(const double *x, Py_ssize_t n)
{
    if (n < 2)
        return 1;
    double mean = 0.0;
    for (Py_ssize_t i = 0; i < n; i++)
        mean += x[i];
    mean /= (double)n;
    double var1 = 0.0;
    for (Py_ssize_t i = 0; i < n; i++)
        var1 += (x[i] - mean) * (x[i] - mean);
    var1 /= (double)n;
    /* R(b) = b Var(means of blocks of b) / Var(x) -> 1 + 2 sum of the
     * autocorrelations once b is past the correlation; its largest value
     * over b = 2, 4, ... (at least 32 blocks) is the correlation length */
    double r_max = 1.0;
    for (Py_ssize_t b = 2; var1 > 0.0 && n / b >= 32; b *= 2) {
        Py_ssize_t m = n / b;
        double vb = 0.0;
        for (Py_ssize_t j = 0; j < m; j++) {
            double s = 0.0;
            for (Py_ssize_t i = j * b; i < (j + 1) * b; i++)
                s += x[i];
            double d = s / (double)b - mean;
            vb += d * d;
        }
        vb /= (double)m;
        double r = (double)b * vb / var1;
        if (r > r_max)
            r_max = r;
    }
    Py_ssize_t len = (Py_ssize_t)ceil(r_max), floor_len = (Py_ssize_t)ceil(cbrt((double)n));
    if (len < floor_len)
        len = floor_len;
    if (len > n / SHP_LOAD_MIN_BLOCKS)
        len = n / SHP_LOAD_MIN_BLOCKS;
    return len < 1 ? 1 : len;
}

Py_ssize_t
shp_bootstrap_reps(Py_ssize_t n)
{
    double r = SHP_LOAD_BOOT_WORK / (double)(n > 0 ? n : 1);
    if (r > SHP_LOAD_BOOT_REPS)
        return SHP_LOAD_BOOT_REPS;
    if (r < SHP_LOAD_BOOT_MIN_REPS)
        return SHP_LOAD_BOOT_MIN_REPS;
    return (Py_ssize_t)r;
}

int
shp_percentile_block_ci(const double *x, Py_ssize_t n, const double *q, int nq, Py_ssize_t block,
                        uint64_t seed, Py_ssize_t reps, double *lo, double *hi)
{
    if (n < 2 || block < 1) {
        for (int j = 0; j < nq; j++)
            lo[j] = hi[j] = NAN;
        return 0;
    }
    Py_ssize_t size;
    double *buf = PyMem_Malloc((size_t)n * sizeof(double));
    double *rep = shp_size_mul(reps, nq, &size) == 0
                      ? PyMem_Malloc((size_t)size * sizeof(double)) : NULL;
    if (buf == NULL || rep == NULL) {
        PyMem_Free(buf);
        PyMem_Free(rep);
        PyErr_NoMemory();
        return -1;
    }
    shp_rng r;
    shp_rng_seed(&r, seed ^ 0xb10cb00757a7ULL);
    for (Py_ssize_t b = 0; b < reps; b++) {
        /* n values from blocks of `block` consecutive latencies, each block
         * starting anywhere (circular: the series wraps around) */
        for (Py_ssize_t k = 0; k < n;) {
            Py_ssize_t s = shp_rng_below(&r, n);
            for (Py_ssize_t j = 0; j < block && k < n; j++, k++)
                buf[k] = x[(s + j) % n];
        }
        for (int j = 0; j < nq; j++)
            rep[(Py_ssize_t)j * reps + b] = shp_percentile_inplace(buf, n, q[j]);
    }
    for (int j = 0; j < nq; j++) {
        double *v = rep + (Py_ssize_t)j * reps;
        lo[j] = shp_percentile_inplace(v, reps, 0.025);
        hi[j] = shp_percentile_inplace(v, reps, 0.975);
    }
    PyMem_Free(buf);
    PyMem_Free(rep);
    return 0;
}
