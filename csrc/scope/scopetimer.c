/*
 * scopetimer.c -- Timer: one `with` scope, entered and left in C.
 *
 * Enter: the CUDA sync (when asked; native, checked, GIL released), the
 * device-memory baseline, host memory -- by default one RSS read (memory.c:
 * an open /proc/self/statm; an enter takes a read of at most 1 us before,
 * scoperss.c), as the released scope's end-minus-start did, because a scope
 * goes around per-frame code -- the node (scope.c: per thread / task); with
 * track_memory="peak" a high-water-mark window, the one benchmark_callable
 * uses, exact but costly and resetting the process's peak-RSS record; then
 * the CPU and wall clocks, last.  Exit: the closing sync, the clocks first,
 * then the node left, host memory (always a fresh read), device memory, the
 * node's totals and histogram, one trace event, and the context's previous
 * node back (through the ContextVar token of the enter: leaving in another
 * thread or asyncio task raises RuntimeError and the scope stays entered
 * where it was entered).  The scope is left whatever the block did; the
 * block's exception goes on unchanged.
 */
#include "scope/scope.h"

#include <structmember.h>

#include "pythread.h"

/* Timer(name, profiler=None, track_memory=True, track_vram=False, sync_cuda=False,
 *       device_id=0), from vectorcall arguments. */
static PyObject *
timer_from_args(PyTypeObject *type, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    static const char *const names[] = {"name", "profiler", "track_memory", "track_vram",
                                        "sync_cuda", "device_id"};
    static const shp_argspec spec = {"Timer", names, 6, 6, 1, 0};
    PyObject *v[6], *name = NULL;
    int tm = SHP_MEM_RSS, tv = 0, sc = 0;
    Py_ssize_t id = 0;
    if (shp_args_parse(&spec, args, PyVectorcall_NARGS(nargsf), kwnames, v) < 0 ||
        shp_arg_str(v[0], "Timer()", "name", 0, &name) < 0 ||
        (v[2] && shp_arg_memory(v[2], "Timer()", "track_memory", &tm) < 0) || (v[3] && shp_arg_flag(v[3], &tv) < 0) ||
        (v[4] && shp_arg_flag(v[4], &sc) < 0) ||
        (v[5] && shp_arg_ssize(v[5], "Timer()", "device_id", &id) < 0))
        return NULL;
    if (id < 0 || id >= SHP_MAX_CUDA_DEVICES)
        return shp_arg_value_error("Timer()", "device_id", "a CUDA device ordinal (0..63)",
                                   v[5]), NULL;
    shp_state *st = shp_state_from_type(type);
    if (st == NULL)
        return NULL;
    PyObject *profiler = v[1];
    if (profiler == NULL || profiler == Py_None)
        profiler = st->default_profiler;   /* the module-level `profiler`, if any */
    else if (!PyObject_TypeCheck(profiler, st->profiler_type))
        return shp_arg_type_error("Timer()", "profiler", "a HierarchicalProfiler or None",
                                  profiler), NULL;
    return shp_timer_make(type, name, profiler, tm, tv, sc, (int)id);
}

PyObject *
shp_timer_make(PyTypeObject *type, PyObject *name, PyObject *profiler, int track_memory,
               int track_vram, int sync_cuda, int device_id)
{
    shp_Timer *t = (shp_Timer *)type->tp_alloc(type, 0);
    if (t == NULL)
        return NULL;
    t->name = Py_NewRef(name);
    t->profiler = Py_XNewRef(profiler);
    t->track_memory = (char)track_memory;
    t->track_vram = (char)track_vram;
    t->sync_cuda = (char)sync_cuda;
    t->device_id = device_id;
    return (PyObject *)t;
}

/* Calls of Timer itself (module.c installs it as the type's tp_vectorcall):
 * no argument tuple, no keyword dict. */
PyObject *
shp_timer_vectorcall(PyObject *type, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    return timer_from_args((PyTypeObject *)type, args, nargsf, kwnames);
}

