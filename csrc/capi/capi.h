/*
 * capi/ -- helpers over the C-API that every Python-facing file uses: the one
 * argument rule set and keyword parser (args.c), table-driven attributes
 * (fields.c) and their docstrings (fielddoc.c), the long help() texts
 * (docstrings.c), PEP 678 notes on a user's exception (notes.c), a
 * subclass instance's own attributes (instattrs.c).  Calls nothing outside
 * this folder.
 */
#ifndef SHP_CAPI_CAPI_H
#define SHP_CAPI_CAPI_H

#include "shp.h"

/* ---- args.c ------------------------------------------------------------- */

/*
 * One rule set (args.c's header): integers by __index__ but not bool; reals
 * int / float / __float__ / __index__ but not bool or str; flags by truth
 * value; strings must be str.  `owner` names the function ("f()": messages
 * read "f(): param must be ...") or the type ("BenchmarkStats": "Type.param
 * must be ..."); NULL for the bare parameter name.
 */

/* Set TypeError "<owner> <param> must be <want>, not <type of got>"; -1. */
int shp_arg_type_error(const char *owner, const char *param, const char *want, PyObject *got);
/* Set ValueError "<owner> <param> must be <want>, got <repr of got>"; -1. */
int shp_arg_value_error(const char *owner, const char *param, const char *want, PyObject *got);
/* An integer: new reference to an int, or NULL with TypeError. */
PyObject *shp_arg_index(PyObject *v, const char *owner, const char *param);
/* An integer into *out; ValueError outside Py_ssize_t; 0 / -1. */
int shp_arg_ssize(PyObject *v, const char *owner, const char *param, Py_ssize_t *out);
/* A count: an int by the rule above with lowest <= v, and v <= highest when
 * highest >= 0, into *out.  TypeError, or ValueError "<owner> <param> must
 * be >= <lowest>, got <v>" (or "<= <highest>"; just "must be ..." for an
 * empty param and no owner).  The one count rule of the
 * package (the Python layer calls it through _native._count).  0 / -1. */
int shp_arg_count(PyObject *v, const char *owner, const char *param, Py_ssize_t lowest,
                  Py_ssize_t highest, Py_ssize_t *out);
/* 1 if v is a real number by the rule above, else 0; never fails. */
int shp_arg_is_real(PyObject *v);
/* A real number into *out (its __float__ may raise); 0 / -1. */
int shp_arg_real(PyObject *v, const char *owner, const char *param, double *out);
/* bool(v) into *out; 0 / -1 (its __bool__ / __len__ may raise). */
int shp_arg_flag(PyObject *v, int *out);
/* What a scope measures of host memory (Timer track_memory, a profiler's
 * track_ram): nothing; RSS at enter and at exit (the default: reads of an
 * open /proc/self/statm, scoperss.c, the kernel's peak record untouched); or
 * the true peak through a high-water-mark window (memory.c), opt-in. */
typedef enum { SHP_MEM_OFF = 0, SHP_MEM_RSS = 1, SHP_MEM_PEAK = 2 } shp_mem_mode;
/* A memory mode: the str "peak", or any other object by its truth value
 * (True: SHP_MEM_RSS); any other str is a ValueError naming the choices.
 * 0 / -1. */
int shp_arg_memory(PyObject *v, const char *owner, const char *param, int *out);
/* v as one name or an iterable of names, each one of names[0..n): pick(ctx,
 * its index) for each, in order.  0, or -1 with TypeError (v neither a str
 * nor an iterable, or an item not a str) or ValueError (a name not among
 * names), both saying `choices` -- or the error of the user's iterator. */
int shp_arg_names(PyObject *v, const char *owner, const char *param, const char *choices,
                  const char *const *names, int n, void (*pick)(void *ctx, int index), void *ctx);
