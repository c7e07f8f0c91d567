"""The PyTorch adapter: ``profile_model`` times a ``torch.nn.Module``.

A thin layer over the native ``benchmark_callable``: it prepares the model,
a random input per batch size and the right device sync, then hands the
timing to the C core.  torch is imported by the function, never at module
import.
"""
from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence, Union

from ._native import DEFAULT_NUM_WARMUP, BenchmarkStats, benchmark_callable, get_cuda_sync_fn
from ._vocab import WARMUP, Default, counts, noting_near_options, options_of
from ._words import MODELS, remedy_words
from .sweeps import SweepResult, _sweep_rows

if TYPE_CHECKING:
    from typing import overload

    import torch  # type: ignore[import-not-found, unused-ignore]   # optional: else Any

    DType = Union[torch.dtype, str]
else:
    # typing.overload (3.11+) keeps every overload in a registry for the life of the
    # process, and with it this module's globals: the native module would outlive its
    # teardown (its CUDA primary contexts never released).  The overloads are for type
    # checkers; at run time the implementation alone is profile_model.
    def overload(func: Any) -> Any:
        return func

__all__ = ["profile_model"]

_ITERS = Default(100)
# profile_model's own options a keyword passed on to the model may be a near miss of
# (the core knows its own, and warmup= / iters=)
_OWN_OPTIONS = options_of("input_shape", "batch_sizes", "dtype")


def _torch_dtype(torch: Any, dtype: object) -> Any:
    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str):
        resolved = getattr(torch, dtype.replace("torch.", ""), None)
        if isinstance(resolved, torch.dtype):
            return resolved
    raise ValueError(f"profile_model: unknown dtype {dtype!r} (use a torch.dtype or a name like 'float16')")


def _check_shape(shape: Iterable[int], what: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(d) for d in shape)
    except TypeError:
        raise TypeError(f"{what} must be a sequence of ints, got {shape!r}") from None
    if not shape or any(d < 1 for d in shape):
        raise ValueError(f"{what} must be non-empty with every dimension >= 1, got {shape!r}")
    return shape


def _torch_device(torch: Any, device: object) -> Any:
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


def _random_input(torch: Any, shape: tuple[int, ...], dtype: Any, dev: Any) -> Any:
    gen = torch.Generator().manual_seed(0)
    if dtype.is_floating_point or dtype.is_complex:
        x = torch.randn(shape, generator=gen, dtype=torch.float32).to(dtype)
    elif dtype == torch.bool:
        x = torch.randint(0, 2, shape, generator=gen).bool()
    else:
        x = torch.randint(0, 2, shape, generator=gen).to(dtype)
    return x.to(dev)


@overload
def profile_model(model: torch.nn.Module, input_shape: Sequence[int],
                  device: str | torch.device = "cpu",
                  warmup: int = DEFAULT_NUM_WARMUP, iters: int = 100,
                  batch_sizes: None = None, dtype: DType | None = None, name: str | None = None,
                  *, num_warmup: int | None = None, num_iters: int | None = None,
                  **bench_kw: Any) -> BenchmarkStats: ...
@overload
def profile_model(model: torch.nn.Module, input_shape: Sequence[int],
                  device: str | torch.device = "cpu",
                  warmup: int = DEFAULT_NUM_WARMUP, iters: int = 100, *,
                  batch_sizes: Iterable[int], dtype: DType | None = None,
                  name: str | None = None, num_warmup: int | None = None,
                  num_iters: int | None = None, **bench_kw: Any) -> SweepResult: ...
@overload
def profile_model(model: torch.nn.Module, input_shape: Sequence[int],
                  device: str | torch.device, warmup: int, iters: int,
                  batch_sizes: Iterable[int], dtype: DType | None = None,
                  name: str | None = None, *, num_warmup: int | None = None,
                  num_iters: int | None = None, **bench_kw: Any) -> SweepResult: ...
