"""Docs that stay true: every default, threshold and headline figure the docs state is the
code's (issue 26).

A reader copies "15% assumed" or "over 256 page faults" from the docs into a paper or a CI
config; when the code moves and the page does not, the page misleads.  So:

* docs/design.md's "Defaults and thresholds" table names, for every default and threshold,
  the code's own value (a `_native` constant exported from the C macro, a Python constant,
  or a signature's default) -- each row is compared with it, and every constant
  csrc/constants.c exports must have a row;
* the option tables of docs/guide.md are compared with the CLI's and the pytest plugin's
  parsers (every option listed, every stated default the parser's), the signatures in
  docs/api.md with `inspect.signature`, the warning causes of docs/statistics.md with the
  thresholds;
* the numbers the docs (and the package's help texts and docstrings) state in running text
  for these defaults are found by pattern and compared (`PROSE` below);
* docs/performance.md's headline table is what `python bench/run_all.py --update-doc`
  wrote: its digest and its counts are checked;
* the docs are self-contained: no reference to a file outside the repository, and every
  relative link (and #anchor) resolves.

When one of these fails, the message names the page and the value the code has: fix the
page (or, if the code is what is wrong, the code).
"""
import argparse
import ast
import importlib
import inspect
import math
import re
import sys
import warnings
from pathlib import Path

import pytest

import spatialhub.utils.profiling as pkg
from spatialhub.utils.profiling import _native, cli
from spatialhub.utils.profiling.pytest_plugin import gate, options

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md")) + [ROOT / "README.md"]


def read(name):
    return (ROOT / name).read_text(encoding="utf-8")


# ---- Markdown helpers ------------------------------------------------------------------------

def cells(row):
    """The cells of a table row; `\\|` is a pipe inside a cell."""
    parts = re.split(r"(?<!\\)\|", row.strip())
    return [c.strip().replace("\\|", "|") for c in parts[1:-1]]


def tables(text):
    """Every pipe table of `text`: (header cells, [row cells], line number of the header)."""
    lines = text.splitlines()
    out, i = [], 0
    while i < len(lines) - 1:
        if lines[i].startswith("|") and re.match(r"^\|\s*:?-{3}", lines[i + 1]):
            head, rows, j = cells(lines[i]), [], i + 2
            while j < len(lines) and lines[j].startswith("|"):
                rows.append(cells(lines[j]))
                j += 1
            out.append((head, rows, i + 1))
            i = j
        else:
            i += 1
    return out


def _unfenced(text):
    """`text` with the lines inside ``` fences blanked (same length): a `# ...` line in a
    code block -- a shell comment, a program's output (docs/run_snippets.py writes them)
    -- is not a heading."""
    out, fence = [], None
    for line in text.split("\n"):
        m = re.match(r"^(`{3,})", line)
        if fence is None and m:
            fence = m.group(1)
        elif fence is not None and line.rstrip() == fence:
            fence = None
        elif fence is not None:
            line = " " * len(line)
        out.append(line)
    return "\n".join(out)


def section(text, heading):
    """The text under `heading` (a full heading line) up to the next heading of its level
    or above (outside code blocks)."""
    level = len(heading) - len(heading.lstrip("#"))
    start = _unfenced(text).index(heading + "\n")
    rest = text[start + len(heading) + 1:]
    m = re.search(r"^#{1,%d} " % level, _unfenced(rest), flags=re.M)
    return rest[:m.start()] if m else rest


def table_after(text, heading, first_header_cell):
    for head, rows, _ in tables(section(text, heading)):
        if head and head[0] == first_header_cell:
            return rows
    raise AssertionError(f"no table headed {first_header_cell!r} under {heading!r}")


NUMBER = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)(?![\w.]*\w)")


def numbers(text):
    """The numbers written in `text` (1,000 is one number), as floats."""
    return [float(n.replace(",", "")) for n in NUMBER.findall(text)]


# ---- what the code says ----------------------------------------------------------------------

