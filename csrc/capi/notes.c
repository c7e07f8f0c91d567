/*
 * notes.c -- PEP 678 notes on a user's exception.
 *
 * An exception raised by func or sync_fn inside the run propagates
 * unchanged, with a note saying which benchmark, which phase and which
 * iteration raised it.  A leaf: no module state, no calls into other files.
 */
#include "capi/capi.h"

#include <stdarg.h>

static void
add_note_v(PyObject *exc, const char *fmt, va_list va)
{
    if (exc == NULL)
        return;
    PyObject *note = PyUnicode_FromFormatV(fmt, va);
    if (note == NULL) {
        (void)shp_clear_unless_fatal();
        return;
    }
    /* add_note: BaseException's (3.11+) or the exception's own.  Before 3.11
     * there is usually none: keep PEP 678's data all the same, a list in
     * __notes__, which code and tools that read notes find (only the
     * interpreter's own traceback printout does not show it there). */
    PyObject *r = NULL;
    PyObject *add = PyObject_GetAttrString(exc, "add_note");
    if (add != NULL) {
        r = PyObject_CallOneArg(add, note);
        Py_DECREF(add);
    }
    else if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
        PyObject *notes = PyObject_GetAttrString(exc, "__notes__");
        if (notes == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) {
            PyErr_Clear();
            notes = PyList_New(0);
            if (notes != NULL && PyObject_SetAttrString(exc, "__notes__", notes) < 0)
                Py_CLEAR(notes);
        }
        if (notes != NULL && PyList_Check(notes) && PyList_Append(notes, note) == 0)
            r = Py_NewRef(Py_None);
        Py_XDECREF(notes);
    }
    Py_DECREF(note);
    if (r == NULL)   /* an exception that refuses notes propagates bare */
        (void)shp_clear_unless_fatal();
    Py_XDECREF(r);
}

void
shp_add_note(PyObject *exc, const char *fmt, ...)
{
    va_list va;
    va_start(va, fmt);
    add_note_v(exc, fmt, va);
    va_end(va);
}

void
shp_note_current(const char *fmt, ...)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL && value != NULL)
        PyException_SetTraceback(value, tb);
    va_list va;
    va_start(va, fmt);
    add_note_v(value, fmt, va);
    va_end(va);
    if (PyErr_Occurred()) {
        /* Ctrl-C (or SystemExit) while the note was made -- in a name's
         * __repr__, an add_note override: it is the user's, and it goes
         * on, with the exception it interrupted as its context. */
        PyObject *t2, *v2, *tb2;
        PyErr_Fetch(&t2, &v2, &tb2);
        PyErr_NormalizeException(&t2, &v2, &tb2);
        if (v2 != NULL && value != NULL)
            PyException_SetContext(v2, Py_NewRef(value));
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        PyErr_Restore(t2, v2, tb2);
        return;
    }
    PyErr_Restore(type, value, tb);
}

void
shp_note_iteration(const char *fmt, PyObject *name, const char *phase, Py_ssize_t i,
                   Py_ssize_t n)
{
    shp_note_current(fmt, name, phase, i + 1, n);
}
