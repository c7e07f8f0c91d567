"""Command line: ``spatialhub-bench`` and ``python -m spatialhub.utils.profiling``.

Exit status: 0 success, 1 the run or a file failed (one line on stderr, no
traceback unless --traceback), 2 a bad command line (argparse's usage error, or a
--compare file that holds another kind of result), 3 --fail-if-slower: a comparison's verdict is "slower" beyond the threshold.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import json
import math
import os
import shlex
import sys
import warnings

import numpy as np

from ._native import (ASSUMED_RUN_SPREAD, DEFAULT_MARGIN, LOAD_DEFAULT_DURATION_S,
                      LOAD_MAX_DURATION_S, LOAD_MAX_REQUESTS, LOAD_MAX_WORKERS, LOAD_MIN_TAIL,
                      benchmark_callable)
from .calibrate import DEFAULT_PROCESSES as CALIBRATE_PROCESSES
from ._numbers import exact as _exact
from ._numbers import number as _number
from .load import MAX_TIME_S as FIND_PEAK_MAX_TIME
from .load import _needed as _find_peak_needs
from .load import _probe_length as _find_peak_probe_length
from .load import find_peak_qps
from ._words import CLI, remedy_words
from .instructions import LAYOUT_SPREAD, RUNS, disagreements, lowest, probing

PROG = "spatialhub-bench"

# The defaults this command applies, in one place: the help texts are formatted from
# them, and tests/test_docs_consistency.py holds docs/guide.md's option table to them.
WARMUP = inspect.signature(benchmark_callable).parameters["num_warmup"].default
ITERS = inspect.signature(benchmark_callable).parameters["num_iters"].default
DEMO_WARMUP = 5            # the demo: the seed's example, 5 warm-up calls
DEMO_ITERS = ITERS
TORCH_ITERS = 100          # a torch module: profile_model's default
# A run that is saved (--json) measures the spread between runs on the default path, in
# this many fresh processes: a later --compare decides only on a measured spread
# (docs/statistics.md, "Numbers that hold across runs").
SAVED_PROCESSES = 10
LOAD_DURATION = LOAD_DEFAULT_DURATION_S   # --duration: benchmark_load's arrival window
ARRIVALS = ("poisson", "uniform", "closed", "offline")
FIND_PEAK_PERCENTILE = inspect.signature(find_peak_qps).parameters["percentile"].default

EPILOG = f"""\
modes (pick at most one; none runs the demo):
  (no mode)              the demo: a NumPy image pipeline on a 1x3x480x640 float32
                         frame, {DEMO_WARMUP} warm-up + {DEMO_ITERS} timed iterations
  --callable MOD:ATTR    any callable, called with one random array per --args-shape;
                         a torch.nn.Module goes through profile_model (eval mode,
                         inference_mode, device sync)
  --onnx PATH            an ONNX model on one or more ONNX Runtime providers
  --compare A.json B.json
                         baseline A against candidate B, from files written by --json
  --calibrate [N]        measure this machine's run-to-run spread once and remember it

examples:
  {PROG}
      run the demo and print the Markdown table
  {PROG} --iters 200 --json base.json
      the demo with 200 timed iterations; all numbers and raw samples to base.json
  {PROG} --callable mypkg.ops:resize --args-shape 1,3,224,224 --name resize
      time mypkg.ops.resize(x) with x = a random float32 array of that shape
  {PROG} --callable models.py:net --args-shape 1,3,224,224 --batch-sizes 1,4,16,32
      latency vs batch size of the torch module `net` defined in ./models.py
  {PROG} --onnx model.onnx --providers CPU,CUDA --input-dim batch=8
      the model on two providers, symbolic dimension "batch" set to 8
  {PROG} --compare base.json new.json --markdown report.md
      is new.json faster than base.json? (ratio of medians, 95% interval, verdict)
  {PROG} --processes 5 --json base.json
      the demo in 5 fresh interpreters, pooled; the spread between them is measured
  {PROG} --calibrate
      measure the run-to-run spread of this machine; later rerun intervals use it
  {PROG} --compare base.json new.json --fail-if-slower 10
      a CI gate: exit status 3 when new.json is "slower" by more than 10%
  {PROG} --callable mypkg.ops:resize --args-shape 1,3,224,224 --instructions --json base.json
      instructions per call instead of wall time: the run again under valgrind's callgrind
      (~50x slower; needs valgrind), 10 warm-up + 5 counted calls
  {PROG} --compare base.json new.json --instructions --fail-if-slower 1
      a CI gate on instruction counts: exit status 3 when new.json executes more than 1%
      more instructions per call (load does not move a count; wall time it does)
  {PROG} --plot latency.png --plot-kind ecdf
      the demo plus a picture of its latency distribution (needs matplotlib)
  {PROG} --onnx model.onnx --providers CPU,CUDA --report report.html --budget p99_ms=30
      a readiness report: one offline HTML page (figures included, no matplotlib), the
      CUDA provider against the CPU one, the P99 budget met or failed (*.md: Markdown)
  {PROG} --callable mypkg.ops:resize --args-shape 1,3,224,224 --qps 200 --duration 10
      latency under load: Poisson arrivals at 200 requests/s for 10 s, each latency from
      the request's intended arrival to its completion (queueing included)
  {PROG} --callable mypkg.ops:resize --args-shape 1,3,224,224 --find-peak --latency-bound 30
      the highest rate whose p99 stays within 30 ms, with confidence (probes of 10 s)

exit status: 0 ok; 1 the benchmark, an import or a file failed; 2 bad command line;
  3 --fail-if-slower: a verdict of "slower" beyond PCT (with --instructions: more
  instructions per call beyond PCT)
"""


class CliError(Exception):
    """A failure worth one line on stderr and exit status 1."""


class UsageError(CliError):
    """A usage error found after parsing (a file that is not what its option takes): one
    line on stderr and exit status 2, as argparse's."""


def _pct(fraction):
    """0.15 -> '15' (a percentage as the help texts write it)."""
    return f"{100 * fraction:g}"


def _count_arg(text, lowest, highest=None):
    """A count on the command line: the core's count rule (_native._count), in argparse's
    words ("argument --iters: must be >= 1, got 0")."""
    from ._native import _count

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    try:
        return _count(value, "", None, lowest, highest)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive_int(text):
    return _count_arg(text, 1)


def _nonnegative_int(text):
    return _count_arg(text, 0)


def _workers(text):
    return _count_arg(text, 1, LOAD_MAX_WORKERS)


def _int_list(text):
    parts = [p for p in text.replace("x", ",").split(",") if p.strip()]
    if not parts:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}")
    return tuple(_positive_int(p) for p in parts)


