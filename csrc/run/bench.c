/*
 * bench.c -- benchmark_callable: options, the overhead floor, the result.
 *
 * The run itself is loop.c's (the timed region is described there); this
 * file reads the options, resolves the sync (sync.c), measures the
 * harness's own floor once per process, drives warm-up, collection and the
 * timed loop, and assembles the BenchmarkStats.  Samples are converted to
 * milliseconds once at the end; that buffer becomes the result's
 * samples_ms without a copy.
 */
#include "run/run.h"
#include <math.h>
#include <string.h>

/* The validated options of one benchmark_callable call. */
typedef struct {
    PyObject *name, *device;          /* borrowed from the caller */
    Py_ssize_t num_warmup, num_iters;
    int track_ram, track_vram, disable_gc;
    int progress;                     /* -1 auto, 0 off, 1 on */
    double target_rel_ci;             /* 0: not adaptive */
    double max_time_s;                /* 0: no limit */
    shp_device dev;
    int cache_cold;                   /* cache="cold" */
    int has_stream;                   /* stream= given (not None) */
    void *stream;                     /* its CUstream handle */
    shp_preflight pf;                 /* the machine when the call started (env.c) */
    double run_spread;                /* run_spread= for the rerun interval; < 0: none */
    unsigned counters;                /* counters= : bits 1 << SHP_CTR_* */
} bench_opts;

#define SHP_OVERHEAD_ITERS 2000
#define SHP_OVERHEAD_WARMUP 50

#define FN "benchmark_callable()"

/* ---- options --------------------------------------------------------------- */

/* A count of iterations: an int >= min, small enough for its samples. */
static int
as_count(PyObject *v, const char *param, Py_ssize_t min, Py_ssize_t *out, int huge_is_memory)
{
    PyObject *idx = shp_arg_index(v, FN, param);
    if (idx == NULL)
        return -1;
    int overflow = 0;
    long long n = PyLong_AsLongLongAndOverflow(idx, &overflow);
    if (n == -1 && PyErr_Occurred()) {
        Py_DECREF(idx);
        return -1;
    }
    if (overflow < 0 || (overflow == 0 && n < min)) {
        if (min == 1)   /* the released module's words, which users' tests match on */
            PyErr_Format(PyExc_ValueError, "%s must be a positive integer, got %S", param, idx);
        else
            PyErr_Format(PyExc_ValueError, FN ": %s must be >= %zd, got %S", param, min, idx);
        Py_DECREF(idx);
        return -1;
    }
    /* the samples and their working copy (loop.c): they grow as samples arrive, so a
     * count they could never hold -- more than the machine's memory -- is refused
     * before the first call rather than met when memory runs out */
    Py_ssize_t bytes;
    int64_t ram = huge_is_memory ? shp_memory_limit_bytes() : -1;
    if (overflow > 0 || n > (long long)PY_SSIZE_T_MAX ||
        shp_size_mul((Py_ssize_t)n, 2 * sizeof(double), &bytes) < 0 ||
        (ram > 0 && (int64_t)bytes > ram)) {
        if (huge_is_memory)
            PyErr_Format(PyExc_MemoryError,
                         FN ": %s=%S needs more memory for its samples (16 bytes a call) than "
                         "this process can have", param, idx);
        else
            PyErr_Format(PyExc_ValueError, FN ": %s=%S is too large", param, idx);
        Py_DECREF(idx);
        return -1;
    }
    Py_DECREF(idx);
    *out = (Py_ssize_t)n;
    return 0;
}

/* A positive finite real, or None (0.0). */
static int
as_positive_real(PyObject *v, const char *param, double *out, int below_one)
{
    if (v == Py_None) {
        *out = 0.0;
        return 0;
    }
    if (!shp_arg_is_real(v))
        return shp_arg_type_error(FN, param, "a real number or None", v);
    double d = PyFloat_AsDouble(v);
    if (d == -1.0 && PyErr_Occurred())
        return -1;
    if (!(d > 0.0) || !isfinite(d) || (below_one && d >= 1.0))
        return shp_arg_value_error(FN, param,
                                   below_one ? "a fraction in (0, 1), e.g. 0.01 for 1%"
                                             : "a positive number of seconds", v);
    *out = d;
    return 0;
}

