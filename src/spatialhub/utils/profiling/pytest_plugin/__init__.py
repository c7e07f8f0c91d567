"""pytest plugin: pytest-benchmark's ``benchmark`` fixture, options, hooks, output and
saved runs on spatialhub's native timing loop, with a regression gate that judges with
a confidence interval.  pytest-benchmark 5.3.1's own test suite passes on it
(docs/guide.md, ".ci/pytest_benchmark_contract.sh").

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

import os
import shutil

import pytest

from .logger import PytestBenchmarkWarning

__all__ = ["other_plugin_owns_benchmark", "PLUGIN_NAME", "PytestBenchmarkWarning"]

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


def _owns(pluginmanager):
    """Decided once per plugin manager: does this plugin provide ``benchmark``?"""
    owns = getattr(pluginmanager, _ACTIVE_ATTR, None)
    if owns is None:
        owns = not other_plugin_owns_benchmark(pluginmanager)
        setattr(pluginmanager, _ACTIVE_ATTR, owns)
    return owns


def pytest_addhooks(pluginmanager):
    # pytest-benchmark's hooks, so a conftest written for it validates and runs; when
    # pytest-benchmark itself is active it registers them (twice would be an error)
    if _owns(pluginmanager):
        from . import hookspec

        pluginmanager.add_hookspecs(hookspec)


def pytest_addoption(parser, pluginmanager):
    if not _owns(pluginmanager):
        return
    # the fixture and our hook implementations live in their own modules, registered
    # only now: a passive plugin must not define a second `benchmark` fixture beside
    # pytest-benchmark's
    from . import _fixture_plugin, hooks
    from .options import add_options

    for module, name in ((_fixture_plugin, "_fixture"), (hooks, "_hooks")):
        if not pluginmanager.is_registered(module):
            pluginmanager.register(module, PLUGIN_NAME + name)
    add_options(parser)


def _active(config):
    return getattr(config.pluginmanager, _ACTIVE_ATTR, False)


def pytest_cmdline_main(config):
    """--benchmark-instructions: the whole pytest command again under valgrind's callgrind
    (instructions.rerun), whose exit status is this one's; nothing runs here."""
    if not _active(config) or not config.getoption("benchmark_instructions", False):
        return None
    if config.getoption("help", False) or config.getoption("version", False):
        return None
    from ..instructions import RUNS, ValgrindNotFound, active, rerun
    from .options import judge_options

    # the options as the session will read them (--benchmark-enable overrides an ini
    # file's --benchmark-disable, as in pytest-benchmark), and a refused combination said
    # now, before any callgrind process starts
    if not judge_options(config).counts:
        return None        # nothing will be counted: no run under valgrind

    if active():
        return None        # the re-run itself: count
    args = ["-m", "pytest", *config.invocation_params.args]
    runs = config.getoption("benchmark_instructions_runs", None) or RUNS
    try:
        return rerun(args, "pytest --benchmark-instructions",
                     cwd=str(config.invocation_params.dir), runs=runs,
                     probe_argv=_probe_argv(config, args))
    except ValgrindNotFound as exc:
        raise pytest.UsageError(f"--benchmark-instructions: {exc}") from None


def _probe_argv(config, args):
    """A probe's command (instructions.RUNS): the same, with its own copy of pytest's
    cache.  The probes run before the reported run, and pytest writes its cache as it
    ends (the last failures, stepwise's place): with the user's own cache the reported
    run's --lf / --ff / --nf / --sw would select after the probes' results, not the user's
    last run."""
    if not config.pluginmanager.has_plugin("cacheprovider"):
        return None                                   # -p no:cacheprovider: none to keep
    raw = os.path.expandvars(os.path.expanduser(str(config.getini("cache_dir"))))
    cache = raw if os.path.isabs(raw) else os.path.join(str(config.rootpath), raw)

    def probe(folder, i):
        mine = os.path.join(folder, f"probe.{i}.cache")
        try:
            if os.path.isdir(cache):
                shutil.copytree(cache, mine, symlinks=True)
        except (shutil.Error, OSError):   # a pipe, an unreadable file, one that went away
            shutil.rmtree(mine, ignore_errors=True)
            os.makedirs(mine, exist_ok=True)   # an empty cache: never the user's own
        # before a "--" (after it, pytest reads every word as a path)
        end = args.index("--") if "--" in args else len(args)
        return [*args[:end], "-o", f"cache_dir={mine}", *args[end:]]

    return probe


def _session(config):
    return getattr(config, "_spatialhub_benchmark", None)


def pytest_report_header(config):
    if not _active(config):
        return ["spatialhub benchmark plugin: inactive, pytest-benchmark owns the benchmark "
                "fixture (run with -p no:benchmark to use spatialhub's)"]
    bs = _session(config)
    if bs is None:
        return None
    from .session import report_header

    return report_header(config, bs)


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    if not _active(config):
        return
    from .session import BenchmarkSession

    config.addinivalue_line("markers", "benchmark: benchmark settings for this test "
                                       "(max_time, min_rounds, group, timer, device, ...)")
    bs = config._spatialhub_benchmark = BenchmarkSession(config)
    bs.start()


def pytest_collection_modifyitems(config, items):
    bs = _session(config)
    if bs is None:
        return
    if bs.spread_probe:   # a probe of the spread between runs: the benchmarks it was given
        from .spread import probe_nodes

        keep = probe_nodes()
        if keep is not None:
            dropped = [i for i in items if i.nodeid not in keep and
                       getattr(i, "nodeid", None) not in keep]
            items[:] = [i for i in items if i not in dropped]
            config.hook.pytest_deselected(items=dropped)
    skip_bench = pytest.mark.skip(reason="Skipping benchmark (--benchmark-skip active).")
    skip_other = pytest.mark.skip(reason="Skipping non-benchmark (--benchmark-only active).")
    for item in items:
        uses = "benchmark" in getattr(item, "fixturenames", ())
        if uses:
            bs.note_xdist_benchmark()
            if bs.skip:
                item.add_marker(skip_bench)
        elif bs.only:
            item.add_marker(skip_other)


def pytest_runtest_setup(item):
    if _session(item.config) is None:
        return
    from .options import MARKER_OPTIONS

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


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """pytest-xdist's controller: a worker ended (what it collected: ``workeroutput``)."""
    bs = _session(node.config)
    if bs is not None:
        bs.node_down(node)


def pytest_unconfigure(config):
    bs = _session(config)
    if bs is not None:
        bs.unconfigure()