def _positive_real(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (v > 0 and math.isfinite(v)):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return v


def _duration(text):
    """--duration: benchmark_load's arrival window, a nanosecond to LOAD_MAX_DURATION_S."""
    v = _positive_real(text)
    if v > LOAD_MAX_DURATION_S:
        raise argparse.ArgumentTypeError(f"must be at most {LOAD_MAX_DURATION_S:,.0f} seconds, "
                                         f"got {text!r}")
    if v < 1e-9:
        raise argparse.ArgumentTypeError(f"must be at least a nanosecond (1e-9), got {text!r}")
    return v


def _percentile(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a percentile (e.g. 99), got {text!r}") from None
    if not 0 < v < 100:
        raise argparse.ArgumentTypeError(f"expected a percentile in (0, 100), got {text!r}")
    return v


def _percent(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a percentage (e.g. 5), got {text!r}") from None
    if not 0 <= v < 100:
        raise argparse.ArgumentTypeError(f"expected a percentage in [0, 100), got {text!r}")
    return v


def _budget(text):
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not name.isidentifier():
        raise argparse.ArgumentTypeError(f"expected FIELD=LIMIT (e.g. p99_ms=30), got {text!r}")
    try:
        limit = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number after {name}=, got {value!r}") \
            from None
    if not math.isfinite(limit):
        raise argparse.ArgumentTypeError(f"expected a finite limit, got {value!r}")
    return name, limit


def _dim(text):
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=N, got {text!r}")
    return name, _positive_int(value)


def _version_line():
    """``--version``: the version, and which copy runs on which Python (beside the released
    ``spatialhub``, which copy of spatialhub.utils.profiling answers is worth seeing)."""
    import platform

    from ._version import __version__

    here = os.path.dirname(os.path.abspath(__file__))
    return f"{PROG} {__version__} from {here} (Python {platform.python_version()})"


def build_parser():
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Benchmark a callable, a PyTorch module or an ONNX model with warm-up, "
                    "device synchronisation, latency percentiles, throughput and peak memory; "
                    "print the result as a Markdown table.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # argparse %-formats the text (%(prog)s): a '%' in the path must not be read as one
    p.add_argument("--version", action="version", version=_version_line().replace("%", "%%"),
                   help="print the version (and where this copy is installed) and exit")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--callable", metavar="MOD:ATTR", dest="target",
                      help="callable to time: module:attr (module may be a .py file; attr may be dotted)")
    mode.add_argument("--onnx", metavar="PATH", help="ONNX model file to time with ONNX Runtime")
    mode.add_argument("--compare", nargs=2, metavar=("BASELINE.json", "CANDIDATE.json"),
                      help="compare two results saved with --json")
    mode.add_argument("--calibrate", nargs="?", const=CALIBRATE_PROCESSES, type=_positive_int,
                      metavar="N",
                      help="measure how far separate runs of identical code move apart on "
                           f"this machine (N fresh interpreters per workload, default "
                           f"{CALIBRATE_PROCESSES}) and remember it in the user's cache: single "
                           "runs' rerun intervals then use it instead of the assumed "
                           f"{_pct(ASSUMED_RUN_SPREAD)}%%")

    run = p.add_argument_group("what to run")
    run.add_argument("--args-shape", metavar="SHAPE", type=_int_list, action="append",
                     help="with --callable: shape of one random positional argument, e.g. 1,3,224,224 "
                          "(repeat for more arguments)")
    run.add_argument("--dtype", default="float32",
                     help="with --callable: dtype of the random arguments (default float32)")
    run.add_argument("--batch-sizes", metavar="LIST", type=_int_list,
                     help="with --callable naming a torch module: sweep the first dimension, e.g. 1,4,16,32")
    run.add_argument("--providers", metavar="LIST",
                     help="with --onnx: comma-separated providers, short or full names "
                          "(default CPU), e.g. CPU,CUDA")
    run.add_argument("--input-dim", metavar="NAME=N", type=_dim, action="append",
                     help="with --onnx: value of a symbolic input dimension (repeatable; default 1)")

    opts = p.add_argument_group("benchmark options")
    opts.add_argument("--warmup", type=_nonnegative_int, metavar="N",
                      help=f"untimed warm-up calls (default {DEMO_WARMUP} for the demo, "
                           f"else {WARMUP})")
    opts.add_argument("--iters", type=_positive_int, metavar="N",
                      help=f"timed calls (default {ITERS}; {TORCH_ITERS} for a torch module)")
    opts.add_argument("--device", help="device label: CPU, CUDA, cuda:1, mps (default CPU); "
                                       "a CUDA device gets the native cuCtxSynchronize around each call")
    opts.add_argument("--name", help="label of the result in the table")
    opts.add_argument("--processes", type=_positive_int, metavar="N",
                      help="run the benchmark in N fresh interpreters, one after another, "
                           "each in this process's state (allocator, threads, affinity), "
                           "and pool them: the spread between runs is measured "
                           "and --compare uses it (demo and --callable; default: this process)")
    opts.add_argument("--no-progress", action="store_true", help="never draw the progress bar")
    opts.add_argument("--cache", choices=("warm", "cold"), default=None,
                      help="cold: evict the CPU's last-level cache (and a CUDA device's L2) "
                           "before every call, outside the timed region (default warm)")
    opts.add_argument("--instructions", action="store_true",
                      help="count the instructions of each timed call (instructions_per_call): "
                           "runs this command again under valgrind's callgrind, ~50x slower, "
                           "with --warmup 10 --iters 5 unless given and the collector held "
                           "off during the counted calls; needs valgrind. With --compare: "
                           "judge the instruction counts instead of the times")
    opts.add_argument("--instructions-runs", type=_positive_int, metavar="N", default=None,
                      help=f"with --instructions: count in N separate callgrind processes "
                           f"and report each benchmark's lowest count when they read within "
                           f"{100 * LAYOUT_SPREAD:g}%% (a hash collision that depends on where "
                           f"objects landed can only add instructions), else this run's own; "
                           f"default {RUNS}")

    out = p.add_argument_group("output")
    gate = p.add_argument_group("comparison (--compare)")
    gate.add_argument("--margin", type=_percent, metavar="PCT",
                      help="practical-equivalence margin in percent: smaller differences count "
                           f"as the same (default {_pct(DEFAULT_MARGIN)}, or PCT of "
                           "--fail-if-slower)")
    gate.add_argument("--fail-if-slower", type=_percent, metavar="PCT",
                      help="exit with status 3 when a verdict is 'slower' by more than PCT "
                           "percent (a CI regression gate; 'inconclusive' does not fail)")
    gate.add_argument("--run-spread", type=_percent, metavar="PCT",
                      help="run-to-run spread of identical code on this machine, in percent "
                           "(std of log run medians: a --processes run's JSON has it as "
                           "run_spread, a fraction: 0.03 there is 3 here), for results "
                           "without repetitions (default: measured from the files' runs "
                           f"-- --json saves {SAVED_PROCESSES} processes -- else this "
                           "machine's --calibrate figure, else none: two single runs then "
                           "get no verdict, their ratio explained against an assumed "
                           f"{_pct(ASSUMED_RUN_SPREAD)}%%)")

    load = p.add_argument_group("latency under load (demo and --callable)")
    load.add_argument("--qps", type=_positive_real, metavar="RATE",
                      help="run under load: requests arrive at RATE per second on a schedule "
                           "fixed in advance; each latency runs from the intended arrival to "
                           "the completion, queueing included (benchmark_load)")
    load.add_argument("--duration", type=_duration, metavar="S",
                      help=f"with --qps, --find-peak or --arrival closed/offline: the arrival "
                           f"window (default {LOAD_DURATION:g}; with --find-peak each probe's "
                           f"least)")
    load.add_argument("--workers", type=_workers, metavar="N",
                      help="threads serving the requests in arrival order (default 1); more "
                           "help a callable that releases the GIL")
    load.add_argument("--arrival", choices=ARRIVALS, default=None,
                      help="poisson (default; MLPerf's Server), uniform, closed (the next "
                           "request when the last completed: MLPerf's SingleStream) or "
                           "offline (all at the start: MLPerf's Offline)")
    load.add_argument("--seed", type=_nonnegative_int, metavar="N",
                      help="the arrival schedule's seed (default: a fresh one, saved in --json)")
    load.add_argument("--max-queue", type=_nonnegative_int, metavar="N",
                      help="refuse a request arriving with every worker busy and N waiting "
                           "(counted as dropped; default: no limit); with --find-peak, each "
                           "probe's")
    load.add_argument("--find-peak", action="store_true",
                      help="search the highest rate whose --percentile meets --latency-bound "
                           "with confidence (find_peak_qps); the plan is said before it starts")
    load.add_argument("--latency-bound", type=_positive_real, metavar="MS",
                      help="with --find-peak: the latency budget in ms")
    load.add_argument("--percentile", type=_percentile, metavar="P",
                      help=f"with --find-peak: the percentile held to the bound (default "
                           f"{FIND_PEAK_PERCENTILE:g})")
    load.add_argument("--max-time", type=_positive_real, metavar="S",
                      help=f"with --find-peak: the search's time budget in seconds (default "
                           f"{FIND_PEAK_MAX_TIME:g})")

    out.add_argument("--title", help="title line above the table")
    out.add_argument("--json", metavar="FILE",
                     help="write the result(s), raw samples included, as JSON (input of --compare); "
                          "with --compare, the comparison(s): ratio, 95%% CI, verdict")
    out.add_argument("--markdown", metavar="FILE", help="write the printed table to FILE")
    out.add_argument("--plot", metavar="FILE.png", help="write a picture of the latencies (needs matplotlib)")
    out.add_argument("--plot-kind", choices=("hist", "ecdf", "box"), default="hist",
                     help="latency picture: histogram, ECDF or box plot (default hist)")
    out.add_argument("--report", metavar="FILE",
                     help="write the readiness report: one self-contained page (*.html, "
                          "figures drawn inline, nothing loaded from anywhere) or Markdown "
                          "(*.md) with the verdicts, budgets, distributions, flags and the "
                          "environment; with --compare, each candidate against its baseline")
    out.add_argument("--budget", metavar="FIELD=LIMIT", type=_budget, action="append",
                     help="with --report: a limit every result is judged against, e.g. "
                          "p99_ms=30 or ram_delta_mb=500 (fps and throughput are floors, "
                          "other fields ceilings; repeatable)")
    out.add_argument("--traceback", action="store_true", help="show the full traceback on failure")
    return p


def _check_combinations(p, a):
    def only(flag, value, condition, needs):
        if value not in (None, False) and not condition:
            p.error(f"{flag} needs {needs}")

    only("--args-shape", a.args_shape, a.target, "--callable")
    only("--batch-sizes", a.batch_sizes, a.target, "--callable")
    only("--providers", a.providers, a.onnx, "--onnx")
    only("--input-dim", a.input_dim, a.onnx, "--onnx")
    if a.onnx and a.device:
        p.error("--device does not apply to --onnx: the providers are the devices (use --providers)")
    only("--margin", a.margin, a.compare, "--compare")
    only("--budget", a.budget, a.report, "--report")
    if a.report and a.instructions:
        p.error("--report does not apply to --instructions: the times are valgrind's (~50x "
                "native), not what a deployment would see")
    only("--fail-if-slower", a.fail_if_slower, a.compare, "--compare")
    only("--run-spread", a.run_spread, a.compare, "--compare")
    only("--instructions-runs", a.instructions_runs, a.instructions and not a.compare,
         "--instructions (without --compare: it is how many processes count)")
    if a.instructions and a.processes:
        p.error("--processes does not apply to --instructions: a count does not move between "
                "runs, so there is no spread to measure")
    if a.instructions and a.run_spread is not None:
        p.error("--run-spread does not apply to --instructions (a count has no run-to-run "
                "spread to allow for)")
    if a.onnx and a.processes:
        p.error("--processes does not apply to --onnx (a session does not pickle)")
    if a.calibrate:
        for flag in ("warmup", "iters", "device", "name", "processes", "json", "markdown",
                     "plot", "title", "cache", "report"):
            if getattr(a, flag) is not None:
                p.error(f"--{flag} does not apply to --calibrate")
    if a.compare:
        for flag in ("warmup", "iters", "device", "name", "processes"):
            if getattr(a, flag) is not None:
                p.error(f"--{flag} does not apply to --compare (it reads saved results)")
    if a.dtype != "float32" and not a.target:
        p.error("--dtype needs --callable")
    a.load = bool(a.qps or a.find_peak or a.arrival in ("closed", "offline"))
    if a.find_peak and a.qps:
        p.error("--find-peak chooses the rates itself: drop --qps")
    if a.arrival in ("closed", "offline") and a.qps:
        p.error(f"--qps does not apply to --arrival {a.arrival} (requests come as fast as "
                f"they are served)")
    if a.arrival in ("poisson", "uniform") and not (a.qps or a.find_peak):
        p.error(f"--arrival {a.arrival} needs --qps RATE (or --find-peak)")
    for flag, value in (("--duration", a.duration), ("--workers", a.workers),
                        ("--seed", a.seed), ("--max-queue", a.max_queue)):
        only(flag, value, a.load, "--qps, --find-peak or --arrival closed/offline")
    only("--latency-bound", a.latency_bound, a.find_peak, "--find-peak")
    only("--percentile", a.percentile, a.find_peak, "--find-peak")
    only("--max-time", a.max_time, a.find_peak, "--find-peak")
    if a.find_peak and a.latency_bound is None:
        p.error("--find-peak needs --latency-bound MS (the latency budget)")
    if a.find_peak and a.arrival in ("closed", "offline"):
        p.error(f"--find-peak searches a rate: --arrival {a.arrival} has none (use poisson or "
                f"uniform)")
    if a.find_peak and a.percentile is not None and \
            _find_peak_probe_length(1.0, a.percentile, 1.0) > LOAD_MAX_REQUESTS:
        p.error(f"--percentile {_exact(a.percentile)} needs {_find_peak_needs(a.percentile):,} "
                f"requests a probe ({LOAD_MIN_TAIL} above it), and a probe asks for "
                f"{_find_peak_probe_length(1.0, a.percentile, 1.0):,.0f} to hold them with a "
                f"Poisson schedule's shortfall; at most {LOAD_MAX_REQUESTS:,} fit in one run")
    if a.qps and a.qps * (a.duration or LOAD_DURATION) > LOAD_MAX_REQUESTS:
        asked = a.qps * (a.duration or LOAD_DURATION)
        rate = _exact(a.qps) if a.qps < 1e15 else f"{a.qps:.3g}"   # not 300 digits
        count = (f"{asked:,.0f}" if asked < 1e15 else f"about {asked:.3g}" if math.isfinite(asked)
                 else "more than 1e+308")
        p.error(f"--qps {rate} for {_exact(a.duration or LOAD_DURATION)} s (--duration) asks "
                f"for {count} requests; at most {LOAD_MAX_REQUESTS:,} fit in one run (lower "
                f"--qps or --duration)")
    if a.load:
        if a.onnx or a.compare or a.calibrate:
            p.error("latency under load (--qps, --find-peak) runs the demo or --callable")
        for flag, value in (("--iters", a.iters), ("--processes", a.processes),
                            ("--instructions", a.instructions), ("--cache", a.cache),
                            ("--batch-sizes", a.batch_sizes)):
            if value not in (None, False):
                p.error(f"{flag} does not apply under load: "
                        + ("--qps and --duration set the number of requests"
                           if flag == "--iters" else "it belongs to back-to-back timing"))
    if a.max_queue is not None and a.arrival in ("closed", "offline"):
        p.error(f"--max-queue does not apply to --arrival {a.arrival}")
    if a.target and ":" not in a.target:
        p.error(f"--callable expects MODULE:ATTR (e.g. mypkg.ops:resize), got {a.target!r}")


# ---------------------------------------------------------------------------
# modes
# ---------------------------------------------------------------------------

def process_pipeline(image_tensor, threshold=0.5):
    """The demo workload (the seed's example): scale, clip, threshold."""
    filtered = np.clip(image_tensor * 1.5, 0.0, 1.0)
    return filtered > threshold


def _bench_kw(a):
    kw = {"progress": False} if a.no_progress else {}
    if a.cache is not None:
        kw["cache"] = a.cache
    if a.instructions:
        # a collection landing among the counted calls moved a mean of five by ~0.8%:
        # held off, identical code counts the same (docs/methodology.md)
        kw["disable_gc"] = True
    return kw


def _warmup(a, default):
    if a.warmup is not None:
        return a.warmup
    if a.instructions:
        from .instructions import WARMUP
        return WARMUP
    return default


def _iters(a, default):
    if a.iters:
        return a.iters
    if a.instructions:
        from .instructions import ITERATIONS
        return ITERATIONS
    return default


def _processes(a):
    """The fresh processes a run takes: --processes; else, for a run that is saved
    (--json) and not counted, SAVED_PROCESSES, so that the file holds the spread between
    runs a later --compare needs to decide; else none (one run, in this process)."""
    if a.processes:
        return a.processes
    if a.json and not a.instructions and not a.onnx:
        return SAVED_PROCESSES
    return None


def _bench(a, fresh=True):
    """benchmark_callable, or its pooled repetition in fresh interpreters (_processes)."""
    from ._native import benchmark_callable

    n = _processes(a) if fresh else None
    if not n:
        return benchmark_callable
    from .runner import benchmark_repeated

    if not a.processes:
        print(f"{PROG}: measuring in {n} fresh processes: a saved run keeps the spread "
              f"between runs that --compare decides on (--processes N sets how many)",
              file=sys.stderr, flush=True)

    def repeated(func, *args, **kwargs):
        return benchmark_repeated(func, *args, repeat=n, **kwargs)
    return repeated


class _Target:
    """A --callable target that pickles as its MODULE:ATTR spec, so a fresh interpreter
    (--processes) loads it again, also from a file path; loaded when unpickled, before
    any timing."""

    def __init__(self, spec, obj=None):
        self.spec, self.cwd = spec, os.getcwd()
        self.obj = obj if obj is not None else _load_target(spec)

    def __getstate__(self):
        return {"spec": self.spec, "cwd": self.cwd}

    def __setstate__(self, state):
        self.spec, self.cwd = state["spec"], state["cwd"]
        if self.cwd not in sys.path:
            sys.path.insert(0, self.cwd)
        os.chdir(self.cwd)
        self.obj = _load_target(self.spec)

    def __call__(self, *args, **kwargs):
        return self.obj(*args, **kwargs)


def _run_demo(a):
    # Made as README's example makes it (float64, then float32): freeing that 7 MB
    # array raises glibc's mmap threshold, so the pipeline's 3.7 MB temporaries are then
    # reused instead of fresh zero-filled pages each call.  Both therefore run in the
    # same allocator state and print the same figures; docs/methodology.md ("Allocator
    # state", bench/bench_allocator.py) shows the other state, ~1,770 page faults a call.
    frame = np.random.default_rng(0).random((1, 3, 480, 640)).astype(np.float32)
    stats = _bench(a)(
        process_pipeline, frame, threshold=0.6,
        name=a.name or "ImagePreprocessor", device=a.device or "CPU",
        num_warmup=_warmup(a, DEMO_WARMUP), num_iters=_iters(a, DEMO_ITERS), **_bench_kw(a),
    )
    title = a.title or "Demo: process_pipeline on a 1x3x480x640 float32 frame"
    return [stats], title, None


def _load_target(spec):
    modname, _, attr = spec.rpartition(":")  # rpartition: "C:\\x\\ops.py:f" on Windows
    if not modname or not attr:
        raise CliError(f"--callable expects MODULE:ATTR, got {spec!r}")
    if modname.endswith(".py") or os.sep in modname:
        if not os.path.isfile(modname):
            raise CliError(f"--callable: no such file {modname!r}")
        name = os.path.splitext(os.path.basename(modname))[0]
        if name in sys.modules:  # a file named like a loaded module (json.py) must not replace it
            name = f"_spatialhub_target_{name}"
        loader_spec = importlib.util.spec_from_file_location(name, modname)
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[name] = module
        loader_spec.loader.exec_module(module)
    else:
        if "" not in sys.path and os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())  # like `python -m`: modules in the current directory
        try:
            module = importlib.import_module(modname)
        except ImportError as exc:
            raise CliError(f"--callable: cannot import module {modname!r}: {exc}") from exc
    obj = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise CliError(f"--callable: module {modname!r} has no attribute {attr!r}") from None
    return obj


def _is_torch_module(obj):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.nn.Module)


