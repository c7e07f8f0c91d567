/*
 * scope.c -- the scope profiler: ProfileNode, ProfilerCore (the base of the
 * Python HierarchicalProfiler) and Timer, with enter and exit in C.
 *
 * The released module keeps one Python list as the stack of open scopes, so
 * two threads or two asyncio tasks push onto each other's scopes.  Here the
 * stack is not stored at all: each profiler owns a ContextVar holding the
 * calling context's *current node*, and a node knows its parent, so the path
 * root -> current node is the stack.  Every thread starts with an empty
 * context (its scopes nest under the root); an asyncio task runs in a copy of
 * its creator's context (its scopes nest under the scope that created it and
 * never under a sibling's).  Every context's scopes aggregate into the one
 * tree: enter and exit touch it only with the GIL held and without running
 * Python code in between, and a new child is published with
 * PyDict_SetDefault, so two threads creating the same child agree on one.
 *
 * reset() starts a new tree and bumps the profiler's generation; a context
 * still pointing into the old tree is treated as being at the new root.
 *
 * Per call, a scope records wall time (the perf_counter clock) and process
 * CPU time (the process_time clock) in integer ns into its node's totals and
 * latency histogram (scopedata.c), the peak RSS over the scope from the same
 * high-water-mark windows benchmark_callable uses (memory.c), device memory
 * (cuMemGetInfo_v2 before and after), and one event into the profiler's
 * bounded trace ring.  sync_cuda syncs through the native, checked driver
 * call (cuda.c) with the GIL released.
 */
#include "profiling.h"

#include <math.h>
#include <structmember.h>

#include "pythread.h"

#define NO_ID UINT32_MAX
#define DEFAULT_TRACE_CAPACITY 65536

/* ---- arguments -------------------------------------------------------------- */

/* Vectorcall arguments into out[0..n) by position or keyword name (NULL where not
 * given).  `fname` names the function in messages.  0, or -1 with TypeError. */
static int
parse_args(const char *fname, const char *const *names, int n, PyObject *const *args,
           size_t nargsf, PyObject *kwnames, PyObject **out)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    for (int i = 0; i < n; i++)
        out[i] = NULL;
    if (nargs > n) {
        PyErr_Format(PyExc_TypeError, "%s takes at most %d arguments (%zd given)", fname, n,
                     nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++)
        out[i] = args[i];
    Py_ssize_t nkw = kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *kw = PyTuple_GET_ITEM(kwnames, k);
        int j = 0;
        while (j < n && PyUnicode_CompareWithASCIIString(kw, names[j]) != 0)
            j++;
        if (j == n) {
            PyErr_Format(PyExc_TypeError, "%s got an unexpected keyword argument '%U'", fname,
                         kw);
            return -1;
        }
        if (out[j] != NULL) {
            PyErr_Format(PyExc_TypeError, "%s got multiple values for argument '%s'", fname,
                         names[j]);
            return -1;
        }
        out[j] = args[nargs + k];
    }
    if (out[0] == NULL) {
        PyErr_Format(PyExc_TypeError, "%s missing required argument '%s'", fname, names[0]);
        return -1;
    }
    return 0;
}

/* ---- ProfileNode ---------------------------------------------------------- */

typedef struct shp_Node {
    PyObject_HEAD
    PyObject *name;          /* str */
    PyObject *children;      /* dict: name -> ProfileNode */
    PyObject *parent;        /* the node this one hangs under; NULL for a root */
    long long calls;
    int64_t wall_ns, cpu_ns; /* totals */
    double peak_ram_mb, peak_vram_mb;
    uint64_t gen;            /* generation of the profiler tree it belongs to */
    uint32_t id;             /* index in the profiler's node registry, or NO_ID */
    uint32_t depth;          /* 0 for a root */
    shp_hist hist;           /* per-call wall times */
    PyObject *weakreflist;
} shp_Node;

static shp_Node *
node_create(PyTypeObject *type, PyObject *name)
{
    shp_Node *n = (shp_Node *)type->tp_alloc(type, 0);
    if (n == NULL)
        return NULL;
    n->id = NO_ID;
    shp_hist_init(&n->hist);
    n->name = Py_NewRef(name);
    n->children = PyDict_New();
    if (n->children == NULL) {
        Py_DECREF(n);
        return NULL;
    }
    return n;
}

