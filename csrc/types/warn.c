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

#include <string.h>

typedef struct {
    const char *cls;     /* class name */
    const char *doc;
    const char *text;    /* fixed; {warmup} {iters} {repeat} name the entry's parameters */
} cause_def;

static const cause_def causes[SHP_N_CAUSES] = {
    [SHP_CAUSE_NOISY] = {"NoisyWarning",
        "The samples spread widely: the median is uncertain.",
        "the samples spread widely for this median (stats.iqr_ms, stats.cv), so it is "
        "uncertain and a verdict on it needs more runs. Remedy: more iterations (raise {iters}), "
        "threads pinned (taskset, torch.set_num_threads) or a quieter machine; for an A/B "
        "question, {compare}"},
    [SHP_CAUSE_MULTIMODAL] = {"MultimodalWarning",
        "The samples form two groups that one median does not describe.",
        "the samples form two groups that one median does not describe (warning.mode_low_ms, "
        ".mode_high_ms, .slow_share); common causes are page faults "
        "(stats.minor_faults_per_iter), preemption (stats.invol_ctx_switches_per_iter), a "
        "periodic collection or background job. Remedy: a longer warm-up (raise {warmup}), and "
        "{repeat} to see whether it persists"},
    [SHP_CAUSE_DRIFTING] = {"DriftingWarning",
        "The latency moved from the start to the end of the run.",
        "the latency moved from the start to the end of the run (stats.drift): a warm-up "
        "too short, a thermal or frequency change, a growing cache or heap. Remedy: a longer "
        "warm-up (raise {warmup}), or {repeat}"},
    [SHP_CAUSE_BUSY] = {"BusyMachineWarning",
        "Other processes used much of the CPUs when the run started.",
        "other processes used much of the CPUs when the run started (warning.load_average, "
        ".others_cpu_share; stats.machine_busy); figures and verdicts may not hold. Said "
        "once per process while the machine stays busy. Remedy: stop the other jobs or "
        "isolate CPUs (taskset), and compare with {compare}, which cancels what "
        "the neighbours do"},
    [SHP_CAUSE_LAUNCH_BOUND] = {"LaunchBoundWarning",
        "The host's launch path, not the device, set the time.",
        "the call itself took most of the wall time and the GPU had little left when it "
        "returned (stats.host_share), so the figure is the host's launch path (Python, "
        "framework, driver), not the kernels. Remedy: batch more work per call or capture a "
        "CUDA graph (a callable that synchronises inside reads the same way)"},
    [SHP_CAUSE_OVERHEAD] = {"OverheadWarning",
        "The median is near the harness's own floor.",
        "the median is under 100 times the harness's own floor (stats.overhead_ms), so the "
        "figure is mostly measurement cost. Remedy: time a larger workload (a loop of calls) "
        "and divide"},
    [SHP_CAUSE_PAGE_FAULTS] = {"PageFaultWarning",
        "Every call pays fresh pages from the kernel.",
        "every call pays fresh zero-filled pages from the kernel "
        "(stats.minor_faults_per_iter), usually because malloc returns the call's large "
        "temporaries to the system (glibc's mmap threshold); the figure then depends on "
        "what the process freed earlier more than on the code. Remedy: reuse buffers (out=), "
        "or run both sides of a comparison with MALLOC_MMAP_THRESHOLD_=33554432 "
        "MALLOC_TRIM_THRESHOLD_=134217728 (docs/methodology.md, Allocator state)"},
    [SHP_CAUSE_WARMUP] = {"WarmupWarning",
        "The first timed calls were still getting faster.",
        "the first timed calls were still getting faster (warning.head_ms, .steady_ms); the "
        "latency settled only after stats.settle_calls calls. Remedy: set {warmup} to at "
        "least stats.settle_calls"},
    [SHP_CAUSE_COARSE_TIMER] = {"CoarseTimerWarning",
        "The clock is coarse for this latency.",
        "the clock's resolution (stats.env['timer_resolution_ns']) is coarse for this "
        "median: each sample is quantised. Remedy: time a larger workload and divide"},
    [SHP_CAUSE_GPU_CLOCK] = {"GPUClockWarning",
        "The GPU's clock moved during the run.",
        "the GPU's SM clock moved by more than 10% during the run (warning.clock_min_mhz, "
        ".clock_max_mhz; stats.gpu_telemetry): times taken at different clocks do not "
        "compare. Remedy: lock the clocks, or a longer warm-up (raise {warmup})"},
    [SHP_CAUSE_THROTTLED] = {"ThrottledWarning",
        "The GPU was throttled during the run.",
        "the GPU was throttled during the run (warning.reasons; stats.gpu_telemetry): its "
        "clock was held down, so the times are slower than the device can be. Remedy: cool "
        "the device or lower its load, and run again"},
    [SHP_CAUSE_SHARED_GPU] = {"SharedGPUWarning",
        "Other processes held the GPU.",
        "other processes held this GPU (warning.other_processes, .other_processes_mb): they "
        "share its compute, and vram_delta_mb (device-wide) counts their memory too. Remedy: "
        "run alone on the device"},
    [SHP_CAUSE_NO_SYNC] = {"NoDeviceSyncWarning",
        "No device sync was applied for an accelerator label.",
        "the device label names an accelerator this harness cannot synchronise (it syncs "
        "CPU, CUDA[:n] or a CUDA provider, and MPS), so work still queued when the call "
        "returns is not timed (warning.device). Remedy: sync_fn= (e.g. torch.xpu.synchronize), "
        "or device='cuda' for an NVIDIA GPU"},
    [SHP_CAUSE_NO_VRAM] = {"VRAMNotTrackedWarning",
        "Device memory could not be tracked.",
        "device memory is not tracked, vram_delta_mb stays 0.0 (warning.reason says why). "
        "Remedy: track_vram=False when that is expected"},
    [SHP_CAUSE_NO_GPU_TIME] = {"GPUTimeWarning",
        "GPU time by CUDA events could not be measured.",
        "GPU time is not measured, gpu_median_ms stays None (warning.reason says why)"},
    [SHP_CAUSE_NO_COUNTERS] = {"CountersWarning",
        "A counter asked for with counters= is not available here.",
        "the counters asked for are not available here, so stats.instructions_per_call / "
        ".cycles_per_call stay None (warning.reason says why; nothing is estimated in "
        "their place). Remedy: a machine whose kernel exposes the CPU's counters (bare "
        "metal, or a VM with a virtual PMU), or instruction counts under callgrind "
        "(spatialhub-bench --instructions, pytest --benchmark-instructions)"},
    [SHP_CAUSE_OVERLOADED] = {"OverloadedWarning",
        "Requests arrived faster than they were served: the backlog grew.",
        "the backlog grew all run (stats.backlog_growth_qps). Remedy: lower {qps} or "
        "raise {workers}"},
};

