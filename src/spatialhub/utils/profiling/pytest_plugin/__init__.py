"""pytest plugin: pytest-benchmark's ``benchmark`` fixture and options on spatialhub's
native timing loop, with a regression gate that judges with a confidence interval.

Registered through the ``pytest11`` entry point ``spatialhub_benchmark``.

Who owns ``benchmark`` when pytest-benchmark is installed too
-----------------------------------------------------------------
pytest-benchmark does, and this plugin stays passive (it registers no option and no
fixture, and says so in pytest's header).  To use ours in such an environment, switch
pytest-benchmark off explicitly: ``pytest -p no:benchmark`` (or
``addopts = -p no:benchmark`` in the ini file).  Where pytest-benchmark is not
installed, or is blocked that way, this plugin provides ``benchmark`` and the
``--benchmark-*`` options.  ``-p no:spatialhub_benchmark`` switches ours off.
"""
from __future__ import annotations

import argparse
import os
import re

import pytest

__all__ = ["other_plugin_owns_benchmark", "PLUGIN_NAME"]

PLUGIN_NAME = "spatialhub_benchmark"
_PB_NAMES = ("benchmark", "pytest_benchmark.plugin", "pytest_benchmark")
_ACTIVE_ATTR = "_spatialhub_benchmark_active"


def other_plugin_owns_benchmark(pluginmanager):
    """True when pytest-benchmark's plugin is (or is about to be) loaded in this run."""
    if any(pluginmanager.is_blocked(n) for n in _PB_NAMES):
        return False
    if any(pluginmanager.has_plugin(n) for n in _PB_NAMES):
        return True
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        return False
    try:
        from importlib.metadata import entry_points

        eps = entry_points()
        group = (eps.select(group="pytest11") if hasattr(eps, "select")
                 else eps.get("pytest11", ()))
        return any(ep.value.split(":")[0].startswith("pytest_benchmark") for ep in group)
    except Exception:
        return False


# ---- option parsing ----------------------------------------------------------------------

_FAIL_RE = re.compile(r"^(?P<field>min|max|mean|median|stddev|iqr):"
                      r"(?:(?P<pct>[0-9]+(?:\.[0-9]+)?)%|(?P<abs>[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?))$")


def _parse_compare_fail(text):
    m = _FAIL_RE.match(text)
    if not m:
        raise argparse.ArgumentTypeError(
            f"Could not parse value: {text!r} (expected e.g. median:10% or median:0.001)")
    if m.group("field") != "median":
        raise argparse.ArgumentTypeError(
            f"{text!r}: spatialhub's gate judges the median with a confidence interval; "
            f"a raw threshold on {m.group('field')} is not supported (use median:N%)")
    if m.group("pct") is not None:
        return ("pct", float(m.group("pct")) / 100.0)
    return ("abs", float(m.group("abs")))


def _parse_spread(text):
    t = str(text).strip()
    try:
        v = float(t[:-1]) / 100.0 if t.endswith("%") else float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid spread {text!r} (e.g. 3% or 0.03)") from None
    if not 0 <= v < 1:
        raise argparse.ArgumentTypeError(f"spread must be in [0%, 100%), got {text!r}")
    return v


def _parse_save(text):
    if not text:
        raise argparse.ArgumentTypeError("Can't be empty.")
    bad = "".join(c for c in '\\/:*?<>|' if c in text)
    if bad:
        raise argparse.ArgumentTypeError(
            f"Must not contain any of these characters: /:*?<>|\\ (it has {bad!r})")
    return text


def _parse_warmup(text):
    t = str(text).lower()
    if t in ("auto", ""):
        return "auto"
    if t in ("on", "true", "yes", "1"):
        return True
    if t in ("off", "false", "no", "0"):
        return False
    raise argparse.ArgumentTypeError(f"Invalid warmup kind {text!r}: auto, on or off")


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


