"""The guide's readiness report and its screenshot, from a real run (run from the
repository root with `--out docs/img` to refresh the guide's picture):

    python docs/examples/make_report.py [--out FOLDER]

A small torch model in float32 (the baseline), dynamically quantised to int8 and in
float16, each timed with profile_model and checked against the float32 outputs; the
float32 model's batch sweep; a P99 budget of 10% over the float32 model's.  It writes
report.html and report.md into FOLDER, then report.png: the top of the page as headless
Chromium draws it (offline, `--host-resolver-rules="MAP * ~NOTFOUND"`).  Needs torch
(CPU is enough) and chromium.  The numbers are whatever the machine running it measures.
"""
import copy
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

from spatialhub.utils.profiling import check_outputs, profile_model, write_report

SHOT = (1200, 1900)     # the screenshot: the verdict, the tables and the first figure


def models():
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)
    fp32 = torch.nn.Sequential(
        torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
        torch.nn.ReLU(), torch.nn.Linear(512, 10)).eval()
    with warnings.catch_warnings():          # torch >= 2.9: deprecated for torchao
        warnings.simplefilter("ignore")
        int8 = torch.ao.quantization.quantize_dynamic(copy.deepcopy(fp32), {torch.nn.Linear},
                                                      dtype=torch.qint8)
    fp16 = copy.deepcopy(fp32).half()
    return fp32, int8, fp16


def main(argv=None):
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=None, help="folder (default: a new temporary one; "
                                                "docs/img for the guide's picture)")
    a = ap.parse_args(argv)
    out = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="spatialhub-report-"))
    out.mkdir(exist_ok=True)
    import numpy as np
    import torch

    fp32, int8, fp16 = models()
    x = np.random.default_rng(0).standard_normal((8, 256)).astype(np.float32)
    with warnings.catch_warnings():          # a busy machine's remarks are in the report
        warnings.simplefilter("ignore")
        base = profile_model(fp32, (8, 256), iters=300, name="mlp fp32")
        cand_int8 = profile_model(int8, (8, 256), iters=300, name="mlp int8")
        cand_fp16 = profile_model(fp16, (8, 256), iters=300, dtype=torch.float16,
                                  name="mlp fp16")
        batches = profile_model(fp32, (1, 256), iters=100, batch_sizes=[1, 8, 32, 128],
                                name="mlp fp32")
    checks = [check_outputs(fp32, cand, [x], rtol=1e-2, atol=1e-2, name=name,
                            reference_name="mlp fp32")
              for cand, name in ((int8, "mlp int8"), (fp16, "mlp fp16"))]
    results = [base, cand_int8, cand_fp16, batches, *checks]
    # what ships today sets the budget: a P99 at most 10% above the float32 model's
    budgets = {"p99_ms": float(f"{1.1 * base.p99_ms:.2g}"), "ram_delta_mb": 64}
    title = "mlp: int8 or fp16 for the CPU service?"
    command = "python docs/examples/make_report.py --out docs/img"
    page = write_report(results, out / "report.html", title=title, budgets=budgets,
                        command=command)
    write_report(results, out / "report.md", title=title, budgets=budgets, command=command)
    for c in checks:
        print(c)
    chromium = next((shutil.which(n) for n in ("chromium", "chromium-browser",
                                                "google-chrome") if shutil.which(n)), None)
    if chromium is None:
        print(f"no chromium: wrote {page} and report.md, no screenshot", file=sys.stderr)
        return
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                        "--hide-scrollbars", f"--user-data-dir={profile}",
                        "--host-resolver-rules=MAP * ~NOTFOUND",
                        f"--window-size={SHOT[0]},{SHOT[1]}",
                        f"--screenshot={(out / 'report.png').resolve()}",
                        page.resolve().as_uri()],
                       check=True, capture_output=True, timeout=120)
    print(f"wrote {page}, report.md and report.png into {out}")


if __name__ == "__main__":
    main()
