"""Tiny ONNX models built with onnx.helper, shared by test_onnx.py and test_cli.py."""
import numpy as np


def linear_model_bytes(in_features=4, out_features=3):
    """y = x @ W + b with x: float32 [batch, in_features], "batch" symbolic.

    W is all ones and b = 0.5, so y[i, j] = sum(x[i]) + 0.5 (easy to check)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.ones((in_features, out_features), np.float32), "W")
    b = numpy_helper.from_array(np.full((out_features,), 0.5, np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["y"])],
        "tiny_linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", in_features])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", out_features])],
        initializer=[w, b],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8  # readable by every onnxruntime >= 1.10
    onnx.checker.check_model(model)
    return model.SerializeToString()


def gather_model_bytes():
    """out = table[idx] + x: an int64 index input and a float input with a
    symbolic "n" dimension shared by both."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    table = numpy_helper.from_array(np.arange(10, dtype=np.float32).reshape(5, 2), "table")
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "idx"], ["rows"], axis=0),
         helper.make_node("Add", ["rows", "x"], ["out"])],
        "tiny_gather",
        [helper.make_tensor_value_info("idx", TensorProto.INT64, ["n"]),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 2])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["n", 2])],
        initializer=[table],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()
