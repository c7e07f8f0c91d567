/*
 * memory.c -- process RSS and the windowed peak RSS.
 *
 * The peak, not end-minus-start: a 200 MB temporary freed before the
 * callable returns must still show.  On Linux the kernel keeps a high-water
 * mark (VmHWM) that `echo 5 > /proc/self/clear_refs` resets (kernel >= 4.0),
 * so one reset when the window opens and one read when it closes give the
 * exact peak with nothing to do per iteration.  Elsewhere (macOS, Windows,
 * a read-only /proc) the caller samples RSS after each iteration.
 */
#include "profiling.h"

int shp_force_sampled_rss = 0;

/* The open windows.  Process-wide, not per module state, because what they
 * share is: the kernel keeps one high-water mark per process, and a second
 * instance of this module (a re-import, a sub-interpreter) resetting it must
 * credit this instance's windows too.  Every access holds the GIL (the module
 * does not declare a per-interpreter GIL). */
static shp_hwm_window *open_windows = NULL;

#if defined(SHP_LINUX)
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int64_t
statm_rss(int fd)
{
    char buf[128];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    /* "size resident shared ..." in pages */
    char *p = strchr(buf, ' ');
    if (p == NULL)
        return -1;
    long long pages = strtoll(p + 1, NULL, 10);
    return (int64_t)pages * (int64_t)sysconf(_SC_PAGESIZE);
}

int64_t
shp_rss_bytes(void)
{
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int64_t r = statm_rss(fd);
    close(fd);
    return r;
}

/* VmHWM from /proc/self/status, bytes; -1 if unreadable. */
static int64_t
read_hwm(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    if (f == NULL)
        return -1;
    char line[256];
    int64_t r = -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "VmHWM:", 6) == 0) {
            r = (int64_t)strtoll(line + 6, NULL, 10) * 1024;
            break;
        }
    }
    fclose(f);
    return r;
}

/* 1 if the HWM was reset, 0 if this kernel or sandbox does not allow it. */
static int
reset_hwm(void)
{
    if (shp_force_sampled_rss)
        return 0;
    int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = write(fd, "5", 1);
    close(fd);
    return n == 1;
}

static int
open_statm(void)
{
    return open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
}

static void
close_statm(int fd)
{
    if (fd >= 0)
        close(fd);
}

static int64_t
sample_rss(int fd)
{
    return fd >= 0 ? statm_rss(fd) : shp_rss_bytes();
}

#else /* macOS, Windows: no resettable high-water mark */

#if defined(SHP_MACOS)
#include <mach/mach.h>

int64_t
shp_rss_bytes(void)
{
    mach_task_basic_info_data_t info;
    mach_msg_type_number_t count = MACH_TASK_BASIC_INFO_COUNT;
    if (task_info(mach_task_self(), MACH_TASK_BASIC_INFO,
                  (task_info_t)&info, &count) != KERN_SUCCESS)
        return -1;
    return (int64_t)info.resident_size;
}
#elif defined(SHP_WINDOWS)
#define PSAPI_VERSION 2  /* K32GetProcessMemoryInfo, in kernel32 */
#include <windows.h>
#include <psapi.h>

int64_t
shp_rss_bytes(void)
{
    PROCESS_MEMORY_COUNTERS pmc;
    if (!GetProcessMemoryInfo(GetCurrentProcess(), &pmc, sizeof(pmc)))
        return -1;
    return (int64_t)pmc.WorkingSetSize;
}
#else
int64_t
shp_rss_bytes(void)
{
    return -1;
}
#endif

static int64_t read_hwm(void) { return -1; }
static int reset_hwm(void) { return 0; }
static int open_statm(void) { return -1; }
static void close_statm(int fd) { (void)fd; }
static int64_t sample_rss(int fd) { (void)fd; return shp_rss_bytes(); }
#endif

const char *
shp_peak_method_name(shp_peak_method m)
{
    switch (m) {
    case SHP_PEAK_HWM: return "hwm";
    case SHP_PEAK_SAMPLED: return "sampled";
    default: return "off";
    }
}

static void
fold(shp_hwm_window *w, int64_t rss)
{
    if (rss > w->peak)
        w->peak = rss;
}

void
shp_window_open(shp_hwm_window *w)
{
    w->statm_fd = -1;
    w->next = NULL;
    /* Before the reset wipes it, credit the current HWM to every window that
     * is already open (re-entrant or concurrent benchmarks). */
    if (open_windows != NULL) {
        int64_t hwm = read_hwm();
        for (shp_hwm_window *o = open_windows; o != NULL; o = o->next)
            if (o->method == SHP_PEAK_HWM)
                fold(o, hwm);
    }
    w->method = reset_hwm() ? SHP_PEAK_HWM : SHP_PEAK_SAMPLED;
    if (w->method == SHP_PEAK_SAMPLED)
        w->statm_fd = open_statm();
    w->baseline = sample_rss(w->statm_fd);
    if (w->baseline < 0) {
        close_statm(w->statm_fd);
        w->statm_fd = -1;
        w->method = SHP_PEAK_OFF;
        w->baseline = 0;
    }
    w->peak = w->baseline;
    w->next = open_windows;
    open_windows = w;
}

void
shp_window_sample(shp_hwm_window *w)
{
    if (w->method == SHP_PEAK_SAMPLED)
        fold(w, sample_rss(w->statm_fd));
}

int64_t
shp_window_close(shp_hwm_window *w)
{
    for (shp_hwm_window **pp = &open_windows; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == w) {
            *pp = w->next;
            break;
        }
    }
    if (w->method == SHP_PEAK_OFF)
        return 0;
    fold(w, sample_rss(w->statm_fd));
    if (w->method == SHP_PEAK_HWM)
        fold(w, read_hwm());
    close_statm(w->statm_fd);
    w->statm_fd = -1;
    int64_t d = w->peak - w->baseline;
    return d > 0 ? d : 0;
}
