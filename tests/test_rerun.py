"""The rerun interval: where a fresh process's median is expected (issue 22).

The arithmetic of docs/statistics.md ("Rerun interval"), recomputed from the samples:
one run combines its own level variance with the between-run spread the library knows
(given, calibrated, assumed, or its own slow variation), twice (this run and the rerun);
repetitions give the prediction interval of one more run median."""
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from spatialhub.utils.profiling import (BenchmarkStats, _native, benchmark_callable,
                                        compare_benchmarks, format_benchmark_table)
from spatialhub.utils.profiling import calibrate

Z = 1.959964
T4, T19 = 2.7764, 2.0930   # two-sided 95% Student t, 4 and 19 degrees of freedom


def steady(level=1.0, n=300, sd=1e-4, seed=0):
    return level * (1 + sd * np.random.default_rng(seed).standard_normal(n))


def single(samples):
    return _native._stats_from_samples(np.asarray(samples, dtype=float))


def half_width(s):
    """The interval's half-width on the log scale, checked symmetric around the median."""
    lo, hi = math.log(s.rerun_low_ms / s.median_ms), math.log(s.rerun_high_ms / s.median_ms)
    # (symmetric, unless an end met its bound: half the fastest sample, twice the slowest)
    assert lo == pytest.approx(-hi, rel=1e-9) or s.rerun_low_ms == 0.5 * s.min_ms or \
        s.rerun_high_ms == 2.0 * s.max_ms
    return hi


@pytest.fixture
def no_calibration():
    old = _native._set_machine_run_spread(None, None)
    yield
    _native._set_machine_run_spread(*old)


def test_a_steady_single_run_allows_for_twice_the_assumed_15_percent(no_calibration):
    s = single(steady())
    # sampling error is negligible: q = z * sqrt(2 * 0.15^2) = 0.416, a factor 1.52 each way
    assert s.rerun_basis == "assumed"
    assert half_width(s) == pytest.approx(Z * math.sqrt(2) * 0.15, rel=2e-3)
    assert s.rerun_low_ms < s.ci95_low_ms <= s.ci95_high_ms < s.rerun_high_ms


def test_a_given_run_spread_replaces_the_assumed_one(no_calibration):
    s = _native._apply_rerun(single(steady()), run_spread=0.03)
    assert s.rerun_basis == "given"
    assert half_width(s) == pytest.approx(Z * math.sqrt(2) * 0.03, rel=2e-3)
    zero = _native._apply_rerun(single(steady(sd=0.01)), run_spread=0)
    # run_spread=0: only the two runs' sampling errors remain, at least the CI's
    h_ci = math.log(zero.ci95_high_ms / zero.ci95_low_ms) / (2 * Z)
    assert half_width(zero) >= Z * math.sqrt(2) * h_ci * 0.999
    with pytest.raises(ValueError, match="run_spread must be a number in"):
        _native._apply_rerun(s, run_spread=1.5)


def test_this_machines_calibration_is_the_floor_with_its_degrees_of_freedom(no_calibration):
    _native._set_machine_run_spread(0.05, 20)
    s = single(steady())
    assert s.rerun_basis == "calibrated"
    assert half_width(s) == pytest.approx(T19 * math.sqrt(2) * 0.05, rel=2e-3)
    assert _native._set_machine_run_spread(None, None) == (0.05, 20)
    assert single(steady()).rerun_basis == "assumed"
    with pytest.raises(ValueError, match="spread"):
        _native._set_machine_run_spread(0.05, 2)   # a spread from 2 processes says little


def test_a_run_on_a_busy_machine_allows_for_what_busy_runs_showed(no_calibration):
    s = single(steady())
    s.machine_busy = True
    _native._apply_rerun(s)
    assert s.rerun_basis == "assumed busy"
    assert half_width(s) == pytest.approx(Z * math.sqrt(2) * 0.25, rel=2e-3)
    _native._set_machine_run_spread(0.05, 20)   # a calibration made on a quiet machine
    assert _native._apply_rerun(s).rerun_basis == "assumed busy"
    _native._set_machine_run_spread(0.3, 20)    # one made busier still
    assert _native._apply_rerun(s).rerun_basis == "calibrated"
    # T19 sqrt(2) 0.3 = 0.89 on the log scale: beyond 2x, where the bound stops it
    assert half_width(s) == pytest.approx(min(T19 * math.sqrt(2) * 0.3,
                                              math.log(2 * s.max_ms / s.median_ms)), rel=2e-3)


def test_a_wide_ci_widens_the_interval_beyond_the_spread(no_calibration):
    # 12 samples (no blocks): the CI of the median is the sampling term
    x = np.exp(np.random.default_rng(3).normal(0.0, 0.8, 12))
    s = single(x)
    h = math.log(s.ci95_high_ms / s.ci95_low_ms) / (2 * Z)
    assert h > 0.15
    assert half_width(s) == pytest.approx(Z * math.sqrt(2 * (h * h + 0.15 ** 2)), rel=1e-6)