static int
check_name(PyObject *name, const char *where)
{
    if (!PyUnicode_Check(name)) {
        PyErr_Format(PyExc_TypeError, "%s name must be str, not %.100s", where,
                     Py_TYPE(name)->tp_name);
        return -1;
    }
    return 0;
}

static PyObject *
Node_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"name", NULL};
    PyObject *name = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O:ProfileNode", kwlist, &name))
        return NULL;
    if (check_name(name, "ProfileNode()") < 0)
        return NULL;
    return (PyObject *)node_create(type, name);
}

static int
Node_traverse(PyObject *op, visitproc visit, void *arg)
{
    shp_Node *self = (shp_Node *)op;
    Py_VISIT(Py_TYPE(op));
    Py_VISIT(self->name);
    Py_VISIT(self->children);
    Py_VISIT(self->parent);
    return 0;
}

static int
Node_clear(PyObject *op)
{
    shp_Node *self = (shp_Node *)op;
    Py_CLEAR(self->name);
    Py_CLEAR(self->children);
    Py_CLEAR(self->parent);
    return 0;
}

static void
Node_dealloc(PyObject *op)
{
    shp_Node *self = (shp_Node *)op;
    PyTypeObject *tp = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    if (self->weakreflist != NULL)
        PyObject_ClearWeakRefs(op);
    (void)Node_clear(op);
    shp_hist_free(&self->hist);
    tp->tp_free(op);
    Py_DECREF(tp);
}

static PyObject *
Node_repr(PyObject *op)
{
    shp_Node *self = (shp_Node *)op;
    return PyUnicode_FromFormat("ProfileNode(name=%R, calls=%lld, children=%zd)", self->name,
                                self->calls, PyDict_GET_SIZE(self->children));
}

static PyObject *
seconds(int64_t ns)
{
    return PyFloat_FromDouble((double)ns / 1e9);
}

static int
set_seconds(PyObject *value, int64_t *out, const char *what)
{
    if (value == NULL) {
        PyErr_Format(PyExc_AttributeError, "cannot delete %s", what);
        return -1;
    }
    double s = PyFloat_AsDouble(value);
    if (s == -1.0 && PyErr_Occurred())
        return -1;
    if (!isfinite(s) || fabs(s) > 9.0e9) {
        PyErr_Format(PyExc_ValueError, "%s must be a finite number of seconds", what);
        return -1;
    }
    *out = (int64_t)llround(s * 1e9);
    return 0;
}

static PyObject *
Node_get_wall(PyObject *op, void *c)
{
    (void)c;
    return seconds(((shp_Node *)op)->wall_ns);
}

static int
Node_set_wall(PyObject *op, PyObject *v, void *c)
{
    (void)c;
    return set_seconds(v, &((shp_Node *)op)->wall_ns, "ProfileNode.total_wall_time");
}

static PyObject *
Node_get_cpu(PyObject *op, void *c)
{
    (void)c;
    return seconds(((shp_Node *)op)->cpu_ns);
}

static int
Node_set_cpu(PyObject *op, PyObject *v, void *c)
{
    (void)c;
    return set_seconds(v, &((shp_Node *)op)->cpu_ns, "ProfileNode.total_cpu_time");
}

/* Percentiles of the per-call wall times, ms; None before the first call.
 * The closure is the quantile times 1000 (500 = p50). */
static PyObject *
Node_get_pct(PyObject *op, void *closure)
{
    shp_Node *self = (shp_Node *)op;
    double q = (double)(intptr_t)closure / 1000.0;
    double ns = shp_hist_quantile(&self->hist, q);
    if (isnan(ns))
        Py_RETURN_NONE;
    return PyFloat_FromDouble(ns / 1e6);
}

static PyObject *
Node_get_mean(PyObject *op, void *c)
{
    (void)c;
    shp_Node *self = (shp_Node *)op;
    if (self->calls <= 0)
        Py_RETURN_NONE;
    return PyFloat_FromDouble((double)self->wall_ns / (double)self->calls / 1e6);
}

static PyObject *
Node_get_parent(PyObject *op, void *c)
{
    (void)c;
    shp_Node *self = (shp_Node *)op;
    return Py_NewRef(self->parent != NULL ? self->parent : Py_None);
}

static PyObject *
Node_get_depth(PyObject *op, void *c)
{
    (void)c;
    return PyLong_FromUnsignedLong(((shp_Node *)op)->depth);
}

static PyObject *
Node_get_histogram_calls(PyObject *op, void *c)
{
    (void)c;
    shp_Node *self = (shp_Node *)op;
    return PyLong_FromUnsignedLongLong(self->hist.n - self->hist.dropped);
}

