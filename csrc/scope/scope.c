/*
 * scope.c -- ProfilerCore (the base of the Python HierarchicalProfiler): the
 * scope tree and where each thread / asyncio task is in it.
 *
 * The released module keeps one Python list as the stack of open scopes, so
 * two threads or two asyncio tasks push onto each other's scopes.  Here the
 * stack is not stored at all: each profiler owns a ContextVar holding the
 * calling context's innermost *entry* (scopeframe.c: the node entered and the
 * entry before), and a node knows its parent, so the path root -> current
 * node is the stack.  Every thread starts with an empty
 * context (its scopes nest under the root); an asyncio task runs in a copy of
 * its creator's context (its scopes nest under the scope that created it and
 * never under a sibling's).  Every context's scopes aggregate into the one
 * tree: it is touched only with the GIL held, and a new child is published
 * with PyDict_SetDefault, so two threads creating the same child agree on one.
 *
 * reset() starts a new tree and bumps the profiler's generation; a context
 * still pointing into the old tree is treated as being at the new root.
 * Each scope call also leaves one event in the profiler's bounded trace ring
 * (scopedata.c), which export_chrome_trace() turns into a Chrome trace.
 */
#include "scope/scope.h"

#include <structmember.h>

#define DEFAULT_TRACE_CAPACITY 65536

/* A new tree: root node, registry, empty ring; the generation moves on.
 * Allocating can run a finalizer that renames the root (held here), and
 * freeing the old tree can run one that enters a scope: the old tree is let
 * go only once root, registry, ring and generation all agree again. */
static int
profiler_new_tree(shp_Profiler *p)
{
    PyObject *name = Py_NewRef(p->root_name);
    shp_Node *root = shp_node_new(p->node_type, name);
    Py_DECREF(name);
    if (root == NULL)
        return -1;
    PyObject *nodes = PyList_New(1);
    if (nodes == NULL) {
        Py_DECREF(root);
        return -1;
    }
    PyObject *old_root = p->root, *old_nodes = p->nodes;
    p->gen++;
    root->gen = p->gen;
    root->id = 0;
    PyList_SET_ITEM(nodes, 0, Py_NewRef(root));
    p->root = (PyObject *)root;
    p->nodes = nodes;
    shp_ring_clear(&p->ring);
    Py_XDECREF(old_root);
    Py_XDECREF(old_nodes);
    return 0;
}

static PyObject *Profiler_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf,
                                     PyObject *kwnames);

static PyObject *
Profiler_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    (void)args;
    (void)kwargs;
    shp_state *st = shp_state_from_type(type);
    if (st == NULL)
        return NULL;
    shp_Profiler *p = (shp_Profiler *)type->tp_alloc(type, 0);
    if (p == NULL)
        return NULL;
    p->node_type = (PyTypeObject *)Py_NewRef(st->node_type);
    p->timer_type = (PyTypeObject *)Py_NewRef(st->timer_type);
    p->frame_type = (PyTypeObject *)Py_NewRef(st->frame_type);
    p->root_name = PyUnicode_FromString("Root");
    p->device = PyUnicode_FromString("CPU");
    p->var = PyContextVar_New("spatialhub.utils.profiling.scope", NULL);
    if (p->root_name == NULL || p->device == NULL || p->var == NULL)
        goto error;
    p->vectorcall = Profiler_vectorcall;
    p->track_ram = 1;
    p->device_id = 0;
    shp_ring_init(&p->ring, DEFAULT_TRACE_CAPACITY);
    if (profiler_new_tree(p) < 0)
        goto error;
    return (PyObject *)p;
error:
    Py_DECREF(p);
    return NULL;
}

/* None -> dflt, else truthiness; 0 / -1. */
static int
opt_flag(PyObject *v, int dflt, int *out)
{
    if (v == NULL || v == Py_None) {
        *out = dflt;
        return 0;
    }
    return shp_arg_flag(v, out);
}

/* A memory mode (args.c), `dflt` for None or absent. */
static int
opt_memory(PyObject *v, int dflt, const char *owner, int *out)
{
    if (v == NULL || v == Py_None) {
        *out = dflt;
        return 0;
    }
    return shp_arg_memory(v, owner, "track_ram", out);
}

