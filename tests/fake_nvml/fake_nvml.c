/*
 * fake_nvml.c -- a stand-in for libnvidia-ml.so.1, for the tests.
 *
 * Two devices whose NVML indices run opposite to the fake CUDA driver's
 * ordinals (NVML index i is CUDA ordinal 1 - i; they match by PCI bus id,
 * "00000000:40:00.0" for ordinal 0), each with an SM clock, a throttle-reason
 * mask, a temperature and a power draw the tests set through fake_nvml_set()
 * at any moment (mid-run too), and a list of compute processes.
 * Build variants drop entry points, as older drivers lack them:
 *   -DFAKE_NVML_OLD     the pre-r535 name nvmlDeviceGetCurrentClocksThrottleReasons
 *                       and the first nvmlDeviceGetComputeRunningProcesses (16-byte records)
 *   -DFAKE_NVML_MINIMAL only nvmlInit_v2, nvmlShutdown, nvmlDeviceGetHandleByIndex_v2
 * FAKE_NVML_INIT_FAIL=n makes nvmlInit_v2 return n.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../fake_common/fake_common.h"

typedef int nvmlReturn_t;
struct fake_dev {
    int index;
    unsigned int clock_mhz, temp_c, power_mw;
    unsigned long long reasons;
};
typedef struct fake_dev *nvmlDevice_t;

enum { NVML_SUCCESS = 0, NVML_ERROR_UNINITIALIZED = 1, NVML_ERROR_INVALID_ARGUMENT = 2,
       NVML_ERROR_NOT_FOUND = 6, NVML_ERROR_INSUFFICIENT_SIZE = 7 };

#define NDEV 2
#define MAXPROC 8

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int inits;
static struct fake_dev devs[NDEV] = {
    {0, 1980, 40, 120000, 0},
    {1, 1980, 40, 120000, 0},
};
static struct {
    unsigned int pid;
    unsigned long long used;
    int index;
} procs[MAXPROC];
static int nprocs;
static long long calls;

EXPORT nvmlReturn_t
nvmlInit_v2(void)
{
    int fail;

    if (fake_env_int("FAKE_NVML_INIT_FAIL", &fail)) {
        return fail;
    }
    pthread_mutex_lock(&mu);
    inits++;
    pthread_mutex_unlock(&mu);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t
nvmlShutdown(void)
{
    pthread_mutex_lock(&mu);
    if (inits == 0) {
        pthread_mutex_unlock(&mu);
        return NVML_ERROR_UNINITIALIZED;
    }
    inits--;
    pthread_mutex_unlock(&mu);
    return NVML_SUCCESS;
}

static int
ready(void)
{
    int v;

    pthread_mutex_lock(&mu);
    v = inits > 0;
    calls++;
    pthread_mutex_unlock(&mu);
    return v;
}

EXPORT nvmlReturn_t
nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *dev)
{
    if (!ready()) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (dev == NULL || index >= NDEV) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *dev = &devs[index];
    return NVML_SUCCESS;
}

#ifndef FAKE_NVML_MINIMAL
/* CUDA ordinal k has bus 0x40 - k and is NVML index 1 - k. */
EXPORT nvmlReturn_t
nvmlDeviceGetHandleByPciBusId_v2(const char *bus, nvmlDevice_t *dev)
{
    unsigned int b = 0;

    if (!ready()) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (bus == NULL || dev == NULL || sscanf(bus, "%*x:%x:", &b) != 1) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    for (int k = 0; k < NDEV; k++) {
        if (b == (unsigned int)(0x40 - k)) {
            *dev = &devs[1 - k];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

static nvmlReturn_t
read_u(nvmlDevice_t dev, const unsigned int *field, unsigned int *out)
{
    if (!ready()) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (dev == NULL || out == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    pthread_mutex_lock(&mu);
    *out = *field;
    pthread_mutex_unlock(&mu);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t
nvmlDeviceGetClockInfo(nvmlDevice_t dev, int type, unsigned int *mhz)
{
    if (type != 1) {   /* NVML_CLOCK_SM */
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    return read_u(dev, dev ? &dev->clock_mhz : NULL, mhz);
}

EXPORT nvmlReturn_t
nvmlDeviceGetTemperature(nvmlDevice_t dev, int sensor, unsigned int *c)
{
    if (sensor != 0) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    return read_u(dev, dev ? &dev->temp_c : NULL, c);
}

EXPORT nvmlReturn_t
nvmlDeviceGetPowerUsage(nvmlDevice_t dev, unsigned int *mw)
{
    return read_u(dev, dev ? &dev->power_mw : NULL, mw);
}

static nvmlReturn_t
reasons(nvmlDevice_t dev, unsigned long long *out)
{
    if (!ready()) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (dev == NULL || out == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    pthread_mutex_lock(&mu);
    *out = dev->reasons;
    pthread_mutex_unlock(&mu);
    return NVML_SUCCESS;
}

/* Fill `size`-byte records {pid, pad, used, ...}. */
static nvmlReturn_t
processes(nvmlDevice_t dev, unsigned int *count, void *infos, size_t size)
{
    unsigned int n = 0;

    if (!ready()) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (dev == NULL || count == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    pthread_mutex_lock(&mu);
    for (int i = 0; i < nprocs; i++) {
        if (procs[i].index == dev->index) {
            if (n < *count && infos != NULL) {
                unsigned char *rec = (unsigned char *)infos + n * size;

                memset(rec, 0, size);
                memcpy(rec, &procs[i].pid, sizeof(unsigned int));
                memcpy(rec + 8, &procs[i].used, sizeof(unsigned long long));
            }
            n++;
        }
    }
    pthread_mutex_unlock(&mu);
    if (n > *count) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    *count = n;
    return NVML_SUCCESS;
}

#ifdef FAKE_NVML_OLD
EXPORT nvmlReturn_t
nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t dev, unsigned long long *out)
{
    return reasons(dev, out);
}

EXPORT nvmlReturn_t
nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t dev, unsigned int *count, void *infos)
{
    return processes(dev, count, infos, 16);
}
#else
EXPORT nvmlReturn_t
nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t dev, unsigned long long *out)
{
    return reasons(dev, out);
}

EXPORT nvmlReturn_t
nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t dev, unsigned int *count, void *infos)
{
    return processes(dev, count, infos, 24);
}
#endif
#endif /* FAKE_NVML_MINIMAL */

/* ---- control functions for the tests ------------------------------------ */

/* Set NVML device `index`'s readings; a negative value leaves one as it is. */
EXPORT void
fake_nvml_set(int index, long long clock_mhz, long long reasons_mask, long long temp_c,
              long long power_mw)
{
    if (index < 0 || index >= NDEV) {
        return;
    }
    pthread_mutex_lock(&mu);
    if (clock_mhz >= 0) {
        devs[index].clock_mhz = (unsigned int)clock_mhz;
    }
    if (reasons_mask >= 0) {
        devs[index].reasons = (unsigned long long)reasons_mask;
    }
    if (temp_c >= 0) {
        devs[index].temp_c = (unsigned int)temp_c;
    }
    if (power_mw >= 0) {
        devs[index].power_mw = (unsigned int)power_mw;
    }
    pthread_mutex_unlock(&mu);
}

/* A compute process on NVML device `index` using `used` bytes. */
EXPORT void
fake_nvml_add_process(int index, unsigned int pid, unsigned long long used)
{
    pthread_mutex_lock(&mu);
    if (nprocs < MAXPROC) {
        procs[nprocs].pid = pid;
        procs[nprocs].used = used;
        procs[nprocs].index = index;
        nprocs++;
    }
    pthread_mutex_unlock(&mu);
}

EXPORT int
fake_nvml_inits(void)
{
    int v;

    pthread_mutex_lock(&mu);
    v = inits;
    pthread_mutex_unlock(&mu);
    return v;
}

EXPORT long long
fake_nvml_calls(void)
{
    long long v;

    pthread_mutex_lock(&mu);
    v = calls;
    pthread_mutex_unlock(&mu);
    return v;
}

/* At exit (after the interpreter freed the module): did it shut NVML down? */
__attribute__((destructor)) static void
fake_nvml_exit_report(void)
{
    FILE *f = fake_exit_report_open("FAKE_NVML_EXIT_REPORT");

    if (f == NULL) {
        return;
    }
    fprintf(f, "{\"inits\": %d}\n", inits);
    fclose(f);
}
