"""Repetitions in fresh interpreters (issue 22): the parent's state, how functions travel,
and the launcher's failure modes -- one clear error, never a loop of processes; Ctrl-C
ends every child.  Timing agreement is bench/bench_repeated_agree.py's, not a test's."""
import gc
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import _fresh
from spatialhub.utils.profiling import (BenchmarkInterrupted, _launch, benchmark_repeated,
                                        compare_repeated)

HERE = os.path.dirname(os.path.abspath(__file__))
ONE = dict(num_warmup=0, num_iters=1, track_ram=False)
# a script that must not find cloudpickle, whether or not it is installed here
NO_CLOUDPICKLE = "import sys; sys.modules['cloudpickle'] = None\n"


def rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def script(tmp_path, body, name="s.py", cloudpickle=True):
    path = tmp_path / name
    path.write_text(("" if cloudpickle else NO_CLOUDPICKLE) + textwrap.dedent(body))
    return path


def run_script(path, timeout=180, **kw):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-W", "ignore", str(path)], capture_output=True,
                          text=True, timeout=timeout, cwd=path.parent, env=env, **kw)


def test_each_run_is_a_new_interpreter_never_a_fork(tmp_path):
    out = tmp_path / "r.jsonl"
    s = benchmark_repeated(_fresh.record, str(out), repeat=2, **ONE)
    got = rows(out)
    assert s.run_sizes == (1, 1) and len(got) == 2
    assert len({r["pid"] for r in got}) == 2 and os.getpid() not in {r["pid"] for r in got}
    assert all(r["ppid"] == os.getpid() for r in got)
    assert not any(r["pytest_loaded"] for r in got)   # a fork would have pytest loaded


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
def test_the_child_takes_the_parents_affinity_gc_and_switch_interval(tmp_path, gc_state):
    out = tmp_path / "r.jsonl"
    cpus, threshold, interval = os.sched_getaffinity(0), gc.get_threshold(), sys.getswitchinterval()
    try:
        os.sched_setaffinity(0, {min(cpus)})
        gc.set_threshold(1234, 7, 8)
        gc.disable()
        sys.setswitchinterval(0.0123)
        benchmark_repeated(_fresh.record, str(out), repeat=1, **ONE)
    finally:
        os.sched_setaffinity(0, cpus)
        gc.set_threshold(*threshold)
        sys.setswitchinterval(interval)
    r = rows(out)[0]
    assert r["affinity"] == [min(cpus)]
    assert r["gc"] == [1234, 7, 8] and r["gc_enabled"] is False
    assert r["switch"] == pytest.approx(0.0123)


@pytest.mark.skipif(_launch._native._malloc_mmap_threshold() is None,
                    reason="glibc's mmap threshold cannot be read here")
