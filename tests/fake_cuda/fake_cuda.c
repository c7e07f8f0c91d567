/*
 * fake_cuda.c -- a stand-in for libcuda.so.1, for the tests.
 *
 * It exports the Driver API entry points the profiling module resolves, with
 * the semantics the module relies on, so the CUDA paths can be proven on a
 * machine without a GPU:
 *   - cuInit must come first (else CUDA_ERROR_NOT_INITIALIZED); FAKE_CUDA_MODE
 *     =stub makes every call return CUDA_ERROR_STUB_LIBRARY (34), =nodevice
 *     makes cuInit return CUDA_ERROR_NO_DEVICE (100);
 *   - FAKE_CUDA_DEVICES devices (default 1), named "Fake GPU <n>", driver
 *     version 12040, 80 GiB each with 1 GiB in use by "other processes";
 *   - a per-thread stack of current contexts; calls that need a context
 *     return CUDA_ERROR_INVALID_CONTEXT (201) without one;
 *   - one primary context per device, retained / released with a count;
 *     cuCtxCreate_v2 only counts and fails, so tests can prove it is unused;
 *   - asynchronous work: fake_enqueue_ns() adds "kernel" time to the current
 *     context and returns at once; cuCtxSynchronize waits until it is done;
 *   - allocations (fake_alloc / fake_free) that move cuMemGetInfo_v2;
 *   - fake_inject_sticky(code): every later sync returns that code;
 *   - call counters, read with fake_count("cuCtxSynchronize");
 *   - FAKE_CUDA_SLOW_MS=n: cuInit and cuDevicePrimaryCtxRetain take n ms
 *     (outside the lock), as a real driver's start-up does.
 *   - streams (fake_stream_create) with queues of their own, events whose
 *     recorded time is when the work queued before them on their stream
 *     finishes, device attributes (the L2 size), cuMemAlloc_v2 / cuMemFree_v2
 *     and cuMemsetD8Async (queued work at FAKE_BYTES_PER_NS);
 *   - fake_fail("cuEventCreate", code): that entry point returns code from
 *     now on (0 clears), for the failure paths.
 * State is process-wide behind one mutex, except the context stacks, which
 * are per thread as in the real driver.
 *
 * Build: cc -shared -fPIC -O1 -pthread fake_cuda.c -o libfakecuda.so
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../fake_common/fake_common.h"

typedef int CUresult;
typedef int CUdevice;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_STUB_LIBRARY = 34,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    CUDA_ERROR_NOT_SUPPORTED = 801,
};

enum { MODE_OK = 0, MODE_STUB = 1, MODE_NODEVICE = 2 };

#define FAKE_MAX_DEVICES 16
#define FAKE_STACK_DEPTH 32
#define FAKE_TOTAL_BYTES (80ULL << 30)
#define FAKE_OTHER_BYTES (1ULL << 30)
#define FAKE_L2_BYTES (50 << 20)       /* an H100's L2 */
#define FAKE_BYTES_PER_NS 1000         /* 1 TB/s memset */
#define FAKE_MAX_STREAMS 16
#define FAKE_MAX_EVENTS 64
#define FAKE_MAX_ALLOCS 64
#define CU_DEVICE_ATTRIBUTE_CLOCK_RATE 13
#define CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE 38

struct fake_ctx {
    int device;
    int refcount;              /* primary context retain count */
    long long busy_until_ns;   /* when the queued work finishes */
};
typedef struct fake_ctx *CUcontext;
typedef unsigned long long CUdeviceptr;

/* A stream other than the legacy default one: its own queue. */
struct fake_stream {
    struct fake_ctx *ctx;      /* NULL: free slot */
    long long busy_until_ns;
};
typedef struct fake_stream *CUstream;

struct fake_event {
    int used;
    struct fake_ctx *ctx;
    int recorded;
    long long at_ns;           /* when the work before it finishes */
};
typedef struct fake_event *CUevent;

static pthread_mutex_t fake_mu = PTHREAD_MUTEX_INITIALIZER;
static int fake_configured;
static int fake_mode = MODE_OK;
static int fake_ndev = 1;
static int fake_initialized;
static int fake_sticky;
static struct fake_ctx fake_primary[FAKE_MAX_DEVICES];
static unsigned long long fake_used[FAKE_MAX_DEVICES];
static struct fake_stream fake_streams[FAKE_MAX_STREAMS];
static struct fake_event fake_events[FAKE_MAX_EVENTS];
static struct {
    CUdeviceptr ptr;
    size_t bytes;
    int device;
} fake_allocs[FAKE_MAX_ALLOCS];
static CUdeviceptr fake_next_ptr = 0x10000000ULL;
static int fake_l2_bytes = FAKE_L2_BYTES;
static long long fake_last_memset_bytes = -1;
static int fake_events_live;

static __thread CUcontext fake_stack[FAKE_STACK_DEPTH];
static __thread int fake_depth;

