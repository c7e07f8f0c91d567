/*
 * warn.c -- the one BenchmarkWarning of a benchmark call.
 *
 * The policy (docs/statistics.md, "Warnings"): a call collects what it
 * diagnosed as it runs (a shp_diag: causes and the numbers behind them) and
 * says it at most once, at the end: one warning whose text is fixed per
 * cause -- the numbers go on the warning's attributes and on the result, so
 * the warnings registry stays bounded however many calls a loop makes --
 * whose class is the cause's subclass of BenchmarkWarning (a combination of
 * them when there are several, so filtering by any one class still works),
 * and whose location is the user's own line: the frames of this package
 * between the user and the C call are skipped.  Each remedy names what the
 * user can change in the interface they called: the caller passes those
 * words down (words_in_effect); no name on the stack is read.
 * Conditions of the machine rather than of the benchmark (a busy machine)
 * are said once per process until they clear; the repeats are counted.
 *
 * Layer 4: module state and the C-API only.
 */
#include "types/types.h"
#if PY_VERSION_HEX < 0x030B0000
#include <frameobject.h>   /* PyFrame_GetBack (3.9+): Python.h includes it from 3.11 */
#endif

#include <limits.h>
#include <math.h>
#include <string.h>

typedef struct {
    const char *cls;     /* class name */
    const char *doc;
} cause_def;

static const cause_def causes[SHP_N_CAUSES] = {
    [SHP_CAUSE_NOISY] = {"NoisyWarning",
        "The samples spread widely: the median is uncertain."},
    [SHP_CAUSE_MULTIMODAL] = {"MultimodalWarning",
        "The samples form two groups that one median does not describe."},
    [SHP_CAUSE_DRIFTING] = {"DriftingWarning",
        "The latency moved from the start to the end of the run."},
    [SHP_CAUSE_BUSY] = {"BusyMachineWarning",
        "Other processes used much of the CPUs when the run started."},
    [SHP_CAUSE_LAUNCH_BOUND] = {"LaunchBoundWarning",
        "The host's launch path, not the device, set the time."},
    [SHP_CAUSE_OVERHEAD] = {"OverheadWarning",
        "The median is near the harness's own floor."},
    [SHP_CAUSE_PAGE_FAULTS] = {"PageFaultWarning",
        "Every call pays fresh pages from the kernel."},
    [SHP_CAUSE_WARMUP] = {"WarmupWarning",
        "The first timed calls were still getting faster."},
    [SHP_CAUSE_COARSE_TIMER] = {"CoarseTimerWarning",
        "The clock is coarse for this latency."},
    [SHP_CAUSE_GPU_CLOCK] = {"GPUClockWarning",
        "The GPU's clock moved during the run."},
    [SHP_CAUSE_THROTTLED] = {"ThrottledWarning",
        "The GPU was throttled during the run."},
    [SHP_CAUSE_SHARED_GPU] = {"SharedGPUWarning",
        "Other processes held the GPU."},
    [SHP_CAUSE_NO_SYNC] = {"NoDeviceSyncWarning",
        "No device sync was applied for an accelerator label."},
    [SHP_CAUSE_NO_VRAM] = {"VRAMNotTrackedWarning",
        "Device memory could not be tracked."},
    [SHP_CAUSE_NO_GPU_TIME] = {"GPUTimeWarning",
        "GPU time by CUDA events could not be measured."},
    [SHP_CAUSE_NO_COUNTERS] = {"CountersWarning",
        "A counter asked for with counters= is not available here."},
    [SHP_CAUSE_OVERLOADED] = {"OverloadedWarning",
        "Requests arrived faster than they were served: the backlog grew."},
    [SHP_CAUSE_NO_REQUESTS] = {"NoRequestsWarning",
        "No request arrived in the window: the rate times the duration is under one."},
};

/* Where every cause is explained at length (a heading of docs/statistics.md). */
#define DOCS "statistics.md#the-causes"
/* The most cause lines a warning shows; more are named on one last line. */
#define MAX_LINES 4
/* The labels the last line names, in characters at most (it stays ~100 long). */
#define REST_CHARS 70