enum {
    OPT_FUNC, OPT_NAME, OPT_DEVICE, OPT_NUM_WARMUP, OPT_NUM_ITERS, OPT_TRACK_RAM,
    OPT_TRACK_VRAM, OPT_SYNC_FN, OPT_TARGET_REL_CI, OPT_MAX_TIME_S, OPT_DISABLE_GC,
    OPT_PROGRESS, OPT_CACHE, OPT_STREAM, OPT_RUN_SPREAD, OPT_COUNTERS, N_OPTS
};
static const char *const opt_names[N_OPTS] = {
    "func", "name", "device", "num_warmup", "num_iters", "track_ram", "track_vram",
    "sync_fn", "target_rel_ci", "max_time_s", "disable_gc", "progress", "cache", "stream",
    "run_spread",
    "counters",
};
/* func, then the harness's options; every other argument is func's. */
static const shp_argspec bench_spec = {"benchmark_callable", opt_names, N_OPTS, 1, 1, 1};

/* The keywords a user may have meant for the harness (capi.h's near-option
 * rule): every option but func, and the names other entry points give the
 * two counts (profile_model's and benchmark_onnx's warmup= / iters=). */
static PyObject *
near_options(void)
{
    static const char *const aliases[][2] = {{"warmup", "num_warmup"}, {"iters", "num_iters"}};
    PyObject *d = PyDict_New();
    for (int i = OPT_NAME; d != NULL && i < N_OPTS; i++) {
        PyObject *o = PyUnicode_FromString(opt_names[i]);
        if (o == NULL || PyDict_SetItem(d, o, o) < 0)
            Py_CLEAR(d);
        Py_XDECREF(o);
    }
    for (size_t i = 0; d != NULL && i < sizeof aliases / sizeof aliases[0]; i++) {
        PyObject *k = PyUnicode_FromString(aliases[i][0]), *o = PyUnicode_FromString(aliases[i][1]);
        if (k == NULL || o == NULL || PyDict_SetItem(d, k, o) < 0)
            Py_CLEAR(d);
        Py_XDECREF(k);
        Py_XDECREF(o);
    }
    return d;
}

/* func raised (in the warm-up or the timed loop): when it is a TypeError
 * rejecting a keyword that is a near miss of an option (num_iter=, iters=),
 * the note says which option was meant.  Leaves the exception set; never
 * fails (an error making the note is dropped, a Ctrl-C goes on). */
static void
note_near_option(shp_call *p)
{
    if (p->kwnames == NULL || !PyErr_ExceptionMatches(PyExc_TypeError))
        return;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *options = near_options();
    if (options == NULL)
        PyErr_Clear();   /* out of memory: the user's exception goes on bare */
    PyErr_Restore(type, value, tb);
    if (options != NULL) {
        shp_note_current_near_option(p->kwnames, options);
        Py_DECREF(options);
    }
}

/* Split the call into harness options and the user's arguments, check the
 * options, and prepare the vectorcall argument array (strong references). */
/* On the TypeError / ValueError of an option spatialhub 0.1.7 did not have:
 * code written for it passed keywords of that name on to func. */
static void
note_new_option(const char *opt)
{
    if (PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_ValueError))
        shp_note_current("if %s= was meant for func (spatialhub 0.1.7 passed keywords it "
                         "did not know on to func), bind it to func first: "
                         "functools.partial(func, %s=...)", opt, opt);
}

