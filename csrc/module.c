/*
 * module.c -- spatialhub.utils.profiling._native: init, methods, state.
 *
 * The top layer: wires every file's entry points into the method table and
 * the types into the module; the small module functions and test hooks
 * live here too.
 *
 * Multi-phase initialisation with all mutable state in the module state
 * (types, exceptions, the loaded CUDA table, cached figures), so the module
 * can be imported in sub-interpreters and re-imported after it is dropped.
 * The CUDA driver is not touched here: it is loaded at the first CUDA use.
 */
#define SHP_IMPORT_ARRAY
#include "module.h"

#include <numpy/arrayobject.h>

#include <math.h>

/* ---- small module functions --------------------------------------------- */

static PyObject *
shp_get_ram_mb(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    int64_t rss = shp_rss_bytes();
    if (rss < 0) {
        PyErr_SetString(PyExc_OSError, "the resident set size of this process cannot be read here");
        return NULL;
    }
    return PyFloat_FromDouble((double)rss / SHP_MIB);
}

static PyObject *
shp_noop(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    Py_RETURN_NONE;
}

static PyObject *
shp_clock_ns(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyLong_FromLongLong(shp_now_ns());
}

static PyObject *
shp_set_force_sampled(PyObject *module, PyObject *flag)
{
    (void)module;
    int t = PyObject_IsTrue(flag);
    if (t < 0)
        return NULL;
    int old = shp_force_sampled_rss;
    shp_force_sampled_rss = t;
    return PyBool_FromLong(old);
}

/* _rss_at_scope(now_ns): an enter's read at now_ns; _rss_at_scope(None): an exit's */
static PyObject *
shp_rss_at_scope_py(PyObject *module, PyObject *now)
{
    (void)module;
    long long now_ns = now == Py_None ? 0 : PyLong_AsLongLong(now);
    if (now_ns == -1 && PyErr_Occurred())
        return NULL;
    int64_t read_ns = 0;
    int64_t rss = now == Py_None ? shp_rss_at_exit(&read_ns)
                                 : shp_rss_at_enter((int64_t)now_ns, &read_ns);
    return Py_BuildValue("(LL)", (long long)rss, (long long)read_ns);
}

static PyObject *
shp_set_perfctr_software(PyObject *module, PyObject *flag)
{
    (void)module;
    int t = PyObject_IsTrue(flag);
    if (t < 0)
        return NULL;
    int old = shp_perfctr_software;
    shp_perfctr_software = t;
    return PyBool_FromLong(old);
}

static PyObject *
shp_callgrind_active(PyObject *module, PyObject *unused)
{
    (void)unused;
    shp_state *st = PyModule_GetState(module);
    return PyBool_FromLong(st->cg.on);
}

static PyObject *
shp_overhead_ms(PyObject *module, PyObject *unused)
{
    (void)unused;
    shp_state *st = PyModule_GetState(module);
    if (st->overhead_ns[0] < 0)
        Py_RETURN_NONE;
    return PyFloat_FromDouble(st->overhead_ns[0] / 1e6);
}

/* Test hook: summary and stability of an arbitrary sample sequence, as
 * BenchmarkStats; warn=True also issues the stability warning. */
static PyObject *
shp_stats_from_samples(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames)
{
    shp_state *st = PyModule_GetState(module);
    static const char *const names[] = {"samples_ms", "warn"};
    static const shp_argspec spec = {"_stats_from_samples", names, 2, 1, 1, 0};
    PyObject *v[2];
    int warn = 0;
    if (shp_args_parse(&spec, args, nargs, kwnames, v) < 0 ||
        (v[1] != NULL && shp_arg_flag(v[1], &warn) < 0))
        return NULL;
    PyObject *samples_ms = v[0];
    double *buf = NULL;
    Py_ssize_t n = 0;
    if (shp_samples_from_object(samples_ms, &buf, &n) < 0)
        return NULL;
    if (n < 1) {
        PyMem_Free(buf);
        PyErr_SetString(PyExc_ValueError, "_stats_from_samples needs at least one sample");
        return NULL;
    }
    shp_Stats *s = shp_stats_from_buffer(st, buf, n);
    if (s == NULL)
        return NULL;
    Py_XSETREF(s->name, PyUnicode_FromString("samples"));
    Py_XSETREF(s->device, PyUnicode_FromString("CPU"));
    if (s->name == NULL || s->device == NULL) {
        Py_DECREF(s);
        return NULL;
    }
    if (warn) {
        shp_diag d = {0, 0, NULL};
        if (shp_stats_diagnose_stability(s, &d) < 0 ||
            shp_diag_emit(st, &d, s->name, (PyObject *)s) < 0) {
            shp_diag_clear(&d);
            Py_DECREF(s);
            return NULL;
        }
    }
    return (PyObject *)s;
}

