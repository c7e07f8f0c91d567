/*
 * scope/ -- the scope profiler (Timer, timeit, HierarchicalProfiler,
 * ProfileNode) with enter and exit in C.  Within the folder calls go one
 * way: scope.c -> scopetimer.c -> scopeframe.c -> scopenode.c ->
 * scopedata.c (histogram, trace ring); scoperss.c is the RSS a default
 * scope reads.  Calls go down to capi/, gpu/ and platform/.
 */
#ifndef SHP_SCOPE_SCOPE_H
#define SHP_SCOPE_SCOPE_H

#include "objects.h"
#include "capi/capi.h"

/* ---- scoperss.c: the RSS a scope reads at enter and exit --------------- */

/* How old a read an enter may take (ns). */
#define SHP_RSS_SHARE_NS 1000
/* RSS in bytes at a scope's enter that happens at `now_ns` (shp_now_ns): the
 * last enter's or exit's read when it returned at most SHP_RSS_SHARE_NS
 * before (and not after now_ns), else a fresh shp_rss_bytes(), stamped with
 * shp_now_ns() as it returns.  The scope's RSS window may so open up to
 * SHP_RSS_SHARE_NS before its clocks start, holding what ran in that time
 * (docs/memory.md states the bound).  When the read returned goes to
 * *read_ns unless read_ns is NULL.  -1 (no exception) if unavailable.  Hold
 * the GIL; no Python calls. */
int64_t shp_rss_at_enter(int64_t now_ns, int64_t *read_ns);
/* RSS in bytes at a scope's exit: always a fresh read, kept for the next
 * enter; when it returned goes to *read_ns unless read_ns is NULL.  -1 (no
 * exception) if unavailable.  Hold the GIL; no Python calls. */
int64_t shp_rss_at_exit(int64_t *read_ns);

/* ---- scopedata.c: a scope's bounded data (pure leaf, never fails) ------- */

/*
 * Latency histogram with log-spaced buckets: any percentile it reports is
 * within 1 % of NumPy's method="linear" percentile of the same durations;
 * min, max and count are exact.  Memory grows with the span of durations
 * seen (log-scale), never with their number.  Hold the GIL (PyMem).
 */
typedef struct {
    uint64_t *counts;     /* buckets lo .. lo + len - 1, PyMem; NULL when empty */
    int32_t lo, len;
    uint64_t zeros;       /* durations of 0 ns */
    uint64_t n;           /* every recorded duration, dropped ones included */
    uint64_t dropped;     /* not bucketed: out of memory */
    int64_t min_ns, max_ns;
} shp_hist;

void shp_hist_init(shp_hist *h);
void shp_hist_free(shp_hist *h);
/* Count one duration (negative counts as 0).  Never fails. */
void shp_hist_record(shp_hist *h, int64_t ns);
/* Percentile q in [0, 1] in ns (NumPy "linear" within 1 %); NaN when empty. */
double shp_hist_quantile(const shp_hist *h, double q);

/* One finished scope call, for the Chrome trace export. */
typedef struct {
    int64_t start_ns;     /* shp_now_ns() at enter */
    int64_t dur_ns;
    uint64_t thread;      /* PyThread_get_thread_ident() */
    uint32_t node_id;     /* index in the profiler's node registry */
    uint32_t depth;       /* 1 for a child of the root */
} shp_event;

/* A ring of the last `capacity` events; the oldest make room (counted in
 * `dropped`).  The buffer is allocated at the first push. */
typedef struct {
    shp_event *ev;
    Py_ssize_t capacity, head, count;
    uint64_t dropped;
} shp_ring;

void shp_ring_init(shp_ring *r, Py_ssize_t capacity);
/* Forget every event and free the buffer (capacity kept). */
void shp_ring_clear(shp_ring *r);
/* Append a copy of *e.  Never fails (out of memory: counted as dropped). */
void shp_ring_push(shp_ring *r, const shp_event *e);
/* The i-th oldest event, 0 <= i < r->count; borrowed pointer into the ring. */
const shp_event *shp_ring_at(const shp_ring *r, Py_ssize_t i);

/* ---- the scope profiler: scopenode.c, scope.c, scopetimer.c ------------- */

/*
 * The released module's Timer / HierarchicalProfiler / ProfileNode with enter
 * and exit in C.  Calls go one way: scope.c -> scopetimer.c -> scopeframe.c
 * -> scopenode.c.
 */
#define SHP_SCOPE_NO_ID UINT32_MAX

/* One scope of the call tree (ProfileNode). */
typedef struct shp_Node {
    PyObject_HEAD
    PyObject *name;          /* str */
    PyObject *children;      /* dict: name -> ProfileNode */
    PyObject *parent;        /* the node this one hangs under; NULL for a root */
    long long calls;
    int64_t wall_ns, cpu_ns; /* totals */
    double peak_ram_mb, peak_vram_mb;
    uint64_t gen;            /* generation of the profiler tree it belongs to */
    uint32_t id;             /* index in the profiler's node registry, or NO_ID */
    uint32_t depth;          /* 0 for a root */
    shp_hist hist;           /* per-call wall times */
    PyObject *weakreflist;
} shp_Node;