static PyObject *
Node_percentile(PyObject *op, PyObject *arg)
{
    shp_Node *self = (shp_Node *)op;
    double q = PyFloat_AsDouble(arg);
    if (q == -1.0 && PyErr_Occurred())
        return NULL;
    if (!(q >= 0.0 && q <= 100.0)) {
        PyErr_Format(PyExc_ValueError,
                     "ProfileNode.percentile() q must be in [0, 100], got %R", arg);
        return NULL;
    }
    double ns = shp_hist_quantile(&self->hist, q / 100.0);
    if (isnan(ns))
        Py_RETURN_NONE;
    return PyFloat_FromDouble(ns / 1e6);
}

#define PCT(name, q, doc) {name, Node_get_pct, NULL, doc, (void *)(intptr_t)(q)}

static PyGetSetDef node_getset[] = {
    {"total_wall_time", Node_get_wall, Node_set_wall,
     "Cumulative wall-clock time of all calls, seconds.", NULL},
    {"total_cpu_time", Node_get_cpu, Node_set_cpu,
     "Cumulative process CPU time (all threads) of all calls, seconds.", NULL},
    PCT("p50_ms", 500, "Median wall time per call, ms (histogram, within 1 %); None before a call."),
    PCT("p95_ms", 950, "95th percentile of the wall time per call, ms (within 1 %)."),
    PCT("p99_ms", 990, "99th percentile of the wall time per call, ms (within 1 %)."),
    PCT("min_ms", 0, "Shortest call, ms (exact)."),
    PCT("max_ms", 1000, "Longest call, ms (exact)."),
    {"mean_ms", Node_get_mean, NULL, "Mean wall time per call, ms (exact); None before a call.",
     NULL},
    {"parent", Node_get_parent, NULL, "The node this one hangs under; None for a root.", NULL},
    {"depth", Node_get_depth, NULL, "0 for a root, 1 for its children, ...", NULL},
    {"histogram_calls", Node_get_histogram_calls, NULL,
     "Calls the percentiles are computed from (calls minus any dropped for lack of memory).",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef node_members[] = {
    {"name", T_OBJECT_EX, offsetof(shp_Node, name), READONLY, "Scope name."},
    {"calls", T_LONGLONG, offsetof(shp_Node, calls), 0, "Times the scope was exited."},
    {"peak_ram_delta_mb", T_DOUBLE, offsetof(shp_Node, peak_ram_mb), 0,
     "Highest peak-RSS-minus-start of one call, MiB (high-water mark)."},
    {"peak_vram_delta_mb", T_DOUBLE, offsetof(shp_Node, peak_vram_mb), 0,
     "Highest end-minus-start device used memory of one call, MiB."},
    {"children", T_OBJECT_EX, offsetof(shp_Node, children), READONLY,
     "dict: child scope name -> ProfileNode, in first-entered order."},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(shp_Node, weakreflist), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyMethodDef node_methods[] = {
    {"percentile", Node_percentile, METH_O,
     "percentile(q) -> float or None\n\nThe q-th percentile (0..100) of the wall time per call "
     "in ms, NumPy's method='linear' within 1 %."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot node_slots[] = {
    {Py_tp_new, Node_new},
    {Py_tp_dealloc, Node_dealloc},
    {Py_tp_traverse, Node_traverse},
    {Py_tp_clear, Node_clear},
    {Py_tp_repr, Node_repr},
    {Py_tp_getset, node_getset},
    {Py_tp_members, node_members},
    {Py_tp_methods, node_methods},
    {Py_tp_doc,
     "ProfileNode(name)\n\nOne scope of the call tree: calls, total_wall_time and total_cpu_time "
     "(seconds),\npeak_ram_delta_mb, peak_vram_delta_mb, children (dict), and a latency\n"
     "histogram: p50_ms, p95_ms, p99_ms, min_ms, max_ms, mean_ms."},
    {0, NULL},
};

PyType_Spec shp_node_spec = {
    .name = "spatialhub.utils.profiling.ProfileNode",
    .basicsize = sizeof(shp_Node),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = node_slots,
};

/* ---- ProfilerCore ------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;   /* profiler("stage") without an argument tuple */
    PyObject *root_name;         /* str */
    PyObject *device;            /* str */
    PyObject *root;              /* shp_Node */
    PyObject *var;               /* ContextVar: the calling context's current node */
    PyObject *nodes;             /* list: node registry of this generation, index = id */
    PyTypeObject *node_type;
    PyTypeObject *timer_type;
    char track_ram, track_vram, sync_cuda;
    int device_id;
    uint64_t gen;
    shp_ring ring;
    PyObject *weakreflist;
} shp_Profiler;

/* A new tree: root node, registry, empty ring; the generation moves on. */
static int
profiler_new_tree(shp_Profiler *p)
{
    shp_Node *root = node_create(p->node_type, p->root_name);
    if (root == NULL)
        return -1;
    PyObject *nodes = PyList_New(1);
    if (nodes == NULL) {
        Py_DECREF(root);
        return -1;
    }
    p->gen++;
    root->gen = p->gen;
    root->id = 0;
    PyList_SET_ITEM(nodes, 0, Py_NewRef(root));
    Py_XSETREF(p->root, (PyObject *)root);
    Py_XSETREF(p->nodes, nodes);
    shp_ring_clear(&p->ring);
    return 0;
}

/* The calling context's current node of `p`: new reference. */
static PyObject *
profiler_current(shp_Profiler *p)
{
    PyObject *cur = NULL;
    if (PyContextVar_Get(p->var, NULL, &cur) < 0)
        return NULL;
    if (cur == NULL || ((shp_Node *)cur)->gen != p->gen)
        Py_XSETREF(cur, Py_NewRef(p->root));
    return cur;
}

/* The child `name` of `parent`, created (and registered) if new: new reference. */
static shp_Node *
profiler_child(shp_Profiler *p, shp_Node *parent, PyObject *name)
{
    PyObject *found = PyDict_GetItemWithError(parent->children, name);
    if (found != NULL)
        return (shp_Node *)Py_NewRef(found);
    if (PyErr_Occurred())
        return NULL;
    shp_Node *n = node_create(p->node_type, name);
    if (n == NULL)
        return NULL;
    n->parent = Py_NewRef(parent);
    n->gen = parent->gen;
    n->depth = parent->depth + 1;
    /* Allocating may have run a finalizer that let another thread in: the
     * first node published under this name is the one everybody uses. */
    PyObject *winner = PyDict_SetDefault(parent->children, name, (PyObject *)n);
    if (winner != (PyObject *)n) {
        Py_DECREF(n);
        return winner != NULL ? (shp_Node *)Py_NewRef(winner) : NULL;
    }
    if (n->gen == p->gen && PyList_GET_SIZE(p->nodes) < (Py_ssize_t)NO_ID) {
        n->id = (uint32_t)PyList_GET_SIZE(p->nodes);
        if (PyList_Append(p->nodes, (PyObject *)n) < 0) {
            n->id = NO_ID;
            Py_DECREF(n);
            return NULL;
        }
    }
    return n;
}

/* Enter `name` in the calling context: the new current node (new reference);
 * *prev receives the previous current node (new reference). */
static shp_Node *
profiler_push(shp_Profiler *p, PyObject *name, PyObject **prev)
{
    PyObject *cur = profiler_current(p);
    if (cur == NULL)
        return NULL;
    shp_Node *node = profiler_child(p, (shp_Node *)cur, name);
    if (node == NULL) {
        Py_DECREF(cur);
        return NULL;
    }
    PyObject *token = PyContextVar_Set(p->var, (PyObject *)node);
    if (token == NULL) {
        Py_DECREF(node);
        Py_DECREF(cur);
        return NULL;
    }
    Py_DECREF(token);
    *prev = cur;
    return node;
}

static int
profiler_set_current(shp_Profiler *p, PyObject *node)
{
    PyObject *token = PyContextVar_Set(p->var, node);
    if (token == NULL)
        return -1;
    Py_DECREF(token);
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

/* None -> dflt, else truthiness; -1 on error. */
static int
opt_bool(PyObject *v, int dflt)
{
    if (v == NULL || v == Py_None)
        return dflt;
    return PyObject_IsTrue(v);
}

static int
device_id_arg(PyObject *v, const char *what, int *out)
{
    PyObject *i = shp_index_arg(v, what);
    if (i == NULL)
        return -1;
    long d = PyLong_AsLong(i);
    Py_DECREF(i);
    if (d == -1 && PyErr_Occurred())
        return -1;
    if (d < 0 || d >= SHP_MAX_CUDA_DEVICES) {
        PyErr_Format(PyExc_ValueError, "%s must be a CUDA device ordinal in [0, %d), got %ld",
                     what, SHP_MAX_CUDA_DEVICES, d);
        return -1;
    }
    *out = (int)d;
    return 0;
}

static int
Profiler_init(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"name", "device", "track_ram", "track_vram", "sync_cuda",
                             "device_id", "trace_capacity", NULL};
    shp_Profiler *p = (shp_Profiler *)op;
    PyObject *name = NULL, *device = NULL, *track_vram = Py_None, *sync_cuda = Py_None;
    PyObject *device_id = NULL;
    Py_ssize_t capacity = DEFAULT_TRACE_CAPACITY;
    int track_ram = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OOpOOO$n:HierarchicalProfiler", kwlist,
                                     &name, &device, &track_ram, &track_vram, &sync_cuda,
                                     &device_id, &capacity))
        return -1;
    if (name != NULL && check_name(name, "HierarchicalProfiler()") < 0)
        return -1;
    if (device != NULL && !PyUnicode_Check(device)) {
        PyErr_Format(PyExc_TypeError, "HierarchicalProfiler() device must be str, not %.100s",
                     Py_TYPE(device)->tp_name);
        return -1;
    }
    if (capacity < 0) {
        PyErr_Format(PyExc_ValueError,
                     "HierarchicalProfiler() trace_capacity must be >= 0, got %zd", capacity);
        return -1;
    }
    int id = 0;
    if (device_id != NULL && device_id_arg(device_id, "HierarchicalProfiler() device_id", &id) < 0)
        return -1;
    if (name != NULL)
        Py_XSETREF(p->root_name, Py_NewRef(name));
    if (device != NULL)
        Py_XSETREF(p->device, Py_NewRef(device));
    /* a device label containing "cuda" (any case) is a CUDA device */
    PyObject *lower = PyObject_CallMethod(p->device, "lower", NULL);
    if (lower == NULL)
        return -1;
    PyObject *cuda = PyUnicode_FromString("cuda");
    int is_cuda = cuda != NULL ? PySequence_Contains(lower, cuda) : -1;
    Py_DECREF(lower);
    Py_XDECREF(cuda);
    if (is_cuda < 0)
        return -1;
    int tv = opt_bool(track_vram, is_cuda), sc = opt_bool(sync_cuda, is_cuda);
    if (tv < 0 || sc < 0)
        return -1;
    p->track_ram = (char)track_ram;
    p->track_vram = (char)tv;
    p->sync_cuda = (char)sc;
    p->device_id = id;
    shp_ring_clear(&p->ring);
    p->ring.capacity = capacity;
    return profiler_new_tree(p);
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
    PyObject *prev = NULL;
    if (check_name(name, "HierarchicalProfiler.push()") < 0)
        return NULL;
    shp_Node *node = profiler_push(p, name, &prev);
    Py_XDECREF(prev);
    return (PyObject *)node;
}

static PyObject *
Profiler_pop(PyObject *op, PyObject *unused)
{
    (void)unused;
    shp_Profiler *p = (shp_Profiler *)op;
    PyObject *cur = profiler_current(p);
    if (cur == NULL)
        return NULL;
    PyObject *parent = ((shp_Node *)cur)->parent;
    int rc = 0;
    if (cur != p->root && parent != NULL)   /* never pops the root */
        rc = profiler_set_current(p, parent);
    Py_DECREF(cur);
    if (rc < 0)
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
    PyObject *cur = profiler_current(p);
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
    return profiler_current((shp_Profiler *)op);
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
    if (v == NULL || check_name(v, "HierarchicalProfiler.root_name") < 0) {
        if (v == NULL)
            PyErr_SetString(PyExc_AttributeError, "cannot delete root_name");
        return -1;
    }
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
 * ring's events, oldest first, as (node_id, thread, start_ns, dur_ns, depth). */
static PyObject *
Profiler_trace(PyObject *op, PyObject *unused)
{
    (void)unused;
    shp_Profiler *p = (shp_Profiler *)op;
    PyObject *nodes = NULL, *events = NULL, *res = NULL;
    nodes = PyList_GetSlice(p->nodes, 0, PyList_GET_SIZE(p->nodes));
    if (nodes == NULL)
        goto done;
    events = PyList_New(p->ring.count);
    if (events == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < p->ring.count; i++) {
        const shp_event *e = shp_ring_at(&p->ring, i);
        PyObject *t = Py_BuildValue("(IKLLI)", (unsigned int)e->node_id,
                                    (unsigned long long)e->thread, (long long)e->start_ns,
                                    (long long)e->dur_ns, (unsigned int)e->depth);
        if (t == NULL)
            goto done;
        PyList_SET_ITEM(events, i, t);
    }
    res = Py_BuildValue("(OOK)", nodes, events, (unsigned long long)p->ring.dropped);
done:
    Py_XDECREF(nodes);
    Py_XDECREF(events);
    return res;
}

static PyObject *make_timer(shp_Profiler *p, PyObject *name, int track_memory, int track_vram,
                            int sync_cuda, int device_id);

/* scope(name, track_ram=None, track_vram=None, sync_cuda=None) */
static PyObject *
Profiler_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    static const char *const names[] = {"name", "track_ram", "track_vram", "sync_cuda"};
    shp_Profiler *p = (shp_Profiler *)op;
    PyObject *v[4];
    if (parse_args("HierarchicalProfiler.scope()", names, 4, args, nargsf, kwnames, v) < 0)
        return NULL;
    if (check_name(v[0], "HierarchicalProfiler.scope()") < 0)
        return NULL;
    int tr = opt_bool(v[1], p->track_ram), tv = opt_bool(v[2], p->track_vram),
        sc = opt_bool(v[3], p->sync_cuda);
    if (tr < 0 || tv < 0 || sc < 0)
        return NULL;
    return make_timer(p, v[0], tr, tv, sc, p->device_id);
}

static PyObject *
Profiler_scope(PyObject *op, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    return Profiler_vectorcall(op, args, (size_t)nargs, kwnames);
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
    {"trace_capacity", Profiler_get_capacity, NULL,
     "Most recent scope calls kept for the trace export (0: none).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef profiler_members[] = {
    {"track_ram", T_BOOL, offsetof(shp_Profiler, track_ram), 0, "Default of scope(track_ram)."},
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
     "push(name) -> ProfileNode\n\nMake the child `name` of the current scope (reused if it "
     "exists) the current scope of the calling thread / task; no timing."},
    {"pop", Profiler_pop, METH_NOARGS,
     "pop()\n\nMake the current scope's parent current again; never pops the root."},
    {"reset", Profiler_reset, METH_NOARGS,
     "reset()\n\nForget every scope and trace event: a new root, a new tree."},
    {"scope", FASTKW(Profiler_scope),
     "scope(name, track_ram=None, track_vram=None, sync_cuda=None) -> Timer\n\n"
     "A Timer recording into this profiler; None takes the profiler's default."},
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
     "ProfilerCore(name='Root', device='CPU', track_ram=True, track_vram=None, sync_cuda=None,\n"
     "             device_id=0, *, trace_capacity=65536)\n\n"
     "The native core of HierarchicalProfiler: the scope tree, per-thread / per-task nesting,\n"
     "the trace ring.  profiler(name, ...) is profiler.scope(name, ...)."},
    {0, NULL},
};

PyType_Spec shp_profiler_spec = {
    .name = "spatialhub.utils.profiling.ProfilerCore",
    .basicsize = sizeof(shp_Profiler),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC |
             Py_TPFLAGS_HAVE_VECTORCALL,
    .slots = profiler_slots,
};

/* ---- Timer ------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    PyObject *name;            /* str */
    PyObject *profiler;        /* shp_Profiler, or NULL: records nowhere */
    PyObject *node;            /* the node entered, NULL before the first enter */
    PyObject *prev;            /* the context's current node before enter */
    char track_memory, track_vram, sync_cuda;
    char active, window_open, have_cuda;
    int device_id;
    int64_t t0_ns, c0_ns;
    double elapsed_wall, elapsed_cpu, ram_delta_mb, vram_delta_mb;
    size_t vram_used0;
    shp_cuda_target cuda;
    shp_hwm_window win;
    PyObject *weakreflist;
} shp_Timer;

