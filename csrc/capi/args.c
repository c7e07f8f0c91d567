/*
 * args.c -- every argument conversion, and the one keyword parser.
 *
 * One rule set for every entry point and every field setter:
 *   integer  anything with __index__ (int, numpy.int64, IntEnum ...) but
 *            bool (Python's or NumPy's): True as a count, an id or a seed
 *            is a bug;
 *   real     int, float, or anything with __float__ or __index__ (what
 *            float() accepts as a number) but bool (either) and str;
 *   flag     any object, by its truth value (bool(x));
 *   string   a str (or a subclass), nothing else.
 * A wrong type is a TypeError, a value out of range a ValueError, both
 * worded "<where> <param> must be <what>, not <type>" (see shp_arg_where):
 * "benchmark_callable(): num_iters must be an int, not float"; an integer
 * beyond C's range is out of range too (a ValueError, never CPython's
 * OverflowError).
 *
 * A leaf: plain C-API work, no module state, no calls into other files.
 */
#include "capi/capi.h"

#include <string.h>

/* "f(): p" for a function (owner ends with ')'), "Type.p" for an
 * attribute, "p" with no owner. */
static void
where(char *buf, size_t n, const char *owner, const char *param)
{
    if (owner == NULL || owner[0] == '\0') {
        PyOS_snprintf(buf, n, "%s", param);
        return;
    }
    size_t len = strlen(owner);
    PyOS_snprintf(buf, n, "%s%s%s", owner, owner[len - 1] == ')' ? ": " : ".", param);
}

/* Python's bool, or NumPy's (numpy.bool, numpy.bool_ before NumPy 2), told
 * by its type's name: no NumPy API in this leaf.  It has __float__ (and in
 * NumPy 1 __index__), so the number rules would take it. */
static int
is_bool(PyObject *v)
{
    if (PyBool_Check(v))
        return 1;
    const char *tn = Py_TYPE(v)->tp_name;
    return strcmp(tn, "numpy.bool") == 0 || strcmp(tn, "numpy.bool_") == 0;
}

int
shp_arg_type_error(const char *owner, const char *param, const char *want, PyObject *got)
{
    char w[160];
    where(w, sizeof(w), owner, param);
    PyErr_Format(PyExc_TypeError, "%s must be %s, not %.100s", w, want, Py_TYPE(got)->tp_name);
    return -1;
}

int
shp_arg_value_error(const char *owner, const char *param, const char *want, PyObject *got)
{
    char w[160];
    where(w, sizeof(w), owner, param);
    PyErr_Format(PyExc_ValueError, "%s must be %s, got %R", w, want, got);
    return -1;
}

PyObject *
shp_arg_index(PyObject *v, const char *owner, const char *param)
{
    if (is_bool(v) || !PyIndex_Check(v)) {
        shp_arg_type_error(owner, param, "an int", v);
        return NULL;
    }
    return PyNumber_Index(v);
}

int
shp_arg_ssize(PyObject *v, const char *owner, const char *param, Py_ssize_t *out)
{
    if (is_bool(v) || !PyIndex_Check(v))
        return shp_arg_type_error(owner, param, "an int", v);
    PyObject *idx = PyNumber_Index(v);
    if (idx == NULL)
        return -1;
    Py_ssize_t n = PyLong_AsSsize_t(idx);
    if (n == -1 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();   /* our own conversion's, no user code ran */
            shp_arg_value_error(owner, param, "within Py_ssize_t's range", idx);
        }
        Py_DECREF(idx);
        return -1;
    }
    Py_DECREF(idx);
    *out = n;
    return 0;
}

int
shp_arg_count(PyObject *v, const char *owner, const char *param, Py_ssize_t lowest,
              Py_ssize_t highest, Py_ssize_t *out)
{
    PyObject *idx = shp_arg_index(v, owner, param);
    if (idx == NULL)
        return -1;
    int overflow = 0;
    long long n = PyLong_AsLongLongAndOverflow(idx, &overflow);
    if (n == -1 && PyErr_Occurred()) {
        Py_DECREF(idx);
        return -1;
    }
    char w[160], want[64];
    where(w, sizeof(w), owner, param);
    size_t len = strlen(w);   /* an empty param and no owner: "must be ..." (argparse's) */
    if (len > 0 && len + 1 < sizeof(w)) {
        w[len] = ' ';
        w[len + 1] = '\0';
    }
    int rc = 0;
    if (overflow < 0 || (overflow == 0 && n < lowest)) {
        PyErr_Format(PyExc_ValueError, "%smust be >= %zd, got %R", w, lowest, idx);
        rc = -1;
    }
    else if (overflow > 0 || n > (long long)PY_SSIZE_T_MAX || (highest >= 0 && n > highest)) {
        if (highest >= 0)
            PyOS_snprintf(want, sizeof(want), "<= %zd", highest);
        else
            PyOS_snprintf(want, sizeof(want), "within Py_ssize_t's range");
        PyErr_Format(PyExc_ValueError, "%smust be %s, got %R", w, want, idx);
        rc = -1;
    }
    Py_DECREF(idx);
    if (rc == 0)
        *out = (Py_ssize_t)n;
    return rc;
}

