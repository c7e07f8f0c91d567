"""The terminal table in pytest-benchmark's layout, with our columns.

One table per group (``pytest_benchmark_group_stats``), headed
`` benchmark 'group': N tests `` centred in dashes; the header
``Name (time in us)  Min  Max  Mean  StdDev  Median  IQR  Outliers  OPS  P99  Median 95% CI
Peak RAM  Rounds  Iterations`` (units from ``pytest_benchmark_scale_unit``); each
statistic of a row followed by its ratio to the group's best; then a legend.  Our
columns (P99, the median's 95% CI, peak RAM) sit before the two counts, which end the
header as in pytest-benchmark; ``--benchmark-columns`` chooses and orders them all.
Rows are flat dicts (``flat_row``), the shape the hooks receive.
"""
from __future__ import annotations

import math
import operator
import os
import re
from pathlib import Path

__all__ = ["flat_row", "saved_row", "group_rows", "scale_unit", "render", "NAME_FORMATS",
           "write_histograms", "write_csv", "markdown"]

TIME_STATS = ("min", "max", "mean", "stddev", "median", "iqr", "p90", "p95", "p99")
SCALED = TIME_STATS + ("ops",)
COUNTS = ("rounds", "iterations", "outliers")
LABELS = {"min": "Min", "max": "Max", "mean": "Mean", "stddev": "StdDev", "median": "Median",
          "iqr": "IQR", "outliers": "Outliers", "rounds": "Rounds", "iterations": "Iterations",
          "p90": "P90", "p95": "P95", "p99": "P99", "ci": "Median 95% CI", "ram": "Peak RAM",
          "instructions": "Instructions", "verdict": "vs saved"}
TIME_UNITS = {"": "Seconds", "m": "Milliseconds (ms)", "u": "Microseconds (us)",
              "n": "Nanoseconds (ns)"}


# ---- rows ----------------------------------------------------------------------------------

def flat_row(entry, source=None, path=None):
    """A ``benchmarks[]`` JSON entry (ours or pytest-benchmark's) as one flat dict: the
    entry's keys, its statistics at top level, ``ram`` (MiB or None), ``source``/``path``."""
    row = {k: v for k, v in entry.items() if k not in ("stats", "spatialhub")}
    stats = dict(entry.get("stats") or {})
    stats.pop("data", None)
    row.update(stats)
    if "ops" not in row and row.get("mean"):
        row["ops"] = 1.0 / row["mean"]
    extra = entry.get("spatialhub") or {}
    row["ram"] = extra.get("ram_delta_mb")
    row["source"] = source
    row["path"] = path
    row.setdefault("has_error", False)
    return row


def saved_row(entry, source, path):
    """The compared run's row (pytest-benchmark shows it above the new one)."""
    return flat_row(entry, source=source, path=str(path))


def _short_source(path, machine_id):
    parts = list(Path(path).parts)
    if parts and parts[0] == machine_id:
        parts = parts[1:]
    if parts:
        parts[-1] = parts[-1].rsplit(".", 1)[0]
    return "/".join(parts)


def group_rows(rows, group_by):
    """The default ``pytest_benchmark_group_stats``: rows grouped by the ``group_by``
    keys (comma-separated), each group in name (or fullname) order, groups by name."""
    groups = {}
    for row in rows:
        key = []
        for part in group_by.split(","):
            if part == "group":
                key.append(row.get("group"))
            elif part == "name":
                key.append(row["name"])
            elif part == "func":
                key.append(row["name"].split("[")[0])
            elif part == "fullname":
                key.append(row["fullname"])
            elif part == "fullfunc":
                key.append(row["fullname"].split("[")[0])
            elif part == "param":
                key.append(row.get("param"))
            elif part.startswith("param:"):
                pname = part[len("param:"):]
                key.append(f"{pname}={(row.get('params') or {}).get(pname)}")
            else:
                raise NotImplementedError(f"Unsupported grouping {group_by!r}.")
        name = " ".join(str(k) for k in key if k) or None
        groups.setdefault(name, []).append(row)
    order = "fullname" if "full" in group_by else "name"
    for members in groups.values():
        members.sort(key=operator.itemgetter(order))
    return sorted(groups.items(), key=lambda kv: kv[0] or "")


