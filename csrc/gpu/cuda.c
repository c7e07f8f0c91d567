/*
 * cuda.c -- the CUDA Driver API, loaded at run time: the binding only, a
 * leaf but for the platform's loader (dynlib.c); its Python face is
 * cudasync.c, reading device labels device.c's.
 *
 * No CUDA header or library is needed to build this file: the dozen entry
 * points the harness uses are declared in gpu.h (shp_cuda) and resolved
 * by their ABI names from libcuda.so.1 / nvcuda.dll the first time CUDA is
 * needed.  Importing the module never touches the driver.
 *
 * Contexts: the harness never creates one.  It synchronises (and reads
 * device memory in) the context current on the calling thread when that
 * context belongs to the wanted device; otherwise it pushes the device's
 * primary context -- the one PyTorch, CuPy and ONNX Runtime share -- around
 * its own call and pops it again.  Primary contexts are retained once per
 * ordinal per module state and released in shp_cuda_teardown().
 *
 * Threading: shp_cuda_load() and shp_cuda_target_init() are the only writers
 * of st->cuda.  The driver calls that can take long (dlopen, cuInit: real
 * drivers take hundreds of ms; a primary context's creation) run without the
 * GIL, serialised by st->cuda.mu, which is never waited for with the GIL
 * held; what they produce is published under the GIL.  The *_nogil
 * functions only read the table, so they may run with the GIL released.
 *
 * fork(): a CUDA context does not survive it -- a driver initialised in the
 * parent answers CUDA_ERROR_NOT_INITIALIZED in the child -- and a thread
 * that was starting the driver (holding st->cuda.mu) does not exist there.
 * cudafork.c's child handler abandons an inherited held lock and marks CUDA
 * unavailable, with the reason, whenever the parent had started the driver.
 */
#include "gpu/gpu.h"
#include "objects.h"
#include <stdio.h>

#include <stdlib.h>
#include <string.h>

#if defined(SHP_WINDOWS)
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#elif !defined(SHP_MACOS)
#include <dlfcn.h>
#endif

/* The few CUresult values this file reasons about. */
#define SHP_CUDA_SUCCESS 0
#define SHP_CUDA_ERROR_DEINITIALIZED 4
#define SHP_CUDA_ERROR_STUB_LIBRARY 34
#define SHP_CUDA_ERROR_NO_DEVICE 100


/* The symbol table stores dlsym()'s void * into function-pointer fields;
 * that needs both to have the same size (true on every platform CUDA runs). */
typedef shp_CUresult (*shp_cuda_fn)(void);
/* (A negative array size stops the build otherwise; spelled this way because
 * MSVC's default C mode lacks _Static_assert.) */
typedef char shp_cuda_fnptr_size_check[sizeof(void *) == sizeof(shp_cuda_fn) ? 1 : -1];

typedef struct {
    const char *name;   /* ABI name: versioned where the driver versions it */
    size_t offset;      /* field in shp_cuda */
    int required;
} shp_cuda_sym;

