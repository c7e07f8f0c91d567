"""Figure 9 -- cost of an empty scope.

    python bench/bench_scope.py [--quick]

An empty `with` scope, memory tracking off, of ours (enter/exit in C) next to the released
module's cheapest path: its Timer's push / pop onto a Python list, perf_counter and
process_time at enter and exit, the node's totals, no memory reads.  Two ways in:

  profiler call   `with prof("stage"):`  (HierarchicalProfiler(track_ram=False))
  Timer           `with Timer("stage", profiler=prof, track_memory=False):`

The released path is a reimplementation here from its description ("released (model)"),
and, when the released spatialhub 0.1.7 is unpacked where SPATIALHUB_RELEASED_DIR points
(default /tmp/rel/whl; `pip download --no-deps spatialhub==0.1.7` and unzip it there),
the released module's own code as well ("released 0.1.7").  All variants run interleaved
in one process, several rounds, median; the empty loop's cost is subtracted from each.

Then the same scopes with their default memory tracking (issue 19): ours reads RSS at enter
and exit (a pread of a kept-open /proc/self/statm; an enter takes a read of at most 1 us
before, as in a loop the previous scope's exit: docs/memory.md), the released one calls psutil's
memory_info() at enter and exit; and ours with track_memory="peak" (the high-water-mark
window, opt-in).  Targets: a default scope <= 2x the same scope with memory off, and
<= 0.25x the released default scope (when psutil is installed, which the released module
needs for RAM).

Target: ours <= 0.35x the released cheapest path (both ways in).  The process CPU clock
(time.process_time's) is a system call on Linux, twice per scope on both sides: the figure
also shows that clock floor, measured in C in the same rounds, and the ratio of what each
side spends beyond it (the part an implementation controls).  And it shows the floor of
*any* implementation: the `with` statement itself with the cheapest C context manager
(`with threading.Lock():`, an object made by a call, __enter__, __exit__) plus those four
clock reads.  Where that floor is above 0.35x the released path, the target cannot be met
on the machine by any code (docs/performance.md, figure 9).
"""
import sys
import time

from _common import Figure, ensure_importable, median, print_details, released_module, run_script

TARGET = 0.35
TARGET_MEM_VS_OFF = 2.0
TARGET_MEM_VS_RELEASED = 0.25


class _Node:
    def __init__(self, name):
        self.name, self.calls, self.children = name, 0, {}
        self.total_wall_time = self.total_cpu_time = 0.0


class ReleasedModelProfiler:
    """The released design, cheapest path: one global list as the stack."""

    def __init__(self, name="Root"):
        self.root = _Node(name)
        self.stack = [self.root]

    def push(self, name):
        parent = self.stack[-1]
        if name not in parent.children:
            parent.children[name] = _Node(name)
        node = parent.children[name]
        self.stack.append(node)
        return node

    def pop(self):
        if len(self.stack) > 1:
            self.stack.pop()

    def __call__(self, name):
        return ReleasedModelTimer(name, self)


class ReleasedModelTimer:
    def __init__(self, name, profiler=None, track_memory=False):
        self.name, self.profiler, self.track_memory = name, profiler, track_memory
        self.node = None

    def __enter__(self):
        if self.profiler is not None:
            self.node = self.profiler.push(self.name)
        self.start_cpu = time.process_time()
        self.start_wall = time.perf_counter()
        return self

    def __exit__(self, *exc):
        try:
            self.elapsed_wall = time.perf_counter() - self.start_wall
            self.elapsed_cpu = time.process_time() - self.start_cpu
            if self.node is not None:
                self.node.calls += 1
                self.node.total_wall_time += self.elapsed_wall
                self.node.total_cpu_time += self.elapsed_cpu
        finally:
            if self.profiler is not None:
                self.profiler.pop()



def _loop_time(fn, n):
    t = time.perf_counter()
    fn(n)
    return (time.perf_counter() - t) / n


