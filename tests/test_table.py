"""format_benchmark_table: by default the released module's layout, byte for byte for the same
stats (tests/test_released_module.py compares against its own code); a value that would print
as 0.00 keeps two significant digits, extra columns only on request (columns=), and what makes
a row doubtful is a footnote under the table, never inside a cell."""
import numpy as np
import pytest

from spatialhub.utils.profiling import _native, compare_benchmarks, format_benchmark_table

HEADER = ("| Model / Target | Device | Latency Mean (ms) | Median (ms) | P95 (ms) | "
          "Throughput (FPS) | Peak RAM Delta |")


def test_single_cpu_row_exact_layout(make_stats):
    s = make_stats(mean_ms=12.3456, std_ms=1.234, median_ms=12.0, p95_ms=14.5, fps=81.0,
                   ram_delta_mb=3.25)
    assert format_benchmark_table(s) == "\n".join([
        HEADER,
        "| :--- | :--- | :--- | :--- | :--- | :--- | :--- |",
        "| **Model** | `CPU` | 12.35 +/- 1.23 | 12.00 | 14.50 | **81.0** | +3.2 MB |",
    ])


def test_title_and_cuda_vram_column(make_stats):
    cpu = make_stats(name="cpu")
    gpu = make_stats(name="gpu", device="CUDAExecutionProvider", vram_delta_mb=512.0)
    idle = make_stats(name="idle", device="cuda:1")
    lines = format_benchmark_table([gpu, cpu, idle], title="Inference").split("\n")
    assert lines[0] == "### Inference" and lines[1] == ""
    assert lines[2] == HEADER + " Peak VRAM Delta |"
    assert lines[3] == "| :--- " * 8 + "|"
    assert lines[4].endswith("| 0.0 MB | +512.0 MB |")
    assert lines[5].endswith("| 0.0 MB | N/A |")
    assert lines[6].endswith("| 0.0 MB | 0.0 MB |")
    assert not format_benchmark_table(cpu).endswith("\n")


def test_a_value_that_would_print_as_zero_keeps_two_significant_digits(make_stats):
    # the released table prints 0.00 for anything under 5 us; ours keeps 2 significant
    # digits there, the +/- at the mean's decimal place, and the released 2 decimals elsewhere
    s = make_stats(mean_ms=0.0001234, std_ms=0.00005, median_ms=0.0456789, p95_ms=0.1)
    row = format_benchmark_table(s).split("\n")[2]
    assert "| 0.00012 +/- 0.00005 | 0.05 | 0.10 |" in row
    s = make_stats(mean_ms=0.0037, std_ms=0.0123, median_ms=0.00368, p95_ms=0.000996)
    assert "| 0.0037 +/- 0.0123 | 0.0037 | 0.0010 |" in format_benchmark_table(s)
    s = make_stats(mean_ms=1.01, std_ms=0.08605, median_ms=0.0, p95_ms=-0.001)
    assert "| 1.01 +/- 0.09 | 0.00 | -0.0010 |" in format_benchmark_table(s)


def test_memory_cells_follow_the_released_rule(make_stats):
    # "+{:.1f} MB" above zero (so a 40 kB delta reads +0.0 MB), "0.0 MB" otherwise
    for ram, cell in ((3.25, "+3.2 MB"), (0.04, "+0.0 MB"), (0.0, "0.0 MB"), (-2.0, "0.0 MB"),
                      (float("nan"), "0.0 MB")):
        assert format_benchmark_table(make_stats(ram_delta_mb=ram)).endswith(f"| {cell} |")


def test_throughput_unit_and_batch(make_stats):
    s = make_stats(fps=100.0, batch_size=8)
    t = format_benchmark_table([s], throughput_unit="Pairs/s")
    assert "Throughput (Pairs/s)" in t and "**800.0**" in t


