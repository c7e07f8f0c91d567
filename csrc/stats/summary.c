/*
 * summary.c -- statistics of a sample buffer.
 *
 * Order statistics come from selection (introselect on a scratch copy), not
 * a full sort: every figure we report needs only a dozen ranks, so the cost
 * is O(n) with a small constant, like NumPy's partition-based percentile.
 * Percentiles reproduce NumPy's default method="linear" (Hyndman & Fan type
 * 7) down to its interpolation formula, so np.percentile(samples, q) equals
 * ours exactly, not only to rounding.
 */
#include "stats/stats.h"

#include <math.h>
#include <string.h>

static inline void
swap_d(double *a, double *b)
{
    double t = *a;
    *a = *b;
    *b = t;
}

static void
insertion_sort(double *a, Py_ssize_t lo, Py_ssize_t hi)
{
    for (Py_ssize_t i = lo + 1; i <= hi; i++) {
        double v = a[i];
        Py_ssize_t j = i - 1;
        while (j >= lo && a[j] > v) {
            a[j + 1] = a[j];
            j--;
        }
        a[j + 1] = v;
    }
}

static void
sift_down(double *a, Py_ssize_t start, Py_ssize_t root, Py_ssize_t end)
{
    /* heap over a[start..end], indices relative to start */
    for (;;) {
        Py_ssize_t child = 2 * (root - start) + 1 + start;
        if (child > end)
            return;
        if (child + 1 <= end && a[child] < a[child + 1])
            child++;
        if (!(a[root] < a[child]))
            return;
        swap_d(&a[root], &a[child]);
        root = child;
    }
}

/* The fallback that bounds introselect's worst case: heapsort the range. */
static void
heap_sort(double *a, Py_ssize_t lo, Py_ssize_t hi)
{
    for (Py_ssize_t r = lo + (hi - lo - 1) / 2; r >= lo; r--)
        sift_down(a, lo, r, hi);
    for (Py_ssize_t end = hi; end > lo; end--) {
        swap_d(&a[lo], &a[end]);
        sift_down(a, lo, lo, end - 1);
    }
}

/* Branchless Lomuto partition of a[lo..hi] around the value p: afterwards
 * a[lo..s) < p (or <= p when `le`) and a[s..hi] is the rest; returns s.
 * Each step swaps unconditionally and advances s by the comparison, so the
 * loop has no data-dependent branch to mispredict on random data. */
static Py_ssize_t
partition_value(double *a, Py_ssize_t lo, Py_ssize_t hi, double p, int le)
{
    Py_ssize_t s = lo;
    if (le) {
        for (Py_ssize_t i = lo; i <= hi; i++) {
            double v = a[i];
            a[i] = a[s];
            a[s] = v;
            s += v <= p;
        }
    }
    else {
        for (Py_ssize_t i = lo; i <= hi; i++) {
            double v = a[i];
            a[i] = a[s];
            a[s] = v;
            s += v < p;
        }
    }
    return s;
}

static inline double
median3(double x, double y, double z)
{
    if (x > y) { double t = x; x = y; y = t; }
    if (y > z) y = z;
    return x > y ? x : y;
}

/* Split a[lo..hi] (hi - lo >= 16) into a[lo..*l) < p, a[*l..*g) == p and
 * a[*g..hi] > p for a pseudo-median pivot p; a[*l..*g) is only separated
 * (second pass) when nothing fell below p, which is what makes ties O(n).
 * Otherwise *g == *l and a[*l..hi] >= p. */
