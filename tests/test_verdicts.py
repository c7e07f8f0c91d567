"""Verdicts that hold across runs: drift and run-to-run spread widen the interval, a
margin separates "same" from a real difference, "inconclusive" says why, and the
interleaved and repeated runners feed the same rule."""
import json
import pickle
import time

import numpy as np
import pytest

from spatialhub.utils.profiling import (BenchmarkInterrupted, BenchmarkStats, _native,
                                        benchmark_repeated, compare_benchmarks, compare_callables)


def stats(samples, run_sizes=None):
    s = _native._stats_from_samples(np.asarray(samples, dtype=float))
    if run_sizes is not None:
        s.run_sizes = run_sizes
    return s


def steady(level, n=600, seed=0, sd=0.01):
    return level * (1 + sd * np.random.default_rng(seed).standard_normal(n))


def judge(c):
    """The documented rule, recomputed from the fields."""
    lo, hi, r, m = c.ci95_low, c.ci95_high, c.ratio, c.margin
    if lo > 1 and r > 1 + m:
        return "slower"
    if hi < 1 and r < 1 / (1 + m):
        return "faster"
    if 1 / (1 + m) <= lo and hi <= 1 + m:
        return "same"
    return "inconclusive"


def test_a_step_inside_a_run_widens_the_interval_instead_of_claiming_slower():
    # The candidate's machine got 10% slower halfway through its run: the old bootstrap
    # CI (i.i.d. samples) called that "slower"; the blocks see the run is not stable.
    base = stats(steady(1.0, seed=1))
    cand = stats(np.concatenate([steady(1.0, 300, seed=2), steady(1.1, 300, seed=3)]))
    c = compare_benchmarks(base, cand)
    assert c.verdict == "inconclusive", c.reason
    assert "run-to-run spread" in c.reason and "benchmark_repeated" in c.reason
    # a step larger than the assumed spread (1.8x): the run's own slow variation widens
    # the interval beyond what the same samples shuffled (no slow variation) get
    big = stats(np.concatenate([steady(1.0, 300, seed=2), steady(1.8, 300, seed=3)]))
    shuffled = stats(np.random.default_rng(4).permutation(big.samples_ms))
    wide, narrow = compare_benchmarks(base, big), compare_benchmarks(base, shuffled)
    assert "slow variation" in wide.reason and "slow variation" not in narrow.reason
    assert np.log(wide.ci95_high / wide.ci95_low) > 1.3 * np.log(narrow.ci95_high / narrow.ci95_low)


def test_single_runs_allow_for_the_run_to_run_spread_they_cannot_see():
    # Separate runs of identical code moved by 15% (std of log medians) on the reference
    # machine, by up to 1.35x now and then; each run alone is steady.  Two single runs
    # 20% apart are therefore not a verdict -- unless the user says reruns do not move.
    base, cand = stats(steady(1.0, seed=11)), stats(steady(1.2, seed=12))
    c = compare_benchmarks(base, cand)
    assert c.verdict == "inconclusive" == judge(c) and c.run_spread == pytest.approx(0.15)
    assert "±15% assumed" in c.reason and "benchmark_repeated measures" in c.reason
    assert c.ci95_low < 1.0 < 1.2 < c.ci95_high
    assert compare_benchmarks(base, cand, run_spread=0.0).verdict == "slower"
    assert compare_benchmarks(base, cand, run_spread=0.03).verdict == "slower"
    # a change well beyond the assumed spread: the interval excludes 1, but an assumption
    # may explain, never decide (issue 32): no verdict without a measured or given spread
    big = stats(steady(1.8, seed=13))
    for c in (compare_benchmarks(base, big), compare_benchmarks(big, base)):
        assert c.verdict == "inconclusive" and "which excludes 1" in c.reason, c.reason
        assert "no between-run spread measured, so no verdict" in c.reason
    assert compare_benchmarks(base, big, run_spread=0.15).verdict == "slower"
    # a run whose own slow variation exceeds the assumed spread widens the interval by it
    wild = stats(np.concatenate([steady(1.0, 300, seed=14), steady(1.8, 300, seed=15)]))
    w = compare_benchmarks(base, wild)
    assert "slow variation" in w.reason and "above the ±15% assumed" in w.reason
    assert w.run_spread > 0.15 and w.verdict == judge(w) == "inconclusive"
    # under 15 samples (no blocks) the assumed spread still applies
    few = compare_benchmarks(stats(steady(1.0, 10, seed=16)), stats(steady(1.2, 10, seed=17)))
    assert few.verdict == "inconclusive" and "±15% assumed" in few.reason


