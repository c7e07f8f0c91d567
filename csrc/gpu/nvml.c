/*
 * nvml.c -- what the GPU was doing meanwhile: SM clock, throttle (clock
 * event) reasons, temperature, power and per-process memory, from NVML.
 *
 * NVML is loaded at run time like the CUDA driver (libnvidia-ml.so.1 on
 * Linux, nvml.dll from System32 on Windows, SPATIALHUB_LIBNVML to name
 * another file) the first time a CUDA benchmark runs; a missing library or
 * entry point only makes the readings "not available".  The load and
 * nvmlInit_v2 run under a lock with the GIL released; so does every sample.
 *
 * A benchmark samples once before its first call, then between iterations
 * (outside the timed region) at most every SHP_NVML_PERIOD_NS, and once after
 * its last call; the per-process memory is read at the end.
 */
#include "gpu/gpu.h"
#include "objects.h"
#include "pythread.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(SHP_WINDOWS)
#include <windows.h>
#include <process.h>
#define shp_getpid() ((unsigned int)_getpid())
#elif !defined(SHP_MACOS)
#include <dlfcn.h>
#include <unistd.h>
#define shp_getpid() ((unsigned int)getpid())
#endif

#define SHP_NVML_ENV "SPATIALHUB_LIBNVML"
#define NVML_SUCCESS 0
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_CLOCK_SM 1
#define NVML_TEMPERATURE_GPU 0
#define NVML_VALUE_NOT_AVAILABLE (~0ULL)
#define SHP_NVML_MAX_PROCS 256

typedef struct {
    const char *name;
    size_t offset;
    int required;
} nvml_entry;

/* Versioned ABI names as nvml.h maps them; the first name found wins. */
static const nvml_entry nvml_syms[] = {
    {"nvmlInit_v2", offsetof(shp_nvml, nvmlInit), 1},
    {"nvmlShutdown", offsetof(shp_nvml, nvmlShutdown), 1},
    {"nvmlDeviceGetHandleByIndex_v2", offsetof(shp_nvml, nvmlDeviceGetHandleByIndex), 1},
    {"nvmlDeviceGetHandleByPciBusId_v2", offsetof(shp_nvml, nvmlDeviceGetHandleByPciBusId), 0},
    {"nvmlDeviceGetClockInfo", offsetof(shp_nvml, nvmlDeviceGetClockInfo), 0},
    /* renamed in r535; the old name stays exported as a deprecated alias */
    {"nvmlDeviceGetCurrentClocksEventReasons", offsetof(shp_nvml, nvmlDeviceGetClocksEventReasons), 0},
    {"nvmlDeviceGetCurrentClocksThrottleReasons", offsetof(shp_nvml, nvmlDeviceGetClocksEventReasons), 0},
    {"nvmlDeviceGetTemperature", offsetof(shp_nvml, nvmlDeviceGetTemperature), 0},
    {"nvmlDeviceGetPowerUsage", offsetof(shp_nvml, nvmlDeviceGetPowerUsage), 0},
};
#define N_NVML_SYMS (sizeof(nvml_syms) / sizeof(nvml_syms[0]))

#if defined(SHP_MACOS)

int
shp_nvml_load(shp_state *st)
{
    if (st->nvml.load_state == 0) {
        (void)snprintf(st->nvml.why, sizeof st->nvml.why, "NVML does not exist on macOS");
        st->nvml.load_state = -1;
    }
    return 0;
}

#else

#if defined(SHP_WINDOWS)
static void *
nvml_open(const char *path, int is_override)
{
    HMODULE h = LoadLibraryExA(path, NULL, is_override ? 0 : LOAD_LIBRARY_SEARCH_SYSTEM32);
    if (h == NULL && !is_override)   /* drivers before R460 kept it under NVSMI */
        h = LoadLibraryExA("C:\\Program Files\\NVIDIA Corporation\\NVSMI\\nvml.dll", NULL, 0);
    return (void *)h;
}

static void *
nvml_sym(void *lib, const char *name)
{
    FARPROC p = GetProcAddress((HMODULE)lib, name);
    void *v;
    memcpy(&v, &p, sizeof v);
    return v;
}