/* The words of a remedy: what the user can change in the interface they
 * called (its parameters, the CLI's flags, the plugin's options).  Each caller
 * passes its own down as data (the context variable _native._remedy_words, a
 * tuple of seven str, set by the package's remedy_words()); a call made
 * directly gets benchmark_callable's.  Each is a noun phrase: the knob that
 * lengthens the warm-up, the one that takes more timed calls, how to repeat
 * in fresh processes, an A/B comparison the neighbours do not move, how to
 * count instructions under callgrind, and a run under load's rate and its
 * serving threads. */
typedef struct {
    const char *warmup, *iters, *repeat, *compare, *counted, *qps, *workers;
} entry_names;

#define N_WORDS 7
static const entry_names for_callable = {
    "num_warmup", "num_iters", "benchmark_repeated", "compare_callables",
    "spatialhub-bench --instructions", "qps", "workers"};

/* ---- collecting ---------------------------------------------------------- */

void
shp_diag_cause(shp_diag *d, shp_cause c)
{
    d->causes |= 1u << c;
}

int
shp_diag_object(shp_diag *d, const char *key, PyObject *value)
{
    if (value == NULL)
        return -1;
    if (d->attrs == NULL && (d->attrs = PyDict_New()) == NULL) {
        Py_DECREF(value);
        return -1;
    }
    int rc = shp_dict_set(d->attrs, key, value);
    Py_DECREF(value);
    return rc;
}

int
shp_diag_number(shp_diag *d, const char *key, double v)
{
    return shp_diag_object(d, key, PyFloat_FromDouble(v));
}

void
shp_diag_clear(shp_diag *d)
{
    d->causes = 0;
    Py_CLEAR(d->attrs);
}

/* ---- the classes ----------------------------------------------------------- */

PyObject *
shp_exception_class(const char *qualname, const char *doc, PyObject *base)
{
    const char *dot = strrchr(qualname, '.');
    PyObject *full = PyUnicode_FromFormat("%s(*args)\n--\n\n%s", dot ? dot + 1 : qualname, doc);
    if (full == NULL)
        return NULL;
    const char *text = PyUnicode_AsUTF8(full);
    PyObject *cls = text != NULL ? PyErr_NewExceptionWithDoc(qualname, text, base, NULL) : NULL;
    Py_DECREF(full);
    if (cls == NULL)
        return NULL;
    /* the type keeps the signature in tp_doc; __doc__ is the text alone, as a
     * type made from a PyType_Spec has it */
    PyObject *plain = PyUnicode_FromString(doc);
    if (plain == NULL || PyObject_SetAttrString(cls, "__doc__", plain) < 0) {
        Py_XDECREF(plain);
        Py_DECREF(cls);
        return NULL;
    }
    Py_DECREF(plain);
    return cls;
}

int
shp_warn_init(PyObject *m, shp_state *st)
{
    for (int c = 0; c < SHP_N_CAUSES; c++) {
        char qual[96], doc[512];
        PyOS_snprintf(qual, sizeof qual, "spatialhub.utils.profiling.%s", causes[c].cls);
        PyOS_snprintf(doc, sizeof doc,
                      "%s\n\nA BenchmarkWarning subclass: filter by it.  What the warning "
                      "carries:\nBenchmarkWarning.\n\nParameters\n----------\n*args\n"
                      "    The message, as for any Warning.", causes[c].doc);
        st->cause_class[c] = shp_exception_class(qual, doc, st->warning);
        if (st->cause_class[c] == NULL)
            return -1;
        Py_INCREF(st->cause_class[c]);   /* PyModule_AddObjectRef is 3.10+ */
        if (PyModule_AddObject(m, causes[c].cls, st->cause_class[c]) < 0) {
            Py_DECREF(st->cause_class[c]);
            return -1;
        }
    }
    st->combined_classes = PyDict_New();
    if (st->combined_classes == NULL)
        return -1;
    st->words = PyContextVar_New("spatialhub.utils.profiling.remedy_words", NULL);
    if (st->words == NULL)
        return -1;
    Py_INCREF(st->words);   /* PyModule_AddObjectRef is 3.10+ */
    if (PyModule_AddObject(m, "_remedy_words", st->words) < 0) {
        Py_DECREF(st->words);
        return -1;
    }
    /* where this package's own frames are, to skip them (__file__ is set
     * before an extension's exec slot runs; without it nothing is skipped) */
    PyObject *file = PyModule_GetFilenameObject(m);
    if (file == NULL) {
        PyErr_Clear();
        return 0;
    }
    PyObject *os_path = PyImport_ImportModule("os.path");
    PyObject *dir = os_path ? PyObject_CallMethod(os_path, "dirname", "O", file) : NULL;
    PyObject *sep = os_path ? PyObject_GetAttrString(os_path, "sep") : NULL;
    if (dir != NULL && sep != NULL)
        st->package_dir = PyUnicode_Concat(dir, sep);
    Py_XDECREF(sep);
    Py_XDECREF(dir);
    Py_XDECREF(os_path);
    Py_DECREF(file);
    return st->package_dir != NULL ? 0 : -1;
}

