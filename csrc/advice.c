/*
 * advice.c -- a BenchmarkStats filled from the computations: the latency
 * fields from summary.c, the stability fields from stability.c's diagnosis,
 * and the diagnosis (warn.c) of samples that are not stable.  (The
 * page-fault and busy-machine diagnoses are bench.c's: they need the run's
 * own counters.)
 *
 * Layer 4, beside stats.c: reads the result struct, calls only the C-API.
 */
#include "profiling.h"

#include <math.h>

void
shp_stats_apply_summary(shp_Stats *s, const shp_summary *sm)
{
    s->mean_ms = sm->mean;
    s->median_ms = sm->median;
    s->std_ms = sm->std;
    s->p95_ms = sm->p95;
    s->min_ms = sm->min;
    s->max_ms = sm->max;
    s->fps = sm->mean > 0 ? 1000.0 / sm->mean : 0.0;
    s->p50_ms = sm->p50;
    s->p90_ms = sm->p90;
    s->p99_ms = sm->p99;
    s->iqr_ms = sm->q3 - sm->q1;
    s->ci95_low_ms = sm->ci_low;
    s->ci95_high_ms = sm->ci_high;
    s->outliers = sm->outliers;
}

int
shp_stats_apply_stability(shp_Stats *s, const shp_stability *d)
{
    PyObject *label = PyUnicode_InternFromString(d->label);
    if (label == NULL)
        return -1;
    Py_XSETREF(s->stability, label);
    s->cv = d->cv;
    s->autocorr_lag1 = d->autocorr;
    s->effective_n = (Py_ssize_t)floor(d->n_eff);
    s->drift = d->drift;
    s->multimodal = d->multimodal;
    s->stab = *d;
    return 0;
}

int
shp_stats_diagnose_stability(const shp_Stats *s, shp_diag *d)
{
    const shp_stability *st = &s->stab;
    if (st->label == NULL)   /* not diagnosed (a result built by hand or loaded) */
        return 0;
    /* one cause, the label's, as flags.c reads it back */
    if (st->multimodal) {
        shp_diag_cause(d, SHP_CAUSE_MULTIMODAL);
        return shp_diag_number(d, "mode_low_ms", st->mode_low) < 0 ||
               shp_diag_number(d, "mode_high_ms", st->mode_high) < 0 ||
               shp_diag_number(d, "slow_share", st->mode_high_frac) < 0 ? -1 : 0;
    }
    if (st->drifting) {
        shp_diag_cause(d, SHP_CAUSE_DRIFTING);
        return shp_diag_number(d, "drift", st->drift);
    }
    if (st->noisy) {
        shp_diag_cause(d, SHP_CAUSE_NOISY);
        double med = s->median_ms;
        return shp_diag_number(d, "iqr_share", med > 0 ? s->iqr_ms / med : NAN) < 0 ||
               shp_diag_number(d, "p95_share", med > 0 ? s->p95_ms / med : NAN) < 0 ? -1 : 0;
    }
    return 0;
}
