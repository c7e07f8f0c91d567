/*
 * env.c -- the environment a result was measured in (seed 004: "log the
 * torch version, CUDA version and device name alongside the numbers").
 *
 * The part that cannot change within a process is computed once and cached
 * in the module state; torch is looked up in sys.modules on every call and
 * never imported here (importing torch takes seconds and changes the
 * process being measured).  CUDA keys are added by bench.c via cuda.c.
 *
 * The machine preflight (pyperf's `system show` is the reference for what
 * matters): frequency governor, turbo/boost, ASLR and isolated CPUs in the
 * static part; the load average and the share of the CPUs other processes
 * used before the run, per benchmark.
 */
#include "platform/platform.h"
#include "objects.h"

#include <string.h>

#include <math.h>
#include <stdlib.h>

#if defined(SHP_LINUX)
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>
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
    int rc = shp_dict_set(d, key, v);
    Py_DECREF(v);
    return rc;
}

static int
set_str(PyObject *d, const char *key, const char *val)
{
    PyObject *v = PyUnicode_DecodeUTF8(val, (Py_ssize_t)strlen(val), "replace");
    if (v == NULL)
        return -1;
    int rc = shp_dict_set(d, key, v);
    Py_DECREF(v);
    return rc;
}

/* The first line of a small text file, without the newline; 0 if unreadable. */
static int
read_line(const char *path, char *buf, size_t n)
{
    buf[0] = '\0';
#if defined(SHP_LINUX)
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return 0;
    if (fgets(buf, (int)n, f) == NULL)
        buf[0] = '\0';   /* an empty file reads as "" */
    fclose(f);
    buf[strcspn(buf, "\n")] = '\0';
    return 1;
#else
    (void)path;
    (void)n;
    return 0;
#endif
}

/* d[key] = the file's first line as str, or None when it cannot be read. */
static int
set_file(PyObject *d, const char *key, const char *path)
{
    char buf[256];
    if (!read_line(path, buf, sizeof(buf)))
        return shp_dict_set(d, key, Py_None);
    return set_str(d, key, buf);
}

/* The governors of all CPUs, distinct, comma-separated ("" if none). */
static void
governors(char *out, size_t n)
{
    out[0] = '\0';
    for (int cpu = 0; cpu < 1024; cpu++) {
        char path[96], g[64];
        PyOS_snprintf(path, sizeof(path),
                      "/sys/devices/system/cpu/cpu%d/cpufreq/scaling_governor", cpu);
        if (!read_line(path, g, sizeof(g)) || g[0] == '\0')
            break;
        if (strstr(out, g) == NULL && strlen(out) + strlen(g) + 2 < n) {
            if (out[0] != '\0')
                strcat(out, ",");
            strcat(out, g);
        }
    }
}

/* True / False / None: turbo (Intel no_turbo, or the generic boost flag). */
static PyObject *
turbo(void)
{
    char buf[16];
    if (read_line("/sys/devices/system/cpu/intel_pstate/no_turbo", buf, sizeof(buf)) && buf[0])
        return PyBool_FromLong(buf[0] == '0');
    if (read_line("/sys/devices/system/cpu/cpufreq/boost", buf, sizeof(buf)) && buf[0])
        return PyBool_FromLong(buf[0] == '1');
    Py_RETURN_NONE;
}

static int
add_machine(PyObject *d)
{
    char gov[256];
    governors(gov, sizeof(gov));
    PyObject *t = turbo();
    if (t == NULL)
        return -1;
    int rc = shp_dict_set(d, "turbo", t);
    Py_DECREF(t);
    if (rc < 0)
        return -1;
    if (gov[0] != '\0')
        rc = set_str(d, "cpu_governor", gov);
    else
        rc = shp_dict_set(d, "cpu_governor", Py_None);
    if (rc < 0 || set_file(d, "aslr", "/proc/sys/kernel/randomize_va_space") < 0 ||
        set_file(d, "isolated_cpus", "/sys/devices/system/cpu/isolated") < 0)
        return -1;
    return 0;
}

