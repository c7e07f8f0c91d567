/*
 * fields.c -- table-driven attributes for the result types.
 *
 * BenchmarkStats has 27 fields, GPUMemoryInfo and Comparison a handful each.
 * Rather than hand-writing a getter, setter, repr line, dict entry and
 * equality test per field, each type declares one table of shp_field and
 * everything here walks it: one place decides what a field accepts and how
 * it is shown, so the types cannot drift apart.
 */
#include "capi/capi.h"

#include <math.h>
#include <string.h>

#define FIELD_PTR(self, f) ((char *)(self) + (f)->offset)
#define AS_OBJ(self, f) (*(PyObject **)FIELD_PTR(self, f))
#define AS_DBL(self, f) (*(double *)FIELD_PTR(self, f))
#define AS_SSZ(self, f) (*(Py_ssize_t *)FIELD_PTR(self, f))
#define AS_INT(self, f) (*(int *)FIELD_PTR(self, f))

const char *
shp_type_short_name(PyTypeObject *tp)
{
    const char *dot = strrchr(tp->tp_name, '.');
    return dot ? dot + 1 : tp->tp_name;
}

Py_ssize_t
shp_fields_count(const shp_field *fields)
{
    Py_ssize_t n = 0;
    while (fields[n].name != NULL)
        n++;
    return n;
}

PyObject *
shp_field_get(PyObject *self, const shp_field *f)
{
    switch (f->kind) {
    case SHP_F_STR:
        if (AS_OBJ(self, f) == NULL)
            return PyUnicode_FromStringAndSize("", 0);
        return Py_NewRef(AS_OBJ(self, f));
    case SHP_F_OPT_STR:
    case SHP_F_OPT_DICT:
    case SHP_F_OPT_FLOATS:
    case SHP_F_OPT_COUNTS:
        return Py_NewRef(AS_OBJ(self, f) ? AS_OBJ(self, f) : Py_None);
    case SHP_F_DOUBLE:
        return PyFloat_FromDouble(AS_DBL(self, f));
    case SHP_F_OPT_DOUBLE:
        if (isnan(AS_DBL(self, f)))
            Py_RETURN_NONE;
        return PyFloat_FromDouble(AS_DBL(self, f));
    case SHP_F_COUNT:
        return PyLong_FromSsize_t(AS_SSZ(self, f));
    case SHP_F_OPT_COUNT:
        if (AS_SSZ(self, f) < 0)
            Py_RETURN_NONE;
        return PyLong_FromSsize_t(AS_SSZ(self, f));
    case SHP_F_OPT_BOOL:
        if (AS_INT(self, f) < 0)
            Py_RETURN_NONE;
        return PyBool_FromLong(AS_INT(self, f));
    }
    PyErr_SetString(PyExc_SystemError, "unknown field kind");
    return NULL;
}

static int
type_error(PyObject *self, const shp_field *f, const char *want, PyObject *value)
{
    return shp_arg_type_error(shp_type_short_name(Py_TYPE(self)), f->name, want, value);
}

/* A count: an int (args.c's rule) >= 0. */
static int
as_count(PyObject *self, const shp_field *f, PyObject *value, Py_ssize_t *out)
{
    const char *tn = shp_type_short_name(Py_TYPE(self));
    Py_ssize_t n;
    if (shp_arg_ssize(value, tn, f->name, &n) < 0)
        return -1;
    if (n < 0) {
        PyErr_Format(PyExc_ValueError, "%s.%s must be >= 0, got %zd", tn, f->name, n);
        return -1;
    }
    *out = n;
    return 0;
}

/* A list or tuple of ints >= 1, stored as a new tuple of exact ints. */
static int
set_counts(PyObject *self, const shp_field *f, PyObject *value)
{
    const char *tn = shp_type_short_name(Py_TYPE(self));
    if (!PyList_Check(value) && !PyTuple_Check(value))
        return type_error(self, f, "a tuple of ints or None", value);
    /* a private copy first: an item's __index__ (or a finalizer) may change
     * the caller's list while the items are read */
    PyObject *seq = PySequence_Tuple(value);
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PyTuple_GET_SIZE(seq), total = 0;
    PyObject *out = n > 0 ? PyTuple_New(n) : NULL;
    if (n == 0)
        PyErr_Format(PyExc_ValueError, "%s.%s must not be empty", tn, f->name);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        Py_ssize_t c = 0;
        int rc = as_count(self, f, PyTuple_GET_ITEM(seq, i), &c);   /* held by seq */
        if (rc == 0 && c < 1) {
            PyErr_Format(PyExc_ValueError, "%s.%s must hold counts >= 1, got %zd", tn, f->name, c);
            rc = -1;
        }
        if (rc == 0 && shp_size_add(total, c, &total) < 0) {
            PyErr_Format(PyExc_ValueError, "%s.%s must add up to at most %zd samples", tn,
                         f->name, PY_SSIZE_T_MAX);
            rc = -1;
        }
        PyObject *num = rc < 0 ? NULL : PyLong_FromSsize_t(c);
        if (num == NULL)
            Py_CLEAR(out);
        else
            PyTuple_SET_ITEM(out, i, num);
    }
    Py_DECREF(seq);
    if (out == NULL)
        return -1;
    Py_XSETREF(AS_OBJ(self, f), out);
    return 0;
}