int
shp_arg_is_real(PyObject *v)
{
    if (is_bool(v))
        return 0;
    if (PyFloat_Check(v) || PyLong_Check(v))
        return 1;
    PyNumberMethods *nb = Py_TYPE(v)->tp_as_number;
    return nb != NULL && (nb->nb_float != NULL || nb->nb_index != NULL);
}

int
shp_arg_real(PyObject *v, const char *owner, const char *param, double *out)
{
    if (!shp_arg_is_real(v))
        return shp_arg_type_error(owner, param, "a real number", v);
    double d = PyFloat_AsDouble(v);
    if (d == -1.0 && PyErr_Occurred())
        return -1;
    *out = d;
    return 0;
}

int
shp_arg_flag(PyObject *v, int *out)
{
    int t = PyObject_IsTrue(v);
    if (t < 0)
        return -1;
    *out = t;
    return 0;
}

int
shp_arg_memory(PyObject *v, const char *owner, const char *param, int *out)
{
    if (PyUnicode_Check(v)) {
        if (PyUnicode_CompareWithASCIIString(v, "peak") != 0)
            return shp_arg_value_error(owner, param, "True, False or 'peak'", v);
        *out = SHP_MEM_PEAK;
        return 0;
    }
    int t;
    if (shp_arg_flag(v, &t) < 0)
        return -1;
    *out = t ? SHP_MEM_RSS : SHP_MEM_OFF;
    return 0;
}

PyObject *
shp_memory_mode_obj(int mode)
{
    if (mode == SHP_MEM_PEAK)
        return PyUnicode_FromString("peak");
    return PyBool_FromLong(mode != SHP_MEM_OFF);
}

int
shp_arg_str(PyObject *v, const char *owner, const char *param, int none_ok, PyObject **out)
{
    if (none_ok && v == Py_None) {
        *out = NULL;
        return 0;
    }
    if (!PyUnicode_Check(v))
        return shp_arg_type_error(owner, param, none_ok ? "str or None" : "str", v);
    *out = v;
    return 0;
}

int
shp_arg_callable(PyObject *v, const char *owner, const char *param, int none_ok, PyObject **out)
{
    if (none_ok && v == Py_None) {
        *out = NULL;
        return 0;
    }
    if (!PyCallable_Check(v))
        return shp_arg_type_error(owner, param, none_ok ? "callable or None" : "callable", v);
    *out = v;
    return 0;
}

/* ---- the keyword parser ------------------------------------------------- */

int
shp_args_find(const shp_argspec *spec, PyObject *key)
{
    if (!PyUnicode_Check(key))
        return -1;
    for (int j = 0; j < spec->n; j++)
        if (PyUnicode_CompareWithASCIIString(key, spec->names[j]) == 0)
            return j;
    return -1;
}

int
shp_args_parse(const shp_argspec *spec, PyObject *const *args, Py_ssize_t nargs,
               PyObject *kwnames, PyObject **out)
{
    int pass = spec->pass_extra;
    for (int j = 0; j < spec->n; j++)
        out[j] = NULL;
    if (nargs > spec->npos && !pass) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most %d positional argument%s (%zd given)",
                     spec->fname, spec->npos, spec->npos == 1 ? "" : "s", nargs);
        return -1;
    }
    Py_ssize_t npos = nargs < spec->npos ? nargs : spec->npos;
    for (Py_ssize_t i = 0; i < npos; i++)
        out[i] = args[i];
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        int j = shp_args_find(spec, key);
        if (j >= 0 && out[j] == NULL) {
            out[j] = args[nargs + k];
            continue;
        }
        if (pass)   /* the callee's keyword (a name already given positionally too) */
            continue;
        if (j >= 0)
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'",
                         spec->fname, spec->names[j]);
        else
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument %R",
                         spec->fname, key);
        return -1;
    }
    for (int j = 0; j < spec->nrequired; j++) {
        if (out[j] == NULL) {
            PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s'", spec->fname,
                         spec->names[j]);
            return -1;
        }
    }
    return 0;
}

int
shp_args_takes(const shp_argspec *spec, PyObject *key, Py_ssize_t nargs)
{
    int j = shp_args_find(spec, key);
    return j >= 0 && (j >= spec->npos || j >= nargs);
}

