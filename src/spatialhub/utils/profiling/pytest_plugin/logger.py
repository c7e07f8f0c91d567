"""Where the plugin's messages go: the streams pytest-benchmark uses, so scripts (and its
own tests) that read them keep working.

* ``warning``: a ``PytestBenchmarkWarning`` (pytest's warning summary during a test, the
  interpreter's warning line on stderr at configure / unconfigure time); with
  ``--benchmark-verbose`` also a framed `` WARNING: ...`` block on stderr.
* ``info``: one line on stderr ("Saved benchmark data in: ...").
* ``debug``: ``--benchmark-verbose`` only, on stderr, pytest's capture suspended (the
  calibration log is written while a test runs).
"""
from __future__ import annotations

import sys
import warnings

import pytest

__all__ = ["PytestBenchmarkWarning", "Logger"]


class PytestBenchmarkWarning(pytest.PytestWarning):
    """A remark of the benchmark plugin (pytest-benchmark's category name)."""


class Logger:
    QUIET, NORMAL, VERBOSE = range(3)

    def __init__(self, level=NORMAL, config=None):
        from _pytest._io import TerminalWriter

        self.level = level
        self.term = TerminalWriter(file=sys.stderr)
        self._capman = config.pluginmanager.getplugin("capturemanager") if config else None

    def _uncaptured(self):
        import contextlib

        if self._capman is not None:
            return self._capman.global_and_fixture_disabled()
        return contextlib.nullcontext()

    def warning(self, text, warner=None, suspend=False):
        if self.level >= self.VERBOSE:
            with (self._uncaptured() if suspend else _null()):
                self.term.line("")
                self.term.sep("-", red=True, bold=True)
                self.term.write(" WARNING: ", red=True, bold=True)
                self.term.line(text, red=True)
                self.term.sep("-", red=True, bold=True)
        (warner or _warn)(PytestBenchmarkWarning(text))

    def error(self, text):
        self.term.line("")
        self.term.sep("-", red=True, bold=True)
        self.term.line(text, red=True, bold=True)
        self.term.sep("-", red=True, bold=True)

    def info(self, text, newline=True, **markup):
        if self.level >= self.NORMAL:
            if newline:
                self.term.line("")
            self.term.line(text, **(markup or {"purple": True}))

    def debug(self, text, newline=False, **markup):
        if self.level >= self.VERBOSE:
            with self._uncaptured():
                if newline:
                    self.term.line("")
                self.term.line(text, **markup)


def _warn(w):
    # stacklevel: the line of ours that decided to warn is no use to the user; point at
    # the caller of the logger
    warnings.warn(w, stacklevel=3)


def _null():
    import contextlib

    return contextlib.nullcontext()
