/*
 * bench.c -- benchmark_callable: argument checks, warm-up and the timed loop.
 *
 * The timed region of every iteration is exactly
 *
 *     sync; t0 = now(); r = func(*args, **kwargs); sync; t1 = now()
 *
 * with the call made through vectorcall on arguments prepared once, and the
 * closing timestamp of the native CUDA sync taken before the GIL is taken
 * back.  Everything else -- releasing r, storing the sample, memory
 * telemetry, signal checks, progress, adaptive stopping -- happens between
 * t1 and the next iteration's opening sync.  Samples are integer-valued
 * nanoseconds in a C buffer of doubles, converted to milliseconds once at
 * the end; that buffer becomes the result's samples_ms without a copy.
 */
#include "profiling.h"
#include <numpy/arrayobject.h>

#include <math.h>
#include <stdarg.h>
#include <string.h>

typedef enum { SYNC_NONE = 0, SYNC_NATIVE = 1, SYNC_PYTHON = 2 } sync_kind;

/* How to make one call and its syncs (prepared once). */
typedef struct {
    PyObject *func;
    PyObject **argv;          /* argv[0] is the PY_VECTORCALL_ARGUMENTS_OFFSET slot */
    Py_ssize_t nargv;         /* positional + keyword values, after argv[0] */
    size_t nargsf;
    PyObject *kwnames;        /* user's keyword names, or NULL */
    sync_kind sync;
    PyObject *sync_fn;        /* SYNC_PYTHON: owned reference */
    shp_cuda_target cuda;     /* SYNC_NATIVE, and VRAM telemetry */
    int have_cuda;            /* cuda is initialised */
    shp_state *st;
} call_plan;

/* The validated options of one benchmark_callable call. */
typedef struct {
    PyObject *name, *device;          /* borrowed from the caller */
    Py_ssize_t num_warmup, num_iters;
    int track_ram, track_vram, disable_gc;
    int progress;                     /* -1 auto, 0 off, 1 on */
    double target_rel_ci;             /* 0: not adaptive */
    double max_time_s;                /* 0: no limit */
    int is_cuda, cuda_ordinal, is_mps;
} bench_opts;

/* The sample buffers and what the timed loop reports back. */
typedef struct {
    double *samples, *scratch;
    Py_ssize_t cap, n;
    Py_ssize_t max_iters;
    int target_met;                   /* -1 not adaptive */
    int64_t harness_bytes;            /* RSS our own buffer growth added */
    size_t vram_peak_used;
    int64_t start_ns;
} sample_run;

/* Progress line state (drawn between iterations, at most 10 times a second). */
typedef struct {
    int mode;                         /* -1 undecided, 0 off, 1 on */
    int drawn;
    int64_t last_ns;
    PyObject *name;
} progress_line;

#define SHP_PROGRESS_PERIOD_NS 100000000LL      /* 0.1 s */
#define SHP_ADAPTIVE_MAX_SAMPLES 10000000       /* 80 MB of samples */
#define SHP_ADAPTIVE_DEFAULT_TIME_S 30.0
#define SHP_OVERHEAD_ITERS 2000
#define SHP_OVERHEAD_WARMUP 50

/* ---- small helpers ------------------------------------------------------- */

void
shp_add_note(PyObject *exc, const char *fmt, ...)
{
    if (exc == NULL)
        return;
    va_list va;
    va_start(va, fmt);
    PyObject *note = PyUnicode_FromFormatV(fmt, va);
    va_end(va);
    if (note == NULL) {
        PyErr_Clear();
        return;
    }
    /* add_note: BaseException's (3.11+) or the exception's own.  Before 3.11
     * there is usually none: keep PEP 678's data all the same, a list in
     * __notes__, which code and tools that read notes find (only the
     * interpreter's own traceback printout does not show it there). */
    PyObject *r = NULL;
    PyObject *add = PyObject_GetAttrString(exc, "add_note");
    if (add != NULL) {
        r = PyObject_CallOneArg(add, note);
        Py_DECREF(add);
    }
    else if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
        PyObject *notes = PyObject_GetAttrString(exc, "__notes__");
        if (notes == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) {
            PyErr_Clear();
            notes = PyList_New(0);
            if (notes != NULL && PyObject_SetAttrString(exc, "__notes__", notes) < 0)
                Py_CLEAR(notes);
        }
        if (notes != NULL && PyList_Check(notes) && PyList_Append(notes, note) == 0)
            r = Py_NewRef(Py_None);
        Py_XDECREF(notes);
    }
    Py_DECREF(note);
    if (r == NULL)
        PyErr_Clear();   /* an exception that refuses notes propagates bare */
    Py_XDECREF(r);
}

PyObject *
shp_index_arg(PyObject *v, const char *what)
{
    if (PyBool_Check(v) || !PyIndex_Check(v)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int, not %.100s", what, Py_TYPE(v)->tp_name);
        return NULL;
    }
    return PyNumber_Index(v);
}

/* Note on the exception now set, which stays set. */
static void
note_current(const char *fmt, PyObject *name, const char *phase, Py_ssize_t i, Py_ssize_t n)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL && value != NULL)
        PyException_SetTraceback(value, tb);
    shp_add_note(value, fmt, name, phase, i + 1, n);
    PyErr_Restore(type, value, tb);
}

/*
 * The collector's switch.  3.10+: the C API.  3.9: the gc module's builtins,
 * found in sys.modules (module.c imports gc at load), so that no import hook
 * -- Python code, and so a possible thread switch -- runs inside the hold
 * count's read-modify-write below.
 */
