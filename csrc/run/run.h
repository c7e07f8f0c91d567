/*
 * run/ -- one benchmark_callable or benchmark_load call: what syncs each
 * iteration (sync.c), the progress line (progress.c), the collector held
 * off (gcguard.c), the warm-up and timed loops and their buffers (loop.c),
 * the cold-start, GPU-time and NVML fields (extras.c), instruction and
 * cycle counts (counters.c), the options, the overhead floor and the result
 * (bench.c); benchmark_load, requests at a rate served by threads of our
 * own (load.c).
 * Calls go down to every folder but scope/.
 */
#ifndef SHP_RUN_RUN_H
#define SHP_RUN_RUN_H

#include "types/types.h"

/* ---- sync.c ------------------------------------------------------------- */

typedef enum { SHP_SYNC_NONE = 0, SHP_SYNC_NATIVE = 1, SHP_SYNC_PYTHON = 2 } shp_sync_kind;

/* What synchronises each iteration (resolved once per run). */
typedef struct {
    shp_sync_kind kind;
    PyObject *fn;             /* SHP_SYNC_PYTHON: owned reference */
    shp_cuda_target cuda;     /* SHP_SYNC_NATIVE, and VRAM telemetry */
    int have_cuda;            /* cuda is initialised */
    shp_state *st;
    shp_cuda_timer gt;        /* CUDA events and the L2 flush buffer (cudatime.c) */
    int recording;            /* this sync also records gt.end, just before it */
} shp_sync;

/*
 * Decide the sync from p->fn (the user's sync_fn, owned, or NULL) and the
 * device: our CudaSync becomes the native sync, another callable is called,
 * a CUDA device gets the driver, MPS torch.mps.synchronize (RuntimeError
 * when torch is not imported).  On a CUDA device synced by the user's hook,
 * the driver is still bound for VRAM telemetry when track_vram, or d records
 * why not (and an accelerator label without a sync).  0 / -1;
 * shp_sync_clear() either way.
 */
int shp_sync_resolve(shp_state *st, const shp_device *dev, int track_vram, shp_sync *p,
                     shp_diag *d);
/* Drop the reference p holds, free its events and L2 buffer.  Never fails. */
void shp_sync_clear(shp_sync *p);
/* Call the Python sync; *t_after (if given) is read right after it returns.
 * A non-zero integer result is an error code: RuntimeError.  0 / -1. */
int shp_sync_python(shp_sync *p, int64_t *t_after);

/* The native sync that also records the end event just before it, in the
 * same GIL-released block (p->recording); like shp_sync_call.  0 / -1. */
int shp_sync_native_recording(shp_sync *p, int64_t *t_after);

/* Sync; *t_after (if given) is read right after the sync completes and, for
 * the native sync, before the GIL is taken back.  0 / -1.  Inline: it runs
 * inside the timed region, twice per iteration. */
static inline int
shp_sync_call(shp_sync *p, int64_t *t_after)
{
    switch (p->kind) {
    case SHP_SYNC_NATIVE: {
        shp_CUresult rc;
        int64_t t = 0;
        if (p->recording)
            return shp_sync_native_recording(p, t_after);
        Py_BEGIN_ALLOW_THREADS
        rc = shp_cuda_sync_nogil(p->st, &p->cuda);
        t = shp_now_ns();
        Py_END_ALLOW_THREADS
        if (t_after)
            *t_after = t;
        if (rc != 0)
            return shp_cuda_raise(p->st, rc, "cuCtxSynchronize failed");
        return 0;
    }
    case SHP_SYNC_PYTHON:
        return shp_sync_python(p, t_after);
    default:
        if (t_after)
            *t_after = shp_now_ns();
        return 0;
    }
}

/* ---- progress.c --------------------------------------------------------- */

/* Adaptive stopping never judges target_rel_ci on fewer samples: at n <= 5
 * the median's CI is [min, max] (zero wide at n = 1); at 10 it is
 * [x(2), x(9)].  Exported as _native.ADAPTIVE_MIN_SAMPLES. */
#define SHP_ADAPTIVE_MIN_SAMPLES 10
#define SHP_ADAPTIVE_MAX_SAMPLES 10000000       /* 80 MB of samples */
#define SHP_ADAPTIVE_DEFAULT_TIME_S 30.0        /* max_time_s of an adaptive run */
#define SHP_PROGRESS_PERIOD_NS 100000000LL      /* 0.1 s between redraws */
#define SHP_PROGRESS_DECIDE_NS 500000000LL      /* auto mode decides after 0.5 s */