/* The class of a warning with these causes: the cause's own, or a subclass
 * of all of them named BenchmarkWarning (cached per combination).  New ref. */
static PyObject *
class_for(shp_state *st, unsigned mask)
{
    int only = -1, n = 0;
    for (int c = 0; c < SHP_N_CAUSES; c++)
        if (mask & (1u << c)) {
            only = c;
            n++;
        }
    if (n == 1)
        return Py_NewRef(st->cause_class[only]);
    PyObject *key = PyLong_FromUnsignedLong(mask), *cls = NULL;
    if (key == NULL)
        return NULL;
    cls = PyDict_GetItemWithError(st->combined_classes, key);   /* int keys: no user code */
    if (cls != NULL || PyErr_Occurred()) {
        Py_XINCREF(cls);
        Py_DECREF(key);
        return cls;
    }
    PyObject *bases = PyTuple_New(n), *ns = NULL;
    for (int c = 0, i = 0; bases != NULL && c < SHP_N_CAUSES; c++)
        if (mask & (1u << c))
            PyTuple_SET_ITEM(bases, i++, Py_NewRef(st->cause_class[c]));
    ns = bases ? Py_BuildValue("{s:s,s:s}", "__module__", "spatialhub.utils.profiling",
                               "__doc__", "A benchmark with several causes to doubt it; "
                               "an instance of each cause's class.") : NULL;
    if (ns != NULL)
        cls = PyObject_CallFunction((PyObject *)&PyType_Type, "sOO", "BenchmarkWarning",
                                    bases, ns);
    if (cls != NULL && PyDict_SetItem(st->combined_classes, key, cls) < 0)
        Py_CLEAR(cls);
    Py_XDECREF(ns);
    Py_XDECREF(bases);
    Py_DECREF(key);
    return cls;
}

/* ---- where the user is --------------------------------------------------- */

/* 1 if the code object's file lies in this package's directory. */
static int
in_package(shp_state *st, PyObject *code)
{
    if (st->package_dir == NULL)
        return 0;
    PyObject *file = PyObject_GetAttrString(code, "co_filename");
    int ours = file != NULL && PyUnicode_Check(file) &&
               PyUnicode_Tailmatch(file, st->package_dir, 0, PY_SSIZE_T_MAX, -1) == 1;
    Py_XDECREF(file);
    PyErr_Clear();
    return ours;
}

/* The stacklevel of the user's innermost frame (1: the caller of the C
 * function), skipping this package's frames.  Never fails. */
static int
user_frame(shp_state *st)
{
    PyFrameObject *f = PyEval_GetFrame();   /* borrowed */
    Py_XINCREF(f);
    int level = 1;
    while (f != NULL) {
        PyObject *code = (PyObject *)PyFrame_GetCode(f);
        int ours = in_package(st, code);
        Py_DECREF(code);
        if (!ours)
            break;
        PyFrameObject *back = PyFrame_GetBack(f);   /* new reference, or NULL */
        Py_DECREF(f);
        f = back;
        level++;
    }
    Py_XDECREF(f);
    return level;
}

/* The words in effect: the context's (a tuple of N_WORDS str), else
 * benchmark_callable's.  *hold keeps the tuple alive while the pointers are
 * used (Py_XDECREF it after).  Never fails: a malformed value reads as unset. */
