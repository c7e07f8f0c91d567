"""Adapters that are Python by nature: PyTorch models, ONNX Runtime sessions, sweeps.

Everything here is a thin layer over the native ``benchmark_callable``: the
adapter prepares the callable, its arguments and the right device sync, and
then hands the timing to the C core.  Neither torch nor onnxruntime is
imported at module import; each is imported by the function that needs it.
"""
from __future__ import annotations

import contextlib
import os

import numpy as np

from ._native import benchmark_callable, format_benchmark_table, get_cuda_sync_fn

__all__ = ["SweepResult", "benchmark_onnx", "profile_model", "sweep"]


# --------------------------------------------------------------------------
# SweepResult
# --------------------------------------------------------------------------

def throughput_unit(stats_list, param=None):
    """The unit of ``stats.throughput`` for a set of rows: "samples/s" when
    the batch size is swept or any row ran more than one sample per call,
    else "FPS"."""
    if param == "batch_size" or any(s.batch_size != 1 for s in stats_list):
        return "samples/s"
    return "FPS"


class SweepResult(list):
    """A list of ``BenchmarkStats``, one per value of a swept parameter.

    It is a real ``list`` (index it, iterate it, pass it anywhere a list of
    stats is accepted, e.g. ``format_benchmark_table``) with three additions:
    ``param`` (the name of the swept parameter, or None when the rows differ
    by something already shown, such as the device), ``values`` (the swept
    values, in row order) and ``to_table()``.  In a notebook it renders as
    the Markdown table.
    """

    def __init__(self, stats=(), param=None, values=None):
        super().__init__(stats)
        self.param = param
        if values is None:
            values = [(s.params or {}).get(param) if param else s.device for s in self]
        self.values = list(values)
        if len(self.values) != len(self):
            raise ValueError(f"SweepResult: {len(self)} stats but {len(self.values)} values")

    @property
    def stats(self):
        """The rows as a plain list of BenchmarkStats."""
        return list(self)

    @property
    def throughput_unit(self):
        """"samples/s" when the rows are batched, else "FPS"."""
        return throughput_unit(self, self.param)

    def to_table(self, title=None, throughput_unit=None, *, baseline=None, format="markdown"):
        """The table (native ``format_benchmark_table``; ``format="html"``
        for HTML), with a column for the swept parameter when there is one."""
        return format_benchmark_table(
            list(self), title, throughput_unit or self.throughput_unit,
            baseline=baseline, param=self.param, format=format,
        )

    def to_dicts(self, samples=False):
        """``[s.to_dict(samples=samples) for s in self]``."""
        return [s.to_dict(samples=samples) for s in self]

    def __repr__(self):
        return f"SweepResult(param={self.param!r}, values={self.values!r}, stats={list.__repr__(self)})"

    def _repr_markdown_(self):
        return self.to_table()

    def _repr_html_(self):
        return self.to_table(format="html")


# --------------------------------------------------------------------------
# sweep
# --------------------------------------------------------------------------

def _unpack_target(made, value):
    """factory(value) -> callable | (callable, args) | (callable, args, kwargs)."""
    if callable(made):
        return made, (), {}
    if isinstance(made, tuple) and len(made) in (2, 3) and callable(made[0]):
        func, args = made[0], made[1]
        kwargs = made[2] if len(made) == 3 else {}
        if not isinstance(args, (tuple, list)):
            args = (args,)
        if not isinstance(kwargs, dict):
            raise TypeError(f"sweep: factory({value!r}) returned kwargs of type {type(kwargs).__name__}, expected dict")
        return func, tuple(args), kwargs
    raise TypeError(
        f"sweep: factory({value!r}) must return a callable, (callable, args) or "
        f"(callable, args, kwargs); got {type(made).__name__}"
    )


def sweep(factory, values, param="value", name=None, **bench_kw):
    """Benchmark one callable per value of a parameter.

    ``factory(value)`` returns the thing to time for that value: a callable,
    or ``(callable, args)``, or ``(callable, args, kwargs)``.  Each is timed
    with ``benchmark_callable(func, *args, name=..., **bench_kw, **kwargs)``;
    ``bench_kw`` takes benchmark_callable's options (``num_warmup``,
    ``num_iters``, ``device``, ``sync_fn``, ...).  Each result gets
    ``params = {param: value}``; when ``param == "batch_size"`` its
    ``batch_size`` is set too, so throughput reads in samples/s.

    Returns a :class:`SweepResult` (a list, one stats per value).
    """
    values = list(values)
    if not values:
        raise ValueError("sweep: values is empty")
    if not isinstance(param, str) or not param:
        raise TypeError("sweep: param must be a non-empty str")
    results = []
    for value in values:
        func, args, kwargs = _unpack_target(factory(value), value)
        label = name or getattr(func, "__name__", None) or type(func).__name__
        clash = set(kwargs) & set(bench_kw)
        if clash:
            raise TypeError(f"sweep: keyword(s) {sorted(clash)} given both by the factory and to sweep()")
        stats = benchmark_callable(func, *args, name=label, **bench_kw, **kwargs)
        if param == "batch_size":
            stats.batch_size = int(value)
        stats.params = {param: value}
        results.append(stats)
    return SweepResult(results, param=param, values=values)


