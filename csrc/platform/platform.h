/*
 * platform/ -- the machine: clocks, memory and the peak-RSS window, the
 * thread's OS counters, malloc's state, the loader, the CPU's last-level
 * cache, its performance counters, callgrind's markers, threads and timed
 * waits, and the environment record.  Files here call nothing outside this
 * folder (env.c reads the module state's cache: objects.h).  No function
 * here runs Python code unless its contract says so.
 */
#ifndef SHP_PLATFORM_PLATFORM_H
#define SHP_PLATFORM_PLATFORM_H

#include "shp.h"

/* ---- clock.c ------------------------------------------------------------ */

/* Monotonic time in integer nanoseconds: the clock of time.perf_counter. */
int64_t shp_now_ns(void);
/* Resolution of that clock in ns (clock_getres and friends); 1 if unknown. */
int64_t shp_clock_resolution_ns(void);
/* A short human name of the clock, for the environment record. */
const char *shp_clock_name(void);
/* CPU time of the whole process (all threads, user + system) in integer ns:
 * the clock of time.process_time.  0 if the OS refuses (never raises). */
int64_t shp_process_cpu_ns(void);

/* ---- memory.c ----------------------------------------------------------- */

/* Current resident set size in bytes; -1 (no exception) if unavailable. */
int64_t shp_rss_bytes(void);
/* The most memory this process can have, in bytes: the machine's physical
 * memory, or the address-space / data limit (setrlimit) when lower; -1 (no
 * exception) if unknown. */
int64_t shp_memory_limit_bytes(void);

/*
 * A peak-RSS window.  Opened before warm-up, closed after the timed loop.
 * On Linux the kernel's high-water mark is reset when a window opens; windows
 * may nest or overlap (re-entrant or threaded benchmarks), so before any reset
 * the current HWM is folded into every open window, and each window's peak is
 * exact for the process.  Where the reset is impossible, `method` is
 * SHP_PEAK_SAMPLED and the caller feeds samples with shp_window_sample().
 */
typedef enum { SHP_PEAK_OFF = 0, SHP_PEAK_HWM = 1, SHP_PEAK_SAMPLED = 2 } shp_peak_method;

typedef struct shp_hwm_node shp_hwm_node;   /* memory.c: the shared part, on the heap */

/* The opener's handle: only its own benchmark reads it, so it may live on a
 * C stack that a greenlet switch moves; what other windows update (the peak)
 * is in the node, which never moves. */
typedef struct shp_hwm_window {
    shp_hwm_node *node;       /* NULL once closed, or when it could not be made */
    shp_peak_method method;   /* fixed when opened */
} shp_hwm_window;

/* Open a window (never fails: falls back to sampling, or OFF if no RSS or
 * no memory for the node).  The list of open windows is process-wide (the
 * mark is) and survives fork(): a child keeps the forking thread's windows
 * open; another thread's become untracked there (closing one gives 0) and
 * are freed when closed.  Hold the GIL. */
void shp_window_open(shp_hwm_window *w);
/* Fold one RSS sample into a SAMPLED window; cheap, no Python calls. */
void shp_window_sample(shp_hwm_window *w);
/* Close a window and return peak - baseline in bytes (>= 0). Always call. */
int64_t shp_window_close(shp_hwm_window *w);
/* "hwm" / "sampled" / "off" */
const char *shp_peak_method_name(shp_peak_method m);
/* Test hook: when set, the HWM reset is reported as unavailable. */
extern int shp_force_sampled_rss;
/* The process's peak RSS in bytes, including what it was before this
 * module reset the kernel's record (which cannot be restored); -1 (no
 * exception) if unknown.  Reads /proc: not for a timed region. */
int64_t shp_process_peak_rss_bytes(void);

/* ---- dynlib.c: the platform's loader (no GIL needed, no exception) ------ */

#define SHP_CUDA_ENV "SPATIALHUB_LIBCUDA"
#if defined(SHP_WINDOWS)
#define SHP_CUDA_DEFAULT_LIB "nvcuda.dll"
#else
/* The driver's runtime name; the bare libcuda.so is the toolkit's stub. */
#define SHP_CUDA_DEFAULT_LIB "libcuda.so.1"
#endif
#if !defined(SHP_MACOS)
/* Load a library (an override is loaded as named, the default from the
 * system only); NULL with the reason in err. */
