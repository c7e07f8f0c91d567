/*
 * module.h -- the top: module.c (init, method table, module state, test
 * hooks) and constants.c (the documented defaults as module constants)
 * see every folder.
 */
#ifndef SHP_MODULE_H
#define SHP_MODULE_H

#include "run/run.h"
#include "scope/scope.h"

/* ---- constants.c: the documented defaults and thresholds ---------------- */

/* Add every default and threshold that docs/ and help texts state to module m
 * as a module constant (_native.ASSUMED_RUN_SPREAD, _native.PAGE_FAULTS_WARN,
 * ...; the list is docs/design.md's "Defaults and thresholds").  The values
 * are the macros the code uses, so a help string formatted from the constant
 * and tests/test_docs_consistency.py cannot drift from them.  0 / -1. */
int shp_constants_add(PyObject *m);

#endif /* SHP_MODULE_H */
