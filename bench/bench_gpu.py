"""Figure 7 -- the GPU rows, from bench/gpu_check.py.

    python bench/bench_gpu.py [--quick]

bench/gpu_check.py (owned separately) compares, on a real NVIDIA GPU, our
device="CUDA" median with torch.cuda.Event timing of the same matmul, the
VRAM figures with torch's, and our idle sync with torch.cuda.synchronize().
This script only reports it:
  * if a saved output exists -- $SPATIALHUB_GPU_CHECK_RESULTS, or
    bench/results/gpu_check.md (save one with
    `python bench/gpu_check.py | tee bench/results/gpu_check.md` on a GPU
    machine) -- its table rows are shown;
  * else, if torch sees a CUDA device here, gpu_check.py is run now;
  * else the rows read "not measured (no GPU lent)".
"""
import os
import sys

from _common import HERE, Figure, run_child, run_script

SAVED = os.path.join(HERE, "results", "gpu_check.md")


def _rows(text):
    """The check rows of gpu_check.py's Markdown table."""
    out = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0] not in ("check", ":---") and not cells[0].startswith(":"):
            out.append(cells)
    return out


def _cuda_here():
    try:
        import torch
    except ImportError:
        return False
    try:
        return bool(torch.cuda.is_available())
    except Exception:
        return False


def run(quick=False):
    src, text = None, None
    path = os.environ.get("SPATIALHUB_GPU_CHECK_RESULTS") or SAVED
    if os.path.isfile(path):
        with open(path) as f:
            text, src = f.read(), f"saved output {path}"
    elif _cuda_here():
        p = run_child([os.path.join(HERE, "gpu_check.py")], timeout=600)
        text, src = p.stdout, f"bench/gpu_check.py run now (exit {p.returncode})"
        if p.returncode not in (0, 1):
            raise RuntimeError(f"gpu_check.py crashed ({p.returncode}): {p.stderr[-2000:]}")
    rows = _rows(text) if text else []
    print("\n#### 7. GPU rows (bench/gpu_check.py)\n")
    if not rows:
        print("not measured (no GPU lent)")
        return [Figure("7 GPU", "our CUDA median vs CUDA events; sync vs torch.cuda.synchronize",
                       "not measured (no GPU lent)", "gpu_check.py tolerances", None)]
    print(f"from {src}\n")
    for line in text.splitlines():
        if line.startswith(("GPU:", "|")):
            print(line)
    return [Figure("7 GPU", f"{what} (ours vs torch, {unit})", f"{ours} vs {ref}",
                   "gpu_check.py tolerance", verdict == "ok")
            for what, ours, ref, unit, verdict in rows]


if __name__ == "__main__":
    sys.exit(run_script(run))