/* Subclasses (which do not inherit tp_vectorcall) come through here. */
static PyObject *
Timer_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *stack[6];
    PyObject *kwnames = NULL, *hold = NULL;
    /* the keyword values are held by `hold` while the flags' __bool__ runs */
    if (shp_args_unpack("Timer", args, kwargs, stack, 6, &kwnames, &hold) < 0)
        return NULL;
    PyObject *res = timer_from_args(type, stack, (size_t)PyTuple_GET_SIZE(args), kwnames);
    Py_XDECREF(kwnames);
    Py_XDECREF(hold);
    return res;
}

static int
Timer_traverse(PyObject *op, visitproc visit, void *arg)
{
    shp_Timer *t = (shp_Timer *)op;
    Py_VISIT(Py_TYPE(op));
    Py_VISIT(t->name);
    Py_VISIT(t->profiler);
    Py_VISIT(t->node);
    Py_VISIT(t->token);
    return 0;
}

/* A Timer going away while entered (an abandoned generator, a manual
 * __enter__): its entry can never be left, so the context that entered it
 * must stop nesting under it. */
static void
timer_abandon(shp_Timer *t)
{
    if (t->active && t->token != NULL)
        shp_scope_abandon(t->token);
}

static int
Timer_clear(PyObject *op)
{
    shp_Timer *t = (shp_Timer *)op;
    timer_abandon(t);
    Py_CLEAR(t->name);
    Py_CLEAR(t->profiler);
    Py_CLEAR(t->node);
    Py_CLEAR(t->token);
    return 0;
}

static void
Timer_dealloc(PyObject *op)
{
    shp_Timer *t = (shp_Timer *)op;
    PyTypeObject *tp = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    /* entered and never exited (an abandoned generator, a manual __enter__):
     * the window sits in the process-wide list and must leave it */
    if (t->window_open) {
        (void)shp_window_close(&t->win);
        t->window_open = 0;
    }
    if (t->weakreflist != NULL)
        PyObject_ClearWeakRefs(op);
    (void)Timer_clear(op);   /* abandons an entry still open */
    tp->tp_free(op);
    Py_DECREF(tp);
}

/* The raised exception, normalised, with its traceback (new reference; the
 * error indicator is cleared), and back.  PyErr_GetRaisedException is 3.12+. */
static PyObject *
take_exception(void)
{
    PyObject *type = NULL, *value = NULL, *tb = NULL;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (value != NULL && tb != NULL)
        (void)PyException_SetTraceback(value, tb);
    Py_XDECREF(type);
    Py_XDECREF(tb);
    return value;
}

static void
give_exception(PyObject *value)
{
    if (value == NULL)
        return;
    PyErr_Restore(Py_NewRef(Py_TYPE(value)), value, PyException_GetTraceback(value));
}

/* Resolve the CUDA target once per Timer; 0 / -1. */
static int
timer_cuda(shp_Timer *t)
{
    if (t->have_cuda)
        return 0;
    shp_state *st = shp_state_from_type(Py_TYPE(t));
    if (st == NULL)
        return -1;
    if (shp_cuda_target_init(st, t->device_id, &t->cuda) < 0) {
        PyObject *exc = take_exception();
        shp_add_note(exc, "in Timer %R (sync_cuda=%s, track_vram=%s): a CUDA scope needs the "
                     "CUDA driver; pass sync_cuda=False and track_vram=False (or device='CPU' "
                     "to HierarchicalProfiler) to time on the host only", t->name,
                     t->sync_cuda ? "True" : "False", t->track_vram ? "True" : "False");
        give_exception(exc);
        return -1;
    }
    t->have_cuda = 1;
    return 0;
}

static shp_CUresult
timer_sync(shp_Timer *t)
{
    shp_state *st = shp_state_from_type(Py_TYPE(t));
    shp_CUresult rc;
    if (st == NULL)
        return -1;
    Py_BEGIN_ALLOW_THREADS
    rc = shp_cuda_sync_nogil(st, &t->cuda);
    Py_END_ALLOW_THREADS
    return rc;
}