def run(quick=False):
    ensure_importable()
    from spatialhub.utils.profiling import HierarchicalProfiler, Timer

    n = 20_000 if quick else 100_000
    rounds = 5 if quick else 9
    ours = HierarchicalProfiler("bench", track_ram=False)
    ours_mem = HierarchicalProfiler("bench")            # the default: RSS at enter and exit
    model = ReleasedModelProfiler("bench")
    rel = released_module()
    rel_prof = rel.HierarchicalProfiler("bench", track_ram=False) if rel else None

    def empty(k):
        for _ in range(k):
            pass

    def ours_call(k):
        p = ours
        for _ in range(k):
            with p("stage"):
                pass

    def ours_timer(k):
        p = ours
        for _ in range(k):
            with Timer("stage", profiler=p, track_memory=False):
                pass

    def model_call(k):
        p = model
        for _ in range(k):
            with p("stage"):
                pass

    def model_timer(k):
        p = model
        for _ in range(k):
            with ReleasedModelTimer("stage", profiler=p, track_memory=False):
                pass

    import threading
    Lock = threading.Lock

    def bare_with(k):
        # what the statement itself costs with the cheapest C context manager: an
        # object made by a call, __enter__ and __exit__, no clock, no bookkeeping
        for _ in range(k):
            with Lock():
                pass

    def ours_call_mem(k):
        p = ours_mem
        for _ in range(k):
            with p("stage"):
                pass

    def ours_timer_mem(k):
        p = ours_mem
        for _ in range(k):
            with Timer("stage", profiler=p):
                pass

    def ours_timer_peak(k):
        p = ours_mem
        for _ in range(k):
            with Timer("stage", profiler=p, track_memory="peak"):
                pass

    variants = {"bare `with Lock():`": bare_with, "ours call": ours_call, "ours Timer": ours_timer,
                "released (model) call": model_call, "released (model) Timer": model_timer,
                "ours call, default memory": ours_call_mem,
                "ours Timer, default memory": ours_timer_mem,
                "ours Timer, track_memory='peak'": ours_timer_peak}
    peak_every = {"ours Timer, track_memory='peak'": 50}   # ~20 us each: fewer calls
    rel_mem = rel is not None and getattr(rel, "HAS_PSUTIL", False)
    if rel is not None:
        RT = rel.Timer

        def rel_call(k):
            p = rel_prof
            for _ in range(k):
                with p("stage"):
                    pass

        def rel_timer(k):
            p = rel_prof
            for _ in range(k):
                with RT("stage", profiler=p, track_memory=False):
                    pass

        variants["released 0.1.7 call"] = rel_call
        variants["released 0.1.7 Timer"] = rel_timer
        if rel_mem:
            rel_prof_mem = rel.HierarchicalProfiler("bench")   # track_ram=True: psutil

            def rel_timer_mem(k):
                p = rel_prof_mem
                for _ in range(k):
                    with RT("stage", profiler=p):
                        pass

            variants["released 0.1.7 Timer, default memory"] = rel_timer_mem
            peak_every["released 0.1.7 Timer, default memory"] = 10

    from spatialhub.utils.profiling import _native

    for fn in variants.values():       # warm up
        fn(1000)
    samples = {k: [] for k in variants}
    base, clocks = [], []
    for _ in range(rounds):
        base.append(_loop_time(empty, n))
        # the four clock reads any such scope makes (CPU + wall at enter and exit), in C
        clocks.append(_native._scope_clock_floor_ns(n // 4) / 1e9)
        for k, fn in variants.items():
            samples[k].append(_loop_time(fn, n // peak_every.get(k, 1)))
    floor = median(base)
    clock_ns = median(clocks) * 1e9
    ns = {k: (median(v) - floor) * 1e9 for k, v in samples.items()}
    ns["clock floor (2x process CPU + 2x wall, in C)"] = clock_ns

    rows = [[k, f"{v:.0f}"] for k, v in ns.items()]
    print_details(f"Empty scope: ns per scope (n={n}, median of "
                  f"{rounds} interleaved rounds, empty loop {floor * 1e9:.0f} ns subtracted)",
                  ["variant", "ns / scope"], rows)
    figs = []
    for way in ("call", "Timer"):
        ref_key = f"released 0.1.7 {way}" if rel is not None else f"released (model) {way}"
        ratio = ns[f"ours {way}"] / ns[ref_key]
        figs.append(Figure(
            "9 scope",
            f"empty scope via {way}: ours {ns[f'ours {way}']:.0f} ns vs "
            f"{ref_key.replace(' ' + way, '')} {ns[ref_key]:.0f} ns",
            f"{ratio:.2f}x", f"<= {TARGET}x", ratio <= TARGET))
        excess = (ns[f"ours {way}"] - clock_ns) / (ns[ref_key] - clock_ns)
        figs.append(Figure(
            "9 scope",
            f"same, beyond the {clock_ns:.0f} ns of clock reads both make: ours "
            f"{ns[f'ours {way}'] - clock_ns:.0f} ns vs {ns[ref_key] - clock_ns:.0f} ns",
            f"{excess:.2f}x", "-", None))
    # No implementation can go below the statement plus the four clock reads
    bound = ns["bare `with Lock():`"] + clock_ns
    for way in ("call", "Timer"):
        ref_key = f"released 0.1.7 {way}" if rel is not None else f"released (model) {way}"
        figs.append(Figure(
            "9 scope",
            f"floor of any implementation via {way}: bare `with` {ns['bare `with Lock():`']:.0f} ns "
            f"+ clock reads {clock_ns:.0f} ns = {bound:.0f} ns vs {ns[ref_key]:.0f} ns",
            f"{bound / ns[ref_key]:.2f}x", "-", None))
    # default memory tracking (issue 19): cheap enough for per-frame code
    for way in ("call", "Timer"):
        mem, off = ns[f"ours {way}, default memory"], ns[f"ours {way}"]
        figs.append(Figure(
            "9 scope", f"default scope via {way} (RSS at exit, at enter unless read <= 1 us before): {mem:.0f} ns vs "
            f"{off:.0f} ns with memory off", f"{mem / off:.2f}x", f"<= {TARGET_MEM_VS_OFF}x",
            mem / off <= TARGET_MEM_VS_OFF))
    peak = ns["ours Timer, track_memory='peak'"]
    figs.append(Figure("9 scope", f"Timer with track_memory='peak' (opt-in): {peak:.0f} ns vs "
                       f"{ns['ours Timer, default memory']:.0f} ns default",
                       f"{peak / ns['ours Timer, default memory']:.1f}x", "-", None))
    if rel_mem:
        mem, r = ns["ours Timer, default memory"], ns["released 0.1.7 Timer, default memory"]
        figs.append(Figure(
            "9 scope", f"default Timer: ours {mem:.0f} ns vs released 0.1.7 (psutil) {r:.0f} ns",
            f"{mem / r:.2f}x", f"<= {TARGET_MEM_VS_RELEASED}x", mem / r <= TARGET_MEM_VS_RELEASED))
    elif rel is not None:
        figs.append(Figure("9 scope", "released 0.1.7 default Timer", "psutil not installed",
                           "-", None))
    if rel is None:
        figs.append(Figure("9 scope", "released 0.1.7 itself", "not unpacked here", "-", None))
    return figs


if __name__ == "__main__":
    sys.exit(run_script(run))
