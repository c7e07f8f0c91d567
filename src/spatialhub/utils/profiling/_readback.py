"""Files read back from disk, checked before anything uses them.

A saved run (the pytest plugin's ``--benchmark-compare`` and the gate's history), a
file given to the CLI's ``--compare`` and the calibration file are written by us or by
pytest-benchmark, and then sit where anyone can edit, truncate or mix them up.  Each
reader checks the values it uses before it uses them, so that a bad one is a single
line naming the file and the field (``0001_x.json: benchmarks[2].stats.median is not a
number (null)``), never a traceback from inside a comparison.  What each reader does
with a bad file (a usage error, or the file skipped with a note) is its own decision:
docs/reliability.md, "Round 4".
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

__all__ = ["BadValue", "BadFile", "shown", "read_json", "number", "mapping", "array", "text",
           "item"]


class BadValue(ValueError):
    """A value that is not what its reader needs: ``where`` is its place in the document
    (``benchmarks[2].stats.median``), ``problem`` what is wrong (``is not a number
    (null)``)."""

    def __init__(self, where: str, problem: str):
        self.where, self.problem = where, problem
        super().__init__(f"{where} {problem}" if where else problem)


class BadFile(ValueError):
    """A file that cannot be used: ``str()`` is one line, ``PATH: what is wrong``."""

    def __init__(self, path: Any, detail: str):
        self.path, self.detail = str(path), detail
        super().__init__(f"{self.path}: {detail}")


def shown(value: Any) -> str:
    """A value as its JSON reads (``null``, ``"abc"``, ``NaN``), short."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    try:
        out = json.dumps(value)
    except (TypeError, ValueError):
        out = repr(value)
    return out if len(out) <= 40 else out[:37] + "..."


def read_json(path: Any) -> Any:
    """The JSON document in ``path``; ``BadFile`` when it cannot be read or parsed."""
    try:
        raw = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise BadFile(path, "is not UTF-8 text") from None
    except OSError as exc:
        raise BadFile(path, f"cannot be read ({exc.strerror or exc})") from None
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise BadFile(path, f"is not JSON ({exc})") from None


def item(d: dict, key: str, where: str) -> Any:
    """``d[key]``; ``BadValue`` naming ``where`` when it is missing."""
    if key not in d:
        raise BadValue(where, "is missing")
    return d[key]


def number(value: Any, where: str, *, null: bool = False, low: float | None = None,
           whole: bool = False) -> Any:
    """``value`` when it is a finite number (not a bool), at least ``low``, a whole number
    when ``whole``; None when it is None and ``null``; else ``BadValue``."""
    if value is None and null:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadValue(where, f"is not a number ({shown(value)})")
    if not math.isfinite(value):
        raise BadValue(where, f"is not a finite number ({shown(value)})")
    if whole and not float(value).is_integer():
        raise BadValue(where, f"is not a whole number ({shown(value)})")
    if low is not None and value < low:
        raise BadValue(where, f"is negative ({shown(value)})" if low == 0
                       else f"is below {low:g} ({shown(value)})")
    return value


def mapping(value: Any, where: str, *, null: bool = False) -> Any:
    if value is None and null:
        return None
    if not isinstance(value, dict):
        raise BadValue(where, f"is not an object ({shown(value)})")
    return value


def array(value: Any, where: str, *, null: bool = False) -> Any:
    if value is None and null:
        return None
    if not isinstance(value, list):
        raise BadValue(where, f"is not a list ({shown(value)})")
    return value


def text(value: Any, where: str, *, null: bool = False) -> Any:
    if value is None and null:
        return None
    if not isinstance(value, str):
        raise BadValue(where, f"is not a string ({shown(value)})")
    return value
