"""Pictures of benchmark results (optional extra ``plot``: matplotlib).

``plot_latency`` draws the raw per-iteration samples of one or more results;
``plot_sweep`` draws latency and throughput against a swept parameter;
``plot_load`` draws latency percentiles against the offered request rate.  Both
return the matplotlib ``Figure`` and write a PNG when ``path`` is given.

matplotlib is imported by the functions, not by this module.  Where no
display is available (and no backend was chosen) the Agg backend is used.
The figure is detached from pyplot's figure manager before it is returned,
so repeated calls do not accumulate open figures and a notebook shows the
returned figure exactly once.
"""
from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, Iterable, Literal, Sequence, Union

import numpy as np
import numpy.typing as npt

from ._native import BenchmarkStats, LoadStats
from .sweeps import throughput_unit

if TYPE_CHECKING:   # matplotlib is optional (the plot extra): without it, Figure is Any
    from matplotlib.figure import Figure  # type: ignore[import-not-found, unused-ignore]

    Stats = Union[BenchmarkStats, Iterable[BenchmarkStats]]
    Loads = Union[LoadStats, Iterable[LoadStats]]
    Path = Union[str, "os.PathLike[str]"]

__all__ = ["plot_latency", "plot_load", "plot_sweep"]

_KINDS = ("hist", "ecdf", "box")


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise ImportError(
            "plotting needs matplotlib: pip install 'spatialhub-profiling[plot]'"
        ) from None
    if "matplotlib.pyplot" not in sys.modules and not os.environ.get("MPLBACKEND"):
        headless = sys.platform.startswith("linux") and not (
            os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
        if headless:
            matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _as_list(stats_list: Stats) -> list[BenchmarkStats]:
    if isinstance(stats_list, BenchmarkStats) or hasattr(stats_list, "samples_ms"):
        return [stats_list]  # type: ignore[list-item]   # one BenchmarkStats
    rows = list(stats_list)
    if not rows:
        raise ValueError("nothing to plot: the stats list is empty")
    return rows


def _label(s: BenchmarkStats, param: str | None = None) -> str:
    label = f"{s.name} [{s.device}]"
    params = getattr(s, "params", None) or {}
    shown = {param: params[param]} if param in params else params
    if shown:
        label += " " + ", ".join(f"{k}={v}" for k, v in shown.items())
    return label


#: plot_latency(log=None) draws a log axis when the results' medians span more than this
LOG_SPAN = 10.0


def _use_log(log: object, rows: Sequence[BenchmarkStats],
             samples: Sequence[npt.NDArray[np.float64]]) -> bool:
    """plot_latency's axis: ``log`` as asked, or (None) logarithmic when the largest
    median is more than LOG_SPAN times the smallest -- a 1.5 ms result beside a 548 ms
    one is a flat line on a linear axis.  Never for samples of 0 ms or less."""
    if log is not None and not isinstance(log, bool):
        raise TypeError(f"plot_latency: log must be True, False or None (automatic), "
                        f"not {type(log).__name__}")
    positive = all(float(x.min()) > 0 for x in samples)
    if log:
        if not positive:
            name, low = next((s.name, float(x.min())) for s, x in zip(rows, samples)
                             if float(x.min()) <= 0)
            raise ValueError(f"plot_latency: log=True needs latencies above 0 ms, but "
                             f"{name!r} has a sample of {low:g} ms")
        return True
    if log is False or not positive:
        return False
    medians = [float(np.median(x)) for x in samples]
    return max(medians) > LOG_SPAN * min(medians)


def _shared_edges(samples: Sequence[npt.NDArray[np.float64]], bins: Any,
                  max_bins: int = 120, log: bool = False) -> npt.NDArray[np.float64]:
    """Common bin edges for overlaid histograms: the finest of each series'
    own choice (so well-separated results are not lumped into a few bars),
    capped at ``max_bins`` over the whole range; on a log axis chosen on the
    logarithms, so that every bar has the same width on the page."""
    if log:
        if not isinstance(bins, str):
            return np.asarray(np.histogram_bin_edges(np.concatenate(samples), bins=bins),
                              dtype=float)
        return np.asarray(10.0 ** _shared_edges([np.log10(x) for x in samples], bins, max_bins),
                          dtype=float)
    everything = np.concatenate(samples)
    lo, hi = float(everything.min()), float(everything.max())
    if not isinstance(bins, str) or hi <= lo:
        return np.histogram_bin_edges(everything, bins=bins)
    widths = [np.diff(np.histogram_bin_edges(x, bins=bins)).min() for x in samples if np.ptp(x) > 0]
    width = max(min(widths) if widths else hi - lo, (hi - lo) / max_bins)
    return np.linspace(lo, hi, int(np.ceil((hi - lo) / width)) + 1)


def _finish(plt: Any, fig: Figure, path: Path | None) -> Figure:
    plt.close(fig)  # detach from pyplot; the Figure itself stays usable
    if path is not None:
        fig.savefig(os.fspath(path), dpi=120, bbox_inches="tight")
    return fig


def plot_latency(stats_list: Stats, kind: Literal["hist", "ecdf", "box"] = "hist",
                 path: Path | None = None, *, title: str | None = None,
                 bins: int | str | Sequence[float] = "auto",
                 log: bool | None = None) -> Figure:
    """Distribution of the per-iteration latencies of one or more results.

    The median and the P95 of each result (the values the table shows) are marked.

    Parameters
    ----------
    stats_list : BenchmarkStats or iterable of BenchmarkStats
        Results with their raw samples (``samples_ms``).
    kind : {"hist", "ecdf", "box"}, default "hist"
        Overlaid histograms on shared bins, the fraction of iterations at or below
        each latency, or Tukey boxes (whiskers at 1.5 IQR, as the outlier count).
    path : str or os.PathLike, optional
        Write a PNG there.
    title : str, optional
        The axes' title; None: the number of timed iterations shown.
    bins : int, str or sequence of float, default "auto"
        The histogram's bins, as ``numpy.histogram_bin_edges`` takes them (on a log
        axis a str rule is applied to the logarithms of the latencies).
    log : bool, optional
        A logarithmic latency axis.  None (default): logarithmic when the largest
        median is more than 10 times the smallest (``LOG_SPAN``), so that a 1.5 ms
        result beside a 548 ms one is not a flat line; True / False: as asked.

    Returns
    -------
    matplotlib.figure.Figure
        Detached from pyplot (a notebook shows it once; nothing accumulates).

    Raises
    ------
    ValueError
        An unknown kind, no results, a result without samples (loaded from JSON
        written without them), or ``log=True`` with a sample of 0 ms or less.
    TypeError
        ``log`` not a bool or None.
    ImportError
        matplotlib is not installed (the ``plot`` extra).

    Examples
    --------
    >>> stats = benchmark_callable(sorted, list(range(1000)), num_iters=30)
    >>> fig = plot_latency(stats, kind="ecdf")  # doctest: +SKIP
    """
    if kind not in _KINDS:
        raise ValueError(f"plot_latency: kind must be one of {_KINDS}, got {kind!r}")
    rows = _as_list(stats_list)
    samples = []
    for s in rows:
        x = s.samples_ms
        if x is None or len(x) == 0:
            raise ValueError(
                f"plot_latency: {s.name!r} has no raw samples (samples_ms is None); "
                f"plot a result from benchmark_callable, or JSON saved with samples"
            )
        samples.append(np.asarray(x, dtype=float))

    log_axis = _use_log(log, rows, samples)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5) if kind != "box" else (8, 1.5 + 0.9 * len(samples)))
    if log_axis:
        ax.set_xscale("log")
    xlabel = "latency (ms, log scale)" if log_axis else "latency (ms)"
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    total = sum(len(x) for x in samples)

    if kind == "hist":
        edges = _shared_edges(samples, bins, log=log_axis)
        for i, (s, x) in enumerate(zip(rows, samples)):
            c = colors[i % len(colors)]
            ax.hist(x, bins=edges, alpha=0.45 if len(samples) > 1 else 0.75, color=c,
                    label=_label(s), edgecolor=c)
            ax.axvline(s.median_ms, color=c, linestyle="-", linewidth=2,
                       label=f"median {s.median_ms:.4g} ms")
            ax.axvline(s.p95_ms, color=c, linestyle="--", linewidth=2,
                       label=f"P95 {s.p95_ms:.4g} ms")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("iterations")
    elif kind == "ecdf":
        for i, (s, x) in enumerate(zip(rows, samples)):
            c = colors[i % len(colors)]
            xs = np.sort(x)
            ys = np.arange(1, len(xs) + 1) / len(xs)
            ax.step(xs, ys, where="post", color=c, label=_label(s))
            ax.plot([s.median_ms], [0.5], "o", color=c, markersize=7,
                    label=f"median {s.median_ms:.4g} ms")
            ax.plot([s.p95_ms], [0.95], "D", color=c, markersize=7,
                    label=f"P95 {s.p95_ms:.4g} ms")
        for q in (0.5, 0.95):
            ax.axhline(q, color="0.6", linestyle=":", linewidth=1)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("fraction of iterations ≤ latency")
    else:  # box
        positions = np.arange(1, len(samples) + 1)
        box_kw = dict(positions=positions, widths=0.5,
                      medianprops={"color": "black", "linewidth": 2},
                      flierprops={"marker": ".", "markersize": 4, "alpha": 0.6})
        try:  # matplotlib >= 3.10 spells it orientation=; vert= is deprecated there
            ax.boxplot(samples, orientation="horizontal", **box_kw)
        except TypeError:
            ax.boxplot(samples, vert=False, **box_kw)
        ax.set_yticks(positions)
        ax.set_yticklabels([_label(s) for s in rows])
        for i, (s, pos) in enumerate(zip(rows, positions)):
            c = colors[i % len(colors)]
            ax.plot([s.p95_ms], [pos], "D", color=c, markersize=8,
                    label=f"P95 {s.p95_ms:.4g} ms ({s.name})")
        ax.set_xlabel(f"{xlabel}   (box: quartiles, bar: median, whiskers: 1.5 IQR)")
        ax.invert_yaxis()  # first result on top, as in the table

    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="best")
    ax.set_title(title or f"Latency distribution ({total} timed iterations)")
    fig.tight_layout()
    return _finish(plt, fig, path)


