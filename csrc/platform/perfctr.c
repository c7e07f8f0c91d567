/*
 * perfctr.c -- the CPU's own counters of the calling thread: instructions
 * retired and cycles, in user space (Linux perf_event_open).
 *
 * benchmark_callable(counters=("instructions", "cycles")) reads them around
 * the timed loop (counters.c), never inside a timed region: one group of
 * counters, opened disabled, reset and enabled just before the first
 * iteration and disabled just after the last (two ioctl calls, outside every
 * t0..t1), then read once.  exclude_kernel and exclude_hv: what the kernel
 * does for the call (page faults, system calls) is not counted, only the
 * process's own instructions.  The thread only (pid 0, no inherit): work the
 * call hands to other threads is not counted.
 *
 * Never faked: a counter the kernel will not give (no PMU in this virtual
 * machine: ENOENT; perf_event_paranoid: EACCES; a seccomp filter: EPERM), a
 * group the PMU could not keep on for the whole loop (multiplexed with other
 * users), or any other platform is "not available", with the reason.
 *
 * A leaf: calls no other file; no Python calls, no exception.
 */
#include "platform/platform.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* Test hook: count software clocks (task-clock, cpu-clock: ns of the thread's CPU
 * time) in their place, to exercise the plumbing where the PMU is absent. */
int shp_perfctr_software = 0;

#if defined(SHP_LINUX)
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static const char *const names[SHP_N_COUNTERS] = {"instructions", "cycles"};

static int
open_one(int i, int group_fd)
{
    struct perf_event_attr a;
    memset(&a, 0, sizeof(a));
    a.size = sizeof(a);
    if (shp_perfctr_software) {
        a.type = PERF_TYPE_SOFTWARE;
        a.config = i == SHP_CTR_INSTRUCTIONS ? PERF_COUNT_SW_TASK_CLOCK : PERF_COUNT_SW_CPU_CLOCK;
    }
    else {
        a.type = PERF_TYPE_HARDWARE;
        a.config = i == SHP_CTR_INSTRUCTIONS ? PERF_COUNT_HW_INSTRUCTIONS : PERF_COUNT_HW_CPU_CYCLES;
    }
    a.disabled = group_fd < 0;        /* the leader starts off; members follow it */
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    a.read_format = PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED |
                    PERF_FORMAT_TOTAL_TIME_RUNNING;
    return (int)syscall(SYS_perf_event_open, &a, 0, -1, group_fd, PERF_FLAG_FD_CLOEXEC);
}

static const char *
errno_name(int e)
{
    switch (e) {
    case ENOENT: return "ENOENT";
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    case ENOSYS: return "ENOSYS";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    case EINVAL: return "EINVAL";
    case EMFILE: return "EMFILE";
    case ENODEV: return "ENODEV";
    case EBUSY: return "EBUSY";
    default: return "error";
    }
}

/* What an errno of perf_event_open means to someone reading the result. */
static const char *
errno_meaning(int e)
{
    switch (e) {
    case ENOENT:
    case EOPNOTSUPP:
    case ENODEV:
        return "this machine exposes no hardware counters (a virtual machine without a "
               "virtual PMU, or a CPU the kernel has no events for)";
    case EACCES:
    case EPERM:
        return "the kernel refused (kernel.perf_event_paranoid above 2, or a container's "
               "seccomp profile blocks perf_event_open)";
    case ENOSYS:
        return "the kernel was built without perf events";
    case EBUSY:
        return "another user holds the counters exclusively";
    default:
        return "the kernel did not open the counter";
    }
}

int
shp_perfctr_open(shp_perfctr *c, unsigned want, char *why, size_t whysize)
{
    memset(c, 0, sizeof(*c));
    c->leader = -1;
    for (int i = 0; i < SHP_N_COUNTERS; i++)
        c->fd[i] = -1;
    for (int i = 0; i < SHP_N_COUNTERS; i++) {
        if (!(want & (1u << i)))
            continue;
        int fd = open_one(i, c->leader);
        if (fd < 0) {
            int e = errno;
            snprintf(why, whysize, "perf_event_open(%s) failed with %s: %s", names[i],
                     errno_name(e), errno_meaning(e));
            shp_perfctr_close(c);
            return -1;
        }
        c->fd[i] = fd;
        c->slot[i] = c->n++;
        if (c->leader < 0)
            c->leader = fd;
    }
    c->want = want;
    return 0;
}

int
shp_perfctr_start(shp_perfctr *c)
{
    if (c->leader < 0)
        return -1;
    if (ioctl(c->leader, PERF_EVENT_IOC_RESET, PERF_IOC_FLAG_GROUP) != 0 ||
        ioctl(c->leader, PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP) != 0)
        return -1;
    return 0;
}

int
shp_perfctr_stop(shp_perfctr *c, double out[SHP_N_COUNTERS], char *why, size_t whysize)
{
    /* nr, time_enabled, time_running, then one value per member */
    uint64_t buf[3 + SHP_N_COUNTERS];
    if (c->leader < 0) {
        snprintf(why, whysize, "the counters were not open");
        return -1;
    }
    if (ioctl(c->leader, PERF_EVENT_IOC_DISABLE, PERF_IOC_FLAG_GROUP) != 0) {
        snprintf(why, whysize, "stopping the counters failed (errno %s)", errno_name(errno));
        return -1;
    }
    ssize_t got = read(c->leader, buf, sizeof(buf));
    if (got < (ssize_t)(3 * sizeof(uint64_t)) || buf[0] != (uint64_t)c->n ||
        got < (ssize_t)((3 + c->n) * sizeof(uint64_t))) {
        snprintf(why, whysize, "reading the counters failed");
        return -1;
    }
    if (buf[2] == 0 || buf[2] != buf[1]) {
        /* the PMU was shared with other users and our group did not run all
         * the time: a scaled estimate is not a count, so it is not given */
        snprintf(why, whysize,
                 "the counters ran %.1f%% of the timed loop (the PMU was shared with other "
                 "users: perf, a watchdog); a scaled estimate is not reported",
                 buf[1] > 0 ? 100.0 * (double)buf[2] / (double)buf[1] : 0.0);
        return -1;
    }
    for (int i = 0; i < SHP_N_COUNTERS; i++)
        out[i] = (c->want & (1u << i)) ? (double)buf[3 + c->slot[i]] : 0.0;
    return 0;
}

void
shp_perfctr_close(shp_perfctr *c)
{
    for (int i = 0; i < SHP_N_COUNTERS; i++) {
        if (c->fd[i] >= 0)
            close(c->fd[i]);
        c->fd[i] = -1;
    }
    c->leader = -1;
    c->n = 0;
}

#else   /* not Linux */

int
shp_perfctr_open(shp_perfctr *c, unsigned want, char *why, size_t whysize)
{
    (void)want;
    memset(c, 0, sizeof(*c));
    snprintf(why, whysize, "hardware counters are read with Linux's perf_event_open; "
                           "not available on this platform");
    return -1;
}

int
shp_perfctr_start(shp_perfctr *c)
{
    (void)c;
    return -1;
}

int
shp_perfctr_stop(shp_perfctr *c, double out[SHP_N_COUNTERS], char *why, size_t whysize)
{
    (void)c;
    (void)out;
    snprintf(why, whysize, "not available on this platform");
    return -1;
}

void
shp_perfctr_close(shp_perfctr *c)
{
    (void)c;
}

#endif