#if PY_VERSION_HEX < 0x030A0000
static PyObject *
gc_call(const char *method)
{
    PyObject *gc = PyDict_GetItemString(PyImport_GetModuleDict(), "gc");   /* borrowed */
    if (gc != NULL)
        return PyObject_CallMethod(gc, method, NULL);
    gc = PyImport_ImportModule("gc");   /* someone removed it from sys.modules */
    PyObject *r = gc ? PyObject_CallMethod(gc, method, NULL) : NULL;
    Py_XDECREF(gc);
    return r;
}
#endif

/* Switch the collector off; its previous state (1 on, 0 off), or -1. */
static int
gc_disable(void)
{
#if PY_VERSION_HEX >= 0x030A0000
    return PyGC_Disable();
#else
    PyObject *r = gc_call("isenabled");
    int was = r ? PyObject_IsTrue(r) : -1;
    Py_XDECREF(r);
    if (was >= 0) {
        r = gc_call("disable");
        if (r == NULL)
            was = -1;
        Py_XDECREF(r);
    }
    return was;
#endif
}

/* Switch it on; keeps any exception that is set.  Never fails. */
static void
gc_enable(void)
{
#if PY_VERSION_HEX >= 0x030A0000
    PyGC_Enable();
#else
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    Py_XDECREF(gc_call("enable"));
    PyErr_Clear();
    PyErr_Restore(type, value, tb);
#endif
}

/*
 * disable_gc=True in runs that overlap (threads, a benchmark inside func)
 * must not turn the collector back on while another run is still in its
 * loop.  The holders are counted and the last one out restores the state the
 * first one found.  The count lives in the interpreter's dict: the collector
 * is per interpreter, and there may be several instances of this module.
 * All under the GIL, with no Python code between reading and writing it.
 */
#define SHP_GC_HOLD_KEY "spatialhub.profiling.gc_hold"

/* 0: held (the collector is off), -1: error set. */
static int
gc_hold(void)
{
    PyObject *d = PyInterpreterState_GetDict(PyInterpreterState_Get());
    if (d == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "disable_gc: no interpreter dict to keep state in");
        return -1;
    }
    long holders = 0, was = 0;
    PyObject *cur = PyDict_GetItemString(d, SHP_GC_HOLD_KEY);   /* borrowed */
    if (cur != NULL && !PyArg_ParseTuple(cur, "ll", &holders, &was))
        return -1;
    int now_was = gc_disable();   /* off even if something turned it on since */
    if (now_was < 0)
        return -1;
    if (holders <= 0)
        was = now_was;
    PyObject *v = Py_BuildValue("(ll)", holders + 1, was);
    int rc = v ? PyDict_SetItemString(d, SHP_GC_HOLD_KEY, v) : -1;
    Py_XDECREF(v);
    if (rc < 0 && holders <= 0 && was > 0)
        gc_enable();
    return rc;
}

/* Undo one gc_hold(); keeps any exception that is set.  Never fails. */
static void
gc_release(void)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *d = PyInterpreterState_GetDict(PyInterpreterState_Get());
    PyObject *cur = d ? PyDict_GetItemString(d, SHP_GC_HOLD_KEY) : NULL;
    long holders = 1, was = 1;
    if (cur != NULL && !PyArg_ParseTuple(cur, "ll", &holders, &was))
        holders = 1, was = 1;   /* unreadable: err towards a working collector */
    if (holders <= 1) {
        if (d != NULL && cur != NULL && PyDict_DelItemString(d, SHP_GC_HOLD_KEY) < 0)
            PyErr_Clear();
        if (was > 0)
            gc_enable();
    }
    else {
        PyObject *v = Py_BuildValue("(ll)", holders - 1, was);
        if (v == NULL || PyDict_SetItemString(d, SHP_GC_HOLD_KEY, v) < 0)
            PyErr_Clear();
        Py_XDECREF(v);
    }
    PyErr_Clear();
    PyErr_Restore(type, value, tb);
}

/*
 * A full collection whatever the collector's switch says.  PyGC_Collect()
 * does nothing while the collector is off -- gc.disable() by the user, as
 * benchmark scripts often do, or another run's disable_gc -- and the clean
 * heap before the timed loop is promised in every mode.  gc.collect() works
 * with the switch off, so the switch is never touched: switching it on for
 * the collection would let another thread (finalizers can hand the GIL
 * over) run its disable_gc loop with the collector on, or take the state it
 * found for "on".
 */
static void
full_collect(void)
{
#if PY_VERSION_HEX >= 0x030A0000
    if (PyGC_IsEnabled()) {
        PyGC_Collect();
        return;
    }
#endif
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *gc = PyImport_ImportModule("gc");
    PyObject *r = gc ? PyObject_CallMethod(gc, "collect", NULL) : NULL;
    Py_XDECREF(r);
    Py_XDECREF(gc);
    PyErr_Clear();
    PyErr_Restore(type, value, tb);
}

/* ---- argument parsing ---------------------------------------------------- */

static int
as_count_arg(PyObject *v, const char *what, Py_ssize_t min, Py_ssize_t *out, int huge_is_memory)
{
    PyObject *idx = shp_index_arg(v, what);
    if (idx == NULL)
        return -1;
    int overflow = 0;
    long long n = PyLong_AsLongLongAndOverflow(idx, &overflow);
    if (n == -1 && PyErr_Occurred()) {
        Py_DECREF(idx);
        return -1;
    }
    if (overflow < 0 || (overflow == 0 && n < min)) {
        PyErr_Format(PyExc_ValueError, "%s must be >= %zd, got %S", what, min, idx);
        Py_DECREF(idx);
        return -1;
    }
    if (overflow > 0 || n > (long long)(PY_SSIZE_T_MAX / (Py_ssize_t)(2 * sizeof(double)))) {
        if (huge_is_memory)
            PyErr_Format(PyExc_MemoryError,
                         "%s=%S needs more memory for its samples than this process can address",
                         what, idx);
        else
            PyErr_Format(PyExc_ValueError, "%s=%S is too large", what, idx);
        Py_DECREF(idx);
        return -1;
    }
    Py_DECREF(idx);
    *out = (Py_ssize_t)n;
    return 0;
}

