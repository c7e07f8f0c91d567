"""Do two models give the same answers?  ``check_outputs`` runs a reference and a
candidate on the same inputs and measures how far the candidate's outputs are from the
reference's.

Python by nature: it calls the user's models (a torch module, an ONNX Runtime session,
any callable) and converts what they return to NumPy.  The arithmetic is NumPy's, in
float64 (complex128 for complex outputs), so a float16 or quantised candidate is judged
on its values, not on the rounding of the comparison.  torch and onnxruntime are never
imported here: a tensor is recognised when torch is already loaded, a session by its
``run`` / ``get_inputs`` / ``get_outputs`` methods.
"""
from __future__ import annotations

import math
import sys
from dataclasses import asdict, dataclass
from typing import Any, Callable, Mapping, Sequence, Union

import numpy as np
import numpy.typing as npt

from ._numbers import exact, number

__all__ = ["OutputCheck", "OutputDiff", "check_outputs"]

#: One call's arguments: a sequence is the positional arguments, a mapping the keyword
#: arguments (an ONNX feed), a single array or tensor the one positional argument.
Inputs = Union[Sequence[Any], Mapping[str, Any], npt.NDArray[Any]]
Key = Union[str, int, None]


@dataclass(frozen=True)
class OutputDiff:
    """How one output of the candidate differs from the reference's.

    Parameters
    ----------
    key : str, int or None
        The output's key (dict outputs), position (tuples, lists, an ONNX session's
        outputs) or None for a single array; nested outputs join their keys with dots.
    shape : tuple of int
        The output's shape (the same on both sides).
    reference_dtype, candidate_dtype : str
        The dtypes the outputs came in (before the float64 comparison).
    max_abs_error : float
        ``max |candidate - reference|`` over the elements finite on both sides.
    max_rel_error : float
        ``max |candidate - reference| / |reference|`` over the elements finite on both
        sides where the reference is not 0 (``atol`` judges those).
    nonfinite : int
        Elements where either side is NaN, or only one side infinite (or they are
        infinities of opposite signs): they fail ``allclose``.
    passed : bool
        ``numpy.allclose(candidate, reference, rtol, atol)`` on this output.
    worst_index : tuple of int or None
        The element furthest outside the tolerance (largest
        ``|candidate - reference| / (atol + rtol * |reference|)``; a non-finite
        mismatch first); None for an empty output.
    worst_reference, worst_candidate : float or None
        The two values there (complex outputs: their moduli).
    """

    key: Key
    shape: tuple[int, ...]
    reference_dtype: str
    candidate_dtype: str
    max_abs_error: float
    max_rel_error: float
    nonfinite: int
    passed: bool
    worst_index: tuple[int, ...] | None
    worst_reference: float | None
    worst_candidate: float | None


