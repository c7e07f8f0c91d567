/*
 * markup.c -- text that renders as exactly itself in Markdown or HTML.
 *
 * A leaf: pure string work on str objects, no module state and no calls
 * into the rest of the extension.  Used by the table (table.c) and the
 * Comparison type's one-row tables (compare.c).
 */
#include "render/render.h"

#include <ctype.h>

/* Replace every `from` in s by `to`; new reference. */
static PyObject *
replace(PyObject *s, const char *from, const char *to)
{
    PyObject *f = PyUnicode_FromString(from), *t = PyUnicode_FromString(to), *r = NULL;
    if (f != NULL && t != NULL)
        r = PyUnicode_Replace(s, f, t, -1);
    Py_XDECREF(f);
    Py_XDECREF(t);
    return r;
}

/*
 * Markdown text that renders as exactly the string given, on one line.
 *
 * Line breaks become spaces and the ends are trimmed (Markdown would drop
 * that whitespace, and "** x**" is no longer bold).  Inline, the characters
 * that would start markup are backslash-escaped: ` * [ < $ (Jupyter's math)
 * and ~ always; '_' unless inside a word (GFM's intraword rule makes
 * "vit_b_16" safe, and it stays readable); '&' where it would start an
 * entity; in a heading, a '#' after a space; and a backslash that precedes
 * punctuation or ends the text.  In a table cell '|' becomes "\|" (the
 * backslash doubling before it is what keeps "a\|b" one cell).  A code
 * span's text is literal: only its '|' is escaped (GFM removes that
 * backslash before the span is read).
 */
static int
ascii_punct(Py_UCS4 c)
{
    return c < 128 && ispunct((int)c);
}

static int
starts_entity(int kind, const void *data, Py_ssize_t i, Py_ssize_t end)
{
    Py_ssize_t j = i + 1;
    if (j < end && PyUnicode_READ(kind, data, j) == '#')
        j++;
    Py_ssize_t first = j;
    while (j < end && PyUnicode_READ(kind, data, j) < 128 && isalnum((int)PyUnicode_READ(kind, data, j)))
        j++;
    return j > first && j < end && PyUnicode_READ(kind, data, j) == ';';
}

PyObject *
shp_md_text(PyObject *s, shp_md_mode mode)
{
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(s) < 0)   /* a legacy string made by the old API */
        return NULL;
#endif
    Py_ssize_t n = PyUnicode_GET_LENGTH(s), lo = 0, hi = n;
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    while (lo < hi && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, lo)))
        lo++;
    while (hi > lo && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, hi - 1)))
        hi--;
    Py_UCS4 *out = PyMem_New(Py_UCS4, (size_t)(hi - lo) * 2 + 1);   /* <= 2 out per in */
    if (out == NULL)
        return PyErr_NoMemory();
    Py_ssize_t m = 0;
    for (Py_ssize_t i = lo; i < hi; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        Py_UCS4 prev = i > lo ? PyUnicode_READ(kind, data, i - 1) : ' ';
        Py_UCS4 next = i + 1 < hi ? PyUnicode_READ(kind, data, i + 1) : ' ';
        int esc = 0;
        if (c == '\r' || c == '\n') {
            if (c == '\r' && next == '\n')
                i++;
            c = ' ';
        }
        else if (c == '|')
            esc = mode != SHP_MD_HEADING;
        else if (mode == SHP_MD_CODE)
            esc = 0;
        else if (c == '\\')
            esc = i + 1 == hi || ascii_punct(next);
        else if (c == '`' || c == '*' || c == '[' || c == '<' || c == '$' || c == '~')
            esc = 1;
        else if (c == '_')
            esc = !(Py_UNICODE_ISALNUM(prev) && Py_UNICODE_ISALNUM(next));
        else if (c == '&')
            esc = starts_entity(kind, data, i, hi);
        else if (c == '#')   /* "### Q #" would lose its '#' as a closing sequence */
            esc = mode == SHP_MD_HEADING && (i == lo || Py_UNICODE_ISSPACE(prev));
        if (esc)
            out[m++] = '\\';
        out[m++] = c;
    }
    PyObject *r = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, out, m);
    PyMem_Free(out);
    return r;
}

/* A code span around shp_md_text(s, SHP_MD_CODE): the fence is one backtick longer
 * than the longest run of them inside, padded with spaces when it has to be
 * (CommonMark strips one from each side). */
PyObject *
shp_md_code_span(PyObject *s)
{
    PyObject *t = shp_md_text(s, SHP_MD_CODE);
    if (t == NULL || PyUnicode_GET_LENGTH(t) == 0)
        return t;
    Py_ssize_t n = PyUnicode_GET_LENGTH(t), longest = 0, run = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        run = PyUnicode_READ_CHAR(t, i) == '`' ? run + 1 : 0;
        if (run > longest)
            longest = run;
    }
    PyObject *r;
    if (longest == 0) {
        r = PyUnicode_FromFormat("`%U`", t);
    }
    else {
        PyObject *tick = PyUnicode_FromOrdinal('`');
        PyObject *fence = tick ? PySequence_Repeat(tick, longest + 1) : NULL;
        r = fence ? PyUnicode_FromFormat("%U %U %U", fence, t, fence) : NULL;
        Py_XDECREF(tick);
        Py_XDECREF(fence);
    }
    Py_DECREF(t);
    return r;
}

PyObject *
shp_html_escape(PyObject *s)
{
    static const char *pairs[][2] = {
        {"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}};
    PyObject *cur = Py_NewRef(s);
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        PyObject *nxt = replace(cur, pairs[i][0], pairs[i][1]);
        Py_DECREF(cur);
        if (nxt == NULL)
            return NULL;
        cur = nxt;
    }
    return cur;
}

PyObject *
shp_md_bold_cell(PyObject *s)
{
    PyObject *esc = shp_md_text(s, SHP_MD_CELL);
    if (esc == NULL || PyUnicode_GET_LENGTH(esc) == 0)
        return esc;
    PyObject *r = PyUnicode_FromFormat("**%U**", esc);
    Py_DECREF(esc);
    return r;
}
