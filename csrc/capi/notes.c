/*
 * notes.c -- PEP 678 notes on a user's exception.
 *
 * An exception raised by func or sync_fn inside the run propagates
 * unchanged, with a note saying which benchmark, which phase and which
 * iteration raised it; a TypeError of the callable's that rejects a keyword
 * meant for the harness (num_iter=, iters=) also says which option was meant.
 * A leaf: no module state, no calls into other files.
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

/* ---- a keyword that was meant for the harness --------------------------- */

/* The longest keyword (code points) compared; a longer one is nobody's typo. */
#define NEAR_MAX_LEN 64

const char shp_near_option_note[] =
    "did you mean %U=? %U= is not an option of the harness, so it was passed on to the "
    "timed callable, which does not take it";

/* The optimal-string-alignment distance of a and b (insertions, deletions,
 * substitutions, adjacent transpositions; code points, case counts), or
 * cap + 1 when it is larger than cap or either is longer than NEAR_MAX_LEN. */
static Py_ssize_t
osa_distance(PyObject *a, PyObject *b, Py_ssize_t cap)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(a), m = PyUnicode_GET_LENGTH(b);
    if (n > NEAR_MAX_LEN || m > NEAR_MAX_LEN || (n > m ? n - m : m - n) > cap)
        return cap + 1;
    int ka = PyUnicode_KIND(a), kb = PyUnicode_KIND(b);
    const void *da = PyUnicode_DATA(a), *db = PyUnicode_DATA(b);
    Py_ssize_t rows[3][NEAR_MAX_LEN + 1];   /* i - 2, i - 1, i */
    Py_ssize_t *pp = rows[0], *prev = rows[1], *cur = rows[2];
    for (Py_ssize_t j = 0; j <= m; j++)
        prev[j] = j;
    for (Py_ssize_t i = 1; i <= n; i++) {
        Py_UCS4 ca = PyUnicode_READ(ka, da, i - 1);
        cur[0] = i;
        Py_ssize_t row_min = cur[0];
        for (Py_ssize_t j = 1; j <= m; j++) {
            Py_UCS4 cb = PyUnicode_READ(kb, db, j - 1);
            Py_ssize_t d = prev[j - 1] + (ca != cb);
            if (prev[j] + 1 < d)
                d = prev[j] + 1;
            if (cur[j - 1] + 1 < d)
                d = cur[j - 1] + 1;
            if (i > 1 && j > 1 && ca == PyUnicode_READ(kb, db, j - 2) &&
                PyUnicode_READ(ka, da, i - 2) == cb && pp[j - 2] + 1 < d)
                d = pp[j - 2] + 1;
            cur[j] = d;
            if (d < row_min)
                row_min = d;
        }
        if (row_min > cap)
            return cap + 1;
        Py_ssize_t *t = pp;
        pp = prev;
        prev = cur;
        cur = t;
    }
    return prev[m] > cap ? cap + 1 : prev[m];
}

static int
is_word_char(Py_UCS4 c)
{
    return c == '_' || Py_UNICODE_ISALNUM(c);
}

/* 1 if `msg` holds `word` as a whole word (not inside a longer name). */
static int
names_word(PyObject *msg, PyObject *word)
{
    Py_ssize_t len = PyUnicode_GET_LENGTH(msg), w = PyUnicode_GET_LENGTH(word);
    for (Py_ssize_t at = 0; w > 0 && at + w <= len;) {
        Py_ssize_t i = PyUnicode_Find(msg, word, at, len, 1);
        if (i < 0)
            return 0;   /* -2 (an error) cannot happen on two str */
        int before = i > 0 && is_word_char(PyUnicode_READ_CHAR(msg, i - 1));
        int after = i + w < len && is_word_char(PyUnicode_READ_CHAR(msg, i + w));
        if (!before && !after)
            return 1;
        at = i + 1;
    }
    return 0;
}

/* 1 if exc already carries a near-option note (the core's, seen again by an
 * adapter above it); 0 otherwise, errors dropped (-1 only for a fatal one). */
