/*
 * thread.c -- threads of our own, a monitor (a lock and its condition) and
 * waiting until a time on the clock of shp_now_ns.
 *
 * What the load scheduler (run/load.c) needs from the OS, and no more: start
 * and join a thread, one lock with one condition, a timed wait whose
 * deadline is read on the harness's clock, and a spin for the last stretch
 * that a sleep cannot hit.  POSIX threads on Linux and macOS, the Win32 API
 * on Windows.  The objects live on the C heap (PyMem_Raw*: no GIL needed),
 * so that no OS header leaks into platform.h.  Nothing here touches Python.
 */
#include "platform/platform.h"

#if defined(SHP_WINDOWS)
#include <windows.h>
#include <process.h>

struct shp_monitor {
    SRWLOCK lock;
    CONDITION_VARIABLE cond;
};

struct shp_thread {
    HANDLE h;
    void (*fn)(void *);
    void *arg;
};

shp_monitor *
shp_monitor_new(void)
{
    shp_monitor *m = PyMem_RawMalloc(sizeof(*m));
    if (m == NULL)
        return NULL;
    InitializeSRWLock(&m->lock);
    InitializeConditionVariable(&m->cond);
    return m;
}

void
shp_monitor_free(shp_monitor *m)
{
    PyMem_RawFree(m);   /* SRW locks and condition variables own no resource */
}

void
shp_monitor_lock(shp_monitor *m)
{
    AcquireSRWLockExclusive(&m->lock);
}

void
shp_monitor_unlock(shp_monitor *m)
{
    ReleaseSRWLockExclusive(&m->lock);
}

void
shp_monitor_notify_all(shp_monitor *m)
{
    WakeAllConditionVariable(&m->cond);
}

int
shp_monitor_wait_until(shp_monitor *m, int64_t deadline_ns)
{
    DWORD ms = INFINITE;
    if (deadline_ns != INT64_MAX) {
        int64_t left = deadline_ns - shp_now_ns();
        if (left <= 0)
            return 1;
        ms = left / 1000000 >= 0x7ffffffe ? 0x7ffffffe : (DWORD)((left + 999999) / 1000000);
    }
    if (!SleepConditionVariableSRW(&m->cond, &m->lock, ms, 0))
        return GetLastError() == ERROR_TIMEOUT;
    return 0;
}

static unsigned __stdcall
thread_main(void *p)
{
    shp_thread *t = p;
    t->fn(t->arg);
    return 0;
}

shp_thread *
shp_thread_start(void (*fn)(void *), void *arg)
{
    shp_thread *t = PyMem_RawMalloc(sizeof(*t));
    if (t == NULL)
        return NULL;
    t->fn = fn;
    t->arg = arg;
    uintptr_t h = _beginthreadex(NULL, 0, thread_main, t, 0, NULL);
    if (h == 0) {
        PyMem_RawFree(t);
        return NULL;
    }
    t->h = (HANDLE)h;
    return t;
}

void
shp_thread_join(shp_thread *t)
{
    WaitForSingleObject(t->h, INFINITE);
    CloseHandle(t->h);
    PyMem_RawFree(t);
}

void
shp_thread_precise_timers(void)
{
}

#else /* POSIX */
#include <errno.h>
#include <pthread.h>
#include <time.h>
#if defined(SHP_LINUX)
#include <sys/prctl.h>
#endif

struct shp_monitor {
    pthread_mutex_t lock;
    pthread_cond_t cond;
};

struct shp_thread {
    pthread_t id;
    void (*fn)(void *);
    void *arg;
};

shp_monitor *
shp_monitor_new(void)
{
    shp_monitor *m = PyMem_RawMalloc(sizeof(*m));
    if (m == NULL)
        return NULL;
    if (pthread_mutex_init(&m->lock, NULL) != 0) {
        PyMem_RawFree(m);
        return NULL;
    }
    pthread_condattr_t attr;
    int rc = pthread_condattr_init(&attr);
#if !defined(SHP_MACOS)
    /* deadlines are read on CLOCK_MONOTONIC, the clock of shp_now_ns */
    if (rc == 0 && pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) != 0)
        rc = -1;
#endif
    if (rc == 0 && pthread_cond_init(&m->cond, &attr) != 0)
        rc = -1;
    pthread_condattr_destroy(&attr);
    if (rc != 0) {
        pthread_mutex_destroy(&m->lock);
        PyMem_RawFree(m);
        return NULL;
    }
    return m;
}

void
shp_monitor_free(shp_monitor *m)
{
    pthread_cond_destroy(&m->cond);
    pthread_mutex_destroy(&m->lock);
    PyMem_RawFree(m);
}

void
shp_monitor_lock(shp_monitor *m)
{
    pthread_mutex_lock(&m->lock);
}

void
shp_monitor_unlock(shp_monitor *m)
{
    pthread_mutex_unlock(&m->lock);
}

void
shp_monitor_notify_all(shp_monitor *m)
{
    pthread_cond_broadcast(&m->cond);
}

int
shp_monitor_wait_until(shp_monitor *m, int64_t deadline_ns)
{
    if (deadline_ns == INT64_MAX) {
        pthread_cond_wait(&m->cond, &m->lock);
        return 0;
    }
#if defined(SHP_MACOS)
    /* no pthread_condattr_setclock: a relative wait from now */
    int64_t left = deadline_ns - shp_now_ns();
    if (left <= 0)
        return 1;
    struct timespec rel = {(time_t)(left / 1000000000), (long)(left % 1000000000)};
    return pthread_cond_timedwait_relative_np(&m->cond, &m->lock, &rel) == ETIMEDOUT;
#else
    struct timespec abs = {(time_t)(deadline_ns / 1000000000), (long)(deadline_ns % 1000000000)};
    return pthread_cond_timedwait(&m->cond, &m->lock, &abs) == ETIMEDOUT;
#endif
}

static void *
thread_main(void *p)
{
    shp_thread *t = p;
    t->fn(t->arg);
    return NULL;
}

shp_thread *
shp_thread_start(void (*fn)(void *), void *arg)
{
    shp_thread *t = PyMem_RawMalloc(sizeof(*t));
    if (t == NULL)
        return NULL;
    t->fn = fn;
    t->arg = arg;
    if (pthread_create(&t->id, NULL, thread_main, t) != 0) {
        PyMem_RawFree(t);
        return NULL;
    }
    return t;
}

void
shp_thread_join(shp_thread *t)
{
    pthread_join(t->id, NULL);
    PyMem_RawFree(t);
}

void
shp_thread_precise_timers(void)
{
#if defined(SHP_LINUX)
    /* the kernel rounds a thread's timed waits up by its timer slack (50 us
     * by default); ours wait for intended arrival times */
    (void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
#endif
}

#endif

void
shp_spin_until(int64_t deadline_ns)
{
    while (shp_now_ns() < deadline_ns) {
    }
}
