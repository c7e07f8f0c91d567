/*
 * load.c -- benchmark_load: requests that arrive on a schedule fixed in
 * advance, served in arrival order by threads of our own.
 *
 * The schedule (queueing.c) is drawn before the run: Poisson arrivals at
 * the target rate, or one every 1 / qps; 'closed' issues each worker's next
 * request when its last one completed (MLPerf's SingleStream with one
 * worker), 'offline' has every request present at the start.  Each request's
 * latency runs from its intended arrival to its completion, so time spent
 * waiting behind a slow call counts (no coordinated omission).
 *
 * `workers` threads serve the requests.  A free worker claims the next
 * request under the monitor's lock, so requests start in arrival order and
 * each goes to the first worker free (a FCFS queue with `workers` servers);
 * when its arrival is still to come, the worker waits for it without the GIL
 * (a timed wait to SHP_LOAD_SPIN_NS before, then a spin), then takes the GIL
 * and makes the call: the call, the release of its result, the sync --
 * sync.c's, as benchmark_callable's -- and the completion time read after
 * it.  A request it could have started earlier than it did (the wake-up,
 * the hand-over, the GIL) counts as the harness's lag, measured per request.
 *
 * The calling thread holds no GIL while the workers run: it waits on the
 * monitor and, every SHP_LOAD_POLL_NS, takes the GIL to run the signal
 * handlers -- at a moment no worker is in a call, when one comes within
 * SHP_LOAD_QUIET_NS, so that the check does not stall a call that holds the
 * GIL (no call starts while the handlers run).  A Ctrl-C stops the run: the
 * workers finish the call they are in and are joined, and
 * BenchmarkInterrupted carries what was measured, whenever in the call the
 * Ctrl-C came (the handlers run again after the join and after the result
 * is made, before Python code could raise it and lose the result).  An
 * exception in a worker stops the run the same way and then propagates,
 * unchanged but for a note naming the request (and .stats when it has no
 * attribute of that name).  No thread outlives the call.
 */
#include "run/run.h"

#include <math.h>
#include <string.h>

#define FN "benchmark_load()"

typedef enum { ARR_POISSON, ARR_UNIFORM, ARR_CLOSED, ARR_OFFLINE, N_ARRIVALS } arrival_kind;
static const char *const arrival_names[N_ARRIVALS] = {"poisson", "uniform", "closed", "offline"};

/* The validated options of one call. */
typedef struct {
    PyObject *name, *device;          /* borrowed */
    double qps;                       /* NaN: none ('closed', 'offline') */
    double duration_s;
    int64_t window_ns;
    Py_ssize_t workers, num_warmup, max_queue;   /* max_queue -1: none */
    arrival_kind arrival;
    uint64_t seed;
    shp_device dev;
    shp_preflight pf;
} load_opts;

/* One request.  Fields written under the lock when claimed: arrival, take,
 * dropped; by its worker alone afterwards (read once the workers are
 * joined): lag, start, end, outcome. */
enum { OUT_NONE = 0, OUT_DONE = 1, OUT_FAILED = 2 };
typedef struct {
    int64_t arrival;    /* intended, ns from t0 */
    int64_t take;       /* when it left the queue: max(its arrival, when claimed) */
    int64_t lag;        /* start - max(arrival, its worker's previous completion) */
    int64_t start, end; /* the call began; its sync returned */
    unsigned char dropped, outcome;
} request;

#define CHUNK_BITS 16
#define CHUNK ((Py_ssize_t)1 << CHUNK_BITS)

/* The state the workers share; the lock guards every field but the
 * requests' own, `error*` (the GIL guards those) and what is fixed before
 * the workers start. */
typedef struct {
    shp_monitor *m;
    PyInterpreterState *interp;
    shp_call *call;
    arrival_kind arrival;
    const int64_t *sched;             /* poisson / uniform: arrival offsets (ns) */
    Py_ssize_t nsched, max_requests, max_queue;
    int64_t t0, window_ns, drain_ns;
    request **chunks;                 /* max_requests / CHUNK + 1 pointers */
    Py_ssize_t next;                  /* the next request to decide */
    Py_ssize_t taken, dropped;        /* claimed to be served; refused by max_queue */
    Py_ssize_t h, taken_before_h;     /* max_queue: requests before h left the queue */
    int go, stop, oom;
    int cut;                          /* stopped before its end (set once joined) */
    Py_ssize_t ready, live, start_failed;
    Py_ssize_t calling;               /* workers between taking a request and its end */
    int want_quiet;                   /* the calling thread waits for calling == 0 */
    int hold;                         /* no call starts: the signal handlers are due */
    /* the first exception of a worker (GIL), and where it came from */
    PyObject *err_type, *err_value, *err_tb;
    Py_ssize_t err_request;
    int err_in_sync;
} load_run;

typedef struct {
    load_run *r;
    shp_thread *thread;
} worker;

