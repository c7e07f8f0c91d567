"""The report's page as a small document model -- sections of paragraphs, tables,
figures, lists -- and its two writers, HTML and Markdown, so that both say the same.

Every text goes through the core's one escaper: ``_native._html_escape`` in HTML (all
attributes double-quoted, which it covers), ``_native._md_text`` in Markdown.  The
HTML page loads nothing and runs nothing: its Content-Security-Policy says so too, so
that not even a mistake here could fetch a resource or run a script.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Union

from . import _native
from .svg import CSS as FIGURE_CSS
from .svg import Figure, esc

__all__ = ["Cell", "P", "Table", "Fig", "Native", "Items", "Pre", "H3",
           "Section", "html_page", "markdown_page"]


@dataclass
class Cell:
    """A table cell or an inline span; ``cls``: "num" (right-aligned figures), "ok",
    "fail" (bold in Markdown), "warn", "muted"."""

    text: str
    cls: str = ""


# Type aliases for the checker only: a runtime Union of our classes would sit in typing's
# cache until the process ends, holding this module's globals -- and with them the core,
# whose teardown (releasing CUDA contexts, shutting NVML down) then never runs.
if TYPE_CHECKING:
    Span = Union[str, Cell]


@dataclass
class P:
    spans: list[Span]
    cls: str = ""


@dataclass
class Table:
    head: list[str]
    rows: list[list[Cell]]
    numeric: frozenset[int] = frozenset()


@dataclass
class Fig:
    figure: Figure
    caption: str


@dataclass
class Native:
    """A table the core rendered (its own escaping), in both markups."""

    html: str
    markdown: str


@dataclass
class Items:
    items: list[list[Span]]


@dataclass
class Pre:
    text: str


@dataclass
class H3:
    text: str


if TYPE_CHECKING:
    Block = Union[P, Table, Fig, Native, Items, Pre, H3]


@dataclass
class Section:
    ident: str
    title: str
    blocks: list[Block] = field(default_factory=list)


def _span_html(s: Span) -> str:
    if isinstance(s, Cell):
        tag = "strong" if "fail" in s.cls or "ok" in s.cls else "span"
        return f'<{tag} class="{esc(s.cls)}">{esc(s.text)}</{tag}>' if s.cls else esc(s.text)
    return esc(s)


def _span_md(s: Span) -> str:
    text = s.text if isinstance(s, Cell) else s
    md = str(_native._md_text(text)) if text.strip() else ""
    if isinstance(s, Cell) and ("fail" in s.cls or "ok" in s.cls) and md:
        md = f"**{md}**"
    # the escaper trims a cell's ends (Markdown drops them); between spans they matter
    lead, trail = text[:len(text) - len(text.lstrip())], text[len(text.rstrip()):]
    return (" " if lead else "") + md + (" " if trail and md else "")


def html_page(title: str, subtitle: str, sections: list[Section], version: str) -> str:
    out = ['<!DOCTYPE html>', '<html lang="en">', '<head>', '<meta charset="utf-8">',
           # nothing may load and no script may run, whatever a name holds
           '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
           'style-src \'unsafe-inline\'; img-src data:">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f'<meta name="generator" content="spatialhub-profiling {esc(version)}">',
           f'<title>{esc(title)}</title>', f'<style>{_PAGE_CSS}{FIGURE_CSS}</style>',
           '</head>', '<body>', '<header>', f'<h1>{esc(title)}</h1>',
           f'<p class="muted">{esc(subtitle)}</p>', '</header>',
           '<nav aria-label="Sections"><ol>']
    out += [f'<li><a href="#{s.ident}">{esc(s.title)}</a></li>' for s in sections]
    out.append('</ol></nav>')
    n_fig = 0
    for s in sections:
        out.append(f'<section id="{s.ident}">')
        out.append(f'<h2>{esc(s.title)}</h2>')
        for b in s.blocks:
            if isinstance(b, P):
                cls = f' class="{esc(b.cls)}"' if b.cls else ""
                out.append(f'<p{cls}>' + "".join(_span_html(x) for x in b.spans) + '</p>')
            elif isinstance(b, Table):
                out.append('<div class="wide"><table>')
                out.append('<thead><tr>' + "".join(f'<th>{esc(h)}</th>' for h in b.head)
                           + '</tr></thead><tbody>')
                for row in b.rows:
                    cells = []
                    for c in row:
                        cls = f' class="{esc(c.cls)}"' if c.cls else ""
                        cells.append(f'<td{cls}>{esc(c.text)}</td>')
                    out.append('<tr>' + "".join(cells) + '</tr>')
                out.append('</tbody></table></div>')
            elif isinstance(b, Fig):
                n_fig += 1
                out.append('<figure>')
                out.append(b.figure.svg(f"fig{n_fig}"))
                out.append(f'<figcaption>Figure {n_fig}. {esc(b.caption)}</figcaption>')
                out.append('</figure>')
            elif isinstance(b, Native):
                out.append(f'<div class="wide native">{b.html}</div>')
            elif isinstance(b, Items):
                out.append('<ul>' + "".join('<li>' + "".join(_span_html(x) for x in item)
                                            + '</li>' for item in b.items) + '</ul>')
            elif isinstance(b, Pre):
                out.append(f'<pre>{esc(b.text)}</pre>')
            elif isinstance(b, H3):
                out.append(f'<h3>{esc(b.text)}</h3>')
        out.append('</section>')
    out += ['</body>', '</html>', '']
    return "\n".join(out)


def markdown_page(title: str, subtitle: str, sections: list[Section]) -> str:
    out = [f"# {_native._md_text(title, 'heading')}", "", _span_md(subtitle), ""]
    n_fig = 0
    for s in sections:
        out += [f"## {_native._md_text(s.title, 'heading')}", ""]
        for b in s.blocks:
            if isinstance(b, P):
                out += ["".join(_span_md(x) for x in b.spans), ""]
            elif isinstance(b, Table):
                out.append("| " + " | ".join(_span_md(h) for h in b.head) + " |")
                out.append("| " + " | ".join("---:" if i in b.numeric else ":---"
                                             for i in range(len(b.head))) + " |")
                for row in b.rows:
                    out.append("| " + " | ".join(_span_md(c) for c in row) + " |")
                out.append("")
            elif isinstance(b, Fig):
                n_fig += 1
                out += [_span_md(f"Figure {n_fig} (in the HTML report): {b.caption}"), ""]
            elif isinstance(b, Native):
                out += [b.markdown, ""]
            elif isinstance(b, Items):
                out += ["- " + "".join(_span_md(x) for x in item) for item in b.items]
                out.append("")
            elif isinstance(b, Pre):
                fence = "```"
                while fence in b.text:
                    fence += "`"
                out += [fence, b.text, fence, ""]
            elif isinstance(b, H3):
                out += [f"### {_native._md_text(b.text, 'heading')}", ""]
    return "\n".join(out).rstrip("\n") + "\n"


_PAGE_CSS = """
:root { color-scheme: light; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans",
       "Liberation Sans", sans-serif; color: #1b1f24; background: #fff;
       max-width: 1180px; margin: 1.5rem auto; padding: 0 1rem; }
