/*
 * gcguard.c -- the cyclic collector around a run.
 *
 * disable_gc=True holds the collector off for the timed loop, counted per
 * interpreter so that overlapping runs never switch it back on under each
 * other; and a full collection before every timed loop, whatever the
 * collector's switch says.  No calls into other files.
 */
#include "run/run.h"

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
    /* owned: a finalizer run by the call may remove it from sys.modules */
    PyObject *gc = PyDict_GetItemString(PyImport_GetModuleDict(), "gc");   /* borrowed */
    Py_XINCREF(gc);
    if (gc == NULL)
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
    PyErr_Clear();   /* gc.enable() of the builtin module: it cannot run user code */
    PyErr_Restore(type, value, tb);
#endif
}

/*
 * disable_gc=True in runs that overlap (threads, a benchmark inside func,
 * greenlets) must not turn the collector back on while another run is still
 * in its loop.  The holds are counted per thread and the last one out
 * restores the state the first one found.  The record lives in the
 * interpreter's dict (the collector is per interpreter, and there may be
 * several instances of this module): a 2-tuple (state found, {thread id:
 * holds}).  Per thread because of fork(): in a child only the forking thread
 * exists, and the holds of the others must go (shp_gc_after_fork_child).
 * All under the GIL, with no Python code between reading and writing it
 * (the dict's keys are ints); the record is owned while it is used.
 */
#define SHP_GC_HOLD_KEY "spatialhub.profiling.gc_hold"

/* The record, owned, with its parts (borrowed from it): 1 found, 0 none,
 * -1 error (a record someone replaced with something else is an error). */
static int
hold_record(PyObject *d, PyObject **rec, long *was, PyObject **holders)
{
    *rec = PyDict_GetItemString(d, SHP_GC_HOLD_KEY);   /* borrowed: owned below */
    if (*rec == NULL)
        return 0;
    Py_INCREF(*rec);
    if (!PyTuple_CheckExact(*rec) || PyTuple_GET_SIZE(*rec) != 2 ||
        !PyLong_CheckExact(PyTuple_GET_ITEM(*rec, 0)) ||
        !PyDict_CheckExact(PyTuple_GET_ITEM(*rec, 1))) {
        Py_CLEAR(*rec);
        PyErr_SetString(PyExc_RuntimeError, "disable_gc: the collector hold record is corrupt");
        return -1;
    }
    *was = PyLong_AsLong(PyTuple_GET_ITEM(*rec, 0));
    *holders = PyTuple_GET_ITEM(*rec, 1);
    return 1;
}

/* holders[me] += delta (deleted at 0).  0 / -1. */
static int
add_hold(PyObject *holders, long delta)
{
    PyObject *me = PyLong_FromUnsignedLong(PyThread_get_thread_ident());
    if (me == NULL)
        return -1;
    PyObject *cur = PyDict_GetItemWithError(holders, me);   /* an exact int: no user code */
    long n = cur != NULL ? PyLong_AsLong(cur) : 0;
    int rc = -1;
    if (PyErr_Occurred())
        goto done;
    n += delta;
    if (n > 0) {
        PyObject *v = PyLong_FromLong(n);
        rc = v ? PyDict_SetItem(holders, me, v) : -1;
        Py_XDECREF(v);
    }
    else {
        rc = cur != NULL ? PyDict_DelItem(holders, me) : 0;
    }
done:
    Py_DECREF(me);
    return rc;
}

int
shp_gc_hold(void)
{
    PyObject *d = PyInterpreterState_GetDict(PyInterpreterState_Get());
    if (d == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "disable_gc: no interpreter dict to keep state in");
        return -1;
    }
    PyObject *rec = NULL, *holders = NULL;
    long was = 0;
    int found = hold_record(d, &rec, &was, &holders);
    if (found < 0)
        return -1;
    int now_was = gc_disable();   /* off even if something turned it on since */
    if (now_was < 0) {
        Py_XDECREF(rec);
        return -1;
    }
    if (!found) {
        rec = Py_BuildValue("(i{})", now_was);
        if (rec == NULL || PyDict_SetItemString(d, SHP_GC_HOLD_KEY, rec) < 0) {
            Py_XDECREF(rec);
            if (now_was > 0)
                gc_enable();
            return -1;
        }
        holders = PyTuple_GET_ITEM(rec, 1);
    }
    int rc = add_hold(holders, 1);
    if (rc < 0 && PyDict_GET_SIZE(holders) == 0) {
        (void)PyDict_DelItemString(d, SHP_GC_HOLD_KEY);
        if ((found ? was : now_was) > 0)
            gc_enable();
    }
    Py_DECREF(rec);
    return rc;
}

