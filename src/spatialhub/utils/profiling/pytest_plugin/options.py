"""The ``--benchmark-*`` options: pytest-benchmark's names, metavars, defaults and
usage errors (suites and CI scripts written for it keep working, and its own tests
read ``--help``), then ours, marked ``(spatialhub)``.

Each parser returns a plain value; the compare-fail expressions become
``gate.FailRule`` objects, so a new field (an instruction count, say) is one entry in
``gate.FIELDS``, not a change here.
"""
from __future__ import annotations

import argparse
import importlib
import os
import time
from types import SimpleNamespace
from datetime import datetime, timezone
from decimal import Decimal

from .._native import ASSUMED_RUN_SPREAD
from ..instructions import LAYOUT_SPREAD, RUNS
from .gate import ALLOWED_FIELDS, HISTORY_RUNS, MIN_SPREAD_RUNS, parse_fail_rule
from .spread import PROCESSES as SPREAD_PROCESSES

__all__ = ["add_options", "TIMER_DEFAULT", "load_timer", "timer_name", "DEFAULT_COLUMNS",
           "ALLOWED_COLUMNS", "INSTRUCTION_COLUMNS", "SORT_KEYS", "CPROFILE_COLUMNS", "MARKER_OPTIONS",
           "DEFAULT_MAX_ROUNDS", "judge_options"]

#: pytest-benchmark's columns, then ours before the two counts (Rounds, Iterations):
#: its own tests, and scripts that read its table, expect the header to end with them.
PB_COLUMNS = ("min", "max", "mean", "stddev", "median", "iqr", "outliers", "ops")
OUR_COLUMNS = ("p99", "ci", "ram")
DEFAULT_COLUMNS = PB_COLUMNS + OUR_COLUMNS + ("rounds", "iterations")
ALLOWED_COLUMNS = PB_COLUMNS + ("p90", "p95") + OUR_COLUMNS + ("instructions", "rounds",
                                                                "iterations")
#: --benchmark-instructions: the count; the times are valgrind's (~50x native)
INSTRUCTION_COLUMNS = ("instructions", "rounds", "iterations")
SORT_KEYS = ("min", "max", "mean", "stddev", "name", "fullname")
CPROFILE_COLUMNS = ("ncalls_recursion", "ncalls", "tottime", "tottime_per", "cumtime",
                    "cumtime_per", "function_name")
TIMER_DEFAULT = "time.perf_counter"
DEFAULT_MAX_ROUNDS = 10000

# @pytest.mark.benchmark(...) keywords: pytest-benchmark's, then ours
MARKER_OPTIONS = frozenset((
    "max_time", "min_rounds", "min_time", "precision", "confidence", "timer", "group",
    "disable_gc", "warmup", "warmup_iterations", "calibration_precision", "cprofile",
    "device", "sync_fn", "max_rounds", "track_ram", "track_vram", "reference",
))


def _stamp():
    return datetime.now(timezone.utc).strftime("%Y%m%d_%H%M%S")


# ---- parsers (their messages are what pytest prints after "error: argument ...") --------

def parse_seconds(text):
    """A decimal number of seconds, kept as the string given (``'0.000005'``)."""
    try:
        Decimal(text)
        float(text)
    except Exception as exc:   # decimal.InvalidOperation names the problem
        raise argparse.ArgumentTypeError(f"Invalid decimal value {text!r}: {exc!r}") from None
    return text


def parse_rounds(text):
    try:
        value = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value < 1:
        raise argparse.ArgumentTypeError("Value for --benchmark-rounds must be at least 1.")
    return value


def parse_fraction(text):
    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError("Value must be a fraction strictly between 0 and 1.")
    return value