h1 { font-size: 1.7rem; margin: 0 0 .2rem; }
h3 { font-size: 1.05rem; margin: 1.2rem 0 .4rem; }
h2 { font-size: 1.3rem; margin: 2rem 0 .6rem; padding-bottom: .2rem;
     border-bottom: 1px solid #d0d7de; }
p { margin: .5rem 0; }
nav ol { display: flex; flex-wrap: wrap; gap: .2rem 1.2rem; padding: 0; margin: .6rem 0;
         list-style: none; font-size: .92rem; }
a { color: #0550ae; }
.wide { overflow-x: auto; }
table { border-collapse: collapse; margin: .5rem 0 1rem; font-size: .9rem;
        font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #d0d7de; padding: .28rem .5rem; text-align: left;
         vertical-align: top; }
th { background: #f6f8fa; }
td.num { text-align: right; }
.ok { color: #116329; }
.fail { color: #a40e26; }
.warn { color: #7d4e00; }
.muted { color: #59636e; }
p.headline { font-size: 1.1rem; padding: .6rem .8rem; border-left: 5px solid #8c959f;
             background: #f6f8fa; }
p.headline.fail { border-color: #a40e26; background: #fff0f0; }
p.headline.ok { border-color: #116329; background: #eefbf1; }
figure { margin: 1rem 0 1.4rem; }
figcaption { font-size: .9rem; color: #424a53; max-width: 760px; }
pre { background: #f6f8fa; padding: .6rem .8rem; overflow-x: auto; font-size: .85rem; }
@page { margin: 14mm; }
@media print {
  body { max-width: none; margin: 0; padding: 0; font-size: 10pt; }
  nav { display: none; }
  .wide { overflow: visible; }
  table { font-size: 8.5pt; }
  table, figure, pre, p.headline { break-inside: avoid; }
  h2 { break-after: avoid; }
  a { color: inherit; text-decoration: none; }
}
"""