int
shp_counts_array(PyObject *tuple, Py_ssize_t **out, Py_ssize_t *n, Py_ssize_t *total)
{
    *out = NULL;
    *n = 0;
    *total = 0;
    if (tuple == NULL)
        return 0;
    Py_ssize_t m = PyTuple_GET_SIZE(tuple);
    Py_ssize_t *a = PyMem_Malloc((size_t)(m > 0 ? m : 1) * sizeof(Py_ssize_t));
    if (a == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < m; i++) {
        a[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(tuple, i));   /* exact ints >= 1 (set_counts) */
        if (a[i] == -1 && PyErr_Occurred()) {
            PyMem_Free(a);
            return -1;
        }
        if (*total >= 0 && shp_size_add(*total, a[i], total) < 0)
            *total = -1;
    }
    *out = a;
    *n = m;
    return 0;
}

int
shp_field_set(PyObject *self, const shp_field *f, PyObject *value)
{
    if (value == NULL) {
        PyErr_Format(PyExc_AttributeError, "cannot delete %s.%s",
                     shp_type_short_name(Py_TYPE(self)), f->name);
        return -1;
    }
    int is_none = value == Py_None;
    switch (f->kind) {
    case SHP_F_STR:
    case SHP_F_OPT_STR:
        if (is_none && f->kind == SHP_F_OPT_STR) {
            Py_CLEAR(AS_OBJ(self, f));
            return 0;
        }
        if (!PyUnicode_Check(value))
            return type_error(self, f, f->kind == SHP_F_STR ? "str" : "str or None", value);
        Py_XSETREF(AS_OBJ(self, f), Py_NewRef(value));
        return 0;
    case SHP_F_OPT_DICT:
        if (is_none) {
            Py_CLEAR(AS_OBJ(self, f));
            return 0;
        }
        if (!PyDict_Check(value))
            return type_error(self, f, "a dict or None", value);
        Py_XSETREF(AS_OBJ(self, f), Py_NewRef(value));
        return 0;
    case SHP_F_OPT_COUNTS:
        if (is_none) {
            Py_CLEAR(AS_OBJ(self, f));
            return 0;
        }
        return set_counts(self, f, value);
    case SHP_F_OPT_FLOATS: {
        if (is_none) {
            Py_CLEAR(AS_OBJ(self, f));
            return 0;
        }
        if (!PyList_Check(value) && !PyTuple_Check(value))
            return type_error(self, f, "a list or tuple of real numbers, or None", value);
        /* a private copy: the caller's list may change later */
        PyObject *seq = PySequence_Tuple(value);
        if (seq == NULL)
            return -1;
        Py_ssize_t n = PyTuple_GET_SIZE(seq);
        PyObject *t = PyTuple_New(n);
        for (Py_ssize_t i = 0; t != NULL && i < n; i++) {
            double d;
            PyObject *x = NULL;
            if (shp_arg_real(PyTuple_GET_ITEM(seq, i), shp_type_short_name(Py_TYPE(self)),
                             f->name, &d) < 0 ||
                (x = PyFloat_FromDouble(d)) == NULL)
                Py_CLEAR(t);
            else
                PyTuple_SET_ITEM(t, i, x);
        }
        Py_DECREF(seq);
        if (t == NULL)
            return -1;
        Py_XSETREF(AS_OBJ(self, f), t);
        return 0;
    }
    case SHP_F_DOUBLE:
    case SHP_F_OPT_DOUBLE: {
        double d;
        if (is_none && f->kind == SHP_F_OPT_DOUBLE) {
            AS_DBL(self, f) = NAN;
            return 0;
        }
        if (shp_arg_real(value, shp_type_short_name(Py_TYPE(self)), f->name, &d) < 0)
            return -1;
        AS_DBL(self, f) = d;
        return 0;
    }
    case SHP_F_COUNT:
    case SHP_F_OPT_COUNT: {
        Py_ssize_t n;
        if (is_none && f->kind == SHP_F_OPT_COUNT) {
            AS_SSZ(self, f) = -1;
            return 0;
        }
        if (as_count(self, f, value, &n) < 0)
            return -1;
        AS_SSZ(self, f) = n;
        return 0;
    }
    case SHP_F_OPT_BOOL:
        if (is_none) {
            AS_INT(self, f) = -1;
            return 0;
        }
        if (!PyBool_Check(value))
            return type_error(self, f, "a bool or None", value);
        AS_INT(self, f) = value == Py_True;
        return 0;
    }
    PyErr_SetString(PyExc_SystemError, "unknown field kind");
    return -1;
}

