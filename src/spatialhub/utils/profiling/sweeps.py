"""Sweeps: one benchmark per value of a parameter, and their result.

``sweep(factory, values)`` benchmarks one callable per value through the
native ``benchmark_callable``; ``SweepResult`` is the list of results it
(and every adapter) returns, with the swept parameter attached.
"""
from __future__ import annotations

from ._native import BenchmarkInterrupted, benchmark_callable, format_benchmark_table

__all__ = ["SweepResult", "sweep", "throughput_unit"]


def throughput_unit(stats_list, param=None):
    """The unit of ``stats.throughput`` for a set of rows: "samples/s" when
    the batch size is swept or any row ran more than one sample per call,
    else "FPS"."""
    if param == "batch_size" or any(s.batch_size != 1 for s in stats_list):
        return "samples/s"
    return "FPS"


class SweepResult(list):
    """A list of ``BenchmarkStats``, one per value of a swept parameter.

    It is a real ``list`` (index it, iterate it, pass it anywhere a list of
    stats is accepted, e.g. ``format_benchmark_table``) with three additions:
    ``param`` (the name of the swept parameter, or None when the rows differ
    by something already shown, such as the device), ``values`` (the swept
    values, in row order) and ``to_table()``.  In a notebook it renders as
    the Markdown table.
    """

    def __init__(self, stats=(), param=None, values=None):
        super().__init__(stats)
        self.param = param
        if values is None:
            values = [(s.params or {}).get(param) if param else s.device for s in self]
        self.values = list(values)
        if len(self.values) != len(self):
            raise ValueError(f"SweepResult: {len(self)} stats but {len(self.values)} values")

    @property
    def stats(self):
        """The rows as a plain list of BenchmarkStats."""
        return list(self)

    @property
    def throughput_unit(self):
        """"samples/s" when the rows are batched, else "FPS"."""
        return throughput_unit(self, self.param)

    def to_table(self, title=None, throughput_unit=None, *, baseline=None, format="markdown",
                 columns="auto"):
        """The table (native ``format_benchmark_table``; ``format="html"``
        for HTML), with a column for the swept parameter when there is one.
        A sweep shows the extra columns its rows have figures for (first call,
        GPU time, cache state: ``columns="auto"``); ``columns=None`` gives the
        released layout."""
        return format_benchmark_table(
            list(self), title, throughput_unit or self.throughput_unit,
            baseline=baseline, param=self.param, format=format, columns=columns,
        )

    @property
    def unstable(self):
        """``[(value, stability), ...]`` for the rows whose samples were not stable
        ("noisy", "multimodal", "drifting"): their figures, and the trend through them,
        should not be trusted as they are (the table's footnote flags them; plot_sweep
        marks them)."""
        return [(v, s.stability) for v, s in zip(self.values, self)
                if getattr(s, "stability", None) not in (None, "stable")]

    def to_dicts(self, samples=False):
        """``[s.to_dict(samples=samples) for s in self]``."""
        return [s.to_dict(samples=samples) for s in self]

    def __repr__(self):
        return f"SweepResult(param={self.param!r}, values={self.values!r}, stats={list.__repr__(self)})"

    def _repr_markdown_(self):
        return self.to_table()

    def _repr_html_(self):
        return self.to_table(format="html")


# --------------------------------------------------------------------------
# sweep
# --------------------------------------------------------------------------

def _unpack_target(made, value):
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


def sweep(factory, values, param="value", name=None, **bench_kw):
    """Benchmark one callable per value of a parameter.

    ``factory(value)`` returns the thing to time for that value: a callable,
    or ``(callable, args)``, or ``(callable, args, kwargs)``.  Each is timed
    with ``benchmark_callable(func, *args, name=..., **bench_kw, **kwargs)``;
    ``bench_kw`` takes benchmark_callable's options (``num_warmup``,
    ``num_iters``, ``device``, ``sync_fn``, ...).  Each result gets
    ``params = {param: value}``; when ``param == "batch_size"`` its
    ``batch_size`` is set too, so throughput reads in samples/s.

    Returns a :class:`SweepResult` (a list, one stats per value).
    """
    values = list(values)
    if not values:
        raise ValueError("sweep: values is empty")
    if not isinstance(param, str) or not param:
        raise TypeError("sweep: param must be a non-empty str")

    def run_one(value):
        func, args, kwargs = _unpack_target(factory(value), value)
        label = name or getattr(func, "__name__", None) or type(func).__name__
        clash = set(kwargs) & set(bench_kw)
        if clash:
            raise TypeError(f"sweep: keyword(s) {sorted(clash)} given both by the factory and to sweep()")
        return benchmark_callable(func, *args, name=label, **bench_kw, **kwargs)

    return _sweep_rows(values, param, run_one)


def _sweep_rows(values, param, run_one):
    """``run_one(value)`` -> stats for each value of the list ``values``,
    labelled with ``param``; a SweepResult.  Used by sweep() and by every
    adapter that sweeps (profile_model's batch sizes).

    Ctrl-C keeps the values done so far on the exception, as ``.partial``
    (a SweepResult), as ``.stats`` keeps one run's: a BenchmarkInterrupted
    (Ctrl-C in a timed loop) adds its partial row, labelled; a plain
    KeyboardInterrupt (in the factory, the set-up or the warm-up of a value)
    carries the finished values only.
    """
    results = []
    for value in values:
        try:
            stats = run_one(value)
        except BenchmarkInterrupted as exc:
            _label(exc.stats, param, value)
            done = results + [exc.stats]
            exc.partial = SweepResult(done, param=param, values=values[:len(done)])
            raise
        except KeyboardInterrupt as exc:
            exc.partial = SweepResult(list(results), param=param, values=values[:len(results)])
            raise
        _label(stats, param, value)
        results.append(stats)
    return SweepResult(results, param=param, values=values)


def _label(stats, param, value):
    if param == "batch_size":
        stats.batch_size = int(value)
    stats.params = {param: value}
