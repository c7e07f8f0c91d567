"""Each rule has one implementation, the core's: the plugin's gate, the scope tables,
the runner, the fixture and the CLI give the same numbers and words as the C they call
(issue 31).  Each test feeds the same input through two interfaces."""
import math

import numpy as np
import pytest

from spatialhub.utils.profiling import (HierarchicalProfiler, _native, compare_benchmarks,
                                        format_benchmark_table)
from spatialhub.utils.profiling.pytest_plugin import gate


def stats(level, n, seed, sd=0.05, name="x"):
    s = _native._stats_from_samples(level * np.exp(np.random.default_rng(seed).normal(0, sd, n)))
    s.name = name
    return s


@pytest.mark.parametrize("ratio", [1.0, 1.08, 1.3])
def test_the_gate_and_compare_benchmarks_give_the_same_interval(ratio):
    a, b = stats(1.0, 400, 1), stats(ratio, 400, 2)
    v = gate.judge("x", a, b, 0.10)
    c = compare_benchmarks(a, b, margin=0.10, resamples=gate.RESAMPLES, seed=0)
    assert (v.ratio, v.ci_low, v.ci_high, v.verdict) == (c.ratio, c.ci95_low, c.ci95_high,
                                                         c.verdict)
    # with a spread measured from five saved runs: the gate scales it by t(4) / z, then
    # hands it to the same rule
    v = gate.judge("x", a, b, 0.10, run_spread=0.08, spread_runs=5)
    c = compare_benchmarks(a, b, margin=0.10, resamples=gate.RESAMPLES, seed=0,
                           run_spread=0.08 * _native._t975(4) / _native._t975(math.inf))
    assert (v.ci_low, v.ci_high, v.verdict) == (c.ci95_low, c.ci95_high, c.verdict)


@pytest.mark.parametrize("df", [1, 2, 3.5, 9, 29, 31, 200, math.inf])
def test_one_t_quantile(df):
    assert gate.t975(df) == _native._t975(df)


@pytest.mark.parametrize("level,verdict", [(1.0, "same"), (1.08, "inconclusive"),
                                           (2.5, "slower")])
def test_the_mean_rule_decides_by_the_cores_margin_rule(level, verdict):
    a, b = stats(1.0, 300, 3, sd=0.01), stats(level, 300, 4, sd=0.01)
    margin = 0.90 if level == 1.0 else 0.10
    measured = dict(run_spread=0.02, spread_runs=10)    # from 10 saved runs
    v = gate.judge_mean("x", a, b, margin, **measured)
    assert v.verdict == _native._judge(v.ratio, v.ci_low, v.ci_high, margin) == verdict
    # with no spread measured the rule still states its interval, and decides nothing
    v = gate.judge_mean("x", a, b, margin)
    assert v.verdict == "inconclusive" and not v.spread_known and not v.fails


def test_the_scope_table_and_the_benchmark_table_escape_a_name_alike():
    name = "load.frame_*[1]|<b>"
    prof = HierarchicalProfiler("root")
    with prof(name):
        pass
    cell = _native._md_text(name)
    assert cell == "load.frame\\_\\*\\[1]\\|\\<b>"
    assert f"| └ {cell} |" in prof.to_markdown() or f"| {cell} |" in prof.to_markdown()
    assert f"**{cell}**" in format_benchmark_table([stats(1.0, 20, 5, name=name)])
    assert f">{_native._html_escape(name)}</td>" in prof.to_html()


def test_pooling_runs_and_segments_is_one_rule():
    from spatialhub.utils.profiling.pytest_plugin.fixture import _pool_segments
    from spatialhub.utils.profiling.runner import _pool

    parts = [stats(1.0, 50, 6), stats(1.1, 70, 7)]
    parts[0].minor_faults_per_iter, parts[1].minor_faults_per_iter = 1.0, 3.0
    runs, segments = _pool(parts, None, fresh=True), _pool_segments(parts)
    assert runs.median_ms == segments.median_ms == float(np.median(np.concatenate(
        [p.samples_ms for p in parts])))
    # page faults per call: the pooled calls' average, in both (50 x 1 + 70 x 3) / 120
    assert runs.minor_faults_per_iter == segments.minor_faults_per_iter == pytest.approx(
        (50 * 1.0 + 70 * 3.0) / 120)
    assert runs.run_sizes == (50, 70) and segments.run_sizes is None


def test_one_count_rule_and_one_wording():
    from spatialhub.utils.profiling import benchmark_repeated, cli
    from spatialhub.utils.profiling.runner import _count

    with pytest.raises(ValueError, match=r"^f\(\): n must be >= 2, got 1$"):
        _count(1, "n", "f", 2)
    with pytest.raises(TypeError, match=r"^f\(\): n must be an int, not bool$"):
        _count(True, "n", "f", 0)
    with pytest.raises(ValueError, match=r"^benchmark_repeated\(\): repeat must be >= 1, got 0$"):
        benchmark_repeated(sorted, [1], repeat=0)
    import argparse
    with pytest.raises(argparse.ArgumentTypeError, match=r"^must be >= 1, got 0$"):
        cli._positive_int("0")
