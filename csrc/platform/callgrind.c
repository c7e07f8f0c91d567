/*
 * callgrind.c -- instruction counts under valgrind's callgrind: the counted
 * call, and one dump per benchmark.
 *
 * spatialhub-bench --instructions and pytest --benchmark-instructions run
 * the process again under (instructions.py)
 *
 *     valgrind --tool=callgrind --toggle-collect=shp_counted_call
 *              --zero-before=shp_cg_zero_point --dump-after=shp_cg_dump_point
 *              --callgrind-out-file=DIR/callgrind.%p.out ...
 *
 * with SPATIALHUB_CALLGRIND_DIR=DIR.  The timed loop makes every timed call
 * through shp_counted_call (the call and the release of its result: the
 * timed region less the syncs and the clock reads), so callgrind collects
 * exactly those instructions and nothing of the harness; the warm-up calls
 * do not go through it.  Around a benchmark's timed loop the harness calls
 * the zero point (what was collected before -- the overhead floor's no-op
 * loop, an earlier benchmark's remains -- is dropped) and the dump point
 * (callgrind writes DIR/callgrind.<pid>.out.<k>), and reads that dump's
 * total back: the instructions of this benchmark's timed calls.
 *
 * Callgrind collects per thread: work the call hands to other threads is not
 * counted.  Without valgrind the markers are two empty calls per benchmark,
 * outside the timed loop, and the counted call is one more call level.
 *
 * A leaf: calls no other file.
 */
#include "platform/platform.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(SHP_LINUX) || defined(SHP_MACOS)
#include <unistd.h>
#define SHP_GETPID() ((long)getpid())
#else
#include <process.h>
#define SHP_GETPID() ((long)_getpid())
#endif

#if defined(__GNUC__) || defined(__clang__)
#define SHP_NOINLINE __attribute__((noinline))
#else
#define SHP_NOINLINE __declspec(noinline)
#endif

/* Written by the markers so that no linker folds the two into one symbol
 * (callgrind tells them apart by name). */
static volatile int marks;

SHP_NOINLINE int
shp_counted_call(PyObject *func, PyObject *const *args, size_t nargsf, PyObject *kwnames,
                 PyObject *drive, PyObject **lazy)
{
    PyObject *r = PyObject_Vectorcall(func, args, nargsf, kwnames);
    if (r != NULL && drive != NULL)
        Py_SETREF(r, PyObject_CallOneArg(drive, r));   /* run to completion */
    if (r == NULL)
        return -1;
    if (lazy != NULL && shp_result_is_lazy(r)) {
        *lazy = r;   /* handed back, not released: its work is still to do */
        return 0;
    }
    Py_DECREF(r);   /* inside the timed region, as `func(...)` as a statement */
    return 0;
}

SHP_NOINLINE void
shp_cg_zero_point(void)
{
    marks += 1;
}

SHP_NOINLINE void
shp_cg_dump_point(void)
{
    marks += 2;
}

void
shp_cg_init(shp_callgrind *cg)
{
    memset(cg, 0, sizeof(*cg));
    /* valgrind puts its preload library in the client's LD_PRELOAD and takes it
     * out again for a child it does not follow: a test's subprocess that merely
     * inherits SPATIALHUB_CALLGRIND_DIR is not under callgrind */
    const char *pre = getenv("LD_PRELOAD");
    cg->under_valgrind = pre != NULL && strstr(pre, "vgpreload") != NULL;
    const char *dir = getenv(SHP_CALLGRIND_ENV);
    if (dir == NULL || dir[0] == '\0' || !cg->under_valgrind)
        return;
    if (strlen(dir) >= sizeof(cg->dir) - 64)
        return;
    strcpy(cg->dir, dir);
    cg->on = 1;
}

int
shp_cg_collect(shp_callgrind *cg, double *ir)
{
    char path[sizeof(cg->dir) + 64];
    /* a fork child's dumps carry its own pid; callgrind and cg->dumps both
     * count on from the parent's number */
    cg->dumps++;
    snprintf(path, sizeof(path), "%s/callgrind.%ld.out.%ld", cg->dir, SHP_GETPID(), cg->dumps);
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        PyErr_Format(PyExc_RuntimeError,
                     "instruction count: callgrind wrote no dump %s (%s): this process runs "
                     "under valgrind with " SHP_CALLGRIND_ENV " set, but not with the "
                     "options spatialhub-bench --instructions / pytest "
                     "--benchmark-instructions give it", path, strerror(errno));
        return -1;
    }
    /* "summary:" is what was collected since the zero point.  "totals:" (the
     * sum of the dump's cost lines) can hold more: on the first benchmark of
     * a callable it read ~2,000 instructions above five calls' summary, the
     * same in every run; it is read only when a dump has no summary. */
    char line[256];
    long long summary = -1, totals = -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        int is_summary = strncmp(line, "summary:", 8) == 0;
        if (is_summary || strncmp(line, "totals:", 7) == 0) {
            char *p = strchr(line, ':') + 1, *end = NULL;
            long long v = strtoll(p, &end, 10);
            if (end != p)
                *(is_summary ? &summary : &totals) = v;
        }
    }
    long long total = summary >= 0 ? summary : totals;
    fclose(f);
    remove(path);
    if (total < 0) {
        PyErr_Format(PyExc_RuntimeError, "instruction count: no total in callgrind's dump %s",
                     path);
        return -1;
    }
    *ir = (double)total;
    return 0;
}