def test_accepts_any_iterable_and_rejects_the_rest(make_stats):
    a, b = make_stats(name="a"), make_stats(name="b")
    assert format_benchmark_table(x for x in (a, b)) == format_benchmark_table([a, b])
    assert format_benchmark_table((a,)) == format_benchmark_table(a)
    assert format_benchmark_table([]).count("\n") == 1
    for bad in (3, "abc", {"a": a}, None):
        with pytest.raises(TypeError):
            format_benchmark_table(bad)
    with pytest.raises(TypeError, match=r"stats_list\[1\]"):
        format_benchmark_table([a, 1])
    with pytest.raises(TypeError):
        format_benchmark_table(a, title=5)
    with pytest.raises(TypeError):
        format_benchmark_table(a, throughput_unit=None)
    with pytest.raises(TypeError):
        format_benchmark_table(a, colour="red")


def test_pipes_in_names_do_not_break_rows(make_stats):
    row = format_benchmark_table(make_stats(name="a|b")).split("\n")[2]
    assert row.startswith("| **a\\|b** |")


def test_baseline_and_param_columns(make_stats):
    base = make_stats(name="fp32", median_ms=2.0, samples_ms=[2.0, 2.01, 1.99] * 20)
    fast = make_stats(name="int8", median_ms=1.0, samples_ms=[1.0, 1.01, 0.99] * 20,
                      params={"bits": 8})
    t = format_benchmark_table([base, fast], baseline=base, param="bits",
                               run_spread=0.15).split("\n")
    assert t[0].startswith("| Model / Target | bits | Device |") and t[0].endswith("| vs Baseline |")
    assert t[2].endswith("| baseline |")
    assert "| **int8** | 8 | `CPU` |" in t[3] and t[3].endswith("| 0.50x faster |")
    # two single runs with no spread measured or given: the ratio, no verdict (issue 32)
    bare = format_benchmark_table([base, fast], baseline=base).split("\n")
    assert bare[3].endswith("| 0.50x inconclusive |")
    with pytest.raises(TypeError):
        format_benchmark_table([base], baseline="fp32")


def test_sweep_like_objects_name_their_parameter(make_stats):
    class Sweep(list):
        param = "batch"

    rows = Sweep([make_stats(params={"batch": 1}), make_stats(params={"batch": 4})])
    t = format_benchmark_table(rows).split("\n")
    assert t[0].startswith("| Model / Target | batch |")
    assert "| **Model** | 4 |" in t[3]


def test_html_format(make_stats):
    html = format_benchmark_table([make_stats(name="a&b")], title="T", format="html")
    assert html.startswith("<h3>T</h3>\n<table>") and "<b>a&amp;b</b>" in html
    assert html.count("<tr>") == 2 and html.endswith("</table>")
    with pytest.raises(ValueError, match="format"):
        format_benchmark_table(make_stats(), format="latex")


