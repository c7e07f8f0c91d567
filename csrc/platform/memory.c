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
#include "platform/platform.h"

#include <stdlib.h>
#if !defined(SHP_WINDOWS)
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>
#endif

int shp_force_sampled_rss = 0;

/*
 * The open windows.  Process-wide, not per module state, because what they
 * share is: the kernel keeps one high-water mark per process, and a second
 * instance of this module (a re-import, a sub-interpreter) resetting it must
 * credit this instance's windows too.
 *
 * Each window's shared part is a heap node, never memory on the C stack of
 * the benchmark that opened it: a stack-switching runtime (greenlet, gevent)
 * copies a suspended greenlet's stack away and lets another one run on the
 * same addresses, and after a fork the stacks of the other threads are gone
 * (glibc hands them to the child's next threads).  A node records the thread
 * that opened it; in a forked child only the forking thread still runs, so
 * the child keeps its nodes open and sets the others aside, untracked: their
 * benchmarks will never close them there, but a scope's window belongs to a
 * Timer, a heap object the child still has, which may close it (or free it)
 * there -- so such a node is parked, not freed, and shp_window_close frees it
 * when it comes.  Every access holds `windows_mu` (taken around fork(), so a
 * child never inherits a list in mid-change) and the GIL.
 */
struct shp_hwm_node {
    struct shp_hwm_node *next;
    shp_peak_method method;
    int64_t baseline;     /* RSS at open, bytes */
    int64_t peak;         /* highest RSS seen so far, bytes */
    int statm_fd;         /* Linux: open /proc/self/statm for cheap sampling */
#if !defined(SHP_WINDOWS)
    pthread_t owner;      /* the thread that opened the window */
#endif
};

static shp_hwm_node *open_windows = NULL;
/* Linux: /proc/self/statm kept open for shp_rss_bytes (a pread is ~0.4 us,
 * an open/read/close ~3x that): opened once, never closed in this process;
 * a forked child drops it (it names the parent). */
static int rss_fd = -1;
/* Windows of threads a fork() left behind (see above): never credited,
 * freed by whoever closes them; kept in a list so they stay reachable. */
static shp_hwm_node *parked_windows = NULL;
/* The process's peak RSS as it stood before this module's latest reset of
 * the kernel's record (bytes; -1 before any reset). */
static int64_t peak_before_reset = -1;

#if defined(SHP_WINDOWS)
static void windows_lock(void) {}
static void windows_unlock(void) {}
static void register_fork_handlers(void) {}
#else
static pthread_mutex_t windows_mu = PTHREAD_MUTEX_INITIALIZER;
static void windows_lock(void) { pthread_mutex_lock(&windows_mu); }
static void windows_unlock(void) { pthread_mutex_unlock(&windows_mu); }
static int reopen_statm_in_child(void);

static void
fork_prepare(void)
{
    pthread_mutex_lock(&windows_mu);
}

static void
fork_parent(void)
{
    pthread_mutex_unlock(&windows_mu);
}

/* In the child: only the forking thread exists.  Keep its windows (with a
 * statm handle of this process: the inherited one reads the parent's), park
 * the others untracked (a Timer entered by another thread can still close or
 * free its window here; freeing it now was a double free then).  Only
 * async-signal-safe calls. */
static void
fork_child(void)
{
    pthread_mutex_init(&windows_mu, NULL);
    if (rss_fd >= 0)
        close(rss_fd);
    rss_fd = -1;
    pthread_t me = pthread_self();
    shp_hwm_node **pp = &open_windows;
    while (*pp != NULL) {
        shp_hwm_node *n = *pp;
        if (n->statm_fd >= 0)
            close(n->statm_fd);
        n->statm_fd = -1;
        if (pthread_equal(n->owner, me)) {
            if (n->method == SHP_PEAK_SAMPLED)
                n->statm_fd = reopen_statm_in_child();
            pp = &n->next;
        }
        else {
            *pp = n->next;
            n->method = SHP_PEAK_OFF;   /* its peak cannot be known here */
            n->next = parked_windows;
            parked_windows = n;
        }
    }
}

