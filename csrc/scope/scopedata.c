/*
 * scopedata.c -- the two bounded data structures behind a scope: the latency
 * histogram of a ProfileNode and the trace-event ring of a profiler.
 *
 * A pure leaf: no Python objects, no calls into other files.  Both grow with
 * PyMem (so the GIL is held) and never fail: when memory runs out the sample
 * or event is counted as dropped instead, because a profiler that raises
 * MemoryError out of a `with` block the user wrote would be worse than a
 * histogram that misses one sample.
 *
 * Histogram: log-spaced buckets (DDSketch's mapping).  Bucket i holds the
 * durations x with gamma^(i-1) < x <= gamma^i, gamma = (1 + a) / (1 - a);
 * reporting a bucket as 2 gamma^i / (gamma + 1) is within a relative error a
 * of every x in it.  a = 0.005 (0.5 %), so a percentile interpolated between
 * two such values is within 1 % of NumPy's.  Only the range of buckets seen so
 * far is stored: 1 ns .. 1 hour spans ~2900 buckets (23 KiB) at the very
 * most, a scope whose durations vary tenfold uses ~230 (1.8 KiB).
 */
#include "scope/scope.h"

#include <math.h>

#define HIST_ALPHA 0.005

static double
hist_log_gamma(void)
{
    return log((1.0 + HIST_ALPHA) / (1.0 - HIST_ALPHA));
}

void
shp_hist_init(shp_hist *h)
{
    h->counts = NULL;
    h->lo = 0;
    h->len = 0;
    h->zeros = 0;
    h->n = 0;
    h->dropped = 0;
    h->min_ns = 0;
    h->max_ns = 0;
}

void
shp_hist_free(shp_hist *h)
{
    PyMem_Free(h->counts);
    shp_hist_init(h);
}

/* Make bucket `i` part of the stored range; 0, or -1 when out of memory. */
static int
hist_cover(shp_hist *h, int32_t i)
{
    if (h->counts != NULL && i >= h->lo && i < h->lo + h->len)
        return 0;
    int32_t lo = h->counts == NULL ? i : (i < h->lo ? i : h->lo);
    int32_t hi = h->counts == NULL ? i + 1 : (i >= h->lo + h->len ? i + 1 : h->lo + h->len);
    /* Grow by a margin on the side that grew, so a drifting range does not
     * reallocate on every new bucket. */
    if (h->counts != NULL) {
        if (lo < h->lo)
            lo -= 32;
        if (hi > h->lo + h->len)
            hi += 32;
    }
    size_t n = (size_t)(hi - lo);
    uint64_t *c = PyMem_Calloc(n, sizeof(uint64_t));
    if (c == NULL)
        return -1;
    if (h->counts != NULL) {
        memcpy(c + (h->lo - lo), h->counts, (size_t)h->len * sizeof(uint64_t));
        PyMem_Free(h->counts);
    }
    h->counts = c;
    h->lo = lo;
    h->len = (int32_t)n;
    return 0;
}

void
shp_hist_record(shp_hist *h, int64_t ns)
{
    if (ns < 0)
        ns = 0;
    if (h->n == 0 || ns < h->min_ns)
        h->min_ns = ns;
    if (h->n == 0 || ns > h->max_ns)
        h->max_ns = ns;
    h->n++;
    if (ns == 0) {
        h->zeros++;
        return;
    }
    int32_t i = (int32_t)ceil(log((double)ns) / hist_log_gamma());
    if (hist_cover(h, i) < 0) {
        h->dropped++;
        return;
    }
    h->counts[i - h->lo]++;
}

/* The value reported for the k-th smallest (0-based) bucketed sample. */
static double
hist_rank_value(const shp_hist *h, uint64_t k, double gamma)
{
    if (k < h->zeros)
        return 0.0;
    uint64_t seen = h->zeros;
    for (int32_t j = 0; j < h->len; j++) {
        seen += h->counts[j];
        if (k < seen) {
            double v = 2.0 * pow(gamma, (double)(h->lo + j)) / (gamma + 1.0);
            /* the exact extremes are known: never report beyond them */
            if (v < (double)h->min_ns)
                v = (double)h->min_ns;
            if (v > (double)h->max_ns)
                v = (double)h->max_ns;
            return v;
        }
    }
    return (double)h->max_ns;
}

double
shp_hist_quantile(const shp_hist *h, double q)
{
    uint64_t n = h->n - h->dropped;
    if (n == 0)
        return NAN;
    if (q <= 0.0)
        return (double)h->min_ns;
    if (q >= 1.0)
        return (double)h->max_ns;
    double gamma = (1.0 + HIST_ALPHA) / (1.0 - HIST_ALPHA);
    double pos = (double)(n - 1) * q;        /* NumPy's method="linear" */
    uint64_t k = (uint64_t)floor(pos);
    double frac = pos - (double)k;
    double lo = hist_rank_value(h, k, gamma);
    if (frac == 0.0 || k + 1 >= n)
        return lo;
    double hi = hist_rank_value(h, k + 1, gamma);
    return lo + frac * (hi - lo);
}

/* ---- trace ring ----------------------------------------------------------- */

void
shp_ring_init(shp_ring *r, Py_ssize_t capacity)
{
    r->ev = NULL;
    r->capacity = capacity > 0 ? capacity : 0;
    r->head = 0;
    r->count = 0;
    r->dropped = 0;
}

void
shp_ring_clear(shp_ring *r)
{
    PyMem_Free(r->ev);
    shp_ring_init(r, r->capacity);
}

void
shp_ring_push(shp_ring *r, const shp_event *e)
{
    if (r->capacity == 0)
        return;
    if (r->ev == NULL) {
        r->ev = PyMem_Calloc((size_t)r->capacity, sizeof(shp_event));
        if (r->ev == NULL) {
            r->dropped++;
            return;
        }
    }
    Py_ssize_t slot = (r->head + r->count) % r->capacity;
    if (r->count == r->capacity) {
        /* full: the oldest event makes room */
        r->head = (r->head + 1) % r->capacity;
        r->dropped++;
    }
    else {
        r->count++;
    }
    r->ev[slot] = *e;
}

const shp_event *
shp_ring_at(const shp_ring *r, Py_ssize_t i)
{
    return &r->ev[(r->head + i) % r->capacity];
}
