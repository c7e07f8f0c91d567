"""Our implementations of pytest-benchmark's hooks (hookspec.py): registered with the
fixture while this plugin owns ``benchmark``, and ``trylast`` so a conftest's own
implementation runs first (and wins for the ``firstresult`` ones)."""
import pytest

from . import report, table


def _session(config):
    return getattr(config, "_spatialhub_benchmark", None)


@pytest.hookimpl(trylast=True)
def pytest_benchmark_generate_machine_info(config):
    bs = _session(config)
    return report.machine_info(bs.environment() if bs is not None else None)


@pytest.hookimpl(trylast=True)
def pytest_benchmark_generate_commit_info(config):
    return report.commit_info()


@pytest.hookimpl(trylast=True)
def pytest_benchmark_generate_json(config, benchmarks, include_data, machine_info, commit_info):
    bs = _session(config)
    verdicts = bs.verdicts if bs is not None else {}
    return report.session_json([b.fixture for b in benchmarks], machine_info, commit_info,
                               include_data, verdicts,
                               checks=bs.checks if bs is not None else None)


@pytest.hookimpl(trylast=True)
def pytest_benchmark_group_stats(config, benchmarks, group_by):
    return table.group_rows(benchmarks, group_by)


@pytest.hookimpl(trylast=True)
def pytest_benchmark_scale_unit(config, unit, benchmarks, best, worst, sort):
    return table.scale_unit(config, unit, benchmarks, best, worst, sort)


# what identifies a machine and an interpreter; the load, the clock and the like change
# from run to run and would make the warning say nothing
_STABLE_KEYS = ("node", "machine", "processor", "system", "release", "python_implementation",
                "python_version")


@pytest.hookimpl(trylast=True)
def pytest_benchmark_compare_machine_info(config, benchmarksession, machine_info, compared_benchmark):
    saved = compared_benchmark.get("machine_info") or {}
    diffs = [f"{k} {machine_info.get(k)!r} now, {saved.get(k)!r} saved" for k in _STABLE_KEYS
             if k in saved and k in machine_info and saved.get(k) != machine_info.get(k)]
    cpu_now = (machine_info.get("cpu") or {}).get("brand_raw")
    cpu_saved = (saved.get("cpu") or {}).get("brand_raw")
    if cpu_now and cpu_saved and cpu_now != cpu_saved:
        diffs.append(f"cpu {cpu_now!r} now, {cpu_saved!r} saved")
    if diffs:
        benchmarksession.logger.warning(
            "Benchmark machine_info is different: " + "; ".join(diffs)
            + f" (location: {benchmarksession.storage.root}).")