static int
parse_call(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
           bench_opts *o, shp_call *p)
{
    PyObject *v[N_OPTS];
    if (shp_args_parse(&bench_spec, args, nargs, kwnames, v) < 0)
        return -1;
    PyObject *func = v[OPT_FUNC], *sync_fn = NULL;
    if (shp_aio_refuse_object(func) < 0 || shp_arg_callable(func, FN, "func", 0, &func) < 0)
        return -1;
    if ((v[OPT_NAME] && shp_arg_str(v[OPT_NAME], FN, "name", 0, &o->name) < 0) ||
        (v[OPT_DEVICE] && shp_arg_str(v[OPT_DEVICE], FN, "device", 0, &o->device) < 0))
        return -1;
    o->num_warmup = SHP_DEFAULT_NUM_WARMUP;
    o->num_iters = SHP_DEFAULT_NUM_ITERS;
    o->track_ram = o->track_vram = 1;
    o->progress = -1;
    if (v[OPT_NUM_WARMUP] && as_count(v[OPT_NUM_WARMUP], "num_warmup", 0, &o->num_warmup, 0) < 0)
        return -1;
    if (v[OPT_NUM_ITERS] && as_count(v[OPT_NUM_ITERS], "num_iters", 1, &o->num_iters, 1) < 0)
        return -1;
    if ((v[OPT_TRACK_RAM] && shp_arg_flag(v[OPT_TRACK_RAM], &o->track_ram) < 0) ||
        (v[OPT_TRACK_VRAM] && shp_arg_flag(v[OPT_TRACK_VRAM], &o->track_vram) < 0))
        return -1;
    if (v[OPT_SYNC_FN] && shp_arg_callable(v[OPT_SYNC_FN], FN, "sync_fn", 1, &sync_fn) < 0)
        return -1;
    o->dev.kind = SHP_DEV_CPU;
    o->dev.ordinal = -1;
    if (o->device != NULL && shp_device_parse(o->device, &o->dev) < 0)
        return -1;
    /* the options spatialhub 0.1.7 did not have: code written for it passed
     * keywords of these names on to func, so their errors say how to do that */
    const char *opt = "disable_gc";
    if (v[OPT_DISABLE_GC] && shp_arg_flag(v[OPT_DISABLE_GC], &o->disable_gc) < 0)
        goto new_option_error;
    opt = "progress";
    if (v[OPT_PROGRESS] && v[OPT_PROGRESS] != Py_None &&
        shp_arg_flag(v[OPT_PROGRESS], &o->progress) < 0)
        goto new_option_error;
    opt = "target_rel_ci";
    if (v[OPT_TARGET_REL_CI] &&
        as_positive_real(v[OPT_TARGET_REL_CI], "target_rel_ci", &o->target_rel_ci, 1) < 0)
        goto new_option_error;
    opt = "max_time_s";
    if (v[OPT_MAX_TIME_S] && as_positive_real(v[OPT_MAX_TIME_S], "max_time_s", &o->max_time_s, 0) < 0)
        goto new_option_error;
    opt = "cache";
    if (v[OPT_CACHE] != NULL) {
        PyObject *c = NULL;
        if (shp_arg_str(v[OPT_CACHE], FN, "cache", 0, &c) < 0)
            goto new_option_error;
        o->cache_cold = PyUnicode_CompareWithASCIIString(c, "cold") == 0;
        if (!o->cache_cold && PyUnicode_CompareWithASCIIString(c, "warm") != 0) {
            shp_arg_value_error(FN, "cache", "'warm' or 'cold'", c);
            goto new_option_error;
        }
    }
    opt = "run_spread";
    o->run_spread = -1.0;
    if (v[OPT_RUN_SPREAD] != NULL && v[OPT_RUN_SPREAD] != Py_None) {
        if (shp_arg_real(v[OPT_RUN_SPREAD], FN, "run_spread", &o->run_spread) < 0)
            goto new_option_error;
        if (!(o->run_spread >= 0.0 && o->run_spread < 1.0)) {
            shp_arg_value_error(FN, "run_spread", "a number in [0, 1) (0.03 = 3%)",
                                v[OPT_RUN_SPREAD]);
            goto new_option_error;
        }
    }
    opt = "stream";
    o->has_stream = v[OPT_STREAM] != NULL && v[OPT_STREAM] != Py_None;
    if (o->has_stream && shp_arg_cuda_stream(v[OPT_STREAM], FN, "stream", &o->stream) < 0)
        goto new_option_error;
    opt = "counters";
    if (v[OPT_COUNTERS] && shp_counters_parse(v[OPT_COUNTERS], &o->counters) < 0)
        goto new_option_error;

    /* the call: positional user arguments, then keyword values */
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, nuserkw = 0;
    for (Py_ssize_t k = 0; k < nkw; k++)
        nuserkw += !shp_args_takes(&bench_spec, PyTuple_GET_ITEM(kwnames, k), nargs);
    Py_ssize_t npos = nargs > 0 ? nargs - 1 : 0;
    p->func = Py_NewRef(func);
    p->nargv = npos + nuserkw;
    p->argv = PyMem_Calloc((size_t)(p->nargv + 1), sizeof(PyObject *));
    if (p->argv == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < npos; i++)
        p->argv[1 + i] = Py_NewRef(args[1 + i]);
    if (nuserkw > 0) {
        p->kwnames = PyTuple_New(nuserkw);
        if (p->kwnames == NULL)
            return -1;
        Py_ssize_t u = 0;
        for (Py_ssize_t k = 0; k < nkw; k++) {
            PyObject *key = PyTuple_GET_ITEM(kwnames, k);
            if (shp_args_takes(&bench_spec, key, nargs))
                continue;
            PyTuple_SET_ITEM(p->kwnames, u, Py_NewRef(key));
            p->argv[1 + npos + u] = Py_NewRef(args[nargs + k]);
            u++;
        }
    }
    p->nargsf = (size_t)npos | PY_VECTORCALL_ARGUMENTS_OFFSET;
    p->sync.fn = sync_fn ? Py_NewRef(sync_fn) : NULL;
    return 0;

new_option_error:
    note_new_option(opt);
    return -1;
}