def _run_callable(a):
    target = _load_target(a.target)
    name = a.name or a.target.rpartition(":")[2].rsplit(".", 1)[-1]
    shapes = a.args_shape or []
    kw = _bench_kw(a)
    if _is_torch_module(target):
        from .torch_models import profile_model

        if a.processes:
            raise CliError("--processes does not apply to a torch module yet: use --callable "
                           "on a function that runs it")
        if a.json:
            print(f"{PROG}: note: a torch module is measured in this process only (it does "
                  f"not go to a fresh one), so no spread between runs is saved and a "
                  f"--compare of this file cannot decide: --callable on a function that "
                  f"runs it measures one", file=sys.stderr, flush=True)
        if len(shapes) != 1:
            raise CliError("a torch module needs exactly one --args-shape (its input shape)")
        result = profile_model(
            target, shapes[0], device=(a.device or "cpu").lower(),
            warmup=_warmup(a, WARMUP), iters=_iters(a, TORCH_ITERS),
            batch_sizes=a.batch_sizes, dtype=None if a.dtype == "float32" else a.dtype,
            name=name, **kw)
        if a.batch_sizes:
            return result, a.title, result
        return [result], a.title, None
    if a.batch_sizes:
        raise CliError("--batch-sizes needs a torch.nn.Module target")
    if not callable(target):
        raise CliError(f"--callable: {a.target} is a {type(target).__name__}, not callable")
    try:
        dtype = np.dtype(a.dtype)
    except TypeError:
        raise CliError(f"--dtype: unknown NumPy dtype {a.dtype!r}") from None
    rng = np.random.default_rng(0)
    args = [rng.random(s).astype(dtype) if dtype.kind in "fc" else rng.integers(0, 2, s).astype(dtype)
            for s in shapes]
    stats = _bench(a)(_Target(a.target, target) if _processes(a) else target, *args,
                      name=name, device=a.device or "CPU",
                      num_warmup=_warmup(a, WARMUP), num_iters=_iters(a, ITERS), **kw)
    return [stats], a.title, None