# --------------------------------------------------------------------------
# PyTorch
# --------------------------------------------------------------------------

def _torch_dtype(torch, dtype):
    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str):
        resolved = getattr(torch, dtype.replace("torch.", ""), None)
        if isinstance(resolved, torch.dtype):
            return resolved
    raise ValueError(f"profile_model: unknown dtype {dtype!r} (use a torch.dtype or a name like 'float16')")


def _check_shape(shape, what):
    try:
        shape = tuple(int(d) for d in shape)
    except TypeError:
        raise TypeError(f"{what} must be a sequence of ints, got {shape!r}") from None
    if not shape or any(d < 1 for d in shape):
        raise ValueError(f"{what} must be non-empty with every dimension >= 1, got {shape!r}")
    return shape


def _torch_device(torch, device):
    dev = torch.device(device)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError(
                f"profile_model: device {str(device)!r} requested but torch.cuda.is_available() is False "
                f"(torch {torch.__version__}); use device='cpu'"
            )
        dev = torch.device("cuda", torch.cuda.current_device() if dev.index is None else dev.index)
    elif dev.type == "mps":
        if not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
            raise RuntimeError("profile_model: device 'mps' requested but torch.backends.mps.is_available() is False")
    return dev


def _random_input(torch, shape, dtype, dev):
    gen = torch.Generator().manual_seed(0)
    if dtype.is_floating_point or dtype.is_complex:
        x = torch.randn(shape, generator=gen, dtype=torch.float32).to(dtype)
    elif dtype == torch.bool:
        x = torch.randint(0, 2, shape, generator=gen).bool()
    else:
        x = torch.randint(0, 2, shape, generator=gen).to(dtype)
    return x.to(dev)


def profile_model(model, input_shape, device="cpu", warmup=10, iters=100, batch_sizes=None,
                  dtype=None, name=None, **bench_kw):
    """Latency profile of a ``torch.nn.Module`` (the latency-profiler recipe).

    Moves ``model`` to ``device`` (in place, as ``Module.to`` does), puts it
    in ``eval()`` mode, builds a random input of ``input_shape`` (seeded, so
    runs are repeatable) and times ``model(x)`` under
    ``torch.inference_mode()`` with the native harness: ``warmup`` untimed
    calls, then ``iters`` timed ones, each bracketed by the device's sync
    (native ``cuCtxSynchronize`` on cuda, ``torch.mps.synchronize`` on mps,
    none on cpu).

    ``dtype`` (a ``torch.dtype`` or its name; default float32) is the input
    dtype; a floating dtype converts the model's floating parameters too, so
    ``dtype=torch.float16`` profiles a half-precision model.  Integer dtypes
    (token ids) give inputs in {0, 1} and leave the model alone.

    ``batch_size`` of the result is ``input_shape[0]``, so ``throughput`` is
    samples/s.  On cuda, ``torch_max_allocated_mb`` is torch's own peak
    allocation over the run (``torch.cuda.max_memory_allocated`` after
    ``reset_peak_memory_stats``; weights and input included), beside the
    device-wide ``vram_delta_mb``.

    With ``batch_sizes=[1, 4, 16, 32]`` the first dimension of
    ``input_shape`` is replaced by each batch size in turn and a
    :class:`SweepResult` (one stats per batch size, ``param="batch_size"``)
    is returned; otherwise one ``BenchmarkStats``.  Other keyword arguments
    go to ``benchmark_callable`` (``track_ram``, ``target_rel_ci``, ...).
    """
    import torch

    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"profile_model: model must be a torch.nn.Module, got {type(model).__name__}")
    shape = _check_shape(input_shape, "profile_model: input_shape")
    if batch_sizes is not None:
        batch_sizes = [int(b) for b in batch_sizes]
        if not batch_sizes or any(b < 1 for b in batch_sizes):
            raise ValueError(f"profile_model: batch_sizes must be positive ints, got {batch_sizes!r}")
    tdtype = _torch_dtype(torch, dtype)
    dev = _torch_device(torch, device)
    label = name or type(model).__name__

    model = model.to(dev)
    if tdtype.is_floating_point:
        model = model.to(tdtype)
    model.eval()

    cuda = dev.type == "cuda"
    if cuda:
        with torch.cuda.device(dev):
            sync = get_cuda_sync_fn()
        if sync is None:  # driver not loadable by the native core: torch's own sync
            index = dev.index
            sync = lambda: torch.cuda.synchronize(index)  # noqa: E731
        device_label = f"cuda:{dev.index}"
    elif dev.type == "mps":
        sync = torch.mps.synchronize
        device_label = "mps"
    else:
        sync = None
        device_label = str(dev)
    bench_kw.setdefault("sync_fn", sync)

    def run(batch):
        x = _random_input(torch, (batch,) + shape[1:], tdtype, dev)
        # on cuda, torch.cuda.device(dev) makes dev's context current for the native sync
        with torch.inference_mode(), (torch.cuda.device(dev) if cuda else contextlib.nullcontext()):
            if cuda:
                torch.cuda.synchronize(dev)
                torch.cuda.reset_peak_memory_stats(dev)
            stats = benchmark_callable(model, x, name=label, device=device_label,
                                       num_warmup=warmup, num_iters=iters, **bench_kw)
            if cuda:
                stats.torch_max_allocated_mb = torch.cuda.max_memory_allocated(dev) / 2**20
        stats.batch_size = batch
        env = dict(stats.env or {})  # the native core records torch and the CUDA device
        env["input_shape"] = list(x.shape)
        env["input_dtype"] = str(tdtype).replace("torch.", "")
        stats.env = env
        return stats

    if batch_sizes is None:
        return run(shape[0])
    results = []
    for b in batch_sizes:
        stats = run(b)
        stats.params = {"batch_size": b}
        results.append(stats)
    return SweepResult(results, param="batch_size", values=batch_sizes)


