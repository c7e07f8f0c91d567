"""Reliability round 4 (issue 30), the fresh-process launcher: what crosses into a fresh
interpreter (benchmark_repeated, compare_repeated, the CLI's --processes) and back arrives
as it left.  A non-contiguous structured, sub-array or metadata-carrying array keeps its
dtype whole (defect 2); a relayed warning is the class an in-process run raises, with its
attributes, .causes, .benchmark and .stats, so filters and -W error match (defect 7), and
is counted once per process; a child that fails to load the script with a long report
while a large job is sent is reported, bounded, never a deadlock, on both the POSIX path
and the stdout-pipe path Windows takes (defect 9); a user's exception whose __init__
plain pickle cannot call arrives as itself.  The audit's other kinds of arguments (object,
0-d, byte-swapped, datetime64, negative strides, Fortran order, read-only) are checked
to arrive as the parent holds them, an array of objects keeps its strides, and the
pooled result keeps what every run measured (cache mode, counters, GPU times).  Each of
those tests failed on a601027; two guard what already held and must stay so: a warning
class the parent lacks still arrives, and Ctrl-C while the job is sent ends the child and
leaves no thread (docs/reliability.md, "Round 4")."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

import _fresh
import spatialhub.utils.profiling as prof
from spatialhub.utils.profiling import _native, benchmark_repeated

HERE = os.path.dirname(os.path.abspath(__file__))
ONE = dict(num_warmup=0, num_iters=1, track_ram=False)


def described(tmp_path, *arrays):
    """How a fresh process holds `arrays`, and how this one does, as JSON rows."""
    out = tmp_path / "d.jsonl"
    benchmark_repeated(_fresh.describe, str(out), *arrays, repeat=1, **ONE)
    child = json.loads(out.read_text().splitlines()[-1])
    _fresh.describe(str(tmp_path / "here.jsonl"), *arrays)
    here = json.loads((tmp_path / "here.jsonl").read_text().splitlines()[-1])
    return child, here


def run_script(tmp_path, body, timeout=120):
    """Run `body` as a script in its own session; a hang past `timeout` kills the whole
    group (the script and its children) and fails the test."""
    path = tmp_path / "s.py"
    path.write_text(textwrap.dedent(body))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, str(path)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"the script was still running after {timeout} s (a deadlock)")
    return proc.returncode, out, err


# ---- defect 2: a strided array's dtype arrives whole --------------------------------------

def test_a_strided_structured_array_keeps_its_fields_subarrays_and_metadata(tmp_path):
    pair = np.zeros(6, dtype=[("x", "<f4"), ("y", "<i8")])
    pair["x"], pair["y"] = np.arange(6) / 2, 10 * np.arange(6)
    aligned = np.zeros(6, dtype=np.dtype([("x", "<f4"), ("y", "<i8")], align=True))
    aligned["y"] = [7, 8, 9, 10, 11, 12]
    vectors = np.zeros((4, 3), dtype=[("v", "<f4", (2,))])
    vectors["v"] = np.arange(24).reshape(4, 3, 2)
    metres = np.arange(10, dtype=np.dtype(np.float64, metadata={"unit": "m"}))
    arrays = (pair[::2], aligned[::2], vectors[:, ::2], metres[::3])
    assert not any(a.flags.c_contiguous or a.flags.f_contiguous for a in arrays)
    child, here = described(tmp_path, *arrays)
    assert child == here
    # what a user reads: the fields by name, the sub-array, the unit
    assert child[0]["dtype"]["names"] == ["x", "y"]
    assert child[0]["values"] == "[(0.0, 0), (1.0, 20), (2.0, 40)]"
    assert child[1]["dtype"]["aligned_struct"] is True
    assert child[1]["values"] == "[(0.0, 7), (0.0, 9), (0.0, 11)]"
    assert child[2]["dtype"]["descr"] == "[('v', '<f4', (2,))]" and child[2]["shape"] == [4, 2]
    assert child[3]["dtype"]["metadata"] == {"unit": "m"}
    assert [c["strides"] for c in child] == [[24], [32], [24, 16], [24]]   # still views


def test_arguments_of_every_other_kind_arrive_as_the_parent_holds_them(tmp_path):
    objects = np.array([1, "a", None, (2, 3)], dtype=object)
    swapped = np.arange(10, dtype=">i4")
    stamps = np.array(["2026-01-01T00:00:00.001", "2026-01-02", "2026-03-04"],
                      dtype="datetime64[ms]")
    fortran = np.asfortranarray(np.arange(12.0).reshape(3, 4))
    frozen = np.asfortranarray(np.arange(6.0).reshape(2, 3))
    frozen.flags.writeable = False
    strided_ro = np.arange(10.0)[::2]
    strided_ro.flags.writeable = False
    field = np.zeros(5, dtype=[("a", "<i2"), ("b", "<f8")])
    field["b"] = np.arange(5) * 1.5
    arrays = (objects, objects[::2], np.array(3.5), swapped[::3], stamps[::2],
              np.arange(10.0)[::-1], fortran, frozen, strided_ro, field["b"])
    child, here = described(tmp_path, *arrays)
    assert child == here
    assert child[3]["dtype"]["byteorder"] == ">" and child[3]["values"] == "[0, 3, 6, 9]"
    assert child[4]["dtype"]["datetime_unit"] == "ms"
    assert child[5]["strides"] == [-8] and child[6]["f_contiguous"] is True
    assert child[7]["writeable"] is False and child[8]["writeable"] is False
    assert child[9]["strides"] == [10]   # a field's view: a stride of the record size


# ---- defect 7: a relayed warning is the in-process class, with what it carries ----------

def test_a_relayed_warning_is_the_class_an_in_process_run_raises_with_its_attributes():
    # a native no-op on an accelerator label nothing syncs: "no device sync", and the
    # median is the harness's floor itself: "overhead-dominated"; one combined class
    opts = dict(device="xpu", num_warmup=0, num_iters=5, track_ram=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        benchmark_repeated(_native._noop, repeat=2, **opts)
    # (a busy machine, said by one child and not the other, would make a second group)
    ours = [r for r in caught if issubclass(r.category, prof.BenchmarkWarning)]
    assert 1 <= len(ours) <= 2, [str(r.message) for r in ours]
    w = ours[0]
    m = w.message
    assert {"no device sync", "overhead-dominated"} <= set(m.causes)
    assert type(m) is _native._warning_class(m.causes)   # the class an in-process run gives
    assert isinstance(m, prof.NoDeviceSyncWarning) and isinstance(m, prof.OverheadWarning)
    assert m.device == "xpu" and m.benchmark == "BenchmarkTarget"
    assert m.median_ms > 0 and m.overhead_ms > 0
    assert isinstance(m.stats, prof.BenchmarkStats) and m.stats.timed_iters == 5
    assert "worker" in m.stats.env   # the child's own result
    import re
    assert re.match(r"benchmark 'BenchmarkTarget' \(statistics.md#the-causes\), in (2 of 2 "
                    r"fresh processes; the first shown|1 of 2 fresh processes):\n", str(m)), m
    assert w.filename == __file__   # the user's line, as before

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        warnings.filterwarnings("error", category=prof.NoDeviceSyncWarning)
        with pytest.raises(prof.NoDeviceSyncWarning) as info:
            benchmark_repeated(_native._noop, repeat=1, **opts)
    assert "no device sync" in info.value.causes and info.value.stats.timed_iters == 5


@pytest.mark.filterwarnings("error::spatialhub.utils.profiling.NoDeviceSyncWarning")
def test_an_error_filter_named_as_on_the_command_line_raises_from_fresh_processes():
    # what pytest's and Python's -W error::MODULE.CLASS install (Python's own -W cannot
    # name a class of an installed package: it is read before site-packages is on the path)
    with pytest.raises(prof.NoDeviceSyncWarning) as info:
        benchmark_repeated(_native._noop, repeat=1, device="xpu", num_warmup=0, num_iters=3,
                           track_ram=False)
    assert "no device sync" in info.value.causes and info.value.device == "xpu"
    assert info.value.stats.timed_iters == 3


def test_a_users_warning_is_counted_once_per_process_with_its_class_and_attributes():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        benchmark_repeated(_fresh.warn_every_call, repeat=2, num_warmup=1, num_iters=3,
                           track_ram=False)
    mine = [r for r in caught if issubclass(r.category, _fresh.SlowPathWarning)]
    assert len(mine) == 1, [str(r.message) for r in caught]
    # 4 calls in each of 2 processes: said once, "in 2 of 2", not "in 8 of 2"
    assert str(mine[0].message) == "took the slow path (in 2 of 2 fresh processes; the first shown)"
    assert mine[0].message.path_taken == "slow"


def test_a_warning_class_the_parent_lacks_still_arrives(tmp_path, monkeypatch):
    (tmp_path / "only_in_the_child.py").write_text(textwrap.dedent("""
        import warnings
        class LonelyWarning(UserWarning):
            pass
        def warn():
            warnings.warn("said by a module the parent never imported", LonelyWarning)
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        benchmark_repeated(_fresh.warn_from, "only_in_the_child", repeat=1, **ONE)
    assert "only_in_the_child" not in sys.modules
    texts = [str(r.message) for r in caught if r.category is UserWarning]
    assert texts == ["only_in_the_child.LonelyWarning: said by a module the parent never "
                     "imported (in a fresh process)"], [str(r.message) for r in caught]