int
shp_args_unpack(const char *fname, PyObject *args, PyObject *kwargs, PyObject **stack,
                Py_ssize_t cap, PyObject **kwnames, PyObject **hold)
{
    *kwnames = NULL;
    *hold = NULL;
    Py_ssize_t nargs = PyTuple_GET_SIZE(args);
    /* The values are taken from a list of items, never borrowed from the
     * dict: a value's __bool__ / __index__ / __float__, or a finalizer run
     * by any allocation, may empty or change the caller's kwargs while the
     * others are still to be read.  PyDict_Items re-reads the size after its
     * own allocation. */
    PyObject *items = NULL;
    Py_ssize_t nkw = 0;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) > 0) {
        items = PyDict_Items(kwargs);
        if (items == NULL)
            return -1;
        nkw = PyList_GET_SIZE(items);
    }
    if (nargs + nkw > cap) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most %zd arguments (%zd given)", fname,
                     cap, nargs + nkw);
        Py_XDECREF(items);
        return -1;
    }
    if (nkw > 0) {
        *kwnames = PyTuple_New(nkw);   /* may run Python: `items` is ours */
        if (*kwnames == NULL) {
            Py_DECREF(items);
            return -1;
        }
    }
    for (Py_ssize_t i = 0; i < nargs; i++)
        stack[i] = PyTuple_GET_ITEM(args, i);   /* the caller holds the tuple */
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *kv = PyList_GET_ITEM(items, k);   /* our list's (key, value) tuple */
        PyTuple_SET_ITEM(*kwnames, k, Py_NewRef(PyTuple_GET_ITEM(kv, 0)));
        stack[nargs + k] = PyTuple_GET_ITEM(kv, 1);
    }
    *hold = items;
    return 0;
}

int
shp_args_parse_tuple(const shp_argspec *spec, PyObject *args, PyObject *kwargs, PyObject **out,
                     PyObject **hold)
{
    PyObject *stack[SHP_ARGS_MAX];
    PyObject *kwnames = NULL;
    Py_ssize_t cap = spec->n < SHP_ARGS_MAX ? spec->n : SHP_ARGS_MAX;
    if (shp_args_unpack(spec->fname, args, kwargs, stack, cap, &kwnames, hold) < 0)
        return -1;
    int rc = shp_args_parse(spec, stack, PyTuple_GET_SIZE(args), kwnames, out);
    Py_XDECREF(kwnames);
    if (rc < 0)
        Py_CLEAR(*hold);
    return rc;
}

int
shp_arg_cuda_stream(PyObject *v, const char *owner, const char *param, void **out)
{
    static const char *const want =
        "None, an int (a CUstream handle) or an object with __cuda_stream__ or cuda_stream";
    PyObject *h = NULL;
    int rc = -1;
    if (PyLong_Check(v) && !PyBool_Check(v)) {
        h = Py_NewRef(v);
    }
    else if (PyBool_Check(v)) {
        return shp_arg_type_error(owner, param, want, v);
    }
    else {
        /* the CUDA stream protocol: a method returning (version, handle) */
        PyObject *proto = PyObject_GetAttrString(v, "__cuda_stream__");
        if (proto != NULL) {
            PyObject *r = PyCallable_Check(proto) ? PyObject_CallNoArgs(proto) : Py_NewRef(proto);
            Py_DECREF(proto);
            if (r == NULL)
                return -1;
            if (PyTuple_Check(r) && PyTuple_GET_SIZE(r) == 2)
                h = Py_NewRef(PyTuple_GET_ITEM(r, 1));
            else
                shp_arg_type_error(owner, "__cuda_stream__() of the stream",
                                   "a (version, handle) tuple", r);
            Py_DECREF(r);
            if (h == NULL)
                return -1;
        }
        else if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
            PyErr_Clear();
            h = PyObject_GetAttrString(v, "cuda_stream");   /* torch.cuda.Stream */
            if (h == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) {
                PyErr_Clear();
                return shp_arg_type_error(owner, param, want, v);
            }
            if (h == NULL)
                return -1;
        }
        else {
            return -1;
        }
    }
    if (!PyLong_Check(h) || PyBool_Check(h)) {
        shp_arg_type_error(owner, "the stream's handle", "an int", h);
        goto done;
    }
    unsigned long long u = PyLong_AsUnsignedLongLong(h);
    if (u == (unsigned long long)-1 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            shp_arg_value_error(owner, param, "a stream handle (a pointer, not negative)", h);
        }
        goto done;
    }
    *out = (void *)(uintptr_t)u;
    rc = 0;
done:
    Py_DECREF(h);
    return rc;
}

/* One name of shp_arg_names: its index in names[], or -1 with the error. */
static int
name_index(PyObject *name, const char *owner, const char *param, const char *choices,
           const char *const *names, int n)
{
    if (!PyUnicode_Check(name))
        return shp_arg_type_error(owner, param, choices, name);
    for (int i = 0; i < n; i++)
        if (PyUnicode_CompareWithASCIIString(name, names[i]) == 0)
            return i;
    return shp_arg_value_error(owner, param, choices, name);
}

int
shp_arg_names(PyObject *v, const char *owner, const char *param, const char *choices,
              const char *const *names, int n, void (*pick)(void *ctx, int index), void *ctx)
{
    if (PyUnicode_Check(v)) {
        int i = name_index(v, owner, param, choices, names, n);
        if (i >= 0)
            pick(ctx, i);
        return i < 0 ? -1 : 0;
    }
    PyObject *it = PyObject_GetIter(v), *item;
    if (it == NULL) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            shp_arg_type_error(owner, param, choices, v);
        }
        return -1;
    }
    while ((item = PyIter_Next(it)) != NULL) {
        int i = name_index(item, owner, param, choices, names, n);
        Py_DECREF(item);
        if (i < 0)
            break;
        pick(ctx, i);
    }
    Py_DECREF(it);
    return PyErr_Occurred() ? -1 : 0;
}
