"""Figures drawn by the package itself, as inline SVG (the readiness report's).

No plotting library: a figure is a few lines, points and bars on a linear or
logarithmic axis, each series in a colour and a dash pattern of its own (so it reads in
greyscale print too), a legend below the plot, and a ``<title>`` and ``<desc>`` that
say in words what it shows.  Every text is escaped by the core's one escaper
(``_native._html_escape``); attributes are always double-quoted, which that escaper
covers.  Nothing is loaded from anywhere: the fonts are the reader's own.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from ._native import _html_escape
from ._numbers import exact

__all__ = ["Figure", "PALETTE", "DASHES"]

#: Okabe and Ito's colours (told apart with every common colour-vision deficiency)
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000",
           "#7F7F7F")
#: one dash pattern per colour: a greyscale print still tells the series apart
DASHES = ("", "7 3", "2 3", "9 3 2 3", "4 4", "1 3", "12 4", "5 2 1 2")
ALARM = "#A40E26"

#: a value to draw; None (a figure not measured) is skipped, as are NaN and, on a log
#: axis, values <= 0
Num = Optional[float]

_CHAR_W = 6.6      # an estimate of a 12px sans-serif character's width, for layout only


def esc(text: object) -> str:
    """Text or an attribute value (double-quoted) through the core's escaper."""
    return str(_html_escape(str(text)))


def _floats(values: Sequence[Num]) -> list[float]:
    return [math.nan if v is None else float(v) for v in values]


def _f(v: float) -> str:
    return f"{v:.1f}"


def tick_text(t: float) -> str:
    """A tick label: as short as the value allows, never with an exponent."""
    if abs(t) >= 1000:
        return f"{t:,.0f}"
    return exact(float(f"{t:.10g}"))


@dataclass
class _Axis:
    log: bool = False
    zero: bool = False          # a linear axis that starts at 0
    lo: float = math.inf
    hi: float = -math.inf

    def see(self, values: Sequence[float]) -> None:
        for v in values:
            if not math.isfinite(v) or (self.log and v <= 0):
                continue
            self.lo, self.hi = min(self.lo, v), max(self.hi, v)

    def settle(self) -> None:
        if not math.isfinite(self.lo):
            self.lo, self.hi = (1.0, 10.0) if self.log else (0.0, 1.0)
        if self.log:
            if self.hi / self.lo < 1.5:
                mid = math.sqrt(self.lo * self.hi)
                self.lo, self.hi = mid / 1.25, mid * 1.25
            pad = max(1.08, (self.hi / self.lo) ** 0.05)   # room for markers at the ends
            self.lo, self.hi = self.lo / pad, self.hi * pad
            return
        if self.zero:
            self.lo = min(0.0, self.lo)
        if self.hi == self.lo:
            pad = abs(self.hi) * 0.1 or 1.0
            self.lo, self.hi = self.lo - pad, self.hi + pad
        span = self.hi - self.lo
        if not (self.zero and self.lo == 0.0):
            self.lo -= 0.04 * span
        self.hi += 0.06 * span

    def frac(self, v: float) -> float:
        if self.log:
            return (math.log10(v) - math.log10(self.lo)) / (math.log10(self.hi)
                                                            - math.log10(self.lo))
        return (v - self.lo) / (self.hi - self.lo)

    def ticks(self) -> list[float]:
        if self.log:
            out = []
            for k in range(math.floor(math.log10(self.lo)), math.ceil(math.log10(self.hi)) + 1):
                for m in (1, 2, 5):
                    t = m * 10.0 ** k
                    if self.lo <= t <= self.hi:
                        out.append(t)
            if len(out) > 9:
                out = [t for t in out if f"{t:.0e}".startswith("1")]
            if len(out) < 2:
                out = sorted({float(f"{self.lo * 1.1:.2g}"), float(f"{self.hi / 1.1:.2g}")})
            return out
        raw = (self.hi - self.lo) / 5
        mag = 10.0 ** math.floor(math.log10(raw))
        step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
        first = math.ceil(self.lo / step) * step
        n = int(math.floor((self.hi - first) / step + 1e-9)) + 1
        return [first + i * step for i in range(max(n, 0))]