static const shp_cuda_sym shp_cuda_syms[] = {
    {"cuInit", offsetof(shp_cuda, cuInit), 1},
    {"cuDeviceGetCount", offsetof(shp_cuda, cuDeviceGetCount), 1},
    {"cuDeviceGet", offsetof(shp_cuda, cuDeviceGet), 1},
    {"cuCtxGetCurrent", offsetof(shp_cuda, cuCtxGetCurrent), 1},
    {"cuCtxPushCurrent_v2", offsetof(shp_cuda, cuCtxPushCurrent), 1},
    {"cuCtxPopCurrent_v2", offsetof(shp_cuda, cuCtxPopCurrent), 1},
    {"cuDevicePrimaryCtxRetain", offsetof(shp_cuda, cuDevicePrimaryCtxRetain), 1},
    {"cuDevicePrimaryCtxRelease_v2", offsetof(shp_cuda, cuDevicePrimaryCtxRelease), 1},
    {"cuCtxSynchronize", offsetof(shp_cuda, cuCtxSynchronize), 1},
    /* never the unversioned cuMemGetInfo: that is the 32-bit legacy ABI */
    {"cuMemGetInfo_v2", offsetof(shp_cuda, cuMemGetInfo), 1},
    {"cuDriverGetVersion", offsetof(shp_cuda, cuDriverGetVersion), 0},
    {"cuDeviceGetName", offsetof(shp_cuda, cuDeviceGetName), 0},
    {"cuCtxGetDevice", offsetof(shp_cuda, cuCtxGetDevice), 0},
    {"cuGetErrorName", offsetof(shp_cuda, cuGetErrorName), 0},
    {"cuGetErrorString", offsetof(shp_cuda, cuGetErrorString), 0},
    /* GPU time, the L2 flush (cudatime.c): _v2 only where cuda.h remaps */
    {"cuEventCreate", offsetof(shp_cuda, cuEventCreate), 0},
    {"cuEventRecord", offsetof(shp_cuda, cuEventRecord), 0},
    {"cuEventElapsedTime", offsetof(shp_cuda, cuEventElapsedTime), 0},
    {"cuEventDestroy_v2", offsetof(shp_cuda, cuEventDestroy), 0},
    {"cuStreamSynchronize", offsetof(shp_cuda, cuStreamSynchronize), 0},
    {"cuDeviceGetAttribute", offsetof(shp_cuda, cuDeviceGetAttribute), 0},
    {"cuMemAlloc_v2", offsetof(shp_cuda, cuMemAlloc), 0},
    {"cuMemFree_v2", offsetof(shp_cuda, cuMemFree), 0},
    {"cuMemsetD8Async", offsetof(shp_cuda, cuMemsetD8Async), 0},
    {"cuDeviceGetPCIBusId", offsetof(shp_cuda, cuDeviceGetPCIBusId), 0},
};

#define SHP_NSYMS (sizeof(shp_cuda_syms) / sizeof(shp_cuda_syms[0]))

/*
 * Names of the codes a user is most likely to meet, for when the driver
 * cannot name them itself (the toolkit's stub library answers every call,
 * cuGetErrorName included, with CUDA_ERROR_STUB_LIBRARY).
 */
