/*
 * extras.c -- what a result says beyond its latency: the cold start, the
 * GPU's own time and what NVML saw, and the diagnoses they give (warn.c).
 *
 * bench.c calls in four places: shp_extras_setup() after the sync is
 * resolved (CUDA events on the native path, the L2 flush buffer when cold),
 * shp_extras_watch_begin() before the first call (NVML's first reading),
 * shp_extras_fill() when the result is made and shp_extras_diagnose() after it.
 * The definitions of the figures: docs/methodology.md ("Cold start and
 * warm-up") and docs/cuda.md.
 */
#include "run/run.h"

#include <math.h>
#include <string.h>


/* ---- set-up -------------------------------------------------------------- */

int
shp_extras_setup(shp_state *st, shp_call *p, int cold, shp_CUstream stream, shp_diag *d)
{
    shp_sync *s = &p->sync;
    s->gt.stream = stream;
    /* GPU time: events around every timed call, on the native CUDA path */
    if (s->kind == SHP_SYNC_NATIVE) {
        char why[200];
        why[0] = '\0';
        if (shp_cuda_timer_events(st, &s->cuda, &s->gt, why, sizeof why) < 0)
            return -1;
        if (!s->gt.events) {
            shp_diag_cause(d, SHP_CAUSE_NO_GPU_TIME);
            if (shp_diag_object(d, "reason", PyUnicode_FromString(why)) < 0)
                return -1;
        }
    }
    if (cold && s->have_cuda && shp_cuda_timer_l2(st, &s->cuda, &s->gt) < 0)
        return -1;
    return 0;
}

void
shp_extras_watch_begin(shp_state *st, shp_call *p)
{
    if (!p->sync.have_cuda)
        return;
    char pci[32];
    int has_pci = shp_cuda_pci_bus_id(st, p->sync.cuda.ordinal, pci, (int)sizeof pci) == 0;
    shp_nvml_watch_begin(st, &p->nv, p->sync.cuda.ordinal, has_pci ? pci : NULL, shp_now_ns());
    p->nv_on = 1;
}

/* ---- the fields ------------------------------------------------------------- */

/* A tuple of n floats: x[i] / div (ns -> ms exactly as the samples). */
static PyObject *
floats(const double *x, Py_ssize_t n, double div)
{
    PyObject *t = PyTuple_New(n);
    for (Py_ssize_t i = 0; t != NULL && i < n; i++) {
        PyObject *f = PyFloat_FromDouble(x[i] / div);
        if (f == NULL)
            Py_CLEAR(t);
        else
            PyTuple_SET_ITEM(t, i, f);
    }
    return t;
}

/* first_call_ms, warmup_ms, settle_calls (and the two medians the warning
 * quotes).  run->samples is in ms already, run->warm in ns. */
static int
cold_start(shp_Stats *s, shp_run *run, Py_ssize_t nwarm, double overhead_ns, shp_extras *x)
{
    s->first_call_ms = nwarm > 0 ? run->warm[0] / 1e6 : run->samples[0];
    if (nwarm > 0 && (s->warmup_ms = floats(run->warm, nwarm, 1e6)) == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < nwarm; i++)
        run->warm[i] /= 1e6;   /* ns -> ms, like the samples */
    /* below this excess over the steady state a "trend" is noise: twice the
     * harness's floor, 20 clock ticks, half a microsecond */
    double floor = 2.0 * overhead_ns / 1e6;
    double ticks = 20.0 * (double)shp_clock_resolution_ns() / 1e6;
    if (floor < ticks)
        floor = ticks;
    if (floor < 5e-4)
        floor = 5e-4;
    s->settle_calls = shp_settle_calls(run->warm, nwarm, run->samples, run->n, floor,
                                       &x->head_ms, &x->steady_ms);
    return 0;
}

/* The GPU-time fields from run->gpu and run->host (ns). */
static int
gpu_fields(shp_Stats *s, shp_run *run)
{
    Py_ssize_t n = run->n;
    if ((s->gpu_samples_ms = floats(run->gpu, n, 1e6)) == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < n; i++)
        run->gpu[i] /= 1e6;
    shp_summary g;
    shp_summarize(run->gpu, n, run->scratch, &g);
    s->gpu_median_ms = g.median;
    s->gpu_p95_ms = g.p95;
    /* the host's share: its median time in the call over the median wall */
    s->host_median_ms = shp_percentile_inplace(run->host, n, 0.5) / 1e6;
    double share = s->median_ms > 0 ? s->host_median_ms / s->median_ms : 0.0;
    s->host_share = share < 0 ? 0.0 : share > 1 ? 1.0 : share;
    return 0;
}