static void
words_in_effect(shp_state *st, entry_names *out, PyObject **hold)
{
    *out = for_callable;
    *hold = NULL;
    PyObject *v = NULL;
    if (st->words == NULL || PyContextVar_Get(st->words, NULL, &v) < 0) {
        PyErr_Clear();
        return;
    }
    if (v == NULL)
        return;
    const char *w[N_WORDS];
    int ok = PyTuple_Check(v) && PyTuple_GET_SIZE(v) == N_WORDS;
    for (Py_ssize_t i = 0; ok && i < N_WORDS; i++) {
        PyObject *item = PyTuple_GET_ITEM(v, i);
        w[i] = PyUnicode_Check(item) ? PyUnicode_AsUTF8(item) : NULL;
        ok = w[i] != NULL;
    }
    PyErr_Clear();
    if (!ok) {
        Py_DECREF(v);
        return;
    }
    out->warmup = w[0];
    out->iters = w[1];
    out->repeat = w[2];
    out->compare = w[3];
    out->counted = w[4];
    out->qps = w[5];
    out->workers = w[6];
    *hold = v;
}

const char *
shp_remedy_word(shp_state *st, shp_word which, PyObject **hold)
{
    entry_names w;
    words_in_effect(st, &w, hold);
    switch (which) {
    case SHP_WORD_WARMUP: return w.warmup;
    case SHP_WORD_ITERS: return w.iters;
    case SHP_WORD_REPEAT: return w.repeat;
    case SHP_WORD_COMPARE: return w.compare;
    default: return w.counted;
    }
}

/* ---- the lines ---------------------------------------------------------------- */

/* A number of the warning said coarsely, so that the texts stay few (the
 * warnings registry keys on them) and read at a glance: a share or ratio as
 * "40%" (to 10%, under 1), "2.5x" (to 0.5, under 10), "30x" (to 10, under
 * 100), "over 100x"; "?" never: an unknown number leaves its words out. */
static void
coarse(double x, char *buf, size_t n)
{
    if (!(x >= 0.0))
        PyOS_snprintf(buf, n, "some");
    else if (x < 0.95)
        PyOS_snprintf(buf, n, "%d%%", x < 0.05 ? 5 : (int)(x * 10.0 + 0.5) * 10);
    else if (x < 9.75)
        PyOS_snprintf(buf, n, "%.1fx", floor(x * 2.0 + 0.5) / 2.0);
    else if (x < 99.5)
        PyOS_snprintf(buf, n, "%dx", (int)(x / 10.0 + 0.5) * 10);
    else
        PyOS_snprintf(buf, n, "over 100x");
}

/* A count to two significant digits ("7", "19", "140", "1,400"). */
static void
coarse_count(double x, char *buf, size_t n)
{
    if (!(x >= 0.0) || x > 1e15) {
        PyOS_snprintf(buf, n, "many");
        return;
    }
    double scale = 1.0;
    while (x / scale >= 100.0)
        scale *= 10.0;
    long long v = (long long)(floor(x / scale + 0.5) * scale);
    char digits[32], out[48];
    int len = PyOS_snprintf(digits, sizeof digits, "%lld", v), k = 0;
    for (int i = 0; i < len && k < (int)sizeof out - 2; i++) {   /* 1234567 -> 1,234,567 */
        if (i > 0 && (len - i) % 3 == 0)
            out[k++] = ',';
        out[k++] = digits[i];
    }
    out[k] = '\0';
    PyOS_snprintf(buf, n, "%s", out);
}

/* attrs[key] as a double (NaN when absent or not a number).  The dict is
 * ours, with str keys and float / int / None values: no user code runs. */
static double
number(PyObject *attrs, const char *key)
{
    PyObject *v = attrs != NULL ? PyDict_GetItemString(attrs, key) : NULL;   /* borrowed */
    if (v == NULL || !(PyFloat_Check(v) || PyLong_Check(v)))
        return NAN;
    double x = PyFloat_AsDouble(v);
    if (x == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();   /* an int beyond a double: no number to say */
        return NAN;
    }
    return x;
}

/* torch's intra-op threads when torch is imported (0 otherwise): the
 * evidence that a spread may come from threads competing.  Never fails. */
static int
torch_threads(void)
{
    PyObject *mods = PySys_GetObject("modules");   /* borrowed */
    PyObject *torch = mods != NULL && PyDict_Check(mods)
                          ? PyDict_GetItemString(mods, "torch") : NULL;   /* str key */
    if (torch == NULL || torch == Py_None)
        return 0;
    Py_INCREF(torch);
    PyObject *n = PyObject_CallMethod(torch, "get_num_threads", NULL);
    Py_DECREF(torch);
    long k = n != NULL && PyLong_Check(n) ? PyLong_AsLong(n) : 0;
    Py_XDECREF(n);
    if (shp_clear_unless_fatal() < 0)
        PyErr_Clear();   /* a Ctrl-C here is answered at the next check */
    return k > 0 && k < INT_MAX ? (int)k : 0;
}