/* ---- options --------------------------------------------------------------- */

enum {
    OPT_FUNC, OPT_QPS, OPT_DURATION, OPT_WORKERS, OPT_ARRIVAL, OPT_NUM_WARMUP, OPT_SEED,
    OPT_MAX_QUEUE, OPT_NAME, OPT_DEVICE, OPT_SYNC_FN, OPT_NUM_ITERS, N_OPTS
};
static const char *const opt_names[N_OPTS] = {
    "func", "qps", "duration_s", "workers", "arrival", "num_warmup", "seed", "max_queue",
    "name", "device", "sync_fn", "num_iters",
};
static const shp_argspec load_spec = {"benchmark_load", opt_names, N_OPTS, 1, 1, 1};

/* A positive finite real into *out, or -1 with the error. */
static int
positive_real(PyObject *v, const char *param, const char *what, double *out)
{
    if (!shp_arg_is_real(v))
        return shp_arg_type_error(FN, param, "a real number", v);
    double d = PyFloat_AsDouble(v);
    if (d == -1.0 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError))
            return -1;
        /* an int beyond a float: its hundreds of digits would say nothing more */
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, FN ": %s must be %s, got a number too large for a "
                     "float", param, what);
        return -1;
    }
    if (!(d > 0.0) || !isfinite(d))
        return shp_arg_value_error(FN, param, what, v);
    *out = d;
    return 0;
}

static uint64_t
fresh_seed(void)
{
    /* a seed of its own, kept on the result so that the run can be repeated */
    uint64_t x = (uint64_t)shp_now_ns() ^ ((uint64_t)(uintptr_t)&x << 17);
    return shp_splitmix64(&x) >> 1;   /* 63 bits: LoadStats.seed is a count */
}