/* The mode as users pass it: False, True or 'peak'.  New reference. */
PyObject *shp_memory_mode_obj(int mode);
/* A str (or None when none_ok: *out = NULL); *out borrowed; 0 / -1. */
int shp_arg_str(PyObject *v, const char *owner, const char *param, int none_ok, PyObject **out);
/* A CUDA stream handle: an int (a raw CUstream), or an object with
 * __cuda_stream__() returning (version, handle) or a cuda_stream attribute;
 * may run the object's code.  0 / -1. */
int shp_arg_cuda_stream(PyObject *v, const char *owner, const char *param, void **out);
/* A callable (or None when none_ok: *out = NULL); *out borrowed; 0 / -1. */
int shp_arg_callable(PyObject *v, const char *owner, const char *param, int none_ok,
                     PyObject **out);

/* The signature of a METH_FASTCALL | METH_KEYWORDS entry point. */
typedef struct {
    const char *fname;          /* for messages: "compare_benchmarks" */
    const char *const *names;   /* every parameter, positional ones first */
    int n;                      /* number of names */
    int npos;                   /* the first npos may be given positionally */
    int nrequired;              /* the first nrequired are required */
    int pass_extra;             /* extra positionals and unknown keywords are
                                 * the callee's (benchmark_callable's func) */
} shp_argspec;

/*
 * The one keyword parser: out[0..spec->n) receives borrowed references
 * (NULL where absent).  TypeError in CPython's own words for too many
 * positionals, an unknown keyword, a repeated or a missing argument.
 */
int shp_args_parse(const shp_argspec *spec, PyObject *const *args, Py_ssize_t nargs,
                   PyObject *kwnames, PyObject **out);
/* The same for an (args tuple, kwargs dict or NULL) pair, as tp_new and
 * tp_init receive them.  out[] items are borrowed from args and from *hold:
 * a new reference (NULL when no keywords) that keeps the keyword values
 * alive whatever happens to kwargs; the caller releases it (Py_XDECREF) once
 * done with out[].  On failure *hold is NULL. */
#define SHP_ARGS_MAX 16
int shp_args_parse_tuple(const shp_argspec *spec, PyObject *args, PyObject *kwargs,
                         PyObject **out, PyObject **hold);
/* (args, kwargs) as a vectorcall stack: stack[0..nargs+nkw) borrowed from
 * args and from *hold (as above), *kwnames a new tuple of the keywords (NULL
 * when none).  More than `cap` arguments: TypeError "fname() takes at most
 * cap arguments".  0 / -1 (nothing to release then). */
int shp_args_unpack(const char *fname, PyObject *args, PyObject *kwargs, PyObject **stack,
                    Py_ssize_t cap, PyObject **kwnames, PyObject **hold);
/* Index of keyword `key` in spec->names, or -1 (never fails). */
int shp_args_find(const shp_argspec *spec, PyObject *key);
/* 1 if shp_args_parse took keyword `key` (with nargs positionals), else 0
 * (pass_extra: it is the callee's).  Never fails. */
int shp_args_takes(const shp_argspec *spec, PyObject *key, Py_ssize_t nargs);

/* ---- instattrs.c ------------------------------------------------------- */

/* A subclass instance's own attributes (its __dict__ and __slots__, via
 * `copyreg`'s _slotnames), as a new dict; empty for an instance of the base
 * type.  Runs user code (getattr).  New reference, or NULL with an exception. */
PyObject *shp_instance_attrs(PyObject *self, PyObject *copyreg);

/* ---- notes.c ------------------------------------------------------------ */

/* Attach "note" to exception `exc` (its add_note; before 3.11, where there is
 * usually none, an append to __notes__); keeps the original exception if
 * attaching fails.  Never fails, but a KeyboardInterrupt or SystemExit
 * raised by code it runs (a name's __repr__, an add_note override) is left
 * set: the caller lets it through. */