/* A positive finite float option, or None (0.0). */
static int
as_positive_real(PyObject *v, const char *what, double *out, int below_one)
{
    if (v == Py_None) {
        *out = 0.0;
        return 0;
    }
    if (PyBool_Check(v) || !(PyFloat_Check(v) || PyLong_Check(v) ||
                             (Py_TYPE(v)->tp_as_number && Py_TYPE(v)->tp_as_number->nb_float))) {
        PyErr_Format(PyExc_TypeError, "%s must be a number or None, not %.100s", what,
                     Py_TYPE(v)->tp_name);
        return -1;
    }
    double d = PyFloat_AsDouble(v);
    if (d == -1.0 && PyErr_Occurred())
        return -1;
    if (!(d > 0.0) || !isfinite(d) || (below_one && d >= 1.0)) {
        PyErr_Format(PyExc_ValueError, "%s must be %s, got %R", what,
                     below_one ? "a fraction in (0, 1), e.g. 0.01 for 1%" : "a positive number of seconds",
                     v);
        return -1;
    }
    *out = d;
    return 0;
}

static int
as_flag(PyObject *v, int *out)
{
    int t = PyObject_IsTrue(v);
    if (t < 0)
        return -1;
    *out = t;
    return 0;
}

enum {
    OPT_NAME, OPT_DEVICE, OPT_NUM_WARMUP, OPT_NUM_ITERS, OPT_TRACK_RAM, OPT_TRACK_VRAM,
    OPT_SYNC_FN, OPT_TARGET_REL_CI, OPT_MAX_TIME_S, OPT_DISABLE_GC, OPT_PROGRESS, N_OPTS
};
static const char *const opt_names[N_OPTS] = {
    "name", "device", "num_warmup", "num_iters", "track_ram", "track_vram",
    "sync_fn", "target_rel_ci", "max_time_s", "disable_gc", "progress",
};

static int
option_index(PyObject *key)
{
    for (int j = 0; j < N_OPTS; j++)
        if (PyUnicode_CompareWithASCIIString(key, opt_names[j]) == 0)
            return j;
    return -1;
}

/* Split the call into harness options and the user's arguments, check the
 * options, and prepare the vectorcall argument array (strong references). */
static int
parse_call(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
           bench_opts *o, call_plan *p)
{
    PyObject *v[N_OPTS] = {NULL};
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, nuserkw = 0;
    PyObject *func = nargs > 0 ? args[0] : NULL;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        int j = option_index(key);
        if (j >= 0)
            v[j] = args[nargs + k];
        else if (func == NULL && PyUnicode_CompareWithASCIIString(key, "func") == 0)
            func = args[nargs + k];
        else
            nuserkw++;
    }
    if (func == NULL) {
        PyErr_SetString(PyExc_TypeError, "benchmark_callable() missing required argument 'func'");
        return -1;
    }
    if (!PyCallable_Check(func)) {
        PyErr_Format(PyExc_TypeError, "func must be callable, not %.100s", Py_TYPE(func)->tp_name);
        return -1;
    }
    o->name = v[OPT_NAME];
    o->device = v[OPT_DEVICE];
    if (o->name != NULL && !PyUnicode_Check(o->name)) {
        PyErr_Format(PyExc_TypeError, "name must be str, not %.100s", Py_TYPE(o->name)->tp_name);
        return -1;
    }
    if (o->device != NULL && !PyUnicode_Check(o->device)) {
        PyErr_Format(PyExc_TypeError, "device must be str, not %.100s", Py_TYPE(o->device)->tp_name);
        return -1;
    }
    o->num_warmup = 10;
    o->num_iters = 50;
    o->track_ram = o->track_vram = 1;
    o->progress = -1;
    if (v[OPT_NUM_WARMUP] && as_count_arg(v[OPT_NUM_WARMUP], "num_warmup", 0, &o->num_warmup, 0) < 0)
        return -1;
    if (v[OPT_NUM_ITERS] && as_count_arg(v[OPT_NUM_ITERS], "num_iters", 1, &o->num_iters, 1) < 0)
        return -1;
    if (v[OPT_TRACK_RAM] && as_flag(v[OPT_TRACK_RAM], &o->track_ram) < 0)
        return -1;
    if (v[OPT_TRACK_VRAM] && as_flag(v[OPT_TRACK_VRAM], &o->track_vram) < 0)
        return -1;
    if (v[OPT_DISABLE_GC] && as_flag(v[OPT_DISABLE_GC], &o->disable_gc) < 0)
        return -1;
    if (v[OPT_PROGRESS] && v[OPT_PROGRESS] != Py_None && as_flag(v[OPT_PROGRESS], &o->progress) < 0)
        return -1;
    if (v[OPT_TARGET_REL_CI] && as_positive_real(v[OPT_TARGET_REL_CI], "target_rel_ci", &o->target_rel_ci, 1) < 0)
        return -1;
    if (v[OPT_MAX_TIME_S] && as_positive_real(v[OPT_MAX_TIME_S], "max_time_s", &o->max_time_s, 0) < 0)
        return -1;
    PyObject *sync_fn = v[OPT_SYNC_FN];
    if (sync_fn == Py_None)
        sync_fn = NULL;
    if (sync_fn != NULL && !PyCallable_Check(sync_fn)) {
        PyErr_Format(PyExc_TypeError, "sync_fn must be callable or None, not %.100s",
                     Py_TYPE(sync_fn)->tp_name);
        return -1;
    }
    o->cuda_ordinal = -1;
    if (o->device != NULL) {
        const char *dev = PyUnicode_AsUTF8(o->device);
        if (dev == NULL)
            return -1;
        o->is_cuda = shp_cuda_parse_device(dev, &o->cuda_ordinal);
        if (o->is_cuda < 0)
            return -1;
        o->is_mps = PyOS_strnicmp(dev, "mps", 3) == 0 && (dev[3] == '\0' || dev[3] == ':');
    }

    /* the call: positional user arguments, then keyword values */
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
            if (option_index(key) >= 0 || (args[nargs + k] == func && nargs == 0 &&
                                           PyUnicode_CompareWithASCIIString(key, "func") == 0))
                continue;
            PyTuple_SET_ITEM(p->kwnames, u, Py_NewRef(key));
            p->argv[1 + npos + u] = Py_NewRef(args[nargs + k]);
            u++;
        }
    }
    p->nargsf = (size_t)npos | PY_VECTORCALL_ARGUMENTS_OFFSET;
    p->sync_fn = sync_fn ? Py_NewRef(sync_fn) : NULL;
    return 0;
}

