/*
 * scopeframe.c -- where each thread / asyncio task is in a profiler's tree:
 * entering and leaving scopes, and the entries a profiler's ContextVar holds.
 *
 * The ContextVar of a profiler holds the calling context's innermost open
 * entry, a frame: the node entered, the frame it was entered from (so the
 * path of frames is the context's stack), and the ContextVar token that
 * restores the previous frame.  A frame, not the node itself, because one
 * node is shared by every context inside that scope, while an entry belongs
 * to one: when an entry can never be left where it was entered -- a scope
 * inside a generator that another task or thread closes (asyncio closes an
 * abandoned async generator in a task of its own), a Timer dropped while
 * entered -- its frame is marked abandoned, and the context that entered it
 * skips it from then on (its next scope nests under the abandoned one's
 * parent instead of under the abandoned scope for ever).  Nothing else of a
 * frame changes after it is made.
 *
 * The ContextVar is reachable from Python (contextvars.copy_context()), so
 * whatever it holds is checked before use: a frame of this module's type,
 * None (the root) or nothing; anything else is a TypeError, never a cast.
 *
 * GC: a frame holds its token, the token its context, and the context (while
 * the entry is open there) the frame -- a cycle the collector must see.
 *
 * Before 3.12 the collector runs inside allocations, and so inside a
 * ContextVar's set / reset while it builds the context's new mapping (a
 * HAMT): a finalizer that sets any variable of the same context there frees
 * the mapping under it (CPython gh-148891: SIGSEGV in hamt_node_bitmap_assoc,
 * reproduced by tests/test_reliability_finalizers.py), and a reset back to
 * "unset" can leave the variable's cache pointing at a freed value.  So on
 * 3.10 and 3.11 the collector is held off for the few instructions of each
 * set and reset here (nothing in them runs Python code: the values they let
 * go are held by the entries, so no other thread can see the switch), and
 * the variable is never left unset once used: a context's first entry
 * starts from None (the root), not from "unset".  3.9 has no C switch for
 * the collector: there the gc module's isenabled / disable / enable are
 * called (a context copy, tried first, closed the reset's window but not the
 * set's: the finalizer storm crashed 3.9 in CI).
 */
#include "scope/scope.h"

#if PY_VERSION_HEX >= 0x030C0000   /* the collector runs between bytecodes only */
#define GUARD_BEGIN() int guard_ok_ = 1
#define GUARD_END() (void)guard_ok_
#elif PY_VERSION_HEX >= 0x030A0000
#define GUARD_BEGIN() int guard_was_ = PyGC_Disable(), guard_ok_ = 1
#define GUARD_END() do { (void)guard_ok_; if (guard_was_) PyGC_Enable(); } while (0)
#else   /* 3.9: no C switch; the gc module's own, which run no Python code */
static int
gc_switch(const char *method)
{
    PyObject *gc = PyDict_GetItemString(PyImport_GetModuleDict(), "gc");   /* borrowed */
    Py_XINCREF(gc);
    if (gc == NULL)
        gc = PyImport_ImportModule("gc");
    PyObject *r = gc ? PyObject_CallMethod(gc, method, NULL) : NULL;
    Py_XDECREF(gc);
    int v = r ? PyObject_IsTrue(r) : -1;
    Py_XDECREF(r);
    return v;
}
/* isenabled, then disable: a collection may still run while those look the
 * methods up, before the set or reset has begun */
#define GUARD_BEGIN() int guard_was_ = gc_switch("isenabled"), \
                      guard_ok_ = guard_was_ >= 0 && (!guard_was_ || gc_switch("disable") >= 0)
#define GUARD_END() do { if (guard_ok_ && guard_was_ == 1) gc_enable_keeping_error(); } while (0)
static void
gc_enable_keeping_error(void)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (gc_switch("enable") < 0)
        PyErr_Clear();
    PyErr_Restore(type, value, tb);
}
#endif

/* var.set(value): the token (new reference), or NULL with an exception. */
static PyObject *
var_set(PyObject *var, PyObject *value)
{
    GUARD_BEGIN();
    PyObject *token = guard_ok_ ? PyContextVar_Set(var, value) : NULL;
    GUARD_END();
    return token;
}

/* var.reset(token): 0 / -1. */
static int
var_reset(PyObject *var, PyObject *token)
{
    GUARD_BEGIN();
    int rc = guard_ok_ ? PyContextVar_Reset(var, token) : -1;
    GUARD_END();
    return rc;
}

static shp_Frame *
frame_new(PyTypeObject *type, PyObject *node, shp_Frame *prev)
{
    shp_Frame *f = (shp_Frame *)type->tp_alloc(type, 0);   /* zeroed, tracked */
    if (f == NULL)
        return NULL;
    f->node = Py_NewRef(node);
    f->prev = (shp_Frame *)Py_XNewRef((PyObject *)prev);
    return f;
}

