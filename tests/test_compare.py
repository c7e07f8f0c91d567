"""compare_benchmarks: ratio of medians with a bootstrap interval and a verdict."""
import pickle
import time

import numpy as np
import pytest

from spatialhub.utils.profiling import (BenchmarkStats, Comparison, benchmark_callable,
                                        compare_benchmarks, format_benchmark_table)
from spatialhub.utils.profiling import _native


def sleeper(ms):
    return benchmark_callable(time.sleep, ms / 1000, name=f"sleep {ms} ms", num_warmup=2,
                              num_iters=30, track_ram=False)


def test_1ms_vs_2ms_sleeps():
    one, two = sleeper(1), sleeper(2)
    c = compare_benchmarks(one, two)
    assert isinstance(c, Comparison)
    # two single runs: on a busy machine (or under ASan) their slow variation can make the
    # interval too wide to decide -- never the wrong way round
    assert c.verdict == "inconclusive" and c.ratio > 1.3 and c.ci95_high > 1.0, c.reason
    assert "no between-run spread measured" in c.reason   # two single runs never decide
    assert compare_benchmarks(one, two, run_spread=0.1).verdict in ("slower", "inconclusive")
    assert compare_benchmarks(two, one, run_spread=0.1).verdict in ("faster", "inconclusive")
    assert c.baseline == "sleep 1 ms" and c.candidate == "sleep 2 ms"
    assert c.baseline_median_ms == one.median_ms and c.candidate_median_ms == two.median_ms


def test_same_distribution_is_same_and_interval_contains_the_ratio():
    rng = np.random.default_rng(3)
    # 2000 steady samples a side: the interval (about ±1.5%) fits in the 5% margin when
    # no shift between runs is allowed for (run_spread=0: one machine state) ...
    a = _native._stats_from_samples(rng.normal(5, 0.5, 2000))
    b = _native._stats_from_samples(rng.normal(5, 0.5, 2000))
    c = compare_benchmarks(a, b, run_spread=0.0)
    assert c.verdict == "same", c.reason
    # ... and is no verdict at all as two unrelated single runs (15% assumed between runs)
    assert compare_benchmarks(a, b).verdict == "inconclusive"
    assert c.ci95_high / c.ci95_low < 1.05 and c.method == "samples"
    assert c.ci95_low <= c.ratio <= c.ci95_high
    assert c.ratio == pytest.approx(b.median_ms / a.median_ms)


def test_seeded_and_deterministic():
    rng = np.random.default_rng(4)
    a = _native._stats_from_samples(rng.exponential(1, 100))
    b = _native._stats_from_samples(rng.exponential(1.1, 100))
    c1, c2 = compare_benchmarks(a, b), compare_benchmarks(a, b)
    assert (c1.ci95_low, c1.ci95_high) == (c2.ci95_low, c2.ci95_high)
    assert (c1.bootstrap_low, c1.bootstrap_high) == (c2.bootstrap_low, c2.bootstrap_high)
    c3 = compare_benchmarks(a, b, seed=99, resamples=500)
    assert c3.resamples == 500
    assert (c3.bootstrap_low, c3.bootstrap_high) != (c1.bootstrap_low, c1.bootstrap_high)


def test_bad_input(make_stats):
    a = _native._stats_from_samples([1.0, 2.0])
    with pytest.raises(TypeError):
        compare_benchmarks(a, 3)
    with pytest.raises(ValueError, match="no raw samples"):
        compare_benchmarks(a, make_stats())
    with pytest.raises(ValueError):
        compare_benchmarks(a, a, resamples=5)
    with pytest.raises(TypeError):
        compare_benchmarks(a)


def test_markdown_dict_and_pickle():
    a = _native._stats_from_samples([1.0, 1.1, 0.9] * 10)
    b = _native._stats_from_samples([2.0, 2.1, 1.9] * 10)
    c = compare_benchmarks(a, b, run_spread=0.05)
    md = c._repr_markdown_()
    assert md.splitlines()[0].startswith("| Baseline | Candidate |") and "**slower**" in md
    assert c.to_dict()["ratio"] == round(c.ratio, 4)
    assert pickle.loads(pickle.dumps(c)).to_dict() == c.to_dict()


_SEED = dict(name="m", device="CPU", mean_ms=1.0, median_ms=1.0, std_ms=0.0, p95_ms=1.0,
             min_ms=1.0, max_ms=1.0, fps=1000.0, warmup_iters=0, timed_iters=30)


def test_html_shows_the_same_cells_as_the_markdown():
    a = BenchmarkStats(**{**_SEED, "name": "a<b"}, samples_ms=[1.0, 1.1, 0.9] * 10)
    b = BenchmarkStats(**{**_SEED, "name": "c&d"}, samples_ms=[2.0, 2.1, 1.9] * 10)
    c = compare_benchmarks(a, b, run_spread=0.05)
    html = c._repr_html_()
    assert html == c.to_html() and html.startswith("<table>") and html.endswith("</table>")
    row = html.split("<tbody>")[1]
    cells = [x.split("</td>")[0] for x in row.split("<td>")[1:]]
    md_cells = [x.strip() for x in c.to_markdown().splitlines()[2].strip("|").split(" | ")]
    assert cells == ["<b>a&lt;b</b>", "<b>c&amp;d</b>", f"{c.baseline_median_ms:.4f}",
                     f"{c.candidate_median_ms:.4f}", f"{c.ratio:.3f}x",
                     f"[{c.ci95_low:.3f}, {c.ci95_high:.3f}]", "<b>slower</b>"]
    assert md_cells[2:6] == cells[2:6] and md_cells[6] == "**slower**"


def test_an_empty_samples_ms_counts_as_no_samples():
    # Regression (CI's ASan run, session 2): the baseline column bootstrapped an
    # empty sample and read the "median" from before its buffer ("0.00x faster",
    # "infx same", or a heap-buffer-overflow under ASan).
    empty = BenchmarkStats(**_SEED, samples_ms=[])
    full = BenchmarkStats(**_SEED, samples_ms=[1.0, 2.0, 3.0])
    for rows, base in (([full, empty], full), ([empty, full], empty)):
        last = format_benchmark_table(rows, baseline=base).splitlines()[-1]
        assert last.endswith("| 1.00x |"), last   # the ratio of medians, no verdict to give
    for a, b in ((empty, full), (full, empty)):
        with pytest.raises(ValueError, match="no raw samples"):
            compare_benchmarks(a, b)