def _sweep_axis(stats_list: Sequence[BenchmarkStats], param: str | None, values: Sequence[Any]
                ) -> tuple[npt.NDArray[np.float64], list[str], bool]:
    """x positions, tick labels and whether the axis is numeric."""
    if param is not None:
        values = [(s.params or {}).get(param, v) for s, v in zip(stats_list, values)]
    numeric = param is not None and all(
        isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
        for v in values)
    if numeric:
        return np.asarray(values, dtype=float), [str(v) for v in values], True
    labels = [str(v) if param is not None else s.device for s, v in zip(stats_list, values)]
    return np.arange(len(stats_list), dtype=float), labels, False


def plot_sweep(sweep_result: Stats, path: Path | None = None, *, param: str | None = None,
               title: str | None = None) -> Figure:
    """Latency and throughput against the swept parameter.

    Left: median latency with the band up to P95; right: throughput
    (``stats.throughput`` = fps × batch size; samples/s when batched).  A numeric
    parameter gets a numeric axis (log base 2 when the values span 8x or more, as batch
    sizes do); anything else is categorical.  Unstable rows are ringed in red.

    Parameters
    ----------
    sweep_result : SweepResult or iterable of BenchmarkStats
        What ``sweep``, ``profile_model(batch_sizes=...)`` or ``benchmark_onnx``
        return, or results with ``params[param]``.
    path : str or os.PathLike, optional
        Write a PNG there.
    param : str, optional
        The swept parameter; None: the SweepResult's (the device for none).
    title : str, optional
        The figure's title.

    Returns
    -------
    matplotlib.figure.Figure
        Detached from pyplot.

    Raises
    ------
    ValueError
        No results.
    ImportError
        matplotlib is not installed (the ``plot`` extra).

    Examples
    --------
    >>> result = sweep(lambda n: (sorted, (list(range(n)),)), [100, 10000], param="n")
    >>> fig = plot_sweep(result, "sweep.png")  # doctest: +SKIP
    """
    stats_list = _as_list(sweep_result)
    param = param if param is not None else getattr(sweep_result, "param", None)
    values = getattr(sweep_result, "values", None) or [None] * len(stats_list)
    x, ticks, numeric = _sweep_axis(stats_list, param, values)
    order = np.argsort(x, kind="stable")
    x = x[order]
    ticks = [ticks[i] for i in order]
    rows = [stats_list[i] for i in order]
    median = np.array([s.median_ms for s in rows])
    p95 = np.array([s.p95_ms for s in rows])
    thr = np.array([s.throughput for s in rows])
    unit = throughput_unit(rows, param)

    plt = _pyplot()
    fig, (ax_lat, ax_thr) = plt.subplots(1, 2, figsize=(10, 4))
    ax_lat.fill_between(x, median, p95, alpha=0.25, color="C0", label="median to P95")
    ax_lat.plot(x, median, "o-", color="C0", label="median")
    ax_lat.plot(x, p95, "v--", color="C0", alpha=0.8, label="P95")
    ax_lat.set_ylabel("latency per call (ms)")
    ax_lat.set_ylim(bottom=0)
    ax_lat.legend(fontsize="small")
    ax_thr.plot(x, thr, "s-", color="C1", label=f"throughput ({unit})")
    ax_thr.set_ylabel(f"throughput ({unit})")
    ax_thr.set_ylim(bottom=0)
    ax_thr.legend(fontsize="small")

    # unstable points (stability.c): a red ring and the label, so a trend through a
    # noisy or bimodal point is not read as a property of the parameter
    bad = [i for i, s in enumerate(rows) if getattr(s, "stability", None) not in (None, "stable")]
    for ax, y in ((ax_lat, median), (ax_thr, thr)):
        if bad:
            ax.plot(x[bad], y[bad], "o", ms=13, mfc="none", mec="red", mew=1.5,
                    label="unstable: " + ", ".join(sorted({rows[i].stability for i in bad})))
            for i in bad:
                ax.annotate(rows[i].stability, (x[i], y[i]), textcoords="offset points",
                            xytext=(0, 9), ha="center", fontsize="x-small", color="red")
            ax.legend(fontsize="small")
    xlabel = param if param is not None else "device"
    for ax in (ax_lat, ax_thr):
        if numeric and x.min() > 0 and x.max() / x.min() >= 8:
            ax.set_xscale("log", base=2)
        ax.set_xticks(x)
        ax.set_xticklabels(ticks, rotation=0 if numeric else 20,
                           ha="center" if numeric else "right")
        ax.minorticks_off()
        ax.set_xlabel(xlabel)
        ax.grid(True, alpha=0.3)
    names = sorted({s.name for s in rows})
    fig.suptitle(title or f"{', '.join(names)}: latency and throughput vs {xlabel}")
    fig.tight_layout()
    return _finish(plt, fig, path)