# --------------------------------------------------------------------------
# ONNX Runtime
# --------------------------------------------------------------------------

# ONNX tensor element types -> NumPy dtypes for random inputs.
_ORT_DTYPES = {
    "tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
    "tensor(int8)": np.int8, "tensor(int16)": np.int16, "tensor(int32)": np.int32,
    "tensor(int64)": np.int64, "tensor(uint8)": np.uint8, "tensor(uint16)": np.uint16,
    "tensor(uint32)": np.uint32, "tensor(uint64)": np.uint64, "tensor(bool)": np.bool_,
}


def resolve_provider(provider, available):
    """Full ONNX Runtime provider name for ``provider``: a full name
    ("CUDAExecutionProvider") or a short one ("CUDA", "cpu", "TensorRT"),
    case-insensitive.  ValueError, listing ``available``, when it is not
    among them."""
    want = provider.strip().lower()
    for full in available:
        low = full.lower()
        if want in (low, low.removesuffix("executionprovider")):
            return full
    raise ValueError(
        f"ONNX Runtime provider {provider!r} is not available in this onnxruntime build; "
        f"available: {', '.join(available)}"
    )


def _random_onnx_inputs(session, input_dims=None, seed=0):
    """{input name: random array} from the session's declared inputs.

    Symbolic or unknown dimensions take ``input_dims[dim_name]`` when given,
    else 1.  Floats are standard normal; integers and bools are in {0, 1}
    (safe as indices or token ids)."""
    rng = np.random.default_rng(seed)
    input_dims = dict(input_dims or {})
    feed = {}
    for arg in session.get_inputs():
        dtype = _ORT_DTYPES.get(arg.type)
        if dtype is None:
            raise ValueError(
                f"benchmark_onnx: cannot make a random value for input {arg.name!r} of type {arg.type}; "
                f"pass inputs={{{arg.name!r}: ...}}"
            )
        shape = []
        for d in arg.shape or []:
            if isinstance(d, int) and d >= 0:
                shape.append(d)
            elif isinstance(d, str) and d in input_dims:
                shape.append(int(input_dims[d]))
            else:
                shape.append(1)
        if np.issubdtype(dtype, np.floating):
            feed[arg.name] = rng.standard_normal(shape).astype(dtype)
        else:
            feed[arg.name] = rng.integers(0, 2, size=shape).astype(dtype)
    return feed


def _onnx_feed(session, inputs, input_dims):
    names = [a.name for a in session.get_inputs()]
    if inputs is None:
        return _random_onnx_inputs(session, input_dims)
    if isinstance(inputs, dict):
        missing, extra = set(names) - set(inputs), set(inputs) - set(names)
        if missing or extra:
            raise ValueError(
                f"benchmark_onnx: inputs must name exactly the model's inputs {names}; "
                f"missing {sorted(missing)}, unknown {sorted(extra)}"
            )
        return dict(inputs)
    if isinstance(inputs, np.ndarray):
        inputs = [inputs]
    inputs = list(inputs)
    if len(inputs) != len(names):
        raise ValueError(f"benchmark_onnx: the model takes {len(names)} input(s) {names}, got {len(inputs)}")
    return dict(zip(names, inputs))


