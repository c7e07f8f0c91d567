/*
 * gcguard.c -- the cyclic collector around a run.
 *
 * disable_gc=True holds the collector off for the timed loop, counted per
 * interpreter so that overlapping runs never switch it back on under each
 * other; and a full collection before every timed loop, whatever the
 * collector's switch says.  No calls into other files.
 */
#include "profiling.h"

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

int
shp_gc_hold(void)
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

void
shp_gc_release(void)
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
void
shp_full_collect(void)
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
