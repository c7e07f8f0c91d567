/*
 * mallocstate.c -- glibc malloc's mmap threshold: read it, raise it.
 *
 * glibc serves a request with a fresh mmap when it is at least the mmap
 * threshold and the heap has no room for it, and hands such a block back
 * to the kernel when it is freed; freeing one also raises the threshold to
 * the block's size (up to 32 MiB) and the trim threshold to twice that
 * (the "dynamic mmap threshold", mallopt(3)).  A fresh interpreter starts
 * at 128 KiB, so a callable whose temporaries are a few MB pays page faults
 * every call there, and none in a process that once freed a larger block
 * (docs/methodology.md, "Allocator state").  For repetitions in fresh
 * interpreters to measure what an in-process run measures, the parent
 * reads its effective threshold here and the child raises its own to it
 * the way glibc itself does -- by freeing a mapped block of that size --
 * which keeps the threshold dynamic, as mallopt(M_MMAP_THRESHOLD) would not.
 *
 * Reading without changing it: a probe malloc(n) was mapped iff mallinfo2's
 * count of mapped blocks (hblks) grew; a mapped probe is shrunk to one page
 * by realloc (mremap) before it is freed, so its free never raises the
 * threshold (only freeing a mapped block above the threshold does).  What
 * is read is the *effective* threshold: the smallest request that would be
 * mapped now, which is the threshold unless the heap has a free block that
 * large.  Probing takes ~15 malloc/free pairs and allocates no memory that
 * is touched.
 *
 * Elsewhere (not glibc 2.33+, or a malloc that mallinfo2 does not describe:
 * ASan, valgrind) both report "unknown" and change nothing.  Layer 0: calls
 * nothing of ours.
 */
#include "platform/platform.h"

#if defined(__GLIBC__)
#include <malloc.h>
#include <unistd.h>
#if __GLIBC_PREREQ(2, 33)
#define SHP_HAVE_MALLINFO2 1
#endif
#endif

#ifdef SHP_HAVE_MALLINFO2

#define MAX_DYNAMIC ((int64_t)32 * 1024 * 1024)   /* DEFAULT_MMAP_THRESHOLD_MAX, 64-bit */
#define CHUNK_SLACK 32   /* request = pages - 32: its chunk fills exactly those pages */

/* malloc(n) into *out; 1 if glibc mapped it, 0 if the heap served it, -1
 * if malloc failed. */
static int
probe_alloc(size_t n, void **out)
{
    struct mallinfo2 before = mallinfo2();
    void *p = malloc(n);
    struct mallinfo2 after = mallinfo2();
    *out = p;
    if (p == NULL)
        return -1;
    return after.hblks > before.hblks;
}

/* Free a probe without moving the threshold: a mapped block is first
 * shrunk to one page (mremap), and a one-page block is below any
 * dynamic threshold. */
static void
probe_free(void *p, int mapped)
{
    if (mapped == 1) {
        void *q = realloc(p, 1);
        if (q != NULL)
            p = q;
    }
    free(p);
}

/* Whether a request filling `pages` pages is mapped now; -1 on failure. */
static int
mapped_at(int64_t pages, int64_t page)
{
    void *p;
    int m = probe_alloc((size_t)(pages * page - CHUNK_SLACK), &p);
    if (m >= 0)
        probe_free(p, m);
    return m;
}

int64_t
shp_malloc_mmap_threshold(void)
{
    long ps = sysconf(_SC_PAGESIZE);
    if (ps <= 0)
        return -1;
    int64_t page = ps;
    /* a block above any dynamic threshold must be seen mapped, or mallinfo2
     * does not describe the malloc in use (ASan, valgrind) */
    if (mapped_at(2 * MAX_DYNAMIC / page + 1, page) != 1)
        return -1;
    int64_t lo = 1, hi = MAX_DYNAMIC / page + 1;
    int m = mapped_at(hi, page);
    if (m < 0)
        return -1;
    if (m == 0)
        return MAX_DYNAMIC;   /* the heap serves every size a dynamic threshold can reach */
    m = mapped_at(lo, page);
    if (m < 0)
        return -1;
    if (m == 1)
        return page;          /* set below a page (mallopt or MALLOC_MMAP_THRESHOLD_) */
    while (hi - lo > 1) {     /* mapped at hi, not at lo */
        int64_t mid = lo + (hi - lo) / 2;
        m = mapped_at(mid, page);
        if (m < 0)
            return -1;
        if (m)
            hi = mid;
        else
            lo = mid;
    }
    /* a request of k pages - 32 bytes has a chunk of k pages - 16: it is
     * mapped from k = T / page + 1 on */
    return (hi - 1) * page;
}

int64_t
shp_malloc_raise_threshold(int64_t bytes)
{
    int64_t now = shp_malloc_mmap_threshold();
    if (now < 0 || bytes <= now)
        return now;
    if (bytes > MAX_DYNAMIC)
        bytes = MAX_DYNAMIC;
    long ps = sysconf(_SC_PAGESIZE);
    int64_t page = ps > 0 ? ps : 4096;
    bytes = (bytes + page - 1) / page * page;
    /* Free one mapped block of `bytes`: glibc then raises the threshold to
     * its size.  When the heap still has room for the request, hold those
     * blocks so that the next one must be mapped. */
    void *held[16];
    int nheld = 0;
    while (nheld < 16) {
        void *p;
        int m = probe_alloc((size_t)(bytes - CHUNK_SLACK), &p);
        if (m < 0)
            break;
        if (m == 1) {
            free(p);   /* the raise */
            break;
        }
        held[nheld++] = p;
    }
    while (nheld > 0)
        free(held[--nheld]);
    return shp_malloc_mmap_threshold();
}

#else

int64_t
shp_malloc_mmap_threshold(void)
{
    return -1;
}

int64_t
shp_malloc_raise_threshold(int64_t bytes)
{
    (void)bytes;
    return -1;
}

#endif
