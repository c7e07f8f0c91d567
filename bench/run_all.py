"""Run every performance figure and print it next to its target.

    python bench/run_all.py            # full sizes: minutes (the last run's time is in
                                       # docs/performance.md's headline block)
    python bench/run_all.py --quick    # tiny sizes: the CI smoke test
    python bench/run_all.py --only bias,summary
    python bench/run_all.py --update-doc docs/performance.md   # the docs' headline table
                                       # (with --quick the block says it holds quick sizes)

Each figure is a ratio or a count measured side by side in one process or
one run, the median of several interleaved rounds (see bench/_common.py).
Exit status: 0 when every benchmark ran, whatever PASS/MISS says (they are
measurements, not tests); 1 when one crashed (its traceback is printed and
the others still run).  `--fail-on callgrind` also makes a MISS of the named
benchmarks an error: for instruction counts, which load does not move, so a
MISS there is a regression and not noise (CI uses it).

`--update-doc FILE` writes this run's table, with the command, the machine, the load
average before and after and the counts, between the headline-table markers of FILE
(bench/_docblock.py); only a run of every benchmark may write it, and a --quick run's
block says that its figures are the smoke sizes'.
"""
import argparse
import importlib
import sys
import time
import traceback

import _common  # noqa: F401  (sets the BLAS thread variables before numpy loads)
import _docblock
from _common import Figure, load_average, machine, machine_line, print_figures

BENCHES = [
    ("bias", "bench_bias"),
    ("memory", "bench_memory"),
    ("telemetry", "bench_telemetry"),
    ("summary", "bench_summary"),
    ("callgrind", "bench_callgrind"),
    ("adaptive", "bench_adaptive"),
    ("gpu", "bench_gpu"),
    ("compare", "bench_compare"),
    ("scope", "bench_scope"),
    ("cache", "bench_cache"),
    ("released", "bench_released"),
    ("trace", "bench_trace_export"),
    ("load", "bench_load"),
]


def _order(fig):
    """Figure number first (bench_callgrind also reports a summary figure)."""
    head = fig.bench.split()[0]
    return int(head) if head.isdigit() else 99


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes (< 60 s), for CI smoke runs")
    p.add_argument("--only", default="", help="comma-separated subset: "
                   + ",".join(k for k, _ in BENCHES))
    p.add_argument("--markdown", metavar="FILE", help="also write the figure table to FILE")
    p.add_argument("--update-doc", metavar="FILE",
                   help="write this run's table between the headline-table markers of FILE "
                        "(docs/performance.md); every benchmark (no --only)")
    p.add_argument("--fail-on", default="", metavar="LIST",
                   help="exit 1 when a figure of these benchmarks is a MISS (use it for the "
                        "deterministic ones: callgrind)")
    a = p.parse_args(argv)
    only = {x.strip() for x in a.only.split(",") if x.strip()}
    fail_on = {x.strip() for x in a.fail_on.split(",") if x.strip()}
    unknown = (only | fail_on) - {k for k, _ in BENCHES}
    if unknown:
        p.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
    if a.update_doc and only:
        p.error("--update-doc writes the docs' headline table: every benchmark "
                "(no --only)")
    if a.update_doc:
        try:
            with open(a.update_doc, encoding="utf-8") as f:
                _docblock.replace_in(f.read(), "")      # the markers are there: fail now
        except (OSError, ValueError) as e:
            p.error(f"--update-doc {a.update_doc}: {e}")

    _common.ensure_importable()
    header = machine_line()
    cmd = "python bench/run_all.py" + (" --quick" if a.quick else "") + \
        (f" --only {a.only}" if a.only else "")
    load_before = load_average()
    print(f"# spatialhub.utils.profiling performance figures\n\n{header}\n`{cmd}`")
    figs, crashed, gated, t_all = [], [], [], time.perf_counter()
    for key, mod in BENCHES:
        if only and key not in only:
            continue
        t = time.perf_counter()
        try:
            got = importlib.import_module(mod).run(quick=a.quick)
            figs += got
            if key in fail_on:
                gated += [f for f in got if f.ok is False]
        except Exception:
            crashed.append(key)
            traceback.print_exc()
            figs.append(Figure(key, "benchmark crashed", "-", "-", False))
        print(f"\n({key}: {time.perf_counter() - t:.1f} s)", flush=True)
    total = time.perf_counter() - t_all
    load_after = load_average()
    figs.sort(key=_order)
    print_figures(figs, title=f"All figures ({total:.0f} s{', quick sizes' if a.quick else ''})")
    n_pass = sum(f.ok is True for f in figs)
    n_miss = sum(f.ok is False for f in figs)
    print(f"\n{n_pass} PASS, {n_miss} MISS, {sum(f.ok is None for f in figs)} recorded"
          + (f"; crashed: {', '.join(crashed)}" if crashed else ""))
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(f"{header}\n\n`{cmd}` ({total:.0f} s)\n\n")
            f.write("| bench | figure | measured | target | |\n| :--- | :--- | ---: | :--- | :--- |\n")
            for fig in figs:
                f.write(f"| {fig.bench} | {fig.what} | {fig.value} | {fig.target} | {fig.verdict} |\n")
    if a.update_doc and not crashed:
        from spatialhub.utils.profiling._native import BUSY_LOAD_PER_CPU
        m = machine()
        busy = max(load_before, load_after) - 1.0 > BUSY_LOAD_PER_CPU * m["nproc"]
        body = _docblock.render(figs, command=cmd, seconds=total, machine=m,
                                load_before=load_before, load_after=load_after, busy=busy,
                                busy_limit=BUSY_LOAD_PER_CPU, quick=a.quick)
        with open(a.update_doc, encoding="utf-8") as f:
            text = f.read()
        with open(a.update_doc, "w", encoding="utf-8") as f:
            f.write(_docblock.replace_in(text, body))
        print(f"\nwrote the headline table into {a.update_doc}")
    elif a.update_doc:
        print(f"\n{a.update_doc} not updated: a benchmark crashed")
    for fig in gated:
        print(f"MISS in a gated benchmark (--fail-on): {fig.bench}: {fig.what}: {fig.value} "
              f"(target {fig.target})")
    return 1 if crashed or gated else 0


if __name__ == "__main__":
    sys.exit(main())
