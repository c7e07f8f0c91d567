/*
 * constants.c -- the defaults and thresholds that users read about, as module
 * constants of _native.
 *
 * Docs and help texts state these numbers (an assumed 15% between runs, a 5%
 * margin, a warning above 256 page faults a call, ...): exported from the
 * very macros the code uses, a help string is formatted from the value and
 * tests/test_docs_consistency.py holds docs/ to it (decision 57).  A new
 * constant is one line here and one row in docs/design.md.  Calls no other
 * file of ours.
 */
#include "module.h"

typedef struct {
    const char *name;
    double value;
} shp_real_constant;

typedef struct {
    const char *name;
    long value;
} shp_int_constant;

static const shp_real_constant reals[] = {
    /* verdicts and rerun intervals (verdict.c; docs/statistics.md) */
    {"DEFAULT_MARGIN", SHP_DEFAULT_MARGIN},
    {"ASSUMED_RUN_SPREAD", SHP_ASSUMED_RUN_SPREAD},
    {"ASSUMED_BUSY_RUN_SPREAD", SHP_ASSUMED_BUSY_RUN_SPREAD},
    /* a busy machine (env.c; docs/methodology.md, preflight) */
    {"BUSY_CPU_SHARE", SHP_BUSY_SHARE},
    {"BUSY_LOAD_PER_CPU", SHP_BUSY_LOAD},
    /* the warnings' thresholds (flags.c, bench.c, extras.c; docs/statistics.md) */
    {"PAGE_FAULTS_WARN", SHP_FAULTS_WARN},
    {"OVERHEAD_FACTOR", SHP_OVERHEAD_FACTOR},
    {"COARSE_TIMER_FACTOR", SHP_COARSE_TIMER_FACTOR},
    {"LAUNCH_BOUND_HOST_SHARE", SHP_LAUNCH_BOUND},
    {"GPU_CLOCK_MOVE", SHP_NVML_CLOCK_MOVE},
    {"SETTLE_TOL", SHP_SETTLE_TOL},
    {"SETTLE_WARN", SHP_SETTLE_WARN},
    /* the stability label (stability.c) */
    {"NOISY_IQR", SHP_STAB_IQR},
    {"NOISY_P95", SHP_STAB_TAIL},
    {"DRIFT", SHP_STAB_DRIFT},
    {"DRIFT_T", SHP_STAB_DRIFT_T},
    {"MODES_D", SHP_STAB_MODES_D},
    {"MODES_D_SMALL", SHP_STAB_MODES_D_SMALL},
    {"MODE_SEPARATION", SHP_STAB_MODE_SEP},
    {"MODE_MIN_SHARE", SHP_STAB_MIN_FRAC},
    /* adaptive stopping (bench.c) */
    {"ADAPTIVE_DEFAULT_TIME_S", SHP_ADAPTIVE_DEFAULT_TIME_S},
    /* latency under load (load.c, queueing.c, flags.c; docs/load.md) */
    {"LOAD_DEFAULT_DURATION_S", SHP_LOAD_DEFAULT_DURATION_S},
    {"LOAD_MAX_DURATION_S", SHP_LOAD_MAX_DURATION_S},
    {"LOAD_OVERLOAD_Z", SHP_LOAD_OVERLOAD_Z},
    {"LOAD_LAG_SHARE", SHP_LOAD_LAG_SHARE},
};

static const shp_int_constant ints[] = {
    /* benchmark_callable's defaults (bench.c), which every entry point takes */
    {"DEFAULT_NUM_WARMUP", SHP_DEFAULT_NUM_WARMUP},
    {"DEFAULT_NUM_ITERS", SHP_DEFAULT_NUM_ITERS},
    {"ADAPTIVE_MAX_SAMPLES", SHP_ADAPTIVE_MAX_SAMPLES},
    {"SETTLE_MIN_TIMED", SHP_SETTLE_MIN_TIMED},
    {"SETTLE_MAX_TAIL", SHP_SETTLE_MAX_TAIL},
    {"BLOCKS_MAX", SHP_MAX_BLOCKS},
    {"BLOCK_MIN_SAMPLES", SHP_MIN_BLOCK},
    {"MODES_N", SHP_STAB_MODES_N},
    {"MODE_MIN_SAMPLES", SHP_STAB_MIN_MODE_N},
    {"NOISY_MIN_SAMPLES", SHP_STAB_MIN_NOISY_N},
    {"LLC_ASSUMED_BYTES", (long)SHP_LLC_ASSUMED_BYTES},
    /* how old an RSS read a scope's enter may take (scoperss.c; docs/memory.md) */
    {"RSS_SHARE_NS", SHP_RSS_SHARE_NS},
    /* latency under load (load.c, queueing.c, flags.c; docs/load.md) */
    {"LOAD_MAX_REQUESTS", SHP_LOAD_MAX_REQUESTS},
    {"LOAD_MAX_WORKERS", SHP_LOAD_MAX_WORKERS},
    {"LOAD_FEW_REQUESTS", SHP_LOAD_FEW_REQUESTS},
    {"LOAD_MIN_TAIL", SHP_LOAD_MIN_TAIL},
    {"LOAD_OVERLOAD_MIN_ARRIVALS", SHP_LOAD_OVERLOAD_MIN_ARRIVALS},
    {"LOAD_MIN_BLOCKS", SHP_LOAD_MIN_BLOCKS},
    {"LOAD_BOOT_REPS", SHP_LOAD_BOOT_REPS},
    {"LOAD_SPIN_NS", (long)SHP_LOAD_SPIN_NS},
};

int
shp_constants_add(PyObject *m)
{
    for (size_t i = 0; i < sizeof(reals) / sizeof(reals[0]); i++) {
        PyObject *v = PyFloat_FromDouble(reals[i].value);
        if (v == NULL)
            return -1;
        if (PyModule_AddObject(m, reals[i].name, v) < 0) {   /* steals v on success */
            Py_DECREF(v);
            return -1;
        }
    }
    for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++)
        if (PyModule_AddIntConstant(m, ints[i].name, ints[i].value) < 0)
            return -1;
    return 0;
}