def test_a_run_that_moves_slowly_allows_for_its_own_slow_variation(no_calibration):
    # blocks of 30 calls whose level wanders by ~35% (one run: no two modes, no trend)
    levels = np.exp(0.35 * np.random.default_rng(1).standard_normal(10))
    s = single(np.repeat(levels, 30) * steady(1.0, 300, sd=1e-3, seed=3))
    assert s.rerun_basis == "slow variation"
    assert half_width(s) > Z * math.sqrt(2) * 0.2   # beyond what the assumed 15% allows


@pytest.mark.parametrize("kind", ["two modes", "drifting"])
def test_one_run_of_two_levels_or_a_drift_gets_no_interval_but_the_reason(kind):
    """A level step of 2x read '0.103 to 0.887' for samples of 0.30-1.23 ms: one run
    cannot say where another lands.  No interval then, and the reason; the table says
    which."""
    if kind == "two modes":
        x = np.concatenate([steady(1.0, 150, sd=0.01), steady(2.0, 150, sd=0.01, seed=1)])
    else:
        x = np.exp(np.cumsum(np.random.default_rng(1).normal(0, 0.01, 300)))
    s = single(x)
    assert s.rerun_low_ms is None and s.rerun_high_ms is None
    assert s.rerun_basis.startswith(kind + ": a rerun may land")
    assert f"none ({kind})" in format_benchmark_table([s], columns=["rerun"])


@pytest.mark.parametrize("seed", range(20))
def test_no_interval_is_below_half_the_fastest_sample_or_above_twice_the_slowest(seed):
    rng = np.random.default_rng(seed)
    x = np.exp(rng.normal(0, rng.uniform(0.01, 1.5), int(rng.integers(5, 400))))
    for s in (single(x), _native._apply_rerun(single(x), run_spread=0.9)):
        if s.rerun_low_ms is not None:
            assert 0.5 * s.min_ms <= s.rerun_low_ms <= s.rerun_high_ms <= 2.0 * s.max_ms


def test_repetitions_give_the_prediction_interval_of_one_more_run(no_calibration):
    levels = np.array([1.0, 1.1, 0.9, 1.05, 0.95])
    x = np.concatenate([steady(v, 40, seed=i) for i, v in enumerate(levels)])
    s = single(x)
    s.run_sizes = (40,) * 5
    _native._apply_rerun(s)
    logs = np.log(levels)
    center, sr = logs.mean(), logs.std(ddof=1)
    q = T4 * sr * math.sqrt(1 + 1 / 5)
    assert s.rerun_basis == "runs"
    assert s.rerun_low_ms == pytest.approx(math.exp(center - q), rel=2e-3)
    assert s.rerun_high_ms == pytest.approx(math.exp(center + q), rel=2e-3)
    # a given spread above the measured one is a floor (as compare_benchmarks uses it)
    _native._apply_rerun(s, run_spread=0.3)
    assert s.rerun_basis == "given"
    assert math.log(s.rerun_high_ms) - center == pytest.approx(Z * 0.3 * math.sqrt(1.2), rel=2e-3)


def test_runs_that_agree_better_than_their_samples_can_use_the_sampling_spread():
    rng = np.random.default_rng(5)
    x = np.concatenate([np.exp(rng.normal(0, 0.3, 50)) for _ in range(4)])
    s = single(x)
    s.run_sizes = (50,) * 4
    _native._apply_rerun(s)
    meds = [np.median(x[i * 50:(i + 1) * 50]) for i in range(4)]
    sr = np.std(np.log(meds), ddof=1)
    # never narrower than the measured run spread alone would make it
    assert math.log(s.rerun_high_ms / s.rerun_low_ms) >= 2 * 3.1824 * sr * math.sqrt(1.25) * 0.999


def test_no_interval_without_a_positive_median_or_samples():
    s = single(np.zeros(40))
    assert s.rerun_low_ms is None and s.rerun_high_ms is None and s.rerun_basis is None
    bare = BenchmarkStats("x", "CPU", 1, 1, 0, 1, 1, 1, 1000, 0, 1)
    assert _native._apply_rerun(bare).rerun_low_ms is None
    bad = single(steady(n=40))
    bad.run_sizes = (10, 10)
    with pytest.raises(ValueError, match="run_sizes"):
        _native._apply_rerun(bad)


