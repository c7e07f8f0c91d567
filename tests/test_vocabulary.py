"""One vocabulary (issue 33, item 5): every entry point takes num_warmup / num_iters,
warmup / iters stay as aliases where they were (profile_model, benchmark_onnx) and both
names of one count at once is a TypeError naming them; a keyword that reaches the user's
callable because it is a near miss of an option (num_iter=, iters=, provider=) leaves
with a note naming the option -- from the core for benchmark_callable, so that every
path has it."""
import re
import warnings

import numpy as np
import pytest

from spatialhub.utils.profiling import (_native, benchmark_callable, benchmark_repeated,
                                        compare_callables, compare_repeated, sweep)

NEAR = "did you mean {}=? {}= is not an option of the harness"


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def frame_op(x):
    return x * 2


def notes(exc):
    return getattr(exc, "__notes__", [])


def near_notes(exc):
    return [n for n in notes(exc) if n.startswith("did you mean")]


# ---- benchmark_callable: the core's note -------------------------------------------

@pytest.mark.parametrize("typo, meant", [
    ("num_iter", "num_iters"),       # one letter short
    ("nmu_iters", "num_iters"),      # two letters swapped
    ("n_iters", "num_iters"),        # two edits, on a long name
    ("num_warmups", "num_warmup"),
    ("iters", "num_iters"),          # profile_model's name for it
    ("warmup", "num_warmup"),
    ("sync_func", "sync_fn"),
    ("devices", "device"),
])
def test_a_typo_of_an_option_rejected_by_func_names_the_option(typo, meant):
    with pytest.raises(TypeError, match=f"unexpected keyword argument '{typo}'") as info:
        benchmark_callable(frame_op, np.ones(4), **{typo: 10})
    assert near_notes(info.value) == [
        f"did you mean {meant}=? {typo}= is not an option of the harness, so it was passed "
        "on to the timed callable, which does not take it"]
    # the iteration note is still there, before it
    assert notes(info.value)[0] == ("benchmark 'BenchmarkTarget': raised by func in warm-up "
                                    "iteration 1 of 10")


def test_the_note_comes_in_the_timed_loop_too_and_from_c_callables():
    with pytest.raises(TypeError) as info:   # no warm-up: the first call is timed
        benchmark_callable(frame_op, np.ones(4), num_warmup=0, num_iter=10)
    assert near_notes(info.value) == [NEAR.format("num_iters", "num_iter") +
                                      ", so it was passed on to the timed callable, which "
                                      "does not take it"]
    # a C function's words: "'num_iter' is an invalid keyword argument for sort()"
    # (3.13 words it "sort() got an unexpected keyword argument 'num_iter'")
    with pytest.raises(TypeError, match="invalid keyword argument|unexpected keyword argument") \
            as info:
        benchmark_callable(sorted, [3, 1, 2], num_iter=10)
    assert near_notes(info.value)[0].startswith(NEAR.format("num_iters", "num_iter"))
    with pytest.raises(TypeError, match="unexpected keyword argument") as info:   # NumPy's
        benchmark_callable(np.clip, np.ones(3), 0.0, 1.0, num_iters=5, num_warmp=2)
    assert near_notes(info.value)[0].startswith(NEAR.format("num_warmup", "num_warmp"))


@pytest.mark.parametrize("kw", [
    {"colour": 1},            # nothing like an option
    {"num_iterations": 10},   # five edits from num_iters
    {"iter_count": 10},
])
def test_a_keyword_unlike_any_option_gets_no_note(kw):
    with pytest.raises(TypeError) as info:
        benchmark_callable(frame_op, np.ones(4), **kw)
    assert near_notes(info.value) == []


def test_no_note_when_the_type_error_is_not_about_the_keyword():
    def picky(x, num_iter=1):
        raise TypeError("x must be a list")       # the keyword was taken; the value is wrong
    with pytest.raises(TypeError, match="x must be a list") as info:
        benchmark_callable(picky, np.ones(4), num_iter=3)
    assert near_notes(info.value) == []

    def rejects(x, **kw):
        raise ValueError("unexpected keyword argument 'num_iter'")   # not a TypeError
    with pytest.raises(ValueError) as info:
        benchmark_callable(rejects, np.ones(4), num_iter=3)
    assert near_notes(info.value) == []


def test_a_near_miss_the_callable_takes_is_its_own():
    seen = []

    def takes(x, iters=1):
        seen.append(iters)
    s = benchmark_callable(takes, 0, iters=7, num_warmup=1, num_iters=2)
    assert seen == [7, 7, 7] and s.timed_iters == 2