/* t->active: 0 idle, 1 entered, 2 being entered or exited.  Entering and
 * exiting release the GIL (CUDA) and can run finalizers (any allocation):
 * a Timer is marked before either can happen, so that another thread or a
 * finalizer entering or exiting the same Timer meanwhile is refused instead
 * of overwriting its entry and its RAM window. */
static int
timer_begin(shp_Timer *t)
{
    if ((t->sync_cuda || t->track_vram) && timer_cuda(t) < 0)
        return -1;
    if (t->sync_cuda) {
        shp_CUresult rc = timer_sync(t);
        if (rc != 0) {
            shp_state *st = shp_state_from_type(Py_TYPE(t));
            return st != NULL ? shp_cuda_raise(st, rc, "Timer: cuCtxSynchronize before the "
                                               "scope failed") : -1;
        }
    }
    if (t->track_vram) {
        shp_state *st = shp_state_from_type(Py_TYPE(t));
        size_t free_b = 0, total_b = 0;
        shp_CUresult rc;
        if (st == NULL)
            return -1;
        Py_BEGIN_ALLOW_THREADS
        rc = shp_cuda_meminfo_nogil(st, &t->cuda, &free_b, &total_b);
        Py_END_ALLOW_THREADS
        if (rc != 0)
            return shp_cuda_raise(st, rc, "Timer: cuMemGetInfo_v2 failed");
        t->vram_used0 = total_b - free_b;
    }
    if (t->track_memory == SHP_MEM_RSS) {
        /* before the push, nearer the previous scope's exit, whose read it may
         * take (scoperss.c): on 3.9 a push switches the collector through the
         * gc module, longer than the microsecond allowed */
        t->rss0 = shp_rss_at_enter(shp_now_ns(), NULL);
        t->rss_open = t->rss0 >= 0;
    }
    if (t->profiler != NULL) {
        PyObject *token = NULL;
        shp_Node *node = shp_scope_push((shp_Profiler *)t->profiler, t->name, &token);
        if (node == NULL) {
            t->rss_open = 0;
            return -1;
        }
        Py_XSETREF(t->node, (PyObject *)node);
        Py_XSETREF(t->token, token);
    }
    if (t->track_memory == SHP_MEM_PEAK) {
        shp_window_open(&t->win);
        t->window_open = 1;
    }
    t->c0_ns = shp_process_cpu_ns();
    t->t0_ns = shp_now_ns();
    return 0;
}

static PyObject *
Timer_enter(PyObject *op, PyObject *unused)
{
    (void)unused;
    shp_Timer *t = (shp_Timer *)op;
    if (t->active) {
        PyErr_Format(PyExc_RuntimeError,
                     "Timer %R is already active: one Timer object cannot be entered again "
                     "before it exits (make one Timer per `with`)", t->name);
        return NULL;
    }
    t->active = 2;
    if (timer_begin(t) < 0) {
        t->active = 0;
        return NULL;
    }
    t->active = 1;
    return Py_NewRef(op);
}

/* a + b, held at the int64 range (a node's totals are settable) */
static int64_t
add_sat(int64_t a, int64_t b)
{
    if (b > 0 && a > INT64_MAX - b)
        return INT64_MAX;
    if (b < 0 && a < INT64_MIN - b)
        return INT64_MIN;
    return a + b;
}

