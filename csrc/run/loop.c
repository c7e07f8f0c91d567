/*
 * loop.c -- the warm-up and timed loops, and the sample buffers they fill.
 *
 * The timed region of every iteration is exactly
 *
 *     sync; t0 = now(); func(*args, **kwargs); sync; t1 = now()
 *
 * with the call made through vectorcall on arguments prepared once, its
 * result released at once, as an expression statement (and timeit, pyperf,
 * pytest-benchmark, the released module) releases it:
 * freeing the output is part of what a pipeline pays per call.  Both happen
 * in callgrind.c's shp_counted_call, the function whose instructions the
 * --instructions modes count; warm-up calls are made here, uncounted.  The closing
 * timestamp of the native CUDA sync is taken before the GIL is taken back.
 * Everything else -- storing the sample, memory telemetry, signal checks,
 * progress, adaptive stopping -- happens between t1 and the next
 * iteration's opening sync.  Samples are integer-valued nanoseconds in a C
 * buffer of doubles.
 *
 * Before the opening sync, cache="cold" evicts the caches (cachecold.c, and
 * the GPU's L2 through cudatime.c).  On the native CUDA path with events, the
 * start event is recorded after the opening sync and before t0, the end
 * event inside the closing sync's GIL-released block, and the host's part
 * (t0 to the call's return: one clock read) is kept beside the sample.
 */
#include "run/run.h"

#include <string.h>

void
shp_call_clear(shp_call *p)
{
    if (p->argv != NULL)
        for (Py_ssize_t i = 1; i <= p->nargv; i++)
            Py_XDECREF(p->argv[i]);
    PyMem_Free(p->argv);
    p->argv = NULL;
    Py_CLEAR(p->kwnames);
    Py_CLEAR(p->func);
    Py_CLEAR(p->lazy);
    shp_aio_close(p);
    shp_sync_clear(&p->sync);
    shp_llc_evictor_free(&p->llc);
}

/* ---- between iterations ------------------------------------------------------ */

static void
vram_sample(shp_call *p, shp_run *run)
{
    size_t free_b, total_b;
    if (shp_cuda_meminfo_nogil(p->sync.st, &p->sync.cuda, &free_b, &total_b) == 0 &&
        total_b >= free_b) {
        size_t used = total_b - free_b;
        if (used > run->vram_peak_used)
            run->vram_peak_used = used;
    }
}

/* Zero n doubles at x in chunks, answering Ctrl-C between them: a growth to
 * hundreds of MiB must not hold a KeyboardInterrupt for seconds.  0 / -1. */
static int
touch(double *x, Py_ssize_t n)
{
    const Py_ssize_t chunk = (Py_ssize_t)(16 << 20) / (Py_ssize_t)sizeof(double);   /* 16 MiB */
    for (Py_ssize_t i = 0; i < n; i += chunk) {
        memset(x + i, 0, (size_t)(n - i < chunk ? n - i : chunk) * sizeof(double));
        if (n > chunk && PyErr_CheckSignals() < 0)
            return -1;
    }
    return 0;
}

/* Grow the buffers geometrically, touching the new pages now so that they
 * are not first faulted in between two timed calls.  0, or -1 with
 * MemoryError or a KeyboardInterrupt (the samples so far are kept). */
static int
grow(shp_run *run, shp_hwm_window *ram)
{
    Py_ssize_t ncap;
    if (shp_size_mul(run->cap, 2, &ncap) < 0 || ncap > run->max_iters)
        ncap = run->max_iters;   /* bench.c checked that max_iters samples fit */
    int64_t before = ram ? shp_rss_bytes() : 0;
    double *s = PyMem_Realloc(run->samples, (size_t)ncap * sizeof(double));
    if (s == NULL)
        return PyErr_NoMemory(), -1;
    run->samples = s;
    double *c = PyMem_Realloc(run->scratch, (size_t)ncap * sizeof(double));
    if (c == NULL)
        return PyErr_NoMemory(), -1;
    run->scratch = c;
    if (run->gpu != NULL) {
        double *g = PyMem_Realloc(run->gpu, (size_t)ncap * sizeof(double));
        if (g == NULL)
            return PyErr_NoMemory(), -1;
        run->gpu = g;
        double *h = PyMem_Realloc(run->host, (size_t)ncap * sizeof(double));
        if (h == NULL)
            return PyErr_NoMemory(), -1;
        run->host = h;
    }
    Py_ssize_t old = run->cap;
    run->cap = ncap;   /* both buffers hold ncap now, touched or not */
    int rc = touch(run->samples + old, ncap - old) < 0 ||
             touch(run->scratch + old, ncap - old) < 0 ? -1 : 0;
    if (ram && before >= 0) {   /* ours, not the callable's, even when Ctrl-C cut it short */
        int64_t after = shp_rss_bytes();
        if (after > before)
            run->harness_bytes += after - before;
    }
    return rc;
}