def test_margin_separates_same_from_a_small_real_difference():
    # run_spread=0: results of one machine state, where only the margin decides
    base, cand = stats(steady(1.0, seed=5)), stats(steady(1.03, seed=6))
    c = compare_benchmarks(base, cand, run_spread=0.0)
    assert c.verdict == "same" and c.margin == 0.05 and 1.02 < c.ratio < 1.04, c.reason
    strict = compare_benchmarks(base, cand, margin=0.01, run_spread=0.0)
    assert strict.verdict == "slower" == judge(strict) and strict.margin == 0.01
    # between the two: a real difference that the interval cannot place against 2.5%
    c3 = compare_benchmarks(base, stats(steady(1.025, seed=6, sd=0.05)), margin=0.025,
                            run_spread=0.0)
    assert c3.verdict == judge(c3)
    assert compare_benchmarks(cand, base, margin=0.01, run_spread=0.0).verdict == "faster"


def test_runs_give_the_between_run_spread_and_widen_the_interval():
    rng = np.random.default_rng(7)
    levels_a, levels_b = 1 + 0.08 * rng.standard_normal(5), 1 + 0.08 * rng.standard_normal(5)
    a = stats(np.concatenate([steady(lv, 200, seed=i) for i, lv in enumerate(levels_a)]),
              run_sizes=[200] * 5)
    b = stats(np.concatenate([steady(lv, 200, seed=10 + i) for i, lv in enumerate(levels_b)]),
              run_sizes=(200,) * 5)
    c = compare_benchmarks(a, b)
    assert c.method == "runs" and (c.baseline_runs, c.candidate_runs) == (5, 5)
    assert 0.03 < c.run_spread < 0.2 and "5 and 5 runs" in c.reason
    assert c.verdict in ("same", "inconclusive") and c.verdict == judge(c)
    # the same samples as one run each: the spread between runs is invisible... but the
    # blocks (one block per run here) still see the slow variation
    flat = compare_benchmarks(stats(a.samples_ms), stats(b.samples_ms))
    assert flat.method == "samples" and flat.verdict == judge(flat)
    # a 1.5x slowdown stands out of that spread
    slow = stats(b.samples_ms * 1.5, run_sizes=[200] * 5)
    assert compare_benchmarks(a, slow).verdict == "slower"


def test_a_known_run_spread_is_used_for_single_runs():
    base, cand = stats(steady(1.0, seed=8)), stats(steady(1.08, seed=9))
    assert compare_benchmarks(base, cand, run_spread=0.0).verdict == "slower"
    c = compare_benchmarks(base, cand, run_spread=0.10)
    assert c.verdict == "inconclusive" and c.run_spread == 0.10 and "±10.0%" in c.reason
    with pytest.raises(ValueError, match="run_spread"):
        compare_benchmarks(base, cand, run_spread=-0.1)
    with pytest.raises(ValueError, match="margin"):
        compare_benchmarks(base, cand, margin=1.5)
    with pytest.raises(TypeError, match="margin"):
        compare_benchmarks(base, cand, margin="5%")


@pytest.fixture
def calibrated():
    """This machine's spread as spatialhub-bench --calibrate leaves it: 4.2% over 20
    processes; restored after."""
    old = _native._set_machine_run_spread(0.042, 20)
    yield 0.042
    _native._set_machine_run_spread(*old)


