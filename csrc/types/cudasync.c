/*
 * cudasync.c -- the Python face of the CUDA driver binding (cuda.c).
 *
 * The CudaSync type (the native callable get_cuda_sync_fn() returns, which
 * benchmark_callable recognises and calls without the interpreter), the
 * module functions get_cuda_sync_fn and get_gpu_vram_mb, and the device's
 * entry in a result's environment record.
 */
#include "types/types.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#define SHP_CUDA_SUCCESS 0

int
shp_cuda_describe(shp_state *st, const shp_cuda_target *t, PyObject *env)
{
    const shp_cuda *c = &st->cuda;
    PyObject *driver = NULL;
    PyObject *gpu = NULL;
    int ret = -1;

    if (c->driver_version > 0) {
        driver = PyUnicode_FromFormat("%d.%d", c->driver_version / 1000,
                                      (c->driver_version % 1000) / 10);
    }
    else {
        Py_INCREF(Py_None);   /* (Py_NewRef is 3.10+; this file builds on 3.9) */
        driver = Py_None;
    }
    if (driver == NULL) {
        goto done;
    }
    Py_INCREF(Py_None);
    gpu = Py_None;
    if (c->load_state == 1 && c->cuDeviceGetName != NULL && t != NULL) {
        shp_CUdevice dev = 0;
        char name[256];

        if (c->cuDeviceGet(&dev, t->ordinal) == SHP_CUDA_SUCCESS
            && c->cuDeviceGetName(name, (int)sizeof name, dev) == SHP_CUDA_SUCCESS) {
            name[sizeof name - 1] = '\0';
            /* The name is only reported: an undecodable byte is replaced,
             * never an error. */
            Py_SETREF(gpu, PyUnicode_DecodeUTF8(name, (Py_ssize_t)strlen(name), "replace"));
            if (gpu == NULL) {
                goto done;
            }
        }
    }
    if (shp_dict_set(env, "cuda_driver", driver) < 0
        || shp_dict_set(env, "gpu", gpu) < 0) {
        goto done;
    }
    ret = 0;

done:
    Py_XDECREF(driver);
    Py_XDECREF(gpu);
    return ret;
}

/* ---- CudaSync: the callable get_cuda_sync_fn() returns ------------------------ */

typedef struct {
    PyObject_HEAD
    shp_cuda_target target;
} shp_CudaSync;

static void
CudaSync_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);

    tp->tp_free(self);
    Py_DECREF(tp);
}