/* A share (0 to 1) said coarsely: "40%" (to 10%), "nearly all" from 95% on --
 * where coarse() would say "1.0x" -- and "some" when unknown. */
static void
coarse_share(double x, char *buf, size_t n)
{
    if (x >= 0.95)
        PyOS_snprintf(buf, n, "nearly all");
    else
        coarse(x, buf, n);
}

/* The one line of cause c, without its label: what was seen, coarsely, and
 * the remedy in the words in effect.  Into buf (always terminated). */
static void
cause_line(shp_cause c, PyObject *a, const entry_names *w, int threads, char *buf, size_t n)
{
    char x[32], y[32];
    switch (c) {
    case SHP_CAUSE_NOISY:
        coarse(number(a, "iqr_share"), x, sizeof x);
        if (threads > 1)
            PyOS_snprintf(buf, n, "IQR %s of the median -- pin threads "
                          "(torch.set_num_threads(1)) or raise %s", x, w->iters);
        else
            PyOS_snprintf(buf, n, "IQR %s of the median -- raise %s, pin threads, or a quieter "
                          "machine", x, w->iters);
        break;
    case SHP_CAUSE_MULTIMODAL: {
        double lo = number(a, "mode_low_ms"), hi = number(a, "mode_high_ms");
        /* modes under 2x apart as a percentage ("modes 20% apart"): "1.0x apart" for
         * 1.1-1.24 would read as no difference at all */
        double r = lo > 0 ? hi / lo : NAN;
        coarse(r < 1.95 ? r - 1.0 : r, x, sizeof x);
        coarse_share(number(a, "slow_share"), y, sizeof y);
        if (threads > 1)
            PyOS_snprintf(buf, n, "modes %s apart, %s slow -- %d torch threads: "
                          "torch.set_num_threads(1)", x, y, threads);
        else
            PyOS_snprintf(buf, n, "modes %s apart, %s slow -- raise %s, then %s", x, y,
                          w->warmup, w->repeat);
        break;
    }
    case SHP_CAUSE_DRIFTING:
        coarse(fabs(number(a, "drift")), x, sizeof x);
        PyOS_snprintf(buf, n, "latency moved %s over the run -- raise %s, or %s", x,
                      w->warmup, w->repeat);
        break;
    case SHP_CAUSE_BUSY: {
        double share = number(a, "others_cpu_share");
        if (number(a, "under_load") > 0.0) {   /* requests share the CPUs: nothing cancels them */
            coarse_share(share, x, sizeof x);
            PyOS_snprintf(buf, n, "others used %s of the CPUs -- stop them: the requests "
                          "share the CPUs with them", share >= 0.0 ? x : "much");
        }
        else if (share >= 0.0) {
            coarse_share(share, x, sizeof x);
            PyOS_snprintf(buf, n, "others used %s of the CPUs -- stop them, or use %s", x,
                          w->compare);
        }
        else
            PyOS_snprintf(buf, n, "the load average is high -- stop other jobs, or use %s",
                          w->compare);
        break;
    }
    case SHP_CAUSE_LAUNCH_BOUND:
        coarse_share(number(a, "host_share"), x, sizeof x);
        PyOS_snprintf(buf, n, "the host's launch took %s of the time -- more work per call, "
                      "or a CUDA graph", x);
        break;
    case SHP_CAUSE_OVERHEAD:
        PyOS_snprintf(buf, n, "median under %.0fx the harness's floor -- time a larger "
                      "workload and divide", SHP_OVERHEAD_FACTOR);
        break;
    case SHP_CAUSE_PAGE_FAULTS:
        coarse_count(number(a, "faults_per_call"), x, sizeof x);
        PyOS_snprintf(buf, n, "%s a call -- reuse buffers (out=), or raise "
                      "MALLOC_MMAP_THRESHOLD_", x);
        break;
    case SHP_CAUSE_WARMUP: {
        double head = number(a, "head_ms"), steady = number(a, "steady_ms");
        coarse(steady > 0 ? head / steady : NAN, x, sizeof x);
        coarse_count(number(a, "settle_calls"), y, sizeof y);
        PyOS_snprintf(buf, n, "first calls %s the rest -- set %s to %s or more", x, w->warmup,
                      y);
        break;
    }
    case SHP_CAUSE_COARSE_TIMER:
        PyOS_snprintf(buf, n, "the median is under %.0f clock ticks -- time a larger workload "
                      "and divide", SHP_COARSE_TIMER_FACTOR);
        break;
    case SHP_CAUSE_GPU_CLOCK: {
        double lo = number(a, "clock_min_mhz"), hi = number(a, "clock_max_mhz");
        coarse(lo > 0 ? hi / lo - 1.0 : NAN, x, sizeof x);
        PyOS_snprintf(buf, n, "the SM clock moved %s -- lock the clocks, or raise %s", x,
                      w->warmup);
        break;
    }
    case SHP_CAUSE_THROTTLED:
        PyOS_snprintf(buf, n, "its clock was held down (warning.reasons) -- cool it or lower "
                      "its load");
        break;
    case SHP_CAUSE_SHARED_GPU:
        coarse_count(number(a, "other_processes"), x, sizeof x);
        PyOS_snprintf(buf, n, "%s other processes held the GPU -- run alone on it", x);
        break;
    case SHP_CAUSE_NO_SYNC:
        PyOS_snprintf(buf, n, "work queued on this device is not timed -- pass sync_fn=, or "
                      "device='cuda'");
        break;
    case SHP_CAUSE_NO_VRAM:
        PyOS_snprintf(buf, n, "vram_delta_mb stays 0.0 (warning.reason) -- track_vram=False "
                      "if expected");
        break;
    case SHP_CAUSE_NO_GPU_TIME:
        PyOS_snprintf(buf, n, "gpu_median_ms stays None (warning.reason says why)");
        break;
    case SHP_CAUSE_NO_COUNTERS:
        PyOS_snprintf(buf, n, "none here (warning.reason) -- count with %s", w->counted);
        break;
    case SHP_CAUSE_OVERLOADED: {
        double growth = number(a, "backlog_growth_qps");
        if (growth >= 0.0) {
            coarse_count(growth, x, sizeof x);
            PyOS_snprintf(buf, n, "the backlog grew %s requests/s -- lower %s or raise %s", x,
                          w->qps, w->workers);
        }
        else
            PyOS_snprintf(buf, n, "the backlog grew through the run -- lower %s or raise %s",
                          w->qps, w->workers);
        break;
    }
    case SHP_CAUSE_NO_REQUESTS:
        PyOS_snprintf(buf, n, "rate x duration is under one request, nothing measured -- "
                      "raise %s or the duration", w->qps);
        break;
    default:
        buf[0] = '\0';
    }
}