def _run_onnx(a):
    from .onnx_models import benchmark_onnx

    if not os.path.isfile(a.onnx):
        raise CliError(f"--onnx: no such file {a.onnx!r}")
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        raise CliError("--onnx needs onnxruntime: pip install 'spatialhub-profiling[onnx]'") from None
    providers = [p for p in (a.providers or "CPU").split(",") if p.strip()]
    if a.json:
        print(f"{PROG}: note: an ONNX session is measured in this process only (it does not "
              f"go to a fresh one), so no spread between runs is saved and a --compare of "
              f"this file cannot decide", file=sys.stderr, flush=True)
    result = benchmark_onnx(a.onnx, providers=providers, name=a.name,
                            input_dims=dict(a.input_dim or []),
                            warmup=_warmup(a, WARMUP), iters=_iters(a, ITERS), **_bench_kw(a))
    return list(result), a.title, None


def _load_subject(a):
    """(func, args, name) of a run under load: --callable's target with its random
    arguments, or the demo pipeline."""
    if not a.target:
        frame = np.random.default_rng(0).random((1, 3, 480, 640)).astype(np.float32)
        return (lambda x: process_pipeline(x, threshold=0.6)), (frame,), a.name or "ImagePreprocessor"
    target = _load_target_obj(a)
    name = a.name or a.target.rpartition(":")[2].rsplit(".", 1)[-1]
    return target, _random_args(a), name


