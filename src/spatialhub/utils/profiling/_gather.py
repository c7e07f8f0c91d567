"""Warnings of several runs said as one (a sweep's values, a model's batch sizes).

Each run says its own BenchmarkWarning (csrc/types/warn.c: one line per cause).  A sweep
of ten values would print ten blocks; here the runs' warnings are held while they run and
said as one block: a line per cause, naming the values that showed it, with the remedy the
first of them gave.  The warning is of the class its causes give (a combination is an
instance of each cause's class, so filters match as for one run) and carries the runs'
own warnings (``.warnings``) and results (``.stats``).  Other warnings pass unchanged.
"""
from __future__ import annotations

import os
import sys
import warnings
from typing import Any

from ._native import BenchmarkWarning, _warning_class

_MOST_VALUES = 3   # values named on a line; the rest counted
_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def user_stacklevel() -> int:
    """The stacklevel, for a warnings.warn made by the caller, of the first frame outside
    this package (the user's line, however many of our wrappers lie between), as the
    core finds it for its own warnings."""
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level


class gathered:
    """``with gathered(param) as runs:`` holds the BenchmarkWarnings said in the block;
    append ``(value, stats)`` to ``runs`` as each run ends (a warning's ``.stats`` tells
    its run).  On leaving, they are said as one warning about the runs over ``param``."""

    def __init__(self, param: str) -> None:
        self.param = param
        self.runs: list[Any] = []
        self._catching = warnings.catch_warnings(record=True)

    def __enter__(self) -> list[Any]:
        self._caught = self._catching.__enter__()
        warnings.simplefilter("always", BenchmarkWarning)
        return self.runs

    def __exit__(self, *exc: Any) -> None:
        self._catching.__exit__(*exc)
        value_of = {id(stats): value for value, stats in self.runs}
        said = []   # (value, warning) of ours; others are said again as they were
        for w in self._caught:
            if not issubclass(w.category, BenchmarkWarning):
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
                continue
            said.append((value_of.get(id(getattr(w.message, "stats", None))), w.message))
        if said:
            name = getattr(self.runs[0][1], "name", None) if self.runs else None
            what = f"benchmark {name!r}" if name is not None else "the runs"
            warnings.warn(_one(what, self.param, said, [s for _, s in self.runs]),
                          stacklevel=user_stacklevel())


def _one(what: str, param: str, said: list[tuple[Any, Any]], results: list[Any]) -> Warning:
    by_cause: dict[str, list[Any]] = {}
    remedy: dict[str, str] = {}
    for value, w in said:
        lines = str(w).splitlines()[1:]
        for label in getattr(w, "causes", ()) or ():
            by_cause.setdefault(label, [])
            if value not in by_cause[label]:
                by_cause[label].append(value)
            for line in lines:
                if line.strip().startswith(label + ":") and label not in remedy:
                    remedy[label] = line.split(" -- ", 1)[1] if " -- " in line else ""
    head = str(said[0][1]).splitlines()[0]
    docs = head[head.rfind("("):] if head.endswith("):") else ":"
    text = [f"{what} over {param} {docs}"]
    for label, values in by_cause.items():
        named = ", ".join(str(v) for v in values[:_MOST_VALUES] if v is not None)
        more = len(values) - _MOST_VALUES
        where = f"at {param}={named}" + (f" and {more} more" if more > 0 else "")
        tail = f" -- {remedy[label]}" if remedy.get(label) else ""
        text.append(f"  {label}: {where}{tail}")
    causes = tuple(by_cause)
    try:
        cls = _warning_class(causes)
    except (TypeError, ValueError):
        cls = BenchmarkWarning
    w = cls("\n".join(text))
    w.causes = causes
    w.warnings = [m for _, m in said]
    w.stats = results
    w.benchmark = what
    return w