def test_the_rule_is_given_to_the_python_layer():
    exc = TypeError("f() got an unexpected keyword argument 'provider'")
    assert _native._note_near_option(exc, ("provider",), {"providers": "providers"}) is True
    assert exc.__notes__ == [NEAR.format("providers", "provider") + ", so it was passed on "
                             "to the timed callable, which does not take it"]
    # one note per exception: an adapter above the core does not add a second
    assert _native._note_near_option(exc, ("provider",), {"providers": "providers"}) is False
    assert len(exc.__notes__) == 1
    with pytest.raises(TypeError, match=r"keywords must be a tuple of str, not list"):
        _native._note_near_option(exc, ["provider"], {})
    with pytest.raises(TypeError, match=r"exc must be an exception, not str"):
        _native._note_near_option("boom", ("provider",), {})


# ---- profile_model -----------------------------------------------------------------

def test_profile_model_takes_num_warmup_and_num_iters():
    torch = pytest.importorskip("torch")
    net = torch.nn.Linear(4, 2)
    s = profile_model(net, (1, 4), num_warmup=2, num_iters=5)
    assert (s.warmup_iters, s.timed_iters) == (2, 5)
    s = profile_model(net, (1, 4), warmup=3, iters=6)          # the aliases stay
    assert (s.warmup_iters, s.timed_iters) == (3, 6)
    res = profile_model(net, (1, 4), batch_sizes=[1, 2], num_warmup=1, num_iters=4)
    assert [(r.batch_size, r.warmup_iters, r.timed_iters) for r in res] == [(1, 1, 4), (2, 1, 4)]


def profile_model(*args, **kwargs):
    from spatialhub.utils.profiling import profile_model as pm
    return pm(*args, **kwargs)


@pytest.mark.parametrize("call, message", [
    (lambda pm, net: pm(net, (1, 4), iters=7, num_iters=5),
     "profile_model(): iters=7 and num_iters=5 are one option given twice"),
    # the alias at its default value, but given: still both
    (lambda pm, net: pm(net, (1, 4), iters=100, num_iters=5),
     "profile_model(): iters=100 and num_iters=5 are one option given twice"),
    (lambda pm, net: pm(net, (1, 4), "cpu", 10, num_warmup=5),
     "profile_model(): warmup=10 and num_warmup=5 are one option given twice"),
])
def test_profile_model_refuses_both_names_of_one_count(call, message):
    torch = pytest.importorskip("torch")
    net = torch.nn.Linear(4, 2)
    calls = []
    net.register_forward_pre_hook(lambda *a: calls.append(1))
    with pytest.raises(TypeError, match=re.escape(message) + r".*give one"):
        call(profile_model, net)
    assert calls == []     # refused before anything ran


def test_profile_model_notes_a_typo_the_model_rejected():
    torch = pytest.importorskip("torch")
    net = torch.nn.Linear(4, 2)
    with pytest.raises(TypeError, match="unexpected keyword argument 'num_iter'") as info:
        profile_model(net, (1, 4), num_iter=5)
    assert near_notes(info.value)[0].startswith(NEAR.format("num_iters", "num_iter"))
    with pytest.raises(TypeError, match="unexpected keyword argument 'batch_size'") as info:
        profile_model(net, (1, 4), batch_size=[1, 4])
    assert near_notes(info.value)[0].startswith(NEAR.format("batch_sizes", "batch_size"))


# ---- benchmark_onnx ----------------------------------------------------------------

def onnx_model():
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from _tiny_onnx import linear_model_bytes
    return linear_model_bytes()


def test_benchmark_onnx_takes_num_warmup_and_num_iters():
    from spatialhub.utils.profiling import benchmark_onnx
    model = onnx_model()
    (s,) = benchmark_onnx(model, num_warmup=2, num_iters=5)
    assert (s.warmup_iters, s.timed_iters) == (2, 5)
    (s,) = benchmark_onnx(model, warmup=3, iters=6)
    assert (s.warmup_iters, s.timed_iters) == (3, 6)
    with pytest.raises(TypeError, match=re.escape(
            "benchmark_onnx(): iters=50 and num_iters=5 are one option given twice")):
        benchmark_onnx(model, iters=50, num_iters=5)
    with pytest.raises(TypeError, match=re.escape(
            "benchmark_onnx(): warmup=2 and num_warmup=5 are one option given twice")):
        benchmark_onnx(model, warmup=2, num_warmup=5)


def test_benchmark_onnx_notes_a_typo_session_run_rejected():
    from spatialhub.utils.profiling import benchmark_onnx
    model = onnx_model()
    with pytest.raises(TypeError, match="provider") as info:
        benchmark_onnx(model, provider="CPU")
    assert near_notes(info.value)[0].startswith(NEAR.format("providers", "provider"))
    with pytest.raises(TypeError, match="num_iter") as info:
        benchmark_onnx(model, num_iter=5)
    assert near_notes(info.value)[0].startswith(NEAR.format("num_iters", "num_iter"))


