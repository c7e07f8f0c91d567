/*
 * fielddoc.c -- the docstring of a type made over a field table.
 *
 * BenchmarkStats, Comparison and GPUMemoryInfo take their fields as
 * constructor arguments; the text signature inspect.signature reads and the
 * numpydoc Parameters section are written here from the same shp_field table
 * that the constructor parses, so help() cannot drift from what __init__
 * accepts.
 */
#include "capi/capi.h"

#include <stdlib.h>
#include <string.h>

/* Text appended into a fixed buffer; `full` once something did not fit. */
typedef struct {
    char *p;
    size_t left;   /* bytes left, the terminating NUL's included */
    int full;
} docbuf;

static void
put(docbuf *b, const char *s)
{
    size_t n = strlen(s);
    if (b->full || n >= b->left) {
        b->full = 1;
        return;
    }
    memcpy(b->p, s, n + 1);
    b->p += n;
    b->left -= n;
}

/* The default as Python writes it: the shortest repr of a double that reads
 * back as the same double (0.05, not 0.050000000000000003), always with a
 * point; a count as an int; None for every optional kind. */
static void
put_default(docbuf *b, const shp_field *f)
{
    char num[40];
    if (f->kind == SHP_F_DOUBLE) {
        for (int prec = 1; prec <= 17; prec++) {
            PyOS_snprintf(num, sizeof num, "%.*g", prec, f->dflt);
            if (strtod(num, NULL) == f->dflt)
                break;
        }
        put(b, num);
        if (strpbrk(num, ".e") == NULL)   /* "0" -> "0.0", as repr(0.0) */
            put(b, ".0");
    } else if (f->kind == SHP_F_COUNT) {
        PyOS_snprintf(num, sizeof num, "%lld", (long long)f->dflt);
        put(b, num);
    } else {
        put(b, "None");
    }
}

/* The fields of one kind (0 required, 1 positional with a default, 2
 * keyword-only) as one numpydoc entry: their names wrapped at 79 columns,
 * then `what` indented.  Nothing when there is none. */
static void
put_group(docbuf *b, const shp_field *fields, int group, const char *what)
{
    size_t col = 0;
    int any = 0;
    for (const shp_field *f = fields; f->name != NULL; f++) {
        int g = f->required ? 0 : f->keyword_only ? 2 : 1;
        if (g != group)
            continue;
        size_t n = strlen(f->name);
        if (any) {
            put(b, ",");
            col++;
            if (col + 1 + n > 79) {
                put(b, "\n");
                col = 0;
            } else {
                put(b, " ");
                col++;
            }
        }
        put(b, f->name);
        col += n;
        any = 1;
    }
    if (any) {
        put(b, "\n    ");
        put(b, what);
        put(b, "\n");
    }
}

void
shp_fields_spec_doc(PyType_Spec *spec, const shp_field *fields, const char *extra_sig,
                    const char *intro, const char *extra_params, const char *outro,
                    char *buf, size_t size)
{
    docbuf b = {buf, size, 0};
    const char *dot = strrchr(spec->name, '.');
    put(&b, dot ? dot + 1 : spec->name);
    put(&b, "(");
    int first = 1, star = 0;
    for (const shp_field *f = fields; f->name != NULL; f++) {
        if (!first)
            put(&b, ", ");
        first = 0;
        if (f->keyword_only && !star) {
            put(&b, "*, ");
            star = 1;
        }
        put(&b, f->name);
        if (!f->required) {
            put(&b, "=");
            put_default(&b, f);
        }
    }
    if (extra_sig != NULL) {
        put(&b, first ? "" : ", ");
        put(&b, star ? "" : "*, ");
        put(&b, extra_sig);
    }
    put(&b, ")\n--\n\n");
    put(&b, intro);
    put(&b, "\n\nParameters\n----------\n");
    put_group(&b, fields, 0, "Required, by position or keyword.");
    put_group(&b, fields, 1, "Optional, by position or keyword.");
    put_group(&b, fields, 2, "Optional, keyword-only.");
    if (extra_params != NULL)
        put(&b, extra_params);
    put(&b, "\nNotes\n-----\nEach field parameter sets the attribute of the same name, described\n"
            "there (help() lists them).");
    if (outro != NULL)
        put(&b, outro);
    for (PyType_Slot *s = spec->slots; s->slot != 0; s++)
        if (s->slot == Py_tp_doc && !b.full)
            s->pfunc = buf;
}