static const char *const fake_counter_names[] = {
    "cuInit", "cuDriverGetVersion", "cuDeviceGetCount", "cuDeviceGet",
    "cuDeviceGetName", "cuCtxGetCurrent", "cuCtxGetDevice", "cuCtxPushCurrent_v2",
    "cuCtxPopCurrent_v2", "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease_v2",
    "cuCtxSynchronize", "cuMemGetInfo_v2", "cuMemGetInfo", "cuCtxCreate_v2",
    "cuCtxCreate", "cuGetErrorName", "cuGetErrorString",
    "cuEventCreate", "cuEventRecord", "cuEventElapsedTime",
    "cuEventSynchronize", "cuEventDestroy_v2", "cuStreamSynchronize", "cuDeviceGetAttribute",
    "cuMemAlloc_v2", "cuMemFree_v2", "cuMemsetD8Async", "cuMemsetD8_v2", "cuDeviceGetPCIBusId",
    "cuMemcpyDtoDAsync_v2",
};
/* fake_fail(): the code each counted entry point returns instead (0: none). */
static int fake_fail_codes[sizeof(fake_counter_names) / sizeof(fake_counter_names[0])];
#define FAKE_NCOUNTERS (sizeof(fake_counter_names) / sizeof(fake_counter_names[0]))
static long long fake_counters[FAKE_NCOUNTERS];

static long long
fake_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Read the environment once; callers hold fake_mu. */
static void
fake_configure_locked(void)
{
    const char *m;
    int n;

    if (fake_configured) {
        return;
    }
    fake_configured = 1;
    m = getenv("FAKE_CUDA_MODE");
    if (m != NULL && strcmp(m, "stub") == 0) {
        fake_mode = MODE_STUB;
    }
    else if (m != NULL && strcmp(m, "nodevice") == 0) {
        fake_mode = MODE_NODEVICE;
    }
    fake_env_int("FAKE_CUDA_L2_BYTES", &fake_l2_bytes);
    if (fake_env_int("FAKE_CUDA_DEVICES", &n)) {
        fake_ndev = n < 0 ? 0 : n > FAKE_MAX_DEVICES ? FAKE_MAX_DEVICES : n;
    }
    for (int i = 0; i < FAKE_MAX_DEVICES; i++) {
        fake_primary[i].device = i;
        fake_used[i] = FAKE_OTHER_BYTES;
    }
}

/* Value of a counter; -1 for a name not counted.  Callers hold fake_mu. */
static long long
fake_counter_locked(const char *name)
{
    for (size_t i = 0; name != NULL && i < FAKE_NCOUNTERS; i++) {
        if (strcmp(fake_counter_names[i], name) == 0) {
            return fake_counters[i];
        }
    }
    return -1;
}

static void
fake_count_locked(const char *name)
{
    for (size_t i = 0; i < FAKE_NCOUNTERS; i++) {
        if (strcmp(fake_counter_names[i], name) == 0) {
            fake_counters[i]++;
            return;
        }
    }
}

/*
 * Common prologue: lock, configure, count, and the checks every driver call
 * makes.  Returns CUDA_SUCCESS with the lock held, or an error with it
 * released.
 */
