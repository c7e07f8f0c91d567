"""What the package saves carries full precision (issue 32): --json saved `median_ms:
0.11` for a median of 0.10533, and loading gave back the rounded value.  to_dict() keeps
the released module's rounding for reading; saved files and to_json() are exact."""
import json
import subprocess
import sys

import numpy as np

from spatialhub.utils.profiling import BenchmarkStats, _native, compare_benchmarks


def stats(seed=0):
    x = 0.1 + 0.01 * np.random.default_rng(seed).random(101)
    return _native._stats_from_samples(x), x


def test_to_json_is_exact_and_loads_back_to_the_same_result():
    s, x = stats()
    d = json.loads(s.to_json(samples=True))
    assert d["median_ms"] == s.median_ms == float(np.median(x))
    assert d["samples_ms"] == x.tolist() and d["p95_ms"] == float(np.percentile(x, 95))
    back = BenchmarkStats.from_dict(d)
    assert back == s and back.median_ms == s.median_ms
    # the display keeps the released rounding
    assert s.to_dict()["median_ms"] == round(s.median_ms, 2)
    assert s.to_dict(exact=True)["median_ms"] == s.median_ms


def test_a_comparison_saves_its_exact_figures():
    (a, _), (b, _) = stats(1), stats(2)
    c = compare_benchmarks(a, b)
    e = c.to_dict(exact=True)
    assert e["baseline_median_ms"] == a.median_ms and e["ratio"] == c.ratio
    assert c.to_dict()["ratio"] == round(c.ratio, 4)


def test_the_cli_saves_the_samples_median_exactly(tmp_path):
    out = tmp_path / "base.json"
    p = subprocess.run([sys.executable, "-m", "spatialhub.utils.profiling", "--iters", "21",
                        "--warmup", "2", "--no-progress", "--json", str(out)],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    d = json.loads(out.read_text())
    d = d[0] if isinstance(d, list) else d
    samples = np.asarray(d["samples_ms"])
    assert d["median_ms"] == float(np.median(samples))
    assert d["p95_ms"] == float(np.percentile(samples, 95))
    assert d["mean_ms"] == float(np.mean(samples)) or abs(d["mean_ms"] - np.mean(samples)) < 1e-12
