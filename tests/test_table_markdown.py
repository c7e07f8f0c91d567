"""A Markdown table must render as exactly the names it was given.

Names and device labels are user text: "<lambda>" (a function's __name__),
"resnet*", "cost $5", "a|b", "vit_b_16".  Rendered by GitHub's own engine
(cmark-gfm) and by markdown-it (what Jupyter-like front ends use), every
cell must read back as the text given -- line breaks as spaces, ends
trimmed -- and the row must keep its cells.
"""
import html.parser
import os
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spatialhub.utils.profiling import BenchmarkStats, compare_benchmarks, format_benchmark_table

RENDERERS = {}
try:
    import cmarkgfm

    RENDERERS["cmark-gfm"] = cmarkgfm.github_flavored_markdown_to_html
except ImportError:
    pass
try:
    from markdown_it import MarkdownIt

    RENDERERS["markdown-it"] = MarkdownIt("commonmark").enable("table").render
except ImportError:
    pass

pytestmark = pytest.mark.skipif(not RENDERERS, reason="needs cmarkgfm or markdown-it-py")
RENDER = sorted(RENDERERS)
N_EXAMPLES = int(os.environ.get("SPATIALHUB_FUZZ_EXAMPLES", "0")) or None   # as test_reliability_inputs


def fuzz(n):
    return settings(max_examples=N_EXAMPLES or n, deadline=None, database=None)


class _Cells(html.parser.HTMLParser):
    """Text of the <h3>, and of each <th>/<td> of each row."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.heading, self.rows, self._buf, self._in = None, [], None, None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th", "h3"):
            self._buf, self._in = [], tag

    def handle_endtag(self, tag):
        if tag == self._in:
            text = "".join(self._buf)
            if tag == "h3":
                self.heading = text
            else:
                self.rows[-1].append(text)
            self._buf = self._in = None

    def handle_data(self, data):
        if self._buf is not None:
            self._buf.append(data)


def render(md, renderer):
    p = _Cells()
    p.feed(RENDERERS[renderer](md + "\n"))
    return p


def expect(text):
    """What a one-line cell shows: line breaks as spaces, the ends trimmed."""
    return text.replace("\r\n", " ").replace("\r", " ").replace("\n", " ").strip()


def stats(name, device="CPU"):
    return BenchmarkStats(name=name, device=device, mean_ms=1.0, median_ms=1.0, std_ms=0.0,
                          p95_ms=1.0, min_ms=1.0, max_ms=1.0, fps=1000.0, warmup_iters=0,
                          timed_iters=3, samples_ms=[1.0, 1.0, 1.0])


# user text: every ASCII punctuation character, letters, digits, spaces, line
# breaks and a few non-ASCII letters and symbols
TEXT = st.text(alphabet=string.ascii_letters[:6] + string.digits[:3] + string.punctuation
               + "  \n\r\té中€", max_size=14)


@pytest.mark.parametrize("renderer", RENDER)
@fuzz(300)
@given(name=TEXT, device=TEXT, title=TEXT, unit=TEXT)
def test_every_cell_renders_as_the_text_given(renderer, name, device, title, unit):
    md = format_benchmark_table([stats(name, device), stats("second")], title=title or None,
                                throughput_unit=unit)
    p = render(md, renderer)
    header, row, second = p.rows
    assert len(header) == len(row) == len(second) == 7, md
    assert header[5] == expect(f"Throughput ({unit})"), md
    assert row[0] == expect(name), md
    assert row[1] == expect(device), md
    assert second[0] == "second"
    if expect(title):
        assert p.heading == expect(title), md


@pytest.mark.parametrize("renderer", RENDER)
@fuzz(150)
@given(a=TEXT, b=TEXT)
def test_a_comparison_renders_both_names(renderer, a, b):
    md = compare_benchmarks(stats(a), stats(b))._repr_markdown_()
    row = render(md, renderer).rows[1]
    assert len(row) == 7 and row[:2] == [expect(a), expect(b)], md


@pytest.mark.parametrize("name, cell", [
    ("vit_b_16", "**vit_b_16**"),           # intraword '_' is safe in GFM: kept readable
    ("resnet50 (fp16)", "**resnet50 (fp16)**"),
    ("<lambda>", "**\\<lambda>**"),          # else an HTML tag: the name would vanish
    ("__init__", "**\\_\\_init\\_\\_**"),
    ("a|b", "**a\\|b**"),
    ("a\\|b", "**a\\\\\\|b**"),               # the backslash is doubled, then the pipe escaped
    ("cost $5 vs $10", "**cost \\$5 vs \\$10**"),   # Jupyter would typeset $...$ as math
    ("R&D", "**R&D**"), ("&amp;", "**\\&amp;**"),
    ("C:\\models\\x.onnx", "**C:\\models\\x.onnx**"),   # a backslash before a letter is literal
    ("  padded\n", "**padded**"),
])
def test_escaping_is_minimal_and_readable(name, cell):
    row = format_benchmark_table(stats(name)).splitlines()[2]
    assert row.startswith(f"| {cell} | `CPU` |")


def test_device_labels_are_code_spans_that_may_hold_backticks():
    rows = [format_benchmark_table(stats("m", d)).splitlines()[2].split(" | ")[1]
            for d in ("cuda:0", "a`b", "``x", "a|b")]
    assert rows == ["`cuda:0`", "`` a`b ``", "``` ``x ```", "`a\\|b`"]


def test_an_empty_name_leaves_an_empty_cell_not_a_rule():
    assert format_benchmark_table(stats("   ")).splitlines()[2].startswith("|  | `CPU` |")