@dataclass(frozen=True)
class OutputCheck:
    """What ``check_outputs`` found: how far a candidate's outputs are from a reference's.

    Parameters
    ----------
    reference, candidate : str
        The two models' names.
    passed : bool
        ``numpy.allclose(candidate, reference, rtol, atol)`` held on every output.
    max_abs_error : float
        The largest ``|candidate - reference|`` over every output (elements finite on
        both sides).
    max_rel_error : float
        The largest ``|candidate - reference| / |reference|`` over every output, where the
        reference is not 0.
    cosine_similarity : float
        Of all outputs flattened into one vector each (finite elements; 1.0 when both
        are all zeros).
    top1_agreement : float or None
        The share of rows whose top-1 class agrees, over the outputs that are 2-D logits
        (floating, at least two columns): the candidate's arg-max is the reference's, or
        scores in the reference within the tolerance of its top (a tie is not a
        disagreement); None when no output is 2-D.
    worst_key : str, int or None
        The output holding the worst element (its dict key or position); None for a
        single array.
    worst_index : tuple of int or None
        The worst element's index in that output: the one furthest outside the
        tolerance (``|candidate - reference| / (atol + rtol * |reference|)``).
    worst_reference, worst_candidate : float or None
        The two values at the worst element.
    nonfinite : int
        Elements, over every output, where either side is NaN or the infinities differ.
    elements : int
        Elements compared, over every output.
    rtol, atol : float
        The tolerances ``passed`` was judged with.
    outputs : tuple of OutputDiff
        The same figures per output, in the reference's order.

    Examples
    --------
    >>> import numpy as np
    >>> w = np.arange(6.0).reshape(2, 3)
    >>> check = check_outputs(lambda x: x @ w, lambda x: (x @ w).astype(np.float16),
    ...                       [np.ones((4, 2))])
    >>> check.passed, check.top1_agreement
    (True, 1.0)
    """

    reference: str
    candidate: str
    passed: bool
    max_abs_error: float
    max_rel_error: float
    cosine_similarity: float
    top1_agreement: float | None
    worst_key: Key
    worst_index: tuple[int, ...] | None
    worst_reference: float | None
    worst_candidate: float | None
    nonfinite: int
    elements: int
    rtol: float
    atol: float
    outputs: tuple[OutputDiff, ...] = ()

    @property
    def name(self) -> str:
        """``"candidate vs reference"``: the check's label in a report."""
        return f"{self.candidate} vs {self.reference}"

    def to_dict(self) -> dict[str, Any]:
        """Every field as plain Python values (JSON-ready: tuples become lists).

        Returns
        -------
        dict
        """
        out: dict[str, Any] = _jsonable(asdict(self))
        return out

    def __str__(self) -> str:
        word = "passed" if self.passed else "FAILED"
        where = ""
        if self.worst_index is not None:
            key = "" if self.worst_key is None else f"[{self.worst_key!r}]"
            where = f", worst at {key}{list(self.worst_index)}"
        top1 = ("" if self.top1_agreement is None
                else f", top-1 agreement {100 * self.top1_agreement:.1f}%")
        return (f"{self.name}: {word} (rtol {exact(self.rtol)}, atol {exact(self.atol)}): "
                f"max abs error {number(self.max_abs_error)}, max rel error "
                f"{number(self.max_rel_error)}, cosine {self.cosine_similarity:.6f}{top1}"
                f"{where}")


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    return x


# ---- calling the models ----------------------------------------------------------------

def _torch() -> Any:
    return sys.modules.get("torch")


def _is_tensor(x: Any) -> bool:
    torch = _torch()
    return torch is not None and isinstance(x, torch.Tensor)


def _is_session(f: Any) -> bool:
    """An onnxruntime.InferenceSession (or anything with its interface)."""
    return (not callable(f) and all(callable(getattr(f, m, None))
                                    for m in ("run", "get_inputs", "get_outputs")))


def _is_module(f: Any) -> bool:
    torch = _torch()
    return torch is not None and isinstance(f, torch.nn.Module)


def _name_of(f: Any, role: str) -> str:
    """A model's name: its ``__name__``, a torch module's class name, "onnx-session";
    the role ("reference", "candidate") for a lambda or a nameless callable."""
    if _is_session(f):
        return "onnx-session"
    if _is_module(f):
        return type(f).__name__
    name = getattr(f, "__name__", None)
    if isinstance(name, str) and name and not name.startswith("<"):
        return name
    return role


