/*
 * advice.c -- a BenchmarkStats filled from the computations: the latency
 * fields from summary.c, the stability fields from stability.c's diagnosis,
 * and the BenchmarkWarning that names the cause and a remedy when the
 * samples are not stable.  (The page-fault and busy-machine warnings are
 * bench.c's: they need the run's own counters.)
 *
 * The rerun interval (where a fresh process's median falls) is filled here
 * too, from verdict.c's computation and the machine's calibrated spread.
 *
 * Layer 4, beside stats.c: reads the result struct; calls verdict.c, the
 * field helpers and args.c.
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

int
shp_stats_apply_rerun(shp_state *st, shp_Stats *s, double known_spread)
{
    if (s->samples == NULL || s->nsamples < 1)
        return 0;
    Py_ssize_t *sizes = NULL, nruns = 0;
    if (shp_counts_array(s->run_sizes, &sizes, &nruns) < 0)
        return -1;
    /* the floor of a single run: this machine's calibration, else the assumed
     * spread; a run that started on a busy machine allows at least what busy
     * runs showed, whatever a calibration said */
    int calibrated = st->machine_spread >= 0.0, busy = s->machine_busy == 1;
    double floor = calibrated ? st->machine_spread : SHP_ASSUMED_RUN_SPREAD;
    double floor_df = calibrated ? st->machine_spread_df : INFINITY;
    if (busy && floor < SHP_ASSUMED_BUSY_RUN_SPREAD) {
        floor = SHP_ASSUMED_BUSY_RUN_SPREAD;
        floor_df = INFINITY;
    }
    shp_rerun rr;
    int rc = shp_rerun_interval(s->samples, s->nsamples, sizes, nruns, known_spread, floor,
                                floor_df, s->ci95_low_ms, s->ci95_high_ms, &rr);
    PyMem_Free(sizes);
    if (rc < 0)
        return -1;
    const char *basis = rr.basis == SHP_RERUN_ASSUMED && busy ? "assumed busy"
                                                               : shp_rerun_basis_name(rr.basis);
    PyObject *word = basis ? PyUnicode_InternFromString(basis) : NULL;
    if (basis != NULL && word == NULL)
        return -1;
    s->rerun_low_ms = basis ? rr.lo : NAN;
    s->rerun_high_ms = basis ? rr.hi : NAN;
    Py_XSETREF(s->rerun_basis, word);
    return 0;
}

PyObject *
shp_apply_rerun_py(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"stats", "run_spread"};
    static const shp_argspec spec = {"_apply_rerun", names, 2, 1, 1, 0};
    shp_state *st = PyModule_GetState(module);
    PyObject *v[2];
    double known = -1.0;
    if (shp_args_parse(&spec, args, nargs, kwnames, v) < 0)
        return NULL;
    if (!PyObject_TypeCheck(v[0], st->stats_type))
        return shp_arg_type_error("_apply_rerun()", "stats", "a BenchmarkStats", v[0]), NULL;
    if (v[1] != NULL && v[1] != Py_None) {
        if (shp_arg_real(v[1], "_apply_rerun()", "run_spread", &known) < 0)
            return NULL;
        if (!(known >= 0.0 && known < 1.0))
            return shp_arg_value_error("_apply_rerun()", "run_spread",
                                       "a number in [0, 1) (0.03 = 3%)", v[1]), NULL;
    }
    if (shp_stats_apply_rerun(st, (shp_Stats *)v[0], known) < 0)
        return NULL;
    return Py_NewRef(v[0]);
}