#define FASTKW(f) (PyCFunction)(void (*)(void))(f), METH_FASTCALL | METH_KEYWORDS

/* _malloc_mmap_threshold() / _malloc_raise_mmap_threshold(n): mallocstate.c
 * for runner.py (int, or None where unknown). */
static PyObject *
shp_malloc_threshold_py(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    int64_t t = shp_malloc_mmap_threshold();
    if (t < 0)
        Py_RETURN_NONE;
    return PyLong_FromLongLong((long long)t);
}

static PyObject *
shp_malloc_raise_py(PyObject *module, PyObject *arg)
{
    (void)module;
    PyObject *idx = shp_arg_index(arg, "_malloc_raise_mmap_threshold()", "bytes");
    if (idx == NULL)
        return NULL;
    long long n = PyLong_AsLongLong(idx);
    Py_DECREF(idx);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    int64_t t = shp_malloc_raise_threshold((int64_t)n);
    if (t < 0)
        Py_RETURN_NONE;
    return PyLong_FromLongLong((long long)t);
}

/* _set_machine_run_spread(spread, processes): the between-run spread this
 * machine's calibration measured (std of log run medians over `processes`
 * fresh processes), the floor of single runs' rerun intervals from now on;
 * (None, None) forgets it.  Returns the previous pair. */
static PyObject *
shp_set_machine_spread(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    shp_state *st = PyModule_GetState(module);
    const char *fn = "_set_machine_run_spread()";
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "%s takes 2 arguments (%zd given)", fn, nargs);
        return NULL;
    }
    double spread = -1.0, df = -1.0;
    if (args[0] != Py_None || args[1] != Py_None) {
        PyObject *idx = shp_arg_index(args[1], fn, "processes");
        if (idx == NULL)
            return NULL;
        long k = PyLong_AsLong(idx);
        Py_DECREF(idx);
        if (k == -1 && PyErr_Occurred())
            return NULL;
        if (shp_arg_real(args[0], fn, "spread", &spread) < 0)
            return NULL;
        if (!(spread > 0.0 && spread < 1.0) || k < 3)
            return shp_arg_value_error(fn, "spread", "a fraction in (0, 1) measured over "
                                       ">= 3 processes", args[0]), NULL;
        df = (double)(k - 1);
    }
    PyObject *old = st->machine_spread < 0.0
                        ? Py_BuildValue("(OO)", Py_None, Py_None)
                        : Py_BuildValue("(dn)", st->machine_spread,
                                        (Py_ssize_t)(st->machine_spread_df + 1.0));
    if (old == NULL)
        return NULL;
    st->machine_spread = spread;
    st->machine_spread_df = df;
    return old;
}

static PyObject *
shp_llc_info(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    const char *source = NULL;
    size_t n = shp_llc_bytes(&source);
    return Py_BuildValue("[ns]", (Py_ssize_t)n, source);
}