static CUresult
fake_enter(const char *name, int needs_init)
{
    pthread_mutex_lock(&fake_mu);
    fake_configure_locked();
    fake_count_locked(name);
    if (fake_mode == MODE_STUB) {
        pthread_mutex_unlock(&fake_mu);
        return CUDA_ERROR_STUB_LIBRARY;
    }
    if (needs_init && !fake_initialized) {
        pthread_mutex_unlock(&fake_mu);
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    for (size_t i = 0; i < FAKE_NCOUNTERS; i++) {
        if (fake_fail_codes[i] != 0 && strcmp(fake_counter_names[i], name) == 0) {
            int code = fake_fail_codes[i];

            pthread_mutex_unlock(&fake_mu);
            return code;
        }
    }
    return CUDA_SUCCESS;
}

static CUresult
fake_leave(CUresult rc)
{
    pthread_mutex_unlock(&fake_mu);
    return rc;
}

/* The thread's current context, if it is usable (a released primary is not). */
static CUcontext
fake_current(void)
{
    CUcontext c = fake_depth > 0 ? fake_stack[fake_depth - 1] : NULL;

    return (c != NULL && c->refcount > 0) ? c : NULL;
}

/* FAKE_CUDA_SLOW_MS: the start-up latency of a real driver, spent before
 * the lock is taken (a real driver's other threads are not blocked). */
static void
fake_slow_start(void)
{
    const char *ms = getenv("FAKE_CUDA_SLOW_MS");
    long n = ms != NULL ? atol(ms) : 0;

    if (n > 0) {
        struct timespec ts = {n / 1000, (n % 1000) * 1000000L};

        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
}

/* ---- the Driver API ------------------------------------------------------ */

EXPORT CUresult
cuInit(unsigned int flags)
{
    CUresult rc;

    fake_slow_start();
    rc = fake_enter("cuInit", 0);

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    if (flags != 0) {
        return fake_leave(CUDA_ERROR_INVALID_VALUE);
    }
    if (fake_mode == MODE_NODEVICE) {
        return fake_leave(CUDA_ERROR_NO_DEVICE);
    }
    fake_initialized = 1;
    return fake_leave(CUDA_SUCCESS);
}

EXPORT CUresult
cuDriverGetVersion(int *version)
{
    CUresult rc = fake_enter("cuDriverGetVersion", 0);

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    if (version == NULL) {
        return fake_leave(CUDA_ERROR_INVALID_VALUE);
    }
    *version = 12040;
    return fake_leave(CUDA_SUCCESS);
}

EXPORT CUresult
cuDeviceGetCount(int *count)
{
    CUresult rc = fake_enter("cuDeviceGetCount", 1);

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    if (count == NULL) {
        return fake_leave(CUDA_ERROR_INVALID_VALUE);
    }
    *count = fake_ndev;
    return fake_leave(CUDA_SUCCESS);
}

EXPORT CUresult
cuDeviceGet(CUdevice *dev, int ordinal)
{
    CUresult rc = fake_enter("cuDeviceGet", 1);

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    if (dev == NULL) {
        return fake_leave(CUDA_ERROR_INVALID_VALUE);
    }
    if (ordinal < 0 || ordinal >= fake_ndev) {
        return fake_leave(CUDA_ERROR_INVALID_DEVICE);
    }
    *dev = ordinal;
    return fake_leave(CUDA_SUCCESS);
}

EXPORT CUresult
cuDeviceGetName(char *name, int len, CUdevice dev)
{
    CUresult rc = fake_enter("cuDeviceGetName", 1);

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    if (name == NULL || len <= 0) {
        return fake_leave(CUDA_ERROR_INVALID_VALUE);
    }
    if (dev < 0 || dev >= fake_ndev) {
        return fake_leave(CUDA_ERROR_INVALID_DEVICE);
    }
    snprintf(name, (size_t)len, "Fake GPU %d", dev);
    return fake_leave(CUDA_SUCCESS);
}

EXPORT CUresult
cuCtxGetCurrent(CUcontext *ctx)
{
    CUresult rc = fake_enter("cuCtxGetCurrent", 1);

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    if (ctx == NULL) {
        return fake_leave(CUDA_ERROR_INVALID_VALUE);
    }
    *ctx = fake_depth > 0 ? fake_stack[fake_depth - 1] : NULL;
    return fake_leave(CUDA_SUCCESS);
}

EXPORT CUresult
cuCtxGetDevice(CUdevice *dev)
{
    CUresult rc = fake_enter("cuCtxGetDevice", 1);
    CUcontext c;

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    if (dev == NULL) {
        return fake_leave(CUDA_ERROR_INVALID_VALUE);
    }
    c = fake_current();
    if (c == NULL) {
        return fake_leave(CUDA_ERROR_INVALID_CONTEXT);
    }
    *dev = c->device;
    return fake_leave(CUDA_SUCCESS);
}

EXPORT CUresult
cuCtxPushCurrent_v2(CUcontext ctx)
{
    CUresult rc = fake_enter("cuCtxPushCurrent_v2", 1);

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    if (ctx == NULL || ctx < &fake_primary[0] || ctx >= &fake_primary[FAKE_MAX_DEVICES]
        || ctx->refcount <= 0) {
        return fake_leave(CUDA_ERROR_INVALID_CONTEXT);
    }
    if (fake_depth >= FAKE_STACK_DEPTH) {
        return fake_leave(CUDA_ERROR_OUT_OF_MEMORY);
    }
    fake_stack[fake_depth++] = ctx;
    return fake_leave(CUDA_SUCCESS);
}

EXPORT CUresult
cuCtxPopCurrent_v2(CUcontext *ctx)
{
    CUresult rc = fake_enter("cuCtxPopCurrent_v2", 1);
    CUcontext c;

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    if (fake_depth == 0) {
        return fake_leave(CUDA_ERROR_INVALID_CONTEXT);
    }
    c = fake_stack[--fake_depth];
    if (ctx != NULL) {
        *ctx = c;
    }
    return fake_leave(CUDA_SUCCESS);
}

EXPORT CUresult
cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev)
{
    CUresult rc;

    fake_slow_start();
    rc = fake_enter("cuDevicePrimaryCtxRetain", 1);

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    if (ctx == NULL) {
        return fake_leave(CUDA_ERROR_INVALID_VALUE);
    }
    if (dev < 0 || dev >= fake_ndev) {
        return fake_leave(CUDA_ERROR_INVALID_DEVICE);
    }
    fake_primary[dev].refcount++;
    *ctx = &fake_primary[dev];
    return fake_leave(CUDA_SUCCESS);
}

EXPORT CUresult
cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    CUresult rc = fake_enter("cuDevicePrimaryCtxRelease_v2", 1);

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    if (dev < 0 || dev >= fake_ndev) {
        return fake_leave(CUDA_ERROR_INVALID_DEVICE);
    }
    if (fake_primary[dev].refcount <= 0) {
        return fake_leave(CUDA_ERROR_INVALID_CONTEXT);
    }
    fake_primary[dev].refcount--;
    return fake_leave(CUDA_SUCCESS);
}