_LOAD_PERCENTILES = (("p50_ms", "p50", "o"), ("p90_ms", "p90", "s"), ("p99_ms", "p99", "D"),
                     ("p999_ms", "p99.9", "^"))


def _load_points(results: Loads) -> list[dict[str, Any]]:
    """One point per rate: the probes of a find_peak_qps result, or each LoadStats."""
    if isinstance(results, LoadStats):
        search = results.search or {}
        if search.get("probes"):
            rows = [LoadStats.from_dict(p["stats"]) for p in search["probes"]]
        else:
            rows = [results]
    else:
        rows = list(results)
    if not rows:
        raise ValueError("plot_load: nothing to plot: the results are empty")
    points = []
    for r in rows:
        if not isinstance(r, LoadStats):
            raise TypeError(f"plot_load: results must be LoadStats, not {type(r).__name__}")
        rate = r.offered_qps if r.offered_qps is not None else r.achieved_qps
        if rate is None:
            continue
        points.append({"offered_qps": rate, "p50_ms": r.p50_ms, "p90_ms": r.p90_ms,
                       "p99_ms": r.p99_ms, "p999_ms": r.p999_ms, "ci_low_ms": r.p99_ci_low_ms,
                       "ci_high_ms": r.p99_ci_high_ms, "overloaded": r.overloaded})
    if not points:
        raise ValueError("plot_load: no result has a rate to plot against")
    return sorted(points, key=lambda p: p["offered_qps"])