/* Append to `lines` one line per cause in `mask` ("  label: what -- remedy"),
 * at most MAX_LINES of them (the rest named on the last), and put the causes'
 * labels in *labels (a new list).  0 / -1. */
static int
compose(unsigned mask, PyObject *attrs, const entry_names *w, PyObject *lines,
        PyObject **labels)
{
    int count = 0, shown = 0, threads = 0;
    for (int c = 0; c < SHP_N_CAUSES; c++)
        count += (mask >> c) & 1u;
    if (mask & ((1u << SHP_CAUSE_NOISY) | (1u << SHP_CAUSE_MULTIMODAL)))
        threads = torch_threads();
    *labels = PyList_New(0);
    if (*labels == NULL)
        return -1;
    char rest[200] = "";
    for (int c = 0; c < SHP_N_CAUSES; c++) {
        if (!(mask & (1u << c)))
            continue;
        const char *label = shp_cause_label((shp_cause)c);
        PyObject *lab = PyUnicode_FromString(label);
        if (lab == NULL || PyList_Append(*labels, lab) < 0) {
            Py_XDECREF(lab);
            return -1;
        }
        Py_DECREF(lab);
        if (count > MAX_LINES && shown == MAX_LINES - 1) {   /* the last line names the rest */
            size_t len = strlen(rest);   /* as many as fit a line; "..." for the others */
            if (len + strlen(label) + 2 <= REST_CHARS)
                PyOS_snprintf(rest + len, sizeof rest - len, "%s%s", len ? ", " : "", label);
            else if (len > 0 && rest[len - 1] != '.')
                PyOS_snprintf(rest + len, sizeof rest - len, ", ...");
            continue;
        }
        char text[256];
        cause_line((shp_cause)c, attrs, w, threads, text, sizeof text);
        PyObject *line = PyUnicode_FromFormat("  %s: %s", label, text);
        if (line == NULL || PyList_Append(lines, line) < 0) {
            Py_XDECREF(line);
            return -1;
        }
        Py_DECREF(line);
        shown++;
    }
    if (rest[0] != '\0') {
        PyObject *line = PyUnicode_FromFormat("  and %d more: %s (stats.flags)",
                                              count - shown, rest);
        int bad = line == NULL || PyList_Append(lines, line) < 0;
        Py_XDECREF(line);
        if (bad)
            return -1;
    }
    return 0;
}