def code_value(ref):
    """The value a design.md `code` cell names: `_native.NAME`, `func(param=)` (that
    signature default) or `module.sub.NAME` under spatialhub.utils.profiling."""
    ref = ref.strip("`")
    m = re.fullmatch(r"(\w+)\((\w+)=\)", ref)
    if m:
        fn = getattr(pkg, m.group(1))
        return inspect.signature(fn).parameters[m.group(2)].default
    mod, _, name = ref.rpartition(".")
    module = _native if mod == "_native" else importlib.import_module(f"{pkg.__name__}.{mod}")
    return getattr(module, name)


def doc_value(text):
    """'15%' -> 0.15, '30 s' -> 30, '1,000 ns' -> 1000, '32 MiB' -> 33554432, '10,000,000' -> 1e7."""
    t = text.strip().replace(",", "")
    scale = 1.0
    if t.endswith("%"):
        t, scale = t[:-1], 0.01
    elif t.endswith(" MiB"):
        t, scale = t[:-4], 2.0 ** 20
    elif t.endswith(" s"):
        t = t[:-2]
    elif t.endswith(" ns"):
        t = t[:-3]
    return float(t) * scale


def same(a, b):
    return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=1e-12)


def pct(fraction):
    return round(100 * fraction, 6)


# ---- design.md: the table of defaults and thresholds -----------------------------------------

def design_rows():
    return table_after(read("docs/design.md"), "## Defaults and thresholds", "what")


@pytest.mark.parametrize("row", design_rows(), ids=lambda r: r[0][:60])
def test_each_documented_default_is_the_codes(row):
    what, value, code = row[0], row[1], row[2]
    actual = code_value(code)
    assert same(doc_value(value), actual), (
        f"docs/design.md, Defaults and thresholds: {what!r} reads {value}, but {code} is "
        f"{actual!r} in the code")


def test_every_exported_constant_has_a_row_in_design_md():
    exported = set(re.findall(r'\{"([A-Z_]+)", ', read("csrc/constants.c")))
    assert len(exported) >= 25, "csrc/constants.c's tables were not read"
    for name in exported:
        assert hasattr(_native, name), f"_native.{name} is not exported"
    documented = {c.strip("`").split(".", 1)[1] for _, _, c, *_ in design_rows()
                  if c.startswith("`_native.")}
    assert exported <= documented, (
        "constants exported by csrc/constants.c without a row in docs/design.md's "
        f"Defaults and thresholds: {sorted(exported - documented)}")


def test_every_margin_default_is_the_default_margin():
    for fn in (pkg.compare_benchmarks, pkg.compare_callables, pkg.compare_repeated,
               pkg.format_benchmark_table):
        assert same(inspect.signature(fn).parameters["margin"].default, _native.DEFAULT_MARGIN), fn


# ---- guide.md: the command line's tables -----------------------------------------------------

GUIDE = "docs/guide.md"
CLI_HEADING = "## Command line: `spatialhub-bench`"


def cli_parser_options():
    p = cli.build_parser()
    return {o: a for a in p._actions for o in a.option_strings if o.startswith("--") and o != "--help"}


def first_option(cell):
    return re.match(r"`(--[a-z-]+)", cell).group(1)


def test_the_guide_lists_every_command_line_option():
    text = section(read(GUIDE), CLI_HEADING)
    listed = {first_option(r[0]) for r in table_after(text, "### Modes (at most one)", "Mode")
              if r[0].startswith("`--")}
    listed |= {first_option(r[0]) for r in table_after(text, "### Options", "Option")}
    parser = set(cli_parser_options())
    assert listed == parser, (f"docs/guide.md's command-line tables and the parser differ: "
                              f"not in the guide {sorted(parser - listed)}, not in the parser "
                              f"{sorted(listed - parser)}")


