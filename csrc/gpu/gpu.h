/*
 * gpu/ -- devices: what a device label means (device.c), the CUDA Driver API
 * loaded at run time and its state in a fork() child (cuda.c), GPU time by
 * CUDA events and the L2 flush (cudatime.c), NVML's clocks, throttling and
 * per-process memory (nvml.c).  Calls go down to platform/ only (the
 * loader, the clock).  Driver calls that can block run without the GIL.
 */
#ifndef SHP_GPU_GPU_H
#define SHP_GPU_GPU_H

#include "platform/platform.h"

/* ---- cuda.c: the driver table ------------------------------------------ */

#define SHP_MAX_CUDA_DEVICES 64

/* Just enough of the driver ABI to dlopen it: opaque handles and ints. */
typedef int shp_CUresult;
typedef int shp_CUdevice;
typedef struct shp_CUctx_st *shp_CUcontext;
typedef struct shp_CUstream_st *shp_CUstream;
typedef struct shp_CUevent_st *shp_CUevent;
typedef unsigned long long shp_CUdeviceptr;   /* 64-bit in the _v2 ABI */

typedef struct {
    void *lib;                 /* dlopen / LoadLibrary handle, NULL if not loaded */
    int load_state;            /* 0 not tried, 1 ready, -1 unavailable */
    shp_CUresult init_result;  /* result of cuInit(0) (0 = CUDA_SUCCESS) */
    char why[256];             /* when unavailable: the reason, for messages */
    int driver_version;        /* cuDriverGetVersion, 0 if unknown */
    int device_count;
    /* required */
    shp_CUresult (*cuInit)(unsigned int);
    shp_CUresult (*cuDeviceGetCount)(int *);
    shp_CUresult (*cuDeviceGet)(shp_CUdevice *, int);
    shp_CUresult (*cuCtxGetCurrent)(shp_CUcontext *);
    shp_CUresult (*cuCtxPushCurrent)(shp_CUcontext);      /* _v2 */
    shp_CUresult (*cuCtxPopCurrent)(shp_CUcontext *);     /* _v2 */
    shp_CUresult (*cuDevicePrimaryCtxRetain)(shp_CUcontext *, shp_CUdevice);
    shp_CUresult (*cuDevicePrimaryCtxRelease)(shp_CUdevice); /* _v2 */
    shp_CUresult (*cuCtxSynchronize)(void);
    shp_CUresult (*cuMemGetInfo)(size_t *, size_t *);     /* _v2 */
    /* optional: missing ones degrade gracefully */
    shp_CUresult (*cuDriverGetVersion)(int *);
    shp_CUresult (*cuDeviceGetName)(char *, int, shp_CUdevice);
    shp_CUresult (*cuCtxGetDevice)(shp_CUdevice *);
    shp_CUresult (*cuGetErrorName)(shp_CUresult, const char **);
    shp_CUresult (*cuGetErrorString)(shp_CUresult, const char **);
    /* optional, for GPU time and cache="cold" (cudatime.c); ABI names checked
     * against cuda.h: only cuEventDestroy and the allocation calls are versioned */
    shp_CUresult (*cuEventCreate)(shp_CUevent *, unsigned int);
    shp_CUresult (*cuEventRecord)(shp_CUevent, shp_CUstream);
    shp_CUresult (*cuEventElapsedTime)(float *, shp_CUevent, shp_CUevent);
    shp_CUresult (*cuEventDestroy)(shp_CUevent);                    /* _v2 */
    shp_CUresult (*cuStreamSynchronize)(shp_CUstream);
    shp_CUresult (*cuDeviceGetAttribute)(int *, int, shp_CUdevice);
    shp_CUresult (*cuMemAlloc)(shp_CUdeviceptr *, size_t);          /* _v2 */
    shp_CUresult (*cuMemFree)(shp_CUdeviceptr);                     /* _v2 */
    shp_CUresult (*cuMemsetD8Async)(shp_CUdeviceptr, unsigned char, size_t, shp_CUstream);
    shp_CUresult (*cuDeviceGetPCIBusId)(char *, int, shp_CUdevice);
    /* primary contexts this module retained, released at module teardown */
    shp_CUcontext primary[SHP_MAX_CUDA_DEVICES];
    /* serialises loading and retaining (which run without the GIL); made at
     * the first use, under the GIL; never waited for with the GIL held */
    PyThread_type_lock mu;
} shp_cuda;

