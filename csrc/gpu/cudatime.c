/*
 * cudatime.c -- GPU time by CUDA events, and the device L2 flush.
 *
 * Beside the synced wall time of each timed call the harness records a CUDA
 * event before the call and one after it, on one stream (the legacy default
 * stream unless the user names one), and reads the time between them once
 * the closing sync has returned.  That is the device's own clock: launch
 * overhead on the host is in the wall time and not in this one, so the
 * difference is the host's share.
 *
 * Events are created once per benchmark (never in the timed loop) in the
 * target's context.  The start event is recorded after the opening sync and
 * before t0; the end event is recorded right after the call, in the same
 * GIL-released block as the closing sync.  Every driver call here runs with
 * the GIL released, through shp_cuda_call_nogil's context binding.
 *
 * cache="cold" on a CUDA device: a buffer the size of the device's L2
 * (cuDeviceGetAttribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)) is written with
 * cuMemsetD8Async on the stream before each call and waited for, outside the
 * timed region -- nvbench's flush, exactly the L2 size rather than a fixed
 * 256 MB.
 */
#include "gpu/gpu.h"
#include "objects.h"

#include <stdio.h>
#include <string.h>

#define SHP_CU_EVENT_DEFAULT 0
#define SHP_CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE 38

static shp_CUresult
do_create(const shp_cuda *c, void *arg)
{
    shp_cuda_timer *g = arg;
    shp_CUresult rc = c->cuEventCreate(&g->start, SHP_CU_EVENT_DEFAULT);
    if (rc != 0)
        return rc;
    rc = c->cuEventCreate(&g->end, SHP_CU_EVENT_DEFAULT);
    if (rc != 0) {
        (void)c->cuEventDestroy(g->start);
        g->start = NULL;
    }
    return rc;
}

int
shp_cuda_timer_events(shp_state *st, const shp_cuda_target *t, shp_cuda_timer *g, char *why,
                      size_t why_size)
{
    const shp_cuda *c = &st->cuda;
    shp_CUresult rc;
    g->events = 0;
    if (c->cuEventCreate == NULL || c->cuEventRecord == NULL || c->cuEventElapsedTime == NULL ||
        c->cuEventDestroy == NULL) {
        (void)snprintf(why, why_size, "the CUDA driver lacks the event entry points");
        return 0;
    }
    Py_BEGIN_ALLOW_THREADS
    rc = shp_cuda_call_nogil(st, t, do_create, g);
    Py_END_ALLOW_THREADS
    if (rc != 0) {
        char msg[64];
        (void)snprintf(msg, sizeof msg, "error %d", rc);
        const char *name = NULL;
        if (c->cuGetErrorName == NULL || c->cuGetErrorName(rc, &name) != 0 || name == NULL)
            name = msg;
        (void)snprintf(why, why_size, "cuEventCreate failed: %s (%d)", name, rc);
        g->start = g->end = NULL;
        return 0;
    }
    g->events = 1;
    return 0;
}

typedef struct {
    shp_cuda_timer *g;
    size_t bytes;
    int step;                   /* 0 attribute, 1 allocation: what failed */
    shp_CUdevice dev;
} l2_args;

static shp_CUresult
do_l2_alloc(const shp_cuda *c, void *arg)
{
    l2_args *a = arg;
    int l2 = 0;
    shp_CUresult rc = c->cuDeviceGetAttribute(&l2, SHP_CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, a->dev);
    if (rc != 0)
        return rc;
    a->step = 1;
    a->bytes = l2 > 0 ? (size_t)l2 : 0;
    if (a->bytes == 0)
        return 0;
    return c->cuMemAlloc(&a->g->l2_buf, a->bytes);
}

int
shp_cuda_timer_l2(shp_state *st, const shp_cuda_target *t, shp_cuda_timer *g)
{
    const shp_cuda *c = &st->cuda;
    if (c->cuDeviceGetAttribute == NULL || c->cuMemAlloc == NULL || c->cuMemFree == NULL ||
        c->cuMemsetD8Async == NULL || c->cuStreamSynchronize == NULL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "cache='cold' cannot flush the GPU's L2: the CUDA driver lacks "
                        "cuDeviceGetAttribute / cuMemAlloc_v2 / cuMemsetD8Async");
        return -1;
    }
    l2_args a = {g, 0, 0, (shp_CUdevice)t->ordinal};
    shp_CUresult rc;
    Py_BEGIN_ALLOW_THREADS
    rc = shp_cuda_call_nogil(st, t, do_l2_alloc, &a);
    Py_END_ALLOW_THREADS
    if (rc != 0) {
        g->l2_buf = 0;
        char what[160];
        (void)snprintf(what, sizeof what, "cache='cold' cannot flush the L2 of CUDA device %d: %s "
                       "failed", t->ordinal, a.step ? "cuMemAlloc_v2" : "cuDeviceGetAttribute");
        return shp_cuda_raise(st, rc, what);
    }
    g->l2_bytes = a.bytes;   /* 0: the device reports no L2, nothing to flush */
    return 0;
}

