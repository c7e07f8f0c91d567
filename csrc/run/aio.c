/*
 * aio.c -- calls whose result is work still to do: a coroutine (an async
 * function, a callable returning an awaitable) is run to completion on an
 * event loop kept for the run; a generator is refused.
 *
 * The loop is asyncio's, made for the run (asyncio.new_event_loop) and
 * closed after it; each timed call is func(...) then the loop's
 * run_until_complete of what it returned, inside the timed region.  What
 * the loop itself costs per call is measured on an empty coroutine and
 * reported beside overhead_ms (loop_overhead_ms).
 */
#include "run/run.h"

#include <string.h>

/* The code object a callable runs, following bound methods, functools.partial
 * and an instance's __call__ (new reference, or NULL: none found; an
 * exception only when it is fatal: shp_clear_unless_fatal). */
static PyObject *
code_of(PyObject *func, int depth)
{
    if (func == NULL || depth > 8)
        return NULL;
    if (PyFunction_Check(func))
        return Py_NewRef(PyFunction_GET_CODE(func));
    if (PyMethod_Check(func))
        return code_of(PyMethod_GET_FUNCTION(func), depth + 1);
    if (PyType_Check(func) || PyCFunction_Check(func))
        return NULL;
    PyObject *inner = NULL, *functools = PyImport_ImportModule("functools");
    PyObject *partial = functools ? PyObject_GetAttrString(functools, "partial") : NULL;
    Py_XDECREF(functools);
    if (partial != NULL && PyType_Check(partial) &&
        PyObject_TypeCheck(func, (PyTypeObject *)partial))
        inner = PyObject_GetAttrString(func, "func");
    else if (partial != NULL)
        inner = PyObject_GetAttrString(func, "__call__");
    Py_XDECREF(partial);
    if (inner == NULL)
        return shp_clear_unless_fatal(), NULL;
    PyObject *code = inner != func ? code_of(inner, depth + 1) : NULL;
    Py_DECREF(inner);
    return code;
}

int
shp_aio_is_async(PyObject *func)
{
    PyObject *code = code_of(func, 0);
    if (code == NULL)
        return PyErr_Occurred() ? -1 : 0;
    int flags = ((PyCodeObject *)code)->co_flags;
    Py_DECREF(code);
    return (flags & (CO_COROUTINE | CO_ITERABLE_COROUTINE)) != 0;
}

int
shp_aio_refuse(PyObject *odd, PyObject *name)
{
    int async_gen = PyAsyncGen_CheckExact(odd);
    PyObject *r = PyObject_CallMethod(odd, "close", NULL);   /* never started: nothing runs */
    Py_XDECREF(r);
    if (r == NULL && shp_clear_unless_fatal() < 0)
        return -1;
    PyErr_Format(PyExc_TypeError,
                 "benchmark %R: func returned %s, which does its work only when iterated: "
                 "its creation is not what you want to time. Time the iteration instead, "
                 "e.g. benchmark_callable(lambda: list(gen()))", name,
                 async_gen ? "an async generator" : "a generator");
    return -1;
}

int
shp_aio_take(shp_call *p, PyObject *name)
{
    PyObject *lazy = p->lazy;
    p->lazy = NULL;
    if (lazy == NULL)
        return 0;
    int rc = -1;
    if (shp_result_is_lazy(lazy) == 1)
        rc = shp_aio_refuse(lazy, name);
    else if (p->drive != NULL || shp_aio_open(p) == 0) {
        PyObject *r = PyObject_CallOneArg(p->drive, lazy);
        if (r == NULL)
            shp_note_current("benchmark %R: raised by func's first call, awaited (untimed)",
                             name);
        Py_XDECREF(r);
        rc = r != NULL ? 0 : -1;
    }
    else if (PyCoro_CheckExact(lazy)) {   /* no loop for it: closed, not left unawaited */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyObject *r = PyObject_CallMethod(lazy, "close", NULL);
        Py_XDECREF(r);
        if (r == NULL)
            PyErr_Clear();
        PyErr_Restore(type, value, tb);
    }
    Py_DECREF(lazy);
    return rc;
}