static PyObject *
make_timer(shp_Profiler *p, PyObject *name, int track_memory, int track_vram, int sync_cuda,
           int device_id)
{
    PyTypeObject *tp = p->timer_type;
    shp_Timer *t = (shp_Timer *)tp->tp_alloc(tp, 0);
    if (t == NULL)
        return NULL;
    t->name = Py_NewRef(name);
    t->profiler = Py_NewRef(p);
    t->track_memory = (char)track_memory;
    t->track_vram = (char)track_vram;
    t->sync_cuda = (char)sync_cuda;
    t->device_id = device_id;
    return (PyObject *)t;
}

/* Timer(name, profiler=None, track_memory=True, track_vram=False, sync_cuda=False,
 *       device_id=0), from vectorcall arguments. */
static PyObject *
timer_from_args(PyTypeObject *type, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    static const char *const names[] = {"name", "profiler", "track_memory", "track_vram",
                                        "sync_cuda", "device_id"};
    PyObject *v[6];
    int id = 0;
    if (parse_args("Timer()", names, 6, args, nargsf, kwnames, v) < 0)
        return NULL;
    if (check_name(v[0], "Timer()") < 0)
        return NULL;
    int tm = opt_bool(v[2], 1), tv = opt_bool(v[3], 0), sc = opt_bool(v[4], 0);
    if (tm < 0 || tv < 0 || sc < 0)
        return NULL;
    if (v[5] != NULL && device_id_arg(v[5], "Timer() device_id", &id) < 0)
        return NULL;
    shp_state *st = shp_state_from_type(type);
    if (st == NULL)
        return NULL;
    PyObject *profiler = v[1];
    if (profiler == NULL || profiler == Py_None)
        profiler = st->default_profiler;   /* the module-level `profiler`, if any */
    else if (!PyObject_TypeCheck(profiler, st->profiler_type)) {
        PyErr_Format(PyExc_TypeError,
                     "Timer() profiler must be a HierarchicalProfiler or None, not %.100s",
                     Py_TYPE(profiler)->tp_name);
        return NULL;
    }
    shp_Timer *t = (shp_Timer *)type->tp_alloc(type, 0);
    if (t == NULL)
        return NULL;
    t->name = Py_NewRef(v[0]);
    t->profiler = profiler != NULL ? Py_NewRef(profiler) : NULL;
    t->track_memory = (char)tm;
    t->track_vram = (char)tv;
    t->sync_cuda = (char)sc;
    t->device_id = id;
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
    PyObject *res = NULL, *kwnames = NULL;
    Py_ssize_t nargs = PyTuple_GET_SIZE(args);
    Py_ssize_t nkw = kwargs != NULL ? PyDict_GET_SIZE(kwargs) : 0;
    PyObject **buf = PyMem_New(PyObject *, (size_t)(nargs + nkw + 1));
    if (buf == NULL)
        return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < nargs; i++)
        buf[i] = PyTuple_GET_ITEM(args, i);
    if (nkw > 0) {
        kwnames = PyTuple_New(nkw);
        if (kwnames == NULL)
            goto done;
        Py_ssize_t pos = 0, i = 0;
        PyObject *k, *val;
        while (PyDict_Next(kwargs, &pos, &k, &val)) {
            PyTuple_SET_ITEM(kwnames, i, Py_NewRef(k));
            buf[nargs + i] = val;
            i++;
        }
    }
    res = timer_from_args(type, buf, (size_t)nargs, kwnames);