/* Creating contexts is what the harness must never do: count, then refuse. */
EXPORT CUresult
cuCtxCreate_v2(CUcontext *ctx, unsigned int flags, CUdevice dev)
{
    CUresult rc = fake_enter("cuCtxCreate_v2", 1);

    (void)ctx;
    (void)flags;
    (void)dev;
    return rc != CUDA_SUCCESS ? rc : fake_leave(CUDA_ERROR_NOT_SUPPORTED);
}

EXPORT CUresult
cuCtxCreate(CUcontext *ctx, unsigned int flags, CUdevice dev)
{
    CUresult rc = fake_enter("cuCtxCreate", 1);

    (void)ctx;
    (void)flags;
    (void)dev;
    return rc != CUDA_SUCCESS ? rc : fake_leave(CUDA_ERROR_NOT_SUPPORTED);
}

EXPORT CUresult
cuCtxSynchronize(void)
{
    CUresult rc = fake_enter("cuCtxSynchronize", 1);
    CUcontext c;
    long long deadline;
    struct timespec ts;

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    c = fake_current();
    if (c == NULL) {
        return fake_leave(CUDA_ERROR_INVALID_CONTEXT);
    }
    if (fake_sticky != 0) {
        return fake_leave(fake_sticky);
    }
    deadline = c->busy_until_ns;
    /* every stream of the context, as the real sync does */
    for (int i = 0; i < FAKE_MAX_STREAMS; i++) {
        if (fake_streams[i].ctx == c && fake_streams[i].busy_until_ns > deadline) {
            deadline = fake_streams[i].busy_until_ns;
        }
    }
    pthread_mutex_unlock(&fake_mu);
    /* Wait without the lock, so other threads may queue work or query. */
    ts.tv_sec = (time_t)(deadline / 1000000000LL);
    ts.tv_nsec = (long)(deadline % 1000000000LL);
    while (fake_now_ns() < deadline) {
        int e = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);

        if (e != 0 && e != EINTR) {
            break;
        }
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult
cuMemGetInfo_v2(size_t *free_b, size_t *total_b)
{
    CUresult rc = fake_enter("cuMemGetInfo_v2", 1);
    CUcontext c;

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    if (free_b == NULL || total_b == NULL) {
        return fake_leave(CUDA_ERROR_INVALID_VALUE);
    }
    c = fake_current();
    if (c == NULL) {
        return fake_leave(CUDA_ERROR_INVALID_CONTEXT);
    }
    *total_b = (size_t)FAKE_TOTAL_BYTES;
    *free_b = (size_t)(FAKE_TOTAL_BYTES - fake_used[c->device]);
    return fake_leave(CUDA_SUCCESS);
}

/* The legacy 32-bit ABI: exported only so tests can prove it is never used. */
EXPORT CUresult
cuMemGetInfo(unsigned int *free_b, unsigned int *total_b)
{
    CUresult rc = fake_enter("cuMemGetInfo", 1);

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    if (free_b != NULL) {
        *free_b = 0;
    }
    if (total_b != NULL) {
        *total_b = 0;
    }
    return fake_leave(CUDA_ERROR_NOT_SUPPORTED);
}

/* Sleep until the monotonic clock reaches deadline (ns); no lock held. */
static void
fake_wait_until(long long deadline)
{
    struct timespec ts;

    ts.tv_sec = (time_t)(deadline / 1000000000LL);
    ts.tv_nsec = (long)(deadline % 1000000000LL);
    while (fake_now_ns() < deadline) {
        int e = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);

        if (e != 0 && e != EINTR) {
            break;
        }
    }
}

/* The queue a stream handle names in context c: NULL is the legacy default
 * stream (the context's own queue).  NULL pointer when the handle is not a
 * stream of c.  Callers hold fake_mu. */
static long long *
fake_queue_locked(struct fake_ctx *c, CUstream s)
{
    if (s == NULL) {
        return &c->busy_until_ns;
    }
    if (s < &fake_streams[0] || s >= &fake_streams[FAKE_MAX_STREAMS] || s->ctx != c) {
        return NULL;
    }
    return &s->busy_until_ns;
}

EXPORT CUresult
cuDeviceGetAttribute(int *value, int attrib, CUdevice dev)
{
    CUresult rc = fake_enter("cuDeviceGetAttribute", 1);

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    if (value == NULL) {
        return fake_leave(CUDA_ERROR_INVALID_VALUE);
    }
    if (dev < 0 || dev >= fake_ndev) {
        return fake_leave(CUDA_ERROR_INVALID_DEVICE);
    }
    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
        *value = fake_l2_bytes;
        return fake_leave(CUDA_SUCCESS);
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:
        *value = 1980000;   /* kHz */
        return fake_leave(CUDA_SUCCESS);
    default:
        return fake_leave(CUDA_ERROR_INVALID_VALUE);
    }
}