def test_the_command_line_defaults_in_the_guide_are_the_codes():
    opts = cli_parser_options()
    # options whose default the code applies after parsing: the numbers the guide may state
    applied = {
        "--warmup": {cli.DEMO_WARMUP, cli.WARMUP},
        "--iters": {cli.ITERS, cli.TORCH_ITERS},
        "--margin": {pct(_native.DEFAULT_MARGIN)},
        "--run-spread": {cli.SAVED_PROCESSES},
        "--input-dim": {1},
        "--instructions-runs": {pkg.instructions.RUNS},
        "--duration": {cli.LOAD_DURATION},
        "--workers": {inspect.signature(pkg.benchmark_load).parameters["workers"].default},
        "--percentile": {cli.FIND_PEAK_PERCENTILE},
        "--max-time": {inspect.signature(pkg.find_peak_qps).parameters["max_time_s"].default},
    }
    strings = {"--providers": "CPU", "--cache": "warm", "--device": "CPU", "--arrival": "poisson"}
    text = section(read(GUIDE), CLI_HEADING)
    for row in table_after(text, "### Options", "Option"):
        opt, default = first_option(row[0]), row[1]
        action = opts[opt]
        if opt in applied:
            assert set(numbers(default)) == {float(v) for v in applied[opt]}, (
                f"docs/guide.md, {opt}: the default reads {default!r}; the code applies "
                f"{sorted(applied[opt])}")
        elif isinstance(action.default, str) and action.default != argparse.SUPPRESS:
            assert default.startswith(f"`{action.default}`"), (
                f"docs/guide.md, {opt}: the default reads {default!r}; the parser's is "
                f"{action.default!r}")
        elif opt in strings:
            assert default.startswith(f"`{strings[opt]}`"), (opt, default)
        else:
            assert not numbers(default), (
                f"docs/guide.md, {opt}: the default cell states {default!r}, but the parser "
                f"has none ({action.default!r})")
    calibrate = [r for r in table_after(text, "### Modes (at most one)", "Mode")
                 if r[0].startswith("`--calibrate")][0]
    m = re.search(r"default (\d+)", calibrate[1])
    assert m and int(m.group(1)) == opts["--calibrate"].const == pkg.calibrate.DEFAULT_PROCESSES


def test_the_command_line_help_states_the_codes_defaults():
    help_text = " ".join(cli.build_parser().format_help().split())
    assert f"assumed {100 * _native.ASSUMED_RUN_SPREAD:g}%" in help_text
    assert f"default {100 * _native.DEFAULT_MARGIN:g}, or PCT" in help_text
    assert f"default {cli.DEMO_WARMUP} for the demo, else {cli.WARMUP}" in help_text
    assert f"default {cli.ITERS}; {cli.TORCH_ITERS} for a torch module" in help_text
    assert f"default {pkg.calibrate.DEFAULT_PROCESSES})" in help_text


# ---- guide.md: the pytest plugin's options ---------------------------------------------------

PYTEST_HEADING = "## Benchmarks in your test suite (pytest plugin)"


def plugin_options():
    from _pytest.config.argparsing import Parser

    with warnings.catch_warnings():      # a private class: its deprecation notice is noise
        warnings.simplefilter("ignore", pytest.PytestDeprecationWarning)
        parser = Parser()
    options.add_options(parser)
    return {n: o for o in parser.getgroup("benchmark").options for n in o.names()
            if n.startswith("--")}


def plugin_table():
    text = section(read(GUIDE), PYTEST_HEADING)
    rows = table_after(text, "### Options", "Option")
    out = []
    for row in rows:
        names, base = [], None
        for tok in re.findall(r"`(--?[a-z-]+)", row[0]):
            if tok.startswith("--"):
                base = tok
                names.append(tok)
            else:                     # `-loops` after `--benchmark-cprofile=COL`
                names.append(base + tok)
        out.append((names, row[1]))
    return out


def test_the_guide_lists_every_pytest_option():
    listed = {n for names, _ in plugin_table() for n in names}
    # the options named in the Meaning column of a row (--benchmark-save-data, -netrc, ...)
    text = section(read(GUIDE), PYTEST_HEADING)
    mentioned = set(re.findall(r"`(--benchmark-[a-z-]+)", section(text, "### Options")))
    ours = set(plugin_options())
    assert listed <= ours, f"in the guide, not in the plugin: {sorted(listed - ours)}"
    assert ours <= listed | mentioned, (
        f"plugin options the guide's table does not name: {sorted(ours - listed - mentioned)}")


def plugin_default_text(name, default):
    special = {
        "--benchmark-precision": "off",
        "--benchmark-time-unit": "auto",
        "--benchmark-columns": ", ".join(options.DEFAULT_COLUMNS),
    }
    if name in special:
        return special[name]
    if default in (None, False, [], ""):
        return ""
    return str(default)


