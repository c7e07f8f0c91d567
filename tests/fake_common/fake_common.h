/*
 * fake_common.h -- what the test-only stand-ins for driver libraries
 * (tests/fake_cuda/fake_cuda.c, tests/fake_nvml/fake_nvml.c) share: the export
 * macro, integer knobs read from the environment, and the report a fake
 * writes at process exit (after the interpreter has freed the module) so a
 * test can see what teardown did.
 *
 * Header-only: each fake stays one .c file, built on its own
 * (cc -shared -fPIC -O1 -pthread fake_x.c -o libfakex.so), and includes this
 * by its path relative to the .c file.
 */
#ifndef FAKE_COMMON_H
#define FAKE_COMMON_H

#include <stdio.h>
#include <stdlib.h>

#define EXPORT __attribute__((visibility("default")))

/* The integer in the environment variable `name`: 1 with *out set when the
 * variable is set and not empty (atoi: not a number reads as 0), else 0
 * with *out untouched. */
static inline int
fake_env_int(const char *name, int *out)
{
    const char *v = getenv(name);

    if (v == NULL || v[0] == '\0') {
        return 0;
    }
    *out = atoi(v);
    return 1;
}

/* The exit report named by the environment variable `name`, opened for
 * writing; NULL when the variable is unset or empty or the file cannot be
 * opened (a report nobody asked for is not written). */
static inline FILE *
fake_exit_report_open(const char *name)
{
    const char *path = getenv(name);

    if (path == NULL || path[0] == '\0') {
        return NULL;
    }
    return fopen(path, "w");
}

#endif /* FAKE_COMMON_H */
