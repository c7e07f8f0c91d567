/*
 * progress.c -- the progress line of a long run, on stderr.
 *
 * Drawn between timed iterations, at most 10 times a second; in auto mode
 * only for runs expected to take over 2 s, when someone can see the line
 * (a terminal, or a Jupyter kernel's stream).  A broken stderr never fails
 * the benchmark; a Ctrl-C inside the stream's write() stops it like one
 * anywhere else.  The cheap per-iteration test, shp_progress_tick, is a
 * static inline in run.h.  No calls into other files.
 */
#include "run/run.h"

#include <string.h>

/* Drop what writing to stderr raised -- but not a Ctrl-C (or SystemExit)
 * that landed in a Python-level stream (a notebook's): that stays set, and
 * -1 says so. */
static int
forget_stream_error(void)
{
    return shp_clear_unless_fatal();
}

/* At most 60 bytes of the UTF-8 name, cut at a character boundary (a cut
 * inside a character made the line undecodable, and it never appeared). */
static int
name_bytes(const char *nm)
{
    size_t n = strlen(nm);
    if (n <= 60)
        return (int)n;
    n = 60;
    while (n > 0 && ((unsigned char)nm[n] & 0xC0) == 0x80)
        n--;   /* nm[n] continues a character: cut before that character */
    return (int)n;
}

/* 0, or -1 with a KeyboardInterrupt / SystemExit set (from the stream's own
 * code). */
static int
progress_draw_line(shp_progress *pl, Py_ssize_t i, Py_ssize_t total, int64_t elapsed_ns,
                   int final)
{
    char line[256], bar[33];
    double el = (double)elapsed_ns / 1e9;
    const char *nm = PyUnicode_AsUTF8(pl->name);
    if (nm == NULL) {   /* e.g. a lone surrogate in the name */
        PyErr_Clear();  /* UnicodeEncodeError of our own conversion: no user code */
        nm = "benchmark";
    }
    int nlen = name_bytes(nm);
    if (total > 0) {
        double frac = (double)i / (double)total;
        int filled = (int)(frac * 30.0);
        for (int k = 0; k < 30; k++)
            bar[k] = k < filled ? '#' : '-';
        bar[30] = '\0';
        double eta = i > 0 ? el / (double)i * (double)(total - i) : 0.0;
        PyOS_snprintf(line, sizeof(line), "\r%.*s [%s] %zd/%zd  %.1fs elapsed, ETA %.1fs",
                      nlen, nm, bar, i, total, el, eta);
    }
    else {
        PyOS_snprintf(line, sizeof(line), "\r%.*s %zd iterations  %.1fs elapsed",
                      nlen, nm, i, el);
    }
    /* A line shorter than the last one drawn (the ETA lost a digit) is padded
     * over it: "\r" only moves the cursor, the old tail would stay. */
    int len = (int)strlen(line);
    int pad = pl->last_len > len ? pl->last_len - len : 0;
    if (len + pad + 2 > (int)sizeof(line))
        pad = (int)sizeof(line) - len - 2;
    memset(line + len, ' ', (size_t)pad);
    line[len + pad] = '\0';
    pl->last_len = len;
    if (final)
        strcat(line, "\n");
    /* Own the stream: its write() may replace sys.stderr and free it. */
    PyObject *err = PySys_GetObject("stderr");
    Py_XINCREF(err);
    if (err == NULL || err == Py_None || PyFile_WriteString(line, err) < 0) {
        Py_XDECREF(err);
        pl->mode = 0;   /* a broken stderr must not fail the benchmark */
        return err == NULL || err == Py_None ? 0 : forget_stream_error();
    }
    PyObject *r = PyObject_CallMethod(err, "flush", NULL);
    int rc = r == NULL ? forget_stream_error() : 0;
    Py_XDECREF(r);
    Py_DECREF(err);
    pl->drawn = 1;
    if (rc < 0)
        pl->mode = 0;   /* the run ends here; no closing line into that stream */
    return rc;
}

/* The closing line, after the loop; may run with an exception set (a run
 * that raised): that exception is put aside and restored untouched, since
 * PyFile_WriteString refuses to write while one is pending and the clean-up
 * in progress_draw_line would otherwise clear the user's exception.  A
 * Ctrl-C or SystemExit raised by the stream here is dropped when the run is
 * already ending with an exception, and is the result otherwise (-1). */
int
shp_progress_close(shp_progress *pl, Py_ssize_t i, Py_ssize_t total, int64_t elapsed_ns)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (progress_draw_line(pl, i, total, elapsed_ns, 1) < 0) {
        if (type == NULL)
            return -1;
        PyErr_Clear();
    }
    PyErr_Restore(type, value, tb);
    return 0;
}

/* Auto mode: on for runs expected to take over 2 s, when someone can see it.
 * 1 / 0, or -1 with a KeyboardInterrupt / SystemExit from the stream's code. */
static int
progress_interactive(void)
{
    PyObject *err = PySys_GetObject("stderr");
    if (err == NULL || err == Py_None)
        return 0;
    /* A Jupyter kernel's stderr is ipykernel's OutStream, which is no tty but
     * is seen.  (Testing for ipykernel in sys.modules is wrong: importing it,
     * as a test suite may, does not put the process in a notebook.) */
    Py_INCREF(err);
    int kernel = 0;   /* ipykernel's OutStream, or a class derived from it */
    PyObject *mro = Py_TYPE(err)->tp_mro;
    Py_XINCREF(mro);   /* a metaclass's attribute lookup could replace it */
    int fatal = 0;
    for (Py_ssize_t i = 0; mro != NULL && i < PyTuple_GET_SIZE(mro) && !kernel; i++) {
        PyObject *mod = PyObject_GetAttrString(PyTuple_GET_ITEM(mro, i), "__module__");
        const char *mname = mod != NULL && PyUnicode_Check(mod) ? PyUnicode_AsUTF8(mod) : NULL;
        kernel = mname != NULL && strncmp(mname, "ipykernel.", 10) == 0;
        Py_XDECREF(mod);
        if (shp_clear_unless_fatal() < 0) {
            fatal = 1;
            break;
        }
    }
    Py_XDECREF(mro);
    if (kernel || fatal) {
        Py_DECREF(err);
        return fatal ? -1 : 1;
    }
    PyObject *r = PyObject_CallMethod(err, "isatty", NULL);
    Py_DECREF(err);
    int tty = r ? PyObject_IsTrue(r) : 0;
    Py_XDECREF(r);
    if ((tty < 0 || r == NULL) && shp_clear_unless_fatal() < 0)
        return -1;
    return tty > 0;
}

int
shp_progress_update(shp_progress *pl, Py_ssize_t i, Py_ssize_t total, int64_t now, int64_t start)
{
    int64_t el = now - start;
    if (pl->mode < 0) {
        if (el < SHP_PROGRESS_DECIDE_NS)
            return 0;   /* decide after 0.5 s, from the rate so far */
        double projected = total > 0 && i > 0 ? (double)el / (double)i * (double)total : 3e9;
        int seen = projected > 2e9 ? progress_interactive() : 0;
        if (seen < 0)
            return -1;   /* Ctrl-C / SystemExit in the stream's code */
        pl->mode = seen;
        if (pl->mode == 0)
            return 0;
    }
    if (now - pl->last_ns < SHP_PROGRESS_PERIOD_NS && pl->drawn)
        return 0;
    pl->last_ns = now;
    return progress_draw_line(pl, i, total, el, 0);
}