def test_benchmark_callable_states_it_and_takes_run_spread(no_calibration):
    s = benchmark_callable(sum, range(200), num_warmup=2, num_iters=60, progress=False)
    if s.rerun_low_ms is None:   # a loaded machine can make the run two-level
        assert s.rerun_basis.split(":")[0] in ("two modes", "drifting")
    else:
        assert s.rerun_basis in ("assumed", "assumed busy", "slow variation")
        assert s.rerun_low_ms < s.median_ms < s.rerun_high_ms
    g = benchmark_callable(sum, range(200), num_warmup=2, num_iters=60, progress=False,
                           run_spread=0.02)
    if g.rerun_low_ms is None:   # a loaded machine can make the run two-level or drifting
        assert g.rerun_basis.split(":")[0] in ("two modes", "drifting")
    else:
        assert g.rerun_basis == "given"
    # the given spread sets the width: steady samples, so that no drift or mode intervenes
    g = _native._apply_rerun(single(steady(n=60)), run_spread=0.02)
    assert g.rerun_basis == "given"
    wide = _native._apply_rerun(single(steady(n=60)), run_spread=0.15)
    assert g.rerun_high_ms / g.rerun_low_ms < wide.rerun_high_ms / wide.rerun_low_ms
    with pytest.raises(ValueError, match=r"run_spread must be a number in \[0, 1\)"):
        benchmark_callable(sum, range(3), run_spread=1.0)
    with pytest.raises(TypeError, match="run_spread"):
        benchmark_callable(sum, range(3), run_spread="3%")


def test_it_travels_in_to_dict_json_and_pickle():
    s = single(steady())
    d = s.to_dict()
    assert d["rerun_low_ms"] == round(s.rerun_low_ms, 2) and d["rerun_basis"] == s.rerun_basis
    back = BenchmarkStats.from_dict(json.loads(s.to_json(samples=True)))
    assert back.rerun_basis == s.rerun_basis
    assert back.rerun_low_ms == pytest.approx(s.rerun_low_ms, abs=0.005)
    assert "rerun_low_ms=" in repr(s) and "rerun_basis" not in repr(s)


def test_the_rerun_column_by_name_and_in_auto(make_stats):
    s = single(steady(0.5))
    plain = make_stats(name="plain")
    default = format_benchmark_table([s, plain])
    assert "Rerun" not in default   # the released layout stays as it was
    t = format_benchmark_table([s, plain], columns="rerun").split("\n")
    assert t[0].endswith("| Peak RAM Delta | Rerun 95% (ms) |")
    assert t[2].endswith(f"| {s.rerun_low_ms:.2f} to {s.rerun_high_ms:.2f} |"), t[2]
    assert t[3].endswith("| N/A |")
    assert format_benchmark_table([s, plain], columns="auto").split("\n")[0].endswith(
        "| Rerun 95% (ms) |")
    assert "Rerun" not in format_benchmark_table(plain, columns="auto")
    assert "Rerun 95% (ms)" in s._repr_markdown_() and "Rerun 95% (ms)" in s._repr_html_()


def test_a_busy_machine_puts_a_caveat_in_the_verdict_text():
    a, b = single(steady(1.0)), single(steady(1.0, seed=1))
    assert "caveat" not in compare_benchmarks(a, b).reason
    b.machine_busy = True
    reason = compare_benchmarks(a, b).reason
    assert "caveat: the machine was busy while the candidate was measured" in reason
    a.machine_busy = True
    assert "while each side was measured" in compare_benchmarks(a, b).reason


def test_a_saved_calibration_is_used_by_every_later_process(tmp_path, monkeypatch,
                                                            no_calibration):
    monkeypatch.setenv("SPATIALHUB_CACHE_DIR", str(tmp_path))
    assert calibrate.cache_dir() == str(tmp_path) and calibrate.machine_run_spread() is None
    entry = {"run_spread": 0.04, "processes": 12, "when": "test"}
    calibrate._write({calibrate.machine_id(): entry, "another machine | x | 64 CPUs":
                      {"run_spread": 0.5, "processes": 20}})
    assert calibrate.machine_run_spread()["run_spread"] == 0.04
    code = ("import numpy as np; from spatialhub.utils.profiling import _native;"
            "s = _native._stats_from_samples(np.ones(300)); print(s.rerun_basis)")
    env = dict(os.environ, SPATIALHUB_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "calibrated"
    assert calibrate.forget_run_spread() is True and calibrate.machine_run_spread() is None
    kept = json.loads((tmp_path / "run_spread.json").read_text())["machines"]
    assert list(kept) == ["another machine | x | 64 CPUs"]   # other machines' entries stay
    (tmp_path / "run_spread.json").write_text("{not json")
    assert calibrate.machine_run_spread() is None   # an unreadable cache is no calibration


def test_calibration_measures_and_writes_only_when_asked(tmp_path, monkeypatch, no_calibration):
    monkeypatch.setenv("SPATIALHUB_CACHE_DIR", str(tmp_path / "c"))
    e = calibrate.calibrate_run_spread(5, num_iters=20)
    assert not (tmp_path / "c").exists()   # measured, not written
    assert e["processes"] == 5 and 0 < e["run_spread"] < 1
    assert e["run_spread"] == max(w["run_spread"] for w in e["workloads"].values())
    assert single(steady()).rerun_basis == "assumed"
    with pytest.raises(ValueError, match="processes must be >= 5"):
        calibrate.calibrate_run_spread(2)