/* Progress line state. */
typedef struct {
    int mode;                         /* -1 undecided, 0 off, 1 on */
    int drawn;
    int last_len;                     /* bytes of the last line drawn (padding) */
    int64_t last_ns;
    PyObject *name;                   /* borrowed from the run */
} shp_progress;

/* The per-iteration work behind shp_progress_tick.  0, or -1 with a
 * KeyboardInterrupt set (from the stream's own code). */
int shp_progress_update(shp_progress *pl, Py_ssize_t i, Py_ssize_t total, int64_t now,
                        int64_t start);
/* Between timed iterations (i done of total, 0 = open-ended).  0, or -1 with
 * a KeyboardInterrupt set: a Ctrl-C that landed in the stream's write()
 * stops the run like one landing anywhere else.  Inline: the common case
 * (nothing to draw) costs a few compares. */
static inline int
shp_progress_tick(shp_progress *pl, Py_ssize_t i, Py_ssize_t total, int64_t now, int64_t start)
{
    if (pl == NULL || pl->mode == 0)
        return 0;
    if (pl->mode < 0 ? now - start < SHP_PROGRESS_DECIDE_NS
                     : pl->drawn && now - pl->last_ns < SHP_PROGRESS_PERIOD_NS)
        return 0;
    return shp_progress_update(pl, i, total, now, start);
}
/* The closing line, after the loop; may run with an exception set, which is
 * kept untouched (a Ctrl-C / SystemExit from the stream is then dropped).
 * 0, or -1 with a KeyboardInterrupt / SystemExit from the stream when no
 * exception was set. */
int shp_progress_close(shp_progress *pl, Py_ssize_t i, Py_ssize_t total, int64_t elapsed_ns);

/* ---- gcguard.c ---------------------------------------------------------- */

/* Hold the collector off (counted per interpreter: overlapping runs never
 * switch it back on under each other).  0, or -1 with an exception set. */
int shp_gc_hold(void);
/* Undo one shp_gc_hold() of this thread; the last holder restores the state
 * the first one found.  Keeps any exception that is set.  Never fails. */
void shp_gc_release(void);
/* A full collection whatever the collector's switch says, without touching
 * the switch.  Call with no exception set.  0, or -1 with a KeyboardInterrupt
 * / SystemExit set (raised by Python code the collection ran). */
int shp_full_collect(void);
/* Once per interpreter (module init): have forked children drop the
 * collector holds of threads that did not survive the fork.  0 / -1. */
int shp_gc_register_at_fork(void);

/* ---- loop.c ------------------------------------------------------------- */

/* How to make one call and its syncs (prepared once). */
typedef struct {
    PyObject *func;
    PyObject **argv;          /* argv[0] is the PY_VECTORCALL_ARGUMENTS_OFFSET slot */
    Py_ssize_t nargv;         /* positional + keyword values, after argv[0] */
    size_t nargsf;
    PyObject *kwnames;        /* user's keyword names, or NULL */
    shp_sync sync;
    int cold;                 /* cache="cold": evict before every call */
    shp_llc_evictor llc;      /* cold: the CPU's eviction buffer */
    shp_nvml_watch nv;        /* NVML readings of the CUDA device */
    int nv_on;
    PyObject *loop;           /* the run's event loop (aio.c), or NULL */
    PyObject *drive;          /* its run_until_complete: each call's result goes through it */
    int checked;              /* the first call's result was looked at (aio.c) */
    PyObject *lazy;           /* that result, when it was a generator or an awaitable */
} shp_call;

/* The sample buffers and what the timed loop reports back. */
typedef struct {
    double *samples, *scratch;
    Py_ssize_t cap, n;
    Py_ssize_t max_iters;
    int target_met;                   /* -1 not adaptive */
    int64_t harness_bytes;            /* RSS our own buffer growth added */
    size_t vram_peak_used;
    int64_t start_ns;
    double *warm;                     /* each warm-up call's time (ns), or NULL */
    double *gpu;                      /* each timed call's GPU time (ns), or NULL */
    double *host;                     /* with gpu: t0 to the call's return (ns) */
} shp_run;

/* ---- aio.c: calls whose result is work still to do -------------------------- */

/* 1 if func is a coroutine function (async def, bound, through
 * functools.partial or an instance's __call__), 0 if not; -1 with a fatal
 * exception (a KeyboardInterrupt from an attribute lookup). */
int shp_aio_is_async(PyObject *func);
/* The TypeError for a generator or an async generator returned by func
 * (named by `name`), which is closed; always -1. */
int shp_aio_refuse(PyObject *lazy, PyObject *name);
/* A new event loop for the run in p->loop, its run_until_complete in
 * p->drive.  0, or -1 with RuntimeError when a loop runs in this thread
 * already (the message says how to benchmark from there). */