def _load_target_obj(a):
    target = _load_target(a.target)
    if _is_torch_module(target):
        raise CliError("--qps / --find-peak take a callable: wrap the torch module in a function "
                       "that runs it (under torch.inference_mode)")
    if not callable(target):
        raise CliError(f"--callable: {a.target} is a {type(target).__name__}, not callable")
    return target


def _random_args(a):
    try:
        dtype = np.dtype(a.dtype)
    except TypeError:
        raise CliError(f"--dtype: unknown NumPy dtype {a.dtype!r}") from None
    rng = np.random.default_rng(0)
    return [rng.random(s).astype(dtype) if dtype.kind in "fc" else rng.integers(0, 2, s).astype(dtype)
            for s in (a.args_shape or [])]


def _run_under_load(a):
    """--qps / --find-peak / --arrival closed|offline: (result, table, payload)."""
    from ._native import benchmark_load

    func, args, name = _load_subject(a)
    kw = dict(name=name, device=a.device or "CPU", num_warmup=_warmup(a, WARMUP))
    if a.workers:
        kw["workers"] = a.workers
    if a.duration:
        kw["duration_s"] = a.duration
    if a.seed is not None:
        kw["seed"] = a.seed
    if a.find_peak:
        if a.arrival:
            kw["arrival"] = a.arrival
        if a.percentile is not None:
            kw["percentile"] = a.percentile
        if a.max_time is not None:
            kw["max_time_s"] = a.max_time
        if a.max_queue is not None:
            kw["max_queue"] = a.max_queue
        result = find_peak_qps(func, *args, latency_bound_ms=a.latency_bound,
                               progress=not a.no_progress, **kw)
    else:
        if a.max_queue is not None:
            kw["max_queue"] = a.max_queue
        if a.arrival:
            kw["arrival"] = a.arrival
        if not a.no_progress:
            print(f"{PROG}: {_load_plan(name, a)}", file=sys.stderr, flush=True)
        result = benchmark_load(func, *args, qps=a.qps, **kw)
    return result, _load_table(a, result), result.to_dict(samples=True)


def _load_plan(name, a):
    """The one line said before a run under load starts: what arrives, for how long."""
    duration = a.duration or LOAD_DEFAULT_DURATION_S
    workers = a.workers or 1
    who = f"{workers} worker" + ("s" if workers != 1 else "")
    if a.qps:
        return (f"{name!r} under load: {_number(a.qps)} requests/s ({a.arrival or 'poisson'}) "
                f"for {duration:g} s, about {_number(a.qps * duration)} requests, {who}")
    return (f"{name!r} under load: requests as fast as they are served ({a.arrival}) "
            f"for {duration:g} s, {who}")


def _load_table(a, result, interrupted=False):
    from ._native import LoadStats, format_load_table

    search = result.search or {}
    if not search:
        title = a.title or ("Latency under load" + (" (interrupted: partial result)"
                                                    if interrupted else ""))
        return format_load_table(result, title)
    probes = search.get("probes") or []
    rows = [LoadStats.from_dict(pr["stats"]) for pr in probes]
    pct = f"p{search['percentile']:g}"
    peak = search.get("peak_qps")
    bound = _number(search['latency_bound_ms'])
    if peak is not None:
        head = (f"Peak: **{_number(peak)} requests/s**{' or more' if search.get('capped') else ''} "
                f"with {pct} within {bound} ms (95% interval within the bound)")
    elif probes:
        head = f"Peak: none: no rate tried had its {pct} within {bound} ms"
    elif str(search.get("stopped", "")).startswith("no rate"):
        head = (f"Peak: none: even back to back (one request at a time, no queue) the {pct} "
                f"is over {bound} ms")
    else:
        head = "Peak: not searched: the search stopped before its first probe"
    lines = [head, "", f"Search: {len(probes)} probes of {_number(search['probe_duration_s'])} s "
             f"or more, {_number(search['elapsed_s'])} s in all; stopped: {search['stopped']}."]
    if rows:
        lines += ["", format_load_table(rows, a.title or "Probes, in the order run")]
        lines += [""] + [f"- {_number(pr['offered_qps'])} requests/s: {pct} "
                         f"{_ms(pr['value_ms'])} ms (95% interval {_ms(pr['ci_low_ms'])} - "
                         f"{_ms(pr['ci_high_ms'])} ms): {pr['verdict']}" for pr in probes]
    return "\n".join(lines)