static void
split(double *a, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t *l, Py_ssize_t *g)
{
    Py_ssize_t n = hi - lo + 1, q = n / 4;
    double p = median3(a[lo + q], a[lo + n / 2], a[hi - q]);
    if (n > 1024) {   /* ninther for large ranges: fewer passes */
        Py_ssize_t e = n / 8;
        p = median3(median3(a[lo], a[lo + e], a[lo + 2 * e]),
                    median3(a[lo + 3 * e], a[lo + 4 * e], a[lo + 5 * e]),
                    median3(a[lo + 6 * e], a[lo + 7 * e], a[hi]));
    }
    Py_ssize_t s = partition_value(a, lo, hi, p, 0);
    *l = *g = s;
    if (s == lo)   /* p is the minimum of the range: peel off its copies */
        *g = partition_value(a, lo, hi, p, 1);
}

/* Rearrange a[lo..hi] (inclusive) so that a[k] is its order statistic, with
 * nothing greater before it and nothing smaller after it. */
static void
select_k(double *a, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t k)
{
    int budget = 2;
    for (Py_ssize_t m = hi - lo + 1; m > 1; m >>= 1)
        budget += 2;
    while (hi > lo) {
        if (k == lo || k == hi) {
            Py_ssize_t best = lo;
            if (k == lo) {
                for (Py_ssize_t i = lo + 1; i <= hi; i++)
                    if (a[i] < a[best]) best = i;
            }
            else {
                for (Py_ssize_t i = lo + 1; i <= hi; i++)
                    if (a[i] > a[best]) best = i;
            }
            swap_d(&a[k], &a[best]);
            return;
        }
        if (hi - lo < 16) {
            insertion_sort(a, lo, hi);
            return;
        }
        if (budget-- == 0) {
            heap_sort(a, lo, hi);
            return;
        }
        Py_ssize_t l, g;
        split(a, lo, hi, &l, &g);
        if (k < l)
            hi = l - 1;
        else if (k >= g)
            lo = g;
        else
            return;   /* a[l..g) all equal the pivot */
    }
}

/* Place every rank of r[0..m) (sorted, unique, within [lo, hi]): one split
 * serves every rank on each side (quicksort pruned to the sides that hold
 * a wanted rank), down to one rank per range. */
static void
select_many_rec(double *a, Py_ssize_t lo, Py_ssize_t hi, const Py_ssize_t *r, int m, int budget)
{
    while (m > 1 && hi > lo) {
        if (hi - lo < 16) {
            insertion_sort(a, lo, hi);
            return;
        }
        if (budget-- == 0) {
            heap_sort(a, lo, hi);
            return;
        }
        Py_ssize_t l, g;
        split(a, lo, hi, &l, &g);
        int nl = 0, nm = 0;
        while (nl < m && r[nl] < l) nl++;
        while (nl + nm < m && r[nl + nm] < g) nm++;   /* equal to the pivot: placed */
        if (nl > 0)
            select_many_rec(a, lo, l - 1, r, nl, budget);
        r += nl + nm;
        m -= nl + nm;
        lo = g;
    }
    if (m == 1)
        select_k(a, lo, hi, r[0]);
}

static void
select_many(double *a, Py_ssize_t lo, Py_ssize_t hi, const Py_ssize_t *r, int m)
{
    int budget = 2;
    for (Py_ssize_t s = hi - lo + 1; s > 1; s >>= 1)
        budget += 2;
    select_many_rec(a, lo, hi, r, m, budget);
}


/* Introsort of a[lo..hi]: the same split as the selection, recursing on the
 * smaller side; heapsort once the depth budget is spent; ranges under 16
 * by insertion. */
static void
sort_rec(double *a, Py_ssize_t lo, Py_ssize_t hi, int budget)
{
    while (hi - lo >= 16) {
        if (budget-- == 0) {
            heap_sort(a, lo, hi);
            return;
        }
        Py_ssize_t l, g;
        split(a, lo, hi, &l, &g);   /* a[lo..l) < p, a[l..g) == p, a[g..hi] >= p */
        if (l - lo < hi - g) {
            sort_rec(a, lo, l - 1, budget);
            lo = g;
        }
        else {
            sort_rec(a, g, hi, budget);
            hi = l - 1;
        }
    }
    if (hi > lo)
        insertion_sort(a, lo, hi);
}