def test_a_calibrated_machine_lets_two_single_runs_decide(calibrated):
    """The calibration is a spread measured on this machine: two single runs 1.3x apart
    are "slower" on it (t-adjusted for its 20 processes), not on an assumed 15%; a run that
    started on a busy machine, which a quiet calibration does not describe, stays
    undecided."""
    a, b = stats(steady(1.0, seed=1)), stats(steady(1.3, seed=2))
    a.machine_busy = b.machine_busy = False
    c = compare_benchmarks(a, b)
    assert c.verdict == "slower", c.reason
    assert "calibrated between-run spread ±4.5% (from 20 processes" in c.reason
    assert c.run_spread == pytest.approx(0.042 * 2.093 / 1.960, rel=1e-3)   # t(19) / z
    same = compare_benchmarks(a, stats(steady(1.0, seed=3)), margin=0.15)   # ±12% fits
    assert same.verdict == "same", same.reason
    b.machine_busy = True
    c = compare_benchmarks(a, b)
    assert c.verdict == "inconclusive" and "no between-run spread measured" in c.reason
    _native._set_machine_run_spread(None, None)
    a.machine_busy = b.machine_busy = False
    assert compare_benchmarks(a, b).verdict == "inconclusive"     # none: the assumption


def test_one_measurement_against_itself_carries_no_busy_caveat():
    a = stats(steady(1.0))
    a.machine_busy = True
    c = compare_benchmarks(a, a)
    assert c.verdict == "same" and c.reason == ("the same samples on both sides: one "
                                                "measurement compared with itself")


def test_run_sizes_are_checked_and_travel_with_the_result():
    s = stats(steady(1.0, 30), run_sizes=[10, 20])
    assert s.run_sizes == (10, 20)
    d = json.loads(s.to_json(samples=True))
    assert d["run_sizes"] == [10, 20]
    back = BenchmarkStats.from_dict(d)
    assert back.run_sizes == (10, 20) and pickle.loads(pickle.dumps(s)).run_sizes == (10, 20)
    for bad, exc in (([], ValueError), ([0, 30], ValueError), ([1.5], TypeError), ("12", TypeError),
                     ([True], TypeError)):
        with pytest.raises(exc, match="run_sizes"):
            s.run_sizes = bad
    s.run_sizes = [10, 10]   # 20 of 30 samples
    with pytest.raises(ValueError, match="run_sizes add up to 20"):
        compare_benchmarks(s, s)


def test_the_margin_in_the_reason_is_the_margin_that_was_applied():
    # the 5% margin is applied as a ratio above 1.05 or below 1/1.05: "4.8% faster, beyond
    # the 5% margin" read as a contradiction; the reason names the bound it was judged by
    c = compare_benchmarks(stats(steady(1.0)), stats(steady(0.95)), run_spread=0)
    assert c.verdict == "faster", c.reason
    assert c.reason.startswith("5.0% faster: the ratio 0.9500 is beyond the 5% margin "
                               "(below 0.9524 = 1/1.05)"), c.reason
    near = compare_benchmarks(stats(steady(1.0)), stats(steady(0.96)), run_spread=0)
    assert near.verdict != "faster" and "0.9524" in near.reason, near.reason


def test_comparison_keeps_reason_and_margin_through_pickle_and_dict():
    c = compare_benchmarks(stats(steady(1.0)), stats(steady(2.0)), margin=0.1, run_spread=0.15)
    assert c.verdict == "slower" and "beyond the 10% margin" in c.reason
    back = pickle.loads(pickle.dumps(c))
    assert back.to_dict() == c.to_dict() and back.reason == c.reason and back.margin == 0.1
    d = c.to_dict()
    assert {"reason", "margin", "method", "baseline_runs", "candidate_runs"} <= set(d)


