/*
 * cudafork.c -- the CUDA driver state in a fork() child: a leaf (it reads
 * and writes st->cuda, calls no other file).
 *
 * A CUDA context does not survive fork(): a driver initialised in the parent
 * answers CUDA_ERROR_NOT_INITIALIZED in the child.  And the thread that was
 * starting the driver at the fork (cuda.c holds st->cuda.mu, without the
 * GIL, across cuInit and primary-context retains) does not exist in the
 * child, so the lock would stay held for ever: the child's first CUDA call
 * waited on it, beyond Ctrl-C's reach.  pthread_atfork cannot reach module
 * state, so each module state registers an os.register_at_fork child
 * handler, holding the module weakly.  In the child it abandons a held lock
 * (a new one is made at the next use) and, when the parent had started the
 * driver or was starting it, marks CUDA unavailable with the reason.  A
 * parent that never touched CUDA leaves the child free to start it.
 */
#include "profiling.h"

#include <stdio.h>

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
