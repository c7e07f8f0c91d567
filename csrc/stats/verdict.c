/*
 * verdict.c -- verdicts that hold across runs (pure computation).
 *
 * A faster/slower verdict is a claim about the code, so its interval must
 * hold the variation separate runs of identical code show, not only the
 * sampling error of one run's median.  Each side's level (log of its
 * median) gets a variance from
 *
 *   - the between-block component: medians of up to 10 consecutive blocks
 *     of each run; drift and autocorrelation make them disagree, which an
 *     i.i.d. interval cannot see;
 *   - the between-run component: the spread of the medians of repeated
 *     fresh-process runs (run_sizes), or a spread the caller knows;
 *   - for a single run with no such knowledge, how far a rerun moves: its
 *     slow variation (the variance of consecutive block medians beyond that
 *     of strided blocks, every B-th sample, which have the same size but
 *     average the slow variation out), never below SHP_ASSUMED_RUN_SPREAD,
 *     because a shift between runs is invisible inside either run.
 *
 * The verdict then needs the interval to exclude 1 and the estimate to
 * exceed a practical-equivalence margin; an interval inside the margin is
 * "same"; anything else is "inconclusive" with a reason.  docs/statistics.md
 * has the formulas and the rates measured on identical and slowed code.
 *
 * Calls only summary.c.
 */
#include "stats/stats.h"

#include <math.h>
#include <string.h>

/* Two-sided 95% quantiles of Student's t, df = 1..30. */
static const double t975[31] = {
    NAN, 12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622,
    2.2281, 2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930,
    2.0860, 2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452,
    2.0423,
};

double
shp_t975(double df)
{
    if (!(df >= 1.0))
        df = 1.0;   /* also NaN: the widest */
    if (df <= 30.0) {
        int lo = (int)floor(df);
        double f = df - lo;
        return lo >= 30 ? t975[30] : t975[lo] + f * (t975[lo + 1] - t975[lo]);
    }
    if (isinf(df))
        return 1.959964;
    /* Cornish-Fisher expansion: within 1e-4 of the exact quantile past 30. */
    double z = 1.959964, z3 = z * z * z, z5 = z3 * z * z;
    return z + (z3 + z) / (4.0 * df) + (5.0 * z5 + 16.0 * z3 + 3.0 * z) / (96.0 * df * df);
}

Py_ssize_t
shp_block_count(Py_ssize_t n)
{
    Py_ssize_t b = n / SHP_MIN_BLOCK;
    return b > SHP_MAX_BLOCKS ? SHP_MAX_BLOCKS : b;
}

/* Median of x[0..n) (n >= 1) using scratch. */
static double
median_of(const double *x, Py_ssize_t n, double *scratch)
{
    memcpy(scratch, x, (size_t)n * sizeof(double));
    return shp_percentile_inplace(scratch, n, 0.5);
}

/* Logs of the medians of b consecutive blocks of x[0..n) into out[0..b). */
static int
log_block_medians(const double *x, Py_ssize_t n, Py_ssize_t b, double *scratch, double *out)
{
    for (Py_ssize_t i = 0; i < b; i++) {
        Py_ssize_t s = n * i / b, e = n * (i + 1) / b;
        double m = median_of(x + s, e - s, scratch);
        if (!(m > 0.0))
            return -1;
        out[i] = log(m);
    }
    return 0;
}

/* Logs of the medians of b strided blocks (x[i], x[i+b], ...): the same
 * sizes as the consecutive blocks, but slow variation averages out in each,
 * so their spread is what sampling alone produces. */
static int
log_strided_medians(const double *x, Py_ssize_t n, Py_ssize_t b, double *scratch, double *out)
{
    for (Py_ssize_t i = 0; i < b; i++) {
        Py_ssize_t m = 0;
        for (Py_ssize_t k = i; k < n; k += b)
            scratch[m++] = x[k];
        double med = shp_percentile_inplace(scratch, m, 0.5);
        if (!(med > 0.0))
            return -1;
        out[i] = log(med);
    }
    return 0;
}

/* Sum of squared deviations from the mean of v[0..n). */
static double
sum_sq_dev(const double *v, Py_ssize_t n)
{
    double mean = 0.0, ss = 0.0;
    for (Py_ssize_t i = 0; i < n; i++)
        mean += v[i];
    mean /= (double)n;
    for (Py_ssize_t i = 0; i < n; i++)
        ss += (v[i] - mean) * (v[i] - mean);
    return ss;
}