void
shp_sort_inplace(double *a, Py_ssize_t n)
{
    int budget = 2;
    for (Py_ssize_t s = n; s > 1; s >>= 1)
        budget += 2;
    if (n > 1)
        sort_rec(a, 0, n - 1, budget);
}

/* NumPy's _lerp: the branch on t keeps the result exact at both ends. */
static inline double
np_lerp(double a, double b, double t)
{
    double d = b - a;
    return t >= 0.5 ? b - d * (1.0 - t) : a + d * t;
}

/* Ranks (0-based) that the linear percentile q needs: floor(h), floor(h)+1. */
static void
pct_ranks(Py_ssize_t n, double q, Py_ssize_t *lo, Py_ssize_t *hi, double *t)
{
    double h = (double)(n - 1) * q;
    if (h >= (double)(n - 1)) {
        *lo = *hi = n - 1;
        *t = 0.0;
        return;
    }
    if (h < 0) {
        *lo = *hi = 0;
        *t = 0.0;
        return;
    }
    double f = floor(h);
    *lo = (Py_ssize_t)f;
    *hi = *lo + 1;
    *t = h - f;
}

/* Percentile from an array in which the needed ranks are already placed. */
static double
pct_placed(const double *a, Py_ssize_t n, double q)
{
    Py_ssize_t lo, hi;
    double t;
    pct_ranks(n, q, &lo, &hi, &t);
    return np_lerp(a[lo], a[hi], t);
}

double
shp_percentile_inplace(double *a, Py_ssize_t n, double q)
{
    Py_ssize_t r[2];
    double t;
    pct_ranks(n, q, &r[0], &r[1], &t);
    select_many(a, 0, n - 1, r, r[0] == r[1] ? 1 : 2);
    return np_lerp(a[r[0]], a[r[1]], t);
}

void
shp_median_ci_ranks(Py_ssize_t n, Py_ssize_t *j, Py_ssize_t *k)
{
    /* Largest j with P(B <= j-1) <= 0.025, B ~ Binomial(n, 1/2): then
     * [x_(j), x_(n+1-j)] covers the median with probability >= 95%
     * (distribution-free; e.g. Conover, Practical Nonparametric Statistics,
     * section 3.2).  The pmf is summed from far in the lower tail, where
     * the mass left out is below 1e-20, so the cost is O(sqrt(n)). */
    Py_ssize_t i0 = 0;
    double pmf;
    if (n > 1000) {
        double sd = sqrt((double)n) / 2.0;
        i0 = (Py_ssize_t)floor((double)n / 2.0 - 10.0 * sd);
        pmf = exp(lgamma((double)n + 1) - lgamma((double)i0 + 1) -
                  lgamma((double)(n - i0) + 1) - (double)n * log(2.0));
    }
    else {
        pmf = ldexp(1.0, -(int)n);   /* P(B = 0) = 2^-n, fine for n <= 1000 */
    }
    double cdf = 0.0;
    Py_ssize_t best = 0;   /* j; 0 = no rank qualifies */
    for (Py_ssize_t i = i0; i <= n / 2; i++) {
        cdf += pmf;
        if (cdf > 0.025)
            break;
        best = i + 1;
        pmf *= (double)(n - i) / (double)(i + 1);
    }
    if (best < 1)
        best = 1;   /* n < 6: [min, max], coverage below 95% */
    *j = best;
    *k = n + 1 - best;
}

static int
add_rank(Py_ssize_t *r, int m, Py_ssize_t v)
{
    r[m] = v;
    return m + 1;
}

static int
sort_unique(Py_ssize_t *r, int m)
{
    for (int i = 1; i < m; i++) {
        Py_ssize_t v = r[i];
        int j = i - 1;
        while (j >= 0 && r[j] > v) {
            r[j + 1] = r[j];
            j--;
        }
        r[j + 1] = v;
    }
    int u = 0;
    for (int i = 0; i < m; i++)
        if (u == 0 || r[u - 1] != r[i])
            r[u++] = r[i];
    return u;
}