static void
timer_record(shp_Timer *t, int64_t wall, int64_t cpu)
{
    shp_Node *n = (shp_Node *)t->node;
    if (n->calls < LLONG_MAX)   /* settable up to 2**63 - 1: stops there, never wraps */
        n->calls++;
    n->wall_ns = add_sat(n->wall_ns, wall);
    n->cpu_ns = add_sat(n->cpu_ns, cpu);
    shp_hist_record(&n->hist, wall);
    if (t->track_memory && t->ram_delta_mb > n->peak_ram_mb)
        n->peak_ram_mb = t->ram_delta_mb;
    if (t->track_vram && t->vram_delta_mb > n->peak_vram_mb)
        n->peak_vram_mb = t->vram_delta_mb;
    shp_Profiler *p = (shp_Profiler *)t->profiler;
    if (n->gen == p->gen && n->id != SHP_SCOPE_NO_ID) {
        shp_event e = {t->t0_ns, wall, (uint64_t)PyThread_get_thread_ident(), n->id, n->depth};
        shp_ring_push(&p->ring, &e);
    }
}

static PyObject *timer_end(shp_Timer *t, PyObject *const *args, Py_ssize_t nargs);

static PyObject *
Timer_exit(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    shp_Timer *t = (shp_Timer *)op;
    if (t->active != 1) {
        PyErr_Format(PyExc_RuntimeError, t->active ? "Timer %R is being entered or exited "
                     "elsewhere" : "Timer %R exited without being entered", t->name);
        return NULL;
    }
    t->active = 2;
    PyObject *res = timer_end(t, args, nargs);
    if (t->active == 2)   /* left (1: refused, it stays entered) */
        t->active = 0;
    return res;
}

static PyObject *
timer_end(shp_Timer *t, PyObject *const *args, Py_ssize_t nargs)
{
    shp_CUresult rc = 0;
    if (t->sync_cuda)
        rc = timer_sync(t);
    int64_t t1 = shp_now_ns();
    int64_t c1 = shp_process_cpu_ns();
    if (t->token != NULL) {
        /* refused in another thread / task (the Timer stays entered), unless a
         * generator is being closed there: then it is left for good */
        int closing = nargs >= 1 && PyType_Check(args[0]) &&
                      PyType_IsSubtype((PyTypeObject *)args[0],
                                       (PyTypeObject *)PyExc_GeneratorExit);
        if (shp_scope_leave((shp_Profiler *)t->profiler, t->name, t->token, closing) < 0) {
            t->active = 1;
            return NULL;
        }
        Py_CLEAR(t->token);
    }
    int64_t wall = t1 - t->t0_ns, cpu = c1 - t->c0_ns;
    t->elapsed_wall = (double)wall / 1e9;
    t->elapsed_cpu = (double)cpu / 1e9;
    if (t->window_open) {
        t->ram_delta_mb = (double)shp_window_close(&t->win) / SHP_MIB;
        t->window_open = 0;
    }
    else if (t->rss_open) {
        int64_t rss1 = shp_rss_at_exit(NULL);
        t->ram_delta_mb = rss1 > t->rss0 ? (double)(rss1 - t->rss0) / SHP_MIB : 0.0;
        t->rss_open = 0;
    }
    if (t->track_vram && rc == 0) {
        shp_state *st = shp_state_from_type(Py_TYPE(t));
        size_t free_b = 0, total_b = 0;
        if (st != NULL) {
            Py_BEGIN_ALLOW_THREADS
            rc = shp_cuda_meminfo_nogil(st, &t->cuda, &free_b, &total_b);
            Py_END_ALLOW_THREADS
        }
        else {
            PyErr_Clear();
        }
        size_t used = total_b - free_b;
        t->vram_delta_mb = used > t->vram_used0 ? (double)(used - t->vram_used0) / SHP_MIB : 0.0;
    }
    if (t->profiler != NULL && t->node != NULL)
        timer_record(t, wall, cpu);
    if (rc != 0) {
        shp_state *st = shp_state_from_type(Py_TYPE(t));
        if (st == NULL)
            return NULL;
        (void)shp_cuda_raise(st, rc, "Timer: the closing CUDA sync / memory query failed");
        if (nargs >= 2 && args[1] != Py_None) {
            /* the body raised already: its exception goes on, carrying ours */
            PyObject *ours = take_exception();
            PyObject *msg = PyObject_Str(ours);
            shp_add_note(args[1], "spatialhub: and on leaving Timer %R: %S", t->name,
                         msg != NULL ? msg : Py_None);
            Py_XDECREF(msg);
            Py_XDECREF(ours);
            PyErr_Clear();
            Py_RETURN_FALSE;
        }
        return NULL;
    }
    Py_RETURN_FALSE;
}