static shp_CUresult
do_start(const shp_cuda *c, void *arg)
{
    shp_cuda_timer *g = arg;
    return c->cuEventRecord(g->start, g->stream);
}

shp_CUresult
shp_cuda_timer_start_nogil(shp_state *st, const shp_cuda_target *t, shp_cuda_timer *g)
{
    return shp_cuda_call_nogil(st, t, do_start, g);
}

static shp_CUresult
do_stop_sync(const shp_cuda *c, void *arg)
{
    shp_cuda_timer *g = arg;
    shp_CUresult rc = c->cuEventRecord(g->end, g->stream);
    if (rc != 0)
        return rc;
    return c->cuCtxSynchronize();
}

shp_CUresult
shp_cuda_timer_stop_sync_nogil(shp_state *st, const shp_cuda_target *t, shp_cuda_timer *g)
{
    return shp_cuda_call_nogil(st, t, do_stop_sync, g);
}

typedef struct {
    shp_cuda_timer *g;
    float ms;
} elapsed_args;

static shp_CUresult
do_elapsed(const shp_cuda *c, void *arg)
{
    elapsed_args *a = arg;
    return c->cuEventElapsedTime(&a->ms, a->g->start, a->g->end);
}

shp_CUresult
shp_cuda_timer_elapsed_nogil(shp_state *st, const shp_cuda_target *t, shp_cuda_timer *g,
                             float *ms)
{
    elapsed_args a = {g, 0.0f};
    shp_CUresult rc = shp_cuda_call_nogil(st, t, do_elapsed, &a);
    *ms = a.ms;
    return rc;
}

static shp_CUresult
do_flush(const shp_cuda *c, void *arg)
{
    shp_cuda_timer *g = arg;
    /* a new value each time: a driver may not skip writing what is there */
    g->fill++;
    shp_CUresult rc = c->cuMemsetD8Async(g->l2_buf, g->fill, g->l2_bytes, g->stream);
    if (rc != 0)
        return rc;
    return c->cuStreamSynchronize(g->stream);
}

shp_CUresult
shp_cuda_l2_flush_nogil(shp_state *st, const shp_cuda_target *t, shp_cuda_timer *g)
{
    if (g->l2_bytes == 0)
        return 0;
    return shp_cuda_call_nogil(st, t, do_flush, g);
}

static shp_CUresult
do_free(const shp_cuda *c, void *arg)
{
    shp_cuda_timer *g = arg;
    if (g->start != NULL)
        (void)c->cuEventDestroy(g->start);
    if (g->end != NULL)
        (void)c->cuEventDestroy(g->end);
    if (g->l2_buf != 0)
        (void)c->cuMemFree(g->l2_buf);
    return 0;
}

void
shp_cuda_timer_free(shp_state *st, const shp_cuda_target *t, shp_cuda_timer *g)
{
    if (g->start == NULL && g->end == NULL && g->l2_buf == 0)
        return;
    Py_BEGIN_ALLOW_THREADS
    (void)shp_cuda_call_nogil(st, t, do_free, g);
    Py_END_ALLOW_THREADS
    g->start = g->end = NULL;
    g->l2_buf = 0;
    g->l2_bytes = 0;
    g->events = 0;
}

int
shp_cuda_pci_bus_id(shp_state *st, int ordinal, char *buf, int n)
{
    const shp_cuda *c = &st->cuda;
    shp_CUresult rc;
    if (c->load_state != 1 || c->cuDeviceGetPCIBusId == NULL || n < 16)
        return -1;
    Py_BEGIN_ALLOW_THREADS
    rc = c->cuDeviceGetPCIBusId(buf, n, (shp_CUdevice)ordinal);
    Py_END_ALLOW_THREADS
    if (rc != 0) {
        buf[0] = '\0';
        return -1;
    }
    return 0;
}