static int
frame_resolve(PyTypeObject *type, PyObject *value, uint64_t gen, shp_Frame **out)
{
    *out = NULL;
    if (value == NULL || value == Py_None)
        return 0;
    if (!Py_IS_TYPE(value, type)) {
        PyErr_Format(PyExc_TypeError,
                     "the scope profiler's context variable holds a %.100s, not a scope "
                     "entry: code other than the profiler set it (only the profiler may; "
                     "None puts the context back at the root)", Py_TYPE(value)->tp_name);
        return -1;
    }
    shp_Frame *f = (shp_Frame *)value;
    while (f != NULL && f->abandoned)
        f = f->prev;
    /* a frame of an older tree (before reset()): the context is at the new root */
    if (f != NULL && ((shp_Node *)f->node)->gen != gen)
        f = NULL;
    *out = f;
    return 0;
}

static void
frame_abandon(shp_Frame *f)
{
    f->abandoned = 1;
    Py_CLEAR(f->token);
}

/* The calling context's position in `p`: its node (new reference) and, when
 * `frame` is not NULL, its innermost live entry (new reference; NULL at the
 * root).  NULL with TypeError when the ContextVar holds something foreign. */
PyObject *
shp_scope_position(shp_Profiler *p, shp_Frame **frame)
{
    PyObject *v = NULL;
    shp_Frame *f = NULL;
    if (PyContextVar_Get(p->var, NULL, &v) < 0)
        return NULL;
    if (frame_resolve(p->frame_type, v, p->gen, &f) < 0) {
        Py_XDECREF(v);
        return NULL;
    }
    PyObject *node = Py_NewRef(f != NULL ? f->node : p->root);
    Py_XINCREF(f);
    Py_XDECREF(v);   /* the context still holds it */
    if (frame != NULL)
        *frame = f;
    else
        Py_XDECREF(f);
    return node;
}

/* `children` is a dict users can reach (ProfileNode.children): what is
 * found there is checked before it is used as a node. */
static shp_Node *
checked_child(shp_Profiler *p, shp_Node *parent, PyObject *name, PyObject *found)
{
    if (!Py_IS_TYPE(found, p->node_type)) {
        PyErr_Format(PyExc_TypeError,
                     "scope %R: ProfileNode.children of %R holds a %.100s under that name, not "
                     "a ProfileNode (the children dict is the profiler's; do not store into "
                     "it)", name, parent->name, Py_TYPE(found)->tp_name);
        return NULL;
    }
    return (shp_Node *)Py_NewRef(found);
}

/* The child `name` of `parent`, created (and registered) if new: new reference. */
static shp_Node *
profiler_child(shp_Profiler *p, shp_Node *parent, PyObject *name)
{
    /* a str subclass name can run __hash__ / __eq__ here: `parent` is held by
     * the caller, `found` is taken at once */
    PyObject *found = PyDict_GetItemWithError(parent->children, name);
    if (found != NULL)
        return checked_child(p, parent, name, found);
    if (PyErr_Occurred())
        return NULL;
    shp_Node *n = shp_node_new(p->node_type, name);
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
        return winner != NULL ? checked_child(p, parent, name, winner) : NULL;
    }
    if (n->gen == p->gen && PyList_GET_SIZE(p->nodes) < (Py_ssize_t)SHP_SCOPE_NO_ID) {
        n->id = (uint32_t)PyList_GET_SIZE(p->nodes);
        if (PyList_Append(p->nodes, (PyObject *)n) < 0) {
            n->id = SHP_SCOPE_NO_ID;
            Py_DECREF(n);
            return NULL;
        }
    }
    return n;
}

/* Finding or making the child and the entry can run Python code (a
 * finalizer, a name's __eq__); the entry is made from what was read before,
 * all of it held: a finalizer's own scopes in this context are left before it
 * returns, and a reset() meanwhile makes this entry one of the old tree (the
 * context continues at the new root, as for every entry of the old tree). */
shp_Node *
shp_scope_push(shp_Profiler *p, PyObject *name, PyObject **entry)
{
    shp_Frame *prev = NULL;
    PyObject *v = NULL;
    if (PyContextVar_Get(p->var, NULL, &v) < 0)
        return NULL;
    if (v == NULL) {   /* this context's first entry: from None, never from "unset" */
        PyObject *token = var_set(p->var, Py_None);
        if (token == NULL)
            return NULL;
        Py_DECREF(token);
    }
    Py_XDECREF(v);
    PyObject *cur = shp_scope_position(p, &prev);
    if (cur == NULL)
        return NULL;
    shp_Node *node = profiler_child(p, (shp_Node *)cur, name);
    Py_DECREF(cur);
    shp_Frame *f = node != NULL ? frame_new(p->frame_type, (PyObject *)node, prev) : NULL;
    Py_XDECREF(prev);
    if (f == NULL) {
        Py_XDECREF(node);
        return NULL;
    }
    f->token = var_set(p->var, (PyObject *)f);
    if (f->token == NULL) {
        Py_DECREF(f);
        Py_DECREF(node);
        return NULL;
    }
    *entry = (PyObject *)f;
    return node;
}