def test_the_pytest_option_defaults_in_the_guide_are_the_plugins():
    opts = plugin_options()
    for names, cell in plugin_table():
        stated = [c.strip().strip("`") for c in cell.split(" / ")] if cell else [""]
        stated = ["" if t == "-" else t for t in stated]          # "-": no default
        if names == ["--benchmark-run-spread"]:
            assert set(numbers(cell)) == {gate.MIN_SPREAD_RUNS}, cell
            continue
        if names == ["--benchmark-instructions-runs"]:    # None: applied when counting
            assert opts[names[0]].attrs().get("default") is None
            assert set(numbers(cell)) == {pkg.instructions.RUNS}, cell
            continue
        if names == ["--benchmark-processes"]:   # None: applied when saving or comparing
            from spatialhub.utils.profiling.pytest_plugin import spread
            assert opts[names[0]].attrs().get("default") is None
            assert set(numbers(cell)) == {spread.PROCESSES}, cell
            continue
        if len(stated) == 1 and len(names) > 1:
            stated = stated * len(names)      # one default for the row: flags without one
        for name, text in zip(names, stated):
            want = plugin_default_text(name, opts[name].attrs().get("default"))
            assert text == want, (f"docs/guide.md, pytest option {name}: the default reads "
                                  f"{text!r}; the plugin's is {want!r}")


def test_the_pytest_help_states_the_gates_defaults():
    help_text = " ".join(plugin_options()["--benchmark-run-spread"].attrs()["help"].split())
    assert f"the last {gate.HISTORY_RUNS} saved runs" in help_text
    assert f"there are {gate.MIN_SPREAD_RUNS} or more" in help_text
    assert "--benchmark-processes" in help_text and "not judged" in help_text
    assert f"the {100 * _native.ASSUMED_RUN_SPREAD:g}%% a single run" in help_text


# ---- api.md: signatures and the parameter table ----------------------------------------------

def api_signatures():
    """(name, ast.arguments, where) for each `name(...)` written in api.md's ```python
    blocks (one statement per call, `-> type` dropped) and in its `### \\`name(...)\\``
    headings."""
    text = read("docs/api.md")
    found = []
    for block in re.findall(r"```python\n(.*?)```", text, flags=re.S):
        for stmt in re.findall(r"^([A-Za-z_]\w*\(.*?\))(?:\s*->[^\n]*)?$", block, flags=re.S | re.M):
            found.append((stmt, "a python block"))
    for head in re.findall(r"^### `([A-Za-z_]\w*\(.*\))`$", text, flags=re.M):
        found.append((head, "a heading"))
    out = []
    for stmt, where in found:
        name = stmt.split("(", 1)[0]
        if not hasattr(pkg, name) or not callable(getattr(pkg, name)):
            continue
        try:
            fn = ast.parse(f"def {stmt}: pass").body[0]
        except SyntaxError:
            continue                  # an example call, not a signature
        out.append((name, fn.args, where))
    return out


def test_api_md_shows_the_signatures():
    sigs = api_signatures()
    assert {n for n, _, _ in sigs} >= {"benchmark_callable", "format_benchmark_table",
                                       "compare_benchmarks", "compare_callables",
                                       "benchmark_repeated", "compare_repeated",
                                       "calibrate_run_spread"}
    for name, args, where in sigs:
        try:
            real = inspect.signature(getattr(pkg, name)).parameters
        except ValueError:        # a C type without a text signature: its methods are below
            continue
        doc = {}
        pos = args.posonlyargs + args.args
        for a, d in zip(pos[len(pos) - len(args.defaults):], args.defaults):
            doc[a.arg] = ast.literal_eval(d)
        for a, d in zip(args.kwonlyargs, args.kw_defaults):
            if d is not None:
                doc[a.arg] = ast.literal_eval(d)
        named = {a.arg for a in pos + args.kwonlyargs}
        assert named <= set(real), (f"docs/api.md ({where}) shows {name}() with "
                                    f"{sorted(named - set(real))}, which it does not take")
        for p, v in doc.items():
            assert real[p].default == v, (f"docs/api.md ({where}): {name}({p}={v!r}), but the "
                                          f"code's default is {real[p].default!r}")
        documented_defaults = {p for p, q in real.items() if q.default is not q.empty}
        missing = (documented_defaults & named) - set(doc)
        assert not missing, f"docs/api.md ({where}): {name}() shows {sorted(missing)} without defaults"