# ---- defect 9: a load failure with a long report while a large job is sent ---------------

@pytest.mark.parametrize("path", ["posix", "stdout pipe"])
def test_a_long_load_error_during_a_large_job_is_reported_not_a_deadlock(tmp_path, path):
    # without cloudpickle the child loads this script to find `work`; loaded there
    # (not as __main__) it raises with a 300 KB message, before it reads the 16 MB job
    rc, out, err = run_script(tmp_path, f"""
        import sys
        sys.modules["cloudpickle"] = None
        import threading
        import numpy as np
        from spatialhub.utils.profiling import _launch, benchmark_repeated

        def work(a):
            return a[0]

        if __name__ == "__main__":
            _launch._STDOUT_PIPE = {path == "stdout pipe"}   # Windows' way, here too
            try:
                benchmark_repeated(work, np.ones(2 * 1024 * 1024), repeat=1, num_warmup=0,
                                   num_iters=1)
            except RuntimeError as exc:
                print("threads", threading.active_count())
                raise
        else:
            raise ImportError("refusing to load: " + "x" * 300_000)
    """, timeout=90)
    assert rc == 1 and out.strip() == "threads 1", (out, err[-2000:])
    assert ("could not load the function or its arguments: builtins.ImportError: refusing "
            "to load: xxx") in err
    assert "characters cut]" in err   # the report is bounded, and says so
    assert len(err) < 100_000, len(err)


