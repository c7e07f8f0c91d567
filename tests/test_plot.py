"""plot_latency / plot_sweep with real matplotlib (Agg)."""
import struct

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from spatialhub.utils.profiling import BenchmarkStats  # noqa: E402
from spatialhub.utils.profiling.adapters import SweepResult  # noqa: E402
from spatialhub.utils.profiling.plot import plot_latency, plot_sweep  # noqa: E402


def stats_from(samples, name="f", batch_size=1, params=None):
    x = np.asarray(samples, dtype=float)
    mean = float(x.mean())
    return BenchmarkStats(
        name, "CPU", mean, float(np.median(x)), float(x.std(ddof=1)), float(np.percentile(x, 95)),
        float(x.min()), float(x.max()), 1000.0 / mean, 0, len(x),
        batch_size=batch_size, params=params, samples_ms=x,
    )


ONE_TO_100 = stats_from(np.arange(1, 101), name="ramp")   # median 50.5, P95 95.05


def png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG file"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def legend_texts(ax):
    return [t.get_text() for t in ax.get_legend().get_texts()]


def test_hist_marks_median_and_p95_and_writes_a_png(tmp_path):
    path = tmp_path / "hist.png"
    fig = plot_latency(ONE_TO_100, kind="hist", path=path)
    ax = fig.axes[0]
    vlines = {tuple(line.get_xdata()) for line in ax.get_lines()}
    assert vlines == {(50.5, 50.5), (95.05, 95.05)}
    heights = [p.get_height() for p in ax.patches]
    assert sum(heights) == 100  # every sample counted once
    assert "median 50.5 ms" in legend_texts(ax) and "P95 95.05 ms" in legend_texts(ax)
    width, height = png_size(path)
    assert width > 400 and height > 200


def test_hist_overlays_several_results_on_shared_bins():
    fast = stats_from(np.linspace(1, 2, 50), name="fast")
    slow = stats_from(np.linspace(3, 5, 50), name="slow")
    fig = plot_latency([fast, slow], kind="hist")
    ax = fig.axes[0]
    assert len(ax.get_lines()) == 4  # a median and a P95 line each
    assert sum(p.get_height() for p in ax.patches) == 100
    texts = legend_texts(ax)
    assert "fast [CPU]" in texts and "slow [CPU]" in texts


def test_ecdf_reaches_one_and_marks_quantiles(tmp_path):
    path = tmp_path / "ecdf.png"
    fig = plot_latency([ONE_TO_100], kind="ecdf", path=path)
    ax = fig.axes[0]
    step = ax.get_lines()[0]
    assert list(step.get_xdata()) == list(range(1, 101))
    assert step.get_ydata()[-1] == pytest.approx(1.0) and step.get_ydata()[0] == pytest.approx(0.01)
    points = {(float(l.get_xdata()[0]), float(l.get_ydata()[0])) for l in ax.get_lines()[1:3]}
    assert points == {(50.5, 0.5), (95.05, 0.95)}
    png_size(path)


def test_box_has_one_box_per_result_and_p95_markers(tmp_path):
    a, b = ONE_TO_100, stats_from(np.arange(1, 101) * 2.0, name="double")
    fig = plot_latency([a, b], kind="box", path=tmp_path / "box.png")
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["ramp [CPU]", "double [CPU]"]
    markers = [l for l in ax.get_lines() if l.get_marker() == "D"]
    assert sorted(float(m.get_xdata()[0]) for m in markers) == [95.05, 190.1]
    png_size(tmp_path / "box.png")


def test_plot_latency_rejects_bad_kind_and_missing_samples():
    with pytest.raises(ValueError, match="kind must be one of"):
        plot_latency(ONE_TO_100, kind="violin")
    no_samples = BenchmarkStats("x", "CPU", 1, 1, 0, 1, 1, 1, 1000, 0, 1)
    with pytest.raises(ValueError, match="no raw samples"):
        plot_latency(no_samples)
    with pytest.raises(ValueError, match="empty"):
        plot_latency([])


# ---- the latency axis: log when the results span more than 10x (issue 33, item 6) ----

# a 1.5 ms pipeline beside a 548 ms model: on a linear axis the fast one is a flat line
FAST = stats_from(np.linspace(1.4, 1.6, 50), name="preprocess")       # median 1.5 ms
SLOW = stats_from(np.linspace(540.0, 556.0, 50), name="model")        # median 548 ms


@pytest.mark.parametrize("kind", ["hist", "ecdf", "box"])
def test_results_spanning_more_than_10x_get_a_log_axis(kind, tmp_path):
    fig = plot_latency([FAST, SLOW], kind=kind, path=tmp_path / f"{kind}.png")
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    assert ax.get_xlabel().startswith("latency (ms, log scale)")
    png_size(tmp_path / f"{kind}.png")
    # asked for linear, it stays linear
    assert plot_latency([FAST, SLOW], kind=kind, log=False).axes[0].get_xscale() == "linear"