static PyMethodDef shp_methods[] = {
    {"benchmark_callable", FASTKW(shp_benchmark_callable),
     shp_doc_benchmark_callable},
    {"format_benchmark_table", FASTKW(shp_format_benchmark_table),
     shp_doc_format_benchmark_table},
    {"compare_benchmarks", FASTKW(shp_compare_benchmarks),
     shp_doc_compare_benchmarks},
    {"benchmark_load", FASTKW(shp_benchmark_load), shp_doc_benchmark_load},
    {"format_load_table", FASTKW(shp_format_load_table), shp_doc_format_load_table},
    {"_fcfs_latencies", FASTKW(shp_fcfs_py),
     "_fcfs_latencies(arrivals, service, servers=1) -> ndarray\n\nThe latencies of a "
     "first-come-first-served queue with that many servers (Lindley's recursion for one)."},
    {"get_cuda_sync_fn", (PyCFunction)shp_get_cuda_sync_fn, METH_NOARGS,
     "get_cuda_sync_fn($module, /)\n"
     "--\n"
     "\n"
     "The native CUDA device sync, or None without a CUDA driver or device.\n"
     "\n"
     "Returns\n"
     "-------\n"
     "CudaSync or None\n"
     "    A callable that runs cuCtxSynchronize on the calling thread's context\n"
     "    (or the device's primary context) with the GIL released; benchmark_callable\n"
     "    calls it without the interpreter.\n"
     "\n"
     "Examples\n"
     "--------\n"
     ">>> sync = get_cuda_sync_fn()\n"
     ">>> sync is None or callable(sync)\n"
     "True"},
    {"get_gpu_vram_mb", FASTKW(shp_get_gpu_vram_mb),
     "get_gpu_vram_mb($module, device_id=0)\n"
     "--\n"
     "\n"
     "Device memory of a CUDA device, in MiB (cuMemGetInfo_v2: device-wide).\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "device_id : int, default 0\n"
     "    The device's ordinal.\n"
     "\n"
     "Returns\n"
     "-------\n"
     "GPUMemoryInfo or None\n"
     "    total_mb, free_mb and used_mb; None without a CUDA driver or device.\n"
     "\n"
     "Raises\n"
     "------\n"
     "TypeError, ValueError\n"
     "    A device_id that is not an int, negative or out of range.\n"
     "\n"
     "Examples\n"
     "--------\n"
     ">>> info = get_gpu_vram_mb()\n"
     ">>> info is None or info.total_mb >= info.used_mb\n"
     "True"},
    {"get_ram_mb", shp_get_ram_mb, METH_NOARGS,
     "get_ram_mb($module, /)\n"
     "--\n"
     "\n"
     "The resident set size of this process, in MiB.\n"
     "\n"
     "Returns\n"
     "-------\n"
     "float\n"
     "\n"
     "Raises\n"
     "------\n"
     "OSError\n"
     "    Where it cannot be read.\n"
     "\n"
     "Examples\n"
     "--------\n"
     ">>> get_ram_mb() > 0\n"
     "True"},
    {"_stats_from_samples", FASTKW(shp_stats_from_samples),
     "Test hook: BenchmarkStats summarising the given samples (ms)."},
    {"suppressed_warnings", shp_suppressed_warnings, METH_NOARGS,
     "suppressed_warnings($module, /)\n"
     "--\n"
     "\n"
     "How often each machine-level cause was found again and not said.\n"
     "\n"
     "A condition of the machine rather than of the benchmark (a busy machine) is\n"
     "said once per process until it clears; the results still carry it\n"
     "(stats.flags, stats.machine_busy).\n"
     "\n"
     "Returns\n"
     "-------\n"
     "dict of str to int\n"
     "    Count by cause label, e.g. {'busy machine': 3}.\n"
     "\n"
     "Examples\n"
     "--------\n"
     ">>> isinstance(suppressed_warnings(), dict)\n"
     "True"},
    {"_noop", shp_noop, METH_NOARGS, "A native no-op: the callable overhead_ms is measured on."},
    {"_is_async", shp_aio_is_async_py, METH_O,
     "_is_async(func) -> bool\n\nWhether func is a coroutine function (async def, bound, "
     "through functools.partial or an instance's __call__): every call is awaited."},
    {"_loop_overhead_ms", shp_aio_loop_overhead_py, METH_O,
     "_loop_overhead_ms(loop) -> float\n\nWhat loop.run_until_complete costs a call (ms): "
     "the median of an empty coroutine run through it."},
    {"_t975", shp_t975_py, METH_O, "_t975(df) -> float\n\nStudent's t two-sided 95% quantile."},
    {"_judge", FASTKW(shp_judge_py),
     "_judge(ratio, lo, hi, margin) -> str\n\nThe margin rule of every verdict."},
    {"_md_text", FASTKW(shp_md_text_py),
     "_md_text(text, mode='cell') -> str\n\nMarkdown that renders as exactly text "
     "('cell', 'heading' or 'code')."},
    {"_html_escape", shp_html_escape_py, METH_O,
     "_html_escape(text) -> str\n\ntext with & < > \" as HTML entities."},
    {"_count", FASTKW(shp_count_py),
     "_count(value, param, owner=None, lowest=0, highest=None) -> int\n\nThe count rule "
     "of every argument."},
    {"_real", FASTKW(shp_real_py),
     "_real(value, param, owner=None) -> float\n\nThe real-number rule of every argument."},
    {"_pool", FASTKW(shp_pool_py),
     "_pool(parts, *, name=None, runs=False, fresh=False) -> BenchmarkStats\n\nOne result "
     "over the samples of several runs (runs=True) or segments of one run."},
    {"_note_near_option", FASTKW(shp_note_near_option_py),
     "_note_near_option(exc, keywords, options) -> bool\n\nThe near-option note on a "
     "TypeError rejecting a keyword meant for the harness (options: name -> option to "
     "suggest); True when it was added."},
    {"_warning_texts", shp_warning_texts, METH_O,
     "_warning_texts(attrs) -> dict\n\nTest hook: every cause's line, composed from attrs "
     "(a dict of the numbers a warning carries, or None) with the remedy words in effect; the readiness report's flags, and the tests."},
    {"_warning_class", shp_warning_class, METH_O,
     "_warning_class(causes) -> type\n\nThe class of a BenchmarkWarning whose .causes is this "
     "tuple of labels: the cause's own, or their combination (for fresh processes' warnings)."},
    {"_warning_lines", (PyCFunction)(void (*)(void))shp_warning_lines, METH_FASTCALL,
     "_warning_lines(causes, attrs) -> list\n\nTest hook: the cause lines of a warning with "
     "these causes (a tuple of labels) and numbers (a dict or None)."},
    {"_clock_ns", shp_clock_ns, METH_NOARGS, "The harness clock in integer ns."},
    {"_force_sampled_rss", shp_set_force_sampled, METH_O,
     "Test hook: pretend the kernel's high-water-mark reset is unavailable; returns the old flag."},
    {"_rss_at_scope", shp_rss_at_scope_py, METH_O,
     "_rss_at_scope(now_ns | None) -> (rss_bytes, read_ns)\n\nTest hook: the RSS a scope's "
     "enter at now_ns (the _clock_ns clock) takes, or with None the one its exit reads, and "
     "when that read returned."},
    {"_overhead_ms", shp_overhead_ms, METH_NOARGS, "The cached CPU overhead (ms) or None."},
    {"_scope_clock_floor_ns", shp_scope_clock_floor, METH_O,
     "Bench hook: mean ns of a scope's four clock reads (process CPU and wall, twice)."},
    {"_set_default_profiler", shp_set_default_profiler, METH_O,
     "Name the profiler Timer(profiler=None) records into (the package's module-level\n"
     "`profiler`), or None for none."},
    {"_apply_rerun", FASTKW(shp_apply_rerun_py),
     "_apply_rerun(stats, run_spread=None) -> stats\n\nFill stats' rerun interval from its "
     "samples and run_sizes (runner.py: results pooled from repetitions)."},
    {"_set_machine_run_spread", (PyCFunction)(void (*)(void))shp_set_machine_spread,
     METH_FASTCALL,
     "_set_machine_run_spread(spread, processes) -> (old spread, old processes)\n\n"
     "The calibrated between-run spread of this machine (calibrate.py), or (None, None)."},
    {"_malloc_mmap_threshold", shp_malloc_threshold_py, METH_NOARGS,
     "glibc's effective mmap threshold in bytes (the smallest request it would map now),\n"
     "read without changing it; None where unknown."},
    {"_malloc_raise_mmap_threshold", shp_malloc_raise_py, METH_O,
     "Raise glibc's dynamic mmap threshold to at least `bytes` (at most 32 MiB) as freeing a\n"
     "mapped block of that size does; returns the effective threshold after, None if unknown."},
    {"_perfctr_software", shp_set_perfctr_software, METH_O,
     "Test hook: count software clocks (task-clock, cpu-clock: ns) in place of instructions\n"
     "and cycles, to exercise counters= where the CPU has none; returns the old flag."},
    {"_callgrind_active", shp_callgrind_active, METH_NOARGS,
     "True when this process runs under callgrind with spatialhub's options: every\n"
     "benchmark's timed calls are counted (instructions_per_call)."},
    {"_llc_bytes", shp_llc_info, METH_NOARGS,
     "The last-level cache size cache='cold' evicts, in bytes, and where it came from."},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef noop_def = {"_noop", shp_noop, METH_NOARGS, NULL};

/* ---- init ---------------------------------------------------------------- */

static int
add_type(PyObject *m, PyType_Spec *spec, PyObject *base, PyTypeObject **out)
{
    PyObject *t = PyType_FromModuleAndSpec(m, spec, base);
    if (t == NULL)
        return -1;
    *out = (PyTypeObject *)t;
#if PY_VERSION_HEX >= 0x030A0000
    return PyModule_AddType(m, *out);
#else
    Py_INCREF(t);
    if (PyModule_AddObject(m, shp_type_short_name(*out), t) < 0) {
        Py_DECREF(t);
        return -1;
    }
    return 0;
#endif
}

static int
add_object(PyObject *m, const char *name, PyObject *obj)
{
    Py_INCREF(obj);
    if (PyModule_AddObject(m, name, obj) < 0) {
        Py_DECREF(obj);
        return -1;
    }
    return 0;
}

static int
shp_exec(PyObject *m)
{
    shp_state *st = PyModule_GetState(m);
    if (PyArray_ImportNumPyAPI() < 0)
        return -1;
    shp_preflight_mark(st);   /* the first benchmark's preflight measures from here */
#if PY_VERSION_HEX < 0x030A0000
    /* gcguard.c switches the collector through gc's builtins in sys.modules
     * (no C API before 3.10): have it there */
    PyObject *gc = PyImport_ImportModule("gc");
    if (gc == NULL)
        return -1;
    Py_DECREF(gc);
#endif
    st->overhead_ns[0] = st->overhead_ns[1] = -1.0;
    st->machine_spread = st->machine_spread_df = -1.0;
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < SHP_N_COUNTERS; i++)
            st->counter_floor[k][i] = -1.0;
    shp_cg_init(&st->cg);
    if (add_type(m, &shp_stats_spec, NULL, &st->stats_type) < 0 ||
        add_type(m, &shp_gpumem_spec, NULL, &st->gpumem_type) < 0 ||
        add_type(m, &shp_comparison_spec, NULL, &st->comparison_type) < 0 ||
        add_type(m, &shp_cuda_sync_spec, NULL, &st->cuda_sync_type) < 0 ||
        add_type(m, &shp_load_spec, NULL, &st->load_type) < 0 ||
        add_type(m, &shp_node_spec, NULL, &st->node_type) < 0 ||
        add_type(m, &shp_timer_spec, NULL, &st->timer_type) < 0 ||
        add_type(m, &shp_profiler_spec, NULL, &st->profiler_type) < 0)
        return -1;
    /* the profiler's ContextVar entries: a type of the module, not in its namespace */
    st->frame_type = (PyTypeObject *)PyType_FromModuleAndSpec(m, &shp_frame_spec, NULL);
    if (st->frame_type == NULL)
        return -1;
#if PY_VERSION_HEX < 0x030A0000
    st->frame_type->tp_new = NULL;   /* made by the profiler only */
#endif
    /* Timer("stage", profiler=p) without building an argument tuple and dict */
    st->timer_type->tp_vectorcall = shp_timer_vectorcall;
    st->warning = shp_exception_class(
        "spatialhub.utils.profiling.BenchmarkWarning",
        "A benchmark figure that should not be trusted as it stands.\n\n"
        "A benchmark call warns at most once, listing every cause it found; the warning\n"
        "is an instance of each cause's subclass (NoisyWarning, BusyMachineWarning, ...),\n"
        "so a filter on any of them applies.  The numbers behind each cause are\n"
        "attributes of the warning (docs/statistics.md, Warnings) and fields of the result.\n\n"
        "Parameters\n----------\n*args\n    The message, as for any Warning.\n\n"
        "Attributes\n----------\ncauses : tuple of str\n    The labels of the causes.\n"
        "benchmark : str or None\n    The name of the benchmark.\n"
        "stats : BenchmarkStats or None\n    Its result.",
        PyExc_UserWarning);
    if (st->warning == NULL || add_object(m, "BenchmarkWarning", st->warning) < 0)
        return -1;
    st->interrupted = shp_exception_class(
        "spatialhub.utils.profiling.BenchmarkInterrupted",
        "Ctrl-C during a timed loop, with what was measured up to it.\n\n"
        "A KeyboardInterrupt: code that catches that catches this too.\n\n"
        "Parameters\n----------\n*args\n    The message.\n\n"
        "Attributes\n----------\nstats : BenchmarkStats\n"
        "    The statistics of the completed iterations (benchmark_repeated: of the\n"
        "    completed runs, pooled; compare_repeated: a list, one pool per side).\n"
        "partial : SweepResult\n"
        "    sweep() and profile_model(batch_sizes=...): the values done so far.\n"
        "comparison : Comparison or None\n"
        "    compare_callables: the Comparison of the rounds both sides completed.",
        PyExc_KeyboardInterrupt);
    if (st->interrupted == NULL || add_object(m, "BenchmarkInterrupted", st->interrupted) < 0)
        return -1;
    if (shp_warn_init(m, st) < 0)
        return -1;
    st->noop = PyCFunction_NewEx(&noop_def, NULL, m);
    if (st->noop == NULL)
        return -1;
    if (PyModule_AddIntConstant(m, "ADAPTIVE_MIN_SAMPLES", SHP_ADAPTIVE_MIN_SAMPLES) < 0)
        return -1;
    if (shp_constants_add(m) < 0)
        return -1;
    if (PyModule_AddStringConstant(m, "__version__", SHP_VERSION) < 0)
        return -1;
    if (shp_cuda_register_at_fork(m) < 0)
        return -1;
    return shp_gc_register_at_fork();
}

