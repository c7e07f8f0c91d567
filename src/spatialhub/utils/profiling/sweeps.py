"""Sweeps: one benchmark per value of a parameter, and their result.

``sweep(factory, values)`` benchmarks one callable per value through the
native ``benchmark_callable``; ``SweepResult`` is the list of results it
(and every adapter) returns, with the swept parameter attached.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Literal, Sequence, Tuple, TypeVar, Union

from ._gather import gathered
from ._native import (BenchmarkInterrupted, BenchmarkStats, benchmark_callable,
                      format_benchmark_table)
from ._vocab import noting_near_options, options_of

if TYPE_CHECKING:
    from ._native import TableColumns

__all__ = ["SweepResult", "sweep", "throughput_unit"]

# sweep()'s own options a keyword passed on to the callable may be a near miss of (the
# core knows its own, and warmup= / iters=)
_OWN_OPTIONS = options_of("factory", "values", "param")

_V = TypeVar("_V")

#: What sweep()'s factory returns for one value: the callable to time, or it with its
#: positional arguments, or with its positional and keyword arguments.
Target = Union[Callable[..., Any], Tuple[Callable[..., Any], Any],
               Tuple[Callable[..., Any], Any, dict[str, Any]]]


def throughput_unit(stats_list: Iterable[BenchmarkStats], param: str | None = None) -> str:
    """The unit of ``stats.throughput`` for a set of rows: "samples/s" when
    the batch size is swept or any row ran more than one sample per call,
    else "FPS"."""
    if param == "batch_size" or any(s.batch_size != 1 for s in stats_list):
        return "samples/s"
    return "FPS"


class SweepResult(list[BenchmarkStats]):
    """A list of ``BenchmarkStats``, one per value of a swept parameter.

    It is a real ``list`` (index it, iterate it, pass it anywhere a list of
    stats is accepted, e.g. ``format_benchmark_table``) with three additions:
    ``param``, ``values`` and ``to_table()``.  In a notebook it renders as the
    Markdown table.  What ``sweep``, ``profile_model(batch_sizes=...)`` and
    ``benchmark_onnx`` return.

    Parameters
    ----------
    stats : iterable of BenchmarkStats, default ()
        The rows.
    param : str, optional
        The name of the swept parameter; None when the rows differ by something
        the table shows already, such as the device.
    values : iterable, optional
        The swept values, in row order; None: each row's ``params[param]`` (its
        device when there is no ``param``).

    Raises
    ------
    ValueError
        ``values`` and ``stats`` of different lengths.

    Examples
    --------
    >>> rows = [BenchmarkStats("f", "CPU", 1.0, 1.0, 0.1, 1.2, 0.9, 1.3, 1000.0, 5, 20,
    ...                        params={"n": n}) for n in (10, 100)]
    >>> SweepResult(rows, param="n").values
    [10, 100]
    """

    def __init__(self, stats: Iterable[BenchmarkStats] = (), param: str | None = None,
                 values: Iterable[Any] | None = None) -> None:
        super().__init__(stats)
        self.param = param
        if values is None:
            values = [(s.params or {}).get(param) if param else s.device for s in self]
        self.values = list(values)
        if len(self.values) != len(self):
            raise ValueError(f"SweepResult: {len(self)} stats but {len(self.values)} values")

    @property
    def stats(self) -> list[BenchmarkStats]:
        """The rows as a plain list of BenchmarkStats."""
        return list(self)

    @property
    def throughput_unit(self) -> str:
        """"samples/s" when the rows are batched, else "FPS"."""
        return throughput_unit(self, self.param)

    def to_table(self, title: str | None = None, throughput_unit: str | None = None, *,
                 baseline: BenchmarkStats | None = None,
                 format: Literal["markdown", "html"] = "markdown",
                 columns: TableColumns = "auto") -> str:
        """The table, with a column for the swept parameter when there is one.

        ``format_benchmark_table`` over the rows, ``param=self.param``.

        Parameters
        ----------
        title : str, optional
            A heading above the table.
        throughput_unit : str, optional
            The throughput column's unit; None: :attr:`throughput_unit`.
        baseline : BenchmarkStats, optional
            Adds a 'vs Baseline' column, as in ``format_benchmark_table``.
        format : {"markdown", "html"}, default "markdown"
            The markup.
        columns : str or iterable of str, default "auto"
            The extra columns the rows have figures for (first call, GPU time,
            cache state); None: the released layout.

        Returns
        -------
        str
        """
        return format_benchmark_table(
            list(self), title, throughput_unit or self.throughput_unit,
            baseline=baseline, param=self.param, format=format, columns=columns,
        )

    @property
    def unstable(self) -> list[tuple[Any, str]]:
        """``[(value, stability), ...]`` for the rows whose samples were not stable
        ("noisy", "multimodal", "drifting"): their figures, and the trend through them,
        should not be trusted as they are (the table's footnote flags them; plot_sweep
        marks them)."""
        out = []
        for v, s in zip(self.values, self):
            label = getattr(s, "stability", None)
            if label is not None and label != "stable":
                out.append((v, label))
        return out

    def to_dicts(self, samples: bool = False, exact: bool = False) -> list[dict[str, Any]]:
        """``[s.to_dict(samples=samples, exact=exact) for s in self]``.

        Parameters
        ----------
        samples : bool, default False
            Include each row's samples.
        exact : bool, default False
            Unrounded values (what a saved file needs), not the display's rounding.
        """
        return [s.to_dict(samples=samples, exact=exact) for s in self]

    def __repr__(self) -> str:
        return f"SweepResult(param={self.param!r}, values={self.values!r}, stats={list.__repr__(self)})"

    def _repr_markdown_(self) -> str:
        return self.to_table()

    def _repr_html_(self) -> str:
        return self.to_table(format="html")


# --------------------------------------------------------------------------
# sweep
# --------------------------------------------------------------------------

def _unpack_target(made: object, value: object
                   ) -> tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]:
    """factory(value) -> callable | (callable, args) | (callable, args, kwargs)."""
    if callable(made):
        return made, (), {}
    if isinstance(made, tuple) and len(made) in (2, 3) and callable(made[0]):
        func, args = made[0], made[1]
        kwargs = made[2] if len(made) == 3 else {}
        if not isinstance(args, (tuple, list)):
            args = (args,)
        if not isinstance(kwargs, dict):
            raise TypeError(f"sweep: factory({value!r}) returned kwargs of type {type(kwargs).__name__}, expected dict")
        return func, tuple(args), kwargs
    raise TypeError(
        f"sweep: factory({value!r}) must return a callable, (callable, args) or "
        f"(callable, args, kwargs); got {type(made).__name__}"
    )


def sweep(factory: Callable[[_V], Target], values: Iterable[_V], param: str = "value",
          name: str | None = None, **bench_kw: Any) -> SweepResult:
    """Benchmark one callable per value of a parameter.

    Each value's target is timed with ``benchmark_callable(func, *args, name=name,
    **bench_kw, **kwargs)``; Ctrl-C keeps the values done so far on the exception
    (``.partial``, a SweepResult).

    Parameters
    ----------
    factory : callable
        ``factory(value)`` returns what to time for that value: a callable, or
        ``(callable, args)``, or ``(callable, args, kwargs)``.
    values : iterable
        The values, in order.
    param : str, default "value"
        The parameter's name: each result gets ``params = {param: value}``; with
        "batch_size" its ``batch_size`` is set too, so throughput reads in samples/s.
    name : str, optional
        The results' label; None: the callable's ``__name__``.
    **bench_kw
        ``benchmark_callable``'s options (``num_warmup``, ``num_iters``, ``device``,
        ``sync_fn``, ...); a keyword that is none of its options is passed on to
        every callable, and when one rejects a near miss of an option (``num_iter=``,
        ``params=``) the TypeError has a note naming the option.

    Returns
    -------
    SweepResult
        One BenchmarkStats per value, in order.

    Raises
    ------
    ValueError
        No values.
    TypeError
        A factory result of another shape, or a keyword given both by the factory
        and in ``bench_kw``.

    Examples
    --------
    >>> result = sweep(lambda n: (sorted, (list(range(n)),)), [10, 1000], param="n",
    ...                num_iters=20)
    >>> result.values, [s.params for s in result]
    ([10, 1000], [{'n': 10}, {'n': 1000}])
    """
    values = list(values)
    if not values:
        raise ValueError("sweep: values is empty")
    if not isinstance(param, str) or not param:
        raise TypeError("sweep: param must be a non-empty str")

    def run_one(value: _V) -> BenchmarkStats:
        func, args, kwargs = _unpack_target(factory(value), value)
        label = name or getattr(func, "__name__", None) or type(func).__name__
        clash = set(kwargs) & set(bench_kw)
        if clash:
            raise TypeError(f"sweep: keyword(s) {sorted(clash)} given both by the factory and to sweep()")
        with noting_near_options(bench_kw, _OWN_OPTIONS):
            return benchmark_callable(func, *args, name=label, **bench_kw, **kwargs)

    return _sweep_rows(values, param, run_one)


def _sweep_rows(values: Sequence[_V], param: str,
                run_one: Callable[[_V], BenchmarkStats]) -> SweepResult:
    """``run_one(value)`` -> stats for each value of the list ``values``,
    labelled with ``param``; a SweepResult.  Used by sweep() and by every
    adapter that sweeps (profile_model's batch sizes).

    Ctrl-C keeps the values done so far on the exception, as ``.partial``
    (a SweepResult), as ``.stats`` keeps one run's: a BenchmarkInterrupted
    (Ctrl-C in a timed loop) adds its partial row, labelled; a plain
    KeyboardInterrupt (in the factory, the set-up or the warm-up of a value)
    carries the finished values only.
    """
    results: list[BenchmarkStats] = []
    with gathered(param) as runs:   # one block of warnings
        for value in values:
            try:
                stats = run_one(value)
            except BenchmarkInterrupted as exc:
                _label(exc.stats, param, value)
                done = results + [exc.stats]
                exc.partial = SweepResult(done, param=param, values=values[:len(done)])
                raise
            except KeyboardInterrupt as exc:
                exc.partial = SweepResult(  # type: ignore[attr-defined]
                    list(results), param=param, values=values[:len(results)])
                raise
            _label(stats, param, value)
            results.append(stats)
            runs.append((value, stats))
    return SweepResult(results, param=param, values=values)


def _label(stats: BenchmarkStats, param: str, value: Any) -> None:
    if param == "batch_size":
        stats.batch_size = int(value)
    stats.params = {param: value}