static int
parse_call(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, load_opts *o,
           shp_call *p)
{
    PyObject *v[N_OPTS];
    if (shp_args_parse(&load_spec, args, nargs, kwnames, v) < 0)
        return -1;
    if (v[OPT_NUM_ITERS] != NULL) {
        PyErr_SetString(PyExc_TypeError,
                        FN ": num_iters does not apply: duration_s and qps set the number of "
                        "requests (bind a num_iters of func's with functools.partial)");
        return -1;
    }
    PyObject *func = NULL, *sync_fn = NULL, *arrival = NULL;
    if (shp_arg_callable(v[OPT_FUNC], FN, "func", 0, &func) < 0)
        return -1;
    if ((v[OPT_NAME] && shp_arg_str(v[OPT_NAME], FN, "name", 0, &o->name) < 0) ||
        (v[OPT_DEVICE] && shp_arg_str(v[OPT_DEVICE], FN, "device", 0, &o->device) < 0))
        return -1;
    o->arrival = ARR_POISSON;
    if (v[OPT_ARRIVAL] != NULL) {
        if (shp_arg_str(v[OPT_ARRIVAL], FN, "arrival", 0, &arrival) < 0)
            return -1;
        int k = 0;
        while (k < N_ARRIVALS && PyUnicode_CompareWithASCIIString(arrival, arrival_names[k]) != 0)
            k++;
        if (k == N_ARRIVALS)
            return shp_arg_value_error(FN, "arrival",
                                       "'poisson', 'uniform', 'closed' or 'offline'", arrival);
        o->arrival = (arrival_kind)k;
    }
    int timed = o->arrival == ARR_POISSON || o->arrival == ARR_UNIFORM;
    o->qps = NAN;
    PyObject *qps = v[OPT_QPS] != NULL ? v[OPT_QPS] : Py_None;
    if (timed && qps == Py_None) {
        PyErr_Format(PyExc_TypeError, FN ": qps= is required with arrival='%s' (the target "
                     "rate, requests per second)", arrival_names[o->arrival]);
        return -1;
    }
    if (!timed && qps != Py_None) {
        PyErr_Format(PyExc_ValueError, FN ": qps does not apply to arrival='%s' (requests "
                     "come as fast as they are served); leave it None",
                     arrival_names[o->arrival]);
        return -1;
    }
    if (timed && positive_real(qps, "qps", "a positive number of requests per second",
                               &o->qps) < 0)
        return -1;
    o->duration_s = SHP_LOAD_DEFAULT_DURATION_S;
    if (v[OPT_DURATION] != NULL &&
        positive_real(v[OPT_DURATION], "duration_s", "a positive number of seconds",
                      &o->duration_s) < 0)
        return -1;
    if (o->duration_s > SHP_LOAD_MAX_DURATION_S)
        return shp_arg_value_error(FN, "duration_s", "at most 1,000,000 seconds",
                                   v[OPT_DURATION]);
    o->window_ns = (int64_t)llround(o->duration_s * 1e9);
    if (o->window_ns < 1)
        return shp_arg_value_error(FN, "duration_s", "at least a nanosecond", v[OPT_DURATION]);
    double asked = o->qps * o->duration_s;
    if (timed && asked > (double)SHP_LOAD_MAX_REQUESTS) {
        /* (PyErr_Format has no %f or %g; a count beyond 1e15 reads "about 1e+291") */
        char count[64];
        if (asked < 1e15) {
            PyOS_snprintf(count, sizeof count, "%lld", (long long)asked);
        }
        else {
            char *g = PyOS_double_to_string(asked, 'g', 3, 0, NULL);
            if (g == NULL)
                return -1;
            PyOS_snprintf(count, sizeof count, "about %s", g);
            PyMem_Free(g);
        }
        PyErr_Format(PyExc_ValueError, FN ": qps * duration_s asks for %s requests; at most "
                     "%zd fit in one run (lower qps or duration_s)", count,
                     (Py_ssize_t)SHP_LOAD_MAX_REQUESTS);
        return -1;
    }
    o->workers = 1;
    o->num_warmup = SHP_DEFAULT_NUM_WARMUP;
    o->max_queue = -1;
    if ((v[OPT_WORKERS] && shp_arg_count(v[OPT_WORKERS], FN, "workers", 1, SHP_LOAD_MAX_WORKERS,
                                          &o->workers) < 0) ||
        (v[OPT_NUM_WARMUP] && shp_arg_count(v[OPT_NUM_WARMUP], FN, "num_warmup", 0, -1,
                                             &o->num_warmup) < 0))
        return -1;
    if (v[OPT_MAX_QUEUE] != NULL && v[OPT_MAX_QUEUE] != Py_None) {
        if (shp_arg_count(v[OPT_MAX_QUEUE], FN, "max_queue", 0, -1, &o->max_queue) < 0)
            return -1;
        if (!timed) {
            PyErr_Format(PyExc_ValueError, FN ": max_queue does not apply to arrival='%s' "
                         "(no request waits for an arrival slot)", arrival_names[o->arrival]);
            return -1;
        }
    }
    if (v[OPT_SEED] != NULL && v[OPT_SEED] != Py_None) {
        Py_ssize_t s;
        if (shp_arg_count(v[OPT_SEED], FN, "seed", 0, -1, &s) < 0)
            return -1;
        o->seed = (uint64_t)s;
    }
    else {
        o->seed = fresh_seed();
    }
    if (v[OPT_SYNC_FN] && shp_arg_callable(v[OPT_SYNC_FN], FN, "sync_fn", 1, &sync_fn) < 0)
        return -1;
    o->dev.kind = SHP_DEV_CPU;
    o->dev.ordinal = -1;
    if (o->device != NULL && shp_device_parse(o->device, &o->dev) < 0)
        return -1;

    /* the call: positional user arguments, then keyword values */
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, nuserkw = 0;
    for (Py_ssize_t k = 0; k < nkw; k++)
        nuserkw += !shp_args_takes(&load_spec, PyTuple_GET_ITEM(kwnames, k), nargs);
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
            if (shp_args_takes(&load_spec, key, nargs))
                continue;
            PyTuple_SET_ITEM(p->kwnames, u, Py_NewRef(key));
            p->argv[1 + npos + u] = Py_NewRef(args[nargs + k]);
            u++;
        }
    }
    p->nargsf = (size_t)npos | PY_VECTORCALL_ARGUMENTS_OFFSET;
    p->sync.fn = sync_fn ? Py_NewRef(sync_fn) : NULL;
    return 0;
}

/* ---- claiming a request (the lock held) -------------------------------------- */

/* The record of request i, its chunk made on first use (PyMem_Raw: no GIL
 * here); NULL when memory ran out. */
static request *
record_at(load_run *r, Py_ssize_t i)
{
    request **c = &r->chunks[i >> CHUNK_BITS];
    if (*c == NULL)
        *c = PyMem_RawCalloc((size_t)CHUNK, sizeof(request));
    return *c != NULL ? &(*c)[i & (CHUNK - 1)] : NULL;
}

/* Requests claimed before request i (arrival a_abs) that were still waiting
 * at a_abs: claims go in arrival order and their take times never go back,
 * so the ones that had left the queue by then are a prefix, found by a
 * pointer that only moves forward. */
static Py_ssize_t
waiting_at(load_run *r, Py_ssize_t i, int64_t a_abs)
{
    while (r->h < i) {
        request *q = record_at(r, r->h);   /* made when it was claimed */
        if (!q->dropped) {
            if (q->take > a_abs)
                break;
            r->taken_before_h++;
        }
        r->h++;
    }
    return r->taken - r->taken_before_h;
}

/* The next request for a worker free since free_ns, at `now`: its index and
 * record, or -1 when there is none to serve (the schedule is done, the
 * window and its drain time are over, the run stops).  Requests refused by
 * max_queue are decided on the way, as at their arrival. */
