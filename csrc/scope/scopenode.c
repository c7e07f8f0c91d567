/*
 * scopenode.c -- ProfileNode: one scope of the call tree.
 *
 * The released module's fields (name, calls, total_wall_time and
 * total_cpu_time in seconds, peak_ram_delta_mb, peak_vram_delta_mb, children)
 * plus the latency distribution of the scope's calls: a log-bucket histogram
 * (scopedata.c) behind p50_ms / p95_ms / p99_ms / percentile(q), with exact
 * min_ms, max_ms and mean_ms.  Totals are integer ns inside; the seconds
 * attributes convert at the edge and stay writable, as the released
 * attributes were.  Nodes are made by scope.c as scopes are first entered;
 * ProfileNode(name) makes a free-standing one.
 */
#include "scope/scope.h"

#include <math.h>
#include <structmember.h>

shp_Node *
shp_node_new(PyTypeObject *type, PyObject *name)
{
    shp_Node *n = (shp_Node *)type->tp_alloc(type, 0);
    if (n == NULL)
        return NULL;
    n->id = SHP_SCOPE_NO_ID;
    shp_hist_init(&n->hist);
    n->name = Py_NewRef(name);
    n->children = PyDict_New();
    if (n->children == NULL) {
        Py_DECREF(n);
        return NULL;
    }
    return n;
}

static PyObject *
Node_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static const char *const names[] = {"name"};
    static const shp_argspec spec = {"ProfileNode", names, 1, 1, 1, 0};
    PyObject *v[1], *hold = NULL, *name = NULL, *res = NULL;
    if (shp_args_parse_tuple(&spec, args, kwargs, v, &hold) < 0)
        return NULL;
    if (shp_arg_str(v[0], "ProfileNode()", "name", 0, &name) == 0)
        res = (PyObject *)shp_node_new(type, name);   /* name held by hold / args */
    Py_XDECREF(hold);
    return res;
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

void
shp_format_seconds(double s, char *buf, size_t size)
{
    static const char *const units[] = {"ns", "us", "ms", "s"};
    double v = s * 1e9;
    int u = 0;
    if (!(s > 0.0) || !isfinite(s)) {   /* 0, or a total set by hand below it */
        PyOS_snprintf(buf, size, s == 0.0 ? "0 s" : "%.6f s", s);
        return;
    }
    /* the unit in which v rounds to [1, 1000) at 3 significant digits */
    while (u < 3 && v >= 999.5) {
        v /= 1000.0;
        u++;
    }
    int decimals = v >= 99.95 ? 0 : v >= 9.995 ? 1 : 2;
    PyOS_snprintf(buf, size, "%.*f %s", decimals, v, units[u]);
}

static PyObject *
Node_repr(PyObject *op)
{
    shp_Node *self = (shp_Node *)op;
    char total[32];
    shp_format_seconds((double)self->wall_ns / 1e9, total, sizeof total);
    return PyUnicode_FromFormat("ProfileNode(name=%R, calls=%lld, total=%s, children=%zd)",
                                self->name, self->calls, total, PyDict_GET_SIZE(self->children));
}

static PyObject *
seconds(int64_t ns)
{
    return PyFloat_FromDouble((double)ns / 1e9);
}

/* Seconds (a real number) into integer ns; `param` names the attribute. */
static int
set_seconds(PyObject *value, int64_t *out, const char *param)
{
    double s = 0.0;
    if (value == NULL) {
        PyErr_Format(PyExc_AttributeError, "cannot delete ProfileNode.%s", param);
        return -1;
    }
    if (shp_arg_real(value, "ProfileNode", param, &s) < 0)
        return -1;
    if (!isfinite(s) || fabs(s) > 9.0e9)
        return shp_arg_value_error("ProfileNode", param, "a finite number of seconds", value);
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
    return set_seconds(v, &((shp_Node *)op)->wall_ns, "total_wall_time");
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
    return set_seconds(v, &((shp_Node *)op)->cpu_ns, "total_cpu_time");
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
Node_get_calls(PyObject *op, void *c)
{
    (void)c;
    return PyLong_FromLongLong(((shp_Node *)op)->calls);
}

/* Settable, as the released attribute was, within what the count can hold:
 * an int (not a bool) in [0, 2**63 - 1]; a scope's exit stops counting there
 * (scopetimer.c), it never wraps. */
static int
Node_set_calls(PyObject *op, PyObject *v, void *c)
{
    (void)c;
    if (v == NULL) {
        PyErr_SetString(PyExc_AttributeError, "cannot delete ProfileNode.calls");
        return -1;
    }
    PyObject *idx = shp_arg_index(v, "ProfileNode", "calls");
    if (idx == NULL)
        return -1;
    int overflow = 0;
    long long n = PyLong_AsLongLongAndOverflow(idx, &overflow);
    int rc = 0;
    if (n == -1 && PyErr_Occurred())
        rc = -1;
    else if (overflow != 0 || n < 0)
        rc = shp_arg_value_error("ProfileNode", "calls", "an int in [0, 2**63 - 1]", idx);
    else
        ((shp_Node *)op)->calls = n;
    Py_DECREF(idx);
    return rc;
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
    double q = 0.0;
    if (shp_arg_real(arg, "ProfileNode.percentile()", "q", &q) < 0)
        return NULL;
    if (!(q >= 0.0 && q <= 100.0))
        return shp_arg_value_error("ProfileNode.percentile()", "q", "in [0, 100]", arg), NULL;
    double ns = shp_hist_quantile(&self->hist, q / 100.0);
    if (isnan(ns))
        Py_RETURN_NONE;
    return PyFloat_FromDouble(ns / 1e6);
}

#define PCT(name, q, doc) {name, Node_get_pct, NULL, doc, (void *)(intptr_t)(q)}

static PyGetSetDef node_getset[] = {
    {"calls", Node_get_calls, Node_set_calls, "Times the scope was exited.", NULL},
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
     "percentile($self, q, /)\n"
     "--\n"
     "\n"
     "The q-th percentile of the wall time per call, in ms.\n"
     "\n"
     "From the node's log-bucket histogram: within 1% of NumPy's method='linear'\n"
     "on the same durations.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "q : float\n"
     "    The percentile, 0 to 100.\n"
     "\n"
     "Returns\n"
     "-------\n"
     "float or None\n"
     "    None before the first call."},
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
     "ProfileNode(name)\n"
     "--\n"
     "\n"
     "One scope of a profiler's call tree, with the calls recorded into it.\n"
     "\n"
     "Made by the profiler (made by hand it is an empty node).  calls,\n"
     "total_wall_time and total_cpu_time (seconds), peak_ram_delta_mb and\n"
     "peak_vram_delta_mb are settable, as in the released module; children maps\n"
     "names to nodes in first-entered order; mean_ms, min_ms, max_ms, p50_ms,\n"
     "p95_ms, p99_ms and percentile(q) describe the wall time per call (None\n"
     "before the first call).\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "name : str\n"
     "    The scope's name."},
    {0, NULL},
};

PyType_Spec shp_node_spec = {
    .name = "spatialhub.utils.profiling.ProfileNode",
    .basicsize = sizeof(shp_Node),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = node_slots,
};

