"""The words a warning's remedy uses, per interface.

A remedy names what the user can change in the interface they called: a parameter of
the function, a flag of the CLI, an option of the pytest plugin.  The native core
composes the text; each caller passes its words down with :func:`remedy_words` (a
context variable, so nested and concurrent callers keep their own).  A direct
``benchmark_callable`` call gets :data:`CALLABLE`'s words, which the core holds too.

Each entry is ``(warmup, iters, repeat, compare, counted, qps, workers)``: the knob that
lengthens the warm-up, the one that takes more timed calls, how to repeat the measurement
in fresh processes, how to answer an A/B question whatever the neighbours do (interleaved
sides, or instruction counts where the interface has no interleaving), how to count
instructions under callgrind, and a run under load's rate and its serving threads
(``benchmark_load``).  Each is short: a warning's line holds one or two of them
within ~100 characters.
"""
from __future__ import annotations

import contextlib
from typing import Iterator, Tuple

from . import _native

Words = Tuple[str, str, str, str, str, str, str]

CALLABLE: Words = ("num_warmup", "num_iters", "benchmark_repeated", "compare_callables",
                   "spatialhub-bench --instructions", "qps", "workers")
MODELS: Words = ("warmup", "iters", "a second run", "compare_callables",
                 "spatialhub-bench --instructions", "qps", "workers")
COMPARE: Words = ("num_warmup", "rounds", "a second comparison", "more rounds",
                  "spatialhub-bench --instructions", "qps", "workers")
CLI: Words = ("--warmup", "--iters", "--processes", "--instructions", "--instructions",
              "--qps", "--workers")
# benchmark.load(func, qps=..., workers=...) takes benchmark_load's own parameters
PYTEST: Words = ("--benchmark-warmup-iterations", "--benchmark-min-rounds",
                 "--benchmark-processes", "--benchmark-instructions",
                 "--benchmark-instructions", "qps", "workers")


def current() -> Words:
    """The words in effect here (a fresh process is handed its parent's)."""
    return _native._remedy_words.get(CALLABLE)


@contextlib.contextmanager
def remedy_words(words: Words) -> Iterator[None]:
    """Within the block, the core's warnings name these knobs."""
    token = _native._remedy_words.set(tuple(words))
    try:
        yield
    finally:
        _native._remedy_words.reset(token)