/* A CUDA device ordinal in [0, SHP_MAX_CUDA_DEVICES); 0 / -1. */
static int
device_id_arg(PyObject *v, const char *owner, int *out)
{
    Py_ssize_t d = 0;
    if (shp_arg_ssize(v, owner, "device_id", &d) < 0)
        return -1;
    if (d < 0 || d >= SHP_MAX_CUDA_DEVICES)
        return shp_arg_value_error(owner, "device_id", "a CUDA device ordinal (0..63)", v);
    *out = (int)d;
    return 0;
}

static int
Profiler_init(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static const char *const names[] = {"name", "device", "track_ram", "track_vram",
                                        "sync_cuda", "device_id", "trace_capacity"};
    static const shp_argspec spec = {"HierarchicalProfiler", names, 7, 6, 0, 0};
    static const char *const fn = "HierarchicalProfiler()";
    shp_Profiler *p = (shp_Profiler *)op;
    PyObject *v[7], *hold = NULL, *name = NULL, *device = NULL;
    Py_ssize_t capacity = DEFAULT_TRACE_CAPACITY;
    int track_ram = SHP_MEM_RSS, tv = 0, sc = 0, id = 0, rc = -1;
    shp_device dev = {SHP_DEV_CPU, -1, NULL};
    /* v[] is borrowed from `hold` until the end: __bool__ / __index__ of one
     * value may empty the caller's kwargs */
    if (shp_args_parse_tuple(&spec, args, kwargs, v, &hold) < 0)
        return -1;
    if ((v[0] && shp_arg_str(v[0], fn, "name", 0, &name) < 0) ||
        (v[1] && shp_arg_str(v[1], fn, "device", 0, &device) < 0) ||
        (v[2] && shp_arg_memory(v[2], fn, "track_ram", &track_ram) < 0) ||
        (v[6] && shp_arg_ssize(v[6], fn, "trace_capacity", &capacity) < 0))
        goto done;
    if (capacity < 0) {
        shp_arg_value_error(fn, "trace_capacity", ">= 0", v[6]);
        goto done;
    }
    if (device != NULL && shp_device_parse(device, &dev) < 0)
        goto done;
    int is_cuda = dev.kind == SHP_DEV_CUDA;
    if (opt_flag(v[3], is_cuda, &tv) < 0 || opt_flag(v[4], is_cuda, &sc) < 0)
        goto done;
    /* device="cuda:1" names the ordinal when device_id does not */
    if (v[5] != NULL) {
        if (device_id_arg(v[5], fn, &id) < 0)
            goto done;
    }
    else if (is_cuda && dev.ordinal > 0) {
        id = dev.ordinal < SHP_MAX_CUDA_DEVICES ? dev.ordinal : 0;
    }
    if (name != NULL)
        Py_XSETREF(p->root_name, Py_NewRef(name));
    if (device != NULL)
        Py_XSETREF(p->device, Py_NewRef(device));
    p->track_ram = (char)track_ram;
    p->track_vram = (char)tv;
    p->sync_cuda = (char)sc;
    p->device_id = id;
    shp_ring_clear(&p->ring);
    p->ring.capacity = capacity;
    rc = profiler_new_tree(p);
done:
    Py_XDECREF(hold);
    return rc;
}

static int
Profiler_traverse(PyObject *op, visitproc visit, void *arg)
{
    shp_Profiler *p = (shp_Profiler *)op;
    Py_VISIT(Py_TYPE(op));
    Py_VISIT(p->root_name);
    Py_VISIT(p->device);
    Py_VISIT(p->root);
    Py_VISIT(p->var);
    Py_VISIT(p->nodes);
    Py_VISIT(p->node_type);
    Py_VISIT(p->timer_type);
    Py_VISIT(p->frame_type);
    return 0;
}

static int
Profiler_clear(PyObject *op)
{
    shp_Profiler *p = (shp_Profiler *)op;
    Py_CLEAR(p->root_name);
    Py_CLEAR(p->device);
    Py_CLEAR(p->root);
    Py_CLEAR(p->var);
    Py_CLEAR(p->nodes);
    Py_CLEAR(p->node_type);
    Py_CLEAR(p->timer_type);
    Py_CLEAR(p->frame_type);
    return 0;
}

static void
Profiler_dealloc(PyObject *op)
{
    shp_Profiler *p = (shp_Profiler *)op;
    PyTypeObject *tp = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    if (p->weakreflist != NULL)
        PyObject_ClearWeakRefs(op);
    (void)Profiler_clear(op);
    shp_ring_clear(&p->ring);
    tp->tp_free(op);
    Py_DECREF(tp);
}

