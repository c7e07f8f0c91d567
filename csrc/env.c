/*
 * env.c -- the environment a result was measured in (seed 004: "log the
 * torch version, CUDA version and device name alongside the numbers").
 *
 * The part that cannot change within a process is computed once and cached
 * in the module state; torch is looked up in sys.modules on every call and
 * never imported here (importing torch takes seconds and changes the
 * process being measured).  CUDA keys are added by bench.c via cuda.c.
 */
#include "profiling.h"

#include <string.h>

#if defined(SHP_LINUX)
#include <stdio.h>
#elif defined(SHP_MACOS)
#include <sys/sysctl.h>
#endif

/* CPU model name into buf ("" if unknown). */
static void
cpu_model(char *buf, size_t n)
{
    buf[0] = '\0';
#if defined(SHP_LINUX)
    FILE *f = fopen("/proc/cpuinfo", "re");
    if (f == NULL)
        return;
    char line[512];
    while (fgets(line, sizeof(line), f) != NULL) {
        /* x86: "model name"; many Arm kernels: "Hardware" or none at all */
        if (strncmp(line, "model name", 10) == 0 || strncmp(line, "Hardware", 8) == 0) {
            char *colon = strchr(line, ':');
            if (colon != NULL) {
                colon++;
                while (*colon == ' ' || *colon == '\t')
                    colon++;
                size_t len = strcspn(colon, "\n");
                if (len >= n)
                    len = n - 1;
                memcpy(buf, colon, len);
                buf[len] = '\0';
            }
            break;
        }
    }
    fclose(f);
#elif defined(SHP_MACOS)
    size_t len = n;
    if (sysctlbyname("machdep.cpu.brand_string", buf, &len, NULL, 0) != 0)
        buf[0] = '\0';
#elif defined(SHP_WINDOWS)
    const char *p = getenv("PROCESSOR_IDENTIFIER");
    if (p != NULL) {
        strncpy(buf, p, n - 1);
        buf[n - 1] = '\0';
    }
#endif
}

/* d[key] = module.attr() (or module.attr when `call` is 0); "unknown" when
 * that fails for any reason but memory (platform.platform() spawns `uname`,
 * which an isolated sub-interpreter refuses): metadata must never cost the
 * user their measurement.  A KeyboardInterrupt or SystemExit raised in
 * there (a Ctrl-C while `uname` runs) is the user's, not a failure of the
 * lookup: it propagates, and nothing is cached. */
static int
set_from_module(PyObject *d, const char *key, const char *module, const char *attr, int call)
{
    PyObject *m = PyImport_ImportModule(module), *v = NULL;
    if (m != NULL) {
        v = PyObject_GetAttrString(m, attr);
        Py_DECREF(m);
    }
    if (v != NULL && call) {
        PyObject *r = PyObject_CallNoArgs(v);
        Py_SETREF(v, r);
    }
    if (v == NULL) {
        if (PyErr_ExceptionMatches(PyExc_MemoryError) || shp_clear_unless_fatal() < 0)
            return -1;
        v = PyUnicode_FromString("unknown");
        if (v == NULL)
            return -1;
    }
    int rc = PyDict_SetItemString(d, key, v);
    Py_DECREF(v);
    return rc;
}

static int
set_str(PyObject *d, const char *key, const char *val)
{
    PyObject *v = PyUnicode_DecodeUTF8(val, (Py_ssize_t)strlen(val), "replace");
    if (v == NULL)
        return -1;
    int rc = PyDict_SetItemString(d, key, v);
    Py_DECREF(v);
    return rc;
}

static PyObject *
build_static(void)
{
    PyObject *d = PyDict_New();
    if (d == NULL)
        return NULL;
    char cpu[256], ver[64];
    cpu_model(cpu, sizeof(cpu));
    PyOS_snprintf(ver, sizeof(ver), "%d.%d.%d", PY_MAJOR_VERSION, PY_MINOR_VERSION, PY_MICRO_VERSION);
    PyObject *res = PyLong_FromLongLong(shp_clock_resolution_ns());
    if (res == NULL ||
        set_str(d, "python", ver) < 0 ||
        set_from_module(d, "implementation", "platform", "python_implementation", 1) < 0 ||
        set_from_module(d, "platform", "platform", "platform", 1) < 0 ||
        set_str(d, "cpu", cpu) < 0 ||
        set_from_module(d, "cpu_count", "os", "cpu_count", 1) < 0 ||
        set_from_module(d, "numpy", "numpy", "__version__", 0) < 0 ||
        set_str(d, "timer", shp_clock_name()) < 0 ||
        PyDict_SetItemString(d, "timer_resolution_ns", res) < 0) {
        Py_XDECREF(res);
        Py_DECREF(d);
        return NULL;
    }
    Py_DECREF(res);
    return d;
}

static int add_torch_from(PyObject *d, PyObject *torch);

/* torch / torch_cuda from an already imported torch; nothing otherwise. */
static int
add_torch(PyObject *d)
{
    PyObject *mods = PySys_GetObject("modules");   /* borrowed, no Python runs below */
    if (mods == NULL || !PyDict_Check(mods))
        return 0;
    /* "torch" is an str key: the lookup runs no user code */
    PyObject *torch = PyDict_GetItemString(mods, "torch");   /* borrowed */
    if (torch == NULL || torch == Py_None)
        return 0;
    Py_INCREF(torch);   /* attribute lookups run module code that may drop it */
    int rc = add_torch_from(d, torch);
    Py_DECREF(torch);
    return rc;
}

static int
add_torch_from(PyObject *d, PyObject *torch)
{
    PyObject *v = PyObject_GetAttrString(torch, "__version__");
    if (v == NULL)   /* a half-imported torch is not our error; Ctrl-C is */
        return shp_clear_unless_fatal();
    PyObject *s = PyObject_Str(v);
    Py_DECREF(v);
    if (s == NULL || PyDict_SetItemString(d, "torch", s) < 0) {
        Py_XDECREF(s);
        return -1;
    }
    Py_DECREF(s);
    PyObject *version = PyObject_GetAttrString(torch, "version");
    PyObject *cuda = version ? PyObject_GetAttrString(version, "cuda") : NULL;
    Py_XDECREF(version);
    if (cuda == NULL)
        return shp_clear_unless_fatal();
    int rc = PyDict_SetItemString(d, "torch_cuda", cuda);
    Py_DECREF(cuda);
    return rc;
}

/* process_peak_rss_mb: the process's peak RSS including what it was before
 * the benchmarks reset the kernel's record (docs/memory.md); None if unknown. */
static int
add_process_peak(PyObject *d)
{
    int64_t b = shp_process_peak_rss_bytes();
    PyObject *v = b >= 0 ? PyFloat_FromDouble((double)b / SHP_MIB) : Py_NewRef(Py_None);
    if (v == NULL)
        return -1;
    int rc = PyDict_SetItemString(d, "process_peak_rss_mb", v);
    Py_DECREF(v);
    return rc;
}

PyObject *
shp_env_dict(shp_state *st)
{
    if (st->env_static == NULL) {
        /* build_static runs Python code (platform.platform() starts a
         * subprocess): another thread may have cached its record meanwhile;
         * the first one kept wins, the other is dropped, not leaked. */
        PyObject *built = build_static();
        if (built == NULL)
            return NULL;
        if (st->env_static == NULL)
            st->env_static = built;
        else
            Py_DECREF(built);
    }
    PyObject *d = PyDict_Copy(st->env_static);
    if (d == NULL)
        return NULL;
    if (add_torch(d) < 0 || add_process_peak(d) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}