def load_timer(text):
    """``module.attr`` -> the callable.  ``pep418.NAME`` is the ``time`` module's NAME
    (pytest-benchmark's spelling from before Python 3.3)."""
    text = str(text)
    if "." not in text:
        raise argparse.ArgumentTypeError(
            "Value for --benchmark-timer must be in dotted form. Eg: 'module.attr'.")
    mod, attr = text.rsplit(".", 1)
    try:
        module = time if mod == "pep418" else importlib.import_module(mod)
        timer = getattr(module, attr)
    except (ImportError, AttributeError) as exc:
        raise argparse.ArgumentTypeError(f"Cannot load timer {text!r}: {exc}") from None
    if not callable(timer):
        raise argparse.ArgumentTypeError(f"Timer {text!r} is not callable.")
    return timer


def timer_name(timer):
    """``module.name`` of a timer, as pytest-benchmark's header and JSON show it."""
    mod = getattr(timer, "__module__", None)
    name = getattr(timer, "__name__", None) or repr(timer)
    return f"{mod}.{name}" if mod else name


def parse_timer(text):
    return timer_name(load_timer(text))


def parse_warmup(text):
    t = str(text).lower().strip()
    if t == "auto":
        return "auto"
    if t in ("on", "true", "yes", ""):
        return True
    if t in ("off", "false", "no"):
        return False
    raise argparse.ArgumentTypeError(f"Could not parse value: {text!r}.")


def parse_save(text):
    if not text:
        raise argparse.ArgumentTypeError("Can't be empty.")
    bad = "".join(c for c in '\\/:*?<>|' if c in text)
    if bad:
        raise argparse.ArgumentTypeError(
            f"Must not contain any of these characters: /:*?<>|\\ (it has {bad!r})")
    return text


def parse_sort(text):
    t = str(text).lower().strip()
    if t not in SORT_KEYS:
        raise argparse.ArgumentTypeError(
            f"Unacceptable value: {t!r}. Value for --benchmark-sort must be one of: "
            + ", ".join(repr(k) for k in SORT_KEYS) + ".")
    return t


def parse_columns(text):
    cols = [c.strip() for c in str(text).lower().split(",") if c.strip()]
    bad = [c for c in cols if c not in ALLOWED_COLUMNS]
    if bad or not cols:
        raise argparse.ArgumentTypeError(
            f"Invalid column name(s): {', '.join(bad) or repr(text)}. "
            f"The only valid column names are: {', '.join(ALLOWED_COLUMNS)}")
    return cols


def parse_group_by(text):
    for part in str(text).split(","):
        if part not in ("group", "name", "func", "fullname", "fullfunc", "param") \
                and not (part.startswith("param:") and len(part) > 6):
            raise argparse.ArgumentTypeError(
                f"Unsupported grouping {text!r}: one of 'group', 'name', 'fullname', "
                "'func', 'fullfunc', 'param' or 'param:NAME', or several joined by commas")
    return text


def parse_name_format(text):
    t = str(text).lower().strip()
    if t not in ("short", "normal", "long", "trial"):
        raise argparse.ArgumentTypeError(f"Could not parse value: {text!r}.")
    return t


def parse_cprofile_loops(text):
    if text == "auto":
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"Could not parse value: {text!r}. Expected an integer or `auto`.") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"Invalid value: {text!r}. Must be greater than 0.")
    return value


def parse_spread(text):
    t = str(text).strip()
    try:
        v = float(t[:-1]) / 100.0 if t.endswith("%") else float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid spread {text!r} (e.g. 3% or 0.03)") from None
    if not 0 <= v < 1:
        raise argparse.ArgumentTypeError(f"spread must be in [0%, 100%), got {text!r}")
    return v


def _positive(kind):
    def parse(text):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid value {text!r}") from None
        if not v > 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text!r}")
        return v
    return parse


# ---- registration ------------------------------------------------------------------------