def test_the_benchmark_callable_table_in_api_md_has_the_signatures_defaults():
    rows = table_after(read("docs/api.md"), "## `benchmark_callable`", "parameter")
    real = inspect.signature(pkg.benchmark_callable).parameters
    seen = 0
    for row in rows:
        name = row[0].strip("`")
        if name not in real:
            continue
        seen += 1
        default = real[name].default
        cell = row[2]
        if default is inspect.Parameter.empty:
            assert cell == "required", (name, cell)
            continue
        first = re.match(r'`?("?[^`"\s(]*"?)`?', cell).group(1).strip('"')
        assert first == str(default), (f"docs/api.md, benchmark_callable's {name}: the default "
                                       f"reads {cell!r}, the signature's is {default!r}")
    assert seen >= 14


# ---- statistics.md: the warning causes -------------------------------------------------------

def test_the_warning_causes_in_statistics_md_state_the_thresholds():
    n = _native
    want = {
        "NoisyWarning": {pct(n.NOISY_IQR), n.NOISY_P95},
        "MultimodalWarning": set(),
        "DriftingWarning": {pct(n.DRIFT), n.DRIFT_T},
        "BusyMachineWarning": {pct(n.BUSY_CPU_SHARE)},
        "LaunchBoundWarning": {n.LAUNCH_BOUND_HOST_SHARE},
        "OverheadWarning": {n.OVERHEAD_FACTOR},
        "PageFaultWarning": {n.PAGE_FAULTS_WARN},
        "WarmupWarning": set(),
        "CoarseTimerWarning": {n.COARSE_TIMER_FACTOR},
        "GPUClockWarning": {pct(n.GPU_CLOCK_MOVE)},
    }
    rows = table_after(read("docs/statistics.md"), "### The causes", "class")
    by_class = {r[0].strip("`"): r for r in rows}
    for cls, values in want.items():
        when = by_class[cls][2]
        assert set(numbers(when)) == {float(v) for v in values}, (
            f"docs/statistics.md, {cls}: 'when' reads {when!r}; the code's thresholds are "
            f"{sorted(values)}")


# ---- numbers stated in running text ------------------------------------------------------------

