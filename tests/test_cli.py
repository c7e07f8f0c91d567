"""The command line, run as a user runs it: in a subprocess."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROW = "| **ImagePreprocessor** | `CPU` |"


def cli(*args, cwd=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "spatialhub.utils.profiling", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, timeout=timeout)


def assert_one_line_error(proc, code, *fragments):
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr
    # findings about the run (BenchmarkWarning: page faults, noise) come as one line each
    lines = [line for line in proc.stderr.splitlines()
             if line.strip() and not line.startswith("spatialhub-bench: warning: ")]
    assert len(lines) == 1 or code == 2, proc.stderr  # argparse adds a usage line
    for f in fragments:
        assert f in proc.stderr


@pytest.fixture(scope="module")
def demo_json(tmp_path_factory):
    d = tmp_path_factory.mktemp("demo")
    proc = cli("--iters", 20, "--warmup", 2, "--json", d / "a.json", "--markdown", d / "a.md")
    assert proc.returncode == 0, proc.stderr
    return d, proc


def test_no_arguments_runs_the_demo_and_prints_the_table():
    proc = cli()
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("### Demo")
    assert lines[2].startswith("| Model / Target | Device |")
    assert sum(line.startswith(ROW) for line in lines) == 1


def test_json_and_markdown_files_hold_the_run(demo_json):
    d, proc = demo_json
    data = json.loads((d / "a.json").read_text())
    assert (data["name"], data["device"]) == ("ImagePreprocessor", "CPU")
    # a saved run measures the spread between runs: 10 fresh processes, 2 + 20 calls each
    assert data["run_sizes"] == [20] * 10
    assert (data["warmup_iters"], data["timed_iters"]) == (2 * 10, 20 * 10)
    assert len(data["samples_ms"]) == 200
    assert data["min_ms"] <= data["median_ms"] <= data["max_ms"]
    assert (d / "a.md").read_text() == proc.stdout


def test_compare_renders_both_results_and_a_verdict(demo_json, tmp_path):
    d, _ = demo_json
    proc = cli("--iters", 20, "--warmup", 2, "--name", "Again", "--json", tmp_path / "b.json")
    assert proc.returncode == 0, proc.stderr
    proc = cli("--compare", d / "a.json", tmp_path / "b.json", "--markdown", tmp_path / "cmp.md",
               "--json", tmp_path / "cmp.json")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert ROW in out and "| **Again** |" in out
    assert "| baseline |" in out  # the "vs Baseline" column
    verdict = json.loads((tmp_path / "cmp.json").read_text())
    assert (verdict["baseline"], verdict["candidate"]) == ("ImagePreprocessor", "Again")
    assert verdict["verdict"] in ("faster", "slower", "same", "inconclusive")
    assert verdict["reason"] and verdict["margin"] == 0.05
    assert verdict["ci95_low"] <= verdict["ratio"] <= verdict["ci95_high"]
    assert f"**{verdict['verdict']}**" in out
    assert (tmp_path / "cmp.md").read_text() == out


def test_compare_of_several_pairs_sets_each_candidate_against_its_own_baseline(tmp_path):
    # e.g. CPU and CUDA providers before and after a change: the candidate on
    # CUDA must be compared with the baseline on CUDA, not with the CPU row.
    from spatialhub.utils.profiling import BenchmarkStats

    def result(name, ms):
        return BenchmarkStats(name, "CPU", ms, ms, 0.0, ms, ms, ms, 1000.0 / ms, 0, 40,
                              samples_ms=[ms * (1 + 0.01 * (i % 5)) for i in range(40)])

    base = [result("cpu", 10.0), result("cuda", 1.0)]
    cand = [result("cpu", 10.0), result("cuda", 2.0)]   # cuda got 2x slower, cpu unchanged
    for path, rs in (("b.json", base), ("c.json", cand)):
        (tmp_path / path).write_text(json.dumps([r.to_dict(samples=True) for r in rs]))
    proc = cli("--compare", tmp_path / "b.json", tmp_path / "c.json", "--json", tmp_path / "v.json",
               "--run-spread", "0")
    assert proc.returncode == 0, proc.stderr
    verdicts = [v["verdict"] for v in json.loads((tmp_path / "v.json").read_text())]
    assert verdicts == ["same", "slower"]
    tables = [t for t in proc.stdout.split("\n\n") if t.startswith("| Model / Target")]
    assert len(tables) == 2
    rows = [[line for line in t.splitlines()[2:]] for t in tables]
    # each table: its baseline, then its candidate, judged against that baseline
    assert rows[0][0].startswith("| **cpu** |") and rows[0][1].startswith("| **cpu** |")
    assert rows[1][0].startswith("| **cuda** |") and rows[1][1].startswith("| **cuda** |")
    assert "slower" in rows[1][1] and "slower" not in rows[0][1]


def test_compare_of_results_without_samples_is_a_runtime_error(tmp_path):
    from spatialhub.utils.profiling import BenchmarkStats

    s = BenchmarkStats("x", "CPU", 1, 1, 0, 1, 1, 1, 1000, 0, 1)
    (tmp_path / "s.json").write_text(s.to_json())
    proc = cli("--compare", tmp_path / "s.json", tmp_path / "s.json")
    assert_one_line_error(proc, 1, "no raw samples")


def test_callable_gets_one_random_array_per_args_shape(tmp_path):
    (tmp_path / "userops.py").write_text(
        "import numpy as np\n"
        "def add(a, b):\n"
        "    assert a.shape == (2, 3) and b.shape == (4,) and a.dtype == np.float32, (a.shape, b.shape)\n"
        "    return a.sum() + b.sum()\n"
    )
    proc = cli("--callable", "userops:add", "--args-shape", "2,3", "--args-shape", "4",
               "--iters", 7, "--warmup", 1, "--json", tmp_path / "r.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads((tmp_path / "r.json").read_text())
    # 10 fresh processes (a saved run's default), each importing userops and timing 1 + 7 calls
    assert (data["name"], data["run_sizes"]) == ("add", [7] * 10)
    assert (data["timed_iters"], data["warmup_iters"]) == (70, 10)
    assert "| **add** |" in proc.stdout


def test_callable_failure_is_one_line_and_status_1(tmp_path):
    (tmp_path / "bad.py").write_text("def boom():\n    raise ZeroDivisionError('nope')\n")
    proc = cli("--callable", "bad.py:boom", "--iters", 2, cwd=tmp_path)
    assert_one_line_error(proc, 1, "ZeroDivisionError: nope")


def test_torch_module_goes_through_profile_model(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "nets.py").write_text(
        "import torch\n"
        "net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 2))\n"
    )
    proc = cli("--callable", "nets:net", "--args-shape", "1,3,4", "--batch-sizes", "1,8",
               "--iters", 5, "--warmup", 1, "--json", tmp_path / "t.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads((tmp_path / "t.json").read_text())
    assert [(r["batch_size"], r["params"]) for r in data] == [(1, {"batch_size": 1}), (8, {"batch_size": 8})]
    assert "samples/s" in proc.stdout and "batch_size" in proc.stdout


def test_onnx_model_on_the_cpu_provider(tmp_path):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    sys.path.insert(0, str(Path(__file__).parent))
    from _tiny_onnx import linear_model_bytes

    model = tmp_path / "lin.onnx"
    model.write_bytes(linear_model_bytes())
    proc = cli("--onnx", model, "--providers", "CPU", "--input-dim", "batch=4", "--iters", 5,
               "--json", tmp_path / "o.json")
    assert proc.returncode == 0, proc.stderr
    assert "| **lin** | `CPUExecutionProvider` |" in proc.stdout
    data = json.loads((tmp_path / "o.json").read_text())
    assert data["env"]["onnx_inputs"] == {"x": [4, 4]}

    proc = cli("--onnx", model, "--providers", "NoSuchThing", "--iters", 1)
    assert_one_line_error(proc, 1, "'NoSuchThing' is not available", "CPUExecutionProvider")


def test_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    proc = cli("--iters", 10, "--warmup", 0, "--plot", tmp_path / "lat.png", "--plot-kind", "ecdf")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "lat.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("args, fragment", [
    (["--iters", "0"], "--iters: must be >= 1, got 0"),
    (["--warmup", "-1"], "--warmup"),
    (["--iters", "many"], "expected an integer"),
    (["--callable", "nocolon"], "MODULE:ATTR"),
    (["--providers", "CPU"], "--providers needs --onnx"),
    (["--args-shape", "1,3"], "--args-shape needs --callable"),
    (["--onnx", "m.onnx", "--callable", "a:b"], "not allowed with"),
    (["--compare", "a.json"], "expected 2 arguments"),
    (["--compare", "a.json", "b.json", "--iters", "5"], "--iters does not apply to --compare"),
    (["--no-such-option"], "unrecognized arguments"),
])
def test_usage_errors_exit_2_with_a_message(args, fragment):
    proc = cli(*args)
    assert proc.returncode == 2
    assert fragment in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("make_args, fragment", [
    (lambda d: ["--compare", d / "missing.json", d / "missing.json"], "cannot read"),
    (lambda d: ["--compare", d / "junk.json", d / "junk.json"], "is not JSON"),
    (lambda d: ["--callable", "no_such_module_xyz:f"], "cannot import module 'no_such_module_xyz'"),
    (lambda d: ["--callable", "os:no_such_attr"], "has no attribute 'no_such_attr'"),
    (lambda d: ["--callable", "os:sep"], "not callable"),
    (lambda d: ["--onnx", d / "missing.onnx"], "no such file"),
    (lambda d: ["--json", d / "no" / "dir" / "x.json", "--iters", "2"], "cannot write"),
])
def test_runtime_failures_exit_1_with_one_line(tmp_path, make_args, fragment):
    (tmp_path / "junk.json").write_text("{not json")
    proc = cli(*make_args(tmp_path))
    assert_one_line_error(proc, 1, fragment)


def test_help_teaches_with_examples():
    proc = cli("--help")
    assert proc.returncode == 0
    for text in ("examples:", "--compare", "--onnx", "--callable", "--args-shape", "exit status"):
        assert text in proc.stdout


def test_console_script_is_installed():
    script = shutil.which("spatialhub-bench", path=os.path.dirname(sys.executable))
    if script is None:
        pytest.skip("package not installed with its console script (pip install -e .)")
    proc = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith("usage: spatialhub-bench")


def test_cache_cold_is_passed_through_and_shown(tmp_path):
    env_proc = subprocess.run(
        [sys.executable, "-m", "spatialhub.utils.profiling", "--iters", "3", "--warmup", "1",
         "--cache", "cold", "--json", str(tmp_path / "c.json")],
        capture_output=True, text=True, timeout=300,
        env=dict(os.environ, SPATIALHUB_LLC_BYTES=str(1 << 20)))
    assert env_proc.returncode == 0, env_proc.stderr
    assert "| Cache |" in env_proc.stdout.splitlines()[2]
    assert json.loads((tmp_path / "c.json").read_text())["cache"] == "cold"
    bad = cli("--cache", "hot")
    assert bad.returncode == 2 and "--cache" in bad.stderr


def _saved(tmp_path, fname, ms, slow=1.0, runs=None):
    from spatialhub.utils.profiling import BenchmarkStats

    samples = [ms * slow * (1 + 0.01 * (i % 5)) for i in range(60)]
    s = BenchmarkStats("op", "CPU", ms, ms, 0.0, ms, ms, ms, 1000.0 / ms, 0, 60,
                       samples_ms=samples)
    if runs:
        s.run_sizes = runs
    (tmp_path / fname).write_text(s.to_json(samples=True))
    return tmp_path / fname


def test_fail_if_slower_gates_only_a_slower_verdict_beyond_the_threshold(tmp_path):
    base = _saved(tmp_path, "b.json", 2.0)
    same = _saved(tmp_path, "s.json", 2.0)
    slow = _saved(tmp_path, "x.json", 2.0, slow=1.5)
    double = _saved(tmp_path, "d.json", 2.0, slow=2.0)
    little = _saved(tmp_path, "l.json", 2.0, slow=1.08)
    exact = ("--run-spread", "0")   # these files come from one machine state: no rerun shift
    assert cli("--compare", base, same, "--fail-if-slower", "10").returncode == 0
    proc = cli("--compare", base, slow, "--fail-if-slower", "10", *exact)
    assert proc.returncode == 3 and "slower by more than 10%" in proc.stderr, proc.stderr
    assert "slower: 50.0% slower: the ratio 1.5000 is beyond the 10% margin (above 1.1000)" in proc.stdout
    # two single runs with no spread measured: never a verdict, so never a failure (the
    # gate fails on what was measured: --processes, or files a default --json run saved)
    assert cli("--compare", base, slow, "--fail-if-slower", "10").returncode == 0
    proc = cli("--compare", base, double, "--fail-if-slower", "10")
    assert proc.returncode == 0 and "no between-run spread measured" in proc.stdout
    assert "--processes measures the spread" in proc.stdout
    # 8% slower is a real difference but within a 10% gate
    assert cli("--compare", base, little, "--fail-if-slower", "10", *exact).returncode == 0
    assert cli("--compare", base, little, "--fail-if-slower", "5", *exact).returncode == 3
    # two single runs with nothing measured about reruns: 8% is within the assumed
    # run-to-run spread (15%), so the gate does not fail on it; with a 1% spread it does
    proc = cli("--compare", base, little, "--fail-if-slower", "5")
    assert proc.returncode == 0 and "inconclusive" in proc.stdout and "15%" in proc.stdout
    assert cli("--compare", base, little, "--fail-if-slower", "5",
               "--run-spread", "1").returncode == 3
    # --margin sets the margin of the verdict alone
    proc = cli("--compare", base, little, "--margin", "20", "--json", tmp_path / "v.json")
    assert proc.returncode == 0 and json.loads((tmp_path / "v.json").read_text())["margin"] == 0.2


def test_gate_and_processes_usage_errors(tmp_path):
    base = _saved(tmp_path, "b.json", 2.0)
    assert cli("--fail-if-slower", "10").returncode == 2        # needs --compare
    assert cli("--compare", base, base, "--margin", "150").returncode == 2
    assert cli("--compare", base, base, "--processes", "2").returncode == 2
    assert cli("--processes", "0").returncode == 2


def test_processes_pools_fresh_interpreters_with_run_identity(tmp_path):
    mod = tmp_path / "ops.py"
    mod.write_text("def double(x):\n    return x * 2\n")
    proc = cli("--callable", f"{mod}:double", "--args-shape", "64", "--iters", "15", "--warmup", "1",
               "--processes", "2", "--no-progress", "--json", tmp_path / "r.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    d = json.loads((tmp_path / "r.json").read_text())
    assert d["run_sizes"] == [15, 15] and d["timed_iters"] == 30 and d["run_spread"] is not None


def test_report_of_a_run_and_of_a_compare(demo_json, tmp_path):
    """--report: the readiness page of what the command measured, with --budget judged;
    with --compare, the candidate against its baseline by --compare's own rule."""
    from html.parser import HTMLParser

    proc = cli("--iters", 20, "--warmup", 2, "--report", tmp_path / "run.html",
               "--budget", "p99_ms=0.000001", "--budget", "ram_delta_mb=100000",
               "--json", tmp_path / "b.json")
    assert proc.returncode == 0, proc.stderr       # a failed budget is reported, not a status
    # ... and said on stderr, with where the page went
    assert (f"spatialhub-bench: wrote {tmp_path / 'run.html'}: Does not meet the stated "
            "checks: 1 of 2 budgets failed (ImagePreprocessor: p99_ms") in proc.stderr
    html = (tmp_path / "run.html").read_text()
    parts = []

    class Text(HTMLParser):
        def handle_data(self, data):
            parts.append(data)

    Text(convert_charrefs=True).feed(html)
    text = "".join(parts)
    assert "Does not meet the stated checks" in text and "ImagePreprocessor: p99_ms" in text
    assert "spatialhub-bench --iters 20 --warmup 2 --report" in text     # how to reproduce
    assert html.count("<svg") >= 2 and "<script" not in html

    d, _ = demo_json
    proc = cli("--compare", d / "a.json", tmp_path / "b.json", "--margin", "50",
               "--report", tmp_path / "cmp.md")
    assert proc.returncode == 0, proc.stderr
    md = (tmp_path / "cmp.md").read_text()
    # the same name on both sides: told apart by the files
    assert "ImagePreprocessor (b.json)" in md and "ImagePreprocessor (a.json)" in md
    assert "the 50% margin" in md                  # --compare's margin, not the default


@pytest.mark.parametrize("args, code, fragment", [
    (["--budget", "p99_ms=3"], 2, "--budget needs --report"),
    (["--report", "r.html", "--budget", "p99_ms"], 2, "expected FIELD=LIMIT"),
    (["--report", "r.html", "--budget", "p99_ms=fast"], 2, "expected a number"),
    (["--report", "r.html", "--instructions"], 2, "--report does not apply to --instructions"),
    (["--report", "r.pdf", "--iters", "2"], 1, "name the file *.html"),
    (["--report", "r.html", "--budget", "p99=3", "--iters", "2"], 1,
     "a result has no figure 'p99'"),
])
def test_report_mistakes_are_said_before_anything_runs(tmp_path, args, code, fragment):
    proc = cli(*args, cwd=tmp_path)
    assert proc.returncode == code, proc.stderr
    assert fragment in proc.stderr and "Traceback" not in proc.stderr
    assert "| **ImagePreprocessor**" not in proc.stdout      # nothing ran