EXPORT CUresult
cuDeviceGetPCIBusId(char *buf, int len, CUdevice dev)
{
    CUresult rc = fake_enter("cuDeviceGetPCIBusId", 1);

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    if (buf == NULL || len < 13) {
        return fake_leave(CUDA_ERROR_INVALID_VALUE);
    }
    if (dev < 0 || dev >= fake_ndev) {
        return fake_leave(CUDA_ERROR_INVALID_DEVICE);
    }
    /* the fake's bus numbers run backwards, so a lookup by index would be wrong */
    snprintf(buf, (size_t)len, "00000000:%02X:00.0", 0x40 - dev);
    return fake_leave(CUDA_SUCCESS);
}

EXPORT CUresult
cuMemAlloc_v2(CUdeviceptr *ptr, size_t bytes)
{
    CUresult rc = fake_enter("cuMemAlloc_v2", 1);
    CUcontext c;

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    if (ptr == NULL || bytes == 0) {
        return fake_leave(CUDA_ERROR_INVALID_VALUE);
    }
    c = fake_current();
    if (c == NULL) {
        return fake_leave(CUDA_ERROR_INVALID_CONTEXT);
    }
    if (bytes > FAKE_TOTAL_BYTES - fake_used[c->device]) {
        return fake_leave(CUDA_ERROR_OUT_OF_MEMORY);
    }
    for (int i = 0; i < FAKE_MAX_ALLOCS; i++) {
        if (fake_allocs[i].ptr == 0) {
            fake_allocs[i].ptr = fake_next_ptr;
            fake_allocs[i].bytes = bytes;
            fake_allocs[i].device = c->device;
            fake_next_ptr += (bytes + 0xFFFFF) & ~0xFFFFFULL;
            fake_used[c->device] += bytes;
            *ptr = fake_allocs[i].ptr;
            return fake_leave(CUDA_SUCCESS);
        }
    }
    return fake_leave(CUDA_ERROR_OUT_OF_MEMORY);
}

EXPORT CUresult
cuMemFree_v2(CUdeviceptr ptr)
{
    CUresult rc = fake_enter("cuMemFree_v2", 1);

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    for (int i = 0; ptr != 0 && i < FAKE_MAX_ALLOCS; i++) {
        if (fake_allocs[i].ptr == ptr) {
            fake_used[fake_allocs[i].device] -= fake_allocs[i].bytes;
            fake_allocs[i].ptr = 0;
            return fake_leave(CUDA_SUCCESS);
        }
    }
    return fake_leave(CUDA_ERROR_INVALID_VALUE);
}

/* Bytes of device memory allocated with cuMemAlloc_v2 and not freed. */
EXPORT long long
fake_alloc_live_bytes(void)
{
    long long v = 0;

    pthread_mutex_lock(&fake_mu);
    for (int i = 0; i < FAKE_MAX_ALLOCS; i++) {
        if (fake_allocs[i].ptr != 0) {
            v += (long long)fake_allocs[i].bytes;
        }
    }
    pthread_mutex_unlock(&fake_mu);
    return v;
}

EXPORT CUresult
cuMemsetD8Async(CUdeviceptr ptr, unsigned char value, size_t n, CUstream s)
{
    CUresult rc = fake_enter("cuMemsetD8Async", 1);
    CUcontext c;
    long long *q, now = fake_now_ns();
    int ok = 0;

    (void)value;
    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    c = fake_current();
    if (c == NULL) {
        return fake_leave(CUDA_ERROR_INVALID_CONTEXT);
    }
    for (int i = 0; i < FAKE_MAX_ALLOCS; i++) {
        if (fake_allocs[i].ptr != 0 && ptr >= fake_allocs[i].ptr
            && ptr + n <= fake_allocs[i].ptr + fake_allocs[i].bytes) {
            ok = 1;
        }
    }
    q = fake_queue_locked(c, s);
    if (!ok || q == NULL) {
        return fake_leave(ok ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE);
    }
    *q = (*q > now ? *q : now) + (long long)(n / FAKE_BYTES_PER_NS);
    fake_last_memset_bytes = (long long)n;
    return fake_leave(CUDA_SUCCESS);
}

/* A device-to-device copy: n bytes read and n written, queued like memset. */
EXPORT CUresult
cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    CUresult rc = fake_enter("cuMemcpyDtoDAsync_v2", 1);
    CUcontext c;
    long long *q, now = fake_now_ns();

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    c = fake_current();
    if (c == NULL) {
        return fake_leave(CUDA_ERROR_INVALID_CONTEXT);
    }
    q = fake_queue_locked(c, s);
    if (q == NULL || dst == 0 || src == 0) {
        return fake_leave(CUDA_ERROR_INVALID_VALUE);
    }
    *q = (*q > now ? *q : now) + (long long)(2 * n / FAKE_BYTES_PER_NS);
    return fake_leave(CUDA_SUCCESS);
}

