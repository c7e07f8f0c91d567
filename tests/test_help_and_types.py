"""Help and types (issue 20, part 4): what inspect, help() and a type checker read.

- inspect.signature works on every public callable and type, and on their public
  methods; each parameter it reports is the one the numpydoc Parameters section
  describes, no more, no fewer.
- @timeit keeps the decorated function's signature, at run time and for mypy.
- The scope profiler, its Timer and ProfileNode have reprs that say what was measured.
- mypy --strict passes on a user script touching every public name, and catches the
  mistakes of tests/typing/expected_errors.py (so the API is not Any).
"""
import asyncio
import inspect
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import spatialhub.utils.profiling as sp
from spatialhub.utils.profiling import HierarchicalProfiler, ProfileNode, Timer, timeit

TYPING = Path(__file__).parent / "typing"


# ---- signatures against the documented parameters ---------------------------------

def _documented(doc):
    """The parameter names a numpydoc Parameters section describes, in order: the
    unindented lines' names ("a, b : type", "*args, **kwargs", a wrapped "x, y,")."""
    lines = (doc or "").splitlines()
    names, inside = [], False
    for i, line in enumerate(lines):
        underline = i + 1 < len(lines) and set(lines[i + 1].strip()) == {"-"}
        if underline:
            inside = line.strip() == "Parameters"
            continue
        if not inside or not line.strip() or set(line.strip()) == {"-"}:
            continue
        if line[0].isspace():
            continue
        head = line.split(" : ")[0]
        names += [n.strip().lstrip("*") for n in head.split(",") if n.strip()]
    return names


def _params(sig):
    return [p.name for p in sig.parameters.values() if p.name not in ("self", "cls")]


def _doc_of(name, obj):
    if name == "profiler":            # the module-level instance: calling it is scope()
        return inspect.getdoc(obj.scope)
    return inspect.cleandoc(obj.__doc__) if isinstance(obj, type) else inspect.getdoc(obj)


PUBLIC_CALLABLES = [n for n in sp.__all__ if callable(getattr(sp, n))]


def test_every_public_name_is_covered():
    # every name of __all__ is a callable (types, functions, the profiler instance)
    assert sorted(PUBLIC_CALLABLES) == sorted(sp.__all__)
    assert len(PUBLIC_CALLABLES) >= 45


@pytest.mark.parametrize("name", PUBLIC_CALLABLES)
def test_signature_matches_the_documented_parameters(name):
    obj = getattr(sp, name)
    if isinstance(obj, type) and sys.version_info < (3, 10):
        try:
            inspect.signature(obj)
        except ValueError:   # a C type: not read before 3.10 (the Python ones are)
            _need_heap_type_signatures()
    sig = inspect.signature(obj)          # raised ValueError on Timer, HierarchicalProfiler
    documented = _documented(_doc_of(name, obj))
    assert len(documented) == len(set(documented)), f"{name}: described twice: {documented}"
    assert set(_params(sig)) == set(documented), (
        f"{name}{sig}: undocumented {sorted(set(_params(sig)) - set(documented))}, "
        f"documented but not taken {sorted(set(documented) - set(_params(sig)))}")


def _public_methods():
    for name in PUBLIC_CALLABLES:
        cls = getattr(sp, name)
        if not isinstance(cls, type) or issubclass(cls, BaseException):
            continue
        for attr in sorted(dir(cls)):
            if attr.startswith("_") and attr != "__call__":
                continue
            owner = next(k for k in cls.__mro__ if attr in vars(k))
            if not owner.__module__.startswith("spatialhub."):   # list's, object's
                continue
            raw = vars(owner)[attr]
            if isinstance(raw, type(type.__call__)):
                # ProfilerCore's tp_call as a slot wrapper: a __call__ method beside it
                # (as CudaSync has) would cost HierarchicalProfiler its vectorcall, so
                # the signature is on the instance (tested above), not on this
                continue
            if isinstance(raw, (property, type(ProfileNode.p50_ms))) or not callable(
                    getattr(cls, attr)):
                continue
            yield pytest.param(cls, attr, id=f"{name}.{attr}")