# ---- sweep -------------------------------------------------------------------------

def test_sweep_takes_num_warmup_and_num_iters_and_notes_typos():
    res = sweep(lambda n: (frame_op, (np.ones(n),)), [4, 8], param="n", num_warmup=1,
                num_iters=6)
    assert [(r.warmup_iters, r.timed_iters) for r in res] == [(1, 6), (1, 6)]
    with pytest.raises(TypeError) as info:
        sweep(lambda n: (frame_op, (np.ones(n),)), [4], iters=6)
    assert near_notes(info.value)[0].startswith(NEAR.format("num_iters", "iters"))
    with pytest.raises(TypeError) as info:
        sweep(lambda n: (frame_op, (np.ones(n),)), [4], params="n")
    assert near_notes(info.value)[0].startswith(NEAR.format("param", "params"))


# ---- compare_callables -------------------------------------------------------------

def test_compare_callables_spreads_num_iters_over_the_rounds(monkeypatch):
    from spatialhub.utils.profiling import runner
    timed = []
    real = runner.benchmark_callable

    def spy(f, *args, **kw):
        timed.append((kw["num_warmup"], kw["num_iters"]))
        return real(f, *args, **kw)
    monkeypatch.setattr(runner, "benchmark_callable", spy)
    c = compare_callables(frame_op, frame_op, np.ones(4), rounds=4, num_iters=40, num_warmup=2)
    # two calibration runs (num_warmup=2, 3 calls), then 4 rounds x 2 blocks of 40 / 4 calls
    assert timed == [(2, 3), (2, 3)] + [(1, 10)] * 8
    assert (c.baseline_runs, c.candidate_runs) == (4, 4)
    timed.clear()
    compare_callables(frame_op, frame_op, np.ones(4), rounds=4, num_iters=10 + 1)
    assert timed[2:] == [(1, 3)] * 8          # ceil(11 / 4): at least num_iters in all


def test_compare_callables_refuses_num_iters_with_block_iters_and_notes_typos():
    with pytest.raises(TypeError, match=re.escape(
            "compare_callables(): num_iters=40 and block_iters=3 both set the calls per block")):
        compare_callables(frame_op, frame_op, 1, num_iters=40, block_iters=3)
    with pytest.raises(ValueError, match="num_iters must be >= 1, got 0"):
        compare_callables(frame_op, frame_op, 1, num_iters=0)
    with pytest.raises(TypeError) as info:
        compare_callables(frame_op, frame_op, 1, rounds=4, round=3)
    assert near_notes(info.value)[0].startswith(NEAR.format("rounds", "round"))
    with pytest.raises(TypeError) as info:
        compare_callables(frame_op, frame_op, 1, rounds=4, num_iter=3)
    assert near_notes(info.value) == [NEAR.format("num_iters", "num_iter") + ", so it was "
                                      "passed on to the timed callable, which does not take it"]


# ---- fresh processes ---------------------------------------------------------------

def test_benchmark_repeated_takes_num_iters_and_its_children_note_typos():
    s = benchmark_repeated(frame_op, np.ones(4), repeat=1, num_warmup=1, num_iters=7)
    assert s.run_sizes == (7,)
    with pytest.raises(TypeError, match="unexpected keyword argument 'num_iter'") as info:
        benchmark_repeated(frame_op, np.ones(4), repeat=1, num_iter=7)
    assert near_notes(info.value)[0].startswith(NEAR.format("num_iters", "num_iter"))
    with pytest.raises(TypeError, match="unexpected keyword argument 'repeats'") as info:
        benchmark_repeated(frame_op, np.ones(4), repeats=1, num_iters=3)
    assert near_notes(info.value)[0].startswith(NEAR.format("repeat", "repeats"))


def test_compare_repeated_takes_num_iters_and_notes_typos():
    c = compare_repeated(frame_op, frame_op, np.ones(4), repeat=2, num_warmup=1, num_iters=7)
    assert (c.baseline_runs, c.candidate_runs) == (2, 2)
    with pytest.raises(ValueError, match="num_iters must be a positive integer, got 0"):
        compare_repeated(frame_op, frame_op, np.ones(4), repeat=2, num_iters=0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'margn'") as info:
        compare_repeated(frame_op, frame_op, np.ones(4), repeat=2, margn=0.1, num_iters=3)
    assert near_notes(info.value)[0].startswith(NEAR.format("margin", "margn"))
