/*
 * rusage.c -- what the OS did to the calling thread: page faults and
 * context switches (getrusage(RUSAGE_THREAD) on Linux).
 *
 * Read before and after the timed loop, never inside the timed region; the
 * difference over the iterations says whether a figure is the callable's
 * work or the kernel's (a callable whose big temporaries glibc hands back
 * to the kernel every call pays ~1,800 zero-filled page faults per call:
 * docs/methodology.md, "Allocator state").  Elsewhere: not available.
 *
 * A leaf: calls no other file.
 */
#include "platform/platform.h"

#if defined(SHP_LINUX)
#include <sys/resource.h>
#include <sys/time.h>
#endif

int
shp_rusage_thread(shp_rusage *out)
{
    out->ok = 0;
    out->minflt = out->majflt = out->nvcsw = out->nivcsw = 0;
#if defined(SHP_LINUX) && defined(RUSAGE_THREAD)
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) != 0)
        return 0;
    out->minflt = (int64_t)ru.ru_minflt;
    out->majflt = (int64_t)ru.ru_majflt;
    out->nvcsw = (int64_t)ru.ru_nvcsw;
    out->nivcsw = (int64_t)ru.ru_nivcsw;
    out->ok = 1;
#endif
    return out->ok;
}