def pytest_addoption(parser, pluginmanager):
    if other_plugin_owns_benchmark(pluginmanager):
        setattr(pluginmanager, _ACTIVE_ATTR, False)
        return
    setattr(pluginmanager, _ACTIVE_ATTR, True)
    # the fixture lives in its own module, registered only now: a passive plugin must
    # not define a second `benchmark` fixture beside pytest-benchmark's.
    from . import _fixture_plugin

    if not pluginmanager.is_registered(_fixture_plugin):
        pluginmanager.register(_fixture_plugin, PLUGIN_NAME + "_fixture")
    g = parser.getgroup("benchmark", "benchmark (spatialhub: native timing loop)")
    add = g.addoption
    add("--benchmark-max-time", metavar="SECONDS", type=_positive(float), default=1.0,
        help="time budget of one benchmark's timed rounds (min-rounds wins). Default: 1.0")
    add("--benchmark-min-rounds", metavar="NUM", type=_positive(int), default=5,
        help="minimum number of timed rounds. Default: 5")
    add("--benchmark-max-rounds", metavar="NUM", type=_positive(int), default=10000,
        help="(spatialhub) maximum number of timed rounds per benchmark. Default: 10000")
    add("--benchmark-warmup", metavar="KIND", nargs="?", const=True, default="auto",
        type=_parse_warmup,
        help="warm-up calls before timing: auto (1-10 calls, at most a tenth of max-time), "
             "on (up to --benchmark-warmup-iterations) or off. Default: auto")
    add("--benchmark-warmup-iterations", metavar="NUM", type=int, default=100000,
        help="maximum warm-up calls with --benchmark-warmup=on. Default: 100000")
    add("--benchmark-disable-gc", action="store_true", default=False,
        help="switch the cyclic GC off during the timed rounds")
    add("--benchmark-device", metavar="DEV", default="CPU",
        help="(spatialhub) device label: 'cuda'/'cuda:N' syncs the GPU around every call")
    add("--benchmark-skip", action="store_true", default=False,
        help="skip tests that use the benchmark fixture")
    add("--benchmark-disable", action="store_true", default=False,
        help="run benchmarked functions once, untimed")
    add("--benchmark-enable", action="store_true", default=False,
        help="override --benchmark-disable")
    add("--benchmark-only", action="store_true", default=False,
        help="run only tests that use the benchmark fixture (wins over --benchmark-skip)")
    add("--benchmark-save", metavar="NAME", type=_parse_save,
        help="save this run as STORAGE/<machine>/NNNN_NAME.json")
    add("--benchmark-autosave", action="store_true", default=False,
        help="save this run as STORAGE/<machine>/NNNN_<commit>_<time>.json")
    add("--benchmark-save-data", action="store_true", default=False,
        help="accepted for compatibility: saved runs always hold the raw timings "
             "(the gate needs them)")
    add("--benchmark-json", metavar="PATH",
        help="write pytest-benchmark's JSON report (with our extra fields) to PATH")
    add("--benchmark-compare", metavar="NUM", nargs="?", default=None, const=True,
        help="compare with saved run NUM (a file-name prefix such as 0001) or the latest")
    add("--benchmark-compare-fail", metavar="EXPR", action="append", default=None,
        type=_parse_compare_fail,
        help="fail the session when a benchmark is slower than the compared run beyond "
             "EXPR (median:10%% or median:SECONDS), judged with the 95%% CI of the ratio "
             "of medians: noise alone does not fail")
    add("--benchmark-run-spread", metavar="PCT", type=_parse_spread, default=None,
        help="(spatialhub) run-to-run spread of identical code for the gate, e.g. 3%%; "
             "default: measured from the last 10 saved runs when there are 3 or more, else 5%%")
    add("--benchmark-reference", choices=("auto", "off"), default="auto",
        help="(spatialhub) auto: time a fixed reference workload next to each CPU benchmark "
             "and take the machine's own speed change out of comparisons; off: do not")
    add("--benchmark-storage", metavar="URI", default="file://./.benchmarks",
        help="where saved runs live. Default: file://./.benchmarks")
    add("--benchmark-markdown", metavar="PATH",
        help="(spatialhub) write a Markdown summary (for a CI job summary) to PATH")
    add("--benchmark-verbose", action="store_true", default=False, help="more output")
    add("--benchmark-quiet", action="store_true", default=False, help="no summary table")
    for ignored, nargs in (("min-time", None), ("timer", None), ("calibration-precision", None),
                           ("sort", None), ("group-by", None), ("columns", None),
                           ("name", None), ("time-unit", None), ("histogram", "?"),
                           ("csv", "?"), ("cprofile", None), ("cprofile-loops", None),
                           ("cprofile-top", None), ("cprofile-dump", "?"), ("netrc", "?")):
        add(f"--benchmark-{ignored}", metavar="VALUE", nargs=nargs,
            const="" if nargs else None, default=None,
            help="accepted for pytest-benchmark compatibility; ignored (listed in the summary)")


def _active(config):
    return getattr(config.pluginmanager, _ACTIVE_ATTR, False)


def pytest_report_header(config):
    if not _active(config):
        return ["spatialhub benchmark plugin: inactive, pytest-benchmark owns the benchmark "
                "fixture (run with -p no:benchmark to use spatialhub's)"]
    return None


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    if not _active(config):
        return
    from .session import BenchmarkSession

    config.addinivalue_line("markers", "benchmark: benchmark settings for this test "
                                       "(max_time, min_rounds, group, device, sync_fn, ...)")
    config._spatialhub_benchmark = BenchmarkSession(config)


def _session(config):
    return getattr(config, "_spatialhub_benchmark", None)


def pytest_collection_modifyitems(config, items):
    bs = _session(config)
    if bs is None:
        return
    skip_bench = pytest.mark.skip(reason="Skipping benchmark (--benchmark-skip active).")
    skip_other = pytest.mark.skip(reason="Skipping non-benchmark (--benchmark-only active).")
    for item in items:
        uses = "benchmark" in getattr(item, "fixturenames", ())
        if uses and bs.skip:
            item.add_marker(skip_bench)
        elif not uses and bs.only:
            item.add_marker(skip_other)


def pytest_runtest_setup(item):
    if _session(item.config) is None:
        return
    from .fixture import MARKER_OPTIONS

    marker = item.get_closest_marker("benchmark")
    if marker:
        if marker.args:
            raise ValueError("benchmark mark can't have positional arguments.")
        for name in marker.kwargs:
            if name not in MARKER_OPTIONS:
                raise ValueError(f"benchmark mark can't have {name!r} keyword argument.")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    fx = getattr(item, "funcargs", {}).get("benchmark") if _session(item.config) else None
    if fx is not None and hasattr(fx, "skipped"):
        fx.skipped = outcome.get_result().outcome == "skipped"


def pytest_sessionfinish(session, exitstatus):
    bs = _session(session.config)
    if bs is not None:
        bs.finish(session)


def pytest_terminal_summary(terminalreporter):
    bs = _session(terminalreporter.config)
    if bs is not None:
        bs.display(terminalreporter)
