"""One vocabulary for the counts, and the keywords meant for the harness (issue 33).

Every entry point takes ``num_warmup`` / ``num_iters`` (benchmark_callable's names);
``profile_model`` and ``benchmark_onnx`` keep their older ``warmup`` / ``iters`` as
aliases, and giving both names of one count is a TypeError.  A keyword an entry point
does not know is passed on to the timed callable; when the callable rejects one that is
a near miss of an option (``num_iter=``, ``provider=``), its TypeError gets a note naming
the option: the rule is the core's (``_native._note_near_option``, capi/notes.c), which
benchmark_callable applies to its own options; the adapters add theirs here.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterable, Iterator, Mapping, Tuple

from ._native import DEFAULT_NUM_WARMUP
from ._native import _note_near_option

__all__ = ["Default", "WARMUP", "counts", "noting_near_options", "options_of"]


class Default(int):
    """A count's default: equal to its number and shown as it (the signature, help()),
    but told apart from the same number passed, so that ``warmup=`` and ``num_warmup=``
    given together are refused whatever their values."""

    __slots__ = ()

    def __repr__(self) -> str:
        return int.__repr__(self)


WARMUP = Default(DEFAULT_NUM_WARMUP)


def _one(fn: str, alias: str, alias_value: Any, name: str, value: Any) -> Any:
    if value is None:
        return alias_value
    if not isinstance(alias_value, Default):
        raise TypeError(
            f"{fn}(): {alias}={alias_value!r} and {name}={value!r} are one option given twice "
            f"({name} is its name in every entry point, {alias} the older one here); give one")
    return value


def counts(fn: str, warmup: Any, iters: Any, num_warmup: Any,
           num_iters: Any) -> Tuple[Any, Any]:
    """(warm-up calls, timed calls) of an entry point with the aliases ``warmup`` /
    ``iters``: the ``num_*`` value when given, else the alias's; both given (the alias
    not left at its default): TypeError naming the two.  The values are checked where
    they are used (benchmark_callable's count rule)."""
    return (_one(fn, "warmup", warmup, "num_warmup", num_warmup),
            _one(fn, "iters", iters, "num_iters", num_iters))


@contextlib.contextmanager
def noting_near_options(keywords: Iterable[str],
                        options: Mapping[str, str]) -> Iterator[None]:
    """Around a call that passes ``keywords`` on to the user's callable: a TypeError
    rejecting one of them that is a near miss of ``options`` (name -> option to
    suggest) leaves with the core's note ("did you mean providers=? ...")."""
    try:
        yield
    except TypeError as exc:
        _note_near_option(exc, tuple(keywords), dict(options))
        raise


def options_of(*names: str, **aliases: str) -> Mapping[str, str]:
    """{name: name} for each option, plus {alias: option}."""
    out = {n: n for n in names}
    out.update(aliases)
    return out