@pytest.mark.parametrize("cls, attr", list(_public_methods()))
def test_public_methods_have_signatures_and_documented_parameters(cls, attr):
    method = getattr(cls, attr)
    sig = inspect.signature(method)
    params = _params(sig)
    if params:
        assert set(params) == set(_documented(inspect.getdoc(method))), f"{attr}{sig}"


def _need_heap_type_signatures():
    # inspect reads a C heap type's text signature (its tp_doc) from 3.10 on; on 3.9
    # inspect.signature raises ValueError for BenchmarkStats, Timer, ... (api.md)
    if sys.version_info < (3, 10):
        pytest.skip("inspect.signature does not read a C heap type's text signature before 3.10")


def test_the_field_types_signatures_are_their_constructors():
    _need_heap_type_signatures()
    sig = inspect.signature(sp.BenchmarkStats)
    kinds = {p.name: p.kind for p in sig.parameters.values()}
    # the seed's 13 by position; the extras (samples_ms among them) keyword-only
    assert list(kinds)[:13] == [f.name for f in __import__("dataclasses").fields(
        sp.BenchmarkStats)]
    assert kinds["p99_ms"] is inspect.Parameter.KEYWORD_ONLY
    assert kinds["samples_ms"] is inspect.Parameter.KEYWORD_ONLY
    assert sig.parameters["ram_delta_mb"].default == 0.0
    # and it binds what the constructor takes
    args = ("f", "CPU", 1.0, 1.0, 0.1, 1.2, 0.9, 1.3, 1000.0, 5, 20)
    sig.bind(*args, p99_ms=1.25, samples_ms=[1.0])
    s = sp.BenchmarkStats(*args, p99_ms=1.25, samples_ms=[1.0])
    assert s.p99_ms == 1.25
    assert str(inspect.signature(sp.GPUMemoryInfo)) == "(total_mb, free_mb, used_mb)"
    assert inspect.signature(sp.Comparison).parameters["margin"].default == 0.05


def test_profiler_signature_is_the_constructor_on_the_class_and_the_call_on_an_instance():
    cls_params = inspect.signature(HierarchicalProfiler).parameters
    assert list(cls_params)[:2] == ["name", "device"]
    assert cls_params["trace_capacity"].kind is inspect.Parameter.KEYWORD_ONLY
    assert list(inspect.signature(HierarchicalProfiler("p")).parameters) == [
        "name", "track_ram", "track_vram", "sync_cuda"]

    class Mine(HierarchicalProfiler):     # a subclass's own __init__ is what inspect reads
        def __init__(self, label: str) -> None:
            super().__init__(label)

    assert list(inspect.signature(Mine).parameters) == ["label"]


def test_help_first_lines_read_well():
    # the text signature is taken off __doc__: help() starts with the summary line
    for obj in (sp.benchmark_callable, sp.Timer, sp.BenchmarkStats, sp.NoisyWarning):
        first = inspect.getdoc(obj).splitlines()[0]
        assert "--" not in first and not first.startswith(obj.__name__ + "("), first
        assert first.endswith("."), first


def _examples():
    """(label, docstring) of every public name and public method whose help has
    Examples."""
    seen = set()
    for name in PUBLIC_CALLABLES:
        obj = getattr(sp, name)
        targets = [(name, obj)]
        if isinstance(obj, type):
            targets += [(f"{name}.{a}", getattr(obj, a)) for a in dir(obj)
                        if not a.startswith("_")]
        for label, target in targets:
            doc = inspect.cleandoc(target.__doc__ or "") if isinstance(target, type) \
                else inspect.getdoc(target)
            if doc and ">>>" in doc and doc not in seen:
                seen.add(doc)
                yield pytest.param(label, doc, id=label)