def test_results_within_10x_keep_a_linear_axis_unless_asked():
    near = stats_from(np.linspace(13.0, 17.0, 50), name="tenfold")    # median 15.0: exactly 10x
    assert plot_latency([FAST, near], kind="ecdf").axes[0].get_xscale() == "linear"
    assert plot_latency([ONE_TO_100]).axes[0].get_xscale() == "linear"   # one result
    fig = plot_latency([FAST, near], kind="ecdf", log=True)
    assert fig.axes[0].get_xscale() == "log"
    assert fig.axes[0].get_xlabel() == "latency (ms, log scale)"


def test_log_histogram_bins_are_even_on_the_page():
    fig = plot_latency([FAST, SLOW], kind="hist")
    ax = fig.axes[0]
    assert sum(p.get_height() for p in ax.patches) == 100      # every sample counted once
    lefts = sorted({round(p.get_x(), 9) for p in ax.patches})
    ratios = np.diff(np.log10(lefts))
    assert ratios.max() == pytest.approx(ratios.min(), rel=1e-6)   # equal widths in log space
    assert lefts[0] == pytest.approx(1.4) and max(p.get_x() + p.get_width()
                                                  for p in ax.patches) == pytest.approx(556.0)


def test_log_axis_bad_input_is_named():
    with pytest.raises(TypeError, match=r"log must be True, False or None \(automatic\), not str"):
        plot_latency([FAST, SLOW], log="yes")
    zero = stats_from([0.0, 1.0, 2.0], name="coarse")
    with pytest.raises(ValueError, match=r"log=True needs latencies above 0 ms, but 'coarse' "
                                         r"has a sample of 0 ms"):
        plot_latency([zero, SLOW], log=True)
    # automatic: a sample of 0 ms cannot go on a log axis, so the axis stays linear
    assert plot_latency([zero, SLOW]).axes[0].get_xscale() == "linear"


def test_sweep_plot_shows_median_p95_and_throughput_per_value(tmp_path):
    rows = [stats_from(np.full(10, ms) + np.arange(10) * 0.1, name="net", batch_size=b,
                       params={"batch_size": b})
            for b, ms in ((1, 2.0), (4, 5.0), (16, 15.0), (32, 28.0))]
    res = SweepResult(rows, param="batch_size")
    path = tmp_path / "sweep.png"
    fig = plot_sweep(res, path=path)
    ax_lat, ax_thr = fig.axes
    median_line = ax_lat.get_lines()[0]
    assert list(median_line.get_xdata()) == [1, 4, 16, 32]
    assert list(median_line.get_ydata()) == pytest.approx([s.median_ms for s in rows])
    thr = ax_thr.get_lines()[0]
    assert list(thr.get_ydata()) == pytest.approx([s.fps * s.batch_size for s in rows])
    assert ax_thr.get_ylabel() == "throughput (samples/s)"
    assert ax_lat.get_xscale() == "log"  # 1..32 spans more than 8x
    assert [t.get_text() for t in ax_lat.get_xticklabels()] == ["1", "4", "16", "32"]
    png_size(path)


def test_sweep_plot_of_categorical_values_uses_labels():
    rows = [stats_from(np.arange(1, 11) * k, params={"mode": m}) for k, m in ((1, "fast"), (3, "exact"))]
    fig = plot_sweep(SweepResult(rows, param="mode"))
    ax_lat, ax_thr = fig.axes
    assert [t.get_text() for t in ax_lat.get_xticklabels()] == ["fast", "exact"]
    assert ax_thr.get_ylabel() == "throughput (FPS)"


def test_sweep_plot_and_result_flag_unstable_points():
    from spatialhub.utils.profiling import _native

    rng = np.random.default_rng(0)
    steady = [_native._stats_from_samples(ms * (1 + 0.01 * rng.standard_normal(200)))
              for ms in (1.0, 2.0)]
    bimodal = _native._stats_from_samples(
        np.where(rng.random(200) < 0.7, 3.0, 6.0) * (1 + 0.01 * rng.standard_normal(200)))
    for s, b in zip(steady + [bimodal], (1, 2, 4)):
        s.params, s.batch_size = {"batch_size": b}, b
    res = SweepResult(steady + [bimodal], param="batch_size")
    assert res.unstable == [(4, "multimodal")]
    # the table flags the row in its footnote (never inside a cell)
    assert res.to_table().splitlines()[-1] == "Flags: multimodal (samples batch_size=4)."
    fig = plot_sweep(res)
    for ax in fig.axes:
        assert "unstable: multimodal" in legend_texts(ax)
        assert [t.get_text() for t in ax.texts] == ["multimodal"]
    clean = plot_sweep(SweepResult(steady, param="batch_size"))
    assert not any(t.startswith("unstable") for t in legend_texts(clean.axes[0]))