static Py_ssize_t
claim(load_run *r, int64_t now, int64_t free_ns, request **out)
{
    for (;;) {
        Py_ssize_t i = r->next;
        int64_t a;
        if (r->stop || i >= r->max_requests)
            return -1;
        switch (r->arrival) {
        case ARR_POISSON:
        case ARR_UNIFORM:
            a = r->sched[i];
            /* an overloaded run serves its backlog for drain_ns after the window */
            if (now - r->t0 > r->window_ns + r->drain_ns)
                return -1;
            break;
        case ARR_CLOSED:
            a = free_ns - r->t0;   /* the next query when the last one completed */
            if (a >= r->window_ns)
                return -1;
            break;
        default:
            a = 0;                 /* offline: every query present from the start */
            if (now - r->t0 >= r->window_ns)
                return -1;
            break;
        }
        request *q = record_at(r, i);
        if (q == NULL) {
            r->oom = 1;
            r->stop = 1;
            return -1;
        }
        r->next = i + 1;
        q->arrival = a;
        int64_t a_abs = r->t0 + a;
        if (r->max_queue >= 0 && a_abs < now && waiting_at(r, i, a_abs) >= r->max_queue) {
            /* it arrived with every worker busy (none free to claim it) and
             * max_queue requests already waiting: refused on arrival */
            q->dropped = 1;
            r->dropped++;
            continue;
        }
        q->take = a_abs > now ? a_abs : now;
        r->taken++;
        *out = q;
        return i;
    }
}

/* ---- the workers --------------------------------------------------------------- */

/* Keep the first exception a worker raised (the GIL held), with its
 * traceback; drop later ones. */
static void
keep_error(load_run *r, Py_ssize_t i, int in_sync)
{
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyErr_NormalizeException(&t, &v, &tb);
    if (tb != NULL && v != NULL)
        PyException_SetTraceback(v, tb);
    if (r->err_type == NULL) {
        r->err_type = t;
        r->err_value = v;
        r->err_tb = tb;
        r->err_request = i;
        r->err_in_sync = in_sync;
        return;
    }
    Py_XDECREF(t);
    Py_XDECREF(v);
    Py_XDECREF(tb);
}

/* One request's call (the GIL held): the call, its result released, the
 * sync; *end read after the sync.  0, or -1 with the exception kept. */
static int
serve(load_run *r, Py_ssize_t i, int64_t *end)
{
    shp_call *p = r->call;
    PyObject *res = PyObject_Vectorcall(p->func, p->argv + 1, p->nargsf, p->kwnames);
    if (res == NULL) {
        *end = shp_now_ns();
        keep_error(r, i, 0);
        return -1;
    }
    Py_DECREF(res);
    if (shp_sync_call(&p->sync, end) < 0) {
        keep_error(r, i, 1);
        return -1;
    }
    return 0;
}

static void
stop_run(load_run *r)
{
    shp_monitor_lock(r->m);
    r->stop = 1;
    shp_monitor_notify_all(r->m);
    shp_monitor_unlock(r->m);
}

static void
worker_main(void *arg)
{
    worker *w = arg;
    load_run *r = w->r;
    shp_thread_precise_timers();
    PyThreadState *ts = PyThreadState_New(r->interp);
    shp_monitor_lock(r->m);
    if (ts == NULL) {
        r->start_failed++;
        r->live--;
        shp_monitor_notify_all(r->m);
        shp_monitor_unlock(r->m);
        return;
    }
    r->ready++;
    shp_monitor_notify_all(r->m);
    while (!r->go && !r->stop)
        shp_monitor_wait_until(r->m, INT64_MAX);
    int64_t free_ns = r->t0;
    for (;;) {
        request *q;
        Py_ssize_t i = claim(r, shp_now_ns(), free_ns, &q);
        if (i < 0)
            break;
        int64_t due = r->t0 + q->arrival;
        /* wait for the arrival, then while the calling thread runs the signal
         * handlers: the lock is released while waiting */
        while (!r->stop && shp_now_ns() < due - SHP_LOAD_SPIN_NS)
            shp_monitor_wait_until(r->m, due - SHP_LOAD_SPIN_NS);
        while (!r->stop && r->hold)
            shp_monitor_wait_until(r->m, INT64_MAX);
        if (r->stop)
            break;   /* claimed, never started: unserved */
        r->calling++;
        shp_monitor_unlock(r->m);
        shp_spin_until(due);
        int64_t start = shp_now_ns(), end = 0;
        q->lag = start - (due > free_ns ? due : free_ns);
        q->start = start;
        PyEval_RestoreThread(ts);
        int rc = serve(r, i, &end);
        (void)PyEval_SaveThread();
        q->end = end;
        q->outcome = rc < 0 ? OUT_FAILED : OUT_DONE;
        free_ns = end;
        shp_monitor_lock(r->m);
        r->calling--;
        if (rc < 0)
            r->stop = 1;
        /* the last call in flight ended while the calling thread waits for that: the
         * moment is kept for it (a worker with a backlog would otherwise claim the next
         * request before the lock is ever free, and no quiet moment would be seen) */
        if (r->want_quiet && r->calling == 0)
            r->hold = 1;
        if (rc < 0 || r->hold)
            shp_monitor_notify_all(r->m);
    }
    shp_monitor_unlock(r->m);
    PyEval_RestoreThread(ts);
    PyThreadState_Clear(ts);
    PyThreadState_DeleteCurrent();   /* and the GIL released */
    shp_monitor_lock(r->m);
    r->live--;
    shp_monitor_notify_all(r->m);
    shp_monitor_unlock(r->m);
}