def _split_inputs(inputs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if isinstance(inputs, Mapping):
        bad = [k for k in inputs if not isinstance(k, str)]
        if bad:
            raise TypeError(f"check_outputs(): inputs as a dict are keyword arguments, so "
                            f"their keys must be str, not {type(bad[0]).__name__}")
        return (), dict(inputs)
    if isinstance(inputs, np.ndarray) or _is_tensor(inputs):
        return (inputs,), {}
    if isinstance(inputs, (list, tuple)):
        return tuple(inputs), {}
    raise TypeError(f"check_outputs(): inputs must be a sequence (the positional "
                    f"arguments), a dict (the keyword arguments) or one array, not "
                    f"{type(inputs).__name__}")


def _module_target(module: Any) -> tuple[Any, Any]:
    """(floating dtype, device) of a torch module's first floating parameter or buffer:
    what its inputs are cast to (a float16 copy takes float16 inputs); (None, None) when
    it has none (a dynamically quantised module takes its float inputs as they are)."""
    for t in list(module.parameters()) + list(module.buffers()):
        if t.is_floating_point():
            return t.dtype, t.device
    return None, None


def _to_module_input(x: Any, dtype: Any, device: Any) -> Any:
    torch = _torch()
    if isinstance(x, np.ndarray):
        x = torch.from_numpy(np.ascontiguousarray(x))
    if isinstance(x, torch.Tensor):
        if dtype is not None and x.is_floating_point() and x.dtype != dtype:
            x = x.to(dtype)
        if device is not None and x.device != device:
            x = x.to(device)
    return x


_ORT_TYPES = {
    "tensor(float)": np.float32, "tensor(double)": np.float64,
    "tensor(float16)": np.float16, "tensor(int8)": np.int8, "tensor(int16)": np.int16,
    "tensor(int32)": np.int32, "tensor(int64)": np.int64, "tensor(uint8)": np.uint8,
    "tensor(uint16)": np.uint16, "tensor(uint32)": np.uint32, "tensor(uint64)": np.uint64,
    "tensor(bool)": np.bool_,
}


def _run_session(session: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    declared = {a.name: a.type for a in session.get_inputs()}
    names = list(declared)
    if args and kwargs:
        raise TypeError("check_outputs(): an ONNX session takes its inputs by position or "
                        "by name, not both")
    if kwargs:
        feed = dict(kwargs)
    else:
        if len(args) != len(names):
            raise ValueError(f"check_outputs(): the ONNX session takes {len(names)} input(s) "
                             f"{names}, got {len(args)}")
        feed = dict(zip(names, args))
    for k, v in feed.items():
        arr = _leaf_array(v)
        want = _ORT_TYPES.get(declared.get(k, ""))
        feed[k] = arr.astype(want) if want is not None and arr.dtype != want else arr
    outs = session.run(None, feed)
    return {o.name: v for o, v in zip(session.get_outputs(), outs)}


def _call(f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if _is_session(f):
        return _run_session(f, args, kwargs)
    if not callable(f):
        raise TypeError(f"check_outputs(): a model must be callable or an ONNX Runtime "
                        f"session, not {type(f).__name__}")
    if _is_module(f):
        torch = _torch()
        dtype, device = _module_target(f)
        args = tuple(_to_module_input(a, dtype, device) for a in args)
        kwargs = {k: _to_module_input(v, dtype, device) for k, v in kwargs.items()}
        with torch.no_grad():
            return f(*args, **kwargs)
    return f(*args, **kwargs)


# ---- outputs as arrays ------------------------------------------------------------------

def _leaf_array(x: Any) -> npt.NDArray[Any]:
    if _is_tensor(x):
        torch = _torch()
        t = x.detach()
        if t.is_quantized:
            t = t.dequantize()
        if t.dtype == torch.bfloat16:      # NumPy has no bfloat16: float32 holds it exactly
            t = t.float()
        return np.asarray(t.cpu().numpy())
    return np.asarray(x)


def _leaves(out: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    """[(key path, array)] of an output: arrays, tensors, and tuples / lists / dicts of
    them (nested)."""
    if isinstance(out, Mapping):
        items: list[tuple[tuple[Any, ...], Any]] = []
        for k, v in out.items():
            items += _leaves(v, prefix + (k,))
        return items
    if isinstance(out, (list, tuple)):
        items = []
        for i, v in enumerate(out):
            items += _leaves(v, prefix + (i,))
        return items
    return [(prefix, _leaf_array(out))]


def _key(path: tuple[Any, ...]) -> Key:
    if not path:
        return None
    if len(path) == 1 and isinstance(path[0], (str, int)):
        return path[0]
    return ".".join(str(p) for p in path)


def _pair(ref: list[tuple[tuple[Any, ...], Any]], cand: list[tuple[tuple[Any, ...], Any]]
          ) -> list[tuple[Key, Any, Any]]:
    """The outputs paired: by key when both sides have the same keys, else by position
    (a tuple against a session's named outputs), the one output whatever its wrapping."""
    if len(ref) != len(cand):
        raise ValueError(f"check_outputs(): the reference returned {len(ref)} output(s), "
                         f"the candidate {len(cand)}")
    if len(ref) == 1:
        return [(_key(ref[0][0]) if ref[0][0] else _key(cand[0][0]), ref[0][1], cand[0][1])]
    by_key = dict(cand)
    if set(by_key) == {p for p, _ in ref}:
        return [(_key(p), a, by_key[p]) for p, a in ref]
    return [(_key(rp) if rp else _key(cp), a, b) for (rp, a), (cp, b) in zip(ref, cand)]


def _as_float(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    if np.iscomplexobj(a):
        return a.astype(np.complex128)
    if a.dtype.kind not in "biuf":
        raise TypeError(f"check_outputs(): an output of dtype {a.dtype} is not numeric")
    return a.astype(np.float64)


def _diff(key: Key, ref: npt.NDArray[Any], cand: npt.NDArray[Any], rtol: float, atol: float
          ) -> tuple[OutputDiff, float, npt.NDArray[Any], npt.NDArray[Any]]:
    """The output's figures, its worst element's score (how far outside the tolerance)
    and both sides flattened, with the elements not finite on both set to 0."""
    if ref.shape != cand.shape:
        where = "" if key is None else f"output {key!r}: "
        raise ValueError(f"check_outputs(): {where}the reference's shape is {ref.shape}, "
                         f"the candidate's {cand.shape}")
    r, c = _as_float(ref), _as_float(cand)
    with np.errstate(invalid="ignore", over="ignore"):
        finite = np.isfinite(r) & np.isfinite(c)
        mismatch = ~finite & ~(r == c)          # inf == inf of one sign; NaN never
        r0, c0 = np.where(finite, r, 0), np.where(finite, c, 0)
        diff = np.abs(c0 - r0).astype(np.float64)
        absr = np.abs(r0).astype(np.float64)
        passed = bool(np.allclose(c, r, rtol=rtol, atol=atol))
    max_abs = float(diff.max()) if diff.size else 0.0
    rel = np.divide(diff, absr, out=np.zeros_like(diff), where=absr != 0)
    max_rel = float(rel.max()) if rel.size else 0.0
    tol = atol + rtol * absr
    score = np.divide(diff, tol, out=np.where(diff > 0, np.inf, 0.0), where=tol > 0)
    score = np.where(mismatch, np.inf, score)
    worst: tuple[int, ...] | None = None
    worst_r = worst_c = None
    worst_score = -1.0
    if score.size:
        flat = int(np.argmax(score))
        worst = tuple(int(i) for i in np.unravel_index(flat, score.shape))
        worst_r, worst_c = float(np.abs(r.flat[flat])), float(np.abs(c.flat[flat]))
        if not np.iscomplexobj(r):
            worst_r, worst_c = float(r.flat[flat]), float(c.flat[flat])
        worst_score = float(score.flat[flat])
    d = OutputDiff(key, tuple(int(n) for n in ref.shape), str(ref.dtype), str(cand.dtype),
                   max_abs, max_rel, int(mismatch.sum()), passed, worst, worst_r, worst_c)
    return d, worst_score, r0.ravel(), c0.ravel()


def _top1_agreeing(r: npt.NDArray[Any], c: npt.NDArray[Any], rtol: float, atol: float
                   ) -> int:
    """Rows whose top-1 class agrees: the candidate's arg-max is the reference's, or
    scores in the reference within the tolerance of the reference's top (a tie there,
    such as two saturated outputs, is not a disagreement)."""
    with np.errstate(invalid="ignore"):
        pick = np.argmax(c, axis=1)
        top = np.max(r, axis=1)
        got = r[np.arange(r.shape[0]), pick]
        same = (pick == np.argmax(r, axis=1)) | (top - got <= atol + rtol * np.abs(top))
    return int(same.sum())


def _cosine(a: npt.NDArray[Any], b: npt.NDArray[Any]) -> float:
    if np.iscomplexobj(a) or np.iscomplexobj(b):
        a = np.concatenate([np.real(a), np.imag(a)])
        b = np.concatenate([np.real(b), np.imag(b)])
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0 and nb == 0:
        return 1.0
    if na == 0 or nb == 0:
        return 0.0
    # scaled first: the dot product of two large vectors may overflow float64
    return float(np.clip(np.dot(a / na, b / nb), -1.0, 1.0))


def check_outputs(reference: Callable[..., Any] | Any, candidate: Callable[..., Any] | Any,
                  inputs: Inputs, *, rtol: float = 1e-3, atol: float = 1e-5,
                  name: str | None = None, reference_name: str | None = None
                  ) -> OutputCheck:
    """Run a reference and a candidate on the same inputs and compare their outputs.

    The candidate passes when ``numpy.allclose(candidate, reference, rtol, atol)`` holds
    on every output (``|candidate - reference| <= atol + rtol * |reference|`` element by
    element).  Beside that verdict: the largest absolute and relative errors, the
    cosine similarity of all outputs, the top-1 agreement of 2-D logits and the worst
    element.  Everything is computed in float64, so a float16, bfloat16 or quantised
    candidate is judged on its values.

    Parameters
    ----------
    reference : callable, torch.nn.Module or onnxruntime.InferenceSession
        The model whose answers are right.
    candidate : callable, torch.nn.Module or onnxruntime.InferenceSession
        The faster model (quantised, float16, exported to ONNX, ...).
    inputs : sequence, dict or array
        One call's arguments, given to both: a sequence is the positional arguments, a
        dict the keyword arguments (an ONNX feed), one array or tensor the one
        argument (as ``benchmark_onnx`` takes its inputs).  At the boundary of a torch
        module NumPy arrays become tensors, and floating inputs take the module's
        floating dtype and device (a ``.half()`` copy gets float16); an ONNX session
        gets NumPy arrays of its declared element types, by name or in input order.
        A plain callable gets them as they are.
    rtol : float, default 1e-3
        Relative tolerance, as ``numpy.allclose``'s (relative to the reference).
    atol : float, default 1e-5
        Absolute tolerance, as ``numpy.allclose``'s.
    name : str, optional
        The candidate's name in the result and a report (a report matches a check to
        the benchmark of that name); None: its ``__name__``, or its class name (a torch
        module), or ``"onnx-session"``.
    reference_name : str, optional
        The reference's name, likewise.

    Returns
    -------
    OutputCheck

    Raises
    ------
    ValueError
        The outputs differ in number or shape, or a tolerance is negative or not finite.
    TypeError
        Inputs of another kind, a model that is neither callable nor a session, or a
        non-numeric output.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.linspace(-1, 1, 12).reshape(3, 4)
    >>> check = check_outputs(np.tanh, lambda a: np.tanh(a).astype(np.float16), [x])
    >>> check.passed, check.max_abs_error < 1e-3
    (True, True)
    """
    for label, tol in (("rtol", rtol), ("atol", atol)):
        if isinstance(tol, bool) or not isinstance(tol, (int, float)):
            raise TypeError(f"check_outputs(): {label} must be a float, not "
                            f"{type(tol).__name__}")
        if not (math.isfinite(tol) and tol >= 0):
            raise ValueError(f"check_outputs(): {label} must be a finite number >= 0, "
                             f"got {tol!r}")
    for label, given in (("name", name), ("reference_name", reference_name)):
        if given is not None and not isinstance(given, str):
            raise TypeError(f"check_outputs(): {label} must be str, not "
                            f"{type(given).__name__}")
    args, kwargs = _split_inputs(inputs)
    ref_out = _call(reference, args, kwargs)
    cand_out = _call(candidate, args, kwargs)
    pairs = _pair(_leaves(ref_out), _leaves(cand_out))
    diffs: list[OutputDiff] = []
    scores: list[float] = []
    ref_flat, cand_flat = [], []
    top1_rows = top1_agree = 0
    for key, r, c in pairs:
        d, score, rf, cf = _diff(key, r, c, float(rtol), float(atol))
        diffs.append(d)
        scores.append(score)
        ref_flat.append(rf)
        cand_flat.append(cf)
        if r.ndim == 2 and r.shape[1] >= 2 and r.dtype.kind == "f" and r.shape[0] > 0:
            top1_rows += r.shape[0]
            top1_agree += _top1_agreeing(_as_float(r), _as_float(c), rtol, atol)
    # the first output with the largest score (an empty output scores -1: never chosen
    # over one that has elements)
    worst = diffs[int(np.argmax(scores))] if diffs else None
    many = len(diffs) > 1
    return OutputCheck(
        reference=(reference_name if reference_name is not None
                   else _name_of(reference, "reference")),
        candidate=name if name is not None else _name_of(candidate, "candidate"),
        passed=all(d.passed for d in diffs),
        max_abs_error=max((d.max_abs_error for d in diffs), default=0.0),
        max_rel_error=max((d.max_rel_error for d in diffs), default=0.0),
        cosine_similarity=_cosine(np.concatenate(ref_flat) if ref_flat else np.zeros(0),
                                  np.concatenate(cand_flat) if cand_flat else np.zeros(0)),
        top1_agreement=top1_agree / top1_rows if top1_rows else None,
        worst_key=(worst.key if worst is not None and (many or worst.key is not None)
                   else None),
        worst_index=worst.worst_index if worst is not None else None,
        worst_reference=worst.worst_reference if worst is not None else None,
        worst_candidate=worst.worst_candidate if worst is not None else None,
        nonfinite=sum(d.nonfinite for d in diffs),
        elements=sum(int(np.prod(d.shape)) for d in diffs),
        rtol=float(rtol), atol=float(atol), outputs=tuple(diffs))