def test_baseline_column_without_samples_uses_the_medians_cis(make_stats):
    base = make_stats(name="a", median_ms=2.0, ci95_low_ms=1.9, ci95_high_ms=2.1)
    fast = make_stats(name="b", median_ms=1.0, ci95_low_ms=0.95, ci95_high_ms=1.05)
    near = make_stats(name="c", median_ms=2.05, ci95_low_ms=1.95, ci95_high_ms=2.15)
    t = format_benchmark_table([base, fast, near], baseline=base, run_spread=0.15).split("\n")
    # near: [1.95/2.1, 2.15/1.9] = [0.93, 1.13] is wider than the 5% margin: undecided
    assert t[3].endswith("| 0.50x faster |") and t[4].endswith("| 1.02x inconclusive |")
    assert format_benchmark_table([base, fast], baseline=base).endswith("| 0.50x inconclusive |")
    # tight CIs are not "same" either: two runs move by the assumed run-to-run spread
    # (15%, as compare_benchmarks allows for single runs), which the CIs cannot see
    tight = make_stats(name="e", median_ms=2.02, ci95_low_ms=2.0, ci95_high_ms=2.04)
    base2 = make_stats(name="f", median_ms=2.0, ci95_low_ms=1.99, ci95_high_ms=2.01)
    assert format_benchmark_table([base2, tight], baseline=base2).endswith("| 1.01x inconclusive |")
    # 1.3x with tight CIs is within that spread; a measured spread of 2% calls it
    mid = make_stats(name="g", median_ms=2.6, ci95_low_ms=2.58, ci95_high_ms=2.62)
    assert format_benchmark_table([base2, mid], baseline=base2).endswith("| 1.30x inconclusive |")
    assert format_benchmark_table([base2, mid], baseline=base2,
                                  run_spread=0.02).endswith("| 1.30x slower |")
    assert format_benchmark_table([base2, tight], baseline=base2,
                                  run_spread=0).endswith("| 1.01x same |")
    for bad, exc in ((1.0, ValueError), (-0.1, ValueError), (float("nan"), ValueError),
                     ("2%", TypeError), (True, TypeError)):
        with pytest.raises(exc, match="run_spread"):
            format_benchmark_table([base2, mid], baseline=base2, run_spread=bad)
    bare = make_stats(name="d", median_ms=4.0)
    assert format_benchmark_table([bare], baseline=base).endswith("| 2.00x |")


def test_baseline_column_with_samples_follows_compare_benchmarks_run_spread():
    """The table's verdict and compare_benchmarks' agree, run_spread included (the CLI's
    --compare prints both)."""
    rng = np.random.default_rng(8)
    a = _native._stats_from_samples(2.0 * (1 + 0.01 * rng.standard_normal(300)))
    b = _native._stats_from_samples(2.5 * (1 + 0.01 * rng.standard_normal(300)))
    for spread in (None, 0.02, 0.0):
        kw = {} if spread is None else {"run_spread": spread}
        verdict = compare_benchmarks(a, b, **kw).verdict
        cell = format_benchmark_table([a, b], baseline=a, **kw).split("\n")[-1]
        assert cell.endswith(f"x {verdict} |"), (spread, cell, verdict)
    assert compare_benchmarks(a, b).verdict == "inconclusive"
    assert compare_benchmarks(a, b, run_spread=0.02).verdict == "slower"


def test_extra_columns_only_when_asked_for(make_stats):
    rich = make_stats(name="rich", device="cuda:0", first_call_ms=812.5, gpu_median_ms=0.75,
                      host_share=0.25, cache="cold", p99_ms=3.5, ci95_low_ms=1.1,
                      ci95_high_ms=1.3)
    lines = format_benchmark_table(rich).split("\n")
    assert lines[0] == HEADER + " Peak VRAM Delta |"   # the released columns, nothing else
    plain = make_stats(name="plain", min_ms=0.9, max_ms=7.0)
    t = format_benchmark_table([rich, plain], columns=["p99", "ci95", "max"]).split("\n")
    assert t[0] == HEADER + " Peak VRAM Delta | P99 (ms) | 95% CI (ms) | Max (ms) |"
    assert t[2].endswith("| 3.50 | 1.10 to 1.30 | 3.00 |"), t[2]
    assert t[3].endswith("| N/A | N/A | N/A | 7.00 |"), t[3]
    assert format_benchmark_table(plain, columns="min").split("\n")[0].endswith("| Min (ms) |")
    assert (format_benchmark_table(plain, columns=("min", "min"))
            == format_benchmark_table(plain, columns=["min"]))
    with pytest.raises(ValueError, match=r"columns must be None, 'auto', or names from .*got 'p98'"):
        format_benchmark_table(plain, columns=["p99", "p98"])
    with pytest.raises(TypeError, match="columns"):
        format_benchmark_table(plain, columns=3)
    with pytest.raises(TypeError, match="columns must be .* not int"):   # an item, not a name
        format_benchmark_table(plain, columns=["p99", 3])

    class Boom(Exception):
        pass

    def names():
        yield "p99"
        raise Boom("from the user's generator")
    with pytest.raises(Boom, match="user's generator"):                   # unchanged
        format_benchmark_table(plain, columns=names())