/* ---- NVML table (nvml.c) ------------------------------------------------ */

typedef int shp_nvmlReturn;
typedef struct shp_nvmlDevice_st *shp_nvmlDevice;

typedef struct {
    void *lib;
    int load_state;            /* 0 not tried, 1 ready, -1 unavailable */
    char why[256];
    void *lock;                /* PyThread_type_lock around the load */
    /* required */
    shp_nvmlReturn (*nvmlInit)(void);                                        /* _v2 */
    shp_nvmlReturn (*nvmlShutdown)(void);
    shp_nvmlReturn (*nvmlDeviceGetHandleByIndex)(unsigned int, shp_nvmlDevice *); /* _v2 */
    /* optional: each missing one makes its readings "not available" */
    shp_nvmlReturn (*nvmlDeviceGetHandleByPciBusId)(const char *, shp_nvmlDevice *); /* _v2 */
    shp_nvmlReturn (*nvmlDeviceGetClockInfo)(shp_nvmlDevice, int, unsigned int *);
    shp_nvmlReturn (*nvmlDeviceGetClocksEventReasons)(shp_nvmlDevice, unsigned long long *);
    shp_nvmlReturn (*nvmlDeviceGetTemperature)(shp_nvmlDevice, int, unsigned int *);
    shp_nvmlReturn (*nvmlDeviceGetPowerUsage)(shp_nvmlDevice, unsigned int *);
    shp_nvmlReturn (*nvmlDeviceGetComputeRunningProcesses)(shp_nvmlDevice, unsigned int *, void *);
    int process_info_size;     /* 24 for the _v3 / _v2 layout, 16 for the first */
} shp_nvml;

/* ---- cuda.c: the driver ------------------------------------------------- */

/* Load the driver once (lazily).  Returns 1 ready, 0 unavailable (reason in
 * st->cuda.why; no exception), never raises. */
int shp_cuda_load(shp_state *st);

/*
 * What the harness syncs: the context current on the calling thread when it
 * belongs to the wanted device, else that device's retained primary context,
 * pushed around the harness's own calls (never a new context).
 */
typedef struct {
    int ordinal;              /* device ordinal, >= 0 */
    int explicit_ordinal;     /* the label named the ordinal */
    shp_CUcontext primary;    /* retained primary context of `ordinal` */
} shp_cuda_target;

/* Resolve a target for `ordinal` (-1: current context's device, else 0).
 * -1 with RuntimeError (saying: pass sync_fn or use device="CPU") when no
 * driver or no such device; ValueError when the ordinal is out of range. */
int shp_cuda_target_init(shp_state *st, int ordinal, shp_cuda_target *t);

/* Synchronise the target's context.  Needs no GIL; returns the CUresult. */
shp_CUresult shp_cuda_sync_nogil(shp_state *st, const shp_cuda_target *t);

/* Device memory of the target's device in bytes.  Needs no GIL. */
shp_CUresult shp_cuda_meminfo_nogil(shp_state *st, const shp_cuda_target *t,
                                    size_t *free_b, size_t *total_b);

/* Run fn(&st->cuda, arg) with the target's context current: the thread's
 * own when it fits, else the primary context pushed around the call and
 * popped after it (also after a failure).  Needs no GIL; fn must not touch
 * Python.  Returns fn's CUresult, or the binding's when that failed. */