static PyObject *
Timer_get_f(PyObject *op, void *closure)
{
    shp_Timer *t = (shp_Timer *)op;
    switch ((intptr_t)closure) {
    case 0: return PyFloat_FromDouble((double)t->t0_ns / 1e9);
    case 1: return PyFloat_FromDouble((double)t->c0_ns / 1e9);
    default: Py_RETURN_NONE;
    }
}

static PyObject *
Timer_get_obj(PyObject *op, void *closure)
{
    shp_Timer *t = (shp_Timer *)op;
    PyObject *v = (intptr_t)closure == 0 ? t->node : t->profiler;
    return Py_NewRef(v != NULL ? v : Py_None);
}

static PyObject *
Timer_get_active(PyObject *op, void *c)
{
    (void)c;
    return PyBool_FromLong(((shp_Timer *)op)->active);
}

static PyObject *
Timer_get_track_memory(PyObject *op, void *c)
{
    (void)c;
    return shp_memory_mode_obj(((shp_Timer *)op)->track_memory);
}

/* Takes effect at the next enter (an entered scope leaves as it entered). */
static int
Timer_set_track_memory(PyObject *op, PyObject *v, void *c)
{
    (void)c;
    int mode;
    if (v == NULL) {
        PyErr_SetString(PyExc_AttributeError, "cannot delete Timer.track_memory");
        return -1;
    }
    if (shp_arg_memory(v, "Timer", "track_memory", &mode) < 0)
        return -1;
    ((shp_Timer *)op)->track_memory = (char)mode;
    return 0;
}

/* What a user printing a Timer wants to see: its name, and whether it ran and
 * what it measured last (the memory it was asked to track). */
static PyObject *
Timer_repr(PyObject *op)
{
    shp_Timer *t = (shp_Timer *)op;
    PyObject *name = t->name != NULL ? t->name : Py_None;
    if (t->active)
        return PyUnicode_FromFormat("<Timer %R: running>", name);
    if (t->t0_ns == 0)
        return PyUnicode_FromFormat("<Timer %R: not entered>", name);
    char wall[32], cpu[32], ram[48] = "", vram[48] = "";
    shp_format_seconds(t->elapsed_wall, wall, sizeof wall);
    shp_format_seconds(t->elapsed_cpu, cpu, sizeof cpu);
    if (t->track_memory != SHP_MEM_OFF)
        PyOS_snprintf(ram, sizeof ram, ", RAM +%.1f MiB", t->ram_delta_mb);
    if (t->track_vram)
        PyOS_snprintf(vram, sizeof vram, ", VRAM +%.1f MiB", t->vram_delta_mb);
    return PyUnicode_FromFormat("<Timer %R: %s wall, %s CPU%s%s>", name, wall, cpu, ram, vram);
}

