"""The pictures of the guide, into a new temporary folder (or --out; run from the
repository root with `--out docs/img` to regenerate the guide's own):

    python docs/examples/make_figures.py [--out FOLDER]

Needs matplotlib; the batch-size sweep also needs torch (CPU is enough).
The numbers in the pictures are from whatever machine runs this script.
"""
import sys
from pathlib import Path

import numpy as np

from spatialhub.utils.profiling import benchmark_callable
from spatialhub.utils.profiling.plot import plot_latency, plot_sweep



def process_pipeline(image_tensor, threshold=0.5):
    filtered = np.clip(image_tensor * 1.5, 0.0, 1.0)
    return filtered > threshold


def main(argv=None):
    import argparse
    import tempfile

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=None, help="folder for the pictures (default: a new "
                                                "temporary one; docs/img for the guide's)")
    a = ap.parse_args(argv)
    OUT = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="spatialhub-figures-"))
    OUT.mkdir(exist_ok=True)
    frame = np.random.default_rng(0).random((1, 3, 480, 640), dtype=np.float32)
    full = benchmark_callable(process_pipeline, frame, threshold=0.6, name="ImagePreprocessor",
                              num_warmup=10, num_iters=300)
    half = benchmark_callable(process_pipeline, np.ascontiguousarray(frame[:, :, ::2, ::2]),
                              threshold=0.6, name="ImagePreprocessor-half", num_warmup=10, num_iters=300)
    for kind in ("hist", "ecdf", "box"):
        plot_latency([full, half], kind=kind, path=OUT / f"latency_{kind}.png",
                     title=f"process_pipeline, 480x640 vs 240x320 ({kind})")
    try:
        import torch
    except ImportError:
        print("torch not installed: skipping the batch-size sweep picture", file=sys.stderr)
        print(f"wrote the pictures into {OUT}")
        return
    from spatialhub.utils.profiling.adapters import profile_model

    torch.manual_seed(0)
    torch.set_num_threads(1)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, stride=2), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 3, stride=2), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, 10),
    )
    res = profile_model(net, (1, 3, 64, 64), warmup=5, iters=50, batch_sizes=[1, 4, 16, 32], name="SmallCNN")
    plot_sweep(res, path=OUT / "sweep_batch.png",
               title="SmallCNN on CPU (1 thread): latency and throughput vs batch size")
    print(res.to_table())
    print(f"wrote the pictures into {OUT}")


if __name__ == "__main__":
    main()