typedef shp_CUresult (*shp_cuda_bound_fn)(const shp_cuda *c, void *arg);
shp_CUresult shp_cuda_call_nogil(shp_state *st, const shp_cuda_target *t, shp_cuda_bound_fn fn,
                                 void *arg);

/* Set RuntimeError "<what>: CUDA_ERROR_X (code): description"; returns -1. */
int shp_cuda_raise(shp_state *st, shp_CUresult rc, const char *what);

/* cudafork.c.  Module exec: register (os.register_at_fork) the child handler that marks
 * CUDA unavailable in a fork child when the parent had started the driver
 * (or was starting it), abandoning a driver lock held by a thread the child
 * lacks.  Holds the module weakly.  0, or -1 with an exception. */
int shp_cuda_register_at_fork(PyObject *module);

/* Release retained primary contexts.  The driver stays loaded once cuInit
 * succeeded: it runs threads and exit hooks of its own. */
void shp_cuda_teardown(shp_state *st);

/* ---- device.c ----------------------------------------------------------- */

typedef enum {
    SHP_DEV_CPU = 0, SHP_DEV_CUDA = 1, SHP_DEV_MPS = 2,
    SHP_DEV_OTHER = 3         /* an accelerator we cannot sync ("gpu", "xpu", ...) */
} shp_device_kind;

typedef struct {
    shp_device_kind kind;
    int ordinal;              /* CUDA: the ordinal after ':', -1 when none */
    PyObject *label;          /* borrowed: the label parsed (for messages) */
} shp_device;

/*
 * Read a device label (a str): a label containing "cuda" (any case) is
 * CUDA, "cuda:N" names ordinal N; "mps" / "mps:..." is MPS; "gpu", "xpu",
 * "rocm", "npu" and the other names of device.c's list (any case, ":N"
 * allowed) are SHP_DEV_OTHER; anything else the CPU.  0, or -1 with ValueError for a malformed ordinal ("cuda:x"; *out
 * then still says CUDA) or the str's UnicodeEncodeError (*out says CPU).
 */
int shp_device_parse(PyObject *label, shp_device *out);

/* ---- cudatime.c: GPU time by CUDA events, the device L2 flush ----------- */

/*
 * Per-benchmark GPU instruments on one target and stream.  Events are
 * recorded around each timed call on `stream` (NULL: the legacy default
 * stream); the L2 buffer is memset on that stream before a cold call.
 */
typedef struct {
    shp_CUstream stream;
    shp_CUevent start, end;
    int events;                 /* events created: GPU time is measured */
    shp_CUdeviceptr l2_buf;
    size_t l2_bytes;            /* > 0: the L2 flush is ready */
    unsigned char fill;         /* memset value, changed every flush */
} shp_cuda_timer;

/* Create the two events.  0 and g->events = 1; 0 and g->events = 0 with
 * *why filled (missing entry points, or cuEventCreate failing: the run goes
 * on with wall time alone); never raises.  Takes the GIL as given and
 * releases it around the driver calls. */
int shp_cuda_timer_events(shp_state *st, const shp_cuda_target *t, shp_cuda_timer *g,
                          char *why, size_t why_size);
/* Allocate the L2 flush buffer (L2 size from cuDeviceGetAttribute).  0, or
 * -1 with RuntimeError (cache="cold" was asked for and cannot be given). */
int shp_cuda_timer_l2(shp_state *st, const shp_cuda_target *t, shp_cuda_timer *g);
/* Record the start event.  Needs no GIL; the CUresult. */
shp_CUresult shp_cuda_timer_start_nogil(shp_state *st, const shp_cuda_target *t,
                                        shp_cuda_timer *g);
/* Record the end event, then synchronise the context.  Needs no GIL. */
shp_CUresult shp_cuda_timer_stop_sync_nogil(shp_state *st, const shp_cuda_target *t,
                                            shp_cuda_timer *g);