@pytest.mark.parametrize("label, doc", list(_examples()))
def test_help_examples_run_as_shown(label, doc):
    import doctest
    import warnings

    globs = {n: getattr(sp, n) for n in sp.__all__}
    test = doctest.DocTestParser().get_doctest(doc, globs, label, None, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # a busy machine's warning is not the point
        result = runner.run(test, out=lambda text: pytest.fail(text))
    skipped = sum(bool(e.options.get(doctest.SKIP)) for e in test.examples)
    # the examples too slow to run here (fresh processes, models) are marked +SKIP; from
    # 3.13 doctest counts them among the attempted (TestResults.skipped), before it did not
    ran = result.attempted - getattr(result, "skipped", 0)
    assert result.failed == 0 and ran + skipped == len(test.examples) >= 1


# ---- timeit keeps the signature -------------------------------------------------

def _target(x: int, /, y: str = "a", *, z: float = 1.0, **extra: object) -> int:
    """The target's own doc."""
    return x


async def _async_target(x: int, *, z: float = 1.0) -> int:
    return x


def _gen_target(n: int, step: int = 1):
    yield from range(0, n, step)


@pytest.mark.parametrize("func", [_target, _async_target, _gen_target])
def test_timeit_keeps_the_signature(func):
    prof = HierarchicalProfiler("sig")
    for decorate in (timeit(profiler=prof), timeit("named", profiler=prof),
                     prof.timeit(), prof.timeit("n2")):
        wrapped = decorate(func)
        assert inspect.signature(wrapped) == inspect.signature(func)
        assert wrapped.__name__ == func.__name__ and wrapped.__doc__ == func.__doc__
    assert inspect.iscoroutinefunction(timeit(profiler=prof)(_async_target))
    assert inspect.isgeneratorfunction(timeit(profiler=prof)(_gen_target))


def test_timeit_decorated_function_still_records():
    prof = HierarchicalProfiler("rec")
    f = timeit(profiler=prof)(_target)
    assert f(3, "b", z=2.0) == 3
    assert asyncio.run(timeit(profiler=prof)(_async_target)(4)) == 4
    assert list(timeit(profiler=prof)(_gen_target)(5, 2)) == [0, 2, 4]
    calls = {n: c.calls for n, c in prof.root.children.items()}
    assert calls == {"_target": 1, "_async_target": 1, "_gen_target": 1}


# ---- reprs ------------------------------------------------------------------------

def test_profiler_repr_counts_scopes_and_calls():
    prof = HierarchicalProfiler("demo")
    assert repr(prof) == "<HierarchicalProfiler 'demo' on CPU: 0 scopes, 0 calls>"
    with prof("load"):
        pass
    assert repr(prof) == "<HierarchicalProfiler 'demo' on CPU: 1 scope, 1 call>"
    for _ in range(2):
        with prof("load"):
            with prof("decode"):
                pass
    assert repr(prof) == "<HierarchicalProfiler 'demo' on CPU: 2 scopes, 5 calls>"

    class Mine(HierarchicalProfiler):
        pass

    assert repr(Mine("m", device="cuda:1", track_vram=False, sync_cuda=False)) == \
        "<Mine 'm' on cuda:1: 0 scopes, 0 calls>"


def test_profiler_repr_of_a_huge_tree_is_bounded():
    prof = HierarchicalProfiler("wide", track_ram=False)
    for i in range(1200):
        with prof(f"s{i}"):
            pass
    assert repr(prof) == "<HierarchicalProfiler 'wide' on CPU: over 1,000 scopes>"
    prof.reset()
    for i in range(1000):
        with prof(f"s{i}"):
            pass
    assert repr(prof) == "<HierarchicalProfiler 'wide' on CPU: 1,000 scopes, 1,000 calls>"


_DURATION = r"(\d+(?:\.\d+)?) (ns|us|ms|s)"
_SCALE = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def test_timer_repr_says_state_and_figures():
    prof = HierarchicalProfiler("t")
    t = Timer("load", profiler=prof)
    assert repr(t) == "<Timer 'load': not entered>"
    with t:
        assert repr(t) == "<Timer 'load': running>"
        time.sleep(0.02)
    m = re.fullmatch(rf"<Timer 'load': {_DURATION} wall, {_DURATION} CPU, RAM \+(\d+\.\d) MiB>",
                     repr(t))
    assert m, repr(t)
    wall = float(m.group(1)) * _SCALE[m.group(2)]
    assert 0.019 <= wall <= 5.0 and abs(wall - t.elapsed_wall) <= 0.01 * t.elapsed_wall
    with Timer("quiet", profiler=prof, track_memory=False) as q:
        pass
    assert re.fullmatch(rf"<Timer 'quiet': {_DURATION} wall, {_DURATION} CPU>", repr(q)), repr(q)


@pytest.mark.parametrize("seconds, text", [
    (0.0, "0 s"), (2.5e-8, "25.0 ns"), (3e-9, "3.00 ns"), (0.000309, "309 us"), (0.0009997, "1.00 ms"),
    (0.01234, "12.3 ms"), (1.5, "1.50 s"), (4321.0, "4321 s")])
def test_node_repr_total_in_readable_units(seconds, text):
    node = ProfileNode("stage")
    node.total_wall_time = seconds
    assert repr(node) == f"ProfileNode(name='stage', calls=0, total={text}, children=0)"
    assert "e+" not in repr(node) and "e-" not in repr(node)


# ---- mypy --strict on a user's script ------------------------------------------

def test_mypy_strict_on_a_user_script(tmp_path):
    pytest.importorskip("mypy", reason="mypy is not installed (the [test] extra has it)")
    from reliability_support import UNDER_SANITIZER
    if UNDER_SANITIZER:   # a type check runs none of our C; under ASan it took minutes
        pytest.skip("a type check, not native code: CI's main stage runs it")
    # mypy reads the package where this interpreter imports it from, as a user's
    # checker reads an installed one (errors inside it silenced): a link to it on
    # MYPYPATH, since mypy refuses site-packages there and cannot see editable installs
    pkg = Path(sp.__file__).parent
    root = tmp_path / "path"
    (root / "spatialhub" / "utils").mkdir(parents=True)
    os.symlink(pkg, root / "spatialhub" / "utils" / "profiling")
    env = dict(os.environ, MYPYPATH=str(root))
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
         "--cache-dir", str(tmp_path / "cache"), "--no-error-summary", "--show-error-codes",
         str(TYPING / "user_script.py"), str(TYPING / "expected_errors.py")],
        capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=600)
    out = proc.stdout + proc.stderr
    got = set()
    for line in out.splitlines():
        m = re.match(r"(.*?):(\d+): error: .*\[([\w-]+)\]$", line)
        assert m, f"unexpected mypy output:\n{out}"
        assert Path(m.group(1)).name == "expected_errors.py", f"user_script fails:\n{out}"
        got.add((int(m.group(2)), m.group(3)))
    expected = {(i, m.group(1)) for i, text in enumerate(
        (TYPING / "expected_errors.py").read_text().splitlines(), 1)
        for m in [re.search(r"# E: ([\w-]+)\s*$", text)] if m}
    assert len(expected) >= 6
    assert got == expected, out