void shp_add_note(PyObject *exc, const char *fmt, ...);
/* Note fmt (PyUnicode_FromFormat's) on the exception now set, which stays
 * set (normalised, with its traceback) -- or is replaced by a Ctrl-C /
 * SystemExit that arrived while the note was made (its context then).
 * Never fails. */
void shp_note_current(const char *fmt, ...);
/* shp_note_current(fmt, name, phase, i + 1, n), typed: fmt takes %R, %s,
 * %zd, %zd ("benchmark 'f': raised by func in timed iteration 3 of 50"). */
void shp_note_iteration(const char *fmt, PyObject *name, const char *phase, Py_ssize_t i,
                        Py_ssize_t n);

/*
 * A keyword meant for the harness that reached the user's callable (one
 * vocabulary, issue 33): a typo of an option (num_iter=) or another entry
 * point's name for it (iters=) is not an option, so it is passed on, and the
 * callable rejects it.  The rule, written once here for the core and (through
 * _native._note_near_option) for the adapters: `exc` is a TypeError about the
 * call's arguments (its str() has "keyword" or "arguments") that names, as a
 * whole word, a keyword of `keywords` (a tuple of str: those passed on), and
 * that keyword is within one edit (names of up to 5 characters) or two
 * (longer names) of a key of `options` (a dict: name a keyword may be a near
 * miss of -> the option to suggest; an alias maps to its option, so iters=
 * itself suggests num_iters=).  Edits: insert, delete, substitute, swap two
 * neighbours; case counts.  The nearest wins; one note per exception (none
 * when exc has one already):
 *   "did you mean num_iters=? num_iter= is not an option of the harness, so
 *    it was passed on to the timed callable, which does not take it"
 */
extern const char shp_near_option_note[];
/* Note on `exc` when the rule holds: 1 noted, 0 not, -1 with a KeyboardInterrupt /
 * SystemExit raised by code it ran (str(exc)); other errors are dropped. */
int shp_note_near_option(PyObject *exc, PyObject *keywords, PyObject *options);
/* The same on the exception now set, which stays set (normalised, with its
 * traceback), as shp_note_current.  Never fails. */
void shp_note_current_near_option(PyObject *keywords, PyObject *options);

typedef enum {
    SHP_F_STR,        /* PyObject* str */
    SHP_F_OPT_STR,    /* PyObject* str or None (NULL) */
    SHP_F_DOUBLE,     /* double, any real number */
    SHP_F_OPT_DOUBLE, /* double, NaN means None */
    SHP_F_COUNT,      /* Py_ssize_t >= 0 */
    SHP_F_OPT_COUNT,  /* Py_ssize_t >= 0, -1 means None */
    SHP_F_OPT_BOOL,   /* int: -1 None, 0 False, 1 True */
    SHP_F_OPT_DICT,   /* PyObject* dict or None (NULL) */
    SHP_F_OPT_FLOATS, /* PyObject* tuple of floats or None (NULL); a list in to_dict */
    SHP_F_OPT_COUNTS, /* PyObject* tuple of ints >= 1 or None (NULL) */
} shp_field_kind;

typedef enum { SHP_R_NONE, SHP_R_MS, SHP_R_FPS, SHP_R_MB, SHP_R_RATIO } shp_round;

typedef enum { SHP_SHOW_ALWAYS, SHP_SHOW_IF_SET, SHP_SHOW_NEVER } shp_show;

typedef struct {
    const char *name;
    shp_field_kind kind;
    Py_ssize_t offset;
    shp_round round;          /* rounding applied by to_dict() */
    int required;             /* positional-or-keyword without a default */
    int keyword_only;         /* keyword-only, optional */
    double dflt;              /* default of DOUBLE / COUNT fields */
    shp_show show;            /* in repr */
    const char *doc;
} shp_field;

/* A SHP_F_OPT_COUNTS value (a tuple of ints, or NULL) as a new PyMem array
 * in *out (NULL and *n = 0 for NULL), and the sum of its counts in *total
 * (0 for NULL; -1 when the sum passes PY_SSIZE_T_MAX: it then accounts for
 * no number of samples).  0, or -1 with MemoryError. */