void
shp_fields_set_defaults(PyObject *self, const shp_field *fields)
{
    for (const shp_field *f = fields; f->name != NULL; f++) {
        switch (f->kind) {
        case SHP_F_STR:
        case SHP_F_OPT_STR:
        case SHP_F_OPT_DICT:
        case SHP_F_OPT_FLOATS:
        case SHP_F_OPT_COUNTS:
            Py_CLEAR(AS_OBJ(self, f));
            break;
        case SHP_F_DOUBLE:
            AS_DBL(self, f) = f->dflt;
            break;
        case SHP_F_OPT_DOUBLE:
            AS_DBL(self, f) = NAN;
            break;
        case SHP_F_COUNT:
            AS_SSZ(self, f) = (Py_ssize_t)f->dflt;
            break;
        case SHP_F_OPT_COUNT:
            AS_SSZ(self, f) = -1;
            break;
        case SHP_F_OPT_BOOL:
            AS_INT(self, f) = -1;
            break;
        }
    }
}

int
shp_round_digits(double x, int ndigits, double *out)
{
    if (!isfinite(x)) {
        *out = x;
        return 0;
    }
    /* The same correctly rounded decimal conversion round() uses. */
    char *s = PyOS_double_to_string(x, 'f', ndigits, 0, NULL);
    if (s == NULL)
        return -1;
    double r = PyOS_string_to_double(s, NULL, NULL);
    PyMem_Free(s);
    if (r == -1.0 && PyErr_Occurred())
        return -1;
    *out = r;
    return 0;
}

/* Decimals to_dict() keeps: the released module's (ms and MiB 2, fps 1), or
 * more when those would leave fewer than 2 significant digits, so that a
 * 0.0008415 ms latency reads 0.00084 rather than 0.0. */
static int
round_of(shp_round r, double x)
{
    int nd;
    switch (r) {
    case SHP_R_MS: nd = 2; break;
    case SHP_R_FPS: nd = 1; break;
    case SHP_R_MB: nd = 2; break;
    case SHP_R_RATIO: nd = 4; break;
    default: return -1;
    }
    if (x != 0.0 && isfinite(x)) {
        /* the first significant digit sits at decimal -floor(log10|x|) */
        int need = 1 - (int)floor(log10(fabs(x)));
        if (need > nd)
            nd = need > 17 ? 17 : need;
    }
    return nd;
}

PyObject *
shp_field_export(PyObject *self, const shp_field *f, int rounded)
{
    int is_real = f->kind == SHP_F_DOUBLE ||
                  (f->kind == SHP_F_OPT_DOUBLE && !isnan(AS_DBL(self, f)));
    int nd = rounded && is_real ? round_of(f->round, AS_DBL(self, f)) : -1;
    if (nd >= 0) {
        double r;
        if (shp_round_digits(AS_DBL(self, f), nd, &r) < 0)
            return NULL;
        return PyFloat_FromDouble(r);
    }
    if (f->kind == SHP_F_OPT_DICT && AS_OBJ(self, f) != NULL) {
        /* to_dict() hands out copies.  Owned while copied: copying compares
         * the user's keys, whose __eq__ may reassign the field and free it. */
        PyObject *d = Py_NewRef(AS_OBJ(self, f));
        PyObject *r = PyDict_Copy(d);
        Py_DECREF(d);
        return r;
    }
    if (f->kind == SHP_F_OPT_FLOATS && AS_OBJ(self, f) != NULL) {
        /* a list (JSON has no tuple), each item rounded like the field; the
         * tuple is held: making the list can run a finalizer that reassigns
         * the field */
        PyObject *t = Py_NewRef(AS_OBJ(self, f));
        Py_ssize_t n = PyTuple_GET_SIZE(t);
        PyObject *l = PyList_New(n);
        for (Py_ssize_t i = 0; l != NULL && i < n; i++) {
            double r = PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(t, i));
            PyObject *x = NULL;
            if ((nd >= 0 && shp_round_digits(r, nd, &r) < 0) ||
                (x = PyFloat_FromDouble(r)) == NULL)
                Py_CLEAR(l);
            else
                PyList_SET_ITEM(l, i, x);
        }
        Py_DECREF(t);
        return l;
    }
    return shp_field_get(self, f);
}