/* ---- the harness's own floor ---------------------------------------------- */

/* The native no-op through the same loop and sync kind as `user`'s:
 * median (ns) into *median_ns, and with `pc` the counters' totals per
 * iteration into per_iter[] (NaN where they could not be read). */
static int
noop_loop(shp_state *st, shp_call *user, shp_perfctr *pc, double *median_ns,
          double per_iter[SHP_N_COUNTERS])
{
    shp_call p;
    memset(&p, 0, sizeof(p));
    PyObject *slot[1] = {NULL};
    p.func = st->noop;
    p.argv = slot;
    p.nargsf = PY_VECTORCALL_ARGUMENTS_OFFSET;
    p.sync.kind = user->sync.kind == SHP_SYNC_NATIVE ? SHP_SYNC_NATIVE : SHP_SYNC_NONE;
    p.sync.cuda = user->sync.cuda;
    p.sync.st = st;
    shp_run run;
    memset(&run, 0, sizeof(run));
    if (shp_run_alloc(&run, SHP_OVERHEAD_ITERS, SHP_OVERHEAD_ITERS) < 0)
        return -1;
    int rc = -1;
    PyObject *name = PyUnicode_FromString("overhead");
    if (name != NULL && shp_warmup_loop(&p, SHP_OVERHEAD_WARMUP, NULL, 0, &run, name) == 0) {
        int counting = pc != NULL && shp_perfctr_start(pc) == 0;
        rc = shp_timed_loop(&p, &run, SHP_OVERHEAD_ITERS, 0, 0, NULL, 0, NULL, name);
        double v[SHP_N_COUNTERS];
        char why[256];
        counting = counting && shp_perfctr_stop(pc, v, why, sizeof why) == 0;
        for (int i = 0; pc != NULL && i < SHP_N_COUNTERS; i++)
            per_iter[i] = counting && run.n > 0 ? v[i] / (double)run.n : NAN;
        if (rc == 0)
            *median_ns = shp_percentile_inplace(run.samples, run.n, 0.5);
    }
    Py_XDECREF(name);
    shp_run_free(&run);
    return rc;
}

/* Median (ns) of a native no-op through the same loop and sync kind,
 * measured once per process and sync kind, then cached. */