def _nonnegative_int(text):
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def add_options(parser):
    """Register every option in pytest's ``benchmark`` group (its --help heading)."""
    add = parser.getgroup("benchmark").addoption
    # pytest-benchmark's options, in its order (its --help test reads them in sequence)
    add("--benchmark-min-time", metavar="SECONDS", type=parse_seconds, default="0.000005",
        help="Minimum time of one round: fast functions are called in loops of as many "
             "iterations as reach it (calibration). Default: %(default)r")
    add("--benchmark-max-time", metavar="SECONDS", type=parse_seconds, default="1.0",
        help="Time budget of one benchmark's rounds; --benchmark-min-rounds wins when the "
             "function is slow. Default: %(default)r")
    add("--benchmark-min-rounds", metavar="NUM", type=parse_rounds, default=5,
        help="At least this many rounds, even past --benchmark-max-time. Default: %(default)r")
    add("--benchmark-precision", metavar="FRACTION", type=parse_fraction, default=None,
        help="Stop adding rounds once the mean's relative margin of error (at "
             "--benchmark-confidence) is under this fraction, e.g. 0.02 for 2%%; between "
             "--benchmark-min-rounds and the --benchmark-max-time budget. Default: off")
    add("--benchmark-confidence", metavar="FRACTION", type=parse_fraction, default=0.99,
        help="Confidence level of --benchmark-precision. Default: %(default)r")
    add("--benchmark-timer", metavar="FUNC", type=parse_timer, default=TIMER_DEFAULT,
        help="Clock of the timed rounds, as module.name. time.perf_counter is the native "
             "loop's clock (read in C); any other runs the rounds in Python with that "
             "timer. Default: %(default)r")
    add("--benchmark-calibration-precision", metavar="NUM", type=int, default=10,
        help="A round lasts at least this many times the timer's precision (for the "
             "default timer, the native loop's own cost of a round). Default: %(default)r")
    add("--benchmark-warmup", metavar="KIND", nargs="?", const=True, default="auto",
        type=parse_warmup,
        help="Warm-up before the timed rounds: 'auto' (1-10 rounds, at most a tenth of "
             "--benchmark-max-time), 'on' (up to --benchmark-warmup-iterations calls) or "
             "'off'. Default: 'auto'")
    add("--benchmark-warmup-iterations", metavar="NUM", type=int, default=100000,
        help="Most calls in the warm-up with --benchmark-warmup=on. Default: %(default)r")
    add("--benchmark-disable-gc", action="store_true", default=False,
        help="Switch the cyclic garbage collector off during the timed rounds.")
    add("--benchmark-skip", action="store_true", default=False,
        help="Skip the tests that use the benchmark fixture.")
    add("--benchmark-disable", action="store_true", default=False,
        help="Call each benchmarked function once, untimed, and report nothing (the tests "
             "still run).")
    add("--benchmark-enable", action="store_true", default=False,
        help="Override --benchmark-disable (set in an ini file, say).")
    add("--benchmark-only", action="store_true", default=False,
        help="Run only the tests that use the benchmark fixture (wins over --benchmark-skip).")
    add("--benchmark-save", metavar="NAME", type=parse_save,
        help="Save this run as STORAGE/<machine>/NNNN_NAME.json, raw timings included.")
    add("--benchmark-autosave", action="store_true", default=False,
        help="Save this run as STORAGE/<machine>/NNNN_<commit>_<time>.json.")
    add("--benchmark-save-data", action="store_true", default=False,
        help="Accepted: saved runs always hold the raw timings (the gate needs them).")
    add("--benchmark-json", metavar="PATH",
        help="Write the JSON report (pytest-benchmark's schema and our fields, raw timings "
             "included) to PATH.")
    add("--benchmark-compare", metavar="NUM|_ID", nargs="?", default=None, const=True,
        help="Compare with saved run NUM (a file-name prefix such as 0001, or a path), or "
             "the latest saved run.")
    add("--benchmark-compare-fail", metavar="EXPR", nargs="+", action="extend",
        type=parse_fail_rule,
        help="Fail the session when a benchmark regressed by EXPR against the compared run: "
             "FIELD:N%% or FIELD:SECONDS, FIELD one of " + ", ".join(ALLOWED_FIELDS)
             + ". median and mean are judged with a confidence interval that holds the "
               "run-to-run noise; the others with a raw threshold. Can be given several times.")
    add("--benchmark-cprofile", metavar="COLUMN", default=None, choices=CPROFILE_COLUMNS,
        help="Profile each benchmarked function once more under cProfile and list its top "
             "functions by COLUMN: " + ", ".join(repr(c) for c in CPROFILE_COLUMNS) + ".")
    add("--benchmark-cprofile-loops", metavar="LOOPS", default=1, type=parse_cprofile_loops,
        help="Calls of the function under cProfile: a number or 'auto' (the calibrated "
             "iterations). Default: 1")
    add("--benchmark-cprofile-top", metavar="COUNT", default=25, type=int,
        help="Functions listed per benchmark. Default: 25")
    add("--benchmark-cprofile-dump", metavar="FILENAME-PREFIX", nargs="?", action="append",
        default=[], const=f"benchmark_{_stamp()}",
        help="Save each profile as FILENAME-PREFIX-<test>.prof (pstats).")
    add("--benchmark-storage", metavar="URI", default="file://./.benchmarks",
        # (worded so that at pytest's 80 columns the default ends a line of its own, as
        # pytest-benchmark's --help test reads it)
        help="Where saved runs live: file://PATH, or PATH alone (elasticsearch+http storage "
             "is not supported here). Default: %(default)r.")
    add("--benchmark-netrc", metavar="FILE", nargs="?", default="", const="~/.netrc",
        help="Accepted: credentials for elasticsearch storage, which is not supported.")
    add("--benchmark-verbose", action="store_true", default=False,
        help="Log the calibration and every verdict's reason on stderr.")
    add("--benchmark-quiet", action="store_true", default=False,
        help="No result table (--benchmark-verbose wins).")
    add("--benchmark-sort", metavar="COL", type=parse_sort, default="min",
        help="Row order: " + ", ".join(repr(k) for k in SORT_KEYS) + ". Default: %(default)r")
    add("--benchmark-group-by", metavar="LABEL", type=parse_group_by, default="group",
        help="Tables by 'group', 'name', 'fullname', 'func', 'fullfunc', 'param' or "
             "'param:NAME' (comma-separated to combine). Default: %(default)r")
    add("--benchmark-columns", metavar="LABELS", type=parse_columns, default=None,
        help="Comma-separated columns of the table, from " + ", ".join(ALLOWED_COLUMNS)
             + ". Default: '" + ", ".join(DEFAULT_COLUMNS) + "'")
    add("--benchmark-name", metavar="FORMAT", type=parse_name_format, default="normal",
        help="Row names: 'short', 'normal', 'long' or 'trial'. Default: %(default)r")
    add("--benchmark-time-unit", metavar="UNIT", default=None,
        choices=["ns", "us", "ms", "s", "auto"],
        help="Unit of the table: 'ns', 'us', 'ms' or 's'. Default: 'auto'.")
    stamp = f"benchmark_{_stamp()}"
    add("--benchmark-histogram", metavar="FILENAME-PREFIX", nargs="?", action="append",
        default=[], const=stamp,
        help="Box plots of each group in FILENAME-PREFIX[-group].svg (needs pygal). "
             f"Default: {stamp!r}")
    add("--benchmark-csv", metavar="FILENAME", nargs="?", action="append", default=[],
        const=stamp, help=f"Write the table as FILENAME.csv. Default: {stamp!r}")
    # ours
    add("--benchmark-max-rounds", metavar="NUM", type=_positive(int), default=DEFAULT_MAX_ROUNDS,
        help="(spatialhub) At most this many rounds per benchmark (keeps saved runs and "
             "comparisons small). Default: %(default)r")
    add("--benchmark-device", metavar="DEV", default="CPU",
        help="(spatialhub) Device of every benchmark: 'cuda' / 'cuda:N' syncs the GPU "
             "around every timed call. Default: 'CPU'")
    add("--benchmark-run-spread", metavar="PCT", type=parse_spread, default=None,
        help="(spatialhub) Run-to-run spread of identical code for the gate, e.g. 3%%. "
             "Default: measured by the spread probes (--benchmark-processes), else from "
             f"the last {HISTORY_RUNS} saved runs when there are {MIN_SPREAD_RUNS} or more, "
             "else this machine's calibration (spatialhub-bench --calibrate); with none, "
             f"the benchmark is not judged (the {100 * ASSUMED_RUN_SPREAD:g}%% a single run "
             "is assumed to move explains, never decides)")
    add("--benchmark-reference", choices=("auto", "off"), default="auto",
        help="(spatialhub) auto: time a fixed reference workload beside each CPU "
             "benchmark and take the machine's own speed change out of comparisons; "
             "off: do not. Default: 'auto'")
    add("--benchmark-markdown", metavar="PATH",
        help="(spatialhub) Write a Markdown summary (for a CI job summary) to PATH.")
    add("--benchmark-report", metavar="PATH",
        help="(spatialhub) Write the readiness report of this run to PATH: one offline HTML "
             "page (*.html; figures drawn inline, nothing loaded) or Markdown (*.md): each "
             "benchmark's percentiles and distribution, the verdicts against the compared "
             "run, flags in plain words, the environment.")
    add("--benchmark-instructions", action="store_true", default=False,
        help="(spatialhub) Count instructions per call instead of timing: runs this pytest "
             "command again under valgrind's callgrind (~50x slower; needs valgrind), each "
             "benchmark 10 warm-up calls then --benchmark-min-rounds counted ones, the "
             "collector held off. Gate on it with --benchmark-compare-fail=instructions:1%%: "
             "the machine's load does not move a count.")
    add("--benchmark-instructions-runs", metavar="NUM", type=_positive(int), default=None,
        help="(spatialhub) With --benchmark-instructions: count in NUM separate callgrind "
             "processes and report each benchmark's lowest count when they read within "
             f"{100 * LAYOUT_SPREAD:g}%% (a hash collision that depends on where objects "
             f"landed can only add instructions), else this run's own. Default: {RUNS}")
    add("--benchmark-processes", metavar="NUM", type=_nonnegative_int, default=None,
        help="(spatialhub) A run that saves or compares runs its benchmarks again in NUM "
             "fresh pytest processes, briefly, so that each benchmark's spread between runs "
             "is measured and saved with it: a verdict then rests on this machine's spread, "
             f"not an assumed one; 0 skips it. Default: {SPREAD_PROCESSES}")