/* ---- the run --------------------------------------------------------------- */

/* Take the exception now set (a signal handler's) as what interrupted the
 * call: the first one is kept in *t, *v, *tb with *interrupted set; a later
 * KeyboardInterrupt (a second Ctrl-C while the workers finish their calls,
 * or while the result is made) is the same request and is dropped; a later
 * exception of another kind replaces the kept one, which becomes its
 * context.  No exception is set on return. */
static void
keep_interrupt(int *interrupted, PyObject **t, PyObject **v, PyObject **tb)
{
    if (!*interrupted) {
        *interrupted = 1;
        PyErr_Fetch(t, v, tb);
        return;
    }
    if (PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) {
        PyErr_Clear();
        return;
    }
    PyObject *t2, *v2, *tb2;
    PyErr_Fetch(&t2, &v2, &tb2);
    PyErr_NormalizeException(&t2, &v2, &tb2);
    PyErr_NormalizeException(t, v, tb);
    if (v2 != NULL && *v != NULL)
        PyException_SetContext(v2, Py_NewRef(*v));
    Py_XDECREF(*t);
    Py_XDECREF(*v);
    Py_XDECREF(*tb);
    *t = t2;
    *v = v2;
    *tb = tb2;
}

/* Run the signal handlers (the GIL held, on the calling thread); what one
 * raises stops the run and is kept by keep_interrupt. */
static void
run_handlers(load_run *r, int *interrupted, PyObject **t, PyObject **v, PyObject **tb)
{
    if (PyErr_CheckSignals() == 0)
        return;
    keep_interrupt(interrupted, t, v, tb);
    stop_run(r);   /* no worker waits for the GIL while holding the lock */
}

/* Start the workers, open the schedule, wait (signals checked every
 * SHP_LOAD_POLL_NS with the GIL, and once more after the join: a signal
 * pending at the end is this run's, not the result's), join.  Returns 0 with
 * the run done, or -1 with an exception: a worker that did not start, or what
 * a signal handler raised (the run stopped there, and *interrupted is set). */
static int
drive(load_run *r, worker *ws, Py_ssize_t nworkers, int *interrupted)
{
    Py_ssize_t started = 0;
    int failed = 0;
    PyObject *t = NULL, *v = NULL, *tb = NULL;
    *interrupted = 0;
    r->live = nworkers;
    Py_BEGIN_ALLOW_THREADS
    for (; started < nworkers; started++) {
        ws[started].r = r;
        ws[started].thread = shp_thread_start(worker_main, &ws[started]);
        if (ws[started].thread == NULL)
            break;
    }
    shp_monitor_lock(r->m);
    r->live -= nworkers - started;
    while (r->ready + r->start_failed < started)
        shp_monitor_wait_until(r->m, INT64_MAX);
    failed = started < nworkers || r->start_failed > 0;
    if (failed)
        r->stop = 1;
    /* every worker waits at the gate: the schedule opens a little later */
    r->t0 = shp_now_ns() + SHP_LOAD_LEAD_NS;
    r->go = 1;
    shp_monitor_notify_all(r->m);
    shp_monitor_unlock(r->m);
    Py_END_ALLOW_THREADS
    for (;;) {
        int done;
        Py_BEGIN_ALLOW_THREADS
        shp_monitor_lock(r->m);
        int64_t until = shp_now_ns() + SHP_LOAD_POLL_NS;
        while (r->live > 0 && shp_now_ns() < until)
            shp_monitor_wait_until(r->m, until);
        /* the GIL is taken when no worker is in a call, if one comes soon: taking it
         * from a call that holds it would stall that call for a switch interval.
         * Past SHP_LOAD_QUIET_NS it is taken anyway, so that a pending Ctrl-C
         * waits at most a poll, the quiet wait and a switch interval (or the end
         * of a C call that holds the GIL). */
        r->want_quiet = 1;
        until = shp_now_ns() + SHP_LOAD_QUIET_NS;
        while (r->live > 0 && r->calling > 0 && !r->hold && shp_now_ns() < until)
            shp_monitor_wait_until(r->m, until);
        r->want_quiet = 0;
        /* no new call starts while the handlers run */
        r->hold = r->live > 0;
        done = r->live == 0;
        shp_monitor_unlock(r->m);
        Py_END_ALLOW_THREADS
        if (done)
            break;
        /* Ctrl-C: its handler runs here, on the calling thread.  The run
         * stops; the workers finish the call they are in, and the checks go
         * on until they have (a second Ctrl-C meanwhile changes nothing). */
        run_handlers(r, interrupted, &t, &v, &tb);
        shp_monitor_lock(r->m);   /* no worker waits for the GIL while holding the lock */
        r->hold = 0;
        shp_monitor_notify_all(r->m);
        shp_monitor_unlock(r->m);
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < started; k++)
        shp_thread_join(ws[k].thread);
    Py_END_ALLOW_THREADS
    r->cut = r->stop;
    /* a signal that came since the last check: before any Python code runs for
     * the result, or its handler would raise there and the result be lost */
    run_handlers(r, interrupted, &t, &v, &tb);
    if (*interrupted) {
        PyErr_Restore(t, v, tb);
        return -1;
    }
    if (failed) {
        PyErr_Format(PyExc_RuntimeError, FN ": could not start its %zd worker threads (%zd "
                     "started)", nworkers, started - r->start_failed);
        return -1;
    }
    return 0;
}

