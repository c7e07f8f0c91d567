"""Statistics of a sample buffer against NumPy and the statistics module."""
import math
import statistics
import warnings

import numpy as np
import pytest

from spatialhub.utils.profiling import BenchmarkWarning
from spatialhub.utils.profiling import _native

QS = {"p50_ms": 50, "p90_ms": 90, "p95_ms": 95, "p99_ms": 99, "median_ms": 50}


def summary(x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BenchmarkWarning)
        s = _native._stats_from_samples(x)
        return s, {k: getattr(s, k) for k in QS}


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7, 10, 50, 99, 100, 101, 1000, 4096, 10001])
def test_percentiles_equal_numpy_exactly(n):
    rng = np.random.default_rng(n)
    x = rng.lognormal(0.0, 0.5, n)
    s, got = summary(x)
    for key, q in QS.items():
        assert got[key] == np.percentile(x, q), key
    assert s.iqr_ms == pytest.approx(np.percentile(x, 75) - np.percentile(x, 25), abs=0)


def test_even_n_median_is_the_mean_of_the_middle_pair():
    # the predecessor's sorted[n // 2] reads 3.0 here
    s, _ = summary([1.0, 2.0, 3.0, 4.0])
    assert s.median_ms == 2.5


def test_mean_and_sample_std_match_statistics_module():
    x = [0.91, 1.07, 1.02, 0.98, 5.3, 1.01]
    s, _ = summary(x)
    assert s.mean_ms == pytest.approx(statistics.fmean(x), rel=1e-15)
    assert s.std_ms == pytest.approx(statistics.stdev(x), rel=1e-13)
    assert s.min_ms == 0.91 and s.max_ms == 5.3
    assert s.fps == pytest.approx(1000.0 / statistics.fmean(x))


def test_single_sample_has_zero_std():
    s, _ = summary([2.0])
    assert s.std_ms == 0.0 and s.median_ms == 2.0 and s.ci95_low_ms == s.ci95_high_ms == 2.0


def test_constant_and_tied_samples():
    s, got = summary([3.0] * 1000)
    assert all(v == 3.0 for v in got.values())
    assert s.outliers == 0 and s.std_ms == 0.0
    x = [1.0] * 500 + [2.0] * 500
    s, got = summary(x)
    assert got["median_ms"] == np.percentile(x, 50) == 1.5


def test_sorted_and_reversed_inputs_are_not_quadratic_or_wrong():
    x = np.arange(200000, dtype=float)
    for arr in (x, x[::-1].copy()):
        s, got = summary(arr)
        assert got["p99_ms"] == np.percentile(arr, 99)


def test_tukey_outliers_are_counted_not_dropped():
    x = [1.0] * 20 + [1.1] * 20 + [10.0, 12.0]
    s, _ = summary(x)
    q1, q3 = np.percentile(x, [25, 75])
    fence_hi = q3 + 1.5 * (q3 - q1)
    assert s.outliers == sum(v > fence_hi or v < q1 - 1.5 * (q3 - q1) for v in x) == 2
    assert s.timed_iters == len(x) and s.max_ms == 12.0


def binom_cdf(k, n):
    return sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n


@pytest.mark.parametrize("n", [6, 10, 20, 50, 100, 500, 999, 1001, 5000])
def test_median_ci_uses_exact_order_statistic_ranks(n):
    # x_(i) == i, so the bounds are the ranks; shuffled, as independent samples come
    # (in iteration order 1..n is a perfect trend, whose CI is widened: next test)
    x = np.random.default_rng(n).permutation(np.arange(1, n + 1, dtype=float))
    s, _ = summary(x)
    assert s.effective_n == n
    j = int(s.ci95_low_ms)
    k = int(s.ci95_high_ms)
    assert k == n + 1 - j
    coverage = 1 - 2 * binom_cdf(j - 1, n)
    assert coverage >= 0.95
    # the next narrower interval would fall below 95%
    assert 1 - 2 * binom_cdf(j, n) < 0.95


def test_autocorrelated_samples_widen_the_median_ci_to_their_effective_size():
    # AR(1) with phi = 0.8: about n (1 - 0.8) / (1 + 0.8) = n / 9 independent samples
    rng = np.random.default_rng(5)
    x, e = np.empty(2000), 0.0
    for i in range(2000):
        e = 0.8 * e + rng.standard_normal()
        x[i] = 10.0 + e
    s, _ = summary(x)
    assert 0.75 < s.autocorr_lag1 < 0.85 and 150 < s.effective_n < 300
    iid, _ = summary(rng.permutation(x))   # the same values, independent order
    assert iid.effective_n == 2000
    assert (s.ci95_high_ms - s.ci95_low_ms) > 2.5 * (iid.ci95_high_ms - iid.ci95_low_ms)
    # the percentiles stay exactly NumPy's
    for q, v in ((50, s.median_ms), (95, s.p95_ms), (99, s.p99_ms)):
        assert v == np.percentile(x, q)
    assert np.sum(x < s.ci95_low_ms) + 1 == 2001 - (np.sum(x <= s.ci95_high_ms))


def test_median_ci_contains_median_and_narrows_with_n():
    rng = np.random.default_rng(7)
    widths = []
    for n in (50, 500, 5000):
        x = rng.normal(10.0, 1.0, n)
        s, _ = summary(x)
        assert s.ci95_low_ms <= s.median_ms <= s.ci95_high_ms
        widths.append(s.ci95_high_ms - s.ci95_low_ms)
    assert widths[0] > widths[1] > widths[2]
    # the half-width shrinks like 1/sqrt(n): 10x the samples, ~3.2x narrower
    assert 2.0 < widths[1] / widths[2] < 5.0


def test_median_ci_coverage_is_about_95_percent():
    rng = np.random.default_rng(11)
    hits = 0
    trials = 400
    for _ in range(trials):
        x = rng.exponential(1.0, 60)  # true median ln 2
        s, _ = summary(x)
        hits += s.ci95_low_ms <= math.log(2) <= s.ci95_high_ms
    assert 0.92 <= hits / trials <= 0.995


def test_reading_an_attribute_never_warns():
    # p99_ms of 50 samples warned when read (issue 20: reading a field is not an event;
    # its docstring says what 99th percentile of few samples is worth)
    s = _native._stats_from_samples(np.ones(50))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert s.p99_ms == 1.0 and s.to_dict()["p99_ms"] == 1.0
        for name in dir(s):
            getattr(s, name)
    assert "under 100 samples" in type(s).p99_ms.__doc__


def test_bad_samples_are_rejected():
    with pytest.raises(ValueError):
        _native._stats_from_samples([])
    with pytest.raises(ValueError, match="not finite"):
        _native._stats_from_samples([1.0, float("nan")])
    with pytest.raises((TypeError, ValueError)):
        _native._stats_from_samples(["a", "b"])
