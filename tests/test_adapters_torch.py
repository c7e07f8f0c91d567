"""profile_model against real PyTorch (CPU)."""
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from spatialhub.utils.profiling.adapters import SweepResult, profile_model  # noqa: E402


class Recorder:
    """Forward pre-hook that records what each call of the model saw."""

    def __init__(self, model):
        self.calls = []
        model.register_forward_pre_hook(self)

    def __call__(self, module, args):
        x = args[0]
        self.calls.append((tuple(x.shape), x.dtype, torch.is_inference_mode_enabled(), module.training))


def tiny_cnn():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(), torch.nn.Linear(4, 2),
    )


def test_profile_runs_warmup_plus_iters_forwards_in_eval_and_inference_mode():
    model = tiny_cnn().train()
    rec = Recorder(model)
    s = profile_model(model, (1, 3, 16, 16), warmup=3, iters=20)
    assert len(rec.calls) == 3 + 20
    assert set(rec.calls) == {((1, 3, 16, 16), torch.float32, True, False)}
    assert (s.name, s.device) == ("Sequential", "cpu")
    assert (s.warmup_iters, s.timed_iters, len(s.samples_ms)) == (3, 20, 20)
    assert s.batch_size == 1
    assert s.torch_max_allocated_mb is None  # CUDA-only figure
    assert s.env["torch"] == torch.__version__
    assert s.env["input_shape"] == [1, 3, 16, 16]
    assert 0 < s.min_ms <= s.median_ms <= s.p95_ms <= s.max_ms


def test_first_dimension_is_the_batch_and_throughput_is_samples_per_second():
    s = profile_model(tiny_cnn(), (8, 3, 16, 16), warmup=1, iters=10, name="cnn")
    assert s.name == "cnn" and s.batch_size == 8
    assert s.throughput == pytest.approx(8 * s.fps)


def test_batch_sweep_gives_one_result_per_batch_size():
    model = tiny_cnn()
    rec = Recorder(model)
    res = profile_model(model, (1, 3, 16, 16), warmup=2, iters=5, batch_sizes=[1, 4, 16])
    assert isinstance(res, SweepResult)
    assert res.param == "batch_size" and res.values == [1, 4, 16]
    assert [s.batch_size for s in res] == [1, 4, 16]
    assert [s.params for s in res] == [{"batch_size": 1}, {"batch_size": 4}, {"batch_size": 16}]
    assert [c[0][0] for c in rec.calls] == [1] * 7 + [4] * 7 + [16] * 7
    for s in res:
        assert s.throughput == pytest.approx(s.fps * s.batch_size)
    table = res.to_table()
    assert "batch_size" in table.splitlines()[0]
    assert "samples/s" in table.splitlines()[0]
    assert len([line for line in table.splitlines() if line.startswith("| ")]) == 2 + 3


def test_dtype_converts_input_and_model():
    model = tiny_cnn()
    rec = Recorder(model)
    s = profile_model(model, (2, 3, 8, 8), warmup=0, iters=3, dtype="float64")
    assert {c[1] for c in rec.calls} == {torch.float64}
    assert next(model.parameters()).dtype == torch.float64
    assert s.env["input_dtype"] == "float64"


def test_integer_inputs_leave_the_model_alone():
    torch.manual_seed(0)
    model = torch.nn.Embedding(10, 3)
    rec = Recorder(model)
    profile_model(model, (2, 5), warmup=0, iters=2, dtype=torch.long)
    assert {c[1] for c in rec.calls} == {torch.int64}
    assert model.weight.dtype == torch.float32


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA message")
def test_cuda_without_cuda_is_a_clear_error():
    with pytest.raises(RuntimeError, match=r"torch.cuda.is_available\(\) is False"):
        profile_model(tiny_cnn(), (1, 3, 8, 8), device="cuda")


def test_bad_arguments_raise_before_running():
    model = tiny_cnn()
    rec = Recorder(model)
    with pytest.raises(TypeError, match="torch.nn.Module"):
        profile_model(lambda x: x, (1, 3))
    with pytest.raises(ValueError, match="input_shape"):
        profile_model(model, (1, 0, 8, 8))
    with pytest.raises(ValueError, match="batch_sizes"):
        profile_model(model, (1, 3, 8, 8), batch_sizes=[4, 0])
    with pytest.raises(ValueError, match="unknown dtype"):
        profile_model(model, (1, 3, 8, 8), dtype="float17")
    assert rec.calls == []


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA build of torch and a GPU")
def test_cuda_reports_torch_peak_allocation_beside_device_vram():
    model = tiny_cnn()
    res = profile_model(model, (1, 3, 64, 64), device="cuda", warmup=2, iters=10, batch_sizes=[1, 32])
    assert [s.device for s in res] == ["cuda:0", "cuda:0"]
    # weights + a 32x3x64x64 float32 input (1.5 MiB) are allocated by torch
    assert res[1].torch_max_allocated_mb >= 1.5
    assert res[0].torch_max_allocated_mb < res[1].torch_max_allocated_mb


def test_importing_the_adapters_does_not_import_torch():
    code = ("import sys, spatialhub.utils.profiling.adapters, spatialhub.utils.profiling.plot; "
            "sys.exit(int(any(m in sys.modules for m in ('torch', 'onnxruntime', 'matplotlib'))))")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
