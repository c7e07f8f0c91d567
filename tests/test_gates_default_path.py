"""The gates decide on a spread measured on the default path (issue 32): a saved CLI run
holds ten fresh processes, a saving or comparing pytest run its benchmarks' medians in
fresh processes; with nothing measured, the answer says so and decides nothing.  The
workloads differ by 2x or more (sleeps), so that these tests state the rule, not the
machine's noise: the rates at 1.1-1.5x are bench/bench_gate_power.py's."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

WORK = """
import os, time
SCALE = float(os.environ.get("WORK_SCALE", "1"))

def work():
    time.sleep(0.002 * SCALE)
"""


def _env(scale, folder):
    env = dict(os.environ)
    env.pop("PYTEST_ADDOPTS", None)
    env["WORK_SCALE"] = str(scale)
    env["PYTHONPATH"] = str(folder) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def cli(folder, scale, *args):
    return subprocess.run([sys.executable, "-m", "spatialhub.utils.profiling", *map(str, args)],
                          capture_output=True, text=True, timeout=600, cwd=folder,
                          env=_env(scale, folder))


def test_a_saved_cli_run_holds_its_spread_and_the_gate_decides_on_it(tmp_path):
    (tmp_path / "work.py").write_text(WORK)
    run = ("--callable", "work:work", "--iters", "10", "--warmup", "2", "--no-progress")
    a = cli(tmp_path, 1.0, *run, "--json", tmp_path / "a.json")
    assert a.returncode == 0, a.stderr
    assert "measuring in 10 fresh processes" in a.stderr
    saved = json.loads((tmp_path / "a.json").read_text())
    assert saved["run_sizes"] == [10] * 10 and saved["run_spread"] is not None
    b = cli(tmp_path, 3.0, *run, "--json", tmp_path / "b.json")
    assert b.returncode == 0, b.stderr
    gate = cli(tmp_path, 1.0, "--compare", tmp_path / "a.json", tmp_path / "b.json",
               "--fail-if-slower", "10")
    assert gate.returncode == 3, gate.stdout + gate.stderr
    assert "10 and 10 runs" in gate.stdout and "slower" in gate.stdout
    same = cli(tmp_path, 1.0, "--compare", tmp_path / "a.json", tmp_path / "a.json",
               "--fail-if-slower", "10")
    assert same.returncode == 0 and "same: the same samples on both sides" in same.stdout


def run_pytest(folder, scale, *args):
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "no:benchmark", "--benchmark-max-time=0.05", *args],
                          capture_output=True, text=True, timeout=600, cwd=folder,
                          env=_env(scale, folder))


@pytest.fixture
def suite(tmp_path):
    (tmp_path / "work.py").write_text(WORK)
    (tmp_path / "test_w.py").write_text(textwrap.dedent("""
        from work import work

        def test_work(benchmark):
            benchmark(work)

        def test_plain():
            with open("plain.runs", "a") as f:   # a probe runs benchmarks only
                f.write("x")
    """))
    return tmp_path


def saved_runs(folder):
    return sorted((folder / ".benchmarks").rglob("*.json"))


def test_a_saving_pytest_run_measures_its_spread_in_fresh_processes(suite):
    p = run_pytest(suite, 1.0, "--benchmark-autosave", "--benchmark-processes=2")
    assert p.returncode == 0, p.stdout[-3000:]
    [path] = saved_runs(suite)
    b = json.loads(path.read_text())["benchmarks"][0]
    medians = b["spatialhub"]["process_medians_s"]
    assert len(medians) == 3 and all(0.0015 < m < 0.05 for m in medians), medians
    assert (suite / "plain.runs").read_text() == "x"   # the probes ran no other test
    assert "spread between runs measured in 2 more fresh processes" in p.stdout


def test_the_pytest_gate_decides_on_process_medians(suite):
    assert run_pytest(suite, 1.0, "--benchmark-autosave",
                      "--benchmark-processes=2").returncode == 0
    gate = ("--benchmark-compare", "--benchmark-compare-fail=median:10%",
            "--benchmark-processes=2")
    same = run_pytest(suite, 1.0, *gate)
    assert same.returncode == 0, same.stdout[-3000:]
    slow = run_pytest(suite, 3.0, *gate)
    assert slow.returncode == 1 and "Performance has regressed" in slow.stdout, slow.stdout[-3000:]


def test_with_nothing_measured_the_gate_says_so_and_does_not_decide(suite):
    assert run_pytest(suite, 1.0, "--benchmark-autosave",
                      "--benchmark-processes=0").returncode == 0
    b = json.loads(saved_runs(suite)[0].read_text())["benchmarks"][0]
    assert b["spatialhub"]["process_medians_s"] is None
    slow = run_pytest(suite, 3.0, "--benchmark-compare", "--benchmark-compare-fail=median:10%",
                      "--benchmark-processes=0", "--benchmark-json=out.json")
    assert slow.returncode == 0, slow.stdout[-3000:]   # one saved run, nothing measured
    verdict = json.loads((suite / "out.json").read_text())["benchmarks"][0]["spatialhub"]
    assert verdict["comparison"]["verdict"] == "inconclusive"
    assert "no between-run spread measured" in verdict["comparison"]["reason"]


def test_a_pytest_run_inside_another_takes_no_probe_unless_asked(suite):
    env = _env(1.0, suite)
    env["PYTEST_CURRENT_TEST"] = "outer::test (call)"
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
                        "no:benchmark", "--benchmark-max-time=0.05", "--benchmark-autosave"],
                       capture_output=True, text=True, timeout=300, cwd=suite, env=env)
    assert p.returncode == 0, p.stdout[-3000:]
    b = json.loads(saved_runs(suite)[0].read_text())["benchmarks"][0]
    assert b["spatialhub"]["process_medians_s"] is None
