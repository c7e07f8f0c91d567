"""What a scope profiler prints: summary() log lines byte for byte as the released module
logs them (logger name, level, text), the Markdown / HTML tree tables, to_dict / JSON."""
import json
import logging


from spatialhub.utils.profiling import HierarchicalProfiler

LOGGER = "spatialhub.utils.profiling"   # the released module's logging.getLogger(__name__)


def fixed_tree():
    """A tree whose figures are set by hand, so every printed digit is known."""
    p = HierarchicalProfiler("Pipeline")
    pre = p.push("preprocess")
    pre.calls, pre.total_wall_time, pre.total_cpu_time = 4, 0.5, 0.25
    pre.peak_ram_delta_mb = 12.345
    resize = p.push("resize")
    resize.calls, resize.total_wall_time, resize.total_cpu_time = 8, 0.08, 0.08
    resize.peak_ram_delta_mb = 0.9          # not above 1 MB: not shown
    deep = p.push("a-rather-long-scope-name-that-exceeds-32")
    deep.calls, deep.total_wall_time, deep.total_cpu_time = 12345, 1.0, 0.0
    p.pop()
    p.pop()
    p.pop()
    inf = p.push("inference")
    inf.calls, inf.total_wall_time, inf.total_cpu_time = 2, 0.3, 0.6   # 200 % CPU
    inf.peak_vram_delta_mb = 256.04
    inf.peak_ram_delta_mb = 1.05
    p.pop()
    p.push("never-exited")    # calls 0: averages 0
    p.pop()
    return p


EXPECTED_SUMMARY = [
    "\n=== Hierarchical Profiling Summary ===",
    # name left-aligned in 32 columns after the indent; calls in 4
    "preprocess" + " " * 22 + " | Calls: 4    | Wall: 0.1250s | CPU: 0.0625s (50%)"
    " [RAM: +12.3MB]",
    "  |-resize" + " " * 26 + " | Calls: 8    | Wall: 0.0100s | CPU: 0.0100s (100%)",
    "    |-a-rather-long-scope-name-that-exceeds-32 | Calls: 12345 | Wall: 0.0001s | "
    "CPU: 0.0000s (0%)",
    "inference" + " " * 23 + " | Calls: 2    | Wall: 0.1500s | CPU: 0.3000s (200%)"
    " [RAM: +1.1MB] [VRAM: +256.0MB]",
    "never-exited" + " " * 20 + " | Calls: 0    | Wall: 0.0000s | CPU: 0.0000s (0%)",
    "======================================",
]


def test_summary_logs_the_released_lines_byte_for_byte(caplog):
    p = fixed_tree()
    with caplog.at_level(logging.INFO, logger=LOGGER):
        p.summary()
    records = [r for r in caplog.records if r.name == LOGGER]
    assert [r.levelno for r in records] == [logging.INFO] * len(EXPECTED_SUMMARY)
    assert [r.getMessage() for r in records] == EXPECTED_SUMMARY


def test_the_summary_is_printed_or_returned_whatever_the_logging_setup(capsys, caplog):
    # summary() logs at INFO as the released one does: nothing shows without a logging
    # configuration; print_summary() and summary_text() give the same lines directly
    p = fixed_tree()
    assert p.summary_text() == "\n".join(EXPECTED_SUMMARY)
    p.print_summary()
    assert capsys.readouterr().out == "\n".join(EXPECTED_SUMMARY) + "\n"
    import io
    buf = io.StringIO()
    p.print_summary(file=buf)
    assert buf.getvalue().splitlines()[1] == "=== Hierarchical Profiling Summary ==="


def test_summary_equals_the_released_module_on_the_same_tree(caplog, released):
    rel = released
    ours = fixed_tree()
    theirs = rel.HierarchicalProfiler("Pipeline")

    def copy(src, dst):
        for name, child in src.children.items():
            node = rel.ProfileNode(name)
            for a in ("calls", "total_wall_time", "total_cpu_time", "peak_ram_delta_mb",
                      "peak_vram_delta_mb"):
                setattr(node, a, getattr(child, a))
            dst.children[name] = node
            copy(child, node)

    copy(ours.root, theirs.root)
    with caplog.at_level(logging.INFO):
        theirs.summary()
        n = len(caplog.records)
        ours.summary()
    lines = [r.getMessage() for r in caplog.records]
    assert lines[:n] == lines[n:]
    assert caplog.records[0].name == "released_profiling"  # its __name__ when loaded so


def test_markdown_and_html_tree_tables():
    p = fixed_tree()
    md = p._repr_markdown_()
    lines = md.splitlines()
    assert lines[0] == ("| Scope | Calls | Total (ms) | Mean (ms) | p50 (ms) | p95 (ms) | "
                        "% of parent | CPU % | Peak RAM | Peak VRAM |")
    assert len(lines) == 2 + 5
    pre = lines[2].split(" | ")
    assert pre[0] == "| preprocess" and pre[1] == "4" and pre[2] == "500.00"
    assert pre[3] == "125.00"                      # mean ms
    assert pre[6] == "62.5%"                       # 0.5 s of the 0.5 + 0.3 + 0 s at the top
    assert pre[7] == "50%"                         # CPU utilisation
    resize = lines[3].split(" | ")
    assert resize[0].endswith("└ resize") and resize[6] == "16.0%"   # 0.08 of 0.5 s
    html = p._repr_html_()
    assert html.startswith("<table>") and html.count("<tr>") == 1 + 5
    assert "<td>256.0" not in html and "+256.0 MB" in html


def test_markdown_escapes_scope_names():
    p = HierarchicalProfiler("R", track_ram=False)
    with p("a|b *c*"):
        pass
    row = p.to_markdown().splitlines()[2]
    assert row.startswith("| a\\|b \\*c\\* |")
    with p("<script>"):
        pass
    assert "&lt;script&gt;" in p.to_html() and "<script>" not in p.to_html()


def test_to_dict_and_json_carry_every_figure():
    p = HierarchicalProfiler("Pipe", track_ram=False)
    for _ in range(3):
        with p("stage"):
            with p("inner"):
                pass
    d = p.to_dict()
    assert d["device"] == "CPU" and d["root"]["name"] == "Pipe" and d["root"]["calls"] == 0
    (stage,) = d["root"]["children"]
    assert stage["name"] == "stage" and stage["calls"] == 3
    for k in ("total_wall_time", "total_cpu_time", "mean_ms", "p50_ms", "p95_ms", "p99_ms",
              "min_ms", "max_ms", "peak_ram_delta_mb", "peak_vram_delta_mb"):
        assert isinstance(stage[k], float), k
    assert stage["min_ms"] <= stage["p50_ms"] <= stage["p95_ms"] <= stage["max_ms"]
    assert stage["children"][0]["name"] == "inner"
    assert json.loads(p.to_json()) == json.loads(json.dumps(d))