/* ---- saying it ------------------------------------------------------------- */

int
shp_diag_emit(shp_state *st, shp_diag *d, PyObject *name, PyObject *stats)
{
    /* a machine-level condition: once per process until it clears */
    if (d->causes & (1u << SHP_CAUSE_BUSY)) {
        if (st->busy_said) {
            d->causes &= ~(1u << SHP_CAUSE_BUSY);
            st->suppressed[SHP_CAUSE_BUSY]++;
        }
        st->busy_said = 1;
    }
    else if (d->busy_known) {
        st->busy_said = 0;   /* the machine was seen quiet: the next busy run is news */
    }
    if (d->causes == 0) {
        shp_diag_clear(d);
        return 0;
    }
    entry_names words;
    PyObject *hold_words = NULL;
    int level = user_frame(st);
    words_in_effect(st, &words, &hold_words);
    PyObject *head = name != NULL ? PyUnicode_FromFormat("benchmark %R (" DOCS "):", name)
                                  : PyUnicode_FromString("benchmark (" DOCS "):");
    PyObject *lines = PyList_New(0), *cls = NULL, *w = NULL, *msg = NULL, *labels = NULL;
    int rc = -1;
    if (head == NULL || lines == NULL || PyList_Append(lines, head) < 0)
        goto done;
    if (compose(d->causes, d->attrs, &words, lines, &labels) < 0)
        goto done;
    PyObject *nl = PyUnicode_FromString("\n");
    msg = nl ? PyUnicode_Join(nl, lines) : NULL;
    Py_XDECREF(nl);
    cls = msg ? class_for(st, d->causes) : NULL;
    w = cls ? PyObject_CallOneArg(cls, msg) : NULL;
    if (w == NULL)
        goto done;
    /* the attributes go into the instance's __dict__ under plain keys:
     * setattr would intern names that die with the warning (shp_dict_set
     * says why).  The class is ours: no descriptor stands in the way. */
    PyObject *causes_t = PyList_AsTuple(labels), *wd = NULL;
    if (causes_t != NULL)
        wd = PyObject_GenericGetDict(w, NULL);
    int bad = wd == NULL || shp_dict_set(wd, "causes", causes_t) < 0 ||
              shp_dict_set(wd, "benchmark", name != NULL ? name : Py_None) < 0 ||
              shp_dict_set(wd, "stats", stats != NULL ? stats : Py_None) < 0 ||
              (d->attrs != NULL && PyDict_Update(wd, d->attrs) < 0);
    Py_XDECREF(wd);
    Py_XDECREF(causes_t);
    if (bad)
        goto done;
    /* warnings.warn(w, stacklevel=level): the filters, the registry, and the
     * location of the user's frame, as for a warning raised in Python */
    PyObject *mod = PyImport_ImportModule("warnings");
    PyObject *warn = mod ? PyObject_GetAttrString(mod, "warn") : NULL;
    PyObject *args = warn ? PyTuple_Pack(1, w) : NULL;
    PyObject *kw = args ? Py_BuildValue("{s:i}", "stacklevel", level) : NULL;
    PyObject *r = kw ? PyObject_Call(warn, args, kw) : NULL;
    Py_XDECREF(kw);
    Py_XDECREF(args);
    Py_XDECREF(warn);
    Py_XDECREF(mod);
    if (r == NULL)
        goto done;
    Py_DECREF(r);
    rc = 0;
done:
    Py_XDECREF(hold_words);
    Py_XDECREF(head);
    Py_XDECREF(lines);
    Py_XDECREF(labels);
    Py_XDECREF(msg);
    Py_XDECREF(cls);
    Py_XDECREF(w);
    shp_diag_clear(d);
    return rc;
}

