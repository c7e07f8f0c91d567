/*
 * scoperss.c -- the RSS a default scope reads at its boundaries.
 *
 * A default scope (Timer, timeit, a profiler's scope) reads RSS at its enter
 * and its exit, and in per-frame code those boundaries come in runs: one
 * frame's exit and the next frame's enter, a parent's enter and its child's,
 * a child's exit and its parent's -- with only the `with` machinery between
 * them, while a read is a system call (memory.c: a pread of statm, 0.3-1.6 us
 * on our VMs), as costly as the rest of the scope.  So a boundary takes the
 * last boundary's read if it returned at most 1,000 ns (`SHP_RSS_SHARE_NS`)
 * ago, and reads afresh otherwise: the scope's RSS window then opens or
 * closes at most that much before its clocks do.  In that time nothing can
 * move RSS by more than a few pages: a page fault costs >= 0.1 us even on
 * bare metal (4.4 us on our VM), and a free back to the OS is a munmap or
 * madvise system call plus the interpreter's work that drops the last
 * reference (docs/memory.md, decision 58).
 *
 * The last read is process-wide, as RSS is, and lives under the GIL (the
 * module shares the main interpreter's).  A forked child never takes its
 * parent's read: fork() alone copies the page tables of the whole process,
 * far more than a microsecond, so the child's first boundary reads afresh.
 */
#include "profiling.h"

static int64_t last_rss = -1;   /* bytes; -1: none to share */
static int64_t last_ns = 0;     /* when its read returned (shp_now_ns) */

int64_t
shp_rss_at_boundary(int64_t now_ns, int64_t *read_ns)
{
    if (last_rss < 0 || now_ns < last_ns || now_ns - last_ns > SHP_RSS_SHARE_NS) {
        last_rss = shp_rss_bytes();
        last_ns = shp_now_ns();
    }
    if (read_ns != NULL)
        *read_ns = last_ns;
    return last_rss;
}