/* Elapsed ms between the two (both complete after the sync).  No GIL. */
shp_CUresult shp_cuda_timer_elapsed_nogil(shp_state *st, const shp_cuda_target *t,
                                          shp_cuda_timer *g, float *ms);
/* Write the L2 flush buffer on the stream and wait for it.  No GIL. */
shp_CUresult shp_cuda_l2_flush_nogil(shp_state *st, const shp_cuda_target *t, shp_cuda_timer *g);
/* The PCI bus id of a CUDA device ("0000:65:00.0") into buf; 0, or -1
 * (no exception) when the driver cannot say.  Needs no context. */
int shp_cuda_pci_bus_id(shp_state *st, int ordinal, char *buf, int n);
/* Destroy the events and free the buffer (GIL released inside); never
 * fails (a failure at teardown only leaks device memory). */
void shp_cuda_timer_free(shp_state *st, const shp_cuda_target *t, shp_cuda_timer *g);

/* ---- nvml.c: clocks, throttling, temperature, power, per-process memory -- */

#define SHP_NVML_PERIOD_NS 50000000LL   /* at most 20 samples a second */
#define SHP_NVML_CLOCK_MOVE 0.10        /* warn when the SM clock moved > 10% */
/* Throttle reasons that slow a benchmark down (idle, application clocks and
 * display clocks are not slowdowns, and sync boost is a multi-GPU policy). */
#define SHP_NVML_SLOWDOWNS 0xECULL       /* SwPowerCap, HwSlowdown, Sw/HwThermal, PowerBrake */

/* What NVML saw of one device during one benchmark; -1: not available. */
typedef struct {
    shp_nvmlDevice dev;         /* NULL: NVML unavailable for this device */
    const char *why;            /* when dev is NULL: why (static storage) */
    long long clock_start, clock_end, clock_min, clock_max;   /* MHz */
    long long temp_start, temp_end, temp_max;                 /* C */
    long long power_start, power_end, power_max;              /* mW */
    unsigned long long reasons;  /* every throttle reason seen (OR) */
    int reasons_ok;
    Py_ssize_t samples;
    int64_t last_ns;
    /* per-process memory, read at the end */
    long long proc_bytes;        /* this process; -1 unknown */
    Py_ssize_t others;           /* other processes on the device; -1 unknown */
    long long others_bytes;
} shp_nvml_watch;

/* Load NVML once (libnvidia-ml.so.1 / nvml.dll / SPATIALHUB_LIBNVML) and
 * call nvmlInit_v2, with the GIL released around both under a lock.
 * 1 ready, 0 unavailable (reason in st->nvml.why); never raises; call with
 * the GIL held. */
int shp_nvml_load(shp_state *st);
/* Start watching CUDA device `ordinal` (NVML found by its PCI bus id when
 * given, else by index): the first sample.  Never fails (an unavailable
 * NVML leaves w->dev NULL); releases the GIL around the NVML calls. */
void shp_nvml_watch_begin(shp_state *st, shp_nvml_watch *w, int ordinal, const char *pci_bus_id,
                          int64_t now);
/* A sample, unless the last one is under SHP_NVML_PERIOD_NS older than `now`
 * (the caller's clock; force: take it anyway).  Never fails; releases the GIL when it samples. */
void shp_nvml_watch_sample(shp_state *st, shp_nvml_watch *w, int64_t now, int force);
/* The last sample and the per-process memory.  Never fails. */
void shp_nvml_watch_end(shp_state *st, shp_nvml_watch *w);
/* The gpu_telemetry dict of a watch (new reference), or NULL with an error. */
PyObject *shp_nvml_watch_dict(const shp_nvml_watch *w);
/* Names of the reasons in `mask`, comma-separated, into buf. */
void shp_nvml_reason_names(unsigned long long mask, char *buf, size_t n);
/* nvmlShutdown once loaded (module teardown). */
void shp_nvml_teardown(shp_state *st);

#endif /* SHP_GPU_GPU_H */