static const struct {
    shp_CUresult code;
    const char *name;
} shp_cuda_known_errors[] = {
    {1, "CUDA_ERROR_INVALID_VALUE"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY"},
    {3, "CUDA_ERROR_NOT_INITIALIZED"},
    {4, "CUDA_ERROR_DEINITIALIZED"},
    {34, "CUDA_ERROR_STUB_LIBRARY"},
    {46, "CUDA_ERROR_DEVICE_UNAVAILABLE"},
    {100, "CUDA_ERROR_NO_DEVICE"},
    {101, "CUDA_ERROR_INVALID_DEVICE"},
    {201, "CUDA_ERROR_INVALID_CONTEXT"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS"},
    {719, "CUDA_ERROR_LAUNCH_FAILED"},
    {999, "CUDA_ERROR_UNKNOWN"},
};

/* ---- small helpers ------------------------------------------------------ */

/* The driver's name for rc, else ours, else NULL.  Needs no GIL. */
static const char *
shp_cuda_error_name(const shp_cuda *c, shp_CUresult rc)
{
    const char *s = NULL;
    size_t i;

    if (c->cuGetErrorName != NULL && c->cuGetErrorName(rc, &s) == SHP_CUDA_SUCCESS
        && s != NULL) {
        return s;
    }
    for (i = 0; i < sizeof(shp_cuda_known_errors) / sizeof(shp_cuda_known_errors[0]); i++) {
        if (shp_cuda_known_errors[i].code == rc) {
            return shp_cuda_known_errors[i].name;
        }
    }
    return NULL;
}

/* The driver's description of rc, or NULL. */
static const char *
shp_cuda_error_string(const shp_cuda *c, shp_CUresult rc)
{
    const char *s = NULL;

    if (c->cuGetErrorString != NULL && c->cuGetErrorString(rc, &s) == SHP_CUDA_SUCCESS) {
        return s;
    }
    return NULL;
}

#if !defined(SHP_MACOS)
/* "NAME (code)" or "CUDA error code" into buf (for c->why). */
static void
shp_cuda_format_code(const shp_cuda *c, shp_CUresult rc, char *buf, size_t size)
{
    const char *name = shp_cuda_error_name(c, rc);

    if (name != NULL) {
        (void)snprintf(buf, size, "%s (%d)", name, (int)rc);
    }
    else {
        (void)snprintf(buf, size, "CUDA error %d", (int)rc);
    }
}
#endif

/* Forget every resolved entry point (the library is closed or abandoned). */
static void
shp_cuda_clear_table(shp_cuda *c)
{
    size_t i;
    shp_cuda_fn none = NULL;

    for (i = 0; i < SHP_NSYMS; i++) {
        memcpy((char *)c + shp_cuda_syms[i].offset, &none, sizeof none);
    }
}

/* ---- loading ---------------------------------------------------------------- */

#if !defined(SHP_MACOS)
/* Put the reason for "unavailable" into c->why (why it matters to the user). */
static void
shp_cuda_init_failed(shp_cuda *c, const char *lib, shp_CUresult rc)
{
    char code[96];

    shp_cuda_format_code(c, rc, code, sizeof code);
    if (rc == SHP_CUDA_ERROR_STUB_LIBRARY) {
        (void)snprintf(c->why, sizeof c->why,
                       "%.120s is the CUDA toolkit's stub library, not an NVIDIA "
                       "driver (cuInit: %.50s)", lib, code);
    }
    else if (rc == SHP_CUDA_ERROR_NO_DEVICE) {
        (void)snprintf(c->why, sizeof c->why,
                       "the NVIDIA driver found no CUDA-capable device (cuInit: %.50s; "
                       "check CUDA_VISIBLE_DEVICES)", code);
    }
    else {
        (void)snprintf(c->why, sizeof c->why, "cuInit(0) failed: %.96s", code);
    }
}
#endif

/* Take c->mu without ever waiting for it with the GIL held (a thread that
 * holds it may be waiting for a slow driver).  0, or -1 with MemoryError. */
static int
shp_cuda_lock(shp_cuda *c)
{
    if (c->mu == NULL && (c->mu = PyThread_allocate_lock()) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (!PyThread_acquire_lock(c->mu, NOWAIT_LOCK)) {
        Py_BEGIN_ALLOW_THREADS
        PyThread_acquire_lock(c->mu, WAIT_LOCK);
        Py_END_ALLOW_THREADS
    }
    return 0;
}

/* The loading itself, without the GIL and under c->mu: fills the table,
 * c->why and c->lib; returns the state to publish (1 ready, -1 not).  A
 * failure is never retried, so the reason stays stable for every message. */
static int
shp_cuda_load_nogil(shp_cuda *c)
{
#if defined(SHP_MACOS)
    (void)snprintf(c->why, sizeof c->why, "CUDA is not available on macOS");
    return -1;
#else
    {
        char path[1024];
        char err[512];
        int is_override;
        const char *lib;
        void *h;
        size_t i;
        shp_CUresult rc;
        int n = 0;

        is_override = shp_cuda_override(path, sizeof path);
        if (is_override < 0) {
            (void)snprintf(c->why, sizeof c->why, SHP_CUDA_ENV " is longer than %d bytes",
                           (int)sizeof path - 1);
            return -1;
        }
        lib = is_override ? path : SHP_CUDA_DEFAULT_LIB;
        err[0] = '\0';
        h = shp_dl_open(lib, is_override, err, sizeof err);
        if (h == NULL) {
            /* err names the file (dlerror does; the Windows loader's text
             * is built to) and says why it could not be loaded. */
            (void)snprintf(c->why, sizeof c->why, "cannot load the CUDA driver%s: %.180s",
                           is_override ? " named by " SHP_CUDA_ENV : "", err);
            return -1;
        }
        for (i = 0; i < SHP_NSYMS; i++) {
            void *sym = shp_dl_sym(h, shp_cuda_syms[i].name);

            if (sym == NULL && shp_cuda_syms[i].required) {
                (void)snprintf(c->why, sizeof c->why,
                               "%.150s lacks the required symbol %.40s (driver too old?)",
                               lib, shp_cuda_syms[i].name);
                shp_cuda_clear_table(c);
                shp_dl_close(h);
                return -1;
            }
            memcpy((char *)c + shp_cuda_syms[i].offset, &sym, sizeof sym);
        }
        if (c->cuDriverGetVersion != NULL
            && c->cuDriverGetVersion(&c->driver_version) != SHP_CUDA_SUCCESS) {
            c->driver_version = 0;  /* unknown is fine: it is only reported */
        }
        rc = c->cuInit(0);
        c->init_result = rc;
        if (rc != SHP_CUDA_SUCCESS) {
            shp_cuda_init_failed(c, lib, rc);
            /* An uninitialised driver holds no threads or contexts yet, so
             * it can be unloaded safely. */
            shp_cuda_clear_table(c);
            shp_dl_close(h);
            return -1;
        }
        /* From here on the library stays loaded (see shp_cuda_teardown). */
        c->lib = h;
        rc = c->cuDeviceGetCount(&n);
        if (rc != SHP_CUDA_SUCCESS) {
            char code[96];

            shp_cuda_format_code(c, rc, code, sizeof code);
            (void)snprintf(c->why, sizeof c->why, "cuDeviceGetCount failed: %s", code);
            return -1;
        }
        if (n <= 0) {
            (void)snprintf(c->why, sizeof c->why,
                           "the NVIDIA driver reports no CUDA device (count 0; "
                           "check CUDA_VISIBLE_DEVICES)");
            return -1;
        }
        /* Devices beyond the primary-context cache cannot be addressed. */
        c->device_count = n > SHP_MAX_CUDA_DEVICES ? SHP_MAX_CUDA_DEVICES : n;
        c->why[0] = '\0';
        return 1;
    }
#endif
}

int
shp_cuda_load(shp_state *st)
{
    shp_cuda *c = &st->cuda;
    int state;

    if (c->load_state != 0) {
        return c->load_state == 1;
    }
    if (shp_cuda_lock(c) < 0) {
        PyErr_Clear();  /* never raises: say why instead (MemoryError only) */
        (void)snprintf(c->why, sizeof c->why, "no memory for the driver's lock");
        return 0;
    }
    if (c->load_state == 0) {   /* not loaded by the thread we waited for */
        Py_BEGIN_ALLOW_THREADS
        state = shp_cuda_load_nogil(c);
        Py_END_ALLOW_THREADS
        c->load_state = state;
    }
    PyThread_release_lock(c->mu);
    return c->load_state == 1;
}

/* ---- context binding --------------------------------------------------------- */

/*
 * 1 if the current context (cur != NULL) is the one to use for t, 0 if the
 * target's primary context must be pushed, or -1 with *rc set.
 */
static int
shp_cuda_current_fits(const shp_cuda *c, const shp_cuda_target *t, shp_CUresult *rc)
{
    shp_CUdevice dev = -1;

    if (!t->explicit_ordinal || c->cuCtxGetDevice == NULL) {
        /* No ordinal asked for: the user's context is the one they mean.
         * Without cuCtxGetDevice we cannot tell, and trusting the user's
         * context is the safer guess. */
        return 1;
    }
    *rc = c->cuCtxGetDevice(&dev);
    if (*rc != SHP_CUDA_SUCCESS) {
        return -1;
    }
    return dev == (shp_CUdevice)t->ordinal;
}

/* The operations run under the binding below. */
static shp_CUresult
shp_cuda_do_sync(const shp_cuda *c, void *arg)
{
    (void)arg;
    return c->cuCtxSynchronize();
}

static shp_CUresult
shp_cuda_do_meminfo(const shp_cuda *c, void *arg)
{
    size_t **out = arg;   /* {free, total} */
    return c->cuMemGetInfo(out[0], out[1]);
}

shp_CUresult
shp_cuda_call_nogil(shp_state *st, const shp_cuda_target *t, shp_cuda_bound_fn fn, void *arg)
{
    const shp_cuda *c = &st->cuda;
    shp_CUcontext cur = NULL;
    shp_CUcontext popped = NULL;
    shp_CUresult rc, rc_pop;
    int fits;

    if (c->load_state != 1 || t->primary == NULL) {
        /* Torn down (or never bound): the entry points may be gone. */
        return SHP_CUDA_ERROR_DEINITIALIZED;
    }
    rc = c->cuCtxGetCurrent(&cur);
    if (rc != SHP_CUDA_SUCCESS) {
        return rc;
    }
    if (cur != NULL) {
        fits = shp_cuda_current_fits(c, t, &rc);
        if (fits < 0) {
            return rc;
        }
        if (fits) {
            return fn(c, arg);
        }
    }
    rc = c->cuCtxPushCurrent(t->primary);
    if (rc != SHP_CUDA_SUCCESS) {
        return rc;
    }
    rc = fn(c, arg);
    /* Always pop, even after a failure, so the thread's stack is left as
     * the user had it; the first error is the one reported. */
    rc_pop = c->cuCtxPopCurrent(&popped);
    return rc != SHP_CUDA_SUCCESS ? rc : rc_pop;
}

shp_CUresult
shp_cuda_sync_nogil(shp_state *st, const shp_cuda_target *t)
{
    return shp_cuda_call_nogil(st, t, shp_cuda_do_sync, NULL);
}

shp_CUresult
shp_cuda_meminfo_nogil(shp_state *st, const shp_cuda_target *t,
                       size_t *free_b, size_t *total_b)
{
    size_t *out[2] = {free_b, total_b};

    *free_b = 0;
    *total_b = 0;
    return shp_cuda_call_nogil(st, t, shp_cuda_do_meminfo, out);
}

/* ---- targets ------------------------------------------------------------------- */

int
shp_cuda_raise(shp_state *st, shp_CUresult rc, const char *what)
{
    const shp_cuda *c = &st->cuda;
    const char *name = shp_cuda_error_name(c, rc);
    const char *desc = shp_cuda_error_string(c, rc);

    if (name != NULL && desc != NULL) {
        PyErr_Format(PyExc_RuntimeError, "%s: %s (%d): %s", what, name, (int)rc, desc);
    }
    else if (name != NULL) {
        PyErr_Format(PyExc_RuntimeError, "%s: %s (%d)", what, name, (int)rc);
    }
    else {
        PyErr_Format(PyExc_RuntimeError, "%s: CUDA error %d", what, (int)rc);
    }
    return -1;
}

int
shp_cuda_target_init(shp_state *st, int ordinal, shp_cuda_target *t)
{
    shp_cuda *c = &st->cuda;
    shp_CUresult rc;

    t->ordinal = 0;
    t->explicit_ordinal = ordinal >= 0;
    t->primary = NULL;
    if (!shp_cuda_load(st)) {
        PyErr_Format(PyExc_RuntimeError,
                     "device is CUDA but the CUDA driver is unavailable: %s. "
                     "Pass sync_fn=... (e.g. sync_fn=torch.cuda.synchronize) to "
                     "synchronise another way, or use device=\"CPU\".", c->why);
        return -1;
    }
    if (ordinal < 0) {
        /* The device of the user's current context, as torch.cuda would. */
        shp_CUcontext cur = NULL;
        shp_CUdevice dev = 0;

        rc = c->cuCtxGetCurrent(&cur);
        if (rc != SHP_CUDA_SUCCESS) {
            return shp_cuda_raise(st, rc, "cuCtxGetCurrent failed");
        }
        ordinal = 0;
        if (cur != NULL && c->cuCtxGetDevice != NULL) {
            rc = c->cuCtxGetDevice(&dev);
            if (rc != SHP_CUDA_SUCCESS) {
                return shp_cuda_raise(st, rc, "cuCtxGetDevice failed");
            }
            ordinal = (int)dev;
        }
    }
    if (ordinal >= c->device_count) {
        PyErr_Format(PyExc_ValueError,
                     "CUDA device %d is out of range: %d device(s) visible (0..%d)",
                     ordinal, c->device_count, c->device_count - 1);
        return -1;
    }
    if (c->primary[ordinal] == NULL) {
        /*
         * Retained up front, even when the thread has a current context: the
         * sync may later run on a thread without one, and the *_nogil paths
         * must not write shared state.  For PyTorch, CuPy and ONNX Runtime
         * this context is already active, so retaining only bumps its count;
         * otherwise the driver creates it (slow): without the GIL, under
         * c->mu, so two threads never retain it twice.
         */
        shp_CUdevice dev = 0;
        shp_CUcontext ctx = NULL;
        const char *what = NULL;

        if (shp_cuda_lock(c) < 0) {
            return -1;
        }
        rc = SHP_CUDA_SUCCESS;
        if (c->primary[ordinal] == NULL) {
            Py_BEGIN_ALLOW_THREADS
            rc = c->cuDeviceGet(&dev, ordinal);
            what = "cuDeviceGet failed";
            if (rc == SHP_CUDA_SUCCESS) {
                rc = c->cuDevicePrimaryCtxRetain(&ctx, dev);
                what = "cannot retain the primary context of the CUDA device";
            }
            Py_END_ALLOW_THREADS
            if (rc == SHP_CUDA_SUCCESS && ctx != NULL) {
                c->primary[ordinal] = ctx;
            }
        }
        PyThread_release_lock(c->mu);
        if (rc != SHP_CUDA_SUCCESS) {
            return shp_cuda_raise(st, rc, what);
        }
        if (c->primary[ordinal] == NULL) {
            PyErr_Format(PyExc_RuntimeError,
                         "cuDevicePrimaryCtxRetain returned no context for device %d",
                         ordinal);
            return -1;
        }
    }
    t->ordinal = ordinal;
    t->primary = c->primary[ordinal];
    return 0;
}

void
shp_cuda_teardown(shp_state *st)
{
    shp_cuda *c = &st->cuda;
    int i;
    PyThread_type_lock mu = c->mu;

    /* a thread may still be in the driver for us: wait for it, GIL released */
    if (mu != NULL && shp_cuda_lock(c) < 0) {
        PyErr_Clear();  /* only allocation fails, and the lock exists */
    }
    if (c->lib != NULL) {
        for (i = 0; i < SHP_MAX_CUDA_DEVICES; i++) {
            shp_CUdevice dev = 0;

            if (c->primary[i] == NULL) {
                continue;
            }
            /* Nothing can be reported from here; a driver already shutting
             * down (interpreter exit) answers CUDA_ERROR_DEINITIALIZED, which
             * means the context is gone anyway. */
            if (c->cuDeviceGet(&dev, i) == SHP_CUDA_SUCCESS) {
                (void)c->cuDevicePrimaryCtxRelease(dev);
            }
            c->primary[i] = NULL;
        }
        /*
         * The library handle is dropped but not closed: an initialised driver
         * runs threads and exit hooks of its own, and unloading it under them
         * can crash the process at exit.  The reference is the process's
         * (dlopen counts), and it is reclaimed at exit.
         */
        c->lib = NULL;
    }
    shp_cuda_clear_table(c);
    if (c->load_state != 0) {
        c->load_state = -1;
        (void)snprintf(c->why, sizeof c->why, "the profiling module was torn down");
    }
    if (mu != NULL) {
        c->mu = NULL;
        PyThread_release_lock(mu);
        PyThread_free_lock(mu);
    }
}

/* ---- the driver in a fork() child ---------------------------------------- */

/* In a fork child, with the GIL (see the file's header).  Never raises. */
static void
shp_cuda_after_fork_child(shp_cuda *c)
{
    int i;
    int busy = 0;

    if (c->mu != NULL) {
        if (PyThread_acquire_lock(c->mu, NOWAIT_LOCK)) {
            PyThread_release_lock(c->mu);
        }
        else {
            /* Held by a thread this process does not have: abandoned (a
             * few bytes; freeing a held lock is undefined), a new one is
             * made at the next use. */
            busy = 1;
            c->mu = NULL;
        }
    }
    if (!busy && c->load_state != 1) {
        return;  /* never started (the child may load it) or already unavailable */
    }
    if (c->load_state == 0) {
        (void)snprintf(c->why, sizeof c->why,
                       "the process forked while another thread was starting the CUDA "
                       "driver, and a CUDA driver does not survive fork(); use CUDA in "
                       "a child started with the 'spawn' method");
    }
    else {
        (void)snprintf(c->why, sizeof c->why,
                       "the CUDA driver was started before this process forked, and a "
                       "CUDA context does not survive fork(); use CUDA in a child "
                       "started with the 'spawn' method");
    }
    c->load_state = -1;
    /* the parent's retains: nothing to release here, the driver is not ours */
    for (i = 0; i < SHP_MAX_CUDA_DEVICES; i++) {
        c->primary[i] = NULL;
    }
}

static PyObject *
cuda_after_fork_child(PyObject *ref, PyObject *unused)
{
    PyObject *m = NULL;
    shp_state *st;

    (void)unused;
#if PY_VERSION_HEX >= 0x030D0000
    if (PyWeakref_GetRef(ref, &m) < 0) {
        return NULL;
    }
#else
    m = PyWeakref_GetObject(ref);   /* borrowed; Py_None once the module is gone */
    if (m == NULL) {
        return NULL;
    }
    if (m == Py_None) {
        m = NULL;
    }
    Py_XINCREF(m);
#endif
    if (m != NULL) {
        st = PyModule_GetState(m);
        if (st != NULL) {
            shp_cuda_after_fork_child(&st->cuda);
        }
        Py_DECREF(m);
    }
    Py_RETURN_NONE;
}

static PyMethodDef cuda_after_fork_def = {
    "_cuda_after_fork_child", cuda_after_fork_child, METH_NOARGS,
    "spatialhub: a CUDA driver started before fork() is not usable in the child."};

int
shp_cuda_register_at_fork(PyObject *module)
{
    PyObject *os = NULL, *reg = NULL, *ref = NULL, *fn = NULL, *kw = NULL, *args = NULL;
    PyObject *r = NULL;
    int rc = -1;

    os = PyImport_ImportModule("os");
    if (os == NULL) {
        goto done;
    }
    reg = PyObject_GetAttrString(os, "register_at_fork");
    if (reg == NULL) {   /* no fork on this platform (Windows) */
        if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
            PyErr_Clear();
            rc = 0;
        }
        goto done;
    }
    /* a weak reference: the registration lives as long as the process */
    ref = PyWeakref_NewRef(module, NULL);
    if (ref == NULL) {
        goto done;
    }
    fn = PyCFunction_NewEx(&cuda_after_fork_def, ref, NULL);
    if (fn == NULL) {
        goto done;
    }
    kw = Py_BuildValue("{sO}", "after_in_child", fn);
    if (kw == NULL) {
        goto done;
    }
    args = PyTuple_New(0);
    if (args == NULL) {
        goto done;
    }
    r = PyObject_Call(reg, args, kw);
    if (r != NULL) {
        rc = 0;
    }
done:
    Py_XDECREF(r);
    Py_XDECREF(args);
    Py_XDECREF(kw);
    Py_XDECREF(fn);
    Py_XDECREF(ref);
    Py_XDECREF(reg);
    Py_XDECREF(os);
    return rc;
}