EXPORT long long
fake_last_memset(void)
{
    long long v;

    pthread_mutex_lock(&fake_mu);
    v = fake_last_memset_bytes;
    pthread_mutex_unlock(&fake_mu);
    return v;
}

EXPORT CUresult
cuStreamSynchronize(CUstream s)
{
    CUresult rc = fake_enter("cuStreamSynchronize", 1);
    CUcontext c;
    long long *q, deadline;

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    c = fake_current();
    if (c == NULL) {
        return fake_leave(CUDA_ERROR_INVALID_CONTEXT);
    }
    if (fake_sticky != 0) {
        return fake_leave(fake_sticky);
    }
    q = fake_queue_locked(c, s);
    if (q == NULL) {
        return fake_leave(CUDA_ERROR_INVALID_HANDLE);
    }
    deadline = *q;
    pthread_mutex_unlock(&fake_mu);
    fake_wait_until(deadline);
    return CUDA_SUCCESS;
}

EXPORT CUresult
cuEventCreate(CUevent *ev, unsigned int flags)
{
    CUresult rc = fake_enter("cuEventCreate", 1);
    CUcontext c;

    (void)flags;
    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    if (ev == NULL) {
        return fake_leave(CUDA_ERROR_INVALID_VALUE);
    }
    c = fake_current();
    if (c == NULL) {
        return fake_leave(CUDA_ERROR_INVALID_CONTEXT);
    }
    for (int i = 0; i < FAKE_MAX_EVENTS; i++) {
        if (!fake_events[i].used) {
            memset(&fake_events[i], 0, sizeof fake_events[i]);
            fake_events[i].used = 1;
            fake_events[i].ctx = c;
            fake_events_live++;
            *ev = &fake_events[i];
            return fake_leave(CUDA_SUCCESS);
        }
    }
    return fake_leave(CUDA_ERROR_OUT_OF_MEMORY);
}

static int
fake_event_ok(CUevent ev)
{
    return ev != NULL && ev >= &fake_events[0] && ev < &fake_events[FAKE_MAX_EVENTS] && ev->used;
}

EXPORT CUresult
cuEventDestroy_v2(CUevent ev)
{
    CUresult rc = fake_enter("cuEventDestroy_v2", 1);

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    if (!fake_event_ok(ev)) {
        return fake_leave(CUDA_ERROR_INVALID_HANDLE);
    }
    ev->used = 0;
    fake_events_live--;
    return fake_leave(CUDA_SUCCESS);
}

/* Events created and not destroyed. */
EXPORT int
fake_live_events(void)
{
    int v;

    pthread_mutex_lock(&fake_mu);
    v = fake_events_live;
    pthread_mutex_unlock(&fake_mu);
    return v;
}

EXPORT CUresult
cuEventRecord(CUevent ev, CUstream s)
{
    CUresult rc = fake_enter("cuEventRecord", 1);
    CUcontext c;
    long long *q, now = fake_now_ns();

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    c = fake_current();
    if (c == NULL) {
        return fake_leave(CUDA_ERROR_INVALID_CONTEXT);
    }
    if (!fake_event_ok(ev) || ev->ctx != c) {
        return fake_leave(CUDA_ERROR_INVALID_HANDLE);
    }
    q = fake_queue_locked(c, s);
    if (q == NULL) {
        return fake_leave(CUDA_ERROR_INVALID_HANDLE);
    }
    /* the event completes when the work queued before it on s does */
    ev->at_ns = *q > now ? *q : now;
    ev->recorded = 1;
    return fake_leave(CUDA_SUCCESS);
}

EXPORT CUresult
cuEventSynchronize(CUevent ev)
{
    CUresult rc = fake_enter("cuEventSynchronize", 1);
    long long deadline;

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    if (!fake_event_ok(ev)) {
        return fake_leave(CUDA_ERROR_INVALID_HANDLE);
    }
    deadline = ev->recorded ? ev->at_ns : 0;
    pthread_mutex_unlock(&fake_mu);
    fake_wait_until(deadline);
    return CUDA_SUCCESS;
}

static CUresult
fake_elapsed(const char *name, float *ms, CUevent a, CUevent b)
{
    CUresult rc = fake_enter(name, 1);
    long long now = fake_now_ns();

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    if (ms == NULL) {
        return fake_leave(CUDA_ERROR_INVALID_VALUE);
    }
    if (!fake_event_ok(a) || !fake_event_ok(b) || !a->recorded || !b->recorded) {
        return fake_leave(CUDA_ERROR_INVALID_HANDLE);
    }
    if (a->at_ns > now || b->at_ns > now) {
        return fake_leave(CUDA_ERROR_NOT_READY);
    }
    *ms = (float)((double)(b->at_ns - a->at_ns) / 1e6);
    return fake_leave(CUDA_SUCCESS);
}