static int
ensure_overhead(shp_state *st, shp_call *user, double *out_ns)
{
    int kind = user->sync.kind == SHP_SYNC_NATIVE ? 1 : 0;
    if (st->overhead_ns[kind] < 0 && noop_loop(st, user, NULL, &st->overhead_ns[kind], NULL) < 0)
        return -1;
    *out_ns = st->overhead_ns[kind];
    return 0;
}

/* The CPU's counters per iteration of that loop (the floor counters.c takes
 * out), measured once per process and sync kind with the call's own open
 * counters; NaN when they are not open or could not be read. */
static int
ensure_counter_floor(shp_state *st, shp_call *user, shp_counters *c,
                     double floor[SHP_N_COUNTERS])
{
    int kind = user->sync.kind == SHP_SYNC_NATIVE ? 1 : 0;
    double *cached = st->counter_floor[kind];
    for (int i = 0; i < SHP_N_COUNTERS; i++)
        floor[i] = NAN;
    if (!c->hw)
        return 0;
    int known = 1;
    for (int i = 0; i < SHP_N_COUNTERS; i++)
        known &= !(c->want & (1u << i)) || cached[i] >= 0;
    if (!known) {
        double median, v[SHP_N_COUNTERS];
        if (noop_loop(st, user, &c->pc, &median, v) < 0)
            return -1;
        for (int i = 0; i < SHP_N_COUNTERS; i++)
            if ((c->want & (1u << i)) && !isnan(v[i]))
                cached[i] = v[i];
    }
    for (int i = 0; i < SHP_N_COUNTERS; i++)
        floor[i] = cached[i] >= 0 ? cached[i] : NAN;
    return 0;
}

/* ---- results --------------------------------------------------------------- */

int
shp_diag_busy(shp_diag *d, const shp_preflight *pf)
{
    shp_diag_cause(d, SHP_CAUSE_BUSY);
    return shp_diag_number(d, "load_average", pf->load1) < 0 ||
           shp_diag_object(d, "cpus", PyLong_FromLong(pf->ncpu)) < 0 ||
           shp_diag_object(d, "others_cpu_share", isnan(pf->others_share)
                                                      ? Py_NewRef(Py_None)
                                                      : PyFloat_FromDouble(pf->others_share)) < 0
               ? -1 : 0;
}

/* What the result's own fields make doubtful (flags.c: stability, a busy
 * machine, launch-bound, overhead, page faults), with the numbers behind it,
 * and a clock too coarse for the median.  0 / -1. */
static int
diagnose(const shp_Stats *s, const shp_preflight *pf, double overhead_ns, shp_diag *d)
{
    unsigned m = shp_stats_cause_mask(s);
    d->causes |= m;
    d->busy_known = s->machine_busy >= 0;
    if ((m & (1u << SHP_CAUSE_BUSY)) && shp_diag_busy(d, pf) < 0)
        return -1;
    if ((m & (1u << SHP_CAUSE_OVERHEAD)) &&
        (shp_diag_number(d, "median_ms", s->median_ms) < 0 ||
         shp_diag_number(d, "overhead_ms", overhead_ns / 1e6) < 0))
        return -1;
    if ((m & (1u << SHP_CAUSE_PAGE_FAULTS)) &&
        shp_diag_number(d, "faults_per_call",
                        s->minor_faults_per_iter + s->major_faults_per_iter) < 0)
        return -1;
    if (shp_stats_diagnose_stability(s, d) < 0)
        return -1;
    double res = (double)shp_clock_resolution_ns();
    if (s->median_ms * 1e6 < SHP_COARSE_TIMER_FACTOR * res) {
        shp_diag_cause(d, SHP_CAUSE_COARSE_TIMER);
        if (shp_diag_number(d, "timer_resolution_ns", res) < 0 ||
            shp_diag_number(d, "median_ms", s->median_ms) < 0)
            return -1;
    }
    return 0;
}

/* Build the result from the completed iterations (run->n >= 1).  Takes
 * the sample buffer from `run`. */