def time_unit(value):
    if value < 1e-6:
        return "n", 1e9
    if value < 1e-3:
        return "u", 1e6
    if value < 1:
        return "m", 1e3
    return "", 1.0


def scale_unit(config, unit, benchmarks, best, worst, sort):
    """The default ``pytest_benchmark_scale_unit``: ``--benchmark-time-unit``, else the
    unit of the best value of the sort column (of min for name sorts, and for the
    instruction count's, which is no time)."""
    fixed = config.getoption("benchmark_time_unit", None) if config else None
    fixed_units = {"ns": ("n", 1e9), "us": ("u", 1e6), "ms": ("m", 1e3), "s": ("", 1.0)}
    if fixed in fixed_units:
        return fixed_units[fixed]
    if unit == "seconds":
        key = sort if sort in TIME_STATS else "min"
        return time_unit(best.get(key, benchmarks[0][key]))
    if unit == "operations":
        ops = worst.get("ops", benchmarks[0]["ops"])
        if ops > 1e6:
            return "M", 1e-6
        if ops > 1e3:
            return "K", 1e-3
        return "", 1.0
    raise RuntimeError(f"Unexpected measurement unit {unit!r}")


def _short(bench):
    name = bench["name"]
    if bench.get("source"):
        name = f"{name} ({os.path.split(bench['source'])[-1][:4]})"
    return name[5:] if name.startswith("test_") else name


def _normal(bench):
    name = bench["name"]
    if bench.get("source"):
        parts = bench["source"].split("/")
        parts[-1] = parts[-1][:12]
        name = f"{name} ({'/'.join(parts)})"
    return name


def _long(bench):
    return f"{bench['fullname']} ({bench['source']})" if bench.get("source") else bench["fullname"]


def _trial(bench):
    return os.path.split(bench["source"])[-1][:4] if bench.get("source") else "????"


NAME_FORMATS = {"short": _short, "normal": _normal, "long": _long, "trial": _trial}


# ---- rendering -----------------------------------------------------------------------------

def _num(v):
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:,.4f}"


def _relative(best, value, width):
    if not width:
        return ""
    if value is None or best is None:
        return "".ljust(width)
    if value == best:
        return " (1.0)".ljust(width)
    scale = abs(value / best) if best else float("inf")
    if scale > 1000:
        return (" (inf)" if math.isinf(scale) else " (>1000.0)").ljust(width)
    return f" ({scale:.2f})".ljust(width)


def _cell(row, col, adj, ops_adj):
    if col in TIME_STATS:
        v = row.get(col)
        return _num(None if v is None else v * adj)
    if col == "ops":
        return _num(row["ops"] * ops_adj)
    if col == "ci":
        lo, hi = row.get("ci95_low"), row.get("ci95_high")
        return "-" if lo is None or hi is None else f"[{lo * adj:,.4f}, {hi * adj:,.4f}]"
    if col == "ram":
        ram = row.get("ram")
        return "-" if ram is None else (f"+{ram:.1f} MB" if ram >= 0.05 else "0.0 MB")
    if col == "verdict":
        return row.get("verdict") or ""
    if col == "instructions":
        v = row.get(col)
        return "-" if v is None else f"{v:,.0f}"
    v = row.get(col)
    return "-" if v is None else str(v)


