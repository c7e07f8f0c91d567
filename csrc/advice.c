/*
 * advice.c -- a BenchmarkStats filled from the computations: the latency
 * fields from summary.c, the stability fields from stability.c's diagnosis,
 * and the diagnosis (warn.c) of samples that are not stable.  (The
 * page-fault and busy-machine diagnoses are bench.c's: they need the run's
 * own counters.)
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
    PyObject *label = PyUnicode_FromString(d->label);
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

int
shp_stats_apply_rerun(shp_state *st, shp_Stats *s, double known_spread)
{
    if (s->samples == NULL || s->nsamples < 1)
        return 0;
    Py_ssize_t *sizes = NULL, nruns = 0, total;
    if (shp_counts_array(s->run_sizes, &sizes, &nruns, &total) < 0)
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
    PyObject *word = basis ? PyUnicode_FromString(basis) : NULL;
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
