/*
 * instattrs.c -- the attributes an instance of a subclass holds of its own.
 *
 * A native type that pickles and copies through __reduce__ must carry a
 * subclass's __dict__ and __slots__ values along, or pickle and copy lose
 * them.  A leaf: it calls nothing else of ours.
 */
#include "capi/capi.h"

PyObject *
shp_instance_attrs(PyObject *self, PyObject *copyreg)
{
    PyObject *attrs = PyDict_New(), *d = NULL, *names = NULL;
    if (attrs == NULL)
        return NULL;
    d = PyObject_GetAttrString(self, "__dict__");
    if (d == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            goto error;
        PyErr_Clear();   /* no __dict__: a plain BenchmarkStats, or slots only */
    }
    else if (PyDict_Check(d) && PyDict_Update(attrs, d) < 0) {
        goto error;
    }
    names = PyObject_CallMethod(copyreg, "_slotnames", "O", (PyObject *)Py_TYPE(self));
    if (names == NULL || !PyList_Check(names))
        goto error;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(names); i++) {
        PyObject *name = Py_NewRef(PyList_GET_ITEM(names, i));   /* getattr runs code */
        PyObject *v = PyObject_GetAttr(self, name);
        int rc = v != NULL ? PyDict_SetItem(attrs, name, v) : 0;
        Py_XDECREF(v);
        Py_DECREF(name);
        if (v == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError))
                goto error;
            PyErr_Clear();   /* an unset slot */
        }
        else if (rc < 0) {
            goto error;
        }
    }
    Py_XDECREF(names);
    Py_XDECREF(d);
    return attrs;
error:
    if (names != NULL && !PyList_Check(names) && !PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "copyreg._slotnames() did not return a list");
    Py_XDECREF(names);
    Py_XDECREF(d);
    Py_DECREF(attrs);
    return NULL;
}