@dataclass
class _Series:
    kind: str
    xs: list[float]        # None given: NaN, skipped when drawn
    ys: list[float]
    color: str
    dash: str = ""
    label: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class Figure:
    """One plot: series on an x and a y axis (linear or log), or, with ``categories``,
    one row per category on the y axis.

    Parameters
    ----------
    title : str
        Drawn above the plot and its accessible name.
    x_label, y_label : str
        The axes' names (with their units).
    desc : str, default ""
        What the figure shows, in words (its ``<desc>``: read by screen readers).
    x_log, y_log : bool, default False
        Logarithmic axes.
    x_zero, y_zero : bool, default False
        A linear axis that starts at 0.
    categories : sequence of str, optional
        Rows of a categorical y axis, top to bottom (y values are row indices).
    width, height : int
        The plot's size in px (the legend adds rows below it).
    """

    def __init__(self, title: str, x_label: str, y_label: str, *, desc: str = "",
                 x_log: bool = False, y_log: bool = False, x_zero: bool = False,
                 y_zero: bool = False, categories: Sequence[str] | None = None,
                 width: int = 760, height: int = 340) -> None:
        self.title, self.x_label, self.y_label, self.desc = title, x_label, y_label, desc
        self.x = _Axis(log=x_log, zero=x_zero)
        self.y = _Axis(log=y_log, zero=y_zero)
        self.categories = list(categories) if categories is not None else None
        if self.categories is not None:
            height = max(90 + 34 * len(self.categories), 140)
        self.width, self.height = width, height
        self.series: list[_Series] = []

    # ---- what to draw -------------------------------------------------------------

    def line(self, xs: Sequence[Num], ys: Sequence[Num], *, color: str, dash: str = "",
             label: str | None = None, step: bool = False, markers: bool = False,
             width: float = 1.8) -> None:
        """A polyline (or a step line: each value holds until the next x)."""
        self._add(_Series("line", _floats(xs), _floats(ys), color, dash, label,
                          {"step": step, "markers": markers, "width": width}))

    def points(self, xs: Sequence[Num], ys: Sequence[Num], *, color: str,
               label: str | None = None, hollow: bool = False, shape: str = "circle",
               texts: Sequence[str] | None = None, size: float = 4.0) -> None:
        """Markers, with an optional text beside each."""
        self._add(_Series("points", _floats(xs), _floats(ys), color, "", label,
                          {"hollow": hollow, "shape": shape, "texts": list(texts or []),
                           "size": size}))

    def xbars(self, lo: Sequence[Num], hi: Sequence[Num], ys: Sequence[Num], *,
              color: str, label: str | None = None, thick: float = 1.4) -> None:
        """Horizontal bars from lo to hi at each y (an interval, a whisker)."""
        self._add(_Series("xbars", _floats(lo) + _floats(hi), _floats(ys) * 2, color, "",
                          label, {"n": len(ys), "thick": thick}))

    def ybars(self, xs: Sequence[Num], lo: Sequence[Num], hi: Sequence[Num], *,
              color: str, label: str | None = None) -> None:
        """Vertical error bars from lo to hi at each x."""
        self._add(_Series("ybars", _floats(xs) * 2, _floats(lo) + _floats(hi), color, "",
                          label, {"n": len(xs)}))

    def boxes(self, q1: Sequence[Num], q3: Sequence[Num], ys: Sequence[Num], *,
              colors: Sequence[str]) -> None:
        """A box from q1 to q3 on each categorical row."""
        self._add(_Series("boxes", _floats(q1) + _floats(q3), _floats(ys) * 2, "", "", None,
                          {"n": len(ys), "colors": list(colors)}))

    def hline(self, y: float, *, label: str, color: str = ALARM, dash: str = "6 4") -> None:
        """A horizontal reference line across the plot (a bound, a limit)."""
        self._add(_Series("hline", [], [y], color, dash, label))

    def vline(self, x: float, *, label: str, color: str = ALARM, dash: str = "6 4") -> None:
        """A vertical reference line (a budget on the x quantity, a peak)."""
        self._add(_Series("vline", [x], [], color, dash, label))

    def _add(self, s: _Series) -> None:
        self.x.see(s.xs)
        if self.categories is None:
            self.y.see(s.ys)
        self.series.append(s)

    # ---- drawing --------------------------------------------------------------------

    def svg(self, ident: str) -> str:
        """The figure as an ``<svg>`` element; ``ident`` makes its ids unique in a page."""
        self.x.settle()
        if self.categories is None:
            self.y.settle()
        y_ticks = self.y.ticks() if self.categories is None else []
        left = max(48.0, 30 + _CHAR_W * max((len(tick_text(t)) for t in y_ticks), default=4))
        if self.categories is not None:
            longest = max((len(c) for c in self.categories), default=4)
            left = min(16 + _CHAR_W * min(longest, 34), self.width * 0.4)
        top, right, bottom = 40.0, 18.0, 50.0
        legend = self._legend_rows(left)
        total_h = self.height + 20 * len(legend)
        pw, ph = self.width - left - right, self.height - top - bottom

        def X(v: float) -> float:
            return left + pw * self.x.frac(v)

        def Y(v: float) -> float:
            if self.categories is not None:
                return top + ph * (v + 0.5) / len(self.categories)
            return top + ph * (1 - self.y.frac(v))

        out = [f'<svg role="img" class="figure" '
               f'viewBox="0 0 {self.width} {_f(total_h)}" width="{self.width}" '
               f'height="{_f(total_h)}" aria-labelledby="{ident}-t {ident}-d">',
               f'<title id="{ident}-t">{esc(self.title)}</title>',
               f'<desc id="{ident}-d">{esc(self.desc)}</desc>',
               f'<rect x="0" y="0" width="{self.width}" height="{_f(total_h)}" fill="#fff"/>',
               f'<text x="{_f(left)}" y="22" class="ft">{esc(self.title)}</text>']
        # grid and ticks
        for t in self.x.ticks():
            x = X(t)
            out.append(f'<line x1="{_f(x)}" y1="{_f(top)}" x2="{_f(x)}" y2="{_f(top + ph)}" '
                       f'class="grid"/>')
            out.append(f'<text x="{_f(x)}" y="{_f(top + ph + 16)}" text-anchor="middle" '
                       f'class="tick">{esc(tick_text(t))}</text>')
        if self.categories is None:
            for t in y_ticks:
                y = Y(t)
                out.append(f'<line x1="{_f(left)}" y1="{_f(y)}" x2="{_f(left + pw)}" '
                           f'y2="{_f(y)}" class="grid"/>')
                out.append(f'<text x="{_f(left - 6)}" y="{_f(y + 4)}" text-anchor="end" '
                           f'class="tick">{esc(tick_text(t))}</text>')
        else:
            for i, c in enumerate(self.categories):
                shown = c if len(c) <= 34 else c[:33] + "\u2026"
                out.append(f'<text x="{_f(left - 8)}" y="{_f(Y(i) + 4)}" text-anchor="end" '
                           f'class="tick"><title>{esc(c)}</title>{esc(shown)}</text>')
        out.append(f'<rect x="{_f(left)}" y="{_f(top)}" width="{_f(pw)}" height="{_f(ph)}" '
                   f'class="frame"/>')
        out.append(f'<text x="{_f(left + pw / 2)}" y="{_f(top + ph + 36)}" '
                   f'text-anchor="middle" class="axl">{esc(self.x_label)}</text>')
        if self.y_label:
            out.append(f'<text transform="translate(14 {_f(top + ph / 2)}) rotate(-90)" '
                       f'text-anchor="middle" class="axl">{esc(self.y_label)}</text>')
        # clip the data to the plot
        out.append(f'<clipPath id="{ident}-c"><rect x="{_f(left)}" y="{_f(top)}" '
                   f'width="{_f(pw)}" height="{_f(ph)}"/></clipPath>')
        out.append(f'<g clip-path="url(#{ident}-c)">')
        for s in self.series:
            out += self._draw(s, X, Y, left, top, pw, ph)
        out.append("</g>")
        # reference lines' labels, outside the clip
        for s in self.series:
            if s.kind == "hline" and s.label:
                out.append(f'<text x="{_f(left + pw - 4)}" y="{_f(Y(s.ys[0]) - 5)}" '
                           f'text-anchor="end" class="ref" fill="{s.color}">'
                           f'{esc(s.label)}</text>')
            elif s.kind == "vline" and s.label:
                out.append(f'<text x="{_f(X(s.xs[0]) + 4)}" y="{_f(top + 13)}" class="ref" '
                           f'fill="{s.color}">{esc(s.label)}</text>')
        y0 = self.height + 2
        for row in legend:
            for x, s in row:
                out.append(self._swatch(s, x, y0))
                out.append(f'<text x="{_f(x + 30)}" y="{_f(y0 + 4)}" class="leg">'
                           f'{esc(s.label)}</text>')
            y0 += 20
        out.append("</svg>")
        return "\n".join(out)

    def _legend_rows(self, left: float) -> list[list[tuple[float, _Series]]]:
        rows: list[list[tuple[float, _Series]]] = []
        x = left
        row: list[tuple[float, _Series]] = []
        for s in self.series:
            if not s.label or s.kind in ("hline", "vline"):
                continue
            w = 30 + _CHAR_W * len(s.label) + 18
            if row and x + w > self.width - 10:
                rows.append(row)
                row, x = [], left
            row.append((x, s))
            x += w
        if row:
            rows.append(row)
        return rows

    @staticmethod
    def _swatch(s: _Series, x: float, y: float) -> str:
        if s.kind == "points":
            return Figure._marker(s, x + 12, y)
        dash = f' stroke-dasharray="{s.dash}"' if s.dash else ""
        return (f'<line x1="{_f(x)}" y1="{_f(y)}" x2="{_f(x + 24)}" y2="{_f(y)}" '
                f'stroke="{s.color}" stroke-width="2.2"{dash}/>')

    @staticmethod
    def _marker(s: _Series, x: float, y: float) -> str:
        r = s.extra.get("size", 4.0)
        fill = "#fff" if s.extra.get("hollow") else s.color
        if s.extra.get("shape") == "diamond":
            return (f'<path d="M{_f(x)} {_f(y - r - 1)} L{_f(x + r + 1)} {_f(y)} '
                    f'L{_f(x)} {_f(y + r + 1)} L{_f(x - r - 1)} {_f(y)} Z" fill="{fill}" '
                    f'stroke="{s.color}" stroke-width="1.5"/>')
        if s.extra.get("shape") == "tick":
            return (f'<line x1="{_f(x)}" y1="{_f(y - r - 3)}" x2="{_f(x)}" '
                    f'y2="{_f(y + r + 3)}" stroke="{s.color}" stroke-width="2.6"/>')
        return (f'<circle cx="{_f(x)}" cy="{_f(y)}" r="{_f(r)}" fill="{fill}" '
                f'stroke="{s.color}" stroke-width="1.5"/>')

    def _draw(self, s: _Series, X: Any, Y: Any, left: float, top: float, pw: float,
              ph: float) -> list[str]:
        ok = self._ok
        out: list[str] = []
        title = f"<title>{esc(s.label)}</title>" if s.label else ""
        if s.kind == "line":
            pts = [(X(x), Y(y)) for x, y in zip(s.xs, s.ys) if ok(self.x, x) and self._oky(y)]
            if not pts:
                return out
            d = f"M{_f(pts[0][0])} {_f(pts[0][1])}"
            for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
                d += f" H{_f(x1)} V{_f(y1)}" if s.extra["step"] else f" L{_f(x1)} {_f(y1)}"
            dash = f' stroke-dasharray="{s.dash}"' if s.dash else ""
            out.append(f'<path d="{d}" fill="none" stroke="{s.color}" '
                       f'stroke-width="{s.extra["width"]}"{dash}>{title}</path>')
            if s.extra["markers"]:
                marker = _Series("points", [], [], s.color, extra={"size": 3.2})
                out += [self._marker(marker, x, y) for x, y in pts]
        elif s.kind == "points":
            texts = s.extra["texts"]
            for i, (x, y) in enumerate(zip(s.xs, s.ys)):
                if not (ok(self.x, x) and self._oky(y)):
                    continue
                out.append(self._marker(s, X(x), Y(y)))
                if i < len(texts) and texts[i]:
                    # beside the point, on the side with room (never cut at the frame)
                    right = X(x) > left + pw - _CHAR_W * len(texts[i]) - 12
                    below = Y(y) < top + 16
                    tx = X(x) - 7 if right else X(x) + 7
                    ty = Y(y) + 15 if below else Y(y) - 7
                    anchor = ' text-anchor="end"' if right else ""
                    out.append(f'<text x="{_f(tx)}" y="{_f(ty)}" class="pt"{anchor}>'
                               f'{esc(texts[i])}</text>')
        elif s.kind in ("xbars", "boxes"):
            n = s.extra["n"]
            for i in range(n):
                lo, hi, y = s.xs[i], s.xs[n + i], s.ys[i]
                if not (ok(self.x, lo) and ok(self.x, hi) and self._oky(y)):
                    continue
                if s.kind == "xbars":
                    out.append(f'<line x1="{_f(X(lo))}" y1="{_f(Y(y))}" x2="{_f(X(hi))}" '
                               f'y2="{_f(Y(y))}" stroke="{s.color}" '
                               f'stroke-width="{s.extra["thick"]}"/>')
                else:
                    c = s.extra["colors"][i]
                    out.append(f'<rect x="{_f(X(lo))}" y="{_f(Y(y) - 9)}" '
                               f'width="{_f(max(X(hi) - X(lo), 1.0))}" height="18" '
                               f'fill="{c}" fill-opacity="0.22" stroke="{c}" '
                               f'stroke-width="1.4"/>')
        elif s.kind == "ybars":
            n = s.extra["n"]
            for i in range(n):
                x, lo, hi = s.xs[i], s.ys[i], s.ys[n + i]
                if not (ok(self.x, x) and self._oky(lo) and self._oky(hi)):
                    continue
                out.append(f'<path d="M{_f(X(x) - 4)} {_f(Y(lo))} H{_f(X(x) + 4)} '
                           f'M{_f(X(x))} {_f(Y(lo))} V{_f(Y(hi))} M{_f(X(x) - 4)} '
                           f'{_f(Y(hi))} H{_f(X(x) + 4)}" stroke="{s.color}" '
                           f'stroke-width="1.3" fill="none"/>')
        elif s.kind == "hline":
            y = Y(s.ys[0])
            out.append(f'<line x1="{_f(left)}" y1="{_f(y)}" x2="{_f(left + pw)}" '
                       f'y2="{_f(y)}" stroke="{s.color}" stroke-width="1.6" '
                       f'stroke-dasharray="{s.dash}">{title}</line>')
        elif s.kind == "vline":
            x = X(s.xs[0])
            out.append(f'<line x1="{_f(x)}" y1="{_f(top)}" x2="{_f(x)}" y2="{_f(top + ph)}" '
                       f'stroke="{s.color}" stroke-width="1.6" '
                       f'stroke-dasharray="{s.dash}">{title}</line>')
        return out

    @staticmethod
    def _ok(axis: _Axis, v: float) -> bool:
        return math.isfinite(v) and (not axis.log or v > 0)

    def _oky(self, v: float) -> bool:
        return self._ok(self.y, v) if self.categories is None else True


#: The figures' look, once per page (classes the SVG elements use).
CSS = """
svg.figure { max-width: 100%; height: auto; font-family: inherit; }
svg .ft { font-size: 14px; font-weight: 600; fill: #1b1f24; }
svg .tick { font-size: 11px; fill: #424a53; }
svg .axl { font-size: 12px; fill: #1b1f24; }
svg .leg { font-size: 12px; fill: #1b1f24; }
svg .pt { font-size: 11px; fill: #1b1f24; }
svg .ref { font-size: 11px; font-weight: 600; }
svg .grid { stroke: #e6e8eb; stroke-width: 1; }
svg .frame { fill: none; stroke: #8c959f; stroke-width: 1; }
"""
