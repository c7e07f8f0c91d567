"""sweep() and SweepResult: any callable family, rendered with its parameter."""
import numpy as np
import pytest

from spatialhub.utils.profiling import BenchmarkStats, format_benchmark_table
from spatialhub.utils.profiling.adapters import SweepResult, sweep

# the workloads here are deliberately tiny; the harness rightly warns about that
pytestmark = pytest.mark.filterwarnings("ignore::spatialhub.utils.profiling.BenchmarkWarning")


def test_factory_forms_and_call_counts():
    calls = []

    def make(n):
        if n == 1:
            return lambda: calls.append((n, None))
        if n == 2:
            return (lambda a: calls.append((n, a)), (20,))
        return (lambda a, k=None: calls.append((n, a, k)), (30,), {"k": "kw"})

    res = sweep(make, [1, 2, 3], param="n", num_warmup=2, num_iters=5)
    assert [s.timed_iters for s in res] == [5, 5, 5]
    assert calls.count((1, None)) == 7
    assert calls.count((2, 20)) == 7
    assert calls.count((3, 30, "kw")) == 7
    assert res.param == "n" and res.values == [1, 2, 3]
    assert [s.params for s in res] == [{"n": 1}, {"n": 2}, {"n": 3}]
    assert [s.batch_size for s in res] == [1, 1, 1]


def test_batch_size_sweep_sets_batch_size_and_samples_per_second():
    res = sweep(lambda b: (np.sum, (np.ones((b, 64)),)), [1, 4, 16], param="batch_size",
                name="sum", num_warmup=1, num_iters=5)
    assert [s.batch_size for s in res] == [1, 4, 16]
    assert [s.name for s in res] == ["sum"] * 3
    assert res.throughput_unit == "samples/s"
    for s in res:
        assert s.throughput == pytest.approx(s.fps * s.batch_size)


def test_table_has_a_column_for_the_parameter_and_one_row_per_value():
    res = sweep(lambda h: (np.zeros, ((h, h),)), [8, 32, 128], param="height",
                num_warmup=0, num_iters=3)
    table = res.to_table(title="zeros")
    lines = table.splitlines()
    assert lines[0] == "### zeros"
    assert "height" in lines[2]
    rows = [line for line in lines[4:] if line.startswith("| ")]
    assert len(rows) == 3
    assert lines[4 + 3:] in ([], ["", lines[-1]]) and lines[-1:] != [""]   # a flags footnote at most
    for value, line in zip([8, 32, 128], rows):
        assert f"| {value} |" in line
    # a sweep shows the extra columns its rows have figures for (the first call here)
    assert table == format_benchmark_table(list(res), "zeros", "FPS", param="height",
                                           columns="auto")
    assert "First Call (ms)" in lines[2]
    assert res._repr_markdown_() == res.to_table()


def test_html_rendering_is_one_table_with_a_row_per_value():
    res = sweep(lambda n: (np.arange, (n,)), [10, 20], param="n", name="ar", num_warmup=0, num_iters=2)
    page = res._repr_html_()
    assert page.count("<table>") == 1
    assert page.count("<tr>") == 1 + 2
    assert "<th>n</th>" in page
    assert "<b>ar</b>" in page and "**" not in page


def test_sweep_result_is_a_list_and_round_trips_through_dicts():
    res = sweep(lambda n: (np.arange, (n,)), [5, 6], param="n", num_warmup=0, num_iters=2)
    assert isinstance(res, list) and len(res) == 2 and res.stats == list(res)
    back = SweepResult([BenchmarkStats.from_dict(d) for d in res.to_dicts()], param="n")
    assert back.values == [5, 6]
    assert "SweepResult(param='n'" in repr(res)


def test_bad_factories_and_values():
    with pytest.raises(ValueError, match="values is empty"):
        sweep(lambda v: print, [])
    with pytest.raises(TypeError, match=r"factory\(1\) must return a callable"):
        sweep(lambda v: 42, [1])
    with pytest.raises(TypeError, match="given both"):
        sweep(lambda v: (np.sum, (), {"num_iters": 3}), [1], num_iters=2)
