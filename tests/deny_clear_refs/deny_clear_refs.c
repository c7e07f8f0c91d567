/*
 * LD_PRELOAD shim for the tests: opening /proc/self/clear_refs fails with
 * EACCES, as in a container or sandbox that does not let a process reset its
 * RSS high-water mark.  Everything else goes to the C library's open().
 * Lets the real fallback path of memory.c (reset_hwm() failing) run, rather
 * than the _force_sampled_rss() test hook.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>

static int
denied(const char *path)
{
    return path != NULL && strcmp(path, "/proc/self/clear_refs") == 0;
}

#define INTERPOSE(fn)                                                        \
    int fn(const char *path, int flags, ...)                                 \
    {                                                                        \
        static int (*real)(const char *, int, ...);                          \
        mode_t mode = 0;                                                     \
        if (flags & (O_CREAT | O_TMPFILE)) {                                 \
            va_list va;                                                      \
            va_start(va, flags);                                             \
            mode = (mode_t)va_arg(va, int);                                  \
            va_end(va);                                                      \
        }                                                                    \
        if (denied(path)) {                                                  \
            errno = EACCES;                                                  \
            return -1;                                                       \
        }                                                                    \
        if (real == NULL)                                                    \
            real = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, #fn);   \
        return real(path, flags, mode);                                      \
    }

INTERPOSE(open)
INTERPOSE(open64)