int
shp_scope_leave(shp_Profiler *p, PyObject *name, PyObject *entry, int closing)
{
    shp_Frame *f = (shp_Frame *)entry;
    if (f->token == NULL)   /* abandoned already */
        return 0;
    if (var_reset(p->var, f->token) == 0) {
        Py_CLEAR(f->token);
        return 0;
    }
    if (PyErr_ExceptionMatches(PyExc_ValueError)) {
        /* the token belongs to another context: entered in another thread or task */
        PyErr_Clear();
        if (closing) {
            frame_abandon(f);
            return 0;
        }
        PyErr_Format(PyExc_RuntimeError,
                     "scope %R is left in a different thread or asyncio task than the one "
                     "that entered it; leave a scope where it was entered (it stays open "
                     "there)", name);
    }
    return -1;
}

void
shp_scope_abandon(PyObject *entry)
{
    frame_abandon((shp_Frame *)entry);
}


/* pop(): the calling context moves to the entry its current one was entered
 * from (the root when none is left); at the root nothing happens. */
int
shp_scope_pop(shp_Profiler *p)
{
    shp_Frame *f = NULL, *up = NULL;
    PyObject *cur = shp_scope_position(p, &f);
    if (cur == NULL)
        return -1;
    Py_DECREF(cur);
    if (f == NULL)
        return 0;
    /* f->prev is a frame or NULL, never foreign: resolving cannot fail */
    (void)frame_resolve(p->frame_type, (PyObject *)f->prev, p->gen, &up);
    PyObject *token = var_set(p->var, up != NULL ? (PyObject *)up : Py_None);
    Py_DECREF(f);
    if (token == NULL)
        return -1;
    Py_DECREF(token);
    return 0;
}

/* ---- the type ------------------------------------------------------------ */

static int
Frame_traverse(PyObject *op, visitproc visit, void *arg)
{
    shp_Frame *f = (shp_Frame *)op;
    Py_VISIT(Py_TYPE(op));
    Py_VISIT(f->node);
    Py_VISIT(f->prev);
    Py_VISIT(f->token);
    return 0;
}

static int
Frame_clear(PyObject *op)
{
    shp_Frame *f = (shp_Frame *)op;
    Py_CLEAR(f->token);
    /* node and prev are kept: a frame is only ever read through a context,
     * and neither a node nor a frame refers back to a frame */
    return 0;
}

static void
Frame_dealloc(PyObject *op)
{
    shp_Frame *f = (shp_Frame *)op;
    PyTypeObject *tp = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    Py_CLEAR(f->token);
    Py_CLEAR(f->node);
    /* The chain of frames is as long as the nesting (push() nests without
     * Python recursion): frames only this one holds are freed in a loop, not
     * by a recursion as deep as the chain. */
    PyObject *prev = (PyObject *)f->prev;
    f->prev = NULL;
    while (prev != NULL && Py_REFCNT(prev) == 1 && Py_IS_TYPE(prev, tp)) {
        PyObject *next = (PyObject *)((shp_Frame *)prev)->prev;
        ((shp_Frame *)prev)->prev = NULL;
        Py_DECREF(prev);
        prev = next;
    }
    Py_XDECREF(prev);
    tp->tp_free(op);
    Py_DECREF(tp);
}

static PyObject *
Frame_repr(PyObject *op)
{
    shp_Frame *f = (shp_Frame *)op;
    return PyUnicode_FromFormat("<scope entry of %R%s>", ((shp_Node *)f->node)->name,
                                f->abandoned ? ", abandoned" : "");
}

static PyType_Slot frame_slots[] = {
    {Py_tp_dealloc, Frame_dealloc},
    {Py_tp_traverse, Frame_traverse},
    {Py_tp_clear, Frame_clear},
    {Py_tp_repr, Frame_repr},
    {Py_tp_doc, "One entry of a scope (what a profiler's ContextVar holds); made by the "
                "profiler only."},
    {0, NULL},
};

PyType_Spec shp_frame_spec = {
    .name = "spatialhub.utils.profiling._ScopeEntry",
    .basicsize = sizeof(shp_Frame),
#if PY_VERSION_HEX >= 0x030A0000
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_DISALLOW_INSTANTIATION,
#else
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,   /* module.c clears tp_new */
#endif
    .slots = frame_slots,
};