/* ---- the result ---------------------------------------------------------------- */

static int
cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The LoadStats of what the run measured (the GIL held; the workers joined).
 * `judged`: the run went to its end, so its backlog says something. */
static shp_LoadStats *
make_result(shp_state *st, const load_opts *o, const load_run *r, PyObject *name, int judged)
{
    Py_ssize_t decided = r->next, completed = 0, failed = 0;
    int64_t last_end = r->t0;
    for (Py_ssize_t i = 0; i < decided; i++) {
        const request *q = &r->chunks[i >> CHUNK_BITS][i & (CHUNK - 1)];
        completed += q->outcome == OUT_DONE;
        failed += q->outcome == OUT_FAILED;
        if (q->outcome == OUT_DONE && q->end > last_end)
            last_end = q->end;
    }
    shp_LoadStats *s = shp_load_alloc(st);
    double *arr[SHP_LA_N] = {NULL};
    int64_t *ends = NULL, *drops = NULL;
    if (s == NULL)
        return NULL;
    for (int k = 0; k < SHP_LA_N && completed > 0; k++)
        if ((arr[k] = PyMem_Malloc((size_t)completed * sizeof(double))) == NULL)
            goto nomem;
    ends = PyMem_Malloc((size_t)(completed > 0 ? completed : 1) * sizeof(int64_t));
    drops = PyMem_Malloc((size_t)(r->dropped > 0 ? r->dropped : 1) * sizeof(int64_t));
    if (ends == NULL || drops == NULL)
        goto nomem;
    Py_ssize_t c = 0, d = 0;
    for (Py_ssize_t i = 0; i < decided; i++) {
        const request *q = &r->chunks[i >> CHUNK_BITS][i & (CHUNK - 1)];
        if (q->dropped)
            drops[d++] = q->arrival;
        if (q->outcome != OUT_DONE)
            continue;
        int64_t due = r->t0 + q->arrival;
        arr[SHP_LA_ARRIVALS][c] = (double)q->arrival / 1e6;
        arr[SHP_LA_LATENCIES][c] = (double)(q->end - due) / 1e6;
        arr[SHP_LA_SERVICE][c] = (double)(q->end - q->start) / 1e6;
        arr[SHP_LA_LAG][c] = (double)q->lag / 1e6;
        ends[c] = q->end - r->t0;
        c++;
    }
    for (int k = 0; k < SHP_LA_N; k++) {
        int rc = shp_load_adopt(s, k, arr[k], completed);
        arr[k] = NULL;   /* taken (freed on failure) */
        if (rc < 0)
            goto error;
    }
    int timed = o->arrival == ARR_POISSON || o->arrival == ARR_UNIFORM;
    s->requests = timed ? r->nsched : decided - r->dropped;
    s->completed = completed;
    s->dropped = r->dropped;
    s->unserved = s->requests - completed - r->dropped - failed;
    if (s->unserved < 0)
        s->unserved = 0;
    s->offered_qps = o->qps;
    s->duration_s = o->duration_s;
    s->arrival_qps = o->arrival == ARR_OFFLINE ? NAN : (double)s->requests / o->duration_s;
    s->achieved_qps = completed > 0 && last_end > r->t0
                          ? (double)completed / ((double)(last_end - r->t0) / 1e9) : NAN;
    s->workers = o->workers;
    s->warmup_iters = o->num_warmup;
    s->seed = (Py_ssize_t)o->seed;
    s->max_queue = o->max_queue;
    if (timed && judged) {
        shp_backlog b;
        qsort(ends, (size_t)completed, sizeof(int64_t), cmp_i64);
        shp_load_backlog(r->sched, r->nsched, ends, completed, drops, d, o->window_ns, &b);
        s->backlog_growth_qps = b.growth_per_s;
        s->backlog_end = b.backlog_end;
        s->overloaded = b.overloaded;
    }
    PyMem_Free(ends);
    PyMem_Free(drops);
    ends = drops = NULL;
    s->name = Py_NewRef(name);
    s->device = o->device ? Py_NewRef(o->device) : PyUnicode_FromString("CPU");
    s->arrival = PyUnicode_FromString(arrival_names[o->arrival]);
    s->env = shp_env_dict(st, &o->pf);
    if (s->device == NULL || s->arrival == NULL || s->env == NULL)
        goto error;
    if (r->call->sync.have_cuda && shp_cuda_describe(st, &r->call->sync.cuda, s->env) < 0)
        goto error;
    int known = !isnan(o->pf.others_share) || (!isnan(o->pf.load1) && o->pf.ncpu > 0);
    s->machine_busy = known ? o->pf.busy : -1;
    if (shp_load_summarize(s) < 0)
        goto error;
    return s;
nomem:
    PyErr_NoMemory();
error:
    for (int k = 0; k < SHP_LA_N; k++)
        PyMem_Free(arr[k]);
    PyMem_Free(ends);
    PyMem_Free(drops);
    Py_DECREF(s);
    return NULL;
}

