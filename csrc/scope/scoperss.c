/*
 * scoperss.c -- the RSS a default scope reads at its enter and its exit
 * (the rule and its bound: scope.h; why: docs/decisions.md, decision 58).
 *
 * The last read is process-wide, as RSS is, and lives under the GIL.  A
 * forked child never takes its parent's read: fork() takes far longer than
 * SHP_RSS_SHARE_NS, so the child's first enter reads afresh.
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