static void
plan_clear(call_plan *p)
{
    if (p->argv != NULL)
        for (Py_ssize_t i = 1; i <= p->nargv; i++)
            Py_XDECREF(p->argv[i]);
    PyMem_Free(p->argv);
    p->argv = NULL;
    Py_CLEAR(p->kwnames);
    Py_CLEAR(p->func);
    Py_CLEAR(p->sync_fn);
}

/* torch.mps.synchronize when torch is already imported; never imports it. */
static PyObject *
mps_sync_fn(void)
{
    PyObject *mods = PySys_GetObject("modules");   /* borrowed */
    PyObject *torch = mods ? PyDict_GetItemString(mods, "torch") : NULL;
    if (torch == NULL || torch == Py_None)
        return NULL;
    Py_INCREF(torch);   /* a module __getattr__ may drop sys.modules' reference */
    PyObject *mps = PyObject_GetAttrString(torch, "mps");
    Py_DECREF(torch);
    PyObject *fn = mps ? PyObject_GetAttrString(mps, "synchronize") : NULL;
    Py_XDECREF(mps);
    if (fn == NULL)
        PyErr_Clear();
    return fn;
}

/* Decide what synchronises each iteration; never silently nothing on a
 * device that runs asynchronously. */
static int
resolve_sync(shp_state *st, bench_opts *o, call_plan *p)
{
    p->st = st;
    if (p->sync_fn != NULL && shp_cuda_sync_unwrap(st, p->sync_fn, &p->cuda)) {
        /* our own CudaSync passed as sync_fn: call the driver directly */
        Py_CLEAR(p->sync_fn);
        p->have_cuda = 1;
        p->sync = SYNC_NATIVE;
    }
    else if (p->sync_fn != NULL) {
        p->sync = SYNC_PYTHON;
    }
    else if (o->is_cuda) {
        if (shp_cuda_target_init(st, o->cuda_ordinal, &p->cuda) < 0)
            return -1;
        p->have_cuda = 1;
        p->sync = SYNC_NATIVE;
    }
    else if (o->is_mps) {
        p->sync_fn = mps_sync_fn();
        if (p->sync_fn == NULL) {
            PyErr_SetString(PyExc_RuntimeError,
                            "device='mps' needs a sync: import torch first (its torch.mps."
                            "synchronize is used) or pass sync_fn=...; without one only the "
                            "asynchronous dispatch would be timed");
            return -1;
        }
        p->sync = SYNC_PYTHON;
    }
    /* VRAM telemetry on a CUDA device synced by the user's own hook */
    if (o->is_cuda && !p->have_cuda && o->track_vram) {
        if (shp_cuda_load(st) && shp_cuda_target_init(st, o->cuda_ordinal, &p->cuda) == 0) {
            p->have_cuda = 1;
        }
        else {
            PyErr_Clear();
            char why[300];
            PyOS_snprintf(why, sizeof(why), "%s", st->cuda.why[0] ? st->cuda.why : "no CUDA device");
            if (PyErr_WarnFormat(st->warning, 1,
                                 "VRAM is not tracked (vram_delta_mb stays 0.0): %s", why) < 0)
                return -1;
        }
    }
    return 0;
}

/* ---- the loop ------------------------------------------------------------ */

/* The integer a sync hook's return value carries as an error code, or NULL
 * (borrowed): an int (an IntEnum too; never bool) or a NumPy integer, alone
 * or as the only item of a 1-tuple -- cuda-python returns (CUresult,).  Any
 * other object is not inspected: calling its __index__ could fail or run
 * user code. */
static PyObject *
error_code_of(PyObject *r)
{
    if (PyTuple_CheckExact(r) && PyTuple_GET_SIZE(r) == 1)
        r = PyTuple_GET_ITEM(r, 0);
    if (PyLong_Check(r))
        return PyBool_Check(r) ? NULL : r;
    /* numpy.timedelta64 is an Integer scalar too, but no error code */
    if (PyArray_IsScalar(r, Integer) && !PyArray_IsScalar(r, Timedelta))
        return r;
    return NULL;
}

static int
python_sync(call_plan *p, int64_t *t_after)
{
    PyObject *r = PyObject_CallNoArgs(p->sync_fn);
    if (t_after)
        *t_after = shp_now_ns();   /* the verdict on r below is not the device's time */
    if (r == NULL)
        return -1;
    if (r == Py_None) {
        Py_DECREF(r);
        return 0;
    }
    /* A non-zero integer is an error code (a raw ctypes cuCtxSynchronize
     * returns one): ignoring it is how a dead sync goes unnoticed. */
    PyObject *code = error_code_of(r);
    if (code != NULL) {
        /* The value itself decides, any size (a c_uint64 restype gives 2**64-1);
         * no user code runs: before 3.10 PyNumber_Index hands an int subclass
         * back as it is, and PyObject_IsTrue would call its __bool__. */
        PyObject *idx = PyNumber_Index(code);
        int overflow = 0;
        long long v = idx ? PyLong_AsLongLongAndOverflow(idx, &overflow) : -1;
        Py_XDECREF(idx);
        if (v == -1 && PyErr_Occurred()) {
            PyErr_Clear();   /* not readable as an integer: not an error code */
        }
        else if (v != 0 || overflow != 0) {
            PyErr_Format(PyExc_RuntimeError,
                         "sync_fn returned %R: a non-zero integer from a sync hook is taken "
                         "as an error code (cuCtxSynchronize returns 0 on success)", r);
            Py_DECREF(r);
            return -1;
        }
    }
    Py_DECREF(r);
    return 0;
}