static int
has_near_note(PyObject *exc)
{
    PyObject *notes = PyObject_GetAttrString(exc, "__notes__");
    if (notes == NULL)
        return shp_clear_unless_fatal();
    PyObject *prefix = PyUnicode_FromString("did you mean ");
    int found = 0;
    if (prefix != NULL && PyList_Check(notes))
        for (Py_ssize_t i = 0; !found && i < PyList_GET_SIZE(notes); i++) {
            PyObject *n = PyList_GET_ITEM(notes, i);
            found = PyUnicode_Check(n) && PyUnicode_Tailmatch(n, prefix, 0, PY_SSIZE_T_MAX, -1) == 1;
        }
    Py_XDECREF(prefix);
    Py_DECREF(notes);
    return shp_clear_unless_fatal() < 0 ? -1 : found;
}

/* The (keyword, option) pair for a near miss, found as described in capi.h.
 * 1 with new references in *kw and *opt, 0 without, -1 with a fatal error
 * (KeyboardInterrupt, SystemExit) set.  Nothing else fails: other errors
 * (a message whose str() raises) are dropped. */
static int
find_near_option(PyObject *exc, PyObject *keywords, PyObject *options, PyObject **kw,
                 PyObject **opt)
{
    *kw = *opt = NULL;
    if (exc == NULL || !PyObject_TypeCheck(exc, (PyTypeObject *)PyExc_TypeError) ||
        !PyTuple_Check(keywords) || PyTuple_GET_SIZE(keywords) == 0 || !PyDict_Check(options))
        return 0;
    int noted = has_near_note(exc);
    if (noted != 0)
        return noted < 0 ? -1 : 0;
    PyObject *msg = PyObject_Str(exc);
    if (msg == NULL)
        return shp_clear_unless_fatal();
    /* a message about the call's arguments ("unexpected keyword argument",
     * "invalid keyword argument", pybind11's "incompatible function
     * arguments"), not a TypeError the callable raised on a value */
    PyObject *k1 = PyUnicode_FromString("keyword"), *k2 = PyUnicode_FromString("arguments");
    int about_args = k1 != NULL && k2 != NULL &&
                     (PyUnicode_Find(msg, k1, 0, PY_SSIZE_T_MAX, 1) >= 0 ||
                      PyUnicode_Find(msg, k2, 0, PY_SSIZE_T_MAX, 1) >= 0);
    Py_XDECREF(k1);
    Py_XDECREF(k2);
    int found = 0;
    for (Py_ssize_t k = 0; about_args && !found && k < PyTuple_GET_SIZE(keywords); k++) {
        PyObject *word = PyTuple_GET_ITEM(keywords, k);
        if (!PyUnicode_Check(word) || !names_word(msg, word))
            continue;
        Py_ssize_t pos = 0, best = NEAR_MAX_LEN + 1;
        PyObject *name, *target, *pick = NULL;
        while (PyDict_Next(options, &pos, &name, &target)) {
            if (!PyUnicode_Check(name) || !PyUnicode_Check(target) ||
                PyUnicode_Compare(word, target) == 0)
                continue;   /* the option itself was passed on: nothing to suggest */
            /* one edit for a short name (name, cache, iters), two for a longer one */
            Py_ssize_t cap = PyUnicode_GET_LENGTH(name) <= 5 ? 1 : 2;
            Py_ssize_t d = osa_distance(word, name, cap);
            if (d <= cap && d < best) {
                best = d;
                pick = target;
            }
        }
        if (pick != NULL) {
            *kw = Py_NewRef(word);
            *opt = Py_NewRef(pick);
            found = 1;
        }
    }
    Py_DECREF(msg);
    return shp_clear_unless_fatal() < 0 ? -1 : found;
}

int
shp_note_near_option(PyObject *exc, PyObject *keywords, PyObject *options)
{
    PyObject *kw, *opt;
    int found = find_near_option(exc, keywords, options, &kw, &opt);
    if (found <= 0)
        return found;
    shp_add_note(exc, shp_near_option_note, opt, kw);
    Py_DECREF(kw);
    Py_DECREF(opt);
    return PyErr_Occurred() ? -1 : 1;
}

void
shp_note_current_near_option(PyObject *keywords, PyObject *options)
{
    if (!PyErr_ExceptionMatches(PyExc_TypeError))
        return;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL && value != NULL)
        PyException_SetTraceback(value, tb);
    PyObject *kw, *opt;
    int found = find_near_option(value, keywords, options, &kw, &opt);
    if (found < 0) {
        /* Ctrl-C while the message was read (a __str__ of the user's): it goes
         * on, with the exception it interrupted as its context */
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
    if (found) {
        shp_note_current(shp_near_option_note, opt, kw);
        Py_DECREF(kw);
        Py_DECREF(opt);
    }
}
