/*
 * scoperss.c -- the RSS a default scope reads at its enter and its exit.
 *
 * A default scope (Timer, timeit, a profiler's scope) reads RSS at its enter
 * and its exit, and a read is a system call (memory.c: a pread of statm,
 * 0.3-1.6 us on our VMs), as costly as the rest of the scope.  In per-frame
 * code an enter mostly follows another boundary with only the `with`
 * machinery between them: the previous frame's exit, or the parent's enter.
 * So an enter takes the last boundary's read if that read returned
 * at most 1,000 ns (`SHP_RSS_SHARE_NS`) ago, and reads afresh otherwise:
 * the scope's RSS window then opens up to that much before its clocks
 * start, and what ran in that microsecond -- the `with` statement, or user
 * code between two scopes -- is in the window (a few page faults at most:
 * some KiB of anonymous memory, a few MiB of a file mapping on kernels that
 * map large folios, 2 MiB a fault; docs/memory.md, decision 58).  An exit
 * always reads afresh, so whatever the block did itself is in its own
 * window.
 *
 * The last read is process-wide, as RSS is, and lives under the GIL (the
 * module shares the main interpreter's).  A forked child never takes its
 * parent's read: fork() alone copies the page tables of the whole process,
 * far more than a microsecond, so the child's first enter reads afresh.
 */
#include "scope/scope.h"

static int64_t last_rss = -1;   /* bytes; -1: none to share */
static int64_t last_ns = 0;     /* when its read returned (shp_now_ns) */

static int64_t
read_and_keep(void)
{
    last_rss = shp_rss_bytes();
    last_ns = shp_now_ns();
    return last_rss;
}

int64_t
shp_rss_at_enter(int64_t now_ns, int64_t *read_ns)
{
    if (last_rss < 0 || now_ns < last_ns || now_ns - last_ns > SHP_RSS_SHARE_NS)
        read_and_keep();
    if (read_ns != NULL)
        *read_ns = last_ns;
    return last_rss;
}

int64_t
shp_rss_at_exit(int64_t *read_ns)
{
    int64_t rss = read_and_keep();
    if (read_ns != NULL)
        *read_ns = last_ns;
    return rss;
}