def test_paired_rounds_are_judged_on_the_round_ratios():
    rng = np.random.default_rng(11)
    drift = np.repeat(np.linspace(1.0, 2.0, 20), 10)   # the machine slows 2x over the run
    a = drift * (1 + 0.01 * rng.standard_normal(200))
    b = 1.2 * drift * (1 + 0.01 * rng.standard_normal(200))
    pa, pb = stats(a, run_sizes=[10] * 20), stats(b, run_sizes=[10] * 20)
    c = compare_benchmarks(pa, pb, paired=True)
    assert c.method == "interleaved" and c.verdict == "slower" and 1.18 < c.ratio < 1.22
    assert c.ci95_high / c.ci95_low < 1.03   # the drift cancels out of each round's ratio
    assert compare_benchmarks(pa, pa, paired=True).verdict == "same"
    few = compare_benchmarks(stats(a[:40], [10] * 4), stats(b[:40], [10] * 4), paired=True)
    assert few.verdict == "inconclusive" and "needs at least 6" in few.reason
    with pytest.raises(ValueError, match="paired=True"):
        compare_benchmarks(pa, stats(b), paired=True)


def spin(ms):
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass


def test_compare_callables_interleaves_and_finds_a_2x_slowdown():
    c = compare_callables(spin, lambda ms: spin(2 * ms), 0.2, rounds=8, block_iters=5)
    assert c.verdict == "slower" and 1.6 < c.ratio < 2.5, c.reason
    assert c.method == "interleaved" and c.baseline_runs == c.candidate_runs == 8
    assert c.baseline == "spin" and c.candidate == "<lambda>"


def test_compare_callables_on_identical_code_is_not_a_difference():
    c = compare_callables(spin, spin, 0.2, rounds=10, block_iters=5, margin=0.25)
    assert c.verdict in ("same", "inconclusive"), c.reason   # never faster/slower
    assert c.baseline != c.candidate   # the two sides stay apart in the tables


def test_compare_callables_arguments():
    with pytest.raises(TypeError, match="compare_callables"):
        compare_callables(spin, 3)
    with pytest.raises(ValueError, match="rounds"):
        compare_callables(spin, spin, 0.1, rounds=1)
    with pytest.raises(ValueError, match="margin"):
        compare_callables(spin, spin, 0.1, margin=-1)
    calls = []

    def boom(x):
        calls.append(x)
        if len(calls) > 3:
            raise KeyError("user's own")
    with pytest.raises(KeyError, match="user's own"):
        compare_callables(spin, boom, 0.01, rounds=3, block_iters=2)


def test_benchmark_repeated_pools_fresh_processes_with_run_identity():
    s = benchmark_repeated(spin, 0.1, repeat=2, num_warmup=2, num_iters=25, name="spin")
    assert s.run_sizes == (25, 25) and s.timed_iters == 50 and s.name == "spin"
    assert s.run_spread is not None and s.run_spread >= 0
    assert s.median_ms == np.percentile(s.samples_ms, 50)   # still exact over the pool
    with pytest.raises(ValueError, match="repeat"):
        benchmark_repeated(spin, 0.1, repeat=0)
    # new interpreters, never a fork, and the launcher's failure modes: test_repeated.py


def test_compare_callables_refuses_what_it_cannot_honour():
    from spatialhub.utils.profiling import compare_callables

    f = lambda x, **kw: x  # noqa: E731
    with pytest.raises(ValueError, match=r"rounds must be <= 1000000"):
        compare_callables(f, f, 1, rounds=10**30)
    with pytest.raises(TypeError, match=r"'track_ram' is an option of the harness.*functools.partial"):
        compare_callables(f, f, 1, track_ram=True)
    # num_iters is compare_callables' own option (issue 33: one vocabulary): with
    # block_iters it is refused (tests/test_vocabulary.py)
    with pytest.raises(TypeError, match=r"num_iters=3 and block_iters=2 both set"):
        compare_callables(f, f, 1, num_iters=3, block_iters=2)