def _ms(x):
    return "N/A" if x is None else _number(float(x))


#: lists of times in a result written by --json: each a finite number >= 0
_SAMPLE_LISTS = ("samples_ms", "warmup_ms", "gpu_samples_ms")


def _check_result(d, at):
    """The values of one result of a --compare file that BenchmarkStats.from_dict lets
    through but --compare cannot use: a null or negative sample (from_dict reads null as
    NaN), a NaN or infinite number (JSON's NaN / Infinity: never written by --json,
    whose missing figures are null).  Raises ``_readback.BadValue``."""
    import math

    from ._readback import BadValue, mapping, number, shown

    mapping(d, at or "the document")
    pre = f"{at}." if at else ""
    for key, value in d.items():
        if key in _SAMPLE_LISTS and isinstance(value, list):
            for j, x in enumerate(value):
                number(x, f"{pre}{key}[{j}]", low=0)
        elif isinstance(value, float) and not math.isfinite(value):
            raise BadValue(f"{pre}{key}", f"is not a finite number ({shown(value)})")


def _load_results(path):
    """The results of a file written by --json (one, or a list).  A bad file is the
    user's usage error: one line naming the file and the field (status 1)."""
    from ._native import BenchmarkStats
    from ._readback import BadValue

    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CliError(f"{path} is not JSON: {exc}") from None
    many = isinstance(data, list)
    items = data if many else [data]
    out = []
    for i, d in enumerate(items):
        at = f"[{i}]" if many else ""
        if _is_load_result(d):
            raise UsageError(
                f"{path}{' (' + at + ')' if at else ''} holds a run under load (--qps / "
                f"--find-peak); --compare compares back-to-back timings, not runs under "
                f"load: set the runs side by side in one --report, or hold each to a budget "
                f"(--report FILE --budget p99_ms=30)")
        try:
            _check_result(d, at)
            out.append(BenchmarkStats.from_dict(d))
        except BadValue as exc:
            raise CliError(f"{path}: {exc}") from None
        except (TypeError, ValueError, KeyError) as exc:
            raise CliError(f"{path} does not hold results written by --json"
                           f"{' (' + at + ')' if at else ''}: {exc}") from None
    return out


def _is_load_result(d):
    """A saved LoadStats: its own type reads it (and BenchmarkStats does not)."""
    from ._native import BenchmarkStats, LoadStats

    if not isinstance(d, dict):
        return False
    try:
        BenchmarkStats.from_dict(d)
        return False
    except (TypeError, ValueError, KeyError):
        pass
    try:
        LoadStats.from_dict(d)
    except (TypeError, ValueError, KeyError):
        return False
    return True


def _compare(a):
    from ._native import compare_benchmarks, format_benchmark_table

    base_path, cand_path = a.compare
    base, cand = _load_results(base_path), _load_results(cand_path)
    if len(base) != len(cand):
        raise CliError(f"{base_path} holds {len(base)} result(s) but {cand_path} holds {len(cand)}; "
                       f"--compare pairs them in order")
    if a.instructions:
        return _compare_counts(a, base, cand)
    margin = a.margin if a.margin is not None else \
        a.fail_if_slower if a.fail_if_slower is not None else 100 * DEFAULT_MARGIN
    spread = {} if a.run_spread is None else {"run_spread": a.run_spread / 100}
    comparisons = [compare_benchmarks(b, c, margin=margin / 100, **spread)
                   for b, c in zip(base, cand)]
    title = a.title or "Comparison"
    # Each pair in a table of its own, against its own baseline: one "vs Baseline"
    # column for all rows would set every candidate against the first baseline
    # (a CUDA candidate against the CPU baseline) and contradict the verdicts below.
    n = len(base)
    parts = [format_benchmark_table([b, c], title if n == 1 else f"{title} ({i + 1}/{n})",
                                    baseline=b, margin=margin / 100, columns="auto", **spread)
             for i, (b, c) in enumerate(zip(base, cand))]
    parts += [f"{c._repr_markdown_()}\n\n{c.verdict}: {c.reason}" for c in comparisons]
    if a.fail_if_slower is not None:
        limit = 1 + a.fail_if_slower / 100
        a.gate_failed = [c for c in comparisons if c.verdict == "slower" and c.ratio > limit]
    a.compared_with = (margin / 100, spread)   # for --report: the same rule
    return base + cand, "\n\n".join(parts), [c.to_dict(exact=True) for c in comparisons]


def _compare_counts(a, base, cand):
    """--compare --instructions: the instruction counts per call, by
    instructions.judge_counts (a count needs no interval: identical code reads the same)."""
    from ._native import format_benchmark_table
    from .instructions import judge_counts

    threshold = a.fail_if_slower / 100 if a.fail_if_slower is not None else None
    margin = a.margin / 100 if a.margin is not None else None
    verdicts = [judge_counts(f"{c.name} vs {b.name}", b.instructions_per_call,
                             c.instructions_per_call, threshold, margin)
                for b, c in zip(base, cand)]
    missing = [v for v in verdicts if v.verdict == "no data"]
    if missing:
        raise CliError(f"--instructions: {missing[0].reason.replace(' not judged', '')} "
                       f"({len(missing)} of {len(verdicts)} pair(s)); write both files with "
                       f"--instructions --json")
    title = a.title or "Comparison of instruction counts"
    n = len(base)
    parts = [format_benchmark_table([b, c], title if n == 1 else f"{title} ({i + 1}/{n})",
                                    columns=["instructions"])
             for i, (b, c) in enumerate(zip(base, cand))]
    parts += [f"{v.name}: {v.reason}" for v in verdicts]
    if a.fail_if_slower is not None:
        a.gate_failed = [v for v in verdicts if v.fails]
    return base + cand, "\n\n".join(parts), [v.to_dict() for v in verdicts]


# ---------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------

def _cannot_write(option, path, exc):
    """The one wording of a failed output, for --json, --markdown and --plot alike."""
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return CliError(f"{option}: cannot write {path}: {reason}")