def test_every_warm_up_default_is_the_cores_one():
    """The default warm-up is written once (_native.DEFAULT_NUM_WARMUP, from the C macro
    benchmark_callable uses): every public entry point's num_warmup= / warmup= defaults to
    it, and the stub says the same number."""
    import inspect
    import re
    from pathlib import Path

    import spatialhub.utils.profiling as prof
    from spatialhub.utils.profiling import _native

    assert _native.DEFAULT_NUM_WARMUP == 10 and _native.DEFAULT_NUM_ITERS == 50
    seen = []
    for name in prof.__all__:
        obj = getattr(prof, name, None)
        if not callable(obj) or isinstance(obj, type):
            continue
        try:
            params = inspect.signature(obj).parameters
        except (TypeError, ValueError):
            continue
        for p in ("num_warmup", "warmup"):
            if p in params and params[p].default is not inspect.Parameter.empty:
                if p == "num_warmup" and params[p].default is None and "warmup" in params:
                    continue   # None: warmup='s value, its alias (issue 33), checked as warmup
                seen.append(name)
                assert params[p].default == _native.DEFAULT_NUM_WARMUP, (name, p)
    assert {"benchmark_callable", "compare_callables", "profile_model"} <= set(seen), seen
    assert inspect.signature(prof.benchmark_callable).parameters["num_iters"].default == \
        _native.DEFAULT_NUM_ITERS
    stub = (Path(_native.__file__).parent / "_native.pyi").read_text()
    assert re.findall(r"num_warmup: int = (\d+)", stub) == [str(_native.DEFAULT_NUM_WARMUP)]
    assert re.findall(r"num_iters: int = (\d+)", stub) == [str(_native.DEFAULT_NUM_ITERS)]
