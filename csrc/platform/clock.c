/*
 * clock.c -- the monotonic nanosecond clock.
 *
 * The same clock as time.perf_counter on each OS, read directly as an
 * integer: CLOCK_MONOTONIC on Linux, CLOCK_UPTIME_RAW (mach_absolute_time)
 * on macOS, QueryPerformanceCounter on Windows.  Also the process CPU time
 * (the clock of time.process_time) that scopes report beside wall time.
 */
#include "platform/platform.h"

#if defined(SHP_WINDOWS)
#include <windows.h>

/* QPC ticks -> ns without overflow: split into whole seconds and the rest. */
static int64_t
qpc_to_ns(LONGLONG ticks, LONGLONG freq)
{
    return (int64_t)(ticks / freq) * 1000000000 +
           (int64_t)((ticks % freq) * 1000000000 / freq);
}

int64_t
shp_now_ns(void)
{
    static LONGLONG freq;   /* the one process global the OS forces: QPC rate */
    LARGE_INTEGER c;
    if (freq == 0) {
        LARGE_INTEGER f;
        QueryPerformanceFrequency(&f);
        freq = f.QuadPart;
    }
    QueryPerformanceCounter(&c);
    return qpc_to_ns(c.QuadPart, freq);
}

int64_t
shp_clock_resolution_ns(void)
{
    LARGE_INTEGER f;
    QueryPerformanceFrequency(&f);
    int64_t r = (int64_t)(1000000000 / f.QuadPart);
    return r > 0 ? r : 1;
}

const char *
shp_clock_name(void)
{
    return "QueryPerformanceCounter";
}

int64_t
shp_process_cpu_ns(void)
{
    FILETIME created, exited, kernel, user;
    if (!GetProcessTimes(GetCurrentProcess(), &created, &exited, &kernel, &user))
        return 0;
    ULARGE_INTEGER k, u;
    k.LowPart = kernel.dwLowDateTime;
    k.HighPart = kernel.dwHighDateTime;
    u.LowPart = user.dwLowDateTime;
    u.HighPart = user.dwHighDateTime;
    return (int64_t)(k.QuadPart + u.QuadPart) * 100;   /* 100 ns units */
}

#else /* POSIX */
#include <time.h>

#if defined(SHP_MACOS)
#define SHP_CLOCK_ID CLOCK_UPTIME_RAW
#define SHP_CLOCK_NAME "clock_gettime(CLOCK_UPTIME_RAW)"
#else
#define SHP_CLOCK_ID CLOCK_MONOTONIC
#define SHP_CLOCK_NAME "clock_gettime(CLOCK_MONOTONIC)"
#endif

int64_t
shp_now_ns(void)
{
    struct timespec ts;
    /* Cannot fail for a valid clock id; the vDSO makes this ~20 ns. */
    clock_gettime(SHP_CLOCK_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + (int64_t)ts.tv_nsec;
}

int64_t
shp_clock_resolution_ns(void)
{
    struct timespec ts;
    if (clock_getres(SHP_CLOCK_ID, &ts) != 0)
        return 1;
    int64_t r = (int64_t)ts.tv_sec * 1000000000 + (int64_t)ts.tv_nsec;
    return r > 0 ? r : 1;
}

const char *
shp_clock_name(void)
{
    return SHP_CLOCK_NAME;
}

int64_t
shp_process_cpu_ns(void)
{
    struct timespec ts;
    /* The clock of time.process_time: user + system time of all threads.
     * Not in the vDSO: a real system call (~100-300 ns). */
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000000000 + (int64_t)ts.tv_nsec;
}
#endif