/* The last hold is gone: forget the record, restore the state found. */
static void
drop_record(PyObject *d, long was)
{
    if (PyDict_DelItemString(d, SHP_GC_HOLD_KEY) < 0)
        PyErr_Clear();   /* our str key of the interpreter's dict: no user code */
    if (was > 0)
        gc_enable();
}

void
shp_gc_release(void)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *d = PyInterpreterState_GetDict(PyInterpreterState_Get());
    PyObject *rec = NULL, *holders = NULL;
    long was = 1;
    int found = d != NULL ? hold_record(d, &rec, &was, &holders) : -1;
    if (found <= 0) {
        PyErr_Clear();   /* unreadable: err towards a working collector */
        gc_enable();
    }
    else {
        if (add_hold(holders, -1) < 0)
            PyErr_Clear();   /* MemoryError making an int: the count stays */
        if (PyDict_GET_SIZE(holders) == 0)
            drop_record(d, was);
    }
    Py_XDECREF(rec);
    PyErr_Restore(type, value, tb);
}

/* os.register_at_fork(after_in_child=...): in a child only the forking
 * thread exists; the holds of the others are dropped, and with none left
 * the collector comes back to the state the first holder found (a
 * disable_gc=True run in another thread left it off for good otherwise). */
static PyObject *
gc_after_fork_child(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    PyObject *d = PyInterpreterState_GetDict(PyInterpreterState_Get());
    PyObject *rec = NULL, *holders = NULL, *mine = NULL, *me = NULL;
    long was = 1;
    if (d == NULL || hold_record(d, &rec, &was, &holders) <= 0)
        goto done;
    me = PyLong_FromUnsignedLong(PyThread_get_thread_ident());
    if (me == NULL)
        goto done;
    mine = PyDict_GetItemWithError(holders, me);   /* borrowed; kept below */
    Py_XINCREF(mine);
    if (PyErr_Occurred())
        goto done;
    PyDict_Clear(holders);
    if (mine != NULL && PyDict_SetItem(holders, me, mine) < 0)
        goto done;
    if (PyDict_GET_SIZE(holders) == 0)
        drop_record(d, was);
done:
    Py_XDECREF(mine);
    Py_XDECREF(me);
    Py_XDECREF(rec);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef after_fork_def = {
    "_gc_after_fork_child", gc_after_fork_child, METH_NOARGS,
    "spatialhub: drop the collector holds of threads a fork left behind."};

#define SHP_GC_ATFORK_KEY "spatialhub.profiling.gc_atfork"

int
shp_gc_register_at_fork(void)
{
    PyObject *d = PyInterpreterState_GetDict(PyInterpreterState_Get());
    if (d == NULL)
        return 0;   /* nothing to keep holds in: nothing to fix after a fork */
    PyObject *done = PyDict_GetItemString(d, SHP_GC_ATFORK_KEY);   /* no user code */
    if (done != NULL)
        return 0;   /* once per interpreter, however often the module loads */
    PyObject *os = PyImport_ImportModule("os");
    if (os == NULL)
        return -1;
    PyObject *reg = PyObject_GetAttrString(os, "register_at_fork");
    Py_DECREF(os);
    if (reg == NULL) {   /* no fork on this platform (Windows) */
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return -1;
        PyErr_Clear();
        return 0;
    }
    PyObject *fn = PyCFunction_NewEx(&after_fork_def, NULL, NULL);
    PyObject *kw = fn ? Py_BuildValue("{sO}", "after_in_child", fn) : NULL;
    PyObject *args = kw ? PyTuple_New(0) : NULL;
    PyObject *r = args ? PyObject_Call(reg, args, kw) : NULL;
    int rc = r != NULL ? PyDict_SetItemString(d, SHP_GC_ATFORK_KEY, Py_True) : -1;
    Py_XDECREF(r);
    Py_XDECREF(args);
    Py_XDECREF(kw);
    Py_XDECREF(fn);
    Py_DECREF(reg);
    return rc;
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
int
shp_full_collect(void)
{
#if PY_VERSION_HEX >= 0x030A0000
    if (PyGC_IsEnabled()) {
        PyGC_Collect();
        return 0;
    }
#endif
    PyObject *gc = PyImport_ImportModule("gc");
    PyObject *r = gc ? PyObject_CallMethod(gc, "collect", NULL) : NULL;
    Py_XDECREF(r);
    Py_XDECREF(gc);
    return shp_clear_unless_fatal();   /* an import hook's Ctrl-C is the user's */
}