def _check_outputs(a):
    """Before anything runs: every output path can be written (its folder exists and
    takes files; it is not a folder itself), and --plot has matplotlib.  A benchmark that
    runs for minutes and then cannot save its result has wasted them."""
    for option, path in (("--json", a.json), ("--markdown", a.markdown), ("--plot", a.plot),
                         ("--report", a.report)):
        if path is None:
            continue
        folder = os.path.dirname(os.path.abspath(path))
        if os.path.isdir(path):
            raise _cannot_write(option, path, IsADirectoryError(21, "Is a directory"))
        if not os.path.isdir(folder):
            raise _cannot_write(option, path, FileNotFoundError(2, f"no folder {folder}"))
        if not os.access(folder, os.W_OK | os.X_OK):
            raise _cannot_write(option, path, PermissionError(13, "Permission denied"))
    if a.report and os.path.splitext(a.report)[1].lower() not in (".html", ".htm", ".md",
                                                                  ".markdown"):
        raise CliError(f"--report: name the file *.html (a page) or *.md (Markdown), not "
                       f"{os.path.basename(a.report)!r}")
    if a.budget:
        from ._native import BenchmarkStats, LoadStats

        kind, examples = ((LoadStats, "p99_ms, p50_ms, achieved_qps, queue_share") if a.load
                          else (BenchmarkStats, "p99_ms, median_ms, ram_delta_mb, fps, "
                                                "first_call_ms"))
        for field, _ in a.budget:
            value = getattr(kind, field, None)
            if value is None or callable(value):
                raise CliError(f"--budget: a result has no figure {field!r} (fields such as "
                               f"{examples})")
    if a.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise CliError("--plot needs matplotlib: pip install matplotlib") from None


def _write(option, path, text):
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise _cannot_write(option, path, exc) from None


def _plot(a, stats_list, sweep_result):
    try:
        from .plot import plot_latency, plot_sweep

        if sweep_result is not None:
            plot_sweep(sweep_result, path=a.plot)
        else:
            plot_latency(stats_list, kind=a.plot_kind, path=a.plot)
    except ImportError as exc:
        raise CliError(f"--plot: {exc}") from None
    except OSError as exc:
        raise _cannot_write("--plot", a.plot, exc) from None


def _report(a, stats_list, sweep_result, title):
    """--report: the readiness report of what this command measured (or compared)."""
    import copy

    from ._native import compare_benchmarks

    baseline = None
    if a.compare:
        # each candidate against its own baseline, by the rule --compare used; names that
        # are the same on both sides are told apart by their files
        n = len(stats_list) // 2
        base, cand = [copy.copy(s) for s in stats_list[:n]], [copy.copy(s) for s in
                                                              stats_list[n:]]
        shared = {s.name for s in base} & {s.name for s in cand}
        for side, path in ((base, a.compare[0]), (cand, a.compare[1])):
            for s in side:
                if s.name in shared:
                    s.name = f"{s.name} ({os.path.basename(path)})"
        margin, spread = getattr(a, "compared_with", (None, {}))
        kw = dict(spread, **({"margin": margin} if margin is not None else {}))
        results = [*base, *cand, *(compare_benchmarks(b, c, **kw) for b, c in zip(base, cand))]
        baseline = False
    else:
        results = sweep_result if sweep_result is not None else stats_list
    _report_file(a, results, title, baseline)


def _report_file(a, results, title, baseline=None):
    """write_report of `results` to --report, with --budget and this command."""
    from .report import render_report, write_report

    argv = getattr(a, "argv", None)
    command = f"{PROG} {shlex.join(argv)}" if argv is not None else None
    kw = dict(title=title, baseline=baseline, budgets=dict(a.budget) if a.budget else None,
              command=command)
    try:
        write_report(results, a.report, **kw)
        # the page's headline, said where the user looks: the budgets met or not
        text = render_report(results, format="markdown", **kw).split("## Verdict", 1)[-1]
    except OSError as exc:
        raise _cannot_write("--report", a.report, exc) from None
    except (TypeError, ValueError) as exc:
        raise CliError(f"--report: {exc}".replace("write_report(): ", "")) from None
    headline = next((line for line in text.splitlines() if line.strip()), "")
    print(f"{PROG}: wrote {a.report}: {headline.replace('**', '')}", file=sys.stderr)


def _one_line(exc):
    if isinstance(exc, CliError):
        msg = str(exc)
    else:
        msg = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        notes = getattr(exc, "__notes__", None)
        if notes:
            msg += " (" + "; ".join(str(n) for n in notes) + ")"
    return " ".join(msg.split())


def _calibrate(a):
    from .calibrate import calibrate_run_spread

    print(f"{PROG}: calibrating: {a.calibrate} fresh interpreters per workload, one after "
          f"another...", file=sys.stderr)
    e = calibrate_run_spread(a.calibrate, save=True)
    rows = [f"| {k} | {100 * w['run_spread']:.1f}% | {w['median_ms']:.3f} |"
            for k, w in e["workloads"].items()]
    load = (f"load average {e['load_before']:.2f} before, {e['load_after']:.2f} after"
            if e["load_before"] is not None else "load average unknown")
    print("\n".join([
        "### Run-to-run spread of this machine", "",
        "| workload | spread (std of log run medians) | median of run medians (ms) |",
        "| :--- | :--- | :--- |", *rows, "",
        f"Remembered: {100 * e['run_spread']:.1f}% over {e['processes']} processes per "
        f"workload ({e['when']}, {load}) in {e['path']}.",
        "Single runs' rerun intervals on this machine use it from now on; "
        "forget_run_spread() or deleting the file brings back the assumed "
        f"{_pct(ASSUMED_RUN_SPREAD)}%."]))
    return 0


