"""Two byte-identical callables for the false-verdict benchmarks (importable by name, so
fresh interpreters load them without re-running a script)."""
import numpy as np


def pipeline_a(frame):
    return np.clip(frame * 1.5, 0.0, 1.0) > 0.6


def pipeline_b(frame):
    return np.clip(frame * 1.5, 0.0, 1.0) > 0.6