static int
shp_traverse(PyObject *m, visitproc visit, void *arg)
{
    shp_state *st = PyModule_GetState(m);
    if (st == NULL)
        return 0;
    Py_VISIT(st->stats_type);
    Py_VISIT(st->gpumem_type);
    Py_VISIT(st->comparison_type);
    Py_VISIT(st->cuda_sync_type);
    Py_VISIT(st->load_type);
    Py_VISIT(st->warning);
    Py_VISIT(st->interrupted);
    Py_VISIT(st->noop);
    Py_VISIT(st->env_static);
    Py_VISIT(st->node_type);
    Py_VISIT(st->profiler_type);
    Py_VISIT(st->timer_type);
    Py_VISIT(st->frame_type);
    Py_VISIT(st->default_profiler);
    for (int c = 0; c < SHP_N_CAUSES; c++)
        Py_VISIT(st->cause_class[c]);
    Py_VISIT(st->combined_classes);
    Py_VISIT(st->package_dir);
    Py_VISIT(st->words);
    return 0;
}

static int
shp_clear(PyObject *m)
{
    shp_state *st = PyModule_GetState(m);
    if (st == NULL)
        return 0;
    Py_CLEAR(st->stats_type);
    Py_CLEAR(st->gpumem_type);
    Py_CLEAR(st->comparison_type);
    Py_CLEAR(st->cuda_sync_type);
    Py_CLEAR(st->load_type);
    Py_CLEAR(st->warning);
    Py_CLEAR(st->interrupted);
    Py_CLEAR(st->noop);
    Py_CLEAR(st->env_static);
    Py_CLEAR(st->node_type);
    Py_CLEAR(st->profiler_type);
    Py_CLEAR(st->timer_type);
    Py_CLEAR(st->frame_type);
    Py_CLEAR(st->default_profiler);
    for (int c = 0; c < SHP_N_CAUSES; c++)
        Py_CLEAR(st->cause_class[c]);
    Py_CLEAR(st->combined_classes);
    Py_CLEAR(st->package_dir);
    Py_CLEAR(st->words);
    return 0;
}