void *shp_dl_open(const char *path, int is_override, char *err, size_t errsize);
/* A symbol's address, NULL if absent. */
void *shp_dl_sym(void *lib, const char *name);
void shp_dl_close(void *lib);
/* SPATIALHUB_LIBCUDA into buf: 1 if set and non-empty, 0 if not, -1 if it
 * does not fit (never silently replaced by the default). */
int shp_cuda_override(char *buf, size_t size);
#endif

/* ---- rusage.c ----------------------------------------------------------- */

/* Counters of the calling thread since it started. */
typedef struct {
    int64_t minflt, majflt;   /* minor / major page faults */
    int64_t nvcsw, nivcsw;    /* voluntary / involuntary context switches */
    int ok;                   /* 0: not available on this platform (all zero) */
} shp_rusage;

/* Read them (getrusage(RUSAGE_THREAD) on Linux): 1 read, 0 not available.
 * No Python calls, no exception; needs no GIL. */
int shp_rusage_thread(shp_rusage *out);

/* ---- mallocstate.c ------------------------------------------------------ */

/* The effective mmap threshold of this process's malloc: the smallest
 * request (bytes, a page multiple) glibc would serve with a fresh mmap now,
 * read by probes that leave the threshold as it was.  -1 where unknown
 * (not glibc >= 2.33, or a malloc mallinfo2 does not describe).  No
 * Python calls, no exception. */
int64_t shp_malloc_mmap_threshold(void);
/* Raise the effective threshold to `bytes` (at most 32 MiB) as glibc does
 * itself, by freeing a mapped block of that size (the threshold stays
 * dynamic); never lowers it.  Returns the effective threshold afterwards,
 * -1 where unknown.  No Python calls, no exception. */
int64_t shp_malloc_raise_threshold(int64_t bytes);

/* ---- perfctr.c: the CPU's counters (no Python calls, no exception) ----- */

enum { SHP_CTR_INSTRUCTIONS, SHP_CTR_CYCLES, SHP_N_COUNTERS };

/* One group of counters of the calling thread, user space only. */
typedef struct {
    int fd[SHP_N_COUNTERS];   /* -1: not open */
    int slot[SHP_N_COUNTERS]; /* position of each in the group's read */
    int leader, n;
    unsigned want;            /* bits 1 << SHP_CTR_* */
} shp_perfctr;

/* Open the counters in `want` (disabled).  0, or -1 with the reason in `why`
 * (no PMU, refused, not Linux); nothing is left open then. */
int shp_perfctr_open(shp_perfctr *c, unsigned want, char *why, size_t whysize);
/* Reset and enable the group: 0, or -1. */
int shp_perfctr_start(shp_perfctr *c);
/* Disable the group and read it into out[SHP_CTR_*]: 0, or -1 with the
 * reason in `why` (a read that failed, a group multiplexed with other users:
 * never scaled). */
int shp_perfctr_stop(shp_perfctr *c, double out[SHP_N_COUNTERS], char *why, size_t whysize);
void shp_perfctr_close(shp_perfctr *c);
/* Test hook: software clocks stand in for the hardware events. */
extern int shp_perfctr_software;

/* ---- callgrind.c: instruction counts under valgrind --------------------- */

#define SHP_CALLGRIND_ENV "SPATIALHUB_CALLGRIND_DIR"

typedef struct {
    int under_valgrind;       /* valgrind's preload library is in this process */
    int on;                   /* ... and SHP_CALLGRIND_ENV names the dump folder */
    long dumps;               /* dumps made so far (callgrind numbers them 1, 2, ...) */
    char dir[2048];
} shp_callgrind;

/* The timed call: func(*args) through vectorcall, then drive(result) when
 * drive is not NULL (an event loop's run_until_complete), the result
 * released -- unless `lazy` is not NULL and the result is a generator or an
 * awaitable (shp_result_is_lazy), which then goes to *lazy, owned by the
 * caller.  Callgrind collects inside it only (--toggle-collect).  0, or -1
 * with the function's exception. */
int shp_counted_call(PyObject *func, PyObject *const *args, size_t nargsf, PyObject *kwnames,
                     PyObject *drive, PyObject **lazy);
/* Markers callgrind acts on (--zero-before, --dump-after); no-ops otherwise. */
void shp_cg_zero_point(void);
void shp_cg_dump_point(void);
/* Read the environment once (module init). Never fails. */
void shp_cg_init(shp_callgrind *cg);
/* After shp_cg_dump_point(): that dump's total (instructions collected since
 * the zero point) into *ir; the file is removed.  0, or -1 with RuntimeError. */