done:
    Py_XDECREF(kwnames);
    PyMem_Free(buf);
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
    Py_VISIT(t->prev);
    return 0;
}

static int
Timer_clear(PyObject *op)
{
    shp_Timer *t = (shp_Timer *)op;
    Py_CLEAR(t->name);
    Py_CLEAR(t->profiler);
    Py_CLEAR(t->node);
    Py_CLEAR(t->prev);
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
    (void)Timer_clear(op);
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
    if ((t->sync_cuda || t->track_vram) && timer_cuda(t) < 0)
        return NULL;
    if (t->sync_cuda) {
        shp_CUresult rc = timer_sync(t);
        if (rc != 0) {
            shp_state *st = shp_state_from_type(Py_TYPE(t));
            return st != NULL ? (shp_cuda_raise(st, rc, "Timer: cuCtxSynchronize before the "
                                                "scope failed"), NULL) : NULL;
        }
    }
    if (t->track_vram) {
        shp_state *st = shp_state_from_type(Py_TYPE(t));
        size_t free_b = 0, total_b = 0;
        shp_CUresult rc;
        if (st == NULL)
            return NULL;
        Py_BEGIN_ALLOW_THREADS
        rc = shp_cuda_meminfo_nogil(st, &t->cuda, &free_b, &total_b);
        Py_END_ALLOW_THREADS
        if (rc != 0)
            return shp_cuda_raise(st, rc, "Timer: cuMemGetInfo_v2 failed"), NULL;
        t->vram_used0 = total_b - free_b;
    }
    if (t->profiler != NULL) {
        PyObject *prev = NULL;
        shp_Node *node = profiler_push((shp_Profiler *)t->profiler, t->name, &prev);
        if (node == NULL)
            return NULL;
        Py_XSETREF(t->node, (PyObject *)node);
        Py_XSETREF(t->prev, prev);
    }
    if (t->track_memory) {
        shp_window_open(&t->win);
        t->window_open = 1;
    }
    t->active = 1;
    t->c0_ns = shp_process_cpu_ns();
    t->t0_ns = shp_now_ns();
    return Py_NewRef(op);
}

