/*
 * bootstrap.c -- the ratio of two medians and its bootstrap 95% CI.
 *
 * "Is B faster than A?" answered with an interval, not two means: the
 * ratio of medians (candidate / baseline) with a percentile-bootstrap 95%
 * confidence interval, resampling both sample sets.  The generator is
 * seeded (xoshiro256**), so the same inputs always give the same verdict.
 *
 * Pure computation on C arrays (it calls only summary.c); used by
 * compare_benchmarks (compare.c) and the table's "vs Baseline" column.
 */
#include "profiling.h"

#include <string.h>

/* ---- generator --------------------------------------------------------- */

typedef struct { uint64_t s[4]; } rng;

static uint64_t
splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void
rng_seed(rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&seed);
}

static inline uint64_t
rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static inline uint64_t
rng_next(rng *r)
{
    uint64_t *s = r->s, res = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return res;
}

/* Uniform index in [0, n): 53 random bits scaled; the bias is < n / 2^53. */
static inline Py_ssize_t
rng_index(rng *r, Py_ssize_t n)
{
    Py_ssize_t i = (Py_ssize_t)((double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0) * (double)n);
    return i < n ? i : n - 1;
}

static double
resampled_median(rng *r, const double *x, Py_ssize_t n, double *buf)
{
    for (Py_ssize_t i = 0; i < n; i++)
        buf[i] = x[rng_index(r, n)];
    return shp_percentile_inplace(buf, n, 0.5);
}

const char *
shp_verdict(double lo, double hi)
{
    if (hi < 1.0)
        return "faster";
    if (lo > 1.0)
        return "slower";
    return "same";
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
    Py_ssize_t nmax = na > nb ? na : nb;
    double *buf = PyMem_Malloc((size_t)nmax * sizeof(double));
    double *ratios = PyMem_Malloc((size_t)resamples * sizeof(double));
    if (buf == NULL || ratios == NULL) {
        PyMem_Free(buf);
        PyMem_Free(ratios);
        PyErr_NoMemory();
        return -1;
    }
    memcpy(buf, a, (size_t)na * sizeof(double));
    double ma = shp_percentile_inplace(buf, na, 0.5);
    memcpy(buf, b, (size_t)nb * sizeof(double));
    double mb = shp_percentile_inplace(buf, nb, 0.5);
    *med_a = ma;
    *med_b = mb;
    *ratio = mb / ma;

    rng r;
    rng_seed(&r, seed ^ 0x5eedb0075eedULL);
    for (Py_ssize_t i = 0; i < resamples; i++) {
        double ra = resampled_median(&r, a, na, buf);
        double rb = resampled_median(&r, b, nb, buf);
        ratios[i] = rb / ra;
    }
    *lo = shp_percentile_inplace(ratios, resamples, 0.025);
    *hi = shp_percentile_inplace(ratios, resamples, 0.975);
    PyMem_Free(buf);
    PyMem_Free(ratios);
    return 0;
}