def render(tr, groups, columns, sort, name_format, scale):
    """Write the tables of ``groups`` (``[(name, rows)]``) to the terminal reporter."""
    tr.write_line("")
    for group, rows in groups:
        rows = sorted(rows, key=lambda r: (r.get(sort) is None, r.get(sort) or 0)
                      if sort not in ("name", "fullname") else r[sort])
        for r in rows:
            r["display_name"] = name_format(r)
        solo = len(rows) == 1
        best, worst = {}, {}
        for col in SCALED:
            vals = [r[col] for r in rows if r.get(col) is not None]
            if vals:
                best[col] = (max if col == "ops" else min)(vals)
                worst[col] = (min if col == "ops" else max)(vals)
        unit, adj = scale(unit="seconds", benchmarks=rows, best=best, worst=worst, sort=sort)
        ops_unit, ops_adj = scale(unit="operations", benchmarks=rows, best=best, worst=worst,
                                  sort=sort)
        labels = dict(LABELS, name=f"Name (time in {unit}s)",
                      ops=f"OPS ({ops_unit}ops/s)" if ops_unit else "OPS")
        pad = 0 if solo else 10
        cells = [[_cell(r, c, adj, ops_adj) for c in columns] for r in rows]
        widths = [2 + max([len(labels[c])] + [len(cs[i]) for cs in cells])
                  for i, c in enumerate(columns)]
        name_w = 3 + max([len(labels["name"])] + [len(r["display_name"]) for r in rows])
        rpad = [pad if c in SCALED else 0 for c in columns]
        header = labels["name"].ljust(name_w) + "".join(
            labels[c].rjust(w) + " " * p for c, w, p in zip(columns, widths, rpad))
        title = f" benchmark{'' if group is None else ' ' + repr(group)}: {len(rows)} tests "
        tr.write_line(title.center(len(header), "-"), yellow=True)
        tr.write_line(header)
        tr.write_line("-" * len(header), yellow=True)
        for r, cs in zip(rows, cells):
            tr.write(r["display_name"].ljust(name_w), red=r.get("has_error"))
            line_cells = []
            for c, text, w, p in zip(columns, cs, widths, rpad):
                if c in SCALED and r.get(c) is not None:
                    rel = _relative(best.get(c), r.get(c), p)
                    line_cells.append((text.rjust(w) + rel,
                                       dict(bold=True,
                                            green=not solo and r.get(c) == best.get(c),
                                            red=not solo and r.get(c) == worst.get(c))))
                else:
                    line_cells.append((text.rjust(w) + " " * p, {}))
            for text, markup in line_cells:
                tr.write(text, **markup)
            tr.write("\n")
        tr.write_line("-" * len(header), yellow=True)
        tr.write_line("")
    tr.write_line("Legend:")
    tr.write_line("  Outliers: 1 Standard Deviation from Mean; 1.5 IQR (InterQuartile Range) "
                  "from 1st Quartile and 3rd Quartile.")
    tr.write_line("  OPS: Operations Per Second, computed as 1 / Mean")
    if "p99" in columns or "p90" in columns or "p95" in columns:
        tr.write_line("  P90/P95/P99: percentiles of the rounds (NumPy's linear rule).")
    if "ci" in columns:
        tr.write_line("  Median 95% CI: distribution-free interval of the median (order "
                      "statistics).")
    if "ram" in columns:
        tr.write_line("  Peak RAM: the process's peak RSS over the benchmark minus before it.")
    if "instructions" in columns:
        tr.write_line("  Instructions: per call, counted by valgrind's callgrind over the "
                      "counted rounds (warm-up excluded), the calling thread only.")


def _md_escape(text):
    text = " ".join(str(text).split())
    return re.sub(r"([\\`*_\[\]<>|$~#&])", r"\\\1", text)


