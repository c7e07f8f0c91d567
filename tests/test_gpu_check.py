"""bench/gpu_check.py runs as one command: against the fake driver and fake
NVML its every torch-free row is produced (with the fakes' figures), and
without a GPU it says so and exits 0."""
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "bench" / "gpu_check.py"


def run(env):
    full = {k: v for k, v in os.environ.items()
            if not k.startswith(("FAKE_CUDA_", "FAKE_NVML_", "SPATIALHUB_LIB"))}
    full.update(env)
    return subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True,
                          env=full, timeout=300)


def test_without_a_gpu_it_says_so(tmp_path):
    done = run({"SPATIALHUB_LIBCUDA": str(tmp_path / "no-libcuda.so")})
    assert done.returncode == 0, done.stderr
    assert "no GPU" in done.stdout


def test_every_driver_row_against_the_fakes(fake_cuda_lib, fake_nvml_libs):
    done = run({"SPATIALHUB_LIBCUDA": fake_cuda_lib, "SPATIALHUB_LIBNVML": fake_nvml_libs["full"],
                "SPATIALHUB_LLC_BYTES": str(1 << 20)})
    assert done.returncode in (0, 1), done.stderr
    out = done.stdout
    assert out.startswith("GPU: Fake GPU 0; driver 12.4; torch")
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[0].startswith("| check | ours | reference | unit |")
    body = rows[1:]
    for key in ("our events (gpu_median_ms)", "synced wall median", "host share",
                "cold vs warm", "SM clock start -> end", "throttle reasons seen",
                "first_call_ms vs steady median"):
        assert any(key in r for r in body), (key, out)
    assert all(len(r.strip("|").split("|")) == 5 for r in body)
    # the fake's events and ours see the same queued work
    events = next(r for r in body if "our events (gpu_median_ms)" in r)
    assert events.rstrip().endswith("| ok |"), out
