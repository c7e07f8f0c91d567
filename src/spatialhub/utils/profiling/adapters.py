"""Adapters that are Python by nature: PyTorch models, ONNX Runtime sessions, sweeps.

Each lives in a module named for what it adapts -- ``sweeps`` (sweep,
SweepResult), ``torch_models`` (profile_model), ``onnx_models``
(benchmark_onnx) -- and every one is a thin layer over the native
``benchmark_callable``.  This module re-exports them under the names they
always had, so ``from spatialhub.utils.profiling.adapters import ...``
keeps working.  Neither torch nor onnxruntime is imported at module import.
"""
from __future__ import annotations

from .onnx_models import _onnx_feed, _random_onnx_inputs, benchmark_onnx, resolve_provider
from .sweeps import SweepResult, _unpack_target, sweep, throughput_unit
from .torch_models import profile_model

__all__ = ["SweepResult", "benchmark_onnx", "profile_model", "sweep"]

# private helpers the tests and older callers import from here
_reexported = (_onnx_feed, _random_onnx_inputs, _unpack_target, resolve_provider,
               throughput_unit)