static void
timer_record(shp_Timer *t, int64_t wall, int64_t cpu)
{
    shp_Node *n = (shp_Node *)t->node;
    n->calls++;
    n->wall_ns += wall;
    n->cpu_ns += cpu;
    shp_hist_record(&n->hist, wall);
    if (t->track_memory && t->ram_delta_mb > n->peak_ram_mb)
        n->peak_ram_mb = t->ram_delta_mb;
    if (t->track_vram && t->vram_delta_mb > n->peak_vram_mb)
        n->peak_vram_mb = t->vram_delta_mb;
    shp_Profiler *p = (shp_Profiler *)t->profiler;
    if (n->gen == p->gen && n->id != NO_ID) {
        shp_event e = {t->t0_ns, wall, (uint64_t)PyThread_get_thread_ident(), n->id, n->depth};
        shp_ring_push(&p->ring, &e);
    }
}

static PyObject *
Timer_exit(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    shp_Timer *t = (shp_Timer *)op;
    shp_CUresult rc = 0;
    if (!t->active) {
        PyErr_Format(PyExc_RuntimeError, "Timer %R exited without being entered", t->name);
        return NULL;
    }
    if (t->sync_cuda)
        rc = timer_sync(t);
    int64_t t1 = shp_now_ns();
    int64_t c1 = shp_process_cpu_ns();
    t->active = 0;
    int64_t wall = t1 - t->t0_ns, cpu = c1 - t->c0_ns;
    t->elapsed_wall = (double)wall / 1e9;
    t->elapsed_cpu = (double)cpu / 1e9;
    if (t->window_open) {
        t->ram_delta_mb = (double)shp_window_close(&t->win) / SHP_MIB;
        t->window_open = 0;
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
    int restored = 0;
    if (t->profiler != NULL && t->node != NULL) {
        timer_record(t, wall, cpu);
        restored = profiler_set_current((shp_Profiler *)t->profiler,
                                        t->prev != NULL ? t->prev
                                                        : ((shp_Profiler *)t->profiler)->root);
        Py_CLEAR(t->prev);
    }
    if (restored < 0)
        return NULL;
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

static PyGetSetDef timer_getset[] = {
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
    {"track_memory", T_BOOL, offsetof(shp_Timer, track_memory), 0, "Track peak RSS."},
    {"track_vram", T_BOOL, offsetof(shp_Timer, track_vram), 0, "Track device memory."},
    {"sync_cuda", T_BOOL, offsetof(shp_Timer, sync_cuda), 0, "Sync the CUDA device around."},
    {"device_id", T_INT, offsetof(shp_Timer, device_id), READONLY, "CUDA device ordinal."},
    {"elapsed_wall", T_DOUBLE, offsetof(shp_Timer, elapsed_wall), READONLY,
     "Wall time of the last call, seconds."},
    {"elapsed_cpu", T_DOUBLE, offsetof(shp_Timer, elapsed_cpu), READONLY,
     "Process CPU time of the last call, seconds."},
    {"ram_delta_mb", T_DOUBLE, offsetof(shp_Timer, ram_delta_mb), READONLY,
     "Peak RSS during the last call minus RSS at its start, MiB (>= 0)."},
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
    {Py_tp_getset, timer_getset},
    {Py_tp_members, timer_members},
    {Py_tp_methods, timer_methods},
    {Py_tp_doc,
     "Timer(name, profiler=None, track_memory=True, track_vram=False, sync_cuda=False,\n"
     "      device_id=0)\n\n"
     "Context manager timing its block: elapsed_wall, elapsed_cpu (seconds), ram_delta_mb\n"
     "(peak RSS, high-water mark), vram_delta_mb; recorded into `profiler` (the module-level\n"
     "one when None).  The scope is left even when the block raises; the exception goes on."},
    {0, NULL},
};

PyType_Spec shp_timer_spec = {
    .name = "spatialhub.utils.profiling.Timer",
    .basicsize = sizeof(shp_Timer),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = timer_slots,
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
