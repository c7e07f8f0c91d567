"""pytest-benchmark's hooks, so a ``conftest.py`` written for it runs on this plugin.

Registered (``pytest_addhooks``) only while this plugin owns the ``benchmark`` fixture;
when pytest-benchmark is active it registers the same names itself.  The plugin's own
implementations (``hooks.py``) run last, so a conftest's run first and, for the
``firstresult`` hooks, win.  Where they are called: docs/guide.md, "Hooks".
"""
import pytest


@pytest.hookspec(firstresult=True)
def pytest_benchmark_scale_unit(config, unit, benchmarks, best, worst, sort):
    """Return ``(prefix, scale)`` for the table: ``unit`` is ``'seconds'`` (prefix one of
    '', 'm', 'u', 'n') or ``'operations'`` (prefix '', 'K', 'M'); ``best`` / ``worst``
    map each statistic to its best / worst value in the group; ``sort`` is the sort key."""


@pytest.hookspec(firstresult=True)
def pytest_benchmark_generate_machine_info(config):
    """Return the ``machine_info`` dict saved with a run (replaces ours)."""


def pytest_benchmark_update_machine_info(config, machine_info):
    """Add to or change ``machine_info`` in place."""


@pytest.hookspec(firstresult=True)
def pytest_benchmark_generate_commit_info(config):
    """Return the ``commit_info`` dict saved with a run (replaces ours)."""


def pytest_benchmark_update_commit_info(config, commit_info):
    """Add to or change ``commit_info`` in place."""


@pytest.hookspec(firstresult=True)
def pytest_benchmark_group_stats(config, benchmarks, group_by):
    """Return ``[(group name or None, [benchmark dict, ...]), ...]`` for the table.
    ``benchmarks`` are flat dicts (``name``, ``fullname``, ``group``, ``param``,
    ``params``, ``source``, the statistics in seconds); ``group_by`` is the
    ``--benchmark-group-by`` value."""


@pytest.hookspec(firstresult=True)
def pytest_benchmark_generate_json(config, benchmarks, include_data, machine_info, commit_info):
    """Return the whole JSON document of a run (replaces ours: the gate reads our fields
    back, so keep them).  ``benchmarks``: the results (``.as_dict()``, ``.has_error``)."""


def pytest_benchmark_update_json(config, benchmarks, output_json):
    """Add to or change the JSON document in place before it is written."""


def pytest_benchmark_compare_machine_info(config, benchmarksession, machine_info, compared_benchmark):
    """Called for each compared run: check ``compared_benchmark['machine_info']`` against
    ``machine_info`` (ours warns when the machine or the Python differs)."""
