/*
 * shp.h -- what every file of the extension includes first: Python and NumPy
 * set up the same way everywhere, compatibility with CPython 3.9, the
 * platform macros, the build's version, and the inline helpers that call
 * only the C-API (checked size arithmetic, plain dict keys, dropping an
 * exception that does not matter).  csrc/README.md is the map of the rest.
 */
#ifndef SHP_SHP_H
#define SHP_SHP_H


#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL shp_ARRAY_API
#ifndef SHP_IMPORT_ARRAY
#define NO_IMPORT_ARRAY
#endif

/* Python 3.9 lacks Py_NewRef and Py_XNewRef (3.10+). */
#if PY_VERSION_HEX < 0x030A0000
static inline PyObject *
shp_newref(PyObject *o)
{
    Py_INCREF(o);
    return o;
}
#define Py_NewRef(o) shp_newref((PyObject *)(o))
static inline PyObject *
shp_xnewref(PyObject *o)
{
    Py_XINCREF(o);
    return o;
}
#define Py_XNewRef(o) shp_xnewref((PyObject *)(o))
#endif

/* ---- sizes and names: inline, calling only the C-API --------------------- */

/* *out = a + b, for sizes a, b >= 0.  0, or -1 (no exception set) when the
 * sum would pass PY_SSIZE_T_MAX.  Every sum of user-given sizes (run_sizes,
 * rounds, buffer lengths) goes through this or shp_size_mul. */
static inline int
shp_size_add(Py_ssize_t a, Py_ssize_t b, Py_ssize_t *out)
{
    if (a < 0 || b < 0 || a > PY_SSIZE_T_MAX - b)
        return -1;
    *out = a + b;
    return 0;
}

/* *out = a * b, for sizes a, b >= 0.  0, or -1 (no exception set) on overflow. */
static inline int
shp_size_mul(Py_ssize_t a, Py_ssize_t b, Py_ssize_t *out)
{
    if (a < 0 || b < 0 || (a > 0 && b > PY_SSIZE_T_MAX / a))
        return -1;
    *out = a * b;
    return 0;
}

/* d[key] = v with a plain str key.  PyDict_SetItemString interns its key,
 * and a string interned by a per-call result dies with it: on CPython <= 3.11
 * each such death churns the interpreter's intern table, which then grows by
 * resizing (a 0.96 MB step in a loop of 2,000 calls).  Per-call dicts and
 * attributes use plain strings.  0 / -1. */
static inline int
shp_dict_set(PyObject *d, const char *key, PyObject *v)
{
    PyObject *k = PyUnicode_FromString(key);
    if (k == NULL)
        return -1;
    int rc = PyDict_SetItem(d, k, v);
    Py_DECREF(k);
    return rc;
}

/* ---- platform ---------------------------------------------------------- */

#if defined(_WIN32)
#define SHP_WINDOWS 1
#elif defined(__APPLE__)
#define SHP_MACOS 1
#elif defined(__linux__)
#define SHP_LINUX 1
#endif

/* The distribution's version, a C string: setup.py passes it from
 * src/spatialhub/utils/profiling/_version.py (the one place it is written), so
 * the native core states the version it was built as (_native.__version__, the
 * environment record) and the package can refuse a stale in-place build. */
#ifndef SHP_VERSION
#error "SHP_VERSION is not defined: build through setup.py (pip install .), which reads it from _version.py"
#endif

#define SHP_MIB (1024.0 * 1024.0)

/* ---- dropping an exception that does not matter ------------------------ */

/*
 * Metadata lookups, a broken stderr, a half-imported module: the harness
 * ignores their failures so that they never cost the user a measurement.
 * Only failures, i.e. subclasses of Exception, are dropped.  Every other
 * BaseException is a request to stop this code -- KeyboardInterrupt,
 * SystemExit, GeneratorExit, greenlet's GreenletExit, gevent.Timeout,
 * asyncio's CancelledError -- and lands wherever Python code happens to run
 * (a subprocess of platform.platform(), a stream's write(), a switch point
 * under gevent); clearing it loses the request.  These two are the only way
 * the extension drops an exception that Python code may have raised (static
 * inline: C-API only).
 */

/* 1 if an exception is pending and it is not a subclass of Exception (a
 * BaseException that asks to stop), 0 otherwise.  No Python code runs. */
static inline int
shp_error_is_fatal(void)
{
    return PyErr_Occurred() != NULL && !PyErr_ExceptionMatches(PyExc_Exception);
}

/* Drop the pending exception (if any) unless it is fatal in the sense above.
 * 0: nothing is set now; -1: the fatal exception is still set. */
static inline int
shp_clear_unless_fatal(void)
{
    if (PyErr_Occurred() == NULL)
        return 0;
    if (shp_error_is_fatal())
        return -1;
    PyErr_Clear();
    return 0;
}

/* What a call's result is: 0 a value; 1 a generator or an async generator
 * (work done only when iterated); 2 an awaitable (a coroutine, or an object
 * with __await__: work done only when awaited).  C-API only, no Python runs. */
static inline int
shp_result_is_lazy(PyObject *r)
{
    /* exact type compares: none of the three types can be subclassed, and
     * this runs inside the timed region (PyGen_Check would walk the MRO of
     * every result that is not a generator) */
    PyTypeObject *t = Py_TYPE(r);
    if (t == &PyGen_Type || t == &PyAsyncGen_Type)
        return 1;
    if (t == &PyCoro_Type)
        return 2;
    PyAsyncMethods *am = t->tp_as_async;
    return am != NULL && am->am_await != NULL ? 2 : 0;
}

/* The module state (objects.h); prototypes below it take a pointer. */
typedef struct shp_state shp_state;

#endif /* SHP_SHP_H */