/* Lag-1 autocorrelation of x[0..n) around `mean`; NaN when undefined. */
double
shp_lag1_autocorr(const double *x, Py_ssize_t n, double mean)
{
    if (n < 3)
        return NAN;
    double num = 0.0, den = 0.0;
    for (Py_ssize_t i = 0; i < n; i++) {
        double d = x[i] - mean;
        den += d * d;
        if (i + 1 < n)
            num += d * (x[i + 1] - mean);
    }
    return den > 0.0 ? num / den : NAN;
}

double
shp_effective_n(Py_ssize_t n, double r1)
{
    /* Only a positive correlation clearly beyond chance (3 / sqrt(n): about
     * 1 in 700 i.i.d. sample sets) shrinks n: independent samples keep their
     * exact order-statistic interval. */
    if (isnan(r1) || n < 20 || r1 <= 3.0 / sqrt((double)n))
        return (double)n;
    if (r1 > 0.999)
        r1 = 0.999;
    double e = (double)n * (1.0 - r1) / (1.0 + r1);
    return e < 2.0 ? 2.0 : e;
}

/* Ranks (j, k) of the median's CI for n samples worth n_eff independent
 * ones: the ranks of floor(n_eff) scaled back to n. */
static void
ci_ranks(Py_ssize_t n, double n_eff, Py_ssize_t *j, Py_ssize_t *k)
{
    Py_ssize_t ne = (Py_ssize_t)floor(n_eff), je, ke;
    if (ne >= n || ne < 1) {
        shp_median_ci_ranks(n, j, k);
        return;
    }
    shp_median_ci_ranks(ne, &je, &ke);
    Py_ssize_t jj = 1 + (Py_ssize_t)floor((double)(je - 1) * (double)n / n_eff);
    if (jj < 1)
        jj = 1;
    if (jj > (n + 1) / 2)
        jj = (n + 1) / 2;
    *j = jj;
    *k = n + 1 - jj;
}

static const double SHP_QS[] = {0.25, 0.5, 0.75, 0.9, 0.95, 0.99};
#define SHP_NQ ((int)(sizeof(SHP_QS) / sizeof(SHP_QS[0])))

void
shp_summarize(const double *x, Py_ssize_t n, double *scratch, shp_summary *out)
{
    /* mean with Neumaier compensation; min/max in the same pass */
    double sum = 0.0, comp = 0.0, mn = x[0], mx = x[0];
    for (Py_ssize_t i = 0; i < n; i++) {
        double v = x[i], t = sum + v;
        comp += fabs(sum) >= fabs(v) ? (sum - t) + v : (v - t) + sum;
        sum = t;
        if (v < mn) mn = v;
        if (v > mx) mx = v;
    }
    /* an overflowing sum stays inf (as NumPy's), not inf + -inf = NaN */
    double mean = (isfinite(sum) ? sum + comp : sum) / (double)n;
    double ss = 0.0;
    for (Py_ssize_t i = 0; i < n; i++) {
        double d = x[i] - mean;
        ss += d * d;
    }
    out->mean = mean;
    out->std = n > 1 ? sqrt(ss / (double)(n - 1)) : 0.0;
    out->min = mn;
    out->max = mx;

    Py_ssize_t r[2 * SHP_NQ + 2], cj, ck;
    int m = 0;
    for (int i = 0; i < SHP_NQ; i++) {
        Py_ssize_t lo, hi;
        double t;
        pct_ranks(n, SHP_QS[i], &lo, &hi, &t);
        m = add_rank(r, m, lo);
        m = add_rank(r, m, hi);
    }
    /* the CI's ranks for the effective sample size: autocorrelated samples
     * know less about the median (docs/statistics.md) */
    out->autocorr = shp_lag1_autocorr(x, n, mean);
    out->n_eff = shp_effective_n(n, out->autocorr);
    ci_ranks(n, out->n_eff, &cj, &ck);
    m = add_rank(r, m, cj - 1);
    m = add_rank(r, m, ck - 1);
    m = sort_unique(r, m);

    memcpy(scratch, x, (size_t)n * sizeof(double));
    select_many(scratch, 0, n - 1, r, m);

    out->q1 = pct_placed(scratch, n, 0.25);
    out->p50 = out->median = pct_placed(scratch, n, 0.5);
    out->q3 = pct_placed(scratch, n, 0.75);
    out->p90 = pct_placed(scratch, n, 0.9);
    out->p95 = pct_placed(scratch, n, 0.95);
    out->p99 = pct_placed(scratch, n, 0.99);
    out->ci_low = scratch[cj - 1];
    out->ci_high = scratch[ck - 1];

    double iqr = out->q3 - out->q1;
    double lo_f = out->q1 - 1.5 * iqr, hi_f = out->q3 + 1.5 * iqr;
    Py_ssize_t outl = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        outl += (x[i] < lo_f) | (x[i] > hi_f);
    out->outliers = outl;
}

