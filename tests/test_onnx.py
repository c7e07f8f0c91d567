"""benchmark_onnx against real onnxruntime, on tiny models built with onnx.helper."""
import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

from _tiny_onnx import gather_model_bytes, linear_model_bytes  # noqa: E402
from spatialhub.utils.profiling.adapters import (  # noqa: E402
    SweepResult, _random_onnx_inputs, benchmark_onnx, resolve_provider,
)


@pytest.fixture
def linear_path(tmp_path):
    path = tmp_path / "tiny_linear.onnx"
    path.write_bytes(linear_model_bytes())
    return path


def _missing_provider():
    available = set(ort.get_available_providers())
    for name in ("CUDAExecutionProvider", "TensorrtExecutionProvider", "CoreMLExecutionProvider"):
        if name not in available:
            return name
    pytest.skip("every provider we would try is available here")


def test_file_path_gives_one_result_per_provider_named_by_file(linear_path):
    res = benchmark_onnx(linear_path, warmup=3, iters=20)
    assert isinstance(res, SweepResult) and len(res) == 1
    s = res[0]
    assert s.name == "tiny_linear"
    assert s.device == "CPUExecutionProvider"
    assert (s.warmup_iters, s.timed_iters) == (3, 20)
    assert len(s.samples_ms) == 20
    assert 0 < s.min_ms <= s.median_ms <= s.p95_ms <= s.max_ms
    # symbolic "batch" defaults to 1
    assert s.env["onnx_inputs"] == {"x": [1, 4]}
    assert res.values == ["CPUExecutionProvider"]


def test_bytes_and_session_inputs_work_and_name_is_used():
    data = linear_model_bytes()
    from_bytes = benchmark_onnx(data, name="lin", warmup=1, iters=5)
    assert [(s.name, s.device, s.timed_iters) for s in from_bytes] == [("lin", "CPUExecutionProvider", 5)]
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    from_session = benchmark_onnx(sess, warmup=1, iters=7)
    assert [(s.name, s.device, s.timed_iters) for s in from_session] == [
        ("onnx-model", "CPUExecutionProvider", 7)]


def test_symbolic_dims_take_the_user_mapping(linear_path):
    s = benchmark_onnx(linear_path, input_dims={"batch": 8}, warmup=1, iters=5)[0]
    assert s.env["onnx_inputs"] == {"x": [8, 4]}


def test_random_inputs_follow_declared_dtypes_and_stay_valid_indices():
    sess = ort.InferenceSession(gather_model_bytes(), providers=["CPUExecutionProvider"])
    feed = _random_onnx_inputs(sess, {"n": 6})
    assert feed["idx"].dtype == np.int64 and feed["idx"].shape == (6,)
    assert feed["x"].dtype == np.float32 and feed["x"].shape == (6, 2)
    assert set(np.unique(feed["idx"])) <= {0, 1}
    # seeded: the same inputs on every call, so runs are comparable
    again = _random_onnx_inputs(sess, {"n": 6})
    assert np.array_equal(feed["x"], again["x"])
    s = benchmark_onnx(sess, input_dims={"n": 6}, warmup=1, iters=5)[0]
    assert s.env["onnx_inputs"] == {"idx": [6], "x": [6, 2]}


def test_user_inputs_dict_list_and_array_are_accepted(linear_path):
    x = np.ones((3, 4), np.float32)
    for inputs in ({"x": x}, [x], x):
        s = benchmark_onnx(linear_path, inputs=inputs, warmup=1, iters=3)[0]
        assert s.env["onnx_inputs"] == {"x": [3, 4]}


def test_wrong_input_names_are_a_clear_error(linear_path):
    with pytest.raises(ValueError, match=r"inputs must name exactly the model's inputs \['x'\]"):
        benchmark_onnx(linear_path, inputs={"image": np.ones((1, 4), np.float32)}, iters=1)
    with pytest.raises(ValueError, match=r"takes 1 input"):
        benchmark_onnx(linear_path, inputs=[np.ones((1, 4), np.float32)] * 2, iters=1)


def test_unavailable_provider_raises_listing_the_available_ones(linear_path):
    missing = _missing_provider()
    with pytest.raises(ValueError) as info:
        benchmark_onnx(linear_path, providers=("CPUExecutionProvider", missing), iters=1)
    msg = str(info.value)
    assert missing in msg
    for name in ort.get_available_providers():
        assert name in msg


def test_short_provider_names_resolve_case_insensitively():
    available = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    assert resolve_provider("CPU", available) == "CPUExecutionProvider"
    assert resolve_provider("cuda", available) == "CUDAExecutionProvider"
    assert resolve_provider("CUDAExecutionProvider", available) == "CUDAExecutionProvider"
    with pytest.raises(ValueError, match="available: CUDAExecutionProvider, CPUExecutionProvider"):
        resolve_provider("TensorRT", available)


def test_a_single_provider_string_is_that_provider(linear_path, recwarn):
    # not its letters ("provider 'C' is not available")
    res = benchmark_onnx(linear_path, providers="CPU", warmup=1, iters=3)
    assert [s.device for s in res] == ["CPUExecutionProvider"]


def test_session_cannot_be_rerun_on_other_providers(linear_path):
    sess = ort.InferenceSession(str(linear_path), providers=["CPUExecutionProvider"])
    assert len(benchmark_onnx(sess, providers=["CPU"], iters=2, warmup=0)) == 1
    missing = _missing_provider()
    with pytest.raises(ValueError):
        benchmark_onnx(sess, providers=[missing], iters=1)


def test_same_provider_twice_gives_two_rows_and_a_table(linear_path):
    res = benchmark_onnx(linear_path, providers=["CPU", "CPUExecutionProvider"], warmup=1, iters=4)
    assert [s.device for s in res] == ["CPUExecutionProvider"] * 2
    table = res.to_table()
    assert table.count("`CPUExecutionProvider`") == 2
    assert res._repr_markdown_() == table


def test_bad_model_type_is_a_type_error():
    with pytest.raises(TypeError, match="path, bytes or onnxruntime.InferenceSession"):
        benchmark_onnx(12345)


def _session_claiming(provider):
    """A CPU session that reports running on `provider` (no such hardware here)."""
    sess = ort.InferenceSession(linear_model_bytes(), providers=["CPUExecutionProvider"])
    sess.get_providers = lambda: [provider, "CPUExecutionProvider"]
    return sess


def test_tensorrt_without_a_cuda_driver_is_refused_not_timed_unsynced():
    from spatialhub.utils.profiling import get_cuda_sync_fn

    if get_cuda_sync_fn() is not None:
        pytest.skip("a CUDA driver is loadable here")
    with pytest.raises(RuntimeError, match="TensorrtExecutionProvider runs on CUDA.*sync_fn"):
        benchmark_onnx(_session_claiming("TensorrtExecutionProvider"), warmup=1, iters=3)


def test_tensorrt_with_the_users_sync_runs_it_around_every_call():
    calls = []
    res = benchmark_onnx(_session_claiming("TensorrtExecutionProvider"), warmup=2, iters=5,
                         sync_fn=lambda: calls.append(1))
    assert res[0].device == "TensorrtExecutionProvider" and res[0].timed_iters == 5
    assert len(calls) == 2 + 2 * 5