static void
shp_free(void *m)
{
    shp_state *st = PyModule_GetState((PyObject *)m);
    shp_clear((PyObject *)m);
    if (st != NULL) {
        shp_nvml_teardown(st);
        shp_cuda_teardown(st);
    }
}

static PyModuleDef_Slot shp_slots[] = {
    {Py_mod_exec, shp_exec},
#if PY_VERSION_HEX >= 0x030C0000
    /* Sub-interpreters that share the main GIL may import it (all state is
     * per module; the getset tables are built once, under that GIL); one
     * with its own GIL may not: NumPy, which every result uses, does not
     * support that, and neither do our process-wide tables. */
    {Py_mod_multiple_interpreters, Py_MOD_MULTIPLE_INTERPRETERS_SUPPORTED},
#endif
    {0, NULL},
};

struct PyModuleDef shp_module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "spatialhub.utils.profiling._native",
    .m_doc = "Native core of spatialhub.utils.profiling: timing loop, statistics, memory, CUDA.",
    .m_size = sizeof(shp_state),
    .m_methods = shp_methods,
    .m_slots = shp_slots,
    .m_traverse = shp_traverse,
    .m_clear = shp_clear,
    .m_free = shp_free,
};

PyMODINIT_FUNC
PyInit__native(void)
{
    /* The types' getset tables are static data filled from the field
     * tables: once per process (every interpreter that imports the module
     * runs this, under the one GIL they share). */
    static int prepared = 0;
    if (!prepared) {
        shp_stats_prepare_spec();
        shp_gpumem_prepare_spec();
        shp_comparison_prepare_spec();
        shp_load_prepare_spec();
        prepared = 1;
    }
    return PyModuleDef_Init(&shp_module_def);
}