/* The worker's exception set again, with a note of where it came from and
 * the result as its .stats (when it has no attribute of that name). */
static void
raise_worker_error(load_run *r, const load_opts *o, PyObject *name, shp_LoadStats *s)
{
    PyErr_Restore(r->err_type, r->err_value, r->err_tb);
    r->err_type = r->err_value = r->err_tb = NULL;
    const char *what = r->err_in_sync ? "sync_fn" : "func";
    int timed = o->arrival == ARR_POISSON || o->arrival == ARR_UNIFORM;
    int attached = 0;
    if (s != NULL) {
        PyObject *t, *v, *tb;
        PyErr_Fetch(&t, &v, &tb);
        PyErr_NormalizeException(&t, &v, &tb);
        int has = v != NULL ? PyObject_HasAttrString(v, "stats") : 1;   /* may run its code */
        if (!has && PyObject_SetAttrString(v, "stats", (PyObject *)s) == 0)
            attached = 1;
        PyErr_Clear();   /* an attribute the exception refuses: no .stats, nothing else */
        PyErr_Restore(t, v, tb);
    }
    char tail[160] = "";
    if (attached)
        PyOS_snprintf(tail, sizeof tail, "; the error's .stats holds the %zd requests completed",
                      s->completed);
    if (timed)
        shp_note_current("benchmark_load %R: raised by %s in request %zd of %zd%s", name, what,
                         r->err_request + 1, r->nsched, tail);
    else
        shp_note_current("benchmark_load %R: raised by %s in request %zd%s", name, what,
                         r->err_request + 1, tail);
}