/* Sync; *t_after (if given) is read right after the sync completes and, for
 * the native sync, before the GIL is taken back.  0 / -1. */
static int
do_sync(call_plan *p, int64_t *t_after)
{
    switch (p->sync) {
    case SYNC_NATIVE: {
        shp_CUresult rc;
        int64_t t = 0;
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
    case SYNC_PYTHON:
        return python_sync(p, t_after);
    default:
        if (t_after)
            *t_after = shp_now_ns();
        return 0;
    }
}

static void
vram_sample(call_plan *p, sample_run *run)
{
    size_t free_b, total_b;
    if (shp_cuda_meminfo_nogil(p->st, &p->cuda, &free_b, &total_b) == 0 && total_b >= free_b) {
        size_t used = total_b - free_b;
        if (used > run->vram_peak_used)
            run->vram_peak_used = used;
    }
}

/* Grow both buffers geometrically, touching the new pages now so that they
 * are not first faulted in between two timed calls. */
static int
grow(sample_run *run, shp_hwm_window *ram)
{
    Py_ssize_t ncap = run->cap * 2;
    if (ncap > run->max_iters)
        ncap = run->max_iters;
    int64_t before = ram ? shp_rss_bytes() : 0;
    double *s = PyMem_Realloc(run->samples, (size_t)ncap * sizeof(double));
    if (s == NULL)
        return PyErr_NoMemory(), -1;
    run->samples = s;
    double *c = PyMem_Realloc(run->scratch, (size_t)ncap * sizeof(double));
    if (c == NULL)
        return PyErr_NoMemory(), -1;
    run->scratch = c;
    memset(run->samples + run->cap, 0, (size_t)(ncap - run->cap) * sizeof(double));
    memset(run->scratch + run->cap, 0, (size_t)(ncap - run->cap) * sizeof(double));
    run->cap = ncap;
    if (ram && before >= 0) {
        int64_t after = shp_rss_bytes();
        if (after > before)
            run->harness_bytes += after - before;
    }
    return 0;
}

/* Drop what writing to stderr raised -- but not a Ctrl-C that landed in a
 * Python-level stream (a notebook's): that stays set, and -1 says so. */
static int
forget_stream_error(void)
{
    if (PyErr_ExceptionMatches(PyExc_KeyboardInterrupt))
        return -1;
    PyErr_Clear();
    return 0;
}

/* 0, or -1 with a KeyboardInterrupt set (from the stream's own code). */
static int
progress_draw_line(progress_line *pl, Py_ssize_t i, Py_ssize_t total, int64_t elapsed_ns,
                   int final)
{
    char line[256], bar[33];
    double el = (double)elapsed_ns / 1e9;
    const char *nm = PyUnicode_AsUTF8(pl->name);
    if (nm == NULL) {   /* e.g. a lone surrogate in the name */
        PyErr_Clear();
        nm = "benchmark";
    }
    if (total > 0) {
        double frac = (double)i / (double)total;
        int filled = (int)(frac * 30.0);
        for (int k = 0; k < 30; k++)
            bar[k] = k < filled ? '#' : '-';
        bar[30] = '\0';
        double eta = i > 0 ? el / (double)i * (double)(total - i) : 0.0;
        PyOS_snprintf(line, sizeof(line), "\r%.60s [%s] %zd/%zd  %.1fs elapsed, ETA %.1fs%s",
                      nm, bar, i, total, el, eta, final ? "\n" : "");
    }
    else {
        PyOS_snprintf(line, sizeof(line), "\r%.60s %zd iterations  %.1fs elapsed%s",
                      nm, i, el, final ? "\n" : "");
    }
    /* Own the stream: its write() may replace sys.stderr and free it. */
    PyObject *err = PySys_GetObject("stderr");
    Py_XINCREF(err);
    if (err == NULL || err == Py_None || PyFile_WriteString(line, err) < 0) {
        Py_XDECREF(err);
        pl->mode = 0;   /* a broken stderr must not fail the benchmark */
        return err == NULL || err == Py_None ? 0 : forget_stream_error();
    }
    PyObject *r = PyObject_CallMethod(err, "flush", NULL);
    int rc = r == NULL ? forget_stream_error() : 0;
    Py_XDECREF(r);
    Py_DECREF(err);
    pl->drawn = 1;
    return rc;
}

/* The closing line, after the loop; may run with an exception set (a run
 * that raised): that exception is put aside and restored untouched, since
 * PyFile_WriteString refuses to write while one is pending and the clean-up
 * in progress_draw_line would otherwise clear the user's exception.  A
 * Ctrl-C in the stream here comes too late to stop anything: it is re-armed
 * (where Python handles SIGINT), to reach the caller as if it came next. */
static void
progress_close(progress_line *pl, Py_ssize_t i, Py_ssize_t total, int64_t elapsed_ns)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (progress_draw_line(pl, i, total, elapsed_ns, 1) < 0) {
        PyErr_Clear();
        PyErr_SetInterrupt();
    }
    PyErr_Restore(type, value, tb);
}

