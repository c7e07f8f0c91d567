/*
 * dynlib.c -- the platform's dynamic loader, for the CUDA driver (a leaf).
 *
 * dlopen / LoadLibraryEx, symbol lookup, and the SPATIALHUB_LIBCUDA
 * override.  No Python, no other file: callable without the GIL.  Not
 * built into anything on macOS (no CUDA there).
 */
#include "platform/platform.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(SHP_WINDOWS)
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#elif !defined(SHP_MACOS)
#include <dlfcn.h>
#endif

#if defined(SHP_WINDOWS)

void *
shp_dl_open(const char *path, int is_override, char *err, size_t errsize)
{
    HMODULE h;

    /* The system copy only, so a stray nvcuda.dll beside the script is never
     * picked up; an explicit override is loaded as named. */
    h = LoadLibraryExA(path, NULL, is_override ? 0 : LOAD_LIBRARY_SEARCH_SYSTEM32);
    if (h == NULL) {
        (void)snprintf(err, errsize, "%.150s: LoadLibraryEx error %lu", path,
                       (unsigned long)GetLastError());
    }
    return (void *)h;
}

void *
shp_dl_sym(void *lib, const char *name)
{
    FARPROC p = GetProcAddress((HMODULE)lib, name);
    void *v;

    memcpy(&v, &p, sizeof v);
    return v;
}

void
shp_dl_close(void *lib)
{
    (void)FreeLibrary((HMODULE)lib);
}

/* SPATIALHUB_LIBCUDA into buf: 1 if set and non-empty, 0 if not, -1 if it
 * does not fit (never silently replaced by the default). */
int
shp_cuda_override(char *buf, size_t size)
{
    DWORD n = GetEnvironmentVariableA(SHP_CUDA_ENV, buf, (DWORD)size);

    if (n == 0) {
        return 0;
    }
    return n < size ? 1 : -1;
}

#elif !defined(SHP_MACOS)

void *
shp_dl_open(const char *path, int is_override, char *err, size_t errsize)
{
    void *h;
    const char *msg;

    (void)is_override;
    /* RTLD_LOCAL: the driver's symbols must not satisfy anyone else's
     * lookups through us. */
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        msg = dlerror();
        (void)snprintf(err, errsize, "%s", msg != NULL ? msg : "dlopen failed");
    }
    return h;
}

void *
shp_dl_sym(void *lib, const char *name)
{
    return dlsym(lib, name);
}

void
shp_dl_close(void *lib)
{
    (void)dlclose(lib);
}

/* SPATIALHUB_LIBCUDA into buf: 1 if set and non-empty, 0 if not, -1 if it
 * does not fit (never silently replaced by the default). */
int
shp_cuda_override(char *buf, size_t size)
{
    const char *v = getenv(SHP_CUDA_ENV);
    int n;

    if (v == NULL || v[0] == '\0') {
        return 0;
    }
    n = snprintf(buf, size, "%s", v);
    return n > 0 && (size_t)n < size ? 1 : -1;
}

#endif