def benchmark_onnx(model, inputs=None, providers=None, name=None, input_dims=None,
                   warmup=10, iters=50, session_options=None, **bench_kw):
    """Benchmark an ONNX model on one or more ONNX Runtime execution providers.

    ``model`` is a path to an ``.onnx`` file, the model's bytes, or an
    ``onnxruntime.InferenceSession``.  ``providers`` (default
    ``("CPUExecutionProvider",)``; for a session, the session's own) lists
    the providers to compare, by full or short name ("CPU", "CUDA"); a
    provider this onnxruntime build does not have raises ``ValueError``
    listing the ones it has, and so does one that ONNX Runtime accepted but
    silently replaced by another.  A session runs on the providers it was
    made with, so it cannot be combined with other ``providers``.

    ``inputs``: a dict {name: array}, a list of arrays in input order, or
    one array; None makes seeded random inputs from the declared shapes and
    dtypes, with symbolic dimensions set from ``input_dims`` ({"batch": 8})
    or 1.  The same inputs are used for every provider.

    Each provider gives one ``BenchmarkStats`` of ``session.run(None,
    feed)``: ``name`` (default: the file name without extension, or
    "onnx-model") and ``device`` = the provider name, so the table tells
    them apart and a CUDA provider gets the native CUDA sync and VRAM
    tracking; TensorRT gets the native CUDA sync too (``RuntimeError``
    without a loadable driver, unless ``sync_fn`` is given, as for a CUDA
    device: never an unsynced timing).  ``env["onnx_inputs"]``
    records the input shapes.  Returns a :class:`SweepResult` (a list, one
    stats per provider).  Other keywords go to ``benchmark_callable``.
    """
    import onnxruntime as ort

    available = list(ort.get_available_providers())
    if isinstance(model, ort.InferenceSession):
        own = model.get_providers()
        if providers is not None:
            wanted = [resolve_provider(p, available) for p in providers]
            if wanted != own[: len(wanted)]:
                raise ValueError(
                    f"benchmark_onnx: this InferenceSession runs on {own}; to benchmark {wanted} pass "
                    f"the model's path or bytes instead of a session"
                )
        sessions = [(own[0], model)]
        label = name or "onnx-model"
    else:
        if isinstance(model, (str, os.PathLike)):
            source = os.fspath(model)
            label = name or os.path.splitext(os.path.basename(source))[0]
        elif isinstance(model, (bytes, bytearray, memoryview)):
            source = bytes(model)
            label = name or "onnx-model"
        else:
            raise TypeError(
                f"benchmark_onnx: model must be a path, bytes or onnxruntime.InferenceSession, "
                f"got {type(model).__name__}"
            )
        wanted = [resolve_provider(p, available) for p in (providers or ("CPUExecutionProvider",))]
        sessions = []
        for prov in wanted:
            sess = ort.InferenceSession(source, sess_options=session_options, providers=[prov])
            actual = sess.get_providers()
            if actual[0] != prov:
                raise ValueError(
                    f"benchmark_onnx: ONNX Runtime could not start {prov} (the session fell back to "
                    f"{actual}); check the provider's libraries (CUDA, cuDNN, TensorRT)"
                )
            sessions.append((prov, sess))

    feed = _onnx_feed(sessions[0][1], inputs, input_dims)
    shapes = {k: list(np.shape(v)) for k, v in feed.items()}
    results = []
    for prov, sess in sessions:
        kw = dict(bench_kw)
        if "tensorrt" in prov.lower() and "cuda" not in prov.lower() and kw.get("sync_fn") is None:
            # the native core recognises CUDA devices by "cuda" in the label;
            # TensorRT runs on CUDA too, so give it the same sync explicitly --
            # and, as for a CUDA device, refuse to time it without one
            kw["sync_fn"] = get_cuda_sync_fn()
            if kw["sync_fn"] is None:
                raise RuntimeError(
                    f"benchmark_onnx: {prov} runs on CUDA, but the native core could not load the "
                    f"CUDA driver for a device sync; pass sync_fn=... (e.g. torch.cuda.synchronize)"
                )
        stats = benchmark_callable(sess.run, None, feed, name=label, device=prov,
                                   num_warmup=warmup, num_iters=iters, **kw)
        env = dict(stats.env or {})
        env.setdefault("onnxruntime", ort.__version__)
        env["onnx_inputs"] = shapes
        stats.env = env
        results.append(stats)
    return SweepResult(results, param=None, values=[p for p, _ in sessions])