def first_or(values, default=None):
    """The last of an ``append`` option's values (the option given once, usually)."""
    return values[-1] if values else default


# ---- what the options mean together -------------------------------------------------------

XDIST_ACTIVE_ENV = "PYTEST_XDIST_WORKER"
#: pytest's options (dest names) that show something and run no test
SHOW_ONLY = ("collectonly", "help", "version", "markers", "showfixtures",
             "show_fixtures_per_test")


def judge_options(config):
    """What the options mean together, and the combinations refused (``pytest.UsageError``).

    Decided once, the way pytest-benchmark 5.2.3 decides it (its session.py):
    ``--benchmark-only`` wins over ``--benchmark-skip``; benchmarks are disabled by
    ``--benchmark-disable`` unless ``--benchmark-enable`` is given too (an ini file's
    ``addopts = --benchmark-disable`` and ``--benchmark-enable`` on the command line:
    enabled), and under xdist; disabled with ``--benchmark-only`` is a usage error.  The
    first process of ``--benchmark-instructions`` calls it before it starts callgrind
    (``pytest_cmdline_main``), and the session calls it again: a refused combination is
    said before anything runs, and both agree on whether anything is counted.

    Returns a namespace: ``skip``, ``only``, ``disabled``, ``xdist`` (benchmarks
    disabled because xdist is active), ``instructions``, ``counts`` (this command counts
    something under callgrind: it runs tests, and benchmarks are neither disabled nor
    skipped) and ``fail_rules``."""
    import pytest

    opt = config.getoption
    skip, only = bool(opt("benchmark_skip")), bool(opt("benchmark_only"))
    if skip and only:
        skip = False
    disabled = bool(opt("benchmark_disable")) and not opt("benchmark_enable")
    xdist_active = (opt("dist", "no") not in ("no", None)
                    or bool(os.environ.get(XDIST_ACTIVE_ENV)))
    xdist = bool(xdist_active and not skip and not disabled)
    if xdist:
        disabled = True
    if disabled and only:
        raise pytest.UsageError(
            "Can't have both --benchmark-only and --benchmark-disable options. Note that "
            "--benchmark-disable is automatically activated if xdist is on.")
    instructions = bool(opt("benchmark_instructions"))
    if instructions and opt("benchmark_timer") != TIMER_DEFAULT:
        raise pytest.UsageError(
            "--benchmark-instructions counts the calls in the native loop: "
            "--benchmark-timer does not apply")
    if not instructions and opt("benchmark_instructions_runs") is not None:
        raise pytest.UsageError(
            "--benchmark-instructions-runs needs --benchmark-instructions (it is how many "
            "callgrind processes count each benchmark)")
    report = opt("benchmark_report", None)
    if report and instructions:
        raise pytest.UsageError(
            "--benchmark-report does not apply with --benchmark-instructions: the times are "
            "valgrind's (~50x native), not what a deployment would see")
    if report and os.path.splitext(report)[1].lower() not in (".html", ".htm", ".md",
                                                              ".markdown"):
        raise pytest.UsageError(f"--benchmark-report: name the file *.html (a page) or *.md "
                                f"(Markdown), not {os.path.basename(report)!r}")
    if first_or(opt("benchmark_histogram")):
        try:
            import pygal  # noqa: F401
        except ImportError:
            raise pytest.UsageError(
                "--benchmark-histogram draws with pygal, which is not installed: "
                "pip install pygal (or drop the option)") from None
    if str(opt("benchmark_storage")).startswith("elasticsearch+"):
        raise pytest.UsageError(
            "--benchmark-storage: elasticsearch storage is not supported by spatialhub's "
            "benchmark plugin; use file://PATH")
    fail_rules = list(opt("benchmark_compare_fail") or [])
    if fail_rules and opt("benchmark_compare") is None:
        raise pytest.UsageError("--benchmark-compare-fail requires valid --benchmark-compare.")
    counted = [str(r) for r in fail_rules if r.method == "count"]
    if counted and not instructions:
        raise pytest.UsageError(
            f"--benchmark-compare-fail={counted[0]} judges instruction counts: add "
            "--benchmark-instructions (this run must count them, under callgrind)")
    timed = [str(r) for r in fail_rules if r.method != "count"]
    if timed and instructions:
        # the times of a counted run are valgrind's (~50x native): against a saved native
        # run identical code reads thousands of percent slower
        raise pytest.UsageError(
            f"--benchmark-compare-fail={timed[0]} judges times, and under "
            "--benchmark-instructions the times are valgrind's (~50x native), not "
            "comparable with a saved run's: gate on the count per call with "
            "--benchmark-compare-fail=instructions:N% (e.g. instructions:1%), or judge "
            "times in a run without --benchmark-instructions")
    # pytest's commands that show something and run no test (--co, --help, --markers,
    # --fixtures, ...) count nothing either
    shows = any(opt(name, False) for name in SHOW_ONLY)
    counts = instructions and not (shows or disabled or skip)
    return SimpleNamespace(skip=skip, only=only, disabled=disabled, xdist=xdist,
                           instructions=instructions, counts=counts, fail_rules=fail_rules)