static void
nvml_close(void *lib)
{
    (void)FreeLibrary((HMODULE)lib);
}
#define NVML_DEFAULT_LIB "nvml.dll"
#else
static void *
nvml_open(const char *path, int is_override)
{
    (void)is_override;
    return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

static void *
nvml_sym(void *lib, const char *name)
{
    return dlsym(lib, name);
}

static void
nvml_close(void *lib)
{
    (void)dlclose(lib);
}
#define NVML_DEFAULT_LIB "libnvidia-ml.so.1"
#endif

/* The load itself: no Python, called under the lock without the GIL. */
static void
nvml_load_nogil(shp_nvml *n, const char *override)
{
    const char *path = override != NULL ? override : NVML_DEFAULT_LIB;
    void *h = nvml_open(path, override != NULL);
    if (h == NULL) {
        (void)snprintf(n->why, sizeof n->why, "cannot load %.200s", path);
        n->load_state = -1;
        return;
    }
    for (size_t i = 0; i < N_NVML_SYMS; i++) {
        void *sym = nvml_sym(h, nvml_syms[i].name);
        void *have = NULL;
        memcpy(&have, (char *)n + nvml_syms[i].offset, sizeof have);
        if (have != NULL)
            continue;   /* an earlier name of the same entry point was found */
        if (sym == NULL && nvml_syms[i].required) {
            (void)snprintf(n->why, sizeof n->why, "%.150s lacks %.60s", path, nvml_syms[i].name);
            nvml_close(h);
            memset((char *)n + offsetof(shp_nvml, nvmlInit), 0,
                   offsetof(shp_nvml, process_info_size) - offsetof(shp_nvml, nvmlInit));
            n->load_state = -1;
            return;
        }
        memcpy((char *)n + nvml_syms[i].offset, &sym, sizeof sym);
    }
    /* the process list: _v3 and _v2 fill 24-byte records, the first 16 */
    static const char *const procs[] = {"nvmlDeviceGetComputeRunningProcesses_v3",
                                        "nvmlDeviceGetComputeRunningProcesses_v2",
                                        "nvmlDeviceGetComputeRunningProcesses"};
    for (int i = 0; i < 3 && n->nvmlDeviceGetComputeRunningProcesses == NULL; i++) {
        void *sym = nvml_sym(h, procs[i]);
        memcpy(&n->nvmlDeviceGetComputeRunningProcesses, &sym, sizeof sym);
        n->process_info_size = i < 2 ? 24 : 16;
    }
    shp_nvmlReturn rc = n->nvmlInit();
    if (rc != NVML_SUCCESS) {
        (void)snprintf(n->why, sizeof n->why, "nvmlInit_v2 failed (NVML error %d)", rc);
        nvml_close(h);
        n->load_state = -1;
        return;
    }
    n->lib = h;
    n->load_state = 1;
}

int
shp_nvml_load(shp_state *st)
{
    shp_nvml *n = &st->nvml;
    int state;
    if (n->lock == NULL) {
        n->lock = PyThread_allocate_lock();   /* under the GIL: no race */
        if (n->lock == NULL) {
            (void)snprintf(n->why, sizeof n->why, "cannot allocate a lock");
            return 0;
        }
    }
    /* the variable, read with the GIL held (os.environ may be changing it) */
    const char *env = getenv(SHP_NVML_ENV);
    char override[1024];
    int has_override = env != NULL && env[0] != '\0';
    if (has_override)
        (void)snprintf(override, sizeof override, "%s", env);
    /* The state is read under the lock too, never racing the loader's
     * writes (it runs without the GIL): the table is complete when read. */
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(n->lock, WAIT_LOCK);
    if (n->load_state == 0)
        nvml_load_nogil(n, has_override ? override : NULL);
    state = n->load_state;
    PyThread_release_lock(n->lock);
    Py_END_ALLOW_THREADS
    return state == 1;
}

#endif

void
shp_nvml_teardown(shp_state *st)
{
    shp_nvml *n = &st->nvml;
    if (n->load_state == 1 && n->nvmlShutdown != NULL)
        (void)n->nvmlShutdown();
    /* the library stays mapped, as the CUDA driver does: NVML may have
     * threads of its own */
    n->load_state = 0;
    n->lib = NULL;
    if (n->lock != NULL) {
        PyThread_free_lock(n->lock);
        n->lock = NULL;
    }
}

/* ---- watching a device --------------------------------------------------- */

static void
watch_reset(shp_nvml_watch *w)
{
    memset(w, 0, sizeof *w);
    w->clock_start = w->clock_end = w->clock_min = w->clock_max = -1;
    w->temp_start = w->temp_end = w->temp_max = -1;
    w->power_start = w->power_end = w->power_max = -1;
    w->proc_bytes = -1;
    w->others = -1;
    w->others_bytes = -1;
}

/* One reading of everything; no Python, no GIL needed. */
static void
sample_nogil(const shp_nvml *n, shp_nvml_watch *w)
{
    unsigned int v;
    unsigned long long m;
    if (n->nvmlDeviceGetClockInfo && n->nvmlDeviceGetClockInfo(w->dev, NVML_CLOCK_SM, &v) == 0) {
        w->clock_end = v;
        if (w->clock_start < 0)
            w->clock_start = v;
        if (w->clock_min < 0 || (long long)v < w->clock_min)
            w->clock_min = v;
        if ((long long)v > w->clock_max)
            w->clock_max = v;
    }
    if (n->nvmlDeviceGetTemperature &&
        n->nvmlDeviceGetTemperature(w->dev, NVML_TEMPERATURE_GPU, &v) == 0) {
        w->temp_end = v;
        if (w->temp_start < 0)
            w->temp_start = v;
        if ((long long)v > w->temp_max)
            w->temp_max = v;
    }
    if (n->nvmlDeviceGetPowerUsage && n->nvmlDeviceGetPowerUsage(w->dev, &v) == 0) {
        w->power_end = v;
        if (w->power_start < 0)
            w->power_start = v;
        if ((long long)v > w->power_max)
            w->power_max = v;
    }
    if (n->nvmlDeviceGetClocksEventReasons && n->nvmlDeviceGetClocksEventReasons(w->dev, &m) == 0) {
        w->reasons |= m;
        w->reasons_ok = 1;
    }
    w->samples++;
}

void
shp_nvml_watch_begin(shp_state *st, shp_nvml_watch *w, int ordinal, const char *pci_bus_id,
                     int64_t now)
{
    watch_reset(w);
    if (!shp_nvml_load(st)) {
        w->why = st->nvml.why;
        return;
    }
    const shp_nvml *n = &st->nvml;
    shp_nvmlDevice dev = NULL;
    shp_nvmlReturn rc = -1;
    Py_BEGIN_ALLOW_THREADS
    /* by PCI bus id: NVML's indices ignore CUDA_VISIBLE_DEVICES and may be
     * ordered differently from CUDA's */
    if (pci_bus_id != NULL && pci_bus_id[0] != '\0' && n->nvmlDeviceGetHandleByPciBusId)
        rc = n->nvmlDeviceGetHandleByPciBusId(pci_bus_id, &dev);
    if (rc != NVML_SUCCESS)
        rc = n->nvmlDeviceGetHandleByIndex((unsigned int)ordinal, &dev);
    if (rc == NVML_SUCCESS) {
        w->dev = dev;
        sample_nogil(n, w);
        w->last_ns = now;
    }
    Py_END_ALLOW_THREADS
    if (w->dev == NULL)
        w->why = "NVML has no handle for this device";
}

void
shp_nvml_watch_sample(shp_state *st, shp_nvml_watch *w, int64_t now, int force)
{
    if (w->dev == NULL)
        return;
    if (!force && now - w->last_ns < SHP_NVML_PERIOD_NS)
        return;
    Py_BEGIN_ALLOW_THREADS
    sample_nogil(&st->nvml, w);
    Py_END_ALLOW_THREADS
    w->last_ns = now;
}

/* This process's and the others' memory on the device; no GIL needed. */
static void
processes_nogil(const shp_nvml *n, shp_nvml_watch *w)
{
    unsigned char buf[SHP_NVML_MAX_PROCS * 24];
    unsigned int count = SHP_NVML_MAX_PROCS;
    int size = n->process_info_size;
    if (n->nvmlDeviceGetComputeRunningProcesses == NULL ||
        n->nvmlDeviceGetComputeRunningProcesses(w->dev, &count, buf) != NVML_SUCCESS)
        return;
    if (count > SHP_NVML_MAX_PROCS)
        count = SHP_NVML_MAX_PROCS;
#if !defined(SHP_MACOS)
    unsigned int me = shp_getpid();
#else
    unsigned int me = 0;
#endif
    w->others = 0;
    w->others_bytes = 0;
    for (unsigned int i = 0; i < count; i++) {
        unsigned int pid;
        unsigned long long used;
        memcpy(&pid, buf + (size_t)i * size, sizeof pid);
        memcpy(&used, buf + (size_t)i * size + 8, sizeof used);   /* aligned at 8 */
        if (pid == me) {
            w->proc_bytes = used == NVML_VALUE_NOT_AVAILABLE ? -1 : (long long)used;
        }
        else {
            w->others++;
            if (used != NVML_VALUE_NOT_AVAILABLE)
                w->others_bytes += (long long)used;
        }
    }
}

void
shp_nvml_watch_end(shp_state *st, shp_nvml_watch *w)
{
    if (w->dev == NULL)
        return;
    Py_BEGIN_ALLOW_THREADS
    sample_nogil(&st->nvml, w);
    processes_nogil(&st->nvml, w);
    Py_END_ALLOW_THREADS
}

static const struct {
    unsigned long long bit;
    const char *name;
} reason_names[] = {
    {0x1ULL, "gpu_idle"},
    {0x2ULL, "applications_clocks_setting"},
    {0x4ULL, "sw_power_cap"},
    {0x8ULL, "hw_slowdown"},
    {0x10ULL, "sync_boost"},
    {0x20ULL, "sw_thermal_slowdown"},
    {0x40ULL, "hw_thermal_slowdown"},
    {0x80ULL, "hw_power_brake_slowdown"},
    {0x100ULL, "display_clock_setting"},
};

void
shp_nvml_reason_names(unsigned long long mask, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof reason_names / sizeof reason_names[0]; i++) {
        if ((mask & reason_names[i].bit) && used + 2 < n) {
            int k = snprintf(buf + used, n - used, "%s%s", used ? ", " : "", reason_names[i].name);
            if (k < 0)
                break;
            used += (size_t)k;
            if (used >= n) {
                buf[n - 1] = '\0';
                break;
            }
        }
    }
}