static shp_Stats *
make_stats(shp_state *st, bench_opts *o, shp_call *p, shp_run *run, int64_t ram_bytes,
           shp_peak_method method, size_t vram_base, int vram, double overhead_ns,
           shp_extras *x)
{
    shp_Stats *s = shp_stats_alloc(st);
    if (s == NULL)
        return NULL;
    Py_ssize_t n = run->n;
    for (Py_ssize_t i = 0; i < n; i++)
        run->samples[i] /= 1e6;   /* ns -> ms, once */
    shp_summary sm;
    shp_stability stab;
    shp_summarize(run->samples, n, run->scratch, &sm);
    shp_stability_compute(run->samples, n, run->scratch, &sm, &stab);
    shp_stats_apply_summary(s, &sm);
    if (shp_extras_fill(s, run, o->num_warmup, overhead_ns, p, x) < 0)
        goto error;
    if (shp_stats_apply_stability(s, &stab) < 0)
        goto error;
    PyMem_Free(run->scratch);   /* the rerun interval takes its own copy: 16 B a sample */
    run->scratch = NULL;
    double *buf = run->samples;
    if (run->cap > n) {
        double *shrunk = PyMem_Realloc(buf, (size_t)n * sizeof(double));
        if (shrunk != NULL)
            buf = shrunk;
    }
    run->samples = NULL;
    if (shp_stats_adopt_samples(s, buf, n) < 0)
        goto error;

    s->name = o->name ? Py_NewRef(o->name) : PyUnicode_FromString("BenchmarkTarget");
    s->device = o->device ? Py_NewRef(o->device) : PyUnicode_FromString("CPU");
    s->ram_peak_method = PyUnicode_FromString(shp_peak_method_name(method));
    s->env = shp_env_dict(st, &o->pf);
    if (s->name == NULL || s->device == NULL || s->ram_peak_method == NULL || s->env == NULL)
        goto error;
    if (p->sync.have_cuda && shp_cuda_describe(st, &p->sync.cuda, s->env) < 0)
        goto error;
    s->warmup_iters = o->num_warmup;
    s->timed_iters = n;
    int64_t ram = ram_bytes - run->harness_bytes;
    s->ram_delta_mb = ram > 0 ? (double)ram / SHP_MIB : 0.0;
    if (vram && run->vram_peak_used > vram_base)
        s->vram_delta_mb = (double)(run->vram_peak_used - vram_base) / SHP_MIB;
    s->overhead_ms = overhead_ns / 1e6;
    s->target_met = run->target_met;
    /* busy: measured when either the CPU share or the load average is known */
    int known = !isnan(o->pf.others_share) || (!isnan(o->pf.load1) && o->pf.ncpu > 0);
    s->machine_busy = known ? o->pf.busy : -1;
    if (shp_stats_apply_rerun(st, s, o->run_spread) < 0)
        goto error;
    return s;
error:
    Py_DECREF(s);
    return NULL;
}

void
shp_raise_interrupted(shp_state *st, PyObject *s, const char *message)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL && value != NULL)
        PyException_SetTraceback(value, tb);
    PyObject *exc = PyObject_CallFunction(st->interrupted, "s", message);
    if (exc == NULL || PyObject_SetAttrString(exc, "stats", s) < 0) {
        Py_XDECREF(exc);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return;
    }
    PyException_SetContext(exc, value);   /* steals value */
    Py_XDECREF(type);
    Py_XDECREF(tb);
    PyErr_SetObject(st->interrupted, exc);
    Py_DECREF(exc);
}