int
shp_extras_fill(shp_Stats *s, shp_run *run, Py_ssize_t nwarm, double overhead_ns,
                const shp_call *p, shp_extras *x)
{
    x->head_ms = x->steady_ms = NAN;
    if (cold_start(s, run, nwarm, overhead_ns, x) < 0)
        return -1;
    if (run->gpu != NULL && gpu_fields(s, run) < 0)
        return -1;
    s->cache = PyUnicode_FromString(p->cold ? "cold" : "warm");
    if (s->cache == NULL)
        return -1;
    if (p->nv_on && (s->gpu_telemetry = shp_nvml_watch_dict(&p->nv)) == NULL)
        return -1;
    return 0;
}

/* ---- the diagnoses ----------------------------------------------------------- */

/* What NVML saw that makes the figures suspect. */
static int
nvml_diagnose(const shp_nvml_watch *w, shp_diag *d)
{
    if (w->dev == NULL)
        return 0;
    if (w->clock_max > 0 && w->clock_min >= 0 &&
        (double)(w->clock_max - w->clock_min) > SHP_NVML_CLOCK_MOVE * (double)w->clock_max) {
        shp_diag_cause(d, SHP_CAUSE_GPU_CLOCK);
        if (shp_diag_number(d, "clock_start_mhz", (double)w->clock_start) < 0 ||
            shp_diag_number(d, "clock_end_mhz", (double)w->clock_end) < 0 ||
            shp_diag_number(d, "clock_min_mhz", (double)w->clock_min) < 0 ||
            shp_diag_number(d, "clock_max_mhz", (double)w->clock_max) < 0)
            return -1;
    }
    if (w->reasons & SHP_NVML_SLOWDOWNS) {
        char names[200];
        shp_nvml_reason_names(w->reasons & SHP_NVML_SLOWDOWNS, names, sizeof names);
        shp_diag_cause(d, SHP_CAUSE_THROTTLED);
        if (shp_diag_object(d, "reasons", PyUnicode_FromString(names)) < 0)
            return -1;
    }
    if (w->others > 0) {
        shp_diag_cause(d, SHP_CAUSE_SHARED_GPU);
        if (shp_diag_object(d, "other_processes", PyLong_FromSsize_t(w->others)) < 0 ||
            shp_diag_number(d, "other_processes_mb", (double)w->others_bytes / SHP_MIB) < 0)
            return -1;
    }
    return 0;
}

int
shp_extras_diagnose(const shp_Stats *s, const shp_extras *x, const shp_call *p, shp_diag *d)
{
    if (!isnan(s->host_share) && s->host_share > SHP_LAUNCH_BOUND) {
        shp_diag_cause(d, SHP_CAUSE_LAUNCH_BOUND);
        if (shp_diag_number(d, "host_median_ms", s->host_median_ms) < 0 ||
            shp_diag_number(d, "host_share", s->host_share) < 0)
            return -1;
    }
    /* settle_calls uses SHP_SETTLE_TOL; the warning wants a clear trend, so
     * that a burst of noise on a busy machine does not raise it */
    if (s->settle_calls > s->warmup_iters && !isnan(x->head_ms) && !isnan(x->steady_ms) &&
        x->head_ms > (1.0 + SHP_SETTLE_WARN) * x->steady_ms) {
        shp_diag_cause(d, SHP_CAUSE_WARMUP);
        if (shp_diag_number(d, "head_ms", x->head_ms) < 0 ||
            shp_diag_number(d, "steady_ms", x->steady_ms) < 0 ||
            shp_diag_object(d, "head_calls",
                            PyLong_FromSsize_t(shp_settle_window(s->timed_iters))) < 0 ||
            shp_diag_object(d, "settle_calls", PyLong_FromSsize_t(s->settle_calls)) < 0)
            return -1;
    }
    return p->nv_on ? nvml_diagnose(&p->nv, d) : 0;
}
