/*
 * stats/ -- pure computation on C arrays: order statistics and the summary
 * (summary.c), the bootstrap ratio of two medians (bootstrap.c), verdicts
 * that hold across runs (verdict.c), a run's stability (stability.c), a run
 * under load: its schedule, queue recursions and intervals (queueing.c).  No
 * Python objects in or out; functions that allocate say so and fail with
 * MemoryError.  Calls nothing outside this folder.
 */
#ifndef SHP_STATS_STATS_H
#define SHP_STATS_STATS_H

#include "shp.h"

/* ---- the seeded generator (xoshiro256**), inline: calls nothing ---------- */

/* One generator for every seeded draw of the package (bootstrap.c's
 * resamples, queueing.c's arrival schedules and block bootstrap): the same
 * seed gives the same numbers on every platform. */
typedef struct { uint64_t s[4]; } shp_rng;

static inline uint64_t
shp_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline void
shp_rng_seed(shp_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = shp_splitmix64(&seed);
}

static inline uint64_t
shp_rng_next(shp_rng *r)
{
    uint64_t *s = r->s, res = ((s[1] * 5) << 7 | (s[1] * 5) >> 57) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return res;
}

/* Uniform in (0, 1): 53 random bits, never 0 (logs are taken of it). */
static inline double
shp_rng_open01(shp_rng *r)
{
    return ((double)(shp_rng_next(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/* Uniform integer in [0, n) (n >= 1; Lemire's multiply, bias below 2^-32 for
 * the sizes used here). */
static inline Py_ssize_t
shp_rng_below(shp_rng *r, Py_ssize_t n)
{
    return (Py_ssize_t)(((shp_rng_next(r) >> 32) * (uint64_t)n) >> 32);
}

/* ---- summary.c ---------------------------------------------------------- */

typedef struct {
    double mean, std, min, max;
    double median, p50, p90, p95, p99;
    double q1, q3;              /* 25th / 75th percentiles */
    double ci_low, ci_high;     /* 95% CI of the median (order statistics) */
    Py_ssize_t outliers;        /* beyond Tukey's 1.5 IQR fences */
    double autocorr;            /* lag-1 autocorrelation (NaN if undefined) */
    double n_eff;               /* effective sample size the CI's ranks use */
} shp_summary;

/* Lag-1 autocorrelation of x[0..n) around `mean`; NaN if n < 3 or constant. */
double shp_lag1_autocorr(const double *x, Py_ssize_t n, double mean);
/* AR(1) effective sample size n (1 - r) / (1 + r) (at least 2), or n when
 * r1 <= 3 / sqrt(n) (not clearly correlated) or n < 20.  Never fails. */
double shp_effective_n(Py_ssize_t n, double r1);
/*
 * Summarise x[0..n) (n >= 1).  `scratch` must hold n doubles; it is
 * overwritten (order statistics are found by selection in it, x is left
 * untouched).  Percentiles follow NumPy's default method="linear".
 * Never fails.
 */
void shp_summarize(const double *x, Py_ssize_t n, double *scratch, shp_summary *out);

/*
 * Cold start: every call's time in order is warm[0..nwarm) then
 * timed[0..n_timed) (ms).  Returns the number of calls made before the series
 * settled -- the first index whose window of calls has a median within
 * SHP_SETTLE_TOL of the steady state (the median of the last half of the
 * timed calls, at most the last SHP_SETTLE_MAX_TAIL) or within `floor` of it
 * -- or -1 when there are too few timed calls to say (fewer than
 * SHP_SETTLE_MIN_TIMED).  *head receives the median of the first window of
 * timed calls and *steady the steady state (both NaN with -1).  No
 * allocation, never fails; O(SHP_SETTLE_MAX_TAIL + settle * window).
 */
#define SHP_SETTLE_TOL 0.10
#define SHP_SETTLE_MIN_TIMED 20
#define SHP_SETTLE_MAX_TAIL 1000
#define SHP_SETTLE_WARN 0.25   /* the warning: first timed window 25% above steady */
Py_ssize_t shp_settle_calls(const double *warm, Py_ssize_t nwarm, const double *timed,
                            Py_ssize_t n_timed, double floor, double *head, double *steady);
/* The window shp_settle_calls uses for n_timed timed calls. */
Py_ssize_t shp_settle_window(Py_ssize_t n_timed);

/* Only the median and its 95% CI (for adaptive stopping); same contract. */
void shp_median_ci(const double *x, Py_ssize_t n, double *scratch,
                   double *median, double *lo, double *hi);

/* NumPy-linear percentile q in [0, 1] of a[0..n), rearranging a (selection). */
double shp_percentile_inplace(double *a, Py_ssize_t n, double q);
/* Sort a[0..n) ascending in place (introsort; no NaN).  Never fails. */
void shp_sort_inplace(double *a, Py_ssize_t n);

/* 1-based ranks (j, k) of the distribution-free 95% CI of the median:
 * [x_(j), x_(k)] with k = n + 1 - j; j = 1 when n is too small. */
void shp_median_ci_ranks(Py_ssize_t n, Py_ssize_t *j, Py_ssize_t *k);

/* ---- bootstrap.c -------------------------------------------------------- */

/* Medians of a and b, their ratio b/a, and a seeded percentile-bootstrap
 * 95% CI of it (na, nb >= 1).  0, or -1 with MemoryError. */
int shp_compare_samples(const double *a, Py_ssize_t na, const double *b, Py_ssize_t nb,
                        uint64_t seed, Py_ssize_t resamples, double *med_a, double *med_b,
                        double *ratio, double *lo, double *hi);

/* ---- verdict.c ---------------------------------------------------------- */

#define SHP_DEFAULT_MARGIN 0.05   /* practical-equivalence margin: 5% */
#define SHP_MAX_BLOCKS 10         /* blocks per run for the between-block spread */
#define SHP_MIN_BLOCK 5           /* samples per block at least */
/* Run-to-run spread (std of log run medians) assumed for a single run when
 * nothing measured it: what separate fresh-process runs of identical code
 * showed on the reference machine (docs/statistics.md, bench_verdicts.py). */
#define SHP_ASSUMED_RUN_SPREAD 0.15
/* The same for the rerun interval of a run that started on a busy machine
 * (machine_busy): fresh-process medians of two workloads on the reference
 * 2-core machine at load average 6-7 spread 22-24% (bench_rerun.py,
 * docs/statistics.md "Rerun interval"); a calibration below it does not
 * narrow a busy run's interval. */
#define SHP_ASSUMED_BUSY_RUN_SPREAD 0.25

/* How uncertain one side's level (the log of its median) is. */
typedef struct {
    Py_ssize_t runs;      /* fresh-process runs pooled (1: a single run) */
    Py_ssize_t blocks;    /* blocks per run (0: too few samples for blocks) */
    double var;           /* variance of the side's log level; NaN: unknown */
    double df;            /* its degrees of freedom; NaN when var is */
    double run_spread;    /* std of the log run medians; NaN when runs < 2 */
    double block_spread;  /* pooled std of the log block medians; NaN if none */
    double slow_spread;   /* single run: std of its slow variation; else NaN */
    double between;       /* single run: the between-run std used (the known
                             spread, else the larger of the slow variation and
                             SHP_ASSUMED_RUN_SPREAD); else NaN */
    int assumed;          /* single run: `between` is the floor spread */
    int known_floor;      /* runs >= 2: the known spread, not the runs', set var */
    int from_runs;        /* var is the spread of the run medians */
    double center;        /* mean of the log run medians (one run: log median) */
    double sampling;      /* sampling variance of the level from the blocks; NaN if none */
    double dfw;           /* the blocks' degrees of freedom (0: no blocks) */
} shp_level;

/* Two-sided 95% quantile of Student's t with df degrees of freedom (df may
 * be fractional or INFINITY; below 1 counts as 1).  Never fails. */
double shp_t975(double df);
/* Blocks a run of n samples is cut into: min(10, n / 5).  Never fails. */
Py_ssize_t shp_block_count(Py_ssize_t n);
/*
 * Level variance of one side: x[0..n) in run order, `sizes` the samples of
 * each of `nruns` runs (NULL: one run), `known_spread` a between-run std of
 * log medians the caller knows (< 0: none), `floor_spread` the one assumed
 * when nothing is known (SHP_ASSUMED_RUN_SPREAD, or this machine's
 * calibrated spread).  0, or -1 with an exception (MemoryError; ValueError
 * when sizes do not add up to n).  A single run counts a between-run term
 * (known, or its slow variation, never below floor_spread); under 15
 * samples that term alone (df infinite).  var stays NaN when a median is <= 0.
 */
int shp_level_estimate(const double *x, Py_ssize_t n, const Py_ssize_t *sizes, Py_ssize_t nruns,
                       double known_spread, double floor_spread, shp_level *out);

/* Where the between-run spread of a rerun interval came from. */
typedef enum {
    SHP_RERUN_NONE,         /* no interval (a median <= 0) */
    SHP_RERUN_RUNS,         /* measured: the spread of the repetitions' medians */
    SHP_RERUN_GIVEN,        /* run_spread= */
    SHP_RERUN_CALIBRATED,   /* this machine's remembered calibration */
    SHP_RERUN_ASSUMED,      /* SHP_ASSUMED_RUN_SPREAD */
    SHP_RERUN_SLOW,         /* the run's own slow variation, above the floor */
} shp_rerun_basis;

typedef struct {
    double lo, hi;          /* where a fresh-process rerun's median falls (95%), ms; NaN: none */
    double spread;          /* the between-run std (log) that went in */
    shp_rerun_basis basis;
} shp_rerun;

/*
 * The rerun interval of x[0..n) (ms, run order; sizes / nruns as
 * shp_level_estimate).  One run: its median times exp(+-q), q the t
 * quantile of twice (this run's and the rerun's) the level variance --
 * the larger of the blocks' sampling variance and the one the CI of the
 * median [ci_lo, ci_hi] implies (NaN: none), plus the between-run spread
 * (known_spread >= 0 as given; else the slow variation, never below
 * floor_spread: a machine's calibrated spread with floor_df degrees of
 * freedom, or SHP_ASSUMED_RUN_SPREAD with floor_df INFINITY, a constant).  Repetitions (nruns >= 2): the prediction interval of one
 * more run median, exp(mean log run median +- t(R-1) s_r sqrt(1 + 1/R)),
 * s_r never below what the blocks' sampling allows nor below known_spread.
 * 0, or -1 with an exception (as shp_level_estimate).
 */
int shp_rerun_interval(const double *x, Py_ssize_t n, const Py_ssize_t *sizes, Py_ssize_t nruns,
                       double known_spread, double floor_spread, double floor_df,
                       double ci_lo, double ci_hi, shp_rerun *out);
/* rerun_basis of a single run whose samples are multimodal or drifting: no
 * interval (one run cannot say where another lands), the reason instead. */
#define SHP_RERUN_NONE_MODES "two modes: a rerun may land in either"
#define SHP_RERUN_NONE_DRIFT "drifting: a rerun may land anywhere along the drift"
/* The basis as the word results carry ("runs", "given", "calibrated",
 * "assumed", "slow variation"); NULL for SHP_RERUN_NONE. */
const char *shp_rerun_basis_name(shp_rerun_basis b);
/* The interval of a ratio of medians (candidate b / baseline a) widened by
 * both sides' level spreads. */
typedef struct {
    double ratio, lo, hi;   /* the ratio and its interval */
    shp_level a, b;         /* the two sides' level estimates */
    int widened;            /* 0: too few samples, [lo, hi] is the bootstrap's */
} shp_interval;

/*
 * Widen the bootstrap interval [blo, bhi] of `ratio` (from the medians of
 * a[0..na) and b[0..nb)) by the between-block / between-run variances of
 * both sides (runs and sizes as shp_level_estimate), with a Welch-
 * Satterthwaite t quantile; the bootstrap's own width is the floor.
 * 0, or -1 with an exception (as shp_level_estimate).
 */
int shp_widen_interval(const double *a, Py_ssize_t na, const Py_ssize_t *sa, Py_ssize_t ra,
                       const double *b, Py_ssize_t nb, const Py_ssize_t *sb, Py_ssize_t rb,
                       double known_spread, double ratio, double blo, double bhi,
                       shp_interval *out);
/*
 * Interleaved rounds: per round r the ratio of medians b_r / a_r; *ratio is
 * their median (on the log scale) and [lo, hi] its distribution-free 95%
 * interval (order statistics; [min, max] below 6 rounds).  The sizes give
 * each round's samples on both sides.  0, or -1 with an exception
 * (MemoryError; ValueError on a median <= 0).
 */
int shp_paired_rounds(const double *a, const double *b, const Py_ssize_t *sizes_a,
                      const Py_ssize_t *sizes_b, Py_ssize_t rounds, double *ratio, double *lo,
                      double *hi);
/* 1 when the between-run spread behind iv was measured (a side with
 * repetitions) or given (known_spread >= 0); 0 when it was only assumed (two
 * single runs): an assumed spread may explain a verdict, never decide it. */
int shp_interval_decides(const shp_interval *iv, double known_spread);
/* "slower" (lo > 1 and ratio > 1 + margin), "faster" (hi < 1 and ratio <
 * 1 / (1 + margin)), "same" (interval inside the margin) or "inconclusive"
 * (anything else, a NaN included).  A static string; never fails. */
const char *shp_judge(double ratio, double lo, double hi, double margin);
/* One sentence saying why `verdict` was given, into buf (always
 * terminated).  `basis` names what the interval holds, `advice` (may be "")
 * is appended to an undecided verdict.  Never fails. */
void shp_judge_reason(const char *verdict, double ratio, double lo, double hi, double margin,
                      const char *basis, const char *advice, char *buf, size_t size);

/* ---- stability.c -------------------------------------------------------- */

/* Thresholds of the `stability` label (docs/statistics.md, "Stability"). */
#define SHP_STAB_MODES_D 5.0        /* Ashman's D of the two-group split, n >= 200 */
#define SHP_STAB_MODES_D_SMALL 8.5  /* ... for 40 <= n < 200 (no test below 40) */
#define SHP_STAB_DRIFT 0.10         /* |change of the block medians over the run| */
#define SHP_STAB_DRIFT_T 4.0        /* ... and |t| of that slope */
#define SHP_STAB_IQR 0.10           /* IQR / median */
#define SHP_STAB_TAIL 2.0           /* p95 / median: over 5% of calls at 2x the median */
#define SHP_STAB_MODES_N 200        /* from this many samples the mode test uses SHP_STAB_MODES_D */
#define SHP_STAB_MIN_MODE_N 40      /* no mode test below this */
#define SHP_STAB_MIN_FRAC 0.05      /* each group of a split: at least 5% of the samples */
#define SHP_STAB_MODE_SEP 0.10      /* modes 10% apart at least, or they do not matter */
#define SHP_STAB_MIN_NOISY_N 10     /* fewer samples say nothing about the spread */

typedef struct {
    double cv;              /* std / mean; NaN when mean <= 0 */
    double autocorr;        /* lag-1 autocorrelation; NaN when undefined */
    double n_eff;           /* effective sample size (AR(1)); n when r1 is not clearly > 0 */
    double drift;           /* change of the block medians over the run / median; NaN < 3 blocks */
    double drift_t;         /* t statistic of that slope */
    double modes_d;         /* Ashman's D of the best two-group split; NaN untested */
    double mode_low, mode_high;   /* the two groups' medians (ms) */
    double mode_high_frac;  /* share of samples in the upper group */
    int multimodal, drifting, noisy;
    const char *label;      /* "multimodal" > "drifting" > "noisy" > "stable" (static) */
} shp_stability;

/*
 * Diagnose x[0..n) (n >= 1) given its summary `sm` (autocorrelation and
 * n_eff come from it); `scratch` holds n doubles (overwritten).  Never
 * fails: without memory for the mode test its fields stay NaN.
 */
void shp_stability_compute(const double *x, Py_ssize_t n, double *scratch,
                           const shp_summary *sm, shp_stability *out);

/* ---- queueing.c: a run under load ------------------------------------------ */

/* The arrival times of a schedule fixed in advance, in ns from the opening of
 * a window of window_ns: a Poisson process of rate qps (exponential gaps from
 * the seeded generator) when `poisson`, else one every 1 / qps from 0.  A
 * new PyMem array into *out and its length into *n (0 when no arrival falls
 * in the window: a qps whose first gap is beyond it).  0, or -1 with
 * MemoryError. */
int shp_load_schedule(int poisson, double qps, int64_t window_ns, uint64_t seed, int64_t **out,
                      Py_ssize_t *n);
/* The latencies of a first-come-first-served queue with `servers` servers
 * (Lindley's recursion for one, Kiefer-Wolfowitz's for more: each request to
 * the server free earliest) for requests arriving at arrival[0..n)
 * (ascending) with service times service[0..n): out[i] = completion -
 * arrival, in the inputs' unit.  0, or -1 with MemoryError. */
int shp_fcfs_latencies(const double *arrival, const double *service, Py_ssize_t n,
                       Py_ssize_t servers, double *out);

/* The backlog's growth over the second half of the arrival window, when
 * requests keep arriving while they are not completed: it is about zero for
 * a queue that keeps up, and grows at (arrival rate - service rate) for one
 * that does not.  Overloaded: it grew by more than SHP_LOAD_OVERLOAD_Z times
 * the Poisson noise of the half's arrivals (sqrt), plus one. */
#define SHP_LOAD_OVERLOAD_Z 3.0
#define SHP_LOAD_OVERLOAD_MIN_ARRIVALS 20   /* fewer in the half: not judged */
typedef struct {
    Py_ssize_t growth;          /* not completed (dropped included) at the window's end
                                   minus half-way */
    double growth_per_s;        /* that per second of the half */
    Py_ssize_t backlog_end;     /* waiting or in service when the window closed */
    Py_ssize_t arrived_second_half;
    int overloaded;             /* 1, 0, or -1: too few arrivals to say */
} shp_backlog;
/* From the arrivals (ascending, ns from the window's opening), the
 * completions and the dropped requests' arrivals (both ascending).  Never
 * fails. */
void shp_load_backlog(const int64_t *arrivals, Py_ssize_t na, const int64_t *done, Py_ssize_t nd,
                      const int64_t *dropped, Py_ssize_t ndrop, int64_t window_ns,
                      shp_backlog *out);

/* The bootstrap's sizes: at least SHP_LOAD_MIN_BLOCKS blocks; replicates
 * SHP_LOAD_BOOT_REPS, fewer for long runs (SHP_LOAD_BOOT_WORK values resampled
 * in all), never under SHP_LOAD_BOOT_MIN_REPS. */
#define SHP_LOAD_MIN_BLOCKS 20
#define SHP_LOAD_BOOT_REPS 1000
#define SHP_LOAD_BOOT_MIN_REPS 100
#define SHP_LOAD_BOOT_WORK 2e8
/* The block length for x[0..n) in order: the largest variance ratio of
 * block means (b Var(means of b) / Var(x), b = 2, 4, ..., 32 blocks at
 * least), never under n^(1/3), never over n / SHP_LOAD_MIN_BLOCKS; at least
 * 1.  Never fails. */
Py_ssize_t shp_block_length(const double *x, Py_ssize_t n);
/* The replicates for n latencies.  Never fails. */
Py_ssize_t shp_bootstrap_reps(Py_ssize_t n);
/* The 95% interval of each percentile q[0..nq) (fractions in [0, 1],
 * NumPy-linear) of x[0..n) taken in order, by a circular block bootstrap of
 * `reps` replicates with blocks of `block` latencies, seeded: [lo[j], hi[j]]
 * are the 2.5th and 97.5th percentiles of the replicates' percentile.  NaN
 * when n < 2.  0, or -1 with MemoryError. */
int shp_percentile_block_ci(const double *x, Py_ssize_t n, const double *q, int nq,
                            Py_ssize_t block, uint64_t seed, Py_ssize_t reps, double *lo,
                            double *hi);

/* ---- thresholds of a run's diagnosis (flags.c, bench.c, extras.c) ------- */

/* Per-iteration page faults above which a result warns of allocator state. */
#define SHP_FAULTS_WARN 256.0
/* A median under this many times the harness's own floor is overhead-dominated. */
#define SHP_OVERHEAD_FACTOR 100.0
/* A median under this many times the clock's resolution: the timer is coarse for it. */
#define SHP_COARSE_TIMER_FACTOR 20.0
/* benchmark_load: a percentile q is decided from a run only when at least this
 * many completed latencies lie above it, n (1 - q) >= SHP_LOAD_MIN_TAIL: its
 * interval's high end rests on them (find_peak_qps sizes its probes by it). */
#define SHP_LOAD_MIN_TAIL 10
/* ... so a p99 from fewer completed requests is flagged 'few requests'. */
#define SHP_LOAD_FEW_REQUESTS (SHP_LOAD_MIN_TAIL * 100)
/* benchmark_load: the harness's lag at p99 above this share of the latency's p99. */
#define SHP_LOAD_LAG_SHARE 0.1
/* host_share above this: launch-bound (the GPU had little left when the call returned). */
#define SHP_LAUNCH_BOUND 0.8

#endif /* SHP_STATS_STATS_H */