PyObject *
shp_benchmark_load(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                   PyObject *kwnames)
{
    shp_state *st = PyModule_GetState(module);
    load_opts o;
    shp_call p;
    shp_run warm;
    load_run r;
    memset(&o, 0, sizeof(o));
    memset(&p, 0, sizeof(p));
    memset(&warm, 0, sizeof(warm));
    memset(&r, 0, sizeof(r));
    shp_diag diag = {0, 0, NULL};
    worker *ws = NULL;
    int64_t *sched = NULL;
    Py_ssize_t nsched = 0;
    PyObject *result = NULL, *name = NULL;
    shp_LoadStats *s = NULL;

    if (parse_call(args, nargs, kwnames, &o, &p) < 0 ||
        shp_sync_resolve(st, &o.dev, 0, &p.sync, &diag) < 0)
        goto done;
    name = o.name ? Py_NewRef(o.name) : PyUnicode_FromString("BenchmarkTarget");
    if (name == NULL)
        goto done;
    shp_preflight_read(st, &o.pf);   /* before our own warm-up loads the CPU */
    int timed = o.arrival == ARR_POISSON || o.arrival == ARR_UNIFORM;
    if (timed && shp_load_schedule(o.arrival == ARR_POISSON, o.qps, o.window_ns, o.seed, &sched,
                                   &nsched) < 0)
        goto done;
    r.max_requests = timed ? nsched : SHP_LOAD_MAX_REQUESTS;
    r.chunks = PyMem_Calloc((size_t)(r.max_requests / CHUNK + 1), sizeof(request *));
    ws = PyMem_Calloc((size_t)o.workers, sizeof(worker));
    r.m = shp_monitor_new();
    if (r.chunks == NULL || ws == NULL || r.m == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* a clean heap, then the warm-up on this thread, as benchmark_callable's */
    if (shp_full_collect() < 0 || shp_warmup_loop(&p, o.num_warmup, NULL, 0, &warm, name) < 0)
        goto done;
    r.interp = PyInterpreterState_Get();
    r.call = &p;
    r.arrival = o.arrival;
    r.sched = sched;
    r.nsched = nsched;
    r.max_queue = o.max_queue;
    r.window_ns = o.window_ns;
    r.drain_ns = o.window_ns;   /* an overloaded run serves its backlog as long again */
    int interrupted = 0;
    int rc = drive(&r, ws, o.workers, &interrupted);
    if (rc < 0 && !interrupted)
        goto done;
    if (r.oom) {
        PyErr_Format(PyExc_MemoryError, FN ": out of memory for the records of %zd requests",
                     r.next);
        goto done;
    }
    /* what was measured, whatever stopped the run.  A Ctrl-C while it is made
     * (seconds on millions of requests) interrupts the call as one during the
     * run would: one in its Python calls makes it again, one in its C part is
     * taken after it, before any more Python code runs. */
    PyObject *et = NULL, *ev = NULL, *etb = NULL;
    if (interrupted)
        PyErr_Fetch(&et, &ev, &etb);
    s = make_result(st, &o, &r, name, !r.cut);
    if (s == NULL && PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) {
        keep_interrupt(&interrupted, &et, &ev, &etb);
        s = make_result(st, &o, &r, name, !r.cut);
    }
    if (s != NULL && PyErr_CheckSignals() < 0)
        keep_interrupt(&interrupted, &et, &ev, &etb);
    if (s == NULL) {
        Py_XDECREF(et);
        Py_XDECREF(ev);
        Py_XDECREF(etb);
        goto done;
    }
    if (interrupted)
        PyErr_Restore(et, ev, etb);
    if (interrupted) {
        if (r.err_value != NULL) {
            /* a worker failed too: its exception is the interrupt's context */
            PyObject *t, *v, *tb;
            PyErr_Fetch(&t, &v, &tb);
            PyErr_NormalizeException(&t, &v, &tb);
            if (v != NULL)
                PyException_SetContext(v, Py_NewRef(r.err_value));
            PyErr_Restore(t, v, tb);
        }
        if (PyErr_ExceptionMatches(PyExc_KeyboardInterrupt))
            shp_raise_interrupted(st, (PyObject *)s, "benchmark_load interrupted; .stats holds "
                                                     "the requests completed so far");
        goto done;
    }
    if (r.err_type != NULL) {
        raise_worker_error(&r, &o, name, s->completed > 0 ? s : NULL);
        goto done;
    }
    /* one warning for the call (warn.c) */
    diag.busy_known = s->machine_busy >= 0;
    if (s->machine_busy == 1 && (shp_diag_busy(&diag, &o.pf) < 0 ||
                                 shp_diag_number(&diag, "under_load", 1.0) < 0))
        goto done;   /* (under load no interleaving cancels the neighbours: warn.c) */
    if (s->overloaded == 1) {
        shp_diag_cause(&diag, SHP_CAUSE_OVERLOADED);
        if (shp_diag_number(&diag, "backlog_growth_qps", s->backlog_growth_qps) < 0 ||
            shp_diag_number(&diag, "offered_qps", s->offered_qps) < 0 ||
            shp_diag_number(&diag, "achieved_qps", s->achieved_qps) < 0)
            goto done;
    }
    if (timed && s->requests == 0) {
        /* nothing to measure: every figure is None, and the reason is the arguments */
        shp_diag_cause(&diag, SHP_CAUSE_NO_REQUESTS);
        if (shp_diag_number(&diag, "offered_qps", s->offered_qps) < 0 ||
            shp_diag_number(&diag, "duration_s", s->duration_s) < 0)
            goto done;
    }
    /* the warning may run Python code (a filter, showwarning): a Ctrl-C there, or
     * pending after it, still hands the result over */
    if (shp_diag_emit(st, &diag, name, (PyObject *)s) < 0 || PyErr_CheckSignals() < 0) {
        if (PyErr_ExceptionMatches(PyExc_KeyboardInterrupt))
            shp_raise_interrupted(st, (PyObject *)s, "benchmark_load interrupted; .stats holds "
                                                     "the requests completed");
        goto done;
    }
    result = (PyObject *)s;
    s = NULL;
done:
    Py_XDECREF(s);
    shp_diag_clear(&diag);
    Py_XDECREF(r.err_type);
    Py_XDECREF(r.err_value);
    Py_XDECREF(r.err_tb);
    if (r.chunks != NULL)
        for (Py_ssize_t k = 0; k <= r.max_requests / CHUNK; k++)
            PyMem_RawFree(r.chunks[k]);
    PyMem_Free(r.chunks);
    PyMem_Free(ws);
    PyMem_Free(sched);
    if (r.m != NULL)
        shp_monitor_free(r.m);
    shp_run_free(&warm);
    shp_call_clear(&p);
    Py_XDECREF(name);
    return result;
}