int shp_aio_open(shp_call *p);
/* The first call returned p->lazy, a generator or an awaitable (taken from
 * p->lazy): a generator is refused (TypeError); an awaitable opens the
 * run's loop when none is open and is run to completion there, untimed, so
 * that the loops can make that call again.  0, or -1 with an exception. */
int shp_aio_take(shp_call *p, PyObject *name);
/* -1 with TypeError when `func` is what calling an async function returns
 * (a coroutine or another awaitable that is not callable: the function
 * itself was meant; a coroutine is closed, never left unawaited), else 0. */
int shp_aio_refuse_object(PyObject *func);
/* _is_async(func) -> bool (shp_aio_is_async), and _loop_overhead_ms(loop)
 * -> float (shp_aio_overhead through loop.run_until_complete), for the
 * plugin's fixture, which awaits on a loop of its own. */
PyObject *shp_aio_is_async_py(PyObject *module, PyObject *func);
PyObject *shp_aio_loop_overhead_py(PyObject *module, PyObject *loop);
/* Close the loop and drop it (an exception set is kept).  Never fails. */
void shp_aio_close(shp_call *p);
/* The loop's own cost per call: the median of n runs of an empty coroutine
 * through p->drive, in ns.  0 / -1. */
int shp_aio_overhead(shp_call *p, int n, double *out_ns);
#define SHP_AIO_OVERHEAD_RUNS 200

/* Drop every reference the call holds (and its sync's), free the eviction
 * buffer.  Never fails. */
void shp_call_clear(shp_call *p);
/* A run of up to SHP_WHOLE_SAMPLES samples gets its buffers whole (1 MiB for
 * the two at most): nothing is copied while it runs.  A longer one starts at
 * SHP_INITIAL_SAMPLES and doubles as samples arrive, so that a huge num_iters
 * costs nothing before the first call. */
#define SHP_WHOLE_SAMPLES 65536
#define SHP_INITIAL_SAMPLES 4096
/* Allocate (and touch) both sample buffers for `cap` samples; 0, or -1 with
 * MemoryError.  shp_run_free() either way. */
int shp_run_alloc(shp_run *run, Py_ssize_t cap, Py_ssize_t max_iters);
/* Also the buffers of each warm-up call's time (nwarm) and, when `gpu`, of
 * the GPU and host times per timed call; 0, or -1 with MemoryError. */
int shp_run_alloc_extras(shp_run *run, Py_ssize_t nwarm, int gpu);
void shp_run_free(shp_run *run);
/* n warm-up calls, each followed by a sync and timed into run->warm (when
 * allocated); one sync before the first, so the first call's time is its
 * own.  ram / vram: sample memory between calls (ram may be NULL).  The
 * first call's result is looked at (shp_aio_take): an awaitable makes the
 * run await every call and the warm-up begin again.  0, or -1 with the
 * exception set (a note says which iteration of `name` raised). */
int shp_warmup_loop(shp_call *p, Py_ssize_t n, shp_hwm_window *ram, int vram, shp_run *run,
                    PyObject *name);
/*
 * The timed loop.  Runs at least `min_iters` iterations; with a target
 * (> 0) it goes on until the median's CI is narrow enough, max_time_ns is
 * spent or run->max_iters is reached.  When no warm-up looked at a result,
 * the first call's is looked at as in shp_warmup_loop (an awaitable's first
 * call is then made again, timed).  Returns 0, or -1 with the exception
 * set; run->n is the number of completed (stored) iterations either way.
 * pl may be NULL (no progress line).
 */
int shp_timed_loop(shp_call *p, shp_run *run, Py_ssize_t min_iters, double target,
                   int64_t max_time_ns, shp_hwm_window *ram, int vram, shp_progress *pl,
                   PyObject *name);

/* ---- extras.c: cold start, GPU time and NVML on the result ---------------- */

/* What the warnings quote. */
typedef struct {
    double head_ms, steady_ms;        /* first timed window's median, steady state */
} shp_extras;

/* Events (stream: where they are recorded; 0 the default stream) on the
 * native CUDA path, and the L2 flush buffer when cold; d records why when
 * events are not available.  A stream comes only with a call the harness
 * syncs with CUDA (bench.c refuses it otherwise, with the option's note).
 * 0, or -1 with an exception (cold and the flush impossible). */
int shp_extras_setup(shp_state *st, shp_call *p, int cold, shp_CUstream stream, shp_diag *d);
/* The NVML watch of the call's CUDA device, from before the first call. */
void shp_extras_watch_begin(shp_state *st, shp_call *p);
/* first_call_ms, warmup_ms, settle_calls, the gpu_* / host_* fields and
 * gpu_telemetry into s; run->samples are in ms already.  0 / -1. */