/* The profiler core (ProfilerCore, HierarchicalProfiler's base). */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;   /* profiler("stage") without an argument tuple */
    PyObject *root_name;         /* str */
    PyObject *device;            /* str */
    PyObject *root;              /* shp_Node */
    PyObject *var;               /* ContextVar: the calling context's innermost entry
                                  * (shp_Frame; None or unset: the root) */
    PyObject *nodes;             /* list: node registry of this generation, index = id */
    PyTypeObject *node_type;
    PyTypeObject *timer_type;
    PyTypeObject *frame_type;
    char track_ram;              /* shp_mem_mode */
    char track_vram, sync_cuda;
    int device_id;
    uint64_t gen;
    shp_ring ring;
    PyObject *weakreflist;
} shp_Profiler;

/* One `with` scope (Timer). */
typedef struct {
    PyObject_HEAD
    PyObject *name;            /* str */
    PyObject *profiler;        /* shp_Profiler, or NULL: records nowhere */
    PyObject *node;            /* the node entered, NULL before the first enter */
    PyObject *token;           /* the entry (shp_Frame, from shp_scope_push) while entered */
    char track_memory;         /* shp_mem_mode */
    char track_vram, sync_cuda;
    char active, window_open, rss_open, have_cuda;
    int device_id;
    int64_t t0_ns, c0_ns;
    int64_t rss0;              /* SHP_MEM_RSS: RSS at enter, bytes (rss_open) */
    double elapsed_wall, elapsed_cpu, ram_delta_mb, vram_delta_mb;
    size_t vram_used0;
    shp_cuda_target cuda;
    shp_hwm_window win;
    PyObject *weakreflist;
} shp_Timer;

/* scopenode.c.  A new root node named `name` (a str; not checked): new
 * reference, or NULL with MemoryError. */
extern PyType_Spec shp_node_spec;
shp_Node *shp_node_new(PyTypeObject *node_type, PyObject *name);
/* scopenode.c.  A duration in seconds as people read it in a repr: 3
 * significant digits in ns, us, ms or s ("309 us", "1.25 s"), never an
 * exponent; into buf (32 bytes suffice).  No Python calls. */
void shp_format_seconds(double s, char *buf, size_t size);

/* One entry of a scope: what a profiler's ContextVar holds (scopeframe.c). */
typedef struct shp_Frame {
    PyObject_HEAD
    PyObject *node;              /* shp_Node entered */
    struct shp_Frame *prev;      /* the entry it was entered from; NULL: the root */
    PyObject *token;             /* ContextVar token restoring `prev`; NULL once used */
    char abandoned;              /* left elsewhere for good: contexts skip it */
} shp_Frame;

extern PyType_Spec shp_frame_spec;

/* scopeframe.c: the position of each context (thread, task) in a tree. */
/* The calling context's node (new reference) and, when `frame` is not NULL,
 * its innermost live entry (new reference; NULL at the root).  NULL with
 * TypeError when the profiler's ContextVar holds something foreign. */
PyObject *shp_scope_position(shp_Profiler *p, shp_Frame **frame);
/* Enter `name` (a str) in the calling thread's / task's context: returns the
 * new current node and puts the entry in *entry (both new references; the
 * entry restores the previous position, and only in this context), or NULL
 * with an exception set (nothing changed then). */
shp_Node *shp_scope_push(shp_Profiler *p, PyObject *name, PyObject **entry);
/* Leave the scope entered as `entry` (from shp_scope_push): the calling
 * context's position is again the one before it, inner scopes left open
 * included.  In another thread / task than the one that entered: when
 * `closing` (a generator is being closed there: GeneratorExit passes through,
 * the scope can never be left where it was entered) the entry is abandoned
 * and 0 returned; otherwise -1 with RuntimeError and nothing changed (the
 * scope can still be left where it was entered).  -1 on another error. */
int shp_scope_leave(shp_Profiler *p, PyObject *name, PyObject *entry, int closing);
/* An entry that will never be left (its Timer is being freed while entered):
 * the context that entered it continues at the scope's parent.  Never fails. */
void shp_scope_abandon(PyObject *entry);
/* pop(): the calling context moves to the entry it was in before its current
 * one (never above the root).  0 / -1. */
int shp_scope_pop(shp_Profiler *p);

/* scope.c. */
extern PyType_Spec shp_profiler_spec;
/* _set_default_profiler(p): p a ProfilerCore or None; returns None. */
PyObject *shp_set_default_profiler(PyObject *module, PyObject *p);
/* _scope_clock_floor_ns(n): mean ns of the four clock reads one scope makes
 * (bench hook: the floor under any scope profiler measuring CPU time too). */
PyObject *shp_scope_clock_floor(PyObject *module, PyObject *n);

/* scopetimer.c. */
extern PyType_Spec shp_timer_spec;
/* Timer's constructor as a vectorcall; module.c sets it as the Timer type's
 * tp_vectorcall (not inherited: subclasses take tp_new).  New Timer or NULL. */
PyObject *shp_timer_vectorcall(PyObject *type, PyObject *const *args, size_t nargsf,
                               PyObject *kwnames);
/* A new Timer of `type` (name a str, profiler a ProfilerCore or NULL; the
 * options already checked): new reference, or NULL with MemoryError. */
PyObject *shp_timer_make(PyTypeObject *type, PyObject *name, PyObject *profiler, int track_memory,
                         int track_vram, int sync_cuda, int device_id);

#endif /* SHP_SCOPE_SCOPE_H */