/* The words of a remedy: what the user can change in the interface they
 * called (its parameters, the CLI's flags, the plugin's options).  Each caller
 * passes its own down as data (the context variable _native._remedy_words, a
 * tuple of six str, set by the package's remedy_words()); a call made
 * directly gets benchmark_callable's. */
typedef struct {
    const char *warmup, *iters, *repeat, *compare, *qps, *workers;
} entry_names;

#define N_WORDS 6
static const entry_names for_callable = {
    "num_warmup", "num_iters", "repetitions in fresh processes (benchmark_repeated)",
    "compare_callables", "qps", "workers"};

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
    out->qps = w[4];
    out->workers = w[5];
    *hold = v;
}

/* text with {warmup} {iters} {repeat} {compare} {qps} {workers} replaced.
 * New str. */
static PyObject *
fill(const char *text, const entry_names *names)
{
    PyObject *s = PyUnicode_FromString(text);
    const char *keys[N_WORDS] = {"{warmup}", "{iters}", "{repeat}", "{compare}", "{qps}",
                                 "{workers}"};
    const char *vals[N_WORDS] = {names->warmup, names->iters, names->repeat, names->compare,
                                 names->qps, names->workers};
    for (int i = 0; s != NULL && i < N_WORDS; i++) {
        PyObject *k = PyUnicode_FromString(keys[i]), *v = PyUnicode_FromString(vals[i]);
        PyObject *r = k && v ? PyUnicode_Replace(s, k, v, -1) : NULL;
        Py_XDECREF(k);
        Py_XDECREF(v);
        Py_SETREF(s, r);
    }
    return s;
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
    const entry_names *names = &words;
    PyObject *head = name != NULL ? PyUnicode_FromFormat("benchmark %R:", name)
                                  : PyUnicode_FromString("benchmark:");
    PyObject *lines = PyList_New(0), *cls = NULL, *w = NULL, *msg = NULL, *labels = NULL;
    int rc = -1;
    if (head == NULL || lines == NULL || PyList_Append(lines, head) < 0)
        goto done;
    labels = PyList_New(0);
    for (int c = 0; labels != NULL && c < SHP_N_CAUSES; c++) {
        if (!(d->causes & (1u << c)))
            continue;
        PyObject *label = PyUnicode_FromString(shp_cause_label((shp_cause)c));
        PyObject *body = label ? fill(causes[c].text, names) : NULL;
        PyObject *line = body ? PyUnicode_FromFormat("  %U: %U.", label, body) : NULL;
        int bad = line == NULL || PyList_Append(lines, line) < 0 || PyList_Append(labels, label) < 0;
        Py_XDECREF(line);
        Py_XDECREF(body);
        Py_XDECREF(label);
        if (bad)
            goto done;
    }
    if (labels == NULL)
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
shp_warning_texts(PyObject *module, PyObject *unused)
{
    (void)unused;
    shp_state *st = PyModule_GetState(module);
    entry_names names;
    PyObject *hold;
    words_in_effect(st, &names, &hold);
    PyObject *d = PyDict_New();
    for (int c = 0; d != NULL && c < SHP_N_CAUSES; c++) {
        PyObject *text = fill(causes[c].text, &names);
        if (text == NULL || shp_dict_set(d, causes[c].cls, text) < 0)
            Py_CLEAR(d);
        Py_XDECREF(text);
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
PyObject *
shp_warning_class(PyObject *module, PyObject *labels)
{
    if (!PyTuple_Check(labels)) {
        shp_arg_type_error("_warning_class()", "causes", "a tuple of cause labels", labels);
        return NULL;
    }
    unsigned mask = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(labels); i++) {
        /* borrowed from the caller's tuple, which holds it for the call; the
         * comparisons run no Python code */
        PyObject *label = PyTuple_GET_ITEM(labels, i);
        if (!PyUnicode_Check(label)) {
            shp_arg_type_error("_warning_class()", "each cause", "a str", label);
            return NULL;
        }
        int c = 0;
        while (c < SHP_N_CAUSES &&
               PyUnicode_CompareWithASCIIString(label, shp_cause_label((shp_cause)c)) != 0)
            c++;
        if (c == SHP_N_CAUSES) {
            shp_arg_value_error("_warning_class()", "each cause", "a cause label "
                                "(as in a BenchmarkWarning's .causes)", label);
            return NULL;
        }
        mask |= 1u << c;
    }
    if (mask == 0) {
        PyErr_SetString(PyExc_ValueError, "_warning_class(): causes must name at least one cause");
        return NULL;
    }
    return class_for(PyModule_GetState(module), mask);
}