/* The sync itself: None, or NULL with RuntimeError naming the CUDA error. */
static PyObject *
CudaSync_sync(PyObject *self)
{
    shp_CudaSync *s = (shp_CudaSync *)self;
    shp_state *st;
    shp_CUresult rc;

    st = shp_state_from_type(Py_TYPE(self));
    if (st == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_RuntimeError, "CudaSync: the profiling module is gone");
        }
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    rc = shp_cuda_sync_nogil(st, &s->target);
    Py_END_ALLOW_THREADS
    if (rc != SHP_CUDA_SUCCESS) {
        char what[64];

        (void)snprintf(what, sizeof what, "cuCtxSynchronize failed on CUDA device %d",
                       s->target.ordinal);
        (void)shp_cuda_raise(st, rc, what);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
CudaSync_call(PyObject *self, PyObject *args, PyObject *kwargs)
{
    if (PyTuple_GET_SIZE(args) != 0 || (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0)) {
        PyErr_SetString(PyExc_TypeError, "CudaSync() takes no arguments");
        return NULL;
    }
    return CudaSync_sync(self);
}

/* The same call as a method in the type's dict, so that inspect.signature
 * reads its text signature (it refuses the slot wrapper tp_call would get);
 * METH_COEXIST puts it there in place of that wrapper.  Calling the object
 * still goes through tp_call. */
static PyObject *
CudaSync_call_method(PyObject *self, PyObject *unused)
{
    (void)unused;
    return CudaSync_sync(self);
}

static PyMethodDef CudaSync_methods[] = {
    {"__call__", CudaSync_call_method, METH_NOARGS | METH_COEXIST,
     "__call__($self, /)\n--\n\nSynchronise the device: returns None once its work is done."},
    {NULL, NULL, 0, NULL},
};

static PyObject *
CudaSync_repr(PyObject *self)
{
    shp_CudaSync *s = (shp_CudaSync *)self;
    shp_state *st = shp_state_from_type(Py_TYPE(self));
    char driver[32];

    if (st == NULL) {
        return NULL;
    }
    if (st->cuda.driver_version > 0) {
        (void)snprintf(driver, sizeof driver, "%d.%d", st->cuda.driver_version / 1000,
                       (st->cuda.driver_version % 1000) / 10);
    }
    else {
        (void)snprintf(driver, sizeof driver, "unknown");
    }
    return PyUnicode_FromFormat("<CudaSync device=%d driver=%s>", s->target.ordinal, driver);
}

static PyObject *
CudaSync_get_device(PyObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromLong(((shp_CudaSync *)self)->target.ordinal);
}

static PyGetSetDef CudaSync_getset[] = {
    {"device", CudaSync_get_device, NULL,
     "Ordinal of the device whose primary context is used when the calling "
     "thread has no current context.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

#if PY_VERSION_HEX < 0x030A0000
/* Before Py_TPFLAGS_DISALLOW_INSTANTIATION: refuse construction by hand. */
static PyObject *
CudaSync_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    (void)args;
    (void)kwargs;
    PyErr_Format(PyExc_TypeError, "cannot create '%s' instances; use get_cuda_sync_fn()",
                 type->tp_name);
    return NULL;
}
#endif

PyDoc_STRVAR(CudaSync_doc,
"Synchronise a CUDA device: cuCtxSynchronize on the calling thread's current\n"
"context, or on the device's primary context when the thread has none.\n"
"\n"
"Made by get_cuda_sync_fn(); called with no argument, it returns None once the\n"
"device's work is done.  The GIL is released while waiting.  benchmark_callable\n"
"calls it without the interpreter.\n"
"\n"
"Raises\n"
"------\n"
"RuntimeError\n"
"    The sync failed (the message names the CUDA error).");

static PyType_Slot CudaSync_slots[] = {
    {Py_tp_dealloc, (void *)CudaSync_dealloc},
    {Py_tp_call, (void *)CudaSync_call},
    {Py_tp_repr, (void *)CudaSync_repr},
    {Py_tp_getset, (void *)CudaSync_getset},
    {Py_tp_methods, (void *)CudaSync_methods},
    {Py_tp_doc, (void *)CudaSync_doc},
#if PY_VERSION_HEX < 0x030A0000
    {Py_tp_new, (void *)CudaSync_new},
#endif
    {0, NULL},
};

PyType_Spec shp_cuda_sync_spec = {
    .name = "spatialhub.utils.profiling.CudaSync",
    .basicsize = sizeof(shp_CudaSync),
    .itemsize = 0,
#if PY_VERSION_HEX >= 0x030A0000
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION
             | Py_TPFLAGS_IMMUTABLETYPE,
#else
    .flags = Py_TPFLAGS_DEFAULT,
#endif
    .slots = CudaSync_slots,
};

/* ---- module functions ---------------------------------------------------------- */

PyObject *
shp_get_cuda_sync_fn(PyObject *module, PyObject *unused)
{
    shp_state *st = (shp_state *)PyModule_GetState(module);
    PyTypeObject *tp;
    shp_CudaSync *s;
    shp_cuda_target t;

    (void)unused;
    if (st == NULL) {
        return NULL;
    }
    if (!shp_cuda_load(st)) {
        Py_RETURN_NONE;
    }
    /* Device 0 unless the caller's thread has a current context: then
     * that context's device, and the sync follows the current context. */
    if (shp_cuda_target_init(st, -1, &t) < 0) {
        return NULL;
    }
    tp = st->cuda_sync_type;
    if (tp == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "CudaSync type is not initialised");
        return NULL;
    }
    s = (shp_CudaSync *)tp->tp_alloc(tp, 0);
    if (s == NULL) {
        return NULL;
    }
    s->target = t;
    return (PyObject *)s;
}

/* get_gpu_vram_mb(device_id=0): the one argument, validated as an int. */
static int
shp_vram_parse_args(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                    long *device_id)
{
    static const char *const names[] = {"device_id"};
    static const shp_argspec spec = {"get_gpu_vram_mb", names, 1, 1, 0, 0};
    PyObject *arg = NULL;
    int overflow = 0;

    if (shp_args_parse(&spec, args, nargs, kwnames, &arg) < 0) {
        return -1;
    }
    *device_id = 0;
    if (arg == NULL) {
        return 0;
    }
    PyObject *idx = shp_arg_index(arg, "get_gpu_vram_mb()", "device_id");
    if (idx == NULL) {
        return -1;
    }
    *device_id = PyLong_AsLongAndOverflow(idx, &overflow);
    Py_DECREF(idx);
    if (*device_id == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (overflow != 0) {
        *device_id = overflow > 0 ? LONG_MAX : LONG_MIN;
    }
    return 0;
}

PyObject *
shp_get_gpu_vram_mb(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                    PyObject *kwnames)
{
    shp_state *st = (shp_state *)PyModule_GetState(module);
    shp_cuda_target t;
    size_t free_b = 0, total_b = 0;
    shp_CUresult rc;
    long device_id;

    if (st == NULL || shp_vram_parse_args(args, nargs, kwnames, &device_id) < 0) {
        return NULL;
    }
    /* A negative id is wrong whether or not a driver is present. */
    if (device_id < 0) {
        PyErr_Format(PyExc_ValueError, "get_gpu_vram_mb(): device_id must be >= 0, got %ld",
                     device_id);
        return NULL;
    }
    if (!shp_cuda_load(st)) {
        Py_RETURN_NONE;
    }
    if (device_id >= st->cuda.device_count) {
        PyErr_Format(PyExc_ValueError,
                     "get_gpu_vram_mb(): device_id %ld is out of range: %d CUDA device(s) "
                     "visible (0..%d)", device_id, st->cuda.device_count,
                     st->cuda.device_count - 1);
        return NULL;
    }
    if (shp_cuda_target_init(st, (int)device_id, &t) < 0) {
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    rc = shp_cuda_meminfo_nogil(st, &t, &free_b, &total_b);
    Py_END_ALLOW_THREADS
    if (rc != SHP_CUDA_SUCCESS) {
        char what[64];

        (void)snprintf(what, sizeof what, "cuMemGetInfo_v2 failed on CUDA device %ld",
                       device_id);
        (void)shp_cuda_raise(st, rc, what);
        return NULL;
    }
    return shp_gpumem_new(st, total_b, free_b);
}

int
shp_cuda_sync_unwrap(shp_state *st, PyObject *obj, shp_cuda_target *t)
{
    if (st->cuda_sync_type == NULL || !PyObject_TypeCheck(obj, st->cuda_sync_type))
        return 0;
    *t = ((shp_CudaSync *)obj)->target;
    return 1;
}
