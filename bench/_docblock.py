"""The headline table of docs/performance.md, as `python bench/run_all.py` writes it.

`python bench/run_all.py --update-doc docs/performance.md` replaces what lies between the
two marker comments below with this run's figures: the command, the machine, the load
average before and after, the count of PASS / MISS / recorded and the table, then a
digest of that text on the closing marker.  Nobody writes the table by hand, so it cannot
disagree with what run_all.py printed; tests/test_docs_consistency.py recomputes the
digest and the counts (a hand edit of a figure, a verdict or the counts fails it).

Plain Python, no third-party import: the test suite reads it too.
"""
import hashlib
import re

BEGIN = "<!-- begin: the headline table, written by python bench/run_all.py --update-doc; do not edit by hand -->"
END_PREFIX = "<!-- end: the headline table; sha256 "
END_SUFFIX = " -->"

_BLOCK_RE = re.compile(re.escape(BEGIN) + r"\n(?P<body>.*?)\n" + re.escape(END_PREFIX)
                       + r"(?P<digest>[0-9a-f]{64})" + re.escape(END_SUFFIX), re.S)
_COUNTS_RE = re.compile(r"^Result: (\d+) PASS, (\d+) MISS, (\d+) recorded\.$", re.M)


def digest(body):
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def render(figs, *, command, seconds, machine, load_before, load_after, busy, busy_limit, quick=False):
    """The block's body (without the markers) for a list of Figure objects.  `busy`: the
    load beyond this run's own exceeded `busy_limit` per CPU (the preflight's rule)."""
    n_pass = sum(f.ok is True for f in figs)
    n_miss = sum(f.ok is False for f in figs)
    n_info = sum(f.ok is None for f in figs)
    load = (f"load average {load_before:.2f} before and {load_after:.2f} after, on "
            f"{machine['nproc']} CPUs")
    if busy:
        load += (": **a busy machine** (other jobs ran beside it). Every figure is a ratio or "
                 "a count measured side by side, which load moves less than absolute times, "
                 "but the timed ratios are noisier than on a quiet machine; the callgrind "
                 "counts do not depend on load")
    else:
        load += (f": not busy by the preflight's rule (other load at most {busy_limit:g} per "
                 "CPU)")
    lines = [
        f"Command: `{command}` ({seconds:.0f} s), {machine['date']}.",
        f"Machine: {machine['cpu']}, nproc {machine['nproc']}, Linux {machine['kernel']}, "
        f"Python {machine['python']}, NumPy {machine['numpy']}; tree {machine['commit']}.",
        f"Load: {load}.",
        f"Result: {n_pass} PASS, {n_miss} MISS, {n_info} recorded.",
    ]
    if quick:
        lines.append("Sizes: **quick** (the CI smoke sizes: fewer rounds and smaller n than a "
                     "full run, so the timed ratios are noisier); `python bench/run_all.py "
                     "--update-doc docs/performance.md` replaces it with a full run's.")
    lines += [
        "",
        "| bench | figure | measured | target | |",
        "| :--- | :--- | ---: | :--- | :--- |",
    ]
    lines += [f"| {f.bench} | {f.what} | {f.value} | {f.target} | {f.verdict} |" for f in figs]
    return "\n".join(lines)


def block(body):
    return f"{BEGIN}\n{body}\n{END_PREFIX}{digest(body)}{END_SUFFIX}"


def replace_in(text, body):
    """`text` with its block replaced by one holding `body`; ValueError without markers."""
    m = _BLOCK_RE.search(text)
    if m is None:
        if BEGIN not in text:
            raise ValueError("no headline-table markers in the file (add the two lines "
                             f"{BEGIN!r} and {END_PREFIX}...{END_SUFFIX!r} where it goes)")
        raise ValueError("the headline-table markers are damaged (an end marker with a "
                         "64-digit sha256 must follow the begin marker)")
    return text[:m.start()] + block(body) + text[m.end():]


def find(text):
    """(body, stated digest) of the block in `text`, or None."""
    m = _BLOCK_RE.search(text)
    return None if m is None else (m.group("body"), m.group("digest"))


def counts(body):
    """(PASS, MISS, recorded) as the Result line states them, and as the table's last
    column counts them."""
    m = _COUNTS_RE.search(body)
    stated = tuple(int(x) for x in m.groups()) if m else None
    verdicts = [row.rstrip().rstrip("|").rsplit("|", 1)[-1].strip()
                for row in body.splitlines() if row.startswith("| ") and not row.startswith("| bench ")]
    counted = (verdicts.count("PASS"), verdicts.count("MISS"), verdicts.count("INFO"))
    return stated, counted