/* d[key] = value, or "not available" when value < 0; scale divides. */
static int
put(PyObject *d, const char *key, long long value, double scale)
{
    PyObject *v = value < 0 ? PyUnicode_FromString("not available")
                  : scale == 1.0 ? PyLong_FromLongLong(value)
                                 : PyFloat_FromDouble((double)value / scale);
    if (v == NULL)
        return -1;
    int rc = shp_dict_set(d, key, v);
    Py_DECREF(v);
    return rc;
}

PyObject *
shp_nvml_watch_dict(const shp_nvml_watch *w)
{
    PyObject *d = PyDict_New(), *v = NULL;
    if (d == NULL)
        return NULL;
    char why[300];
    if (w->dev == NULL)
        (void)snprintf(why, sizeof why, "not available: %s", w->why ? w->why : "no NVML");
    else
        (void)snprintf(why, sizeof why, "available");
    v = PyUnicode_FromString(why);
    if (v == NULL || shp_dict_set(d, "nvml", v) < 0)
        goto error;
    Py_CLEAR(v);
    double move = -1;
    if (w->clock_max > 0 && w->clock_min >= 0)
        move = (double)(w->clock_max - w->clock_min) / (double)w->clock_max * 100.0;
    if (put(d, "sm_clock_mhz_start", w->clock_start, 1) < 0 ||
        put(d, "sm_clock_mhz_end", w->clock_end, 1) < 0 ||
        put(d, "sm_clock_mhz_min", w->clock_min, 1) < 0 ||
        put(d, "sm_clock_mhz_max", w->clock_max, 1) < 0)
        goto error;
    v = move < 0 ? PyUnicode_FromString("not available") : PyFloat_FromDouble(move);
    if (v == NULL || shp_dict_set(d, "sm_clock_change_pct", v) < 0)
        goto error;
    Py_CLEAR(v);
    if (w->reasons_ok) {
        v = PyList_New(0);
        for (size_t i = 0; v != NULL && i < sizeof reason_names / sizeof reason_names[0]; i++) {
            if (!(w->reasons & reason_names[i].bit))
                continue;
            PyObject *s = PyUnicode_FromString(reason_names[i].name);
            if (s == NULL || PyList_Append(v, s) < 0) {
                Py_XDECREF(s);
                goto error;
            }
            Py_DECREF(s);
        }
    }
    else {
        v = PyUnicode_FromString("not available");
    }
    if (v == NULL || shp_dict_set(d, "throttle_reasons", v) < 0)
        goto error;
    Py_CLEAR(v);
    if (put(d, "temperature_c_start", w->temp_start, 1) < 0 ||
        put(d, "temperature_c_end", w->temp_end, 1) < 0 ||
        put(d, "temperature_c_max", w->temp_max, 1) < 0 ||
        put(d, "power_w_start", w->power_start, 1000.0) < 0 ||
        put(d, "power_w_end", w->power_end, 1000.0) < 0 ||
        put(d, "power_w_max", w->power_max, 1000.0) < 0 ||
        put(d, "samples", w->dev ? (long long)w->samples : -1, 1) < 0 ||
        put(d, "process_used_mb", w->proc_bytes, SHP_MIB) < 0 ||
        put(d, "other_processes", w->others, 1) < 0 ||
        put(d, "other_processes_used_mb", w->others_bytes, SHP_MIB) < 0)
        goto error;
    return d;
error:
    Py_XDECREF(v);
    Py_DECREF(d);
    return NULL;
}
