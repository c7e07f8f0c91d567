"""Two byte-identical callables for the false-verdict benchmarks (importable by name, so
fresh interpreters load them without re-running a script)."""
import numpy as np


def pipeline_a(frame):
    return np.clip(frame * 1.5, 0.0, 1.0) > 0.6


def pipeline_b(frame):
    return np.clip(frame * 1.5, 0.0, 1.0) > 0.6


def pipeline_slower(frame):
    """pipeline_a and one more pass over the frame: a real slowdown to be found."""
    out = np.clip(frame * 1.5, 0.0, 1.0) > 0.6
    np.multiply(frame, 1.5)
    return out