/* Welch-Satterthwaite degrees of freedom of var = sampling (dfw df) + a
 * constant: var^2 / (sampling^2 / dfw), infinite when sampling is 0. */
static double
with_known_df(double sampling, double var, Py_ssize_t dfw)
{
    if (!(sampling > 0.0))
        return INFINITY;
    return var * var / (sampling * sampling / (double)dfw);
}

int
shp_level_estimate(const double *x, Py_ssize_t n, const Py_ssize_t *sizes, Py_ssize_t nruns,
                   double known_spread, double floor_spread, shp_level *out)
{
    Py_ssize_t one = n;
    if (sizes == NULL || nruns < 1) {
        sizes = &one;
        nruns = 1;
    }
    memset(out, 0, sizeof(*out));
    out->runs = nruns;
    out->var = NAN;
    out->df = NAN;
    out->run_spread = NAN;
    out->block_spread = NAN;
    out->slow_spread = NAN;
    out->between = NAN;
    out->center = NAN;
    out->sampling = NAN;
    out->dfw = 0.0;
    Py_ssize_t len;
    double *scratch = shp_size_add(n, nruns, &len) == 0 &&
                              shp_size_add(len, SHP_MAX_BLOCKS + 1, &len) == 0 &&
                              (size_t)len <= PY_SSIZE_T_MAX / sizeof(double)
                          ? PyMem_Malloc((size_t)len * sizeof(double)) : NULL;
    if (scratch == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    double *run_logmed = scratch + n, *blk = run_logmed + nruns;
    double ss = 0.0, ss_strided = 0.0, inv_b = 0.0;
    Py_ssize_t dfw = 0, off = 0, with_blocks = 0;
    int positive = 1;
    for (Py_ssize_t r = 0; r < nruns; r++) {
        Py_ssize_t m = sizes[r];
        if (m < 1 || m > n - off) {
            PyMem_Free(scratch);
            PyErr_Format(PyExc_ValueError,
                         "run_sizes must be positive and add up to the %zd samples", n);
            return -1;
        }
        double med = median_of(x + off, m, scratch);
        positive = positive && med > 0.0;
        run_logmed[r] = positive ? log(med) : 0.0;
        Py_ssize_t b = shp_block_count(m);
        if (positive && b >= 3 && log_block_medians(x + off, m, b, scratch, blk) == 0) {
            ss += sum_sq_dev(blk, b);
            if (log_strided_medians(x + off, m, b, scratch, blk) == 0)
                ss_strided += sum_sq_dev(blk, b);
            dfw += b - 1;
            inv_b += 1.0 / (double)b;
            with_blocks++;
            out->blocks = b;
        }
        off += m;
    }
    if (off != n) {
        PyMem_Free(scratch);
        PyErr_Format(PyExc_ValueError, "run_sizes add up to %zd, not to the %zd samples", off, n);
        return -1;
    }
    if (!positive) {   /* a zero or negative median has no log: no spread to judge */
        PyMem_Free(scratch);
        return 0;
    }
    double R = (double)nruns;
    double sb2 = dfw > 0 ? ss / (double)dfw : NAN;   /* pooled between-block variance */
    double sampling = dfw > 0 ? sb2 * (inv_b / (double)with_blocks) / R : NAN;
    double center = 0.0;
    for (Py_ssize_t r = 0; r < nruns; r++)
        center += run_logmed[r];
    out->center = center / R;
    out->sampling = sampling;
    out->dfw = (double)dfw;
    if (dfw > 0)
        out->block_spread = sqrt(sb2);
    if (nruns >= 2) {
        double sr2 = sum_sq_dev(run_logmed, nruns) / (R - 1.0);
        out->run_spread = sqrt(sr2);
        out->from_runs = 1;
        out->var = sr2 / R;
        out->df = R - 1.0;
        if (dfw > 0 && sampling > out->var) {   /* the runs agree better than they can */
            out->var = sampling;
            out->df = (double)dfw;
            out->from_runs = 0;
        }
        if (known_spread >= 0.0 && dfw > 0) {
            double v = sampling + known_spread * known_spread / R;
            if (v > out->var) {
                out->var = v;
                out->df = with_known_df(sampling, v, dfw);
                out->from_runs = 0;
                out->known_floor = 1;
            }
        }
    }
    else {
        /* One run: how far would a rerun move?  The caller's spread when
         * known; else the run's slow variation -- consecutive block medians
         * beyond strided ones -- but never less than the floor: the spread
         * separate runs of identical code showed (SHP_ASSUMED_RUN_SPREAD, on
         * the reference machine, or this machine's calibration): a run cannot
         * see a shift that happens between runs (allocator state, neighbours,
         * frequency, address layout), and those moved whole runs by 15% there
         * (std of log run medians over 160 fresh-process runs). */
        double slow = dfw > 0 ? sb2 - ss_strided / (double)dfw : 0.0;
        double floor2 = floor_spread * floor_spread;
        double between = known_spread >= 0.0 ? known_spread * known_spread
                                              : slow > floor2 ? slow : floor2;
        if (dfw > 0)
            out->slow_spread = sqrt(slow > 0.0 ? slow : 0.0);
        out->between = sqrt(between);
        out->assumed = known_spread < 0.0 && !(slow > floor2);
        out->var = (dfw > 0 ? sampling : 0.0) + between;
        /* a known or assumed spread is a constant, not an estimate: only the
         * sampling term carries the blocks' few degrees of freedom */
        out->df = dfw == 0 ? INFINITY
                : known_spread >= 0.0 || out->assumed ? with_known_df(sampling, out->var, dfw)
                : (double)dfw;
    }
    PyMem_Free(scratch);
    return 0;
}

int
shp_widen_interval(const double *a, Py_ssize_t na, const Py_ssize_t *sa, Py_ssize_t ra,
                   const double *b, Py_ssize_t nb, const Py_ssize_t *sb, Py_ssize_t rb,
                   double known_spread, double ratio, double blo, double bhi, shp_interval *out)
{
    out->ratio = ratio;
    out->lo = blo;
    out->hi = bhi;
    out->widened = 0;
    if (shp_level_estimate(a, na, sa, ra, known_spread, SHP_ASSUMED_RUN_SPREAD, &out->a) < 0 ||
        shp_level_estimate(b, nb, sb, rb, known_spread, SHP_ASSUMED_RUN_SPREAD, &out->b) < 0)
        return -1;
    double va = out->a.var, vb = out->b.var;
    if (isnan(va) || isnan(vb) || !(blo > 0.0) || !(ratio > 0.0))
        return 0;   /* too few samples to see drift: the bootstrap is all there is */
    double z = shp_t975(INFINITY);
    double boot = (log(bhi) - log(blo)) / (2.0 * z);
    double v = va + vb, df = INFINITY;
    if (v > 0.0)   /* Welch-Satterthwaite */
        df = v * v / (va * va / out->a.df + vb * vb / out->b.df);
    if (boot * boot > v) {   /* the medians' own sampling error dominates */
        v = boot * boot;
        df = INFINITY;
    }
    double q = shp_t975(df) * sqrt(v);
    /* never narrower than the bootstrap's own (possibly skewed) interval */
    out->lo = fmin(ratio * exp(-q), blo);
    out->hi = fmax(ratio * exp(q), bhi);
    out->widened = 1;
    return 0;
}

/* Welch-Satterthwaite degrees of freedom of v1 (df1) + v2 (df2); an
 * infinite df is a constant's. */
static double
welch_df(double v1, double df1, double v2, double df2)
{
    double v = v1 + v2;
    double d = (df1 > 0.0 && isfinite(df1) ? v1 * v1 / df1 : 0.0) +
               (df2 > 0.0 && isfinite(df2) ? v2 * v2 / df2 : 0.0);
    return d > 0.0 ? v * v / d : INFINITY;
}

const char *
shp_rerun_basis_name(shp_rerun_basis b)
{
    switch (b) {
    case SHP_RERUN_RUNS: return "runs";
    case SHP_RERUN_GIVEN: return "given";
    case SHP_RERUN_CALIBRATED: return "calibrated";
    case SHP_RERUN_ASSUMED: return "assumed";
    case SHP_RERUN_SLOW: return "slow variation";
    default: return NULL;
    }
}

int
shp_rerun_interval(const double *x, Py_ssize_t n, const Py_ssize_t *sizes, Py_ssize_t nruns,
                   double known_spread, double floor_spread, double floor_df,
                   double ci_lo, double ci_hi, shp_rerun *out)
{
    shp_level lv;
    out->lo = out->hi = out->spread = NAN;
    out->basis = SHP_RERUN_NONE;
    if (sizes == NULL || nruns < 2) {
        sizes = NULL;
        nruns = 1;
    }
    if (shp_level_estimate(x, n, sizes, nruns, known_spread, floor_spread, &lv) < 0)
        return -1;
    if (isnan(lv.var) || !isfinite(lv.center))
        return 0;   /* a median <= 0: no log scale */
    double var, df;
    if (nruns == 1) {
        /* this run's level and the rerun's are both uncertain by their
         * sampling error plus the between-run shift: twice the level's variance */
        double b2 = lv.between * lv.between;
        double vs = isnan(lv.sampling) ? 0.0 : lv.sampling, dfs = lv.dfw > 0 ? lv.dfw : INFINITY;
        if (ci_lo > 0.0 && ci_hi >= ci_lo) {
            double h = (log(ci_hi) - log(ci_lo)) / (2.0 * shp_t975(INFINITY));
            if (h * h > vs) {
                vs = h * h;
                dfs = INFINITY;
            }
        }
        double dfb;
        if (known_spread >= 0.0) {
            out->basis = SHP_RERUN_GIVEN;
            dfb = INFINITY;
        }
        else if (lv.assumed) {
            out->basis = isfinite(floor_df) ? SHP_RERUN_CALIBRATED : SHP_RERUN_ASSUMED;
            dfb = floor_df;
        }
        else {
            out->basis = SHP_RERUN_SLOW;
            dfb = lv.dfw > 0 ? lv.dfw : INFINITY;
        }
        var = 2.0 * (vs + b2);
        df = welch_df(2.0 * vs, dfs, 2.0 * b2, dfb);
        out->spread = lv.between;
    }
    else {
        /* the prediction interval of one more run median from R of them */
        double R = (double)nruns, s2 = lv.run_spread * lv.run_spread;
        double per_run = isnan(lv.sampling) ? 0.0 : lv.sampling * R;
        df = R - 1.0;
        out->basis = SHP_RERUN_RUNS;
        if (per_run > s2) {   /* the runs agree better than their samples can */
            s2 = per_run;
            df = lv.dfw;
        }
        if (known_spread >= 0.0 && known_spread * known_spread > s2) {
            s2 = known_spread * known_spread;
            df = INFINITY;
            out->basis = SHP_RERUN_GIVEN;
        }
        var = s2 * (1.0 + 1.0 / R);
        out->spread = sqrt(s2);
    }
    double q = shp_t975(df) * sqrt(var);
    out->lo = exp(lv.center - q);
    out->hi = exp(lv.center + q);
    return 0;
}

int
shp_paired_rounds(const double *a, const double *b, const Py_ssize_t *sizes_a,
                  const Py_ssize_t *sizes_b, Py_ssize_t rounds, double *ratio, double *lo,
                  double *hi)
{
    Py_ssize_t ma = 0, mb = 0;
    for (Py_ssize_t r = 0; r < rounds; r++) {
        ma = sizes_a[r] > ma ? sizes_a[r] : ma;
        mb = sizes_b[r] > mb ? sizes_b[r] : mb;
    }
    Py_ssize_t m = ma > mb ? ma : mb, len;
    /* the caller checked that each side's sizes add up to its samples: m and
     * rounds are at most the samples held; the sum is checked all the same */
    double *d = shp_size_add(rounds, rounds, &len) == 0 && shp_size_add(len, m, &len) == 0 &&
                        shp_size_add(len, 1, &len) == 0 &&
                        (size_t)len <= PY_SSIZE_T_MAX / sizeof(double)
                    ? PyMem_Malloc((size_t)len * sizeof(double)) : NULL;
    if (d == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    double *sorted = d + rounds, *scratch = sorted + rounds;
    Py_ssize_t oa = 0, ob = 0;
    for (Py_ssize_t r = 0; r < rounds; r++) {
        double xa = median_of(a + oa, sizes_a[r], scratch);
        double xb = median_of(b + ob, sizes_b[r], scratch);
        oa += sizes_a[r];
        ob += sizes_b[r];
        if (!(xa > 0.0) || !(xb > 0.0)) {
            PyMem_Free(d);
            PyErr_SetString(PyExc_ValueError,
                            "a paired comparison needs positive medians in every round");
            return -1;
        }
        d[r] = log(xb / xa);
    }
    Py_ssize_t j, k;
    shp_median_ci_ranks(rounds, &j, &k);
    memcpy(sorted, d, (size_t)rounds * sizeof(double));
    double center = shp_percentile_inplace(sorted, rounds, 0.5);
    memcpy(sorted, d, (size_t)rounds * sizeof(double));
    double l = shp_percentile_inplace(sorted, rounds, rounds > 1 ? (double)(j - 1) / (double)(rounds - 1) : 0.0);
    memcpy(sorted, d, (size_t)rounds * sizeof(double));
    double h = shp_percentile_inplace(sorted, rounds, rounds > 1 ? (double)(k - 1) / (double)(rounds - 1) : 0.0);
    *ratio = exp(center);
    *lo = exp(l);
    *hi = exp(h);
    PyMem_Free(d);
    return 0;
}

int
shp_interval_decides(const shp_interval *iv, double known_spread)
{
    return known_spread >= 0.0 || iv->a.runs > 1 || iv->b.runs > 1;
}

const char *
shp_judge(double ratio, double lo, double hi, double margin)
{
    double up = 1.0 + margin, down = 1.0 / (1.0 + margin);
    if (!(lo <= hi) || !(ratio > 0.0) || !(lo > 0.0))   /* a median <= 0 is no timing */
        return "inconclusive";
    if (lo > 1.0 && ratio > up)
        return "slower";
    if (hi < 1.0 && ratio < down)
        return "faster";
    if (lo >= down && hi <= up)
        return "same";
    return "inconclusive";
}

void
shp_judge_reason(const char *verdict, double ratio, double lo, double hi, double margin,
                 const char *basis, const char *advice, char *buf, size_t size)
{
    double pct = 100.0 * margin, up = 1.0 + margin, down = 1.0 / (1.0 + margin);
    /* the margin said as it is applied: a ratio above 1 + m, or below 1 / (1 + m) */
    if (strcmp(verdict, "slower") == 0)
        PyOS_snprintf(buf, size,
                      "%.1f%% slower: the ratio %.4f is beyond the %.0f%% margin (above %.4f), "
                      "and the interval [%.3f, %.3f] excludes 1 (%s)", 100.0 * (ratio - 1.0),
                      ratio, pct, up, lo, hi, basis);
    else if (strcmp(verdict, "faster") == 0)
        PyOS_snprintf(buf, size,
                      "%.1f%% faster: the ratio %.4f is beyond the %.0f%% margin (below %.4f = "
                      "1/%.2f), and the interval [%.3f, %.3f] excludes 1 (%s)",
                      100.0 * (1.0 - ratio), ratio, pct, down, up, lo, hi, basis);
    else if (strcmp(verdict, "same") == 0)
        PyOS_snprintf(buf, size,
                      "the interval [%.3f, %.3f] lies within the %.0f%% margin (%.4f to %.4f) "
                      "(%s)", lo, hi, pct, down, up, basis);
    else if (!(lo <= hi) || !(ratio > 0.0) || !(lo > 0.0))
        PyOS_snprintf(buf, size, "no interval could be estimated: a median <= 0 or no "
                      "interval (%s)%s", basis, advice);
    else if ((lo > 1.0 || hi < 1.0))
        PyOS_snprintf(buf, size,
                      "a real difference (interval [%.3f, %.3f] excludes 1) but within the "
                      "%.0f%% margin (%.4f to %.4f) in its estimate %.4f; lower margin= to call "
                      "it (%s)", lo, hi, pct, down, up, ratio, basis);
    else
        PyOS_snprintf(buf, size,
                      "the interval [%.3f, %.3f] (±%.0f%%) is wider than the %.0f%% margin allows "
                      "to decide (%s)%s", lo, hi, 50.0 * (hi - lo) / (ratio > 0 ? ratio : 1.0),
                      pct, basis, advice);
}