/* Auto mode: on for runs expected to take over 2 s, when someone can see it. */
static int
progress_interactive(void)
{
    PyObject *err = PySys_GetObject("stderr");
    if (err == NULL || err == Py_None)
        return 0;
    /* A Jupyter kernel's stderr is ipykernel's OutStream, which is no tty but
     * is seen.  (Testing for ipykernel in sys.modules is wrong: importing it,
     * as a test suite may, does not put the process in a notebook.) */
    Py_INCREF(err);
    int kernel = 0;   /* ipykernel's OutStream, or a class derived from it */
    PyObject *mro = Py_TYPE(err)->tp_mro;
    Py_XINCREF(mro);   /* a metaclass's attribute lookup could replace it */
    for (Py_ssize_t i = 0; mro != NULL && i < PyTuple_GET_SIZE(mro) && !kernel; i++) {
        PyObject *mod = PyObject_GetAttrString(PyTuple_GET_ITEM(mro, i), "__module__");
        const char *mname = mod != NULL && PyUnicode_Check(mod) ? PyUnicode_AsUTF8(mod) : NULL;
        kernel = mname != NULL && strncmp(mname, "ipykernel.", 10) == 0;
        Py_XDECREF(mod);
        PyErr_Clear();
    }
    Py_XDECREF(mro);
    if (kernel) {
        Py_DECREF(err);
        return 1;
    }
    PyObject *r = PyObject_CallMethod(err, "isatty", NULL);
    Py_DECREF(err);
    int tty = r ? PyObject_IsTrue(r) : 0;
    Py_XDECREF(r);
    if (tty < 0 || r == NULL)
        PyErr_Clear();
    return tty > 0;
}

/* Between timed iterations.  0, or -1 with a KeyboardInterrupt set: a
 * Ctrl-C that landed in the stream's write() stops the run like one landing
 * anywhere else between iterations. */
static int
progress_tick(progress_line *pl, Py_ssize_t i, Py_ssize_t total, int64_t now, int64_t start)
{
    if (pl == NULL || pl->mode == 0)
        return 0;
    int64_t el = now - start;
    if (pl->mode < 0) {
        if (el < 500000000LL)
            return 0;   /* decide after 0.5 s, from the rate so far */
        double projected = total > 0 && i > 0 ? (double)el / (double)i * (double)total : 3e9;
        pl->mode = projected > 2e9 && progress_interactive();
        if (pl->mode == 0)
            return 0;
    }
    if (now - pl->last_ns < SHP_PROGRESS_PERIOD_NS && pl->drawn)
        return 0;
    pl->last_ns = now;
    return progress_draw_line(pl, i, total, el, 0);
}

/* Between iterations (never inside t0..t1): memory telemetry, release the
 * result (after the RSS sample, so memory it holds counts), Ctrl-C.
 * Steals r.  0 / -1. */
static int
after_call(call_plan *p, PyObject *r, shp_hwm_window *ram, int vram, sample_run *run)
{
    if (ram != NULL)
        shp_window_sample(ram);
    Py_DECREF(r);
    if (vram)
        vram_sample(p, run);
    return PyErr_CheckSignals();
}

typedef enum { PHASE_WARMUP, PHASE_TIMED } phase;
static const char *const phase_names[] = {"warm-up", "timed"};
static const char *const func_note = "benchmark %R: raised by func in %s iteration %zd of %zd";
static const char *const sync_note = "benchmark %R: raised by sync_fn in %s iteration %zd of %zd";

/*
 * The timed loop.  Runs at least `min_iters` iterations; with a target it
 * goes on until the median's CI is narrow enough, max_time_ns is spent or
 * max_iters is reached.  Returns 0, or -1 with the exception set; *done is
 * the number of completed (stored) iterations either way.
 */
static int
timed_loop(call_plan *p, sample_run *run, Py_ssize_t min_iters, double target,
           int64_t max_time_ns, shp_hwm_window *ram, int vram, progress_line *pl,
           PyObject *name)
{
    int64_t t0, t1 = 0;
    Py_ssize_t next_check = min_iters;
    int adaptive = target > 0;
    run->start_ns = shp_now_ns();
    int64_t deadline = max_time_ns > 0 && max_time_ns < INT64_MAX - run->start_ns
                           ? run->start_ns + max_time_ns : INT64_MAX;
    Py_ssize_t total = adaptive ? 0 : min_iters;
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

        if (do_sync(p, NULL) < 0) {
            note_current(sync_note, name, "before timed", i, min_iters);
            return -1;
        }
        t0 = shp_now_ns();
        PyObject *r = PyObject_Vectorcall(p->func, p->argv + 1, p->nargsf, p->kwnames);
        if (r == NULL) {
            note_current(func_note, name, phase_names[PHASE_TIMED], i, min_iters);
            return -1;
        }
        if (do_sync(p, &t1) < 0) {
            Py_DECREF(r);
            note_current(sync_note, name, "after timed", i, min_iters);
            return -1;
        }
        /* ---- outside the timed region ---- */
        run->samples[i] = (double)(t1 - t0);
        run->n = i + 1;
        if (after_call(p, r, ram, vram, run) < 0 ||
            progress_tick(pl, i + 1, total, t1, run->start_ns) < 0)
            return -1;
    }
    return 0;
}

static int
warmup_loop(call_plan *p, Py_ssize_t n, shp_hwm_window *ram, int vram, sample_run *run,
            PyObject *name)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = PyObject_Vectorcall(p->func, p->argv + 1, p->nargsf, p->kwnames);
        if (r == NULL) {
            note_current(func_note, name, phase_names[PHASE_WARMUP], i, n);
            return -1;
        }
        if (do_sync(p, NULL) < 0) {
            Py_DECREF(r);
            note_current(sync_note, name, "after warm-up", i, n);
            return -1;
        }
        if (after_call(p, r, ram, vram, run) < 0)
            return -1;
    }
    return 0;
}