def profile_model(model: torch.nn.Module, input_shape: Sequence[int],
                  device: str | torch.device = "cpu",
                  warmup: int = WARMUP, iters: int = _ITERS,
                  batch_sizes: Iterable[int] | None = None, dtype: DType | None = None,
                  name: str | None = None, *, num_warmup: int | None = None,
                  num_iters: int | None = None,
                  **bench_kw: Any) -> BenchmarkStats | SweepResult:
    """Latency profile of a ``torch.nn.Module`` (the latency-profiler recipe).

    Moves ``model`` to ``device`` (in place, as ``Module.to`` does), puts it in
    ``eval()`` mode, builds a seeded random input of ``input_shape`` and times
    ``model(x)`` under ``torch.inference_mode()`` with the native harness, each call
    between two syncs of the device (native ``cuCtxSynchronize`` on cuda,
    ``torch.mps.synchronize`` on mps, none on cpu).

    Parameters
    ----------
    model : torch.nn.Module
        What to time.
    input_shape : sequence of int
        The input's shape; its first dimension is the batch size (``batch_size`` of
        the result, so ``throughput`` is samples/s).
    device : str or torch.device, default "cpu"
        "cpu", "cuda", "cuda:1", "mps".
    warmup : int, default 10
        Untimed calls first (per batch size); ``num_warmup`` is the same option.
    iters : int, default 100
        Timed calls (per batch size); ``num_iters`` is the same option.
    batch_sizes : iterable of int, optional
        Profile each batch size in turn (the first dimension of ``input_shape``
        replaced) and return a :class:`SweepResult` with ``param="batch_size"``.
    dtype : torch.dtype or str, optional
        The input's dtype (default float32); a floating dtype converts the model's
        floating parameters too (``torch.float16``: a half-precision model); an
        integer dtype (token ids) gives inputs in {0, 1} and leaves the model alone.
    name : str, optional
        The result's label; None: the model's class name.
    num_warmup, num_iters : int, optional
        ``warmup`` and ``iters`` by the names every entry point takes; giving both
        names of one count is a TypeError.
    **bench_kw
        ``benchmark_callable``'s options (``track_ram``, ``target_rel_ci``, ...); a
        keyword that is none of its options is passed on to the model, and when the
        model rejects a near miss of an option (``num_iter=``, ``batch_size=``) the
        TypeError has a note naming the option.

    Returns
    -------
    BenchmarkStats or SweepResult
        One result, or one per batch size.  On cuda, ``torch_max_allocated_mb`` is
        torch's own peak allocation (weights and input included), beside the
        device-wide ``vram_delta_mb``.

    Raises
    ------
    TypeError
        ``model`` is not a ``torch.nn.Module``, a shape that is not ints, or both
        ``warmup`` and ``num_warmup`` (``iters`` and ``num_iters``) given.
    ValueError
        An empty or non-positive shape or batch size, or an unknown dtype.
    RuntimeError
        A device torch cannot use here.

    Examples
    --------
    >>> import torch  # doctest: +SKIP
    >>> stats = profile_model(torch.nn.Linear(64, 64), (8, 64), iters=20)  # doctest: +SKIP
    >>> stats.batch_size  # doctest: +SKIP
    8
    """
    import torch

    warmup, iters = counts("profile_model", warmup, iters, num_warmup, num_iters)
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"profile_model: model must be a torch.nn.Module, got {type(model).__name__}")
    shape = _check_shape(input_shape, "profile_model: input_shape")
    sizes = None
    if batch_sizes is not None:
        sizes = [int(b) for b in batch_sizes]
        if not sizes or any(b < 1 for b in sizes):
            raise ValueError(f"profile_model: batch_sizes must be positive ints, got {sizes!r}")
    tdtype = _torch_dtype(torch, dtype)
    dev = _torch_device(torch, device)
    label = name or type(model).__name__

    model = model.to(dev)
    if tdtype.is_floating_point:
        model = model.to(tdtype)
    model.eval()

    cuda = dev.type == "cuda"
    sync: Callable[[], Any] | None
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

    def run(batch: int) -> BenchmarkStats:
        x = _random_input(torch, (batch,) + shape[1:], tdtype, dev)
        # on cuda, torch.cuda.device(dev) makes dev's context current for the native sync
        with torch.inference_mode(), (torch.cuda.device(dev) if cuda else contextlib.nullcontext()):
            if cuda:
                torch.cuda.synchronize(dev)
                torch.cuda.reset_peak_memory_stats(dev)
            with remedy_words(MODELS), noting_near_options(bench_kw, _OWN_OPTIONS):
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

    if sizes is None:
        return run(shape[0])
    # sweep()'s loop: labels each row, keeps the finished rows on Ctrl-C (.partial)
    return _sweep_rows(sizes, "batch_size", run)
