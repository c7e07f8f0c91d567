"""The ONNX Runtime adapter: ``benchmark_onnx`` times a model per provider.

A thin layer over the native ``benchmark_callable``: it makes one session
per execution provider, random inputs from the model's declared ones and
the right device sync, then hands the timing to the C core.  onnxruntime
is imported by the function, never at module import.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence, Union

import numpy as np
import numpy.typing as npt

from ._native import BenchmarkStats, benchmark_callable, get_cuda_sync_fn
from ._vocab import WARMUP, Default, counts, noting_near_options, options_of
from ._words import MODELS, remedy_words
from .sweeps import SweepResult

if TYPE_CHECKING:   # onnxruntime is optional and untyped: these read as Any
    import onnxruntime  # type: ignore[import-not-found, import-untyped, unused-ignore]

    #: An ONNX model: a path, its bytes, or a session made already.
    Model = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview,
                  onnxruntime.InferenceSession]
    #: Inputs by name, or in input order, or the one input.
    Inputs = Union[Mapping[str, npt.ArrayLike], Sequence[npt.ArrayLike], npt.NDArray[Any]]

__all__ = ["benchmark_onnx", "resolve_provider"]

_ITERS = Default(50)
# benchmark_onnx's own options a keyword passed on to session.run may be a near miss of
# (the core knows its own, and warmup= / iters=)
_OWN_OPTIONS = options_of("inputs", "providers", "input_dims", "session_options")


# ONNX tensor element types -> NumPy dtypes for random inputs.
_ORT_DTYPES = {
    "tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
    "tensor(int8)": np.int8, "tensor(int16)": np.int16, "tensor(int32)": np.int32,
    "tensor(int64)": np.int64, "tensor(uint8)": np.uint8, "tensor(uint16)": np.uint16,
    "tensor(uint32)": np.uint32, "tensor(uint64)": np.uint64, "tensor(bool)": np.bool_,
}


def resolve_provider(provider: str, available: Iterable[str]) -> str:
    """Full ONNX Runtime provider name for ``provider``: a full name
    ("CUDAExecutionProvider") or a short one ("CUDA", "cpu", "TensorRT"),
    case-insensitive.  ValueError, listing ``available``, when it is not
    among them."""
    want = provider.strip().lower()
    available = list(available)
    for full in available:
        low = full.lower()
        if want in (low, low.removesuffix("executionprovider")):
            return full
    raise ValueError(
        f"ONNX Runtime provider {provider!r} is not available in this onnxruntime build; "
        f"available: {', '.join(available)}"
    )


def _random_onnx_inputs(session: Any, input_dims: Mapping[str, int] | None = None,
                        seed: int = 0) -> dict[str, npt.NDArray[Any]]:
    """{input name: random array} from the session's declared inputs.

    Symbolic or unknown dimensions take ``input_dims[dim_name]`` when given,
    else 1.  Floats are standard normal; integers and bools are in {0, 1}
    (safe as indices or token ids)."""
    rng = np.random.default_rng(seed)
    input_dims = dict(input_dims or {})
    feed: dict[str, npt.NDArray[Any]] = {}
    for arg in session.get_inputs():
        dtype = _ORT_DTYPES.get(arg.type)
        if dtype is None:
            raise ValueError(
                f"benchmark_onnx: cannot make a random value for input {arg.name!r} of type {arg.type}; "
                f"pass inputs={{{arg.name!r}: ...}}"
            )
        shape: list[int] = []
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


def _onnx_feed(session: Any, inputs: Inputs | None,
               input_dims: Mapping[str, int] | None) -> dict[str, Any]:
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
    arrays = [inputs] if isinstance(inputs, np.ndarray) else list(inputs)
    if len(arrays) != len(names):
        raise ValueError(f"benchmark_onnx: the model takes {len(names)} input(s) {names}, got {len(arrays)}")
    return dict(zip(names, arrays))


def benchmark_onnx(model: Model, inputs: Inputs | None = None,
                   providers: str | Iterable[str] | None = None, name: str | None = None,
                   input_dims: Mapping[str, int] | None = None, warmup: int = WARMUP,
                   iters: int = _ITERS, session_options: onnxruntime.SessionOptions | None = None,
                   *, num_warmup: int | None = None, num_iters: int | None = None,
                   **bench_kw: Any) -> SweepResult:
    """Benchmark an ONNX model on one or more ONNX Runtime execution providers.

    Each provider gives one ``BenchmarkStats`` of ``session.run(None, feed)``, its
    ``device`` the provider's name: the table tells them apart, and a CUDA provider
    gets the native CUDA sync and VRAM tracking (TensorRT the CUDA sync too: never an
    unsynced timing).  ``env["onnx_inputs"]`` records the input shapes.

    Parameters
    ----------
    model : str, os.PathLike, bytes or onnxruntime.InferenceSession
        The ``.onnx`` file, the model's bytes, or a session (which runs on the
        providers it was made with only).
    inputs : dict, sequence of arrays or array, optional
        {name: array}, the arrays in input order, or the one array; None: seeded
        random inputs from the declared shapes and dtypes.  The same for every
        provider.
    providers : str or iterable of str, optional
        The providers to compare, by full or short name ("CPU", "CUDA"; one str is
        one provider); None: "CPUExecutionProvider" (a session's own).
    name : str, optional
        The results' label; None: the file name without extension, or "onnx-model".
    input_dims : mapping of str to int, optional
        Sizes of symbolic dimensions for the random inputs ({"batch": 8}); 1 where
        not given.
    warmup : int, default 10
        Untimed calls first, per provider; ``num_warmup`` is the same option.
    iters : int, default 50
        Timed calls, per provider; ``num_iters`` is the same option.
    session_options : onnxruntime.SessionOptions, optional
        For the sessions made from a path or bytes.
    num_warmup, num_iters : int, optional
        ``warmup`` and ``iters`` by the names every entry point takes; giving both
        names of one count is a TypeError.
    **bench_kw
        ``benchmark_callable``'s options (``track_ram``, ``sync_fn``, ...); a keyword
        that is none of its options is passed on to ``session.run``, and when it
        rejects a near miss of an option (``provider=``, ``num_iter=``) the TypeError
        has a note naming the option.

    Returns
    -------
    SweepResult
        One BenchmarkStats per provider, in order.

    Raises
    ------
    ValueError
        A provider this onnxruntime build lacks, or one ONNX Runtime replaced by
        another (the message lists what there is); inputs that do not match the
        model's.
    TypeError
        A model of another type, or both ``warmup`` and ``num_warmup`` (``iters`` and
        ``num_iters``) given.
    RuntimeError
        TensorRT without a loadable CUDA driver and no ``sync_fn``.

    Examples
    --------
    >>> results = benchmark_onnx("model.onnx", providers=["CPU", "CUDA"])  # doctest: +SKIP
    >>> print(results.to_table())  # doctest: +SKIP
    """
    warmup, iters = counts("benchmark_onnx", warmup, iters, num_warmup, num_iters)
    import onnxruntime as ort

    if isinstance(providers, (str, bytes)):
        providers = [providers]   # one provider, not its letters
    available: list[str] = list(ort.get_available_providers())
    source: str | bytes
    sessions: list[tuple[str, Any]]
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
    results: list[BenchmarkStats] = []
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
        with remedy_words(MODELS), noting_near_options(bench_kw, _OWN_OPTIONS):
            stats = benchmark_callable(sess.run, None, feed, name=label, device=prov,
                                       num_warmup=warmup, num_iters=iters, **kw)
        env = dict(stats.env or {})
        env.setdefault("onnxruntime", ort.__version__)
        env["onnx_inputs"] = shapes
        stats.env = env
        results.append(stats)
    return SweepResult(results, param=None, values=[p for p, _ in sessions])