EXPORT CUresult
cuEventElapsedTime(float *ms, CUevent a, CUevent b)
{
    return fake_elapsed("cuEventElapsedTime", ms, a, b);
}

static const struct {
    int code;
    const char *name;
    const char *text;
} fake_errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY",
     "CUDA driver is a stub library"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
};

static CUresult
fake_lookup_error(const char *counter, CUresult code, const char **out, int want_text)
{
    CUresult rc = fake_enter(counter, 0);

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    if (out == NULL) {
        return fake_leave(CUDA_ERROR_INVALID_VALUE);
    }
    for (size_t i = 0; i < sizeof(fake_errors) / sizeof(fake_errors[0]); i++) {
        if (fake_errors[i].code == code) {
            *out = want_text ? fake_errors[i].text : fake_errors[i].name;
            return fake_leave(CUDA_SUCCESS);
        }
    }
    *out = NULL;
    return fake_leave(CUDA_ERROR_INVALID_VALUE);
}

EXPORT CUresult
cuGetErrorName(CUresult code, const char **name)
{
    return fake_lookup_error("cuGetErrorName", code, name, 0);
}

EXPORT CUresult
cuGetErrorString(CUresult code, const char **text)
{
    return fake_lookup_error("cuGetErrorString", code, text, 1);
}

/* ---- control functions for the tests -------------------------------------- */

/* Queue ns of "kernel" time on the current context; returns at once. */
EXPORT int
fake_enqueue_ns(long long ns)
{
    CUcontext c;
    long long now = fake_now_ns();

    pthread_mutex_lock(&fake_mu);
    fake_configure_locked();
    c = fake_current();
    if (c == NULL) {
        return fake_leave(CUDA_ERROR_INVALID_CONTEXT);
    }
    c->busy_until_ns = (c->busy_until_ns > now ? c->busy_until_ns : now) + ns;
    return fake_leave(CUDA_SUCCESS);
}

/* Queue work on a device's primary context from any thread (work launched
 * by somebody else, e.g. a framework's worker thread). */
EXPORT int
fake_enqueue_device_ns(int dev, long long ns)
{
    long long now = fake_now_ns();
    struct fake_ctx *c;

    pthread_mutex_lock(&fake_mu);
    fake_configure_locked();
    if (dev < 0 || dev >= fake_ndev) {
        return fake_leave(CUDA_ERROR_INVALID_DEVICE);
    }
    c = &fake_primary[dev];
    c->busy_until_ns = (c->busy_until_ns > now ? c->busy_until_ns : now) + ns;
    return fake_leave(CUDA_SUCCESS);
}

/* A stream of the current context with a queue of its own (like one made
 * with CU_STREAM_NON_BLOCKING); NULL when none is free. */
EXPORT CUstream
fake_stream_create(void)
{
    CUcontext c;

    pthread_mutex_lock(&fake_mu);
    fake_configure_locked();
    c = fake_current();
    for (int i = 0; c != NULL && i < FAKE_MAX_STREAMS; i++) {
        if (fake_streams[i].ctx == NULL) {
            fake_streams[i].ctx = c;
            fake_streams[i].busy_until_ns = 0;
            pthread_mutex_unlock(&fake_mu);
            return &fake_streams[i];
        }
    }
    pthread_mutex_unlock(&fake_mu);
    return NULL;
}

/* Queue ns of work on stream s (NULL: the legacy stream) of the current context. */
EXPORT int
fake_enqueue_stream_ns(CUstream s, long long ns)
{
    CUcontext c;
    long long *q, now = fake_now_ns();

    pthread_mutex_lock(&fake_mu);
    fake_configure_locked();
    c = fake_current();
    q = c != NULL ? fake_queue_locked(c, s) : NULL;
    if (q == NULL) {
        return fake_leave(CUDA_ERROR_INVALID_HANDLE);
    }
    *q = (*q > now ? *q : now) + ns;
    return fake_leave(CUDA_SUCCESS);
}

/* From now on the named entry point returns code (0 restores it); -1 for
 * a name not counted. */
EXPORT int
fake_fail(const char *name, int code)
{
    pthread_mutex_lock(&fake_mu);
    fake_configure_locked();
    for (size_t i = 0; name != NULL && i < FAKE_NCOUNTERS; i++) {
        if (strcmp(fake_counter_names[i], name) == 0) {
            fake_fail_codes[i] = code;
            pthread_mutex_unlock(&fake_mu);
            return 0;
        }
    }
    pthread_mutex_unlock(&fake_mu);
    return -1;
}