static void
register_fork_handlers(void)
{
    static int registered = 0;   /* under the GIL */
    if (!registered)
        registered = pthread_atfork(fork_prepare, fork_parent, fork_child) == 0;
}
#endif

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
    int fd = __atomic_load_n(&rss_fd, __ATOMIC_ACQUIRE);
    if (fd < 0) {
        /* lock-free: callers may hold windows_mu; two first readers race to
         * install their descriptor and the loser closes its own */
        register_fork_handlers();
        int mine = open("/proc/self/statm", O_RDONLY | O_CLOEXEC), expected = -1;
        if (mine < 0)
            return -1;
        if (__atomic_compare_exchange_n(&rss_fd, &expected, mine, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            fd = mine;
        }
        else {
            close(mine);
            fd = expected;
        }
    }
    return statm_rss(fd);
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

/* SPATIALHUB_KEEP_PEAK_RSS set (and not "0"): never reset the kernel's
 * record, so that a parent reading this process's peak (wait4, time -v, a CI
 * runner) sees the real one; windows sample RSS instead. */
static int
keep_peak_rss(void)
{
    const char *v = getenv("SPATIALHUB_KEEP_PEAK_RSS");
    return v != NULL && v[0] != '\0' && strcmp(v, "0") != 0;
}

/* 1 if the HWM was reset, 0 if this kernel or sandbox does not allow it (or
 * the user asked us not to).  The peak it wipes is kept in peak_before_reset
 * first: it cannot be given back to the kernel, but it is not lost. */
static int
reset_hwm(int64_t hwm_now)
{
    if (shp_force_sampled_rss || keep_peak_rss())
        return 0;
    int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    if (hwm_now < 0)
        hwm_now = read_hwm();
    ssize_t n = write(fd, "5", 1);
    close(fd);
    if (n == 1 && hwm_now > peak_before_reset)
        peak_before_reset = hwm_now;
    return n == 1;
}

static int
open_statm(void)
{
    return open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
}

static int
reopen_statm_in_child(void)
{
    return open_statm();
}

int64_t
shp_process_peak_rss_bytes(void)
{
    windows_lock();
    int64_t hwm = read_hwm(), before = peak_before_reset;
    windows_unlock();
    return hwm > before ? hwm : before;
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
#include <sys/resource.h>

int64_t
shp_process_peak_rss_bytes(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? (int64_t)ru.ru_maxrss : -1;   /* bytes here */
}

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

int64_t
shp_process_peak_rss_bytes(void)
{
    PROCESS_MEMORY_COUNTERS pmc;
    if (!GetProcessMemoryInfo(GetCurrentProcess(), &pmc, sizeof(pmc)))
        return -1;
    return (int64_t)pmc.PeakWorkingSetSize;
}
#else
int64_t
shp_rss_bytes(void)
{
    return -1;
}

int64_t
shp_process_peak_rss_bytes(void)
{
    return -1;
}
#endif

static int64_t read_hwm(void) { return -1; }
static int reset_hwm(int64_t hwm_now) { (void)hwm_now; return 0; }
static int open_statm(void) { return -1; }
#if !defined(SHP_WINDOWS)
static int reopen_statm_in_child(void) { return -1; }
#endif
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
fold(shp_hwm_node *n, int64_t rss)
{
    if (rss > n->peak)
        n->peak = rss;
}

void
shp_window_open(shp_hwm_window *w)
{
    w->method = SHP_PEAK_OFF;
    w->node = malloc(sizeof(shp_hwm_node));   /* not PyMem: freed in a fork child */
    if (w->node == NULL)
        return;   /* no memory for the bookkeeping: RAM is reported untracked */
    shp_hwm_node *n = w->node;
    memset(n, 0, sizeof(*n));
    n->statm_fd = -1;
#if !defined(SHP_WINDOWS)
    n->owner = pthread_self();
#endif
    register_fork_handlers();
    windows_lock();
    /* Before the reset wipes it, credit the current HWM to every window that
     * is already open (re-entrant or concurrent benchmarks). */
    int64_t hwm = -1;
    if (open_windows != NULL) {
        hwm = read_hwm();
        for (shp_hwm_node *o = open_windows; o != NULL; o = o->next)
            if (o->method == SHP_PEAK_HWM)
                fold(o, hwm);
    }
    n->method = reset_hwm(hwm) ? SHP_PEAK_HWM : SHP_PEAK_SAMPLED;
    if (n->method == SHP_PEAK_SAMPLED)
        n->statm_fd = open_statm();
    n->baseline = sample_rss(n->statm_fd);
    if (n->baseline < 0) {
        close_statm(n->statm_fd);
        n->statm_fd = -1;
        n->method = SHP_PEAK_OFF;
        n->baseline = 0;
    }
    n->peak = n->baseline;
    n->next = open_windows;
    open_windows = n;
    w->method = n->method;
    windows_unlock();
}

void
shp_window_sample(shp_hwm_window *w)
{
    if (w->method == SHP_PEAK_SAMPLED) {
        windows_lock();
        fold(w->node, sample_rss(w->node->statm_fd));
        windows_unlock();
    }
}

int64_t
shp_window_close(shp_hwm_window *w)
{
    shp_hwm_node *n = w->node;
    if (n == NULL)
        return 0;
    w->node = NULL;
    windows_lock();
    int found = 0;
    for (shp_hwm_node **pp = &open_windows; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == n) {
            *pp = n->next;
            found = 1;
            break;
        }
    }
    for (shp_hwm_node **pp = &parked_windows; !found && *pp != NULL; pp = &(*pp)->next) {
        if (*pp == n) {   /* opened by a thread a fork() left behind */
            *pp = n->next;
            break;
        }
    }
    windows_unlock();
    int64_t d = 0;
    if (n->method != SHP_PEAK_OFF) {
        fold(n, sample_rss(n->statm_fd));
        if (n->method == SHP_PEAK_HWM)
            fold(n, read_hwm());
        d = n->peak - n->baseline;
    }
    close_statm(n->statm_fd);
    free(n);
    return d > 0 ? d : 0;
}

int64_t
shp_memory_limit_bytes(void)
{
#if defined(SHP_WINDOWS)
    MEMORYSTATUSEX m;
    m.dwLength = sizeof(m);
    return GlobalMemoryStatusEx(&m) ? (int64_t)m.ullTotalPhys : -1;
#else
    int64_t limit = -1;
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    if (pages > 0 && size > 0 && pages <= INT64_MAX / size)
        limit = (int64_t)pages * size;
#endif
    const int resources[] = {RLIMIT_AS, RLIMIT_DATA};
    for (size_t i = 0; i < sizeof resources / sizeof resources[0]; i++) {
        struct rlimit r;
        if (getrlimit(resources[i], &r) == 0 && r.rlim_cur != RLIM_INFINITY &&
            r.rlim_cur <= (rlim_t)INT64_MAX && (limit < 0 || (int64_t)r.rlim_cur < limit))
            limit = (int64_t)r.rlim_cur;
    }
    return limit;
#endif
}