static PyGetSetDef timer_getset[] = {
    {"track_memory", Timer_get_track_memory, Timer_set_track_memory,
     "Host memory of the scope: True (RSS at exit minus at enter, the default), 'peak' "
     "(the true peak: a high-water-mark window, which resets the process's peak-RSS "
     "record) or False.", NULL},
    {"node", Timer_get_obj, NULL, "The ProfileNode entered (None before entering).",
     (void *)(intptr_t)0},
    {"profiler", Timer_get_obj, NULL,
     "The profiler recorded into (the module-level `profiler` when none was given).",
     (void *)(intptr_t)1},
    {"start_wall", Timer_get_f, NULL, "perf_counter() at enter, seconds.", (void *)(intptr_t)0},
    {"start_cpu", Timer_get_f, NULL, "process_time() at enter, seconds.", (void *)(intptr_t)1},
    {"active", Timer_get_active, NULL, "Inside the `with` block.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef timer_members[] = {
    {"name", T_OBJECT_EX, offsetof(shp_Timer, name), READONLY, "Scope name."},
    {"track_vram", T_BOOL, offsetof(shp_Timer, track_vram), 0, "Track device memory."},
    {"sync_cuda", T_BOOL, offsetof(shp_Timer, sync_cuda), 0, "Sync the CUDA device around."},
    {"device_id", T_INT, offsetof(shp_Timer, device_id), READONLY, "CUDA device ordinal."},
    {"elapsed_wall", T_DOUBLE, offsetof(shp_Timer, elapsed_wall), READONLY,
     "Wall time of the last call, seconds."},
    {"elapsed_cpu", T_DOUBLE, offsetof(shp_Timer, elapsed_cpu), READONLY,
     "Process CPU time of the last call, seconds."},
    {"ram_delta_mb", T_DOUBLE, offsetof(shp_Timer, ram_delta_mb), READONLY,
     "RSS at the end of the last call minus at its start, MiB (>= 0); with "
     "track_memory='peak', the peak RSS during it minus at its start."},
    {"vram_delta_mb", T_DOUBLE, offsetof(shp_Timer, vram_delta_mb), READONLY,
     "Device used memory at the end of the last call minus at its start, MiB (>= 0)."},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(shp_Timer, weakreflist), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyMethodDef timer_methods[] = {
    {"__enter__", Timer_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))Timer_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot timer_slots[] = {
    {Py_tp_new, Timer_new},
    {Py_tp_dealloc, Timer_dealloc},
    {Py_tp_traverse, Timer_traverse},
    {Py_tp_clear, Timer_clear},
    {Py_tp_repr, Timer_repr},
    {Py_tp_getset, timer_getset},
    {Py_tp_members, timer_members},
    {Py_tp_methods, timer_methods},
    {Py_tp_doc,
     "Timer(name, profiler=None, track_memory=True, track_vram=False, sync_cuda=False,\n"
     "      device_id=0)\n"
     "--\n"
     "\n"
     "Context manager timing its block as one call of a profiler's scope.\n"
     "\n"
     "After the block: elapsed_wall and elapsed_cpu (seconds; the CPU time of the\n"
     "whole process), ram_delta_mb and vram_delta_mb.  The scope is left and\n"
     "recorded even when the block raises; the exception goes on.  A Timer can be\n"
     "entered again once it has exited.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "name : str\n"
     "    The scope's name: a child of the scope it is entered in.\n"
     "profiler : HierarchicalProfiler, optional\n"
     "    Where the call is recorded; None: the module-level profiler.\n"
     "track_memory : bool or 'peak', default True\n"
     "    Host memory: True (RSS at exit minus at enter), 'peak' (the true peak\n"
     "    during the block minus RSS at enter) or False.\n"
     "track_vram : bool, default False\n"
     "    Device memory at exit minus at enter (CUDA, device-wide).\n"
     "sync_cuda : bool, default False\n"
     "    Sync the CUDA device at enter and exit.\n"
     "device_id : int, default 0\n"
     "    The CUDA device's ordinal.\n"
     "\n"
     "Raises\n"
     "------\n"
     "RuntimeError\n"
     "    Entering it while it is entered, or sync_cuda without a CUDA driver or\n"
     "    device.\n"
     "\n"
     "Examples\n"
     "--------\n"
     ">>> prof = HierarchicalProfiler('demo')\n"
     ">>> with Timer('load', profiler=prof) as t:\n"
     "...     _ = sum(range(1000))\n"
     ">>> t.elapsed_wall > 0, prof.root.children['load'].calls\n"
     "(True, 1)"},
    {0, NULL},
};

PyType_Spec shp_timer_spec = {
    .name = "spatialhub.utils.profiling.Timer",
    .basicsize = sizeof(shp_Timer),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = timer_slots,
};