static int
alloc_run(sample_run *run, Py_ssize_t cap, Py_ssize_t max_iters)
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

static void
free_run(sample_run *run)
{
    PyMem_Free(run->samples);
    PyMem_Free(run->scratch);
    run->samples = run->scratch = NULL;
}

/* ---- the harness's own floor ---------------------------------------------- */

/* Median (ns) of a native no-op through the same loop and sync kind,
 * measured once per process and sync kind, then cached. */
static int
ensure_overhead(shp_state *st, call_plan *user, double *out_ns)
{
    int kind = user->sync == SYNC_NATIVE ? 1 : 0;
    if (st->overhead_ns[kind] >= 0) {
        *out_ns = st->overhead_ns[kind];
        return 0;
    }
    call_plan p;
    memset(&p, 0, sizeof(p));
    PyObject *slot[1] = {NULL};
    p.func = st->noop;
    p.argv = slot;
    p.nargsf = PY_VECTORCALL_ARGUMENTS_OFFSET;
    p.sync = kind ? SYNC_NATIVE : SYNC_NONE;
    p.cuda = user->cuda;
    p.st = st;
    sample_run run;
    memset(&run, 0, sizeof(run));
    if (alloc_run(&run, SHP_OVERHEAD_ITERS, SHP_OVERHEAD_ITERS) < 0)
        return -1;
    int rc = -1;
    PyObject *name = PyUnicode_FromString("overhead");
    if (name != NULL && warmup_loop(&p, SHP_OVERHEAD_WARMUP, NULL, 0, &run, name) == 0 &&
        timed_loop(&p, &run, SHP_OVERHEAD_ITERS, 0, 0, NULL, 0, NULL, name) == 0) {
        st->overhead_ns[kind] = shp_percentile_inplace(run.samples, run.n, 0.5);
        *out_ns = st->overhead_ns[kind];
        rc = 0;
    }
    Py_XDECREF(name);
    free_run(&run);
    return rc;
}

/* ---- results --------------------------------------------------------------- */

static void
fmt_g(char *buf, size_t n, double v)
{
    PyOS_snprintf(buf, n, "%.3g", v);
}

static int
emit_warnings(shp_state *st, shp_Stats *s, double overhead_ns)
{
    char a[32], b[32];
    double med_ns = s->median_ms * 1e6;
    if (overhead_ns > 0 && med_ns < 100.0 * overhead_ns) {
        fmt_g(a, sizeof(a), s->median_ms);
        fmt_g(b, sizeof(b), overhead_ns / 1e6);
        if (PyErr_WarnFormat(st->warning, 1,
                             "benchmark %R: the median (%s ms) is under 100x the harness's own "
                             "overhead (%s ms), so the figure is mostly measurement cost; time a "
                             "larger workload (e.g. a loop of calls) and divide",
                             s->name, a, b) < 0)
            return -1;
    }
    double res = (double)shp_clock_resolution_ns();
    if (med_ns < 20.0 * res) {
        fmt_g(a, sizeof(a), s->median_ms);
        if (PyErr_WarnFormat(st->warning, 1,
                             "benchmark %R: the timer resolution (%zd ns) is coarse for a median "
                             "of %s ms; each sample is quantised", s->name, (Py_ssize_t)res, a) < 0)
            return -1;
    }
    return 0;
}

/* Build the result from the completed iterations (run->n >= 1).  Takes
 * the sample buffer from `run`. */
static shp_Stats *
make_stats(shp_state *st, bench_opts *o, call_plan *p, sample_run *run, int64_t ram_bytes,
           shp_peak_method method, size_t vram_base, int vram, double overhead_ns)
{
    shp_Stats *s = shp_stats_alloc(st);
    if (s == NULL)
        return NULL;
    Py_ssize_t n = run->n;
    for (Py_ssize_t i = 0; i < n; i++)
        run->samples[i] /= 1e6;   /* ns -> ms, once */
    shp_summary sm;
    shp_summarize(run->samples, n, run->scratch, &sm);
    shp_stats_apply_summary(s, &sm);
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
    s->env = shp_env_dict(st);
    if (s->name == NULL || s->device == NULL || s->ram_peak_method == NULL || s->env == NULL)
        goto error;
    if (p->have_cuda && shp_cuda_describe(st, &p->cuda, s->env) < 0)
        goto error;
    s->warmup_iters = o->num_warmup;
    s->timed_iters = n;
    int64_t ram = ram_bytes - run->harness_bytes;
    s->ram_delta_mb = ram > 0 ? (double)ram / SHP_MIB : 0.0;
    if (vram && run->vram_peak_used > vram_base)
        s->vram_delta_mb = (double)(run->vram_peak_used - vram_base) / SHP_MIB;
    s->overhead_ms = overhead_ns / 1e6;
    s->target_met = run->target_met;
    return s;
error:
    Py_DECREF(s);
    return NULL;
}

/* KeyboardInterrupt in the timed loop: BenchmarkInterrupted carrying what
 * was measured, chained to the original interrupt. */