def _prose():
    n = _native
    spread, busy, margin = pct(n.ASSUMED_RUN_SPREAD), pct(n.ASSUMED_BUSY_RUN_SPREAD), pct(n.DEFAULT_MARGIN)
    # (what, pattern with one group: the number, the code's value, the least matches)
    return [
        ("the assumed single-run spread", r"(\d+)%%? assumed\b", spread, 4),
        ("the assumed single-run spread", r"\bassumed (?:run-to-run spread of |spread of |single-run spread of )?\**(\d+)%%?", spread, 6),
        ("the assumed single-run spread", r"\ban assumed\s+\**(\d+)%", spread, 2),
        ("the assumed single-run spread", r"`SHP_ASSUMED_RUN_SPREAD` = (0\.\d+)", n.ASSUMED_RUN_SPREAD, 1),
        ("the assumed single-run spread", r"\bat least (\d+)%(?: for a single run|\.\\n)", spread, 1),
        ("the assumed single-run spread", r"'assumed' \((\d+)%\)", spread, 1),
        ("the busy floor of the rerun interval", r"'assumed busy' \((\d+)%", busy, 1),
        ("the busy floor of the rerun interval", r"(\d+)% when the run start(?:ed|s) on a busy machine", busy, 2),
        ("the busy floor of the rerun interval", r"allows? (?:at least )?(?:the )?(\d+)% between runs", busy, 2),
        ("the default margin", r"margin\S* \(default \**(\d+)%", margin, 1),
        ("the default margin", r"\*\*(0\.\d+)\*\*, a practical-equivalence margin", n.DEFAULT_MARGIN, 1),
        ("the default margin", r"(\d+)% is the default practical-equivalence margin", margin, 1),
        ("the page-fault warning", r"(?:over|above) (\d+) page faults", n.PAGE_FAULTS_WARN, 2),
        ("the overhead warning", r"under (\d+)(?:x|×) (?:this floor|`overhead_ms`|the harness's overhead)", n.OVERHEAD_FACTOR, 3),
        ("the launch-bound warning", r"`host_share`\)? (?:over|above|>) (0\.\d+)", n.LAUNCH_BOUND_HOST_SHARE, 2),
        ("the busy-machine share", r"(?:over|above) (\d+)% of all CPU time", pct(n.BUSY_CPU_SHARE), 1),
        ("the busy-machine share", r"share (?:is )?over (\d+)%", pct(n.BUSY_CPU_SHARE), 1),
        ("the busy-machine share", r"before the run, over (\d+)%", pct(n.BUSY_CPU_SHARE), 1),
        ("the adaptive minimum", r"never judged on fewer than (\d+) samples", n.ADAPTIVE_MIN_SAMPLES, 2),
        ("the adaptive time budget", r"`max_time_s` \(default (\d+) s\)", n.ADAPTIVE_DEFAULT_TIME_S, 2),
        ("the adaptive maximum", r"(?:\bor|\bat) (\d{1,3}(?:[, ]\d{3}){2,}|10 million) samples", n.ADAPTIVE_MAX_SAMPLES, 3),
        ("the settle tolerance", r"within (\d+)% \(`SHP_SETTLE_TOL`\)", pct(n.SETTLE_TOL), 1),
        ("the warm-up warning", r"more than (\d+)% \(`SHP_SETTLE_WARN`\)", pct(n.SETTLE_WARN), 1),
        ("the GPU clock warning", r"more than (\d+)% \(`SHP_NVML_CLOCK_MOVE`\)", pct(n.GPU_CLOCK_MOVE), 1),
        ("the gate's spread floor", r"never taken below (\d+)%", pct(gate.MIN_MEASURED_SPREAD), 1),
        ("the gate's saved runs", r"With (\d+) or more saved runs", gate.MIN_SPREAD_RUNS, 1),
        ("the gate's saved runs", r"Under (\d+) saved runs", gate.MIN_SPREAD_RUNS, 1),
        ("the gate's history", r"from the last (\d+) of them", gate.HISTORY_RUNS, 1),
        ("a calibration's processes", r"N fresh interpreters per workload, default (\d+)", pkg.calibrate.DEFAULT_PROCESSES, 1),
        ("a calibration's processes", r"\(default (\d+)\) per workload", pkg.calibrate.DEFAULT_PROCESSES, 1),
        ("a calibration's processes", r"--calibrate` \((\d+) fresh interpreters per workload", pkg.calibrate.DEFAULT_PROCESSES, 1),
        ("the assumed LLC", r"else (\d+) MiB is assumed", n.LLC_ASSUMED_BYTES / 2 ** 20, 1),
        ("the shared RSS read", r"at most ([\d,]+) ns \(`SHP_RSS_SHARE_NS`\)", n.RSS_SHARE_NS, 1),
    ]


def prose_files():
    # the pages, and the help texts: the package's docstrings and the C's (help(_native.x))
    files = PAGES + sorted((ROOT / "src").rglob("*.py")) + sorted(ROOT.glob("csrc/**/*.c"))
    return [(f, f.read_text(encoding="utf-8")) for f in files]


@pytest.mark.parametrize("what,pattern,value,least", _prose(), ids=lambda x: x if isinstance(x, str) else "")
def test_numbers_stated_in_the_text_are_the_codes(what, pattern, value, least):
    hits, wrong = 0, []
    for path, text in prose_files():
        flat = re.sub(r"\s+", " ", text)
        for m in re.finditer(pattern, flat):
            hits += 1
            raw = m.group(1)
            stated = 1e7 if raw == "10 million" else float(raw.replace(",", "").replace(" ", ""))
            if not same(stated, value):
                wrong.append(f"{path.relative_to(ROOT)}: ...{m.group(0)}...")
    assert not wrong, f"{what}: the code's value is {value:g}, but " + "; ".join(wrong)
    assert hits >= least, (f"{what}: the pattern {pattern!r} matched {hits} times, expected "
                           f"at least {least}: a page was reworded, update the pattern")


# ---- performance.md: the headline table ------------------------------------------------------

def docblock():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import _docblock
    finally:
        sys.path.remove(str(ROOT / "bench"))
    return _docblock