/* Machine-wide busy and total clock ticks, and this process's CPU ticks. */
static int
cpu_ticks(double *busy, double *total, double *self)
{
#if defined(SHP_LINUX)
    char line[512];
    if (!read_line("/proc/stat", line, sizeof(line)) || strncmp(line, "cpu ", 4) != 0)
        return 0;
    unsigned long long v[10] = {0};
    int k = sscanf(line + 4, "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
                   &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]);
    if (k < 4)
        return 0;
    double all = 0.0;
    for (int i = 0; i < k && i < 8; i++)   /* guest time is already in user */
        all += (double)v[i];
    *total = all;
    *busy = all - (double)v[3] - (k > 4 ? (double)v[4] : 0.0);   /* minus idle, iowait */
    struct rusage ru;
    long hz = sysconf(_SC_CLK_TCK);
    if (getrusage(RUSAGE_SELF, &ru) != 0 || hz <= 0)
        return 0;
    *self = ((double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
             (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6) * (double)hz;
    return 1;
#else
    (void)busy;
    (void)total;
    (void)self;
    return 0;
#endif
}

void
shp_preflight_mark(shp_state *st)
{
    double b, t, s;
    st->others_share = NAN;
    if (cpu_ticks(&b, &t, &s)) {
        st->cpu_busy_prev = b;
        st->cpu_total_prev = t;
        st->self_cpu_prev = s;
    }
    else {
        st->cpu_busy_prev = st->cpu_total_prev = st->self_cpu_prev = -1.0;
    }
}

void
shp_preflight_read(shp_state *st, shp_preflight *out)
{
    out->load1 = NAN;
    out->others_share = NAN;
    out->ncpu = 0;
    out->busy = 0;
#if defined(SHP_LINUX) || defined(SHP_MACOS)
    double la[1];
    if (getloadavg(la, 1) == 1)
        out->load1 = la[0];
    long nc = sysconf(_SC_NPROCESSORS_ONLN);
    out->ncpu = nc > 0 ? (int)nc : 0;
#endif
    double b, t, s;
    if (cpu_ticks(&b, &t, &s) && st->cpu_total_prev >= 0.0) {
        double dt = t - st->cpu_total_prev;
        /* at least ~50 ms of all CPUs at 100 Hz: else keep the last figure */
        if (dt >= 5.0 * (out->ncpu > 0 ? out->ncpu : 1)) {
            double others = (b - st->cpu_busy_prev) - (s - st->self_cpu_prev);
            st->others_share = others <= 0.0 ? 0.0 : others >= dt ? 1.0 : others / dt;
            st->cpu_busy_prev = b;
            st->cpu_total_prev = t;
            st->self_cpu_prev = s;
        }
    }
    out->others_share = st->others_share;
    if (!isnan(out->others_share))
        out->busy = out->others_share > SHP_BUSY_SHARE;
    else if (!isnan(out->load1) && out->ncpu > 0)
        out->busy = (out->load1 - 1.0) / (double)out->ncpu > SHP_BUSY_LOAD;
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
        set_str(d, "spatialhub_profiling", SHP_VERSION) < 0 ||
        set_str(d, "python", ver) < 0 ||
        set_from_module(d, "implementation", "platform", "python_implementation", 1) < 0 ||
        set_from_module(d, "platform", "platform", "platform", 1) < 0 ||
        set_str(d, "cpu", cpu) < 0 ||
        set_from_module(d, "cpu_count", "os", "cpu_count", 1) < 0 ||
        set_from_module(d, "numpy", "numpy", "__version__", 0) < 0 ||
        set_str(d, "timer", shp_clock_name()) < 0 ||
        shp_dict_set(d, "timer_resolution_ns", res) < 0 || add_machine(d) < 0) {
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
    if (s == NULL || shp_dict_set(d, "torch", s) < 0) {
        Py_XDECREF(s);
        return -1;
    }
    Py_DECREF(s);
    PyObject *version = PyObject_GetAttrString(torch, "version");
    PyObject *cuda = version ? PyObject_GetAttrString(version, "cuda") : NULL;
    Py_XDECREF(version);
    if (cuda == NULL)
        return shp_clear_unless_fatal();
    int rc = shp_dict_set(d, "torch_cuda", cuda);
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
    int rc = shp_dict_set(d, "process_peak_rss_mb", v);
    Py_DECREF(v);
    return rc;
}

/* d[key] = x, or None for NaN. */
static int
set_real(PyObject *d, const char *key, double x)
{
    PyObject *v = isnan(x) ? Py_NewRef(Py_None) : PyFloat_FromDouble(x);
    if (v == NULL)
        return -1;
    int rc = shp_dict_set(d, key, v);
    Py_DECREF(v);
    return rc;
}

PyObject *
shp_env_dict(shp_state *st, const shp_preflight *pf)
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
    if (add_torch(d) < 0 || add_process_peak(d) < 0 ||
        (pf != NULL && (set_real(d, "load_avg_1min", pf->load1) < 0 ||
                        set_real(d, "other_processes_cpu_share", pf->others_share) < 0))) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}