int shp_cg_collect(shp_callgrind *cg, double *ir);

/* ---- cachecold.c: evicting the CPU's last-level cache --------------------- */

/* Size of the last-level cache of the CPU in bytes and where it came from
 * ("SPATIALHUB_LLC_BYTES" when that is set to a positive integer, "sysfs", "sysconf", "sysctl", "GetLogicalProcessorInformation", or
 * "assumed" with SHP_LLC_ASSUMED_BYTES when nothing answers).  Read once
 * and cached (process-wide: it is a property of the machine).  Never fails. */
#define SHP_LLC_ASSUMED_BYTES (32u << 20)
size_t shp_llc_bytes(const char **source);

/* A buffer that evicts the LLC when written and read: SHP_LLC_EVICT_FACTOR
 * times its size.  Created once per cold-cache run. */
#define SHP_LLC_EVICT_FACTOR 2
#define SHP_LLC_EVICT_MAX ((size_t)1 << 30)   /* 1 GiB at most */
typedef struct {
    unsigned char *buf;
    size_t size;
} shp_llc_evictor;

/* Allocate and touch the buffer (so its pages are resident before any RSS
 * baseline).  0, or -1 with MemoryError. */
int shp_llc_evictor_init(shp_llc_evictor *e);
/* Write every cache line of the buffer, then read it back; the GIL may be
 * released around it (no Python calls).  Never fails. */
void shp_llc_evict(shp_llc_evictor *e);
/* Free the buffer; safe on a zeroed or freed evictor. */
void shp_llc_evictor_free(shp_llc_evictor *e);

/* ---- thread.c: threads, a monitor, waiting until a time ------------------ */

/* A lock with one condition; on the C heap.  None of these touch Python or
 * set an exception; any thread may call them, with or without the GIL. */
typedef struct shp_monitor shp_monitor;
/* NULL when memory or the OS refuses. */
shp_monitor *shp_monitor_new(void);
void shp_monitor_free(shp_monitor *m);
void shp_monitor_lock(shp_monitor *m);
void shp_monitor_unlock(shp_monitor *m);
void shp_monitor_notify_all(shp_monitor *m);
/* With the lock held: wait for a notification or until deadline_ns on the
 * clock of shp_now_ns (INT64_MAX: no deadline); the lock is held again on
 * return.  1 if the deadline passed, else 0 (notified, or woken spuriously:
 * the caller checks its condition again). */
int shp_monitor_wait_until(shp_monitor *m, int64_t deadline_ns);
/* A thread running fn(arg); NULL when it could not be started. */
typedef struct shp_thread shp_thread;
shp_thread *shp_thread_start(void (*fn)(void *), void *arg);
/* Wait for the thread to end and free its handle. */
void shp_thread_join(shp_thread *t);
/* The calling thread's timed waits end as close to their deadline as the OS
 * allows (Linux: a timer slack of 1 ns instead of 50 us). */
void shp_thread_precise_timers(void);
/* Busy-wait until deadline_ns (the last stretch no sleep can hit). */
void shp_spin_until(int64_t deadline_ns);

/* ---- env.c -------------------------------------------------------------- */

/* What the machine was doing when a benchmark started. */
typedef struct {
    double load1;          /* 1-minute load average; NaN unknown */
    double others_share;   /* share of all CPUs used by other processes since the
                              previous reading (>= 50 ms earlier); NaN unknown */
    int ncpu;              /* online CPUs (0 unknown) */
    int busy;              /* others_share > 25%, or (load1 - 1) / ncpu > 0.5 when unknown */
} shp_preflight;

#define SHP_BUSY_SHARE 0.25
#define SHP_BUSY_LOAD 0.5

/* Take the CPU-time reading the next preflight is measured against (module
 * init).  Never fails, no exception. */
void shp_preflight_mark(shp_state *st);
/* Read the preflight (Linux: /proc/stat, getloadavg; elsewhere load only or
 * nothing) and take a new mark.  Never fails, no exception. */
void shp_preflight_read(shp_state *st, shp_preflight *out);
/* A new environment dict (cached static part: CPU, governor, turbo, ASLR,
 * isolated CPUs, ...; plus torch if imported, plus the preflight `pf` when
 * not NULL).  NULL with an exception on failure. */
PyObject *shp_env_dict(shp_state *st, const shp_preflight *pf);

#endif /* SHP_PLATFORM_PLATFORM_H */