/* Between iterations (never inside t0..t1): memory telemetry, Ctrl-C.  The
 * result is gone by now (released inside the timed region): the high-water
 * mark still holds its pages, a caching allocator (PyTorch, CuPy) still
 * holds its device memory; only the sampled fallback misses memory that a
 * result alone held (memory.md).  0 / -1. */
static int
after_call(shp_call *p, shp_hwm_window *ram, int vram, shp_run *run)
{
    if (ram != NULL)
        shp_window_sample(ram);
    if (vram)
        vram_sample(p, run);
    if (p->nv_on)
        shp_nvml_watch_sample(p->sync.st, &p->nv, shp_now_ns(), 0);
    return PyErr_CheckSignals();
}

/* cache="cold": before a call, outside the timed region, push its data out
 * of the CPU's last-level cache and the GPU's L2.  The GIL is released: this
 * is plain memory traffic and a device wait.  0 / -1. */
static int
evict_caches(shp_call *p)
{
    shp_CUresult rc = 0;
    Py_BEGIN_ALLOW_THREADS
    shp_llc_evict(&p->llc);
    if (p->sync.gt.l2_bytes > 0)
        rc = shp_cuda_l2_flush_nogil(p->sync.st, &p->sync.cuda, &p->sync.gt);
    Py_END_ALLOW_THREADS
    if (rc != 0)
        return shp_cuda_raise(p->sync.st, rc, "cache='cold': the L2 flush (cuMemsetD8Async) failed");
    return 0;
}

/* Record the start event (after the opening sync, before t0).  0 / -1. */
static int
start_event(shp_sync *s)
{
    shp_CUresult rc;
    Py_BEGIN_ALLOW_THREADS
    rc = shp_cuda_timer_start_nogil(s->st, &s->cuda, &s->gt);
    Py_END_ALLOW_THREADS
    return rc != 0 ? shp_cuda_raise(s->st, rc, "cuEventRecord failed") : 0;
}

/* The GPU time between the events, after the closing sync (ns).  0 / -1. */
static int
read_event(shp_sync *s, double *out_ns)
{
    float ms = 0;
    shp_CUresult rc;
    Py_BEGIN_ALLOW_THREADS
    rc = shp_cuda_timer_elapsed_nogil(s->st, &s->cuda, &s->gt, &ms);
    Py_END_ALLOW_THREADS
    if (rc != 0)
        return shp_cuda_raise(s->st, rc, "cuEventElapsedTime failed");
    *out_ns = (double)ms * 1e6;
    return 0;
}

typedef enum { PHASE_WARMUP, PHASE_TIMED } phase;
static const char *const phase_names[] = {"warm-up", "timed"};
static const char *const func_note = "benchmark %R: raised by func in %s iteration %zd of %zd";
/* the sync comes before or after a call: its phase says which ("after warm-up") */
static const char *const sync_note = "benchmark %R: raised by sync_fn %s iteration %zd of %zd";

/* ---- the loops ---------------------------------------------------------------- */

int
shp_timed_loop(shp_call *p, shp_run *run, Py_ssize_t min_iters, double target,
               int64_t max_time_ns, shp_hwm_window *ram, int vram, shp_progress *pl,
               PyObject *name)
{
    int64_t t0, t1 = 0;
    /* never judge the target on fewer samples than the CI can speak for */
    Py_ssize_t next_check = min_iters > SHP_ADAPTIVE_MIN_SAMPLES ? min_iters
                                                                 : SHP_ADAPTIVE_MIN_SAMPLES;
    int adaptive = target > 0;
    run->start_ns = shp_now_ns();
    int64_t deadline = max_time_ns > 0 && max_time_ns < INT64_MAX - run->start_ns
                           ? run->start_ns + max_time_ns : INT64_MAX;
    Py_ssize_t total = adaptive ? 0 : min_iters;
    int events = p->sync.gt.events && run->gpu != NULL;
    for (Py_ssize_t i = 0;; i++) {
        if (i >= min_iters) {
            if (!adaptive)
                break;
            if (i >= next_check) {
                double med, lo, hi;
                shp_median_ci(run->samples, i, run->scratch, &med, &lo, &hi);
                if ((hi - lo) / 2.0 <= target * med) {
                    run->target_met = 1;
                    break;
                }
                next_check = i + (i / 10 > 1 ? i / 10 : 1);
            }
            if (t1 >= deadline || i >= run->max_iters)
                break;
        }
        else if (!adaptive && i > 0 && t1 >= deadline) {
            break;   /* a plain time cap: keep what was measured */
        }
        if (i == run->cap && grow(run, ram) < 0)
            return -1;

        if (p->cold && evict_caches(p) < 0)
            return -1;
        if (shp_sync_call(&p->sync, NULL) < 0) {
            shp_note_iteration(sync_note, name, "before timed", i, min_iters);
            return -1;
        }
        if (events && start_event(&p->sync) < 0)
            return -1;
        PyObject **lazy = p->checked ? NULL : &p->lazy;
        t0 = shp_now_ns();
        /* the call and the release of its result, in a function of its own:
         * what callgrind counts in the --instructions modes (callgrind.c) */
        if (shp_counted_call(p->func, p->argv + 1, p->nargsf, p->kwnames, p->drive, lazy) < 0) {
            shp_note_iteration(func_note, name, phase_names[PHASE_TIMED], i, min_iters);
            return -1;
        }
        p->checked = 1;
        if (p->lazy != NULL) {   /* not a sample: refused, or run and the call made again */
            if (shp_aio_take(p, name) < 0)
                return -1;
            i--;
            continue;
        }
        /* with events, also when the host was done: what follows until t1 is
         * the wait for the device */
        int64_t t_ret = 0;
        if (events) {
            t_ret = shp_now_ns();
            p->sync.recording = 1;
        }
        int sync_rc = shp_sync_call(&p->sync, &t1);
        if (events)
            p->sync.recording = 0;
        if (sync_rc < 0) {
            shp_note_iteration(sync_note, name, "after timed", i, min_iters);
            return -1;
        }
        /* ---- outside the timed region ---- */
        if (events) {
            if (read_event(&p->sync, &run->gpu[i]) < 0)
                return -1;
            run->host[i] = (double)(t_ret - t0);
        }
        run->samples[i] = (double)(t1 - t0);
        run->n = i + 1;
        if (after_call(p, ram, vram, run) < 0 ||
            shp_progress_tick(pl, i + 1, total, t1, run->start_ns) < 0)
            return -1;
    }
    return 0;
}