def _main(a):
    from ._native import BenchmarkInterrupted
    from .sweeps import SweepResult

    if a.calibrate:
        return _calibrate(a)
    _check_outputs(a)
    if a.load:
        return _main_under_load(a)
    interrupted = None
    if a.compare:
        stats_list, table, payload = _compare(a)
        sweep_result = None
    else:
        try:
            if a.target:
                stats_list, title, sweep_result = _run_callable(a)
            elif a.onnx:
                stats_list, title, sweep_result = _run_onnx(a)
            else:
                stats_list, title, sweep_result = _run_demo(a)
        except KeyboardInterrupt as exc:
            # Ctrl-C: the library kept what was measured (.stats of a timed
            # loop, .partial of a sweep's finished values); show and save
            # it, marked, then end as an interrupt (status 130).
            stats_list, sweep_result = _partial(exc)
            if not stats_list:
                raise
            title = f"{a.title or 'Benchmark'} (interrupted: partial result)"
            interrupted = exc
        in_loop = isinstance(interrupted, BenchmarkInterrupted)
        if a.instructions:   # the lowest count of the counted runs (instructions.RUNS)
            for s in stats_list:
                s.instructions_per_call = lowest(s.name, s.instructions_per_call)
        table = (sweep_result if sweep_result is not None else SweepResult(stats_list)).to_table(title)
        if a.instructions:
            table += ("\n\nInstructions per call: counted by valgrind's callgrind over the "
                      "timed calls (warm-up excluded, the collector held off), the calling "
                      "thread only. The latencies were measured under valgrind (~50x "
                      "native): they are not wall time.")
            for line in disagreements():
                table += f"\n\n{line}."
        if interrupted is not None:
            table = ("**Interrupted (Ctrl-C): " +
                     ("the last row holds only the iterations completed before it.**"
                      if in_loop else "the rows shown are complete; the values after them were not run.**")
                     + "\n\n" + table)
        payload = [s.to_dict(samples=True, exact=True) for s in stats_list]   # saved: exact
        uncounted = [s.name for s in stats_list
                     if a.instructions and s.instructions_per_call is None]
        if uncounted and interrupted is None:
            print(table, flush=True)
            raise CliError(f"--instructions: no instruction count came back for "
                           f"{', '.join(uncounted)} (is the native module stripped of its "
                           f"symbols? callgrind finds shp_counted_call by name)")
        if in_loop and payload:
            env = dict(payload[-1].get("env") or {})
            env["interrupted"] = True   # env is free-form: --compare still reads the file
            payload[-1]["env"] = env
    # the table first: whatever happens to the files, what was measured is shown
    print(table, flush=True)
    if a.instructions and probing():
        return 0    # a probe of a counted run: its counts are written down, no file
    failed_writes = []
    for option, write in (
            ("--json", a.json and (lambda: _write("--json", a.json, json.dumps(
                payload[0] if len(payload) == 1 else payload, indent=2,
                default=_json_default) + "\n"))),
            ("--markdown", a.markdown and (lambda: _write("--markdown", a.markdown,
                                                          table + "\n"))),
            ("--plot", a.plot and interrupted is None and (
                lambda: _plot(a, stats_list, sweep_result))),
            ("--report", a.report and (
                lambda: _report(a, stats_list, sweep_result,
                                title if not a.compare else a.title or "Comparison")))):
        if write:
            try:
                write()
            except CliError as exc:
                failed_writes.append(exc)
    if interrupted is not None:
        raise interrupted
    if failed_writes:
        raise CliError("; ".join(str(e) for e in failed_writes))
    failed = getattr(a, "gate_failed", None)
    if failed and a.instructions:
        worst = max(failed, key=lambda v: v.ratio)
        print(f"{PROG}: {len(failed)} comparison(s) with more than {a.fail_if_slower:g}% more "
              f"instructions per call (worst: {worst.name} {worst.ratio:.4f}x)", file=sys.stderr)
        return 3
    if failed:
        worst = max(failed, key=lambda c: c.ratio)
        print(f"{PROG}: {len(failed)} comparison(s) slower by more than {a.fail_if_slower:g}% "
              f"(worst: {worst.candidate} {worst.ratio:.3f}x {worst.baseline})", file=sys.stderr)
        return 3
    return 0


def _main_under_load(a):
    """The load modes: the table first, then the files; Ctrl-C shows and saves what was
    measured (BenchmarkInterrupted.stats), then ends as an interrupt."""
    interrupted = None
    try:
        result, table, payload = _run_under_load(a)
    except KeyboardInterrupt as exc:
        result = getattr(exc, "stats", None)
        if result is None:
            raise
        table = ("**Interrupted (Ctrl-C): the requests completed before it.**\n\n"
                 + _load_table(a, result, interrupted=True))
        payload = result.to_dict(samples=True)
        payload["env"] = dict(payload.get("env") or {}, interrupted=True)
        interrupted = exc
    print(table, flush=True)
    failed_writes = []
    for option, write in (
            ("--json", a.json and (lambda: _write("--json", a.json, json.dumps(
                payload, indent=2, default=_json_default) + "\n"))),
            ("--markdown", a.markdown and (lambda: _write("--markdown", a.markdown,
                                                          table + "\n"))),
            ("--plot", a.plot and interrupted is None and (lambda: _plot_load(a, result))),
            ("--report", a.report and (lambda: _report_file(
                a, [result], a.title or ("Latency under load" + (
                    " (interrupted: partial result)" if interrupted is not None else "")),
                baseline=False)))):
        if write:
            try:
                write()
            except CliError as exc:
                failed_writes.append(exc)
    if interrupted is not None:
        raise interrupted
    if failed_writes:
        raise CliError("; ".join(str(e) for e in failed_writes))
    return 0


def _plot_load(a, result):
    try:
        from .plot import plot_load

        plot_load(result, path=a.plot)
    except ImportError as exc:
        raise CliError(f"--plot: {exc}") from None
    except OSError as exc:
        raise _cannot_write("--plot", a.plot, exc) from None


def _partial(exc):
    """(stats_list, sweep_result or None) of what an interrupted run kept."""
    partial = getattr(exc, "partial", None)   # set by sweep(): the values done so far
    if partial is not None:
        return list(partial), partial
    stats = getattr(exc, "stats", None)       # BenchmarkInterrupted: one run's
    return ([stats] if stats is not None else []), None


def _warning_text(message):
    """A BenchmarkWarning for the terminal: its text, one line per cause with its numbers
    in coarse form (the exact values are the warning's and the result's attributes, and
    in --json)."""
    return str(message)


def _json_default(obj):
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def main(argv=None):
    """Entry point; returns the exit status (0, 1, 2 or 3)."""
    parser = build_parser()
    try:
        a = parser.parse_args(argv)
        a.argv = list(sys.argv[1:] if argv is None else argv)
        _check_combinations(parser, a)
    except SystemExit as exc:  # argparse: 0 for --help, 2 for usage errors
        return exc.code if isinstance(exc.code, int) else 2
    if a.instructions and not a.compare:
        from .instructions import ValgrindNotFound, active, rerun

        if not active():   # this command again, under callgrind (instructions.py)
            try:
                return rerun(["-m", "spatialhub.utils.profiling",
                              *(sys.argv[1:] if argv is None else argv)], PROG,
                             runs=a.instructions_runs or RUNS)
            except ValgrindNotFound as exc:
                print(f"{PROG}: error: {exc}", file=sys.stderr)
                return 1
    from ._native import BenchmarkWarning, suppressed_warnings

    def run_warning(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, BenchmarkWarning) and a.instructions and not a.compare:
            return   # remarks on the times, which are valgrind's here: not the figure
        if issubclass(category, BenchmarkWarning):   # a finding about the run, not about code
            print(f"{PROG}: warning: {_warning_text(message)}", file=sys.stderr)
        else:
            shown(message, category, filename, lineno, file, line)
    shown = warnings.showwarning
    try:
        warnings.showwarning = run_warning
        before = suppressed_warnings()
        with remedy_words(CLI):
            status = _main(a)
        repeats = {k: n - before.get(k, 0) for k, n in suppressed_warnings().items()}
        repeats = {k: n for k, n in repeats.items() if n > 0}
        if repeats:
            print(f"{PROG}: note: " + ", ".join(
                f"{n} repeated warning{'s' if n > 1 else ''} not shown ({k})"
                for k, n in repeats.items()), file=sys.stderr)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the CLI's contract: one line, status 1
        if a.traceback:
            raise
        print(f"{PROG}: error: {_one_line(exc)}", file=sys.stderr)
        return 2 if isinstance(exc, UsageError) else 1
    finally:
        warnings.showwarning = shown
    return status


if __name__ == "__main__":
    sys.exit(main())
