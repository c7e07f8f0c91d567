/*
 * advice.c -- a BenchmarkStats filled from the computations: the latency
 * fields from summary.c, the stability fields from stability.c's diagnosis,
 * and the BenchmarkWarning that names the cause and a remedy when the
 * samples are not stable.  (The page-fault and busy-machine warnings are
 * bench.c's: they need the run's own counters.)
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
shp_stats_warn_stability(shp_state *st, shp_Stats *s)
{
    char a[32], b[32];
    const shp_stability *d = &s->stab;
    if (d->label == NULL)   /* not diagnosed (a result built by hand or loaded) */
        return 0;
    if (d->multimodal) {
        PyOS_snprintf(a, sizeof(a), "%.3g", d->mode_low);
        PyOS_snprintf(b, sizeof(b), "%.3g", d->mode_high);
        return PyErr_WarnFormat(
            st->warning, 1,
            "benchmark %R is multimodal: its samples form two groups (around %s ms and %s ms, "
            "%d%% in the slower one), which one median does not describe. Common causes: page "
            "faults when the allocator hands memory back every call (see minor_faults_per_iter), "
            "a busy machine preempting the calls (invol_ctx_switches_per_iter), a periodic GC or "
            "background job, a frequency change. Remedy: more warm-up, pin the "
            "threads, and repeat= to see whether it persists", s->name, a, b,
            (int)lround(100.0 * d->mode_high_frac));
    }
    if (d->drifting) {
        PyOS_snprintf(a, sizeof(a), "%+.0f%%", 100.0 * d->drift);
        return PyErr_WarnFormat(
            st->warning, 1,
            "benchmark %R is drifting: its block medians moved %s from the start to the end of "
            "the run (warm-up too short, a thermal or frequency change, a growing cache or "
            "heap). Remedy: raise num_warmup, use repeat=, or isolate the machine", s->name, a);
    }
    if (d->noisy) {
        double iqr = s->median_ms > 0 ? 100.0 * (s->p50_ms == s->p50_ms ? s->iqr_ms : 0.0) /
                                            s->median_ms : 0.0;
        PyOS_snprintf(a, sizeof(a), "%.0f%%", iqr);
        PyOS_snprintf(b, sizeof(b), "%.0f%%", s->median_ms > 0 ? 100.0 * s->p95_ms / s->median_ms : 0.0);
        return PyErr_WarnFormat(
            st->warning, 1,
            "benchmark %R is noisy: IQR %s of the median, P95 %s of it (the machine is "
            "busy, or the callable's work varies). Remedy: pin threads (taskset, "
            "torch.set_num_threads), isolate the machine, take more iterations or repeat=; "
            "for an A/B question use compare_callables", s->name, a, b);
    }
    return 0;
}
