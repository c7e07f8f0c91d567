/*
 * sync.c -- what synchronises each iteration, and calling a Python sync.
 *
 * Resolved once per run from sync_fn and the device label: our own
 * CudaSync (called as the driver, without the interpreter), a Python
 * callable, the CUDA driver for a CUDA label, torch.mps.synchronize for
 * "mps", or nothing on the CPU.  Never silently nothing on a device that
 * runs asynchronously.  The per-iteration dispatch, shp_sync_call, is a
 * static inline in run.h: it runs inside the timed region.
 */
#include "run/run.h"
#include <numpy/arrayobject.h>

/* torch.mps.synchronize when torch is already imported; never imports it.
 * NULL without an exception when there is none; NULL with a Ctrl-C /
 * SystemExit set when one arrived while torch was asked. */
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
        (void)shp_clear_unless_fatal();   /* torch's lazy attributes run its code */
    return fn;
}

/* 0 when an imported torch says MPS is not available
 * (torch.backends.mps.is_available() false or raising), else 1: no torch,
 * or a torch without that query, cannot tell.  Never sets an exception. */
static int
mps_available(void)
{
    PyObject *mods = PySys_GetObject("modules");   /* borrowed */
    PyObject *torch = mods ? PyDict_GetItemString(mods, "torch") : NULL;
    if (torch == NULL || torch == Py_None)
        return 1;
    Py_INCREF(torch);
    PyObject *backends = PyObject_GetAttrString(torch, "backends");
    Py_DECREF(torch);
    PyObject *mps = backends ? PyObject_GetAttrString(backends, "mps") : NULL;
    Py_XDECREF(backends);
    PyObject *fn = mps ? PyObject_GetAttrString(mps, "is_available") : NULL;
    Py_XDECREF(mps);
    if (fn == NULL) {
        PyErr_Clear();
        return 1;
    }
    PyObject *r = PyObject_CallNoArgs(fn);
    Py_DECREF(fn);
    int ok = r != NULL ? PyObject_IsTrue(r) : 0;
    Py_XDECREF(r);
    if (ok < 0 || PyErr_Occurred())
        PyErr_Clear();
    return ok > 0;
}

/* Decide what synchronises each iteration; never silently nothing on a
 * device that runs asynchronously. */
int
shp_sync_resolve(shp_state *st, const shp_device *dev, int track_vram, shp_sync *p,
                 shp_diag *d)
{
    p->st = st;
    int is_cuda = dev->kind == SHP_DEV_CUDA;
    if (dev->kind == SHP_DEV_MPS && p->fn == NULL && !mps_available()) {
        /* before func is called even once (torch's sync would fail); a
         * sync_fn of the caller's own is theirs to judge */
        PyErr_SetString(PyExc_RuntimeError,
                        "device='mps': MPS is not available on this machine (torch.backends.mps."
                        "is_available() is False: not an Apple-silicon Mac, or a torch built "
                        "without MPS); nothing was called. Use device='cpu'");
        return -1;
    }
    if (dev->kind == SHP_DEV_OTHER && p->fn == NULL) {
        shp_diag_cause(d, SHP_CAUSE_NO_SYNC);
        if (shp_diag_object(d, "device", Py_NewRef(dev->label)) < 0)
            return -1;
    }
    if (p->fn != NULL && shp_cuda_sync_unwrap(st, p->fn, &p->cuda)) {
        /* our own CudaSync passed as sync_fn: call the driver directly */
        Py_CLEAR(p->fn);
        p->have_cuda = 1;
        p->kind = SHP_SYNC_NATIVE;
    }
    else if (p->fn != NULL) {
        p->kind = SHP_SYNC_PYTHON;
    }
    else if (is_cuda) {
        if (shp_cuda_target_init(st, dev->ordinal, &p->cuda) < 0)
            return -1;
        p->have_cuda = 1;
        p->kind = SHP_SYNC_NATIVE;
    }
    else if (dev->kind == SHP_DEV_MPS) {
        p->fn = mps_sync_fn();
        if (p->fn == NULL && PyErr_Occurred())
            return -1;   /* Ctrl-C / SystemExit while torch was asked */
        if (p->fn == NULL) {
            PyErr_SetString(PyExc_RuntimeError,
                            "device='mps' needs a sync: import torch first (its torch.mps."
                            "synchronize is used) or pass sync_fn=...; without one only the "
                            "asynchronous dispatch would be timed");
            return -1;
        }
        p->kind = SHP_SYNC_PYTHON;
    }
    /* VRAM telemetry on a CUDA device synced by the user's own hook */
    if (is_cuda && !p->have_cuda && track_vram) {
        if (shp_cuda_load(st) && shp_cuda_target_init(st, dev->ordinal, &p->cuda) == 0) {
            p->have_cuda = 1;
        }
        else {
            PyErr_Clear();
            shp_diag_cause(d, SHP_CAUSE_NO_VRAM);
            if (shp_diag_object(d, "reason", PyUnicode_FromString(
                                    st->cuda.why[0] ? st->cuda.why : "no CUDA device")) < 0)
                return -1;
        }
    }
    return 0;
}

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

int
shp_sync_python(shp_sync *p, int64_t *t_after)
{
    PyObject *r = PyObject_CallNoArgs(p->fn);
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

int
shp_sync_native_recording(shp_sync *p, int64_t *t_after)
{
    shp_CUresult rc;
    int64_t t = 0;
    Py_BEGIN_ALLOW_THREADS
    rc = shp_cuda_timer_stop_sync_nogil(p->st, &p->cuda, &p->gt);
    t = shp_now_ns();
    Py_END_ALLOW_THREADS
    if (t_after)
        *t_after = t;
    if (rc != 0)
        return shp_cuda_raise(p->st, rc, "cuEventRecord / cuCtxSynchronize failed");
    return 0;
}

void
shp_sync_clear(shp_sync *p)
{
    Py_CLEAR(p->fn);
    if (p->st != NULL && p->have_cuda)
        shp_cuda_timer_free(p->st, &p->cuda, &p->gt);
}