@pytest.mark.skipif(os.name != "posix", reason="POSIX signals")
@pytest.mark.parametrize("path", ["posix", "stdout pipe"])
def test_ctrl_c_while_the_job_is_sent_ends_the_child_and_leaves_no_thread(tmp_path, path):
    # the child loads this script (no cloudpickle) and sleeps there before it reads the
    # 16 MB job, so the parent is still sending it when its Ctrl-C comes
    pids = tmp_path / "pids.txt"
    script = tmp_path / "s.py"
    script.write_text(textwrap.dedent(f"""
        import os, sys, threading, time
        sys.modules["cloudpickle"] = None
        import numpy as np
        from spatialhub.utils.profiling import _launch, benchmark_repeated

        def work(a):
            return a[0]

        if __name__ == "__main__":
            _launch._STDOUT_PIPE = {path == "stdout pipe"}
            try:
                benchmark_repeated(work, np.ones(2 * 1024 * 1024), repeat=1, num_warmup=0,
                                   num_iters=1)
            except KeyboardInterrupt:
                print("interrupted; threads", threading.active_count(), flush=True)
                sys.exit(3)
        else:
            with open({str(pids)!r}, "a") as f:
                f.write(f"{{os.getpid()}}\\n")
            time.sleep(60)
    """))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (pids.exists() and pids.read_text()):
            time.sleep(0.1)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)   # the parent alone: the child ignores SIGINT
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 3 and out.strip() == "interrupted; threads 1", (out, err)
    child = int(pids.read_text().split()[0])
    time.sleep(0.3)
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)


# ---- the audit: a user's exception that plain pickle cannot rebuild ----------------------

def test_an_exception_whose_init_takes_other_arguments_arrives_as_itself():
    with pytest.raises(_fresh.Strict) as info:
        benchmark_repeated(_fresh.raise_strict, repeat=1, **ONE)
    exc = info.value
    assert exc.args == ("refused",) and exc.code == 42
    notes = exc.__notes__
    assert notes[0] == "the user's own note"
    assert any(n.startswith("raised in the fresh process 1 of 1") for n in notes)


# ---- the audit: the pooled result keeps what every run measured --------------------------

def test_the_pool_keeps_the_cache_mode_the_runs_had(tmp_path):
    s = benchmark_repeated(sorted, [3, 1, 2], cache="cold", repeat=2, **ONE)
    assert s.cache == "cold"   # was None: the pool dropped it


def test_the_pool_keeps_counters_gpu_times_and_peaks_of_its_runs():
    def run(level, gpu, instructions, share, met, peak):
        r = _native._stats_from_samples(np.full(20, level))
        r.cache, r.counter_source, r.instructions_per_call = "warm", "perf_event", instructions
        r.gpu_samples_ms, r.host_share, r.target_met = (gpu,) * 20, share, met
        r.torch_max_allocated_mb = peak
        return r
    p = _native._pool([run(1.0, 0.5, 100.0, 0.2, True, 3.0), run(1.2, 0.7, 120.0, 0.4, False, 5.0)],
                      name="x", runs=True, fresh=True)
    assert (p.cache, p.counter_source, p.instructions_per_call) == ("warm", "perf_event", 110.0)
    assert len(p.gpu_samples_ms) == 40 and p.gpu_median_ms == pytest.approx(0.6)
    assert p.gpu_p95_ms == pytest.approx(0.7) and p.host_share == pytest.approx(0.3)
    assert p.target_met is False and p.torch_max_allocated_mb == 5.0


# ---- the remedy words cross too ---------------------------------------------------------

def test_a_fresh_process_says_its_remedies_in_the_parents_words(tmp_path):
    """Under the CLI's --processes a relayed warning named num_warmup= / num_iters=: the
    child ran benchmark_callable with its own words.  The parent's words travel with the
    job."""
    from spatialhub.utils.profiling import _words

    path = tmp_path / "words.json"
    with _words.remedy_words(_words.CLI):
        benchmark_repeated(_fresh.record_words, str(path), repeat=1, **ONE)
    assert tuple(json.loads(path.read_text())) == _words.CLI
    path.unlink()
    benchmark_repeated(_fresh.record_words, str(path), repeat=1, **ONE)
    assert tuple(json.loads(path.read_text())) == _words.CALLABLE
