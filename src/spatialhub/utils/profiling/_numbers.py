"""Numbers as people read them, for every text the Python layer writes (the CLI's
warnings, the readiness report, an output check): never a placeholder, never an
exponent (1,770 rather than 1.77e+03, 0.00084 rather than 8.4e-04)."""
from __future__ import annotations

import math
from decimal import Decimal

__all__ = ["number", "exact"]


def number(x: object) -> str:
    """Three significant digits (whole numbers from 100 on, with thousands separators);
    an int as it is; NaN as "unknown"."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return str(x)
    if isinstance(x, int):
        return f"{x:,}"
    if math.isnan(x):
        return "unknown"
    if math.isinf(x):
        return "infinite" if x > 0 else "minus infinite"
    ax = abs(x)
    if ax >= 100 or ax == 0:
        return f"{x:,.0f}"
    if ax >= 1:
        return f"{x:.3g}"
    return f"{x:.{2 - math.floor(math.log10(ax))}f}"


def exact(x: float) -> str:
    """A number given by the user (a tolerance, a limit) as written, without an exponent:
    1e-05 reads 0.00001, 30.0 reads 30."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return number(x)
    text = format(Decimal(repr(float(x))), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text