def test_flags_are_a_footnote_never_a_cell(make_stats):
    calm = make_stats(name="calm", stability="stable")
    shaky = make_stats(name="sha|ky", median_ms=0.001, overhead_ms=0.00004,
                       stability="multimodal", machine_busy=True)
    assert calm.flags == () and shaky.flags == ("multimodal", "busy machine",
                                                "overhead-dominated")
    t = format_benchmark_table([calm, shaky]).split("\n")
    assert len(t) == 6 and t[4] == ""
    assert t[5] == "Flags: multimodal, busy machine, overhead-dominated (sha\\|ky)."
    assert "multimodal" not in "\n".join(t[:4])   # no "(multimodal)" in the median cell
    assert format_benchmark_table(calm).count("\n") == 2   # no footnote, no blank line
    html = format_benchmark_table([shaky], format="html")   # one row: just its flags
    assert html.endswith("</table>\n<p>Flags: multimodal, busy machine, "
                         "overhead-dominated.</p>")
    faults = make_stats(name="f", minor_faults_per_iter=1770.0, host_share=0.9)
    assert faults.flags == ("launch-bound", "page faults")
    # one clause per distinct set of flags; "all rows"; a sweep's rows by their parameter
    busy = [make_stats(name="m", machine_busy=True, params={"batch": b}) for b in (1, 4)]
    noisy = make_stats(name="m", machine_busy=True, stability="noisy", params={"batch": 16})
    assert format_benchmark_table(busy, param="batch").endswith(
        "\n\nFlags: busy machine (all rows).")
    assert format_benchmark_table(busy + [noisy], param="batch").endswith(
        "\n\nFlags: busy machine (m batch=1, m batch=4); noisy, busy machine (m batch=16).")


def test_cold_start_gpu_time_and_cache_columns_with_columns_auto(make_stats):
    plain = make_stats(name="plain")
    assert "First Call" not in format_benchmark_table(plain, columns="auto")
    cold = make_stats(name="cold", device="cuda:0", first_call_ms=812.5, gpu_median_ms=0.75,
                      host_share=0.25, cache="cold")
    warm = make_stats(name="warm", first_call_ms=3.0, cache="warm")
    lines = format_benchmark_table([cold, warm, plain], columns="auto").split("\n")
    assert lines[0] == (HEADER + " Peak VRAM Delta | First Call (ms) | GPU Median (ms) | "
                        "Host Share | Cache |")
    assert lines[2].endswith("| 812.50 | 0.75 | 25% | cold |"), lines[2]
    assert lines[3].endswith("| N/A | 3.00 | N/A | N/A | warm |"), lines[3]
    assert lines[4].endswith("| N/A | N/A | N/A | N/A | N/A |"), lines[4]


def test_a_single_run_of_two_modes_keeps_the_rerun_column_with_its_reason():
    """The table's shape does not change with the samples: one run of two modes has no
    rerun interval, and says why in the column rather than losing it (README)."""
    two = _native._stats_from_samples(np.r_[np.ones(100), 2 * np.ones(100)])
    assert two.stability == "multimodal" and two.rerun_low_ms is None
    lines = format_benchmark_table([two], columns="auto").split("\n")
    assert lines[0].endswith("| Rerun 95% (ms) |")
    assert lines[2].endswith("| none (two modes) |")


def test_the_report_says_why_a_run_has_no_rerun_interval(tmp_path):
    from spatialhub.utils.profiling import write_report

    two = _native._stats_from_samples(np.r_[np.ones(100), 2 * np.ones(100)])
    steady = _native._stats_from_samples(1 + 0.01 * np.random.default_rng(0).random(200))
    steady.name = "steady"
    text = write_report([steady, two], tmp_path / "r.md").read_text()
    assert "| samples | CPU | 1.5 (1 to 2) | none (two modes) |" in text