def plot_load(results: Loads, path: Path | None = None, *, title: str | None = None,
              latency_bound_ms: float | None = None, log_y: bool = False) -> Figure:
    """Latency percentiles against the offered request rate.

    One point per rate, for p50, p90, p99 and p99.9; p99 with its 95% interval where
    the result has one (from benchmark_load; find_peak_qps's probes carry the interval
    of the percentile it searched on); overloaded rates are marked with a cross.

    Parameters
    ----------
    results : LoadStats or iterable of LoadStats
        Runs of benchmark_load at several rates, or a find_peak_qps result (its
        probes are plotted).
    path : str or os.PathLike, optional
        Write a PNG there.
    title : str, optional
        The axes' title.
    latency_bound_ms : float, optional
        Draw the latency budget as a horizontal line (a find_peak_qps result's own
        bound when not given).
    log_y : bool, default False
        A logarithmic latency axis (the tail of an overloaded rate dwarfs the rest).

    Returns
    -------
    matplotlib.figure.Figure
        Detached from pyplot.

    Raises
    ------
    ValueError
        No results, or none with a rate.
    ImportError
        matplotlib is not installed (the ``plot`` extra).

    Examples
    --------
    >>> runs = [benchmark_load(sum, range(10), qps=q, duration_s=0.2) for q in (50, 100)]
    >>> fig = plot_load(runs)  # doctest: +SKIP
    """
    points = _load_points(results)
    if latency_bound_ms is None and isinstance(results, LoadStats) and results.search:
        latency_bound_ms = results.search.get("latency_bound_ms")
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    rates = np.array([p["offered_qps"] for p in points], dtype=float)
    for key, label, marker in _LOAD_PERCENTILES:
        ys = np.array([np.nan if p.get(key) is None else p[key] for p in points], dtype=float)
        if np.all(np.isnan(ys)):
            continue
        line = ax.plot(rates, ys, marker=marker, label=label)[0]
        if key == "p99_ms":
            lo = np.array([np.nan if p.get("ci_low_ms") is None else p["ci_low_ms"]
                           for p in points], dtype=float)
            hi = np.array([np.nan if p.get("ci_high_ms") is None else p["ci_high_ms"]
                           for p in points], dtype=float)
            ok = ~(np.isnan(lo) | np.isnan(hi) | np.isnan(ys))
            if ok.any():
                ax.errorbar(rates[ok], ys[ok], yerr=[ys[ok] - lo[ok], hi[ok] - ys[ok]],
                            fmt="none", ecolor=line.get_color(), capsize=3,
                            label="p99 95% interval")
    over = [p for p in points if p.get("overloaded")]
    if over:
        ax.plot([p["offered_qps"] for p in over], [p["p50_ms"] for p in over], "x",
                color="red", markersize=10, label="overloaded")
    if latency_bound_ms is not None:
        ax.axhline(latency_bound_ms, color="0.3", linestyle="--", linewidth=1,
                   label=f"bound {latency_bound_ms:g} ms")
    if log_y:
        ax.set_yscale("log")
    ax.set_xlabel("offered rate (requests/s)")
    ax.set_ylabel("latency (ms), arrival to completion")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="best")
    ax.set_title(title or f"Latency under load ({len(points)} rates)")
    fig.tight_layout()
    return _finish(plt, fig, path)