int shp_extras_fill(shp_Stats *s, shp_run *run, Py_ssize_t nwarm, double overhead_ns,
                    const shp_call *p, shp_extras *x);
/* Add to d what those figures make doubtful (launch-bound, a too-short
 * warm-up, the GPU's clock, throttling, other processes).  0 / -1. */
int shp_extras_diagnose(const shp_Stats *s, const shp_extras *x, const shp_call *p, shp_diag *d);

/* ---- counters.c: instructions and cycles per call ----------------------- */

typedef struct {
    unsigned want;            /* counters= : bits 1 << SHP_CTR_* */
    int hw;                   /* the CPU's counters are open */
    int cg;                   /* callgrind counts this process's timed calls */
    int from_cg;              /* total[SHP_CTR_INSTRUCTIONS] is callgrind's */
    shp_perfctr pc;
    double total[SHP_N_COUNTERS];   /* over the timed loop; NaN: none */
    char why[256];            /* why a counter asked for is not available */
} shp_counters;

/* counters= : None, a name, or an iterable of "instructions" / "cycles".
 * 0, or -1 with TypeError / ValueError. */
int shp_counters_parse(PyObject *v, unsigned *want);
/* Open what `want` asks for (and note the callgrind mode).  Never fails: a
 * counter that cannot be had leaves its reason in c->why. */
void shp_counters_setup(shp_state *st, shp_counters *c, unsigned want);
/* Just before the timed loop / just after it (outside every timed region).
 * stop: 0; or -1 with an exception: the one already set when it was called
 * (the loop's, kept), else a RuntimeError (callgrind's dump unreadable). */
void shp_counters_start(shp_counters *c);
int shp_counters_stop(shp_state *st, shp_counters *c);
/* The per-call fields of s from n timed calls (floor: the loop's own count
 * per iteration, NaN unknown, for the CPU's counters); what was asked for
 * and is missing goes into d with its reason.  0 / -1. */
int shp_counters_fill(shp_Stats *s, const shp_counters *c, Py_ssize_t n,
                      const double floor[SHP_N_COUNTERS], shp_diag *d);
void shp_counters_close(shp_counters *c);

/* ---- bench.c ------------------------------------------------------------ */

/* benchmark_callable's defaults, exported as _native.DEFAULT_NUM_WARMUP and
 * DEFAULT_NUM_ITERS: every Python entry point takes its defaults from them. */
#define SHP_DEFAULT_NUM_WARMUP 10
#define SHP_DEFAULT_NUM_ITERS 50

/* benchmark_callable(func, *args, <options>, **kwargs): a new BenchmarkStats,
 * or NULL with an exception set (BenchmarkInterrupted carries .stats). */
PyObject *shp_benchmark_callable(PyObject *module, PyObject *const *args,
                                 Py_ssize_t nargs, PyObject *kwnames);
/* Add to d the busy machine the preflight found, with its numbers (the
 * warning's load_average, cpus, others_cpu_share).  0 / -1. */
int shp_diag_busy(shp_diag *d, const shp_preflight *pf);
/* Replace the KeyboardInterrupt now set by BenchmarkInterrupted(message)
 * carrying `s` (a result) as .stats, the interrupt as its context.  Never
 * fails: on an error making it, that error is set instead. */
void shp_raise_interrupted(shp_state *st, PyObject *s, const char *message);

/* ---- load.c: benchmark_load ---------------------------------------------------- */

#define SHP_LOAD_DEFAULT_DURATION_S 10.0     /* the arrival window */
#define SHP_LOAD_MAX_DURATION_S 1e6
#define SHP_LOAD_MAX_REQUESTS 10000000       /* per run: ~80 bytes of records each */
#define SHP_LOAD_MAX_WORKERS 256
#define SHP_LOAD_SPIN_NS 200000LL            /* a worker spins the last 0.2 ms to an arrival */
#define SHP_LOAD_POLL_NS 100000000LL         /* signals are checked every 0.1 s, */
#define SHP_LOAD_QUIET_NS 100000000LL        /* when no worker is in a call within 0.1 s */
#define SHP_LOAD_LEAD_NS 1000000LL           /* the schedule opens 1 ms after the gate */

/* benchmark_load(func, *args, qps, <options>, **kwargs): a new LoadStats, or
 * NULL with an exception set (BenchmarkInterrupted carries .stats; a
 * worker's exception propagates with a note, and .stats when it has no
 * attribute of that name). */
PyObject *shp_benchmark_load(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames);

#endif /* SHP_RUN_RUN_H */