int
shp_aio_open(shp_call *p)
{
    PyObject *asyncio = PyImport_ImportModule("asyncio"), *running = NULL;
    if (asyncio == NULL)
        return -1;
    /* a loop running in this thread (Jupyter, an async test) cannot run ours */
    running = PyObject_CallMethod(asyncio, "_get_running_loop", NULL);
    if (running == NULL) {
        Py_DECREF(asyncio);
        return -1;
    }
    int busy = running != Py_None;
    Py_DECREF(running);
    if (busy) {
        Py_DECREF(asyncio);
        PyErr_SetString(PyExc_RuntimeError,
                        "benchmark_callable(): an event loop is already running in this thread "
                        "(a notebook, an async test), so an async function cannot be run to "
                        "completion here: run the benchmark in a thread, e.g. "
                        "await asyncio.to_thread(benchmark_callable, f)");
        return -1;
    }
    p->loop = PyObject_CallMethod(asyncio, "new_event_loop", NULL);
    Py_DECREF(asyncio);
    if (p->loop == NULL)
        return -1;
    p->drive = PyObject_GetAttrString(p->loop, "run_until_complete");
    return p->drive != NULL ? 0 : -1;
}

void
shp_aio_close(shp_call *p)
{
    Py_CLEAR(p->drive);
    if (p->loop == NULL)
        return;
    PyObject *type, *value, *tb;   /* an exception on its way out is kept */
    PyErr_Fetch(&type, &value, &tb);
    PyObject *r = PyObject_CallMethod(p->loop, "close", NULL);
    Py_XDECREF(r);
    if (r == NULL)
        PyErr_Clear();   /* a loop that cannot close: ours, nothing of the user's is lost */
    PyErr_Restore(type, value, tb);
    Py_CLEAR(p->loop);
}

/* An empty coroutine function, made once per measurement. */
static PyObject *
empty_coroutine_function(void)
{
    PyObject *globals = PyDict_New(), *fn = NULL;
    if (globals == NULL)
        return NULL;
    PyObject *builtins = PyEval_GetBuiltins();   /* borrowed */
    if (builtins != NULL && PyDict_SetItemString(globals, "__builtins__", builtins) == 0) {
        PyObject *r = PyRun_String("async def _empty():\n    pass\n", Py_file_input, globals,
                                   globals);
        Py_XDECREF(r);
        if (r != NULL) {
            fn = PyDict_GetItemString(globals, "_empty");   /* borrowed: no user code */
            Py_XINCREF(fn);
        }
    }
    Py_DECREF(globals);
    return fn;
}

int
shp_aio_overhead(shp_call *p, int n, double *out_ns)
{
    PyObject *fn = empty_coroutine_function();
    if (fn == NULL)
        return -1;
    double *t = PyMem_New(double, (size_t)n);
    if (t == NULL) {
        Py_DECREF(fn);
        PyErr_NoMemory();
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        int64_t t0 = shp_now_ns();
        PyObject *coro = PyObject_CallNoArgs(fn);
        PyObject *r = coro != NULL ? PyObject_CallOneArg(p->drive, coro) : NULL;
        int64_t t1 = shp_now_ns();
        Py_XDECREF(coro);
        Py_XDECREF(r);
        if (r == NULL)
            rc = -1;
        t[i] = (double)(t1 - t0);
    }
    if (rc == 0)
        *out_ns = shp_percentile_inplace(t, n, 0.5);
    PyMem_Free(t);
    Py_DECREF(fn);
    return rc;
}

int
shp_aio_refuse_object(PyObject *func)
{
    if (shp_result_is_lazy(func) != 2 || PyCallable_Check(func))
        return 0;
    if (PyCoro_CheckExact(func)) {
        PyObject *r = PyObject_CallMethod(func, "close", NULL);   /* never started */
        Py_XDECREF(r);
        if (r == NULL && shp_clear_unless_fatal() < 0)
            return -1;
    }
    PyErr_Format(PyExc_TypeError,
                 "benchmark_callable(): func is a %.100s object, what calling an async function "
                 "returns: pass the function itself (benchmark_callable(f, ...), not f(...)), "
                 "and every call is awaited", Py_TYPE(func)->tp_name);
    return -1;
}

PyObject *
shp_aio_is_async_py(PyObject *module, PyObject *func)
{
    (void)module;
    int r = shp_aio_is_async(func);
    return r < 0 ? NULL : PyBool_FromLong(r);
}

PyObject *
shp_aio_loop_overhead_py(PyObject *module, PyObject *loop)
{
    (void)module;
    shp_call p;
    memset(&p, 0, sizeof(p));
    p.drive = PyObject_GetAttrString(loop, "run_until_complete");
    double ns = 0.0;
    int rc = p.drive != NULL ? shp_aio_overhead(&p, SHP_AIO_OVERHEAD_RUNS, &ns) : -1;
    Py_XDECREF(p.drive);
    return rc < 0 ? NULL : PyFloat_FromDouble(ns / 1e6);
}