int
shp_fields_init(PyObject *self, const shp_field *fields, PyObject *args,
                PyObject *kwargs)
{
    /* The call's shape is checked by the one keyword parser (args.c) before
     * any field is set, as a dataclass's __init__ does.  The keyword values
     * are taken from a list of kwargs' items, which holds them (and a fixed
     * count of them) while fields are set: a value's __float__, or a
     * finalizer run by any allocation here, may change kwargs meanwhile. */
    const char *tn = shp_type_short_name(Py_TYPE(self));
    Py_ssize_t nf = shp_fields_count(fields);
    Py_ssize_t nargs = PyTuple_GET_SIZE(args), nkw = 0;
    int npos = 0, nreq = 0, rc = -1;
    while (npos < nf && !fields[npos].keyword_only)
        npos++;
    while (nreq < nf && fields[nreq].required)
        nreq++;
    PyObject *items = NULL, *kwnames = NULL;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) > 0) {
        items = PyDict_Items(kwargs);
        if (items == NULL)
            return -1;
        nkw = PyList_GET_SIZE(items);
    }
    const char **names = PyMem_New(const char *, (size_t)nf + 1);
    PyObject **vec = PyMem_New(PyObject *, (size_t)(nargs + nkw) + 1);
    PyObject **out = PyMem_New(PyObject *, (size_t)nf + 1);
    if (names == NULL || vec == NULL || out == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (nkw > 0 && (kwnames = PyTuple_New(nkw)) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < nf; i++)
        names[i] = fields[i].name;
    for (Py_ssize_t i = 0; i < nargs; i++)
        vec[i] = PyTuple_GET_ITEM(args, i);   /* the caller holds the tuple */
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *kv = PyList_GET_ITEM(items, k);   /* our list's (key, value) */
        PyTuple_SET_ITEM(kwnames, k, Py_NewRef(PyTuple_GET_ITEM(kv, 0)));
        vec[nargs + k] = PyTuple_GET_ITEM(kv, 1);
    }
    shp_argspec spec = {tn, names, (int)nf, npos, nreq, 0};
    if (shp_args_parse(&spec, vec, nargs, kwnames, out) < 0)
        goto done;
    for (Py_ssize_t i = 0; i < nf; i++)
        if (out[i] != NULL && shp_field_set(self, &fields[i], out[i]) < 0)
            goto done;
    rc = 0;
done:
    PyMem_Free(names);
    PyMem_Free(vec);
    PyMem_Free(out);
    Py_XDECREF(kwnames);
    Py_XDECREF(items);
    return rc;
}

static PyObject *
field_getter(PyObject *self, void *closure)
{
    return shp_field_get(self, (const shp_field *)closure);
}

static int
field_setter(PyObject *self, PyObject *value, void *closure)
{
    return shp_field_set(self, (const shp_field *)closure, value);
}

void
shp_fields_fill_getset(const shp_field *fields, const PyGetSetDef *extra,
                       PyGetSetDef *out)
{
    Py_ssize_t k = 0;
    for (const shp_field *f = fields; f->name != NULL; f++, k++) {
        out[k].name = f->name;
        out[k].get = field_getter;
        out[k].set = field_setter;
        out[k].doc = f->doc;
        out[k].closure = (void *)(uintptr_t)f;
    }
    for (; extra != NULL && extra->name != NULL; extra++, k++)
        out[k] = *extra;
    memset(&out[k], 0, sizeof(out[k]));
}

static int
is_set(PyObject *self, const shp_field *f)
{
    switch (f->kind) {
    case SHP_F_OPT_STR:
    case SHP_F_OPT_DICT:
    case SHP_F_OPT_FLOATS: return AS_OBJ(self, f) != NULL;
    case SHP_F_OPT_COUNTS: return AS_OBJ(self, f) != NULL;
    case SHP_F_OPT_DOUBLE: return !isnan(AS_DBL(self, f));
    case SHP_F_OPT_COUNT: return AS_SSZ(self, f) >= 0;
    case SHP_F_OPT_BOOL: return AS_INT(self, f) >= 0;
    case SHP_F_COUNT: return AS_SSZ(self, f) != (Py_ssize_t)f->dflt;
    default: return 1;
    }
}

