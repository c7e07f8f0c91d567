/*
 * cachecold.c -- evicting the CPU's last-level cache between iterations.
 *
 * cache="cold" asks for every timed call to start with nothing of its data
 * in the CPU caches, as a call in a streaming pipeline meets them.  Before
 * each call, outside the timed region, the harness writes one word in every
 * cache line of a buffer SHP_LLC_EVICT_FACTOR times the last-level cache's
 * size and reads them back.  Twice the size, not once: replacement policies
 * are not exact LRU and the LLC may be non-inclusive of L2, so a single
 * pass of exactly the capacity leaves some of the old lines in place.
 *
 * The size comes from SPATIALHUB_LLC_BYTES when set (a virtual machine may
 * report the host's whole L3), else from the OS: sysfs on Linux (the highest-level data or
 * unified cache of cpu0), then glibc's sysconf, sysctl on macOS,
 * GetLogicalProcessorInformation on Windows.  It is cpu0's view: on parts
 * with several LLC slices (one per chiplet) it is the slice the thread runs
 * next to, which is the one that matters to it.
 */
#include "platform/platform.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(SHP_WINDOWS)
#include <windows.h>
#elif defined(SHP_MACOS)
#include <sys/sysctl.h>
#include <sys/types.h>
#else
#include <unistd.h>
#endif

#define SHP_LINE 64   /* a cache line on every CPU this runs on (x86, arm64) */

/* The machine's LLC size: process-wide, read once (a race only repeats the
 * same read with the same answer). */
static size_t llc_size;
static const char *llc_source = "assumed";

#if defined(SHP_LINUX)
/* "32768K", "32M", "1024" -> bytes; 0 when unreadable. */
static size_t
parse_size(const char *s)
{
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s)
        return 0;
    if (*end == 'K' || *end == 'k')
        v <<= 10;
    else if (*end == 'M' || *end == 'm')
        v <<= 20;
    else if (*end == 'G' || *end == 'g')
        v <<= 30;
    return (size_t)v;
}

static int
read_line(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    char *ok = fgets(buf, (int)n, f);
    fclose(f);
    return ok ? 0 : -1;
}

/* The highest-level data or unified cache of cpu0 in sysfs; 0 if none. */
static size_t
llc_from_sysfs(void)
{
    size_t best = 0;
    int best_level = 0;
    for (int i = 0; i < 16; i++) {
        char path[128], line[64];
        (void)snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        if (read_line(path, line, sizeof line) < 0)
            break;
        int level = atoi(line);
        (void)snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        if (read_line(path, line, sizeof line) < 0 || strncmp(line, "Instruction", 11) == 0)
            continue;
        (void)snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (read_line(path, line, sizeof line) < 0)
            continue;
        size_t sz = parse_size(line);
        if (sz > 0 && level >= best_level) {
            best_level = level;
            best = sz;
        }
    }
    return best;
}
#endif

size_t
shp_llc_bytes(const char **source)
{
    if (llc_size == 0) {
        size_t sz = 0;
        const char *src = "assumed";
        const char *env = getenv("SPATIALHUB_LLC_BYTES");
        if (env != NULL && env[0] != '\0') {
            char *end = NULL;
            unsigned long long v = strtoull(env, &end, 10);
            if (end != env && *end == '\0' && v > 0) {
                sz = (size_t)v;
                src = "SPATIALHUB_LLC_BYTES";
            }
        }
#if defined(SHP_LINUX)
        if (sz == 0) {
            sz = llc_from_sysfs();
            if (sz > 0)
                src = "sysfs";
        }
#endif
#if defined(_SC_LEVEL3_CACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE)
        if (sz == 0) {
            long v = sysconf(_SC_LEVEL3_CACHE_SIZE);
            if (v <= 0)
                v = sysconf(_SC_LEVEL2_CACHE_SIZE);
            if (v > 0) {
                sz = (size_t)v;
                src = "sysconf";
            }
        }
#endif
#if defined(SHP_MACOS)
        {
            int64_t v = 0;
            size_t len = sizeof v;
            if (sysctlbyname("hw.l3cachesize", &v, &len, NULL, 0) != 0 || v <= 0) {
                len = sizeof v;
                if (sysctlbyname("hw.l2cachesize", &v, &len, NULL, 0) != 0)
                    v = 0;
            }
            if (v > 0) {
                sz = (size_t)v;
                src = "sysctl";
            }
        }
#endif
#if defined(SHP_WINDOWS)
        {
            DWORD len = 0;
            (void)GetLogicalProcessorInformation(NULL, &len);
            SYSTEM_LOGICAL_PROCESSOR_INFORMATION *info = len ? malloc(len) : NULL;
            if (info != NULL && GetLogicalProcessorInformation(info, &len)) {
                BYTE best_level = 0;
                for (DWORD i = 0; i < len / sizeof(*info); i++) {
                    if (info[i].Relationship != RelationCache ||
                        info[i].Cache.Type == CacheInstruction)
                        continue;
                    if (info[i].Cache.Level >= best_level) {
                        best_level = info[i].Cache.Level;
                        sz = info[i].Cache.Size;
                    }
                }
                if (sz > 0)
                    src = "GetLogicalProcessorInformation";
            }
            free(info);
        }
#endif
        if (sz == 0)
            sz = SHP_LLC_ASSUMED_BYTES;
        llc_source = src;
        llc_size = sz;
    }
    if (source != NULL)
        *source = llc_source;
    return llc_size;
}

int
shp_llc_evictor_init(shp_llc_evictor *e)
{
    size_t llc = shp_llc_bytes(NULL);
    size_t size = llc > SHP_LLC_EVICT_MAX / SHP_LLC_EVICT_FACTOR ? SHP_LLC_EVICT_MAX
                                                                 : llc * SHP_LLC_EVICT_FACTOR;
    e->buf = PyMem_RawMalloc(size);
    if (e->buf == NULL) {
        e->size = 0;
        PyErr_Format(PyExc_MemoryError,
                     "cache='cold' cannot allocate its %zu MiB eviction buffer", size >> 20);
        return -1;
    }
    memset(e->buf, 1, size);
    e->size = size;
    return 0;
}

/* The reads must not be optimised away. */
static volatile unsigned long long evict_sink;

void
shp_llc_evict(shp_llc_evictor *e)
{
    unsigned char *b = e->buf;
    unsigned long long sum = 0;
    if (b == NULL)
        return;
    for (size_t i = 0; i < e->size; i += SHP_LINE)
        b[i]++;
    for (size_t i = 0; i < e->size; i += SHP_LINE)
        sum += b[i];
    evict_sink += sum;
}

void
shp_llc_evictor_free(shp_llc_evictor *e)
{
    PyMem_RawFree(e->buf);
    e->buf = NULL;
    e->size = 0;
}