void
shp_median_ci(const double *x, Py_ssize_t n, double *scratch,
              double *median, double *lo, double *hi)
{
    Py_ssize_t r[4], a, b, cj, ck;
    double t;
    pct_ranks(n, 0.5, &a, &b, &t);
    shp_median_ci_ranks(n, &cj, &ck);
    int m = 0;
    m = add_rank(r, m, a);
    m = add_rank(r, m, b);
    m = add_rank(r, m, cj - 1);
    m = add_rank(r, m, ck - 1);
    m = sort_unique(r, m);
    memcpy(scratch, x, (size_t)n * sizeof(double));
    select_many(scratch, 0, n - 1, r, m);
    *median = np_lerp(scratch[a], scratch[b], t);
    *lo = scratch[cj - 1];
    *hi = scratch[ck - 1];
}

/* ---- cold start: when did the calls settle -------------------------------- */

Py_ssize_t
shp_settle_window(Py_ssize_t n_timed)
{
    Py_ssize_t w = n_timed / 20;
    return w < 5 ? 5 : w > 25 ? 25 : w;
}

/* Median of calls a..a+len of the series warm ++ timed, through scratch. */
static double
median_of(const double *warm, Py_ssize_t nwarm, const double *timed, Py_ssize_t a,
          Py_ssize_t len, double *scratch)
{
    for (Py_ssize_t k = 0; k < len; k++)
        scratch[k] = a + k < nwarm ? warm[a + k] : timed[a + k - nwarm];
    return shp_percentile_inplace(scratch, len, 0.5);
}

Py_ssize_t
shp_settle_calls(const double *warm, Py_ssize_t nwarm, const double *timed, Py_ssize_t n_timed,
                 double floor, double *head, double *steady)
{
    double scratch[SHP_SETTLE_MAX_TAIL];
    *head = *steady = NAN;
    if (n_timed < SHP_SETTLE_MIN_TIMED)
        return -1;
    Py_ssize_t n = nwarm + n_timed, w = shp_settle_window(n_timed);
    Py_ssize_t tail = n_timed - n_timed / 2;
    if (tail > SHP_SETTLE_MAX_TAIL)
        tail = SHP_SETTLE_MAX_TAIL;
    *steady = median_of(warm, nwarm, timed, n - tail, tail, scratch);
    *head = median_of(warm, nwarm, timed, nwarm, w, scratch);
    double limit = *steady * (1.0 + SHP_SETTLE_TOL);
    if (*steady + floor > limit)
        limit = *steady + floor;
    /* The first window at or below the limit; the tail's median is the
     * steady state, so some window there qualifies unless the tail rises. */
    for (Py_ssize_t i = 0; i + w <= n; i++)
        if (median_of(warm, nwarm, timed, i, w, scratch) <= limit)
            return i;
    return n - w;
}