static PyObject *
Profiler_push(PyObject *op, PyObject *name)
{
    shp_Profiler *p = (shp_Profiler *)op;
    PyObject *entry = NULL;
    if (shp_arg_str(name, "HierarchicalProfiler.push()", "name", 0, &name) < 0)
        return NULL;
    shp_Node *node = shp_scope_push(p, name, &entry);
    if (node != NULL) {
        /* never reset: pop() moves to the parent entry instead */
        Py_CLEAR(((shp_Frame *)entry)->token);
        Py_DECREF(entry);
    }
    return (PyObject *)node;
}

static PyObject *
Profiler_pop(PyObject *op, PyObject *unused)
{
    (void)unused;
    shp_Profiler *p = (shp_Profiler *)op;
    if (shp_scope_pop(p) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
Profiler_reset(PyObject *op, PyObject *unused)
{
    (void)unused;
    if (profiler_new_tree((shp_Profiler *)op) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
Profiler_get_stack(PyObject *op, void *c)
{
    (void)c;
    shp_Profiler *p = (shp_Profiler *)op;
    PyObject *cur = shp_scope_position(p, NULL);
    if (cur == NULL)
        return NULL;
    PyObject *stack = PyList_New(0);
    if (stack == NULL)
        goto done;
    for (PyObject *n = cur; n != NULL; n = ((shp_Node *)n)->parent) {
        if (PyList_Append(stack, n) < 0) {
            Py_CLEAR(stack);
            goto done;
        }
    }
    if (PyList_Reverse(stack) < 0)
        Py_CLEAR(stack);
done:
    Py_DECREF(cur);
    return stack;
}

static PyObject *
Profiler_get_root(PyObject *op, void *c)
{
    (void)c;
    return Py_NewRef(((shp_Profiler *)op)->root);
}

static PyObject *
Profiler_get_current(PyObject *op, void *c)
{
    (void)c;
    return shp_scope_position((shp_Profiler *)op, NULL);
}

static PyObject *
Profiler_get_capacity(PyObject *op, void *c)
{
    (void)c;
    return PyLong_FromSsize_t(((shp_Profiler *)op)->ring.capacity);
}

static PyObject *
Profiler_get_root_name(PyObject *op, void *c)
{
    (void)c;
    return Py_NewRef(((shp_Profiler *)op)->root_name);
}

static int
Profiler_set_root_name(PyObject *op, PyObject *v, void *c)
{
    (void)c;
    if (v == NULL) {
        PyErr_SetString(PyExc_AttributeError, "cannot delete HierarchicalProfiler.root_name");
        return -1;
    }
    if (shp_arg_str(v, "HierarchicalProfiler", "root_name", 0, &v) < 0)
        return -1;
    Py_XSETREF(((shp_Profiler *)op)->root_name, Py_NewRef(v));
    return 0;
}

static PyObject *
Profiler_get_device(PyObject *op, void *c)
{
    (void)c;
    return Py_NewRef(((shp_Profiler *)op)->device);
}

/* _trace() -> (nodes, events, dropped): the node registry (a copy) and the
 * ring's events, oldest first, as (node_id, thread, start_ns, dur_ns, depth).
 * Every object made here can run the collector, and so a finalizer that
 * enters scopes (the ring grows and wraps) or calls reset() (the ring is
 * freed): the ring and the registry are copied first, with no Python code in
 * between, and only the copies are read after. */
static PyObject *
Profiler_trace(PyObject *op, PyObject *unused)
{
    (void)unused;
    shp_Profiler *p = (shp_Profiler *)op;
    PyObject *nodes = NULL, *events = NULL, *res = NULL, **items = NULL;
    Py_ssize_t count = p->ring.count, built = 0;
    shp_event *snap = PyMem_New(shp_event, (size_t)count + 1);   /* never runs Python */
    if (snap == NULL)
        return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < count; i++)
        snap[i] = *shp_ring_at(&p->ring, i);
    unsigned long long dropped = (unsigned long long)p->ring.dropped;
    PyObject *reg = Py_NewRef(p->nodes);   /* this generation's; only ever appended to */
    Py_ssize_t nreg = PyList_GET_SIZE(reg);
    /* from here on, the profiler may change under us */
    nodes = PyList_GetSlice(reg, 0, nreg);
    Py_DECREF(reg);
    items = PyMem_New(PyObject *, (size_t)count + 1);
    if (nodes == NULL || items == NULL) {
        if (items == NULL)
            PyErr_NoMemory();
        goto done;
    }
    for (; built < count; built++) {
        const shp_event *e = &snap[built];
        items[built] = Py_BuildValue("(IKLLI)", (unsigned int)e->node_id,
                                     (unsigned long long)e->thread, (long long)e->start_ns,
                                     (long long)e->dur_ns, (unsigned int)e->depth);
        if (items[built] == NULL)
            goto done;
    }
    /* filled with no allocation in between: nothing can see it half-made */
    events = PyList_New(count);
    if (events == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < count; i++)
        PyList_SET_ITEM(events, i, items[i]);
    built = 0;   /* the list owns them now */
    res = Py_BuildValue("(OOK)", nodes, events, dropped);
done:
    for (Py_ssize_t i = 0; i < built; i++)
        Py_DECREF(items[i]);
    PyMem_Free(items);
    PyMem_Free(snap);
    Py_XDECREF(nodes);
    Py_XDECREF(events);
    return res;
}

/* scope(name, track_ram=None, track_vram=None, sync_cuda=None): a Timer of
 * this profiler. */
static PyObject *
Profiler_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    static const char *const names[] = {"name", "track_ram", "track_vram", "sync_cuda"};
    static const shp_argspec spec = {"HierarchicalProfiler.scope", names, 4, 4, 1, 0};
    static const char *const fn = "HierarchicalProfiler.scope()";
    shp_Profiler *p = (shp_Profiler *)op;
    PyObject *v[4], *name = NULL;
    int tr = 0, tv = 0, sc = 0;
    if (shp_args_parse(&spec, args, PyVectorcall_NARGS(nargsf), kwnames, v) < 0 ||
        shp_arg_str(v[0], fn, "name", 0, &name) < 0 || opt_memory(v[1], p->track_ram, fn, &tr) < 0 ||
        opt_flag(v[2], p->track_vram, &tv) < 0 || opt_flag(v[3], p->sync_cuda, &sc) < 0)
        return NULL;
    return shp_timer_make(p->timer_type, name, op, tr, tv, sc, p->device_id);
}

static PyObject *
Profiler_scope(PyObject *op, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    return Profiler_vectorcall(op, args, (size_t)nargs, kwnames);
}

static PyObject *
Profiler_get_track_ram(PyObject *op, void *c)
{
    (void)c;
    return shp_memory_mode_obj(((shp_Profiler *)op)->track_ram);
}

static int
Profiler_set_track_ram(PyObject *op, PyObject *v, void *c)
{
    (void)c;
    int mode;
    if (v == NULL) {
        PyErr_SetString(PyExc_AttributeError, "cannot delete HierarchicalProfiler.track_ram");
        return -1;
    }
    if (shp_arg_memory(v, "HierarchicalProfiler", "track_ram", &mode) < 0)
        return -1;
    ((shp_Profiler *)op)->track_ram = (char)mode;
    return 0;
}

static PyGetSetDef profiler_getset[] = {
    {"stack", Profiler_get_stack, NULL,
     "The calling thread's / task's open scopes: a new list [root, ..., current].", NULL},
    {"root", Profiler_get_root, NULL, "The root ProfileNode of the current tree.", NULL},
    {"current", Profiler_get_current, NULL,
     "The calling thread's / task's innermost open scope (the root when none).", NULL},
    {"root_name", Profiler_get_root_name, Profiler_set_root_name,
     "Name of the root node (used by reset()).", NULL},
    {"device", Profiler_get_device, NULL, "Device label given at construction.", NULL},
    {"track_ram", Profiler_get_track_ram, Profiler_set_track_ram,
     "Default of scope(track_ram): True (RSS at exit minus at enter), 'peak' (the true "
     "peak, resetting the process's peak-RSS record) or False.", NULL},
    {"trace_capacity", Profiler_get_capacity, NULL,
     "Most recent scope calls kept for the trace export (0: none).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef profiler_members[] = {
    {"track_vram", T_BOOL, offsetof(shp_Profiler, track_vram), 0,
     "Default of scope(track_vram)."},
    {"sync_cuda", T_BOOL, offsetof(shp_Profiler, sync_cuda), 0, "Default of scope(sync_cuda)."},
    {"device_id", T_INT, offsetof(shp_Profiler, device_id), READONLY, "CUDA device ordinal."},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(shp_Profiler, weakreflist), READONLY, NULL},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(shp_Profiler, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

#define FASTKW(f) (PyCFunction)(void (*)(void))(f), METH_FASTCALL | METH_KEYWORDS

static PyMethodDef profiler_methods[] = {
    {"push", Profiler_push, METH_O,
     "push($self, name, /)\n"
     "--\n"
     "\n"
     "Enter the child `name` of the current scope, without timing.\n"
     "\n"
     "The calling thread's (or asyncio task's) current scope becomes that child,\n"
     "created if it does not exist.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "name : str\n"
     "    The child's name.\n"
     "\n"
     "Returns\n"
     "-------\n"
     "ProfileNode\n"
     "    The child."},
    {"pop", Profiler_pop, METH_NOARGS,
     "pop($self, /)\n"
     "--\n"
     "\n"
     "Make the current scope's parent current again; never pops the root."},
    {"reset", Profiler_reset, METH_NOARGS,
     "reset($self, /)\n"
     "--\n"
     "\n"
     "Forget every scope and trace event: a new root, a new tree."},
    {"scope", FASTKW(Profiler_scope),
     "scope($self, /, name, track_ram=None, track_vram=None, sync_cuda=None)\n"
     "--\n"
     "\n"
     "A Timer that records into this profiler: `with prof.scope('load'):`.\n"
     "\n"
     "prof(name, ...) is the same call.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "name : str\n"
     "    The scope's name: a child of the scope it is entered in.\n"
     "track_ram : bool or 'peak', optional\n"
     "    Host memory of the scope: True (RSS at exit minus at enter), 'peak' (the\n"
     "    true peak) or False.  None: the profiler's track_ram.\n"
     "track_vram : bool, optional\n"
     "    Device memory of the scope.  None: the profiler's track_vram.\n"
     "sync_cuda : bool, optional\n"
     "    Sync the CUDA device at enter and exit.  None: the profiler's sync_cuda.\n"
     "\n"
     "Returns\n"
     "-------\n"
     "Timer"},
    {"_trace", Profiler_trace, METH_NOARGS,
     "_trace() -> (nodes, events, dropped): the raw trace buffer, oldest event first."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot profiler_slots[] = {
    {Py_tp_new, Profiler_new},
    {Py_tp_init, Profiler_init},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_dealloc, Profiler_dealloc},
    {Py_tp_traverse, Profiler_traverse},
    {Py_tp_clear, Profiler_clear},
    {Py_tp_getset, profiler_getset},
    {Py_tp_members, profiler_members},
    {Py_tp_methods, profiler_methods},
    {Py_tp_doc,
     "ProfilerCore(name='Root', device='CPU', track_ram=True, track_vram=None,\n"
     "             sync_cuda=None, device_id=0, *, trace_capacity=65536)\n"
     "--\n"
     "\n"
     "The native core of HierarchicalProfiler (which documents the parameters):\n"
     "the scope tree, per-thread and per-task nesting, the trace ring.\n"
     "profiler(name, ...) is profiler.scope(name, ...)."},
    {0, NULL},
};

PyType_Spec shp_profiler_spec = {
    .name = "spatialhub.utils.profiling.ProfilerCore",
    .basicsize = sizeof(shp_Profiler),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC |
             Py_TPFLAGS_HAVE_VECTORCALL,
    .slots = profiler_slots,
};

/* ---- module hooks ---------------------------------------------------------------- */

PyObject *
shp_scope_clock_floor(PyObject *module, PyObject *arg)
{
    (void)module;
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n < 1) {
        PyErr_SetString(PyExc_ValueError, "_scope_clock_floor_ns() n must be >= 1");
        return NULL;
    }
    int64_t sink = 0, t0 = shp_now_ns();
    for (Py_ssize_t i = 0; i < n; i++) {
        /* what one scope reads: CPU and wall at enter, wall and CPU at exit */
        sink += shp_process_cpu_ns();
        sink += shp_now_ns();
        sink -= shp_now_ns();
        sink -= shp_process_cpu_ns();
    }
    int64_t t1 = shp_now_ns();
    (void)sink;
    return PyFloat_FromDouble((double)(t1 - t0) / (double)n);
}

PyObject *
shp_set_default_profiler(PyObject *module, PyObject *p)
{
    shp_state *st = PyModule_GetState(module);
    if (p != Py_None && !PyObject_TypeCheck(p, st->profiler_type)) {
        PyErr_Format(PyExc_TypeError,
                     "_set_default_profiler() takes a HierarchicalProfiler or None, not %.100s",
                     Py_TYPE(p)->tp_name);
        return NULL;
    }
    Py_XSETREF(st->default_profiler, p == Py_None ? NULL : Py_NewRef(p));
    Py_RETURN_NONE;
}