PyObject *
shp_fields_repr(PyObject *self, const shp_field *fields)
{
    PyObject *parts = PyList_New(0), *sep = NULL, *body = NULL, *res = NULL;
    if (parts == NULL)
        return NULL;
    for (const shp_field *f = fields; f->name != NULL; f++) {
        if (f->show == SHP_SHOW_NEVER || (f->show == SHP_SHOW_IF_SET && !is_set(self, f)))
            continue;
        PyObject *v = shp_field_get(self, f);
        if (v == NULL)
            goto done;
        PyObject *s = PyUnicode_FromFormat("%s=%R", f->name, v);
        Py_DECREF(v);
        if (s == NULL)
            goto done;
        int rc = PyList_Append(parts, s);
        Py_DECREF(s);
        if (rc < 0)
            goto done;
    }
    sep = PyUnicode_FromString(", ");
    if (sep == NULL)
        goto done;
    body = PyUnicode_Join(sep, parts);
    if (body == NULL)
        goto done;
    res = PyUnicode_FromFormat("%s(%U)", shp_type_short_name(Py_TYPE(self)), body);
done:
    Py_XDECREF(body);
    Py_XDECREF(sep);
    Py_DECREF(parts);
    return res;
}

int
shp_fields_equal(PyObject *a, PyObject *b, const shp_field *fields)
{
    for (const shp_field *f = fields; f->name != NULL; f++) {
        switch (f->kind) {
        case SHP_F_DOUBLE:
        case SHP_F_OPT_DOUBLE: {
            double x = AS_DBL(a, f), y = AS_DBL(b, f);
            if (!(x == y || (isnan(x) && isnan(y))))
                return 0;
            break;
        }
        case SHP_F_COUNT:
        case SHP_F_OPT_COUNT:
            if (AS_SSZ(a, f) != AS_SSZ(b, f))
                return 0;
            break;
        case SHP_F_OPT_BOOL:
            if (AS_INT(a, f) != AS_INT(b, f))
                return 0;
            break;
        case SHP_F_OPT_FLOATS: {
            /* item by item, NaN == NaN like the double fields (a tuple's own
             * == compares NaN objects by identity first, so copies differ) */
            PyObject *x = AS_OBJ(a, f), *y = AS_OBJ(b, f);
            if (x == NULL || y == NULL) {
                if (x != y)
                    return 0;
                break;
            }
            if (PyTuple_GET_SIZE(x) != PyTuple_GET_SIZE(y))
                return 0;
            for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(x); i++) {
                double u = PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(x, i));
                double v = PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(y, i));
                if (!(u == v || (isnan(u) && isnan(v))))
                    return 0;
            }
            break;
        }
        default: {
            PyObject *x = AS_OBJ(a, f), *y = AS_OBJ(b, f);
            if (x == NULL || y == NULL) {
                if (x != y)
                    return 0;
                break;
            }
            /* own both: a user's __eq__ (inside params, say) may reassign the
             * field and free the object being compared */
            Py_INCREF(x);
            Py_INCREF(y);
            int eq = PyObject_RichCompareBool(x, y, Py_EQ);
            Py_DECREF(x);
            Py_DECREF(y);
            if (eq <= 0)
                return eq;
        }
        }
    }
    return 1;
}

PyObject *
shp_fields_dict(PyObject *self, const shp_field *fields, int rounded)
{
    PyObject *d = PyDict_New();
    if (d == NULL)
        return NULL;
    for (const shp_field *f = fields; f->name != NULL; f++) {
        PyObject *v = shp_field_export(self, f, rounded);
        if (v == NULL || shp_dict_set(d, f->name, v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(v);
    }
    return d;
}

int
shp_fields_traverse(PyObject *self, const shp_field *fields, visitproc visit, void *arg)
{
    for (const shp_field *f = fields; f->name != NULL; f++)
        if (f->kind == SHP_F_STR || f->kind == SHP_F_OPT_STR || f->kind == SHP_F_OPT_DICT ||
            f->kind == SHP_F_OPT_FLOATS ||
            f->kind == SHP_F_OPT_COUNTS)
            Py_VISIT(AS_OBJ(self, f));
    return 0;
}

void
shp_fields_clear(PyObject *self, const shp_field *fields)
{
    for (const shp_field *f = fields; f->name != NULL; f++)
        if (f->kind == SHP_F_STR || f->kind == SHP_F_OPT_STR || f->kind == SHP_F_OPT_DICT ||
            f->kind == SHP_F_OPT_FLOATS ||
            f->kind == SHP_F_OPT_COUNTS)
            Py_CLEAR(AS_OBJ(self, f));
}
