"""Where does the time go in my pipeline?  A NumPy preprocess -> ONNX Runtime model ->
NumPy postprocess pipeline, timed stage by stage with the scope profiler.

    python docs/examples/pipeline_scopes.py [--frames 20] [--out FOLDER]

Prints the tree table (Markdown) and the released-style summary, and writes
pipeline_trace.json (Chrome Trace Event JSON: open it in https://ui.perfetto.dev,
chrome://tracing or speedscope) and scope_trace.png (the same spans drawn with matplotlib)
into --out (default: a new temporary folder; `--out docs/img` refreshes the guide's
pictures).  Needs onnx, onnxruntime and matplotlib (the [onnx] and [plot] extras).
"""
import argparse
import os
import tempfile

import numpy as np

from spatialhub.utils.profiling import HierarchicalProfiler, timeit

prof = HierarchicalProfiler("pipeline")


def tiny_cnn_bytes(channels=16, classes=10):
    """Conv(3->16, 3x3) -> Relu -> GlobalAveragePool -> Flatten -> Gemm(16->10)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((channels, 3, 3, 3)).astype(np.float32), "W")
    fc = numpy_helper.from_array(rng.standard_normal((classes, channels)).astype(np.float32),
                                 "FC")
    fcb = numpy_helper.from_array(np.zeros(classes, np.float32), "FCb")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["r"]),
         helper.make_node("GlobalAveragePool", ["r"], ["g"]),
         helper.make_node("Flatten", ["g"], ["f"]),
         helper.make_node("Gemm", ["f", "FC", "FCb"], ["logits"], transB=1)],
        "tiny_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 224, 224])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", classes])],
        initializer=[w, fc, fcb],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


MEAN = np.array([0.485, 0.456, 0.406], np.float32).reshape(3, 1, 1)
STD = np.array([0.229, 0.224, 0.225], np.float32).reshape(3, 1, 1)


@prof.timeit()
def preprocess(frame):
    with prof("resize"):
        # nearest-neighbour 480x640 -> 224x224
        ys = np.arange(224) * frame.shape[0] // 224
        xs = np.arange(224) * frame.shape[1] // 224
        small = frame[ys][:, xs]
    with prof("normalize"):
        x = small.transpose(2, 0, 1).astype(np.float32) / 255.0
        x = (x - MEAN) / STD
    return x[None]


@prof.timeit()
def postprocess(logits, k=3):
    with prof("softmax"):
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        p = e / e.sum(axis=1, keepdims=True)
    with prof("topk"):
        idx = np.argsort(-p, axis=1)[:, :k]
    return idx, np.take_along_axis(p, idx, axis=1)


def draw_trace(trace, path):
    """The trace's spans as horizontal bars, one row per nesting depth (per lane)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def stage(e):   # the pipeline stage a span belongs to: its depth-2 ancestor
        parts = e["args"]["path"].split("/")
        return parts[1] if len(parts) > 1 else parts[0]

    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    stages = list(dict.fromkeys(stage(e) for e in sorted(spans, key=lambda e: e["ts"])))
    colours = dict(zip(stages, ["0.75"] + list(plt.get_cmap("tab10").colors)))
    fig, ax = plt.subplots(figsize=(10, 2.6))
    for e in spans:
        top = stage(e)
        depth = e["args"]["depth"]
        ax.broken_barh([(e["ts"] / 1e3, max(e["dur"] / 1e3, 1e-3))], (depth - 0.4, 0.8),
                       facecolors=colours[top], edgecolor="white", linewidth=0.3)
    ax.set_yticks(range(1, 1 + max(e["args"]["depth"] for e in spans)))
    ax.set_yticklabels([f"depth {d}" for d in ax.get_yticks()])
    ax.invert_yaxis()
    ax.set_xlabel("ms since the first scope")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[s]) for s in stages]
    ax.legend(handles, stages, loc="upper right", ncols=len(stages), fontsize=8)
    ax.set_title("spatialhub scope trace: preprocess -> ONNX Runtime -> postprocess")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, default=20)
    ap.add_argument("--out", default=None,
                    help="folder for the trace and its picture (default: a new temporary one)")
    a = ap.parse_args(argv)
    if a.out is None:
        a.out = tempfile.mkdtemp(prefix="spatialhub-pipeline-")
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    session = ort.InferenceSession(tiny_cnn_bytes(), opts, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    frames = [rng.integers(0, 256, (480, 640, 3), dtype=np.uint8) for _ in range(a.frames)]

    for frame in frames:
        with prof("frame"):
            x = preprocess(frame)
            with prof("inference"):
                (logits,) = session.run(None, {"x": x})
            postprocess(logits)

    print(prof.to_markdown())
    prof.print_summary()   # summary() logs the same lines at INFO, as the released one
    os.makedirs(a.out, exist_ok=True)
    trace = prof.export_chrome_trace(os.path.join(a.out, "pipeline_trace.json"))
    draw_trace(trace, os.path.join(a.out, "scope_trace.png"))
    print(f"\nwrote {a.out}/pipeline_trace.json and {a.out}/scope_trace.png "
          f"({sum(e['ph'] == 'X' for e in trace['traceEvents'])} spans)")


if __name__ == "__main__":
    main()
