/*
 * counters.c -- instructions and cycles per call, around the timed loop.
 *
 * Two sources, one figure (docs/methodology.md, "Instruction counts"):
 *
 * - callgrind (the --instructions modes, callgrind.c): the instructions of
 *   the timed calls themselves, counted by valgrind: the call and the release
 *   of its result, nothing of the harness.  Every benchmark of a process run
 *   that way has it, asked for or not.
 * - the CPU's counters (counters=("instructions", "cycles"), perfctr.c): read
 *   once before and once after the whole timed loop, outside every timed
 *   region; the loop's own work per iteration (the clock reads, the syncs,
 *   storing the sample: the native no-op's count through the same loop,
 *   measured once per process as overhead_ms is) is subtracted.
 *
 * A counter asked for and not available (no PMU, refused, multiplexed, not
 * Linux, under valgrind) stays None on the result and the call's warning says
 * why (CountersWarning); nothing is estimated in its place.
 *
 * Layer 5: the leaves perfctr.c and callgrind.c, args.c, warn.c's diagnosis.
 */
#include "run/run.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const names[SHP_N_COUNTERS] = {"instructions", "cycles"};
#define CHOICES "None, or names from 'instructions', 'cycles'"

static void
pick_counter(void *want, int i)
{
    *(unsigned *)want |= 1u << i;
}

int
shp_counters_parse(PyObject *v, unsigned *want)
{
    *want = 0;
    if (v == NULL || v == Py_None)
        return 0;
    return shp_arg_names(v, "benchmark_callable()", "counters", CHOICES, names, SHP_N_COUNTERS,
                         pick_counter, want);
}

void
shp_counters_setup(shp_state *st, shp_counters *c, unsigned want)
{
    memset(c, 0, sizeof(*c));
    c->want = want;
    c->cg = st->cg.on;
    if (want == 0)
        return;
    if (st->cg.under_valgrind) {
        /* valgrind runs the code translated: the CPU's counters would count
         * its work, not the program's */
        unsigned hw = want & ~(c->cg ? 1u << SHP_CTR_INSTRUCTIONS : 0u);
        if (hw != 0)
            snprintf(c->why, sizeof c->why,
                     "under valgrind the CPU's counters count valgrind's own work, not the "
                     "program's%s", c->cg ? " (callgrind counts the instructions)" : "");
        return;
    }
    if (shp_perfctr_open(&c->pc, want, c->why, sizeof c->why) == 0)
        c->hw = 1;
}

void
shp_counters_start(shp_counters *c)
{
    if (c->hw && shp_perfctr_start(&c->pc) < 0) {
        snprintf(c->why, sizeof c->why, "starting the counters failed");
        shp_perfctr_close(&c->pc);
        c->hw = 0;
    }
    if (c->cg)
        shp_cg_zero_point();   /* what was collected before this loop is dropped */
}

/* The totals into c->total.  With an exception already set (the loop's), the
 * callgrind dump is still taken, so that the next benchmark reads its own. */
static int
stop(shp_state *st, shp_counters *c)
{
    if (c->hw) {
        double v[SHP_N_COUNTERS];
        if (shp_perfctr_stop(&c->pc, v, c->why, sizeof c->why) == 0)
            for (int i = 0; i < SHP_N_COUNTERS; i++)
                if (c->want & (1u << i))
                    c->total[i] = v[i];
    }
    if (c->cg) {
        shp_cg_dump_point();
        if (shp_cg_collect(&st->cg, &c->total[SHP_CTR_INSTRUCTIONS]) < 0)
            return -1;
        if (c->total[SHP_CTR_INSTRUCTIONS] <= 0) {
            /* every call executes something: nothing counted means callgrind never
             * entered the counted call by name */
            PyErr_SetString(PyExc_RuntimeError,
                            "instruction count: callgrind counted nothing in shp_counted_call "
                            "(is the native module stripped of its symbols?)");
            return -1;
        }
        c->from_cg = 1;
    }
    return 0;
}

int
shp_counters_stop(shp_state *st, shp_counters *c)
{
    for (int i = 0; i < SHP_N_COUNTERS; i++)
        c->total[i] = NAN;
    if (!PyErr_Occurred())
        return stop(st, c);
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (stop(st, c) < 0)
        PyErr_Clear();
    PyErr_Restore(type, value, tb);
    return -1;
}

int
shp_counters_fill(shp_Stats *s, const shp_counters *c, Py_ssize_t n,
                  const double floor[SHP_N_COUNTERS], shp_diag *d)
{
    double *field[SHP_N_COUNTERS] = {&s->instructions_per_call, &s->cycles_per_call};
    int any = 0;
    for (int i = 0; i < SHP_N_COUNTERS; i++) {
        *field[i] = NAN;
        if (isnan(c->total[i]) || n < 1)
            continue;
        double per = c->total[i] / (double)n;
        if (!(c->from_cg && i == SHP_CTR_INSTRUCTIONS)) {
            /* the hardware count holds the loop's own work: take its floor out
             * (a call cheaper than the no-op reads 0, not below) */
            if (isnan(floor[i]))
                continue;
            per = per > floor[i] ? per - floor[i] : 0.0;
        }
        *field[i] = per;
        any = 1;
    }
    if (any) {
        PyObject *o = PyUnicode_FromString(c->from_cg ? "callgrind" : "perf_event");
        if (o == NULL)
            return -1;
        Py_XSETREF(s->counter_source, o);
    }
    /* asked for and not given: said once, with the reason */
    int missing = 0;
    for (int i = 0; i < SHP_N_COUNTERS; i++)
        missing |= (c->want & (1u << i)) && isnan(*field[i]);
    if (missing) {
        shp_diag_cause(d, SHP_CAUSE_NO_COUNTERS);
        const char *why = c->why[0] ? c->why : "the counters' floor could not be measured";
        if (shp_diag_object(d, "reason", PyUnicode_FromString(why)) < 0)
            return -1;
    }
    return 0;
}

void
shp_counters_close(shp_counters *c)
{
    if (c->hw)
        shp_perfctr_close(&c->pc);
    c->hw = 0;
}