PyObject *
shp_warning_texts(PyObject *module, PyObject *attrs)
{
    shp_state *st = PyModule_GetState(module);
    if (attrs != Py_None && !PyDict_Check(attrs))
        return shp_arg_type_error("_warning_texts()", "attrs", "a dict or None", attrs), NULL;
    entry_names names;
    PyObject *hold;
    words_in_effect(st, &names, &hold);
    PyObject *d = PyDict_New();
    for (int c = 0; d != NULL && c < SHP_N_CAUSES; c++) {
        PyObject *lines = PyList_New(0), *labels = NULL;
        if (lines == NULL || compose(1u << c, attrs == Py_None ? NULL : attrs, &names, lines,
                                     &labels) < 0 ||
            shp_dict_set(d, causes[c].cls, PyList_GET_ITEM(lines, 0)) < 0)
            Py_CLEAR(d);
        Py_XDECREF(lines);
        Py_XDECREF(labels);
    }
    Py_XDECREF(hold);
    return d;
}

PyObject *
shp_suppressed_warnings(PyObject *module, PyObject *unused)
{
    (void)unused;
    shp_state *st = PyModule_GetState(module);
    PyObject *d = PyDict_New();
    for (int c = 0; d != NULL && c < SHP_N_CAUSES; c++) {
        if (st->suppressed[c] == 0)
            continue;
        PyObject *n = PyLong_FromSsize_t(st->suppressed[c]);
        if (n == NULL || shp_dict_set(d, shp_cause_label((shp_cause)c), n) < 0)
            Py_CLEAR(d);
        Py_XDECREF(n);
    }
    return d;
}

/* _warning_class(causes): the class shp_diag_emit gives a warning whose
 * .causes is this tuple of labels -- the cause's own class, or the cached
 * combination of several -- so that a warning relayed from a fresh process
 * (_launch.py) is an instance of the class an in-process run raises.  New
 * reference; TypeError for a non-tuple or a non-str label, ValueError for an
 * empty tuple or an unknown label. */
/* The mask of a tuple of cause labels (`fn` names the caller in messages):
 * 0, or -1 with TypeError / ValueError. */
static int
mask_of(PyObject *labels, const char *fn, unsigned *out)
{
    if (!PyTuple_Check(labels))
        return shp_arg_type_error(fn, "causes", "a tuple of cause labels", labels);
    unsigned mask = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(labels); i++) {
        /* borrowed from the caller's tuple, which holds it for the call; the
         * comparisons run no Python code */
        PyObject *label = PyTuple_GET_ITEM(labels, i);
        if (!PyUnicode_Check(label))
            return shp_arg_type_error(fn, "each cause", "a str", label);
        int c = 0;
        while (c < SHP_N_CAUSES &&
               PyUnicode_CompareWithASCIIString(label, shp_cause_label((shp_cause)c)) != 0)
            c++;
        if (c == SHP_N_CAUSES)
            return shp_arg_value_error(fn, "each cause", "a cause label (as in a "
                                       "BenchmarkWarning's .causes)", label);
        mask |= 1u << c;
    }
    if (mask == 0) {
        PyErr_Format(PyExc_ValueError, "%s: causes must name at least one cause", fn);
        return -1;
    }
    *out = mask;
    return 0;
}

PyObject *
shp_warning_class(PyObject *module, PyObject *labels)
{
    unsigned mask;
    if (mask_of(labels, "_warning_class()", &mask) < 0)
        return NULL;
    return class_for(PyModule_GetState(module), mask);
}

PyObject *
shp_warning_lines(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2)
        return PyErr_Format(PyExc_TypeError, "_warning_lines() takes 2 arguments (%zd given)",
                            nargs), NULL;
    unsigned mask;
    if (mask_of(args[0], "_warning_lines()", &mask) < 0)
        return NULL;
    if (args[1] != Py_None && !PyDict_Check(args[1]))
        return shp_arg_type_error("_warning_lines()", "attrs", "a dict or None", args[1]), NULL;
    entry_names names;
    PyObject *hold, *labels = NULL, *lines = PyList_New(0);
    words_in_effect(PyModule_GetState(module), &names, &hold);
    if (lines != NULL &&
        compose(mask, args[1] == Py_None ? NULL : args[1], &names, lines, &labels) < 0)
        Py_CLEAR(lines);
    Py_XDECREF(labels);
    Py_XDECREF(hold);
    return lines;
}
