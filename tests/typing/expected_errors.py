"""Mistakes a type checker must catch in a user's code: each line marked ``# E: code``
must get exactly that mypy error (tests/test_help_and_types.py), which shows the
strict check of user_script.py can fail, i.e. the public API is not ``Any``."""
from __future__ import annotations

from spatialhub.utils.profiling import (HierarchicalProfiler, benchmark_callable,
                                        benchmark_load, check_outputs, compare_callables,
                                        find_peak_qps, sweep, timeit, write_report)


@timeit()
def double(x: int) -> int:
    return 2 * x


prof = HierarchicalProfiler("demo")


@prof.timeit()
def name_of(x: int) -> str:
    return str(x)


def mistakes() -> None:
    double("21")  # E: arg-type
    label: int = name_of(3)  # E: assignment
    stats = benchmark_callable(double, 1)
    stats.median_ms = "fast"  # E: assignment
    compare_callables(double)  # E: call-arg
    rows: int = sweep(lambda n: double, [1, 2])  # E: assignment
    with prof(3):  # E: arg-type
        pass
    passed: str = check_outputs(double, double, [1]).passed  # E: assignment
    write_report([stats], "r.html", format="pdf")  # E: arg-type
    print(label, rows, passed)
    benchmark_load(double, qps="fast")  # E: arg-type
    peak: int = find_peak_qps(double, latency_bound_ms=5.0)  # E: assignment
    print(peak)