/* Simulated cuMemAlloc / cuMemFree on the current context's device. */
EXPORT int
fake_alloc(size_t bytes)
{
    CUcontext c;

    pthread_mutex_lock(&fake_mu);
    fake_configure_locked();
    c = fake_current();
    if (c == NULL) {
        return fake_leave(CUDA_ERROR_INVALID_CONTEXT);
    }
    if (bytes > FAKE_TOTAL_BYTES - fake_used[c->device]) {
        return fake_leave(CUDA_ERROR_OUT_OF_MEMORY);
    }
    fake_used[c->device] += bytes;
    return fake_leave(CUDA_SUCCESS);
}

EXPORT int
fake_free(size_t bytes)
{
    CUcontext c;

    pthread_mutex_lock(&fake_mu);
    fake_configure_locked();
    c = fake_current();
    if (c == NULL) {
        return fake_leave(CUDA_ERROR_INVALID_CONTEXT);
    }
    if (bytes > fake_used[c->device] - FAKE_OTHER_BYTES) {
        return fake_leave(CUDA_ERROR_INVALID_VALUE);
    }
    fake_used[c->device] -= bytes;
    return fake_leave(CUDA_SUCCESS);
}

/* Device memory in use on dev (bytes), as the fake itself accounts it. */
EXPORT long long
fake_used_bytes(int dev)
{
    long long v;

    pthread_mutex_lock(&fake_mu);
    fake_configure_locked();
    v = (dev >= 0 && dev < FAKE_MAX_DEVICES) ? (long long)fake_used[dev] : -1;
    pthread_mutex_unlock(&fake_mu);
    return v;
}

/* From now on every cuCtxSynchronize returns code (0 clears it). */
EXPORT void
fake_inject_sticky(int code)
{
    pthread_mutex_lock(&fake_mu);
    fake_configure_locked();
    fake_sticky = code;
    pthread_mutex_unlock(&fake_mu);
}

/* "ok", "stub" or "nodevice"; returns 0, or -1 for an unknown mode. */
EXPORT int
fake_set_mode(const char *mode)
{
    int m;

    if (mode == NULL) {
        return -1;
    }
    if (strcmp(mode, "ok") == 0) {
        m = MODE_OK;
    }
    else if (strcmp(mode, "stub") == 0) {
        m = MODE_STUB;
    }
    else if (strcmp(mode, "nodevice") == 0) {
        m = MODE_NODEVICE;
    }
    else {
        return -1;
    }
    pthread_mutex_lock(&fake_mu);
    fake_configure_locked();
    fake_mode = m;
    pthread_mutex_unlock(&fake_mu);
    return 0;
}

EXPORT void
fake_set_device_count(int n)
{
    pthread_mutex_lock(&fake_mu);
    fake_configure_locked();
    fake_ndev = n < 0 ? 0 : n > FAKE_MAX_DEVICES ? FAKE_MAX_DEVICES : n;
    pthread_mutex_unlock(&fake_mu);
}

EXPORT int
fake_device_count(void)
{
    int n;

    pthread_mutex_lock(&fake_mu);
    fake_configure_locked();
    n = fake_ndev;
    pthread_mutex_unlock(&fake_mu);
    return n;
}

/* Calls of the named entry point so far; -1 for a name not counted. */
EXPORT long long
fake_count(const char *name)
{
    long long v;

    pthread_mutex_lock(&fake_mu);
    v = fake_counter_locked(name);
    pthread_mutex_unlock(&fake_mu);
    return v;
}

EXPORT void
fake_reset_counts(void)
{
    pthread_mutex_lock(&fake_mu);
    memset(fake_counters, 0, sizeof fake_counters);
    pthread_mutex_unlock(&fake_mu);
}

/* Retain count of a device's primary context (-1 for a bad device). */
EXPORT int
fake_primary_refcount(int dev)
{
    int v;

    pthread_mutex_lock(&fake_mu);
    v = (dev >= 0 && dev < FAKE_MAX_DEVICES) ? fake_primary[dev].refcount : -1;
    pthread_mutex_unlock(&fake_mu);
    return v;
}

/* Depth of the calling thread's context stack. */
EXPORT int
fake_stack_depth(void)
{
    return fake_depth;
}

/* At process exit -- after the interpreter has finalised and freed its
 * modules -- write the primary-context retain counts to the file named by
 * FAKE_CUDA_EXIT_REPORT, so a test can see that teardown released them. */
__attribute__((destructor)) static void
fake_exit_report(void)
{
    FILE *f = fake_exit_report_open("FAKE_CUDA_EXIT_REPORT");

    if (f == NULL) {
        return;
    }
    pthread_mutex_lock(&fake_mu);
    fprintf(f, "{\"primary_refcount\": [");
    for (int i = 0; i < fake_ndev; i++) {
        fprintf(f, "%s%d", i ? ", " : "", fake_primary[i].refcount);
    }
    fprintf(f, "], \"releases\": %lld}\n",
            fake_counter_locked("cuDevicePrimaryCtxRelease_v2"));
    pthread_mutex_unlock(&fake_mu);
    fclose(f);
}