PyObject *
shp_benchmark_callable(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames)
{
    shp_state *st = PyModule_GetState(module);
    bench_opts o;
    shp_call p;
    shp_run run;
    shp_hwm_window win;
    shp_progress pl;
    memset(&o, 0, sizeof(o));
    memset(&p, 0, sizeof(p));
    memset(&run, 0, sizeof(run));
    memset(&pl, 0, sizeof(pl));
    int window_open = 0, gc_held = 0, vram = 0;
    size_t vram_base = 0;
    double overhead_ns = 0;
    shp_extras x;
    shp_diag diag = {0, 0, NULL};
    shp_counters ctr;
    double floor[SHP_N_COUNTERS];
    memset(&ctr, 0, sizeof(ctr));
    PyObject *result = NULL, *name = NULL;

    if (parse_call(args, nargs, kwnames, &o, &p) < 0 ||
        shp_sync_resolve(st, &o.dev, o.track_vram, &p.sync, &diag) < 0)
        goto done;
    /* an async function: every call is awaited on the run's loop (aio.c); a
     * callable that only returns an awaitable is found at its first call */
    int is_async = shp_aio_is_async(p.func);
    if (is_async < 0 || (is_async && shp_aio_open(&p) < 0))
        goto done;
    if (o.has_stream && !p.sync.have_cuda) {
        /* known once the sync is resolved: our own CudaSync as sync_fn is native */
        PyErr_SetString(PyExc_ValueError, FN ": stream= needs a CUDA device "
                                          "(device='cuda...') synced by the harness");
        note_new_option("stream");
        goto done;
    }
    if (shp_extras_setup(st, &p, o.cache_cold, (shp_CUstream)o.stream, &diag) < 0)
        goto done;
    shp_preflight_read(st, &o.pf);   /* before our own warm-up loads the CPU */
    if (ensure_overhead(st, &p, &overhead_ns) < 0)
        goto done;
    shp_counters_setup(st, &ctr, o.counters);
    if (ensure_counter_floor(st, &p, &ctr, floor) < 0)
        goto done;
    name = o.name ? Py_NewRef(o.name) : PyUnicode_FromString("BenchmarkTarget");
    if (name == NULL)
        goto done;

    int adaptive = o.target_rel_ci > 0;
    double max_time_s = o.max_time_s > 0 ? o.max_time_s : (adaptive ? SHP_ADAPTIVE_DEFAULT_TIME_S : 0);
    Py_ssize_t max_iters = adaptive ? (o.num_iters > SHP_ADAPTIVE_MAX_SAMPLES ? o.num_iters
                                                                               : SHP_ADAPTIVE_MAX_SAMPLES)
                                    : o.num_iters;
    /* whole for a short run; growing for a long one (loop.c) */
    Py_ssize_t cap = max_iters <= SHP_WHOLE_SAMPLES ? max_iters : SHP_INITIAL_SAMPLES;
    if (shp_run_alloc(&run, cap, max_iters) < 0 ||
        shp_run_alloc_extras(&run, o.num_warmup, p.sync.gt.events) < 0)
        goto done;
    if (adaptive)
        run.target_met = 0;
    /* the eviction buffer is resident before the RAM baseline is taken */
    if (o.cache_cold) {
        if (shp_llc_evictor_init(&p.llc) < 0)
            goto done;
        p.cold = 1;
    }

    /* 1. a clean heap, before the baseline: cyclic garbage of the caller's
     * freed inside the window would lower the RSS the callable's peak is
     * measured from (a 100 MiB peak read 0.0 MB), and a collection owed by
     * the set-up must not land in the warm-up or the timed loop */
    if (shp_full_collect() < 0)
        goto done;
    /* 2. baseline */
    shp_peak_method method = SHP_PEAK_OFF;
    if (o.track_ram) {
        shp_window_open(&win);
        window_open = 1;
    }
    if (o.track_vram && p.sync.have_cuda) {
        size_t free_b, total_b;
        if (shp_cuda_meminfo_nogil(st, &p.sync.cuda, &free_b, &total_b) == 0 && total_b >= free_b) {
            vram = 1;
            vram_base = total_b - free_b;
            run.vram_peak_used = vram_base;
        }
    }
    shp_extras_watch_begin(st, &p);   /* NVML's first reading */
    /* 3. warm-up */
    if (shp_warmup_loop(&p, o.num_warmup, window_open ? &win : NULL, vram, &run, name) < 0) {
        note_near_option(&p);
        goto done;
    }
    /* 4. the timed loop, (optionally) without the collector */
    if (o.disable_gc) {
        if (shp_gc_hold() < 0)
            goto done;
        gc_held = 1;
    }
    pl.mode = o.progress;
    pl.name = name;
    /* seconds -> ns without overflow: ~292 years and beyond mean "no limit" */
    int64_t max_time_ns = max_time_s * 1e9 >= 9e18 ? INT64_MAX : (int64_t)(max_time_s * 1e9);
    shp_rusage ru0, ru1;   /* read around the loop, never inside a timed region */
    shp_rusage_thread(&ru0);
    shp_counters_start(&ctr);   /* counters too: outside every timed region */
    int loop_rc = shp_timed_loop(&p, &run, o.num_iters, o.target_rel_ci, max_time_ns,
                             window_open ? &win : NULL, vram, &pl, name);
    if (shp_counters_stop(st, &ctr) < 0)
        loop_rc = -1;   /* the loop's own exception, if any, is kept */
    shp_rusage_thread(&ru1);
    if (gc_held) {
        shp_gc_release();
        gc_held = 0;
    }
    if (pl.drawn && pl.mode != 0 &&   /* not to a stream that failed */
        shp_progress_close(&pl, run.n, adaptive ? 0 : o.num_iters,
                           shp_now_ns() - run.start_ns) < 0)
        loop_rc = -1;   /* a Ctrl-C in the closing line: as if it came in the loop */
    int interrupted = loop_rc < 0 && run.n > 0 && PyErr_ExceptionMatches(PyExc_KeyboardInterrupt);
    if (loop_rc < 0 && !interrupted) {
        note_near_option(&p);
        goto done;
    }

    if (p.nv_on)
        shp_nvml_watch_end(st, &p.nv);
    int64_t ram_bytes = 0;
    if (window_open) {
        method = win.method;
        ram_bytes = shp_window_close(&win);
        window_open = 0;
    }
    double loop_ns = NAN;   /* what the event loop costs a call, when calls were awaited */
    if (!interrupted && p.drive != NULL && shp_aio_overhead(&p, SHP_AIO_OVERHEAD_RUNS, &loop_ns) < 0)
        goto done;
    if (interrupted) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        shp_Stats *s = make_stats(st, &o, &p, &run, ram_bytes, method, vram_base, vram, overhead_ns,
                                  &x);
        if (s == NULL) {
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(tb);
            goto done;
        }
        PyErr_Restore(type, value, tb);
        shp_raise_interrupted(st, (PyObject *)s,
                              "benchmark interrupted; .stats holds the iterations completed so far");
        Py_DECREF(s);
        goto done;
    }
    Py_ssize_t timed = run.n;
    shp_Stats *s = make_stats(st, &o, &p, &run, ram_bytes, method, vram_base, vram, overhead_ns,
                              &x);
    if (s == NULL)
        goto done;
    s->loop_overhead_ms = loop_ns / 1e6;
    if (ru0.ok && ru1.ok && timed > 0) {
        double n = (double)timed;
        s->minor_faults_per_iter = (double)(ru1.minflt - ru0.minflt) / n;
        s->major_faults_per_iter = (double)(ru1.majflt - ru0.majflt) / n;
        s->vol_ctx_switches_per_iter = (double)(ru1.nvcsw - ru0.nvcsw) / n;
        s->invol_ctx_switches_per_iter = (double)(ru1.nivcsw - ru0.nivcsw) / n;
    }
    if (shp_counters_fill(s, &ctr, timed, floor, &diag) < 0) {
        Py_DECREF(s);
        goto done;
    }
    /* one warning for the call, whatever it found (warn.c) */
    if (diagnose(s, &o.pf, overhead_ns, &diag) < 0 || shp_extras_diagnose(s, &x, &p, &diag) < 0 ||
        shp_diag_emit(st, &diag, s->name, (PyObject *)s) < 0) {
        Py_DECREF(s);
        goto done;
    }
    result = (PyObject *)s;
done:
    shp_counters_close(&ctr);
    shp_diag_clear(&diag);
    if (gc_held)
        shp_gc_release();
    if (window_open)
        shp_window_close(&win);
    shp_run_free(&run);
    shp_call_clear(&p);
    Py_XDECREF(name);
    return result;
}