def test_the_headline_table_is_what_run_all_wrote():
    db = docblock()
    text = read("docs/performance.md")
    found = db.find(text)
    assert found, "docs/performance.md has no headline block (python bench/run_all.py --update-doc)"
    body, stated_digest = found
    assert db.digest(body) == stated_digest, (
        "docs/performance.md's headline table was edited by hand: rerun "
        "`python bench/run_all.py --update-doc docs/performance.md`")
    stated, counted = db.counts(body)
    assert stated == counted, f"the block's Result line says {stated}, its table {counted}"
    command = re.search(r"^Command: `python bench/run_all\.py( --quick)?` \(\d+ s\)", body,
                        flags=re.M)
    assert command, body[:200]
    if command.group(1):
        assert re.search(r"^Sizes: \*\*quick\*\*", body, flags=re.M), "a quick run must say so"
    for bench in ("bias", "memory", "summary", "callgrind"):       # more may come: fine
        assert re.search(rf"^\| (\d+ )?{bench} \|", body, flags=re.M), \
            f"the headline table has no {bench} row"
    assert re.search(r"^Machine: .*; tree commit [0-9a-f]{7,}", body, flags=re.M), \
        "the tree the figures were measured on"
    assert re.search(r"^Load: load average \d", body, flags=re.M), "the load it was taken under"


def test_no_page_restates_the_headline_counts():
    for path in PAGES:
        text = path.read_text(encoding="utf-8")
        if path.name == "performance.md":
            body = docblock().find(text)[0]
            text = text.replace(body, "")
        flat = re.sub(r"\s+", " ", text)
        for pattern in (r"\d+ PASS, \d+ MISS", r"[Ee]very target holds"):
            assert not re.search(pattern, flat), (
                f"{path.name} states the headline result in text ({pattern}); it belongs to the "
                "block run_all.py writes")


def bench_constant(script, name):
    tree = ast.parse((ROOT / "bench" / script).read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == name:
            return ast.literal_eval(node.value)
    raise AssertionError(f"no {name} in bench/{script}")


@pytest.mark.parametrize("script,name,pattern", [
    ("bench_cache.py", "TARGET", r"Target: >= (\d+(?:\.\d+)?)x"),
    ("bench_scope.py", "TARGET", r"issue 12's target of (0\.\d+)×"),
    ("bench_callgrind.py", "RECORDED_IR_PER_ITER", r"`RECORDED_IR_PER_ITER` is now (\d+)"),
    ("bench_bias.py", "TARGET", r"ours / pure-Python at most (0\.\d+)"),
])
def test_targets_stated_in_performance_md_are_the_scripts(script, name, pattern):
    value = bench_constant(script, name)
    flat = re.sub(r"\s+", " ", read("docs/performance.md"))
    found = re.findall(pattern, flat)
    assert found, f"performance.md no longer states {name} of bench/{script} as {pattern!r}"
    for x in found:
        assert same(float(x), value), f"performance.md states {x} for bench/{script}'s {name} = {value}"


# ---- self-contained docs -----------------------------------------------------------------------

OUTSIDE = ("DESIGN.md", "STYLE.md", "ANCHORS.md", "/work/", "seeds/")


def test_the_docs_name_no_file_outside_the_repository():
    for path in PAGES + sorted(ROOT.glob("csrc/**/*.[ch]")):
        text = path.read_text(encoding="utf-8")
        for word in OUTSIDE:
            assert word not in text, f"{path.relative_to(ROOT)} refers to {word!r}, which is not in the repository"


def slug(heading):
    """GitHub's anchor of a heading."""
    h = re.sub(r"[`*]", "", heading.strip().lower())
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def anchors(path):
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return {slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, flags=re.M)}


def test_every_relative_link_resolves():
    checked = 0
    for path in PAGES:
        text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            dest = (path.parent / file).resolve() if file else path
            assert dest.exists(), f"{path.relative_to(ROOT)}: the link {target!r} leads nowhere"
            if anchor and dest.suffix == ".md":
                assert anchor in anchors(dest), (
                    f"{path.relative_to(ROOT)}: the link {target!r}: no such heading in {dest.name}")
            checked += 1
    assert checked >= 60