static void
raise_interrupted(shp_state *st, shp_Stats *s)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL && value != NULL)
        PyException_SetTraceback(value, tb);
    PyObject *exc = PyObject_CallFunction(st->interrupted, "s",
                                          "benchmark interrupted; .stats holds the iterations completed so far");
    if (exc == NULL || PyObject_SetAttrString(exc, "stats", (PyObject *)s) < 0) {
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
    call_plan p;
    sample_run run;
    shp_hwm_window win;
    progress_line pl;
    memset(&o, 0, sizeof(o));
    memset(&p, 0, sizeof(p));
    memset(&run, 0, sizeof(run));
    memset(&pl, 0, sizeof(pl));
    int window_open = 0, gc_held = 0, vram = 0;
    size_t vram_base = 0;
    double overhead_ns = 0;
    PyObject *result = NULL, *name = NULL;

    if (parse_call(args, nargs, kwnames, &o, &p) < 0 || resolve_sync(st, &o, &p) < 0)
        goto done;
    if (ensure_overhead(st, &p, &overhead_ns) < 0)
        goto done;
    name = o.name ? Py_NewRef(o.name) : PyUnicode_FromString("BenchmarkTarget");
    if (name == NULL)
        goto done;

    int adaptive = o.target_rel_ci > 0;
    double max_time_s = o.max_time_s > 0 ? o.max_time_s : (adaptive ? SHP_ADAPTIVE_DEFAULT_TIME_S : 0);
    Py_ssize_t max_iters = adaptive ? (o.num_iters > SHP_ADAPTIVE_MAX_SAMPLES ? o.num_iters
                                                                               : SHP_ADAPTIVE_MAX_SAMPLES)
                                    : o.num_iters;
    Py_ssize_t cap = adaptive && o.num_iters < 1024 ? 1024 : o.num_iters;
    if (alloc_run(&run, cap, max_iters) < 0)
        goto done;
    if (adaptive)
        run.target_met = 0;

    /* 1. baseline */
    shp_peak_method method = SHP_PEAK_OFF;
    if (o.track_ram) {
        shp_window_open(&win);
        window_open = 1;
    }
    if (o.track_vram && p.have_cuda) {
        size_t free_b, total_b;
        if (shp_cuda_meminfo_nogil(st, &p.cuda, &free_b, &total_b) == 0 && total_b >= free_b) {
            vram = 1;
            vram_base = total_b - free_b;
            run.vram_peak_used = vram_base;
        }
    }
    /* 2. warm-up */
    if (warmup_loop(&p, o.num_warmup, window_open ? &win : NULL, vram, &run, name) < 0)
        goto done;
    /* 3. a clean heap before the timed loop, then (optionally) no collector */
    full_collect();
    if (o.disable_gc) {
        if (gc_hold() < 0)
            goto done;
        gc_held = 1;
    }
    pl.mode = o.progress;
    pl.name = name;
    /* seconds -> ns without overflow: ~292 years and beyond mean "no limit" */
    int64_t max_time_ns = max_time_s * 1e9 >= 9e18 ? INT64_MAX : (int64_t)(max_time_s * 1e9);
    int loop_rc = timed_loop(&p, &run, o.num_iters, o.target_rel_ci, max_time_ns,
                             window_open ? &win : NULL, vram, &pl, name);
    if (gc_held) {
        gc_release();
        gc_held = 0;
    }
    if (pl.drawn && pl.mode != 0)   /* not to a stream that failed */
        progress_close(&pl, run.n, adaptive ? 0 : o.num_iters, shp_now_ns() - run.start_ns);
    int interrupted = loop_rc < 0 && run.n > 0 && PyErr_ExceptionMatches(PyExc_KeyboardInterrupt);
    if (loop_rc < 0 && !interrupted)
        goto done;

    int64_t ram_bytes = 0;
    if (window_open) {
        method = win.method;
        ram_bytes = shp_window_close(&win);
        window_open = 0;
    }
    if (interrupted) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        shp_Stats *s = make_stats(st, &o, &p, &run, ram_bytes, method, vram_base, vram, overhead_ns);
        if (s == NULL) {
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(tb);
            goto done;
        }
        PyErr_Restore(type, value, tb);
        raise_interrupted(st, s);
        Py_DECREF(s);
        goto done;
    }
    shp_Stats *s = make_stats(st, &o, &p, &run, ram_bytes, method, vram_base, vram, overhead_ns);
    if (s == NULL)
        goto done;
    if (emit_warnings(st, s, overhead_ns) < 0) {
        Py_DECREF(s);
        goto done;
    }
    result = (PyObject *)s;
done:
    if (gc_held)
        gc_release();
    if (window_open)
        shp_window_close(&win);
    free_run(&run);
    plan_clear(&p);
    Py_XDECREF(name);
    return result;
}

/* ---- test hook ------------------------------------------------------------- */

PyObject *
shp_stats_from_samples(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames)
{
    shp_state *st = PyModule_GetState(module);
    if (nargs != 1 || (kwnames && PyTuple_GET_SIZE(kwnames))) {
        PyErr_SetString(PyExc_TypeError, "_stats_from_samples(samples_ms) takes one argument");
        return NULL;
    }
    double *buf = NULL, *scratch = NULL;
    Py_ssize_t n = 0;
    if (shp_samples_from_object(args[0], &buf, &n) < 0)
        return NULL;
    if (n < 1) {
        PyMem_Free(buf);
        PyErr_SetString(PyExc_ValueError, "_stats_from_samples needs at least one sample");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!isfinite(buf[i])) {
            PyMem_Free(buf);
            PyErr_Format(PyExc_ValueError, "sample %zd is not finite", i);
            return NULL;
        }
    }
    scratch = PyMem_Malloc((size_t)n * sizeof(double));
    shp_Stats *s = scratch ? shp_stats_alloc(st) : NULL;
    if (s == NULL) {
        PyMem_Free(buf);
        PyMem_Free(scratch);
        return scratch ? NULL : PyErr_NoMemory();
    }
    shp_summary sm;
    shp_summarize(buf, n, scratch, &sm);
    PyMem_Free(scratch);
    shp_stats_apply_summary(s, &sm);
    if (shp_stats_adopt_samples(s, buf, n) < 0) {
        Py_DECREF(s);
        return NULL;
    }
    s->timed_iters = n;
    s->name = PyUnicode_FromString("samples");
    s->device = PyUnicode_FromString("CPU");
    if (s->name == NULL || s->device == NULL) {
        Py_DECREF(s);
        return NULL;
    }
    return (PyObject *)s;
}