def test_the_child_runs_at_the_parents_mmap_threshold(tmp_path):
    freed = np.ones(9 * 1024 * 1024 // 8)   # freeing a mapped 9 MiB block raises it past 9 MiB
    del freed
    parent = _launch._native._malloc_mmap_threshold()
    assert parent >= 9 * 1024 * 1024
    out = tmp_path / "r.jsonl"
    s = benchmark_repeated(_fresh.record, str(out), repeat=1, **ONE)
    worker = s.env["worker"]["mmap_threshold"]
    assert worker["parent"] == parent and worker["child_before"] < parent
    assert rows(out)[0]["mmap_threshold"] >= parent   # a fresh one starts at ~128 KiB


def test_reading_the_threshold_leaves_it_where_it_was():
    t = _launch._native._malloc_mmap_threshold()
    if t is None:
        pytest.skip("glibc's mmap threshold cannot be read here")
    assert [_launch._native._malloc_mmap_threshold() for _ in range(3)] == [t] * 3


def test_arrays_arrive_as_the_parent_holds_them(tmp_path):
    out = tmp_path / "r.jsonl"
    base = np.arange(4 * 6 * 3, dtype=np.float64).reshape(4, 6, 3)
    view = base[:, ::2, 1:]   # not contiguous: strides over the parent's buffer
    ro = np.arange(1000, dtype=np.float32)
    ro.flags.writeable = False
    benchmark_repeated(_fresh.record, str(out), view, repeat=1, **ONE)
    benchmark_repeated(_fresh.record, str(out), ro[3:], repeat=1, **ONE)
    strided, readonly = (r["arr"] for r in rows(out))
    assert strided["strides"] == list(view.strides) and not strided["c_contiguous"]
    assert strided["align64"] == view.__array_interface__["data"][0] % 64
    assert strided["sum"] == float(view.sum())
    assert readonly["writeable"] is False and readonly["sum"] == float(ro[3:].sum())
    assert readonly["align64"] == ro[3:].__array_interface__["data"][0] % 64


def test_compare_repeated_alternates_the_sides(tmp_path):
    out = tmp_path / "r.jsonl"
    c = compare_repeated(_fresh.record, _fresh.record, str(out), repeat=3, name_a="a",
                         name_b="b", **ONE)
    assert c.baseline == "a" and c.candidate == "b"
    assert c.baseline_runs == c.candidate_runs == 3
    # record's label keyword is not set: tell the sides apart by the order of the pids
    got = rows(out)
    assert len(got) == 6 and len({r["pid"] for r in got}) == 6


def test_compare_repeated_order_is_a_b_then_b_a(tmp_path):
    out = tmp_path / "r.jsonl"
    import functools

    a = functools.partial(_fresh.record, str(out), label="a")
    b = functools.partial(_fresh.record, str(out), label="b")
    compare_repeated(a, b, repeat=4, **ONE)
    assert [r["label"] for r in rows(out)] == list("abbaabba")
    with pytest.raises(ValueError, match="repeat must be >= 2"):
        compare_repeated(a, b, repeat=1)
    with pytest.raises(TypeError, match="name_a= and name_b="):
        compare_repeated(a, b, name="x")


def test_the_users_exception_propagates_with_where_it_came_from():
    with pytest.raises(KeyError, match="the user's own") as info:
        benchmark_repeated(_fresh.fail, "key", repeat=2, **ONE)
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "raised in the fresh process 1 of 2" in notes and "Traceback" in notes


def test_a_child_that_dies_is_one_clear_error():
    with pytest.raises(RuntimeError, match=r"fresh process 1 of 3 exited with status 7 before "
                                           r"it reported a result"):
        benchmark_repeated(_fresh.fail, "exit", repeat=3, **ONE)


def test_a_notebook_function_is_refused_before_any_process_starts(monkeypatch):
    main = sys.modules["__main__"]

    def work(x):
        return x
    work.__module__, work.__qualname__ = "__main__", "work_from_a_cell"
    monkeypatch.setattr(main, "work_from_a_cell", work, raising=False)
    monkeypatch.setattr(_launch, "_main_origin", lambda: None)   # no file: a notebook
    monkeypatch.setattr(_launch, "_cloudpickle", lambda: None)

    def no_process(*a, **k):
        raise AssertionError("a process was started")
    monkeypatch.setattr(subprocess, "Popen", no_process)
    with pytest.raises(TypeError, match=r"'work_from_a_cell' .* defined in __main__ of an "
                                        r"interactive session .* install cloudpickle"):
        benchmark_repeated(work, 1, repeat=2)
    with pytest.raises(TypeError, match="must be picklable .* or install cloudpickle"):
        benchmark_repeated(lambda: None, repeat=2)


def test_a_script_without_the_main_guard_gets_one_error_not_a_loop(tmp_path):
    path = script(tmp_path, cloudpickle=False, body="""
        from spatialhub.utils.profiling import benchmark_repeated

        def work(x):
            return x + 1

        benchmark_repeated(work, 1, repeat=3, num_warmup=0, num_iters=2)
        print("finished")
    """)
    t0 = time.monotonic()
    p = run_script(path)
    assert p.returncode == 1 and "finished" not in p.stdout
    assert p.stderr.count("Traceback") == 1, p.stderr   # one error, from the parent
    assert "calls benchmark_repeated at its top level" in p.stderr
    assert 'if __name__ == "__main__":' in p.stderr
    assert time.monotonic() - t0 < 120


def test_a_script_without_the_guard_works_when_the_function_is_in_a_module(tmp_path):
    path = script(tmp_path, cloudpickle=False, body="""
        import _fresh
        from spatialhub.utils.profiling import benchmark_repeated
        s = benchmark_repeated(_fresh.fail, "no", repeat=2, num_warmup=0, num_iters=3)
        print("runs", s.run_sizes)
    """)
    p = run_script(path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "runs (3, 3)"


def test_a_guarded_script_s_own_function_works_without_cloudpickle(tmp_path):
    path = script(tmp_path, cloudpickle=False, body="""
        from spatialhub.utils.profiling import benchmark_repeated

        class Offset:
            def __init__(self, k):
                self.k = k

        def work(x, off):
            return x + off.k

        if __name__ == "__main__":
            s = benchmark_repeated(work, 1, Offset(2), repeat=2, num_warmup=0, num_iters=3)
            print("runs", s.run_sizes)
    """)
    p = run_script(path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "runs (3, 3)"


def test_cloudpickle_sends_a_scripts_function_by_value(tmp_path):
    pytest.importorskip("cloudpickle")
    path = script(tmp_path, """
        from spatialhub.utils.profiling import benchmark_repeated
        k = 3
        s = benchmark_repeated(lambda x: x + k, 1, repeat=2, num_warmup=0, num_iters=3)
        print("runs", s.run_sizes)
    """)
    p = run_script(path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "runs (3, 3)"


@pytest.mark.skipif(os.name != "posix", reason="SIGINT to a process group")
def test_ctrl_c_ends_every_child_and_keeps_the_completed_runs(tmp_path):
    pids = tmp_path / "pids.txt"
    path = script(tmp_path, f"""
        import _fresh, sys
        from spatialhub.utils.profiling import BenchmarkInterrupted, benchmark_repeated
        if __name__ == "__main__":
            try:
                benchmark_repeated(_fresh.slow, {str(pids)!r}, repeat=50, num_warmup=0,
                                   num_iters=20)
            except BenchmarkInterrupted as exc:
                print("kept", len(exc.stats.run_sizes), flush=True)
                sys.exit(3)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-W", "ignore", str(path)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:   # wait for the second child to be timing
        if pids.exists() and len(set(pids.read_text().split())) >= 2:
            break
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)   # what a terminal's Ctrl-C does: the whole group
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    assert out.startswith("kept "), out
    time.sleep(0.5)
    for pid in set(int(p) for p in pids.read_text().split()):
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_a_sigint_to_the_parent_alone_ends_the_running_child(tmp_path):
    if os.name != "posix":
        pytest.skip("POSIX signals")
    pids = tmp_path / "pids.txt"
    path = script(tmp_path, f"""
        import _fresh
        from spatialhub.utils.profiling import benchmark_repeated
        if __name__ == "__main__":
            benchmark_repeated(_fresh.slow, {str(pids)!r}, repeat=50, num_warmup=0, num_iters=200)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-W", "ignore", str(path)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not pids.exists():
        time.sleep(0.2)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)   # kill -INT <parent>: the child sees nothing
    out, err = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "KeyboardInterrupt" in err
    time.sleep(0.5)
    for pid in set(int(p) for p in pids.read_text().split()):
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_interrupted_carries_the_pool_of_each_sides_completed_runs():
    from spatialhub.utils.profiling import _native
    from spatialhub.utils.profiling.runner import _interrupted_runs

    def run(level):
        s = _native._stats_from_samples(np.full(20, level))
        s.machine_busy = False
        return s
    assert _interrupted_runs("benchmark_repeated", 0, 5, [([], "x")]) is None
    one = _interrupted_runs("benchmark_repeated", 2, 5, [([run(1.0), run(1.2)], "x")])
    assert isinstance(one, BenchmarkInterrupted) and "round 3 of 5" in str(one)
    assert one.stats.run_sizes == (20, 20) and one.stats.name == "x"
    two = _interrupted_runs("compare_repeated", 1, 5, [([run(1.0)], "a"), ([], "b")])
    assert two.stats[0].run_sizes == (20,) and two.stats[1] is None
    assert "the 1 and 0 completed run(s)" in str(two)


def _run_cells(cells, tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = nbclient.NotebookClient(nb, timeout=240, kernel_name="python3", allow_errors=True,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    return [o for c in nb.cells for o in c.outputs]


FROM_A_CELL = [
    "import warnings\nwarnings.simplefilter('ignore')\n"
    "from spatialhub.utils.profiling import benchmark_repeated",
    "def work(x):\n    return sorted(x)",
]


def test_a_notebook_cells_function_runs_with_cloudpickle(tmp_path):
    pytest.importorskip("cloudpickle")
    outs = _run_cells(FROM_A_CELL + [
        "s = benchmark_repeated(work, [3, 1, 2], repeat=2, num_warmup=0, num_iters=3)\n"
        "print('runs', s.run_sizes)"], tmp_path)
    assert not [o for o in outs if o.output_type == "error"], outs
    assert "runs (3, 3)" in "".join(o.get("text", "") for o in outs)


def test_a_notebook_cells_function_without_cloudpickle_is_one_type_error(tmp_path):
    outs = _run_cells(["import sys\nsys.modules['cloudpickle'] = None"] + FROM_A_CELL + [
        "benchmark_repeated(work, [3, 1, 2], repeat=2)"], tmp_path)
    errors = [o for o in outs if o.output_type == "error"]
    assert len(errors) == 1 and errors[0].ename == "TypeError", outs
    assert "interactive session" in errors[0].evalue and "cloudpickle" in errors[0].evalue


def test_the_child_takes_torchs_and_threadpoolctls_thread_counts(tmp_path, monkeypatch):
    # stand-ins with the real modules' calls, so that no torch install is needed; the
    # child imports them from the parent's sys.path, as it would the real ones
    (tmp_path / "torch.py").write_text(textwrap.dedent("""
        _n = [4, 4]
        def get_num_threads(): return _n[0]
        def get_num_interop_threads(): return _n[1]
        def set_num_threads(k): _n[0] = k
        def set_num_interop_threads(k): _n[1] = k
    """))
    (tmp_path / "threadpoolctl.py").write_text(textwrap.dedent("""
        import json, os
        def threadpool_info():
            return [{"user_api": "blas", "num_threads": 1}, {"user_api": "openmp", "num_threads": 2}]
        def threadpool_limits(limits=None):
            with open(os.environ["LIMITS_LOG"], "a") as f:
                f.write(json.dumps(limits) + "\\n")
            return object()
    """))
    (tmp_path / "uses_torch.py").write_text(textwrap.dedent("""
        import json, torch
        def report(path):
            with open(path, "a") as f:
                f.write(json.dumps([torch.get_num_threads(), torch.get_num_interop_threads()]) + "\\n")
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("LIMITS_LOG", str(tmp_path / "limits.jsonl"))
    for name in ("torch", "threadpoolctl", "uses_torch"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    import threadpoolctl  # noqa: F401  (the stand-in: "loaded in the parent")
    import uses_torch
    try:
        sys.modules["torch"].set_num_threads(3)
        sys.modules["torch"].set_num_interop_threads(2)
        out = tmp_path / "r.jsonl"
        s = benchmark_repeated(uses_torch.report, str(out), repeat=1, **ONE)
    finally:
        for name in ("torch", "threadpoolctl", "uses_torch"):
            sys.modules.pop(name, None)   # no stand-in may outlive this test
    assert json.loads(out.read_text()) == [3, 2]
    assert s.env["worker"]["torch_threads"] == [3, 2]
    assert s.env["worker"]["blas_threads"] == {"blas": 1, "openmp": 2}
    assert rows(tmp_path / "limits.jsonl") == [{"blas": 1, "openmp": 2}]