def markdown(groups, columns, scale, sort, name_format, gate_line=None, failing=(), notes=()):
    """A GitHub job-summary friendly report: the same tables, the gate's outcome."""
    out = ["## Benchmarks", ""]
    if gate_line:
        out += [gate_line, ""]
    for group, rows in groups:
        rows = sorted(rows, key=lambda r: (r.get(sort) is None, r.get(sort) or 0)
                      if sort not in ("name", "fullname") else r[sort])
        best = {c: min(r[c] for r in rows if r.get(c) is not None)
                for c in TIME_STATS if any(r.get(c) is not None for r in rows)}
        worst = {}
        ops = [r["ops"] for r in rows if r.get("ops") is not None]
        if ops:
            best["ops"], worst["ops"] = max(ops), min(ops)
        unit, adj = scale(unit="seconds", benchmarks=rows, best=best, worst=worst, sort=sort)
        ops_unit, ops_adj = scale(unit="operations", benchmarks=rows, best=best, worst=worst,
                                  sort=sort)
        cols = list(columns) + (["verdict"] if any("verdict" in r for r in rows) else [])
        labels = dict(LABELS, ops=f"OPS ({ops_unit}ops/s)" if ops_unit else "OPS")
        if group:
            out += [f"### {_md_escape(group)}", ""]
        out.append(f"| Name (time in {unit}s) | "
                   + " | ".join(_md_escape(labels[c]) for c in cols) + " |")
        out.append("| :--- " + "| ---: " * len(cols) + "|")
        for r in rows:
            name = name_format(r).replace("`", "'").replace("|", "\\|")
            out.append(f"| `{name}` | "
                       + " | ".join(_md_escape(_cell(r, c, adj, ops_adj)) for c in cols) + " |")
        out.append("")
    if failing:
        out += ["### Regressions", ""]
        out += [f"- {_md_escape(line)}" for line in failing]
        out.append("")
    for n in notes:
        out.append(f"- {_md_escape(n)}")
    return "\n".join(out).rstrip() + "\n"


# ---- files ---------------------------------------------------------------------------------

def _slug(name):
    return re.sub(r"[\\/:*?<>| ]+", "_", name)


def write_histograms(prefix, groups, scale, sort):
    """One SVG box plot per group (pygal); returns the paths written."""
    import pygal

    _drop_pygal_import_hook()
    out = []
    for group, rows in groups:
        if not rows:
            continue
        rows = rows[:75]
        best = {c: min(r[c] for r in rows if r.get(c) is not None)
                for c in TIME_STATS if any(r.get(c) is not None for r in rows)}
        unit, adj = scale(unit="seconds", benchmarks=rows, best=best, worst=best, sort=sort)
        path = Path(f"{prefix}-{_slug(group)}.svg" if group else f"{prefix}.svg")
        title = f"Speed in {TIME_UNITS[unit]}" + (f" of {group}" if group else "")
        chart = pygal.Box(box_mode="tukey", title=title, x_label_rotation=-90,
                          show_legend=False, y_title="Duration")
        chart.x_labels = [r.get("display_name") or r["name"] for r in rows]
        for r in rows:
            data = r.get("data")
            if not data:
                data = [r[k] for k in ("min", "ld15iqr", "q1", "median", "q3", "hd15iqr", "max")
                        if r.get(k) is not None]
            chart.add(f"{r['fullname']} - {r['rounds']} rounds", [x * adj for x in data])
        path.parent.mkdir(parents=True, exist_ok=True)
        chart.render_to_file(str(path))
        out.append(path)
    return out


def _drop_pygal_import_hook():
    """pygal puts a finder without find_spec on sys.meta_path (for its map plugins),
    which makes every later failing import warn; the plots do not need it."""
    import sys

    sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "PluginImportFixer"]


CSV_COLUMNS = ("group", "name", "fullname", "param", "min", "max", "mean", "stddev", "median",
               "iqr", "outliers", "ops", "rounds", "iterations", "p90", "p95", "p99",
               "ci95_low", "ci95_high", "ram", "instructions")


def write_csv(prefix, groups):
    import csv

    path = Path(prefix if str(prefix).endswith(".csv") else f"{prefix}.csv")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(CSV_COLUMNS)
        for group, rows in groups:
            for r in rows:
                w.writerow([group if c == "group" else r.get(c) for c in CSV_COLUMNS])
    return path