int
shp_warmup_loop(shp_call *p, Py_ssize_t n, shp_hwm_window *ram, int vram, shp_run *run,
                PyObject *name)
{
    int64_t t0, t1 = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (p->cold && evict_caches(p) < 0)
            return -1;
        /* The native sync drains what the caller queued, so that the first
         * call's time is its own; a sync_fn of the user's is called exactly
         * num_warmup + 2 * num_iters times, as the released module's own
         * test counts (methodology.md). */
        if (i == 0 && p->sync.kind == SHP_SYNC_NATIVE && shp_sync_call(&p->sync, NULL) < 0) {
            shp_note_iteration(sync_note, name, "before warm-up", i, n);
            return -1;
        }
        t0 = shp_now_ns();
        PyObject *r = PyObject_Vectorcall(p->func, p->argv + 1, p->nargsf, p->kwnames);
        if (r != NULL && p->drive != NULL)
            Py_SETREF(r, PyObject_CallOneArg(p->drive, r));
        if (r == NULL) {
            shp_note_iteration(func_note, name, phase_names[PHASE_WARMUP], i, n);
            return -1;
        }
        if (!p->checked) {
            p->checked = 1;
            if (shp_result_is_lazy(r)) {   /* refused, or run and the warm-up begun again */
                p->lazy = r;
                if (shp_aio_take(p, name) < 0)
                    return -1;
                i = -1;
                continue;
            }
        }
        Py_DECREF(r);
        if (shp_sync_call(&p->sync, &t1) < 0) {
            shp_note_iteration(sync_note, name, "after warm-up", i, n);
            return -1;
        }
        if (run->warm != NULL)
            run->warm[i] = (double)(t1 - t0);
        if (after_call(p, ram, vram, run) < 0)
            return -1;
    }
    return 0;
}

int
shp_run_alloc(shp_run *run, Py_ssize_t cap, Py_ssize_t max_iters)
{
    run->cap = cap;
    run->max_iters = max_iters;
    run->target_met = -1;
    run->samples = PyMem_Malloc((size_t)cap * sizeof(double));
    run->scratch = PyMem_Malloc((size_t)cap * sizeof(double));
    if (run->samples == NULL || run->scratch == NULL) {
        PyErr_Format(PyExc_MemoryError,
                     "cannot allocate the sample buffers for %zd iterations (%zd MiB)", cap,
                     (Py_ssize_t)((double)cap * 2 * sizeof(double) / SHP_MIB));
        return -1;
    }
    /* Touch every page before the memory baseline, so our own buffers never
     * count as the callable's RAM. */
    memset(run->samples, 0, (size_t)cap * sizeof(double));
    memset(run->scratch, 0, (size_t)cap * sizeof(double));
    return 0;
}

int
shp_run_alloc_extras(shp_run *run, Py_ssize_t nwarm, int gpu)
{
    run->warm = PyMem_Calloc((size_t)(nwarm > 0 ? nwarm : 1), sizeof(double));
    if (run->warm == NULL)
        return PyErr_NoMemory(), -1;
    if (gpu) {
        run->gpu = PyMem_Calloc((size_t)run->cap, sizeof(double));
        run->host = PyMem_Calloc((size_t)run->cap, sizeof(double));
        if (run->gpu == NULL || run->host == NULL)
            return PyErr_NoMemory(), -1;
    }
    return 0;
}

void
shp_run_free(shp_run *run)
{
    PyMem_Free(run->samples);
    PyMem_Free(run->scratch);
    PyMem_Free(run->warm);
    PyMem_Free(run->gpu);
    PyMem_Free(run->host);
    run->samples = run->scratch = run->warm = run->gpu = run->host = NULL;
}