int shp_counts_array(PyObject *tuple, Py_ssize_t **out, Py_ssize_t *n, Py_ssize_t *total);
/* A NULL-name-terminated table per type. */
PyObject *shp_field_get(PyObject *self, const shp_field *f);
int shp_field_set(PyObject *self, const shp_field *f, PyObject *value);
/* Put every field's default into self (no Python calls, never fails). */
void shp_fields_set_defaults(PyObject *self, const shp_field *fields);
/* Rounded (or not) value for to_dict; new reference. */
PyObject *shp_field_export(PyObject *self, const shp_field *f, int rounded);
/* Number of entries in a NULL-name-terminated field table. */
Py_ssize_t shp_fields_count(const shp_field *fields);
/* Fill the fields from args/kwargs like a dataclass __init__. */
int shp_fields_init(PyObject *self, const shp_field *fields, PyObject *args,
                    PyObject *kwargs);
/* Fill `out` (room for count(fields) + count(extra) + 1) with one getset
 * per field (closure = the field), then the `extra` entries, then NULL. */
void shp_fields_fill_getset(const shp_field *fields, const PyGetSetDef *extra,
                            PyGetSetDef *out);
/* Dataclass-style repr over the fields per their `show`. */
PyObject *shp_fields_repr(PyObject *self, const shp_field *fields);
/* 1 equal, 0 not, -1 error: field-wise, NaN == NaN. */
int shp_fields_equal(PyObject *a, PyObject *b, const shp_field *fields);
/* dict of all fields (in table order), rounded per field when `rounded`. */
PyObject *shp_fields_dict(PyObject *self, const shp_field *fields, int rounded);
/* Visit / clear the PyObject* fields. */
int shp_fields_traverse(PyObject *self, const shp_field *fields, visitproc visit, void *arg);
void shp_fields_clear(PyObject *self, const shp_field *fields);
/* Round like Python's round(x, ndigits) into *out; 0 / -1. */
int shp_round_digits(double x, int ndigits, double *out);
/* The short name of a type ("BenchmarkStats"), for messages. */
const char *shp_type_short_name(PyTypeObject *tp);
/* fielddoc.c.  Put into the spec's Py_tp_doc slot the docstring of a type whose __init__
 * is shp_fields_init over `fields`, built in buf[size] (static storage; the
 * type copies it): the text signature "Short(a, b=0.0, *, c=None, <extra_sig>)"
 * that inspect.signature reads (CPython 3.10+), then `intro`, a numpydoc
 * Parameters section naming the fields by kind, `extra_params` (entries for
 * keywords __init__ takes beside the table; or NULL), a Notes section pointing
 * at the attributes, and `outro` (or NULL).  When buf is too small the slot keeps the
 * spec's own doc (no signature: tests/test_help_and_types.py fails).  Call
 * before the type is made; no Python calls, never fails. */
void shp_fields_spec_doc(PyType_Spec *spec, const shp_field *fields, const char *extra_sig,
                         const char *intro, const char *extra_params, const char *outro,
                         char *buf, size_t size);

/* docstrings.c: help() of benchmark_callable, format_benchmark_table,
 * compare_benchmarks and BenchmarkStats' to_dict / to_json / from_dict, each
 * starting with its text signature ("name($module, ...)\n--\n\n"). */
extern const char shp_doc_benchmark_callable[];
extern const char shp_doc_format_benchmark_table[];
extern const char shp_doc_compare_benchmarks[];
extern const char shp_doc_stats_to_dict[];
extern const char shp_doc_stats_to_json[];
extern const char shp_doc_stats_from_dict[];
/* ... and of benchmark_load and format_load_table. */
extern const char shp_doc_benchmark_load[];
extern const char shp_doc_format_load_table[];

#endif /* SHP_CAPI_CAPI_H */