def test_too_few_rounds_says_rounds_not_margin():
    from spatialhub.utils.profiling import compare_callables

    c = compare_callables(lambda: None, lambda: sum(range(2000)), rounds=3, block_iters=3,
                          num_warmup=1)
    assert c.verdict == "inconclusive"
    assert "only 3 round(s)" in c.reason and "rounds=" in c.reason and "margin" not in c.reason


# ---- Ctrl-C in compare_callables ----------------------------------------------------
# Both sides count their calls together, so where the interrupt lands does not depend on
# the random order of the sides: with num_warmup=0 the calibration is 3 + 3 calls, and
# each round 2 blocks of (1 untimed + block_iters timed) calls.

def _counted_pair(at, exc):
    calls = {"n": 0}

    def tick():
        calls["n"] += 1
        if calls["n"] == at:
            raise exc

    def side_a():
        tick()

    def side_b():
        tick()
    return side_a, side_b, calls


def _call_in_round(k, block, iters=4):
    """The shared call count before block 1 or 2 of round k starts."""
    return 6 + (k - 1) * 2 * (1 + iters) + (block - 1) * (1 + iters)


@pytest.mark.parametrize("k, block, timed, done", [(4, 1, 3, 3), (4, 2, 2, 3), (7, 2, 4, 6)])
def test_ctrl_c_in_a_round_keeps_the_completed_rounds_as_a_comparison(k, block, timed, done):
    assert issubclass(BenchmarkInterrupted, KeyboardInterrupt)
    ki = KeyboardInterrupt()
    at = _call_in_round(k, block) + 1 + timed   # past the block's untimed call
    a, b, calls = _counted_pair(at, ki)
    with pytest.raises(BenchmarkInterrupted) as info:
        compare_callables(a, b, rounds=10, block_iters=4, num_warmup=0)
    e = info.value
    assert calls["n"] == at and isinstance(e, KeyboardInterrupt)
    assert e.__cause__ is not None and e.__cause__.__context__ is ki   # the Ctrl-C stays visible
    assert e.__cause__.stats is e.stats
    assert f"round {k} of 10" in str(e) and f"{done} of 10 rounds completed" in str(e)
    assert f"Comparison of those {done} rounds" in str(e)
    c = e.comparison
    assert c.method == "interleaved" and c.baseline_runs == c.candidate_runs == done
    assert c.baseline == "side_a" and c.candidate == "side_b"
    assert e.stats.timed_iters == timed - 1 and e.stats.name in ("side_a", "side_b")


def test_ctrl_c_before_two_rounds_completed_has_no_comparison():
    ki = KeyboardInterrupt()
    a, b, _ = _counted_pair(_call_in_round(2, 2) + 1 + 3, ki)
    with pytest.raises(BenchmarkInterrupted) as info:
        compare_callables(a, b, rounds=5, block_iters=4, num_warmup=0)
    e = info.value
    assert e.comparison is None and e.stats.timed_iters == 2
    assert "round 2 of 5: 1 of 5 rounds completed" in str(e) and "needs 2" in str(e)


def test_ctrl_c_while_calibrating_says_so():
    ki = KeyboardInterrupt()
    a, b, _ = _counted_pair(5, ki)   # b's second calibration call
    with pytest.raises(BenchmarkInterrupted) as info:
        compare_callables(a, b, rounds=5, block_iters=4, num_warmup=0)
    e = info.value
    assert e.comparison is None and e.stats.timed_iters == 1 and e.stats.name == "side_b"
    assert "calibrating" in str(e) and "0 of 5 rounds completed" in str(e)


def test_ctrl_c_in_a_blocks_untimed_call_propagates_unchanged_with_the_comparison():
    ki = KeyboardInterrupt()
    a, b, _ = _counted_pair(_call_in_round(3, 1) + 1, ki)   # round 3's first untimed call
    with pytest.raises(KeyboardInterrupt) as info:
        compare_callables(a, b, rounds=5, block_iters=4, num_warmup=0)
    assert info.value is ki and not isinstance(ki, BenchmarkInterrupted)
    assert ki.comparison.baseline_runs == ki.comparison.candidate_runs == 2
