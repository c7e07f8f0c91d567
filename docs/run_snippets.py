"""Run every example of README.md and docs/guide.md as a reader would, and write what it
printed under it (issue 33, item 6: docs that run).

    python docs/run_snippets.py --update     # run them all, write the outputs (one command)
    python docs/run_snippets.py              # run them all, say what failed; write nothing
    python docs/run_snippets.py --list       # the snippets and where they are
    python docs/run_snippets.py --only guide.md:3 --update    # one snippet (README.md:1 ...)

A *snippet* is every ```python block of the two pages, and a command that a page shows
the output of.  Each runs alone, in a new empty folder, with this interpreter: a python
block saved as ``snippet.py`` (or the file its directive names) and run as ``python
snippet.py`` (or the directive's command).  A directive is an HTML comment on the line
right above the block (or, for a command without a block, on its own line):

    <!-- snippet: file=test_example.py; run=python -m pytest -q test_example.py; stderr -->

``file=`` the file name the block is saved as; ``run=`` the command (``python`` is this
interpreter, ``spatialhub-bench`` is ``python -m spatialhub.utils.profiling``); ``stderr``
shows what it wrote to stderr too, in a block of its own (only where the page discusses
the warnings: elsewhere they are left out, and a busy machine's warnings do not clutter
every example).

Under each snippet, between two marker comments, ``--update`` writes a ```text block
whose first lines say when, on which machine and with which command it was written, then
what the snippet printed.  The closing marker holds the sha256 of the snippet (its code,
file and command) and of what lies between the markers: tests/test_guide_snippets.py
checks both, so editing an example without running this again, or editing an output by
hand, fails; and it runs every snippet, which must exit 0 within SNIPPET_TIMEOUT_S.  The
numbers vary from run to run; the test does not compare them.  A snippet that fails
writes nothing: the script says which and exits 1.

Plain Python, no third-party import: the test suite loads this file.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("README.md", "docs/guide.md")
SNIPPET_TIMEOUT_S = 180          # each snippet, as pasted, on a CPU-only machine
COMMAND = "python docs/run_snippets.py --update"

DIRECTIVE = re.compile(r"^<!-- snippet: (?P<opts>.*?) -->$")
BEGIN = ("<!-- output of the snippet above: written by `python docs/run_snippets.py "
         "--update`; do not edit by hand -->")
END = re.compile(r"^<!-- end of output; snippet sha256 (?P<code>[0-9a-f]{64}), "
                 r"output sha256 (?P<body>[0-9a-f]{64}) -->$")
FENCE = re.compile(r"^(?P<ticks>`{3,})(?P<lang>[\w+-]*)\s*$")


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class Snippet:
    page: str                    # "docs/guide.md"
    number: int                  # 1-based, per page
    line: int                    # 1-based line of its fence (or directive)
    code: str | None             # the block's text; None for a bare command
    file: str = "snippet.py"
    run: str | None = None       # None: python <file>
    stderr: bool = False
    directive: str = ""
    after: int = 0               # 0-based index of the line after the block (or directive)
    output: tuple[int, int] | None = None   # [begin, end] line indices of the markers
    stored_code: str | None = None
    stored_body: str | None = None
    body: str | None = None      # the lines between the markers, joined

    @property
    def id(self) -> str:
        return f"{Path(self.page).name}:{self.number}"

    @property
    def command(self) -> str:
        return self.run or f"python {self.file}"

    @property
    def key(self) -> str:
        """What the snippet digest covers: the code, the file it is saved as, the command."""
        return f"{self.code or ''}\0{self.file}\0{self.command}\0{int(self.stderr)}"

    def argv(self) -> list[str]:
        words = shlex.split(self.command)
        if words[0] == "python":
            return [sys.executable] + words[1:]
        if words[0] == "spatialhub-bench":
            return [sys.executable, "-m", "spatialhub.utils.profiling"] + words[1:]
        return words


def _options(text: str, where: str) -> dict[str, str | bool]:
    opts: dict[str, str | bool] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        key, eq, value = part.partition("=")
        key = key.strip()
        if key not in ("file", "run", "stderr") or (key == "stderr") == bool(eq):
            raise ValueError(f"{where}: snippet directive {part!r} is not file=NAME, "
                             f"run=COMMAND or stderr")
        opts[key] = value.strip() if eq else True
    return opts


def parse(page: str, text: str) -> list[Snippet]:
    """The snippets of a page, in order, with their stored outputs."""
    lines = text.split("\n")
    found: list[Snippet] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        d = DIRECTIVE.match(lines[i])
        if m:
            ticks, lang, start = m.group("ticks"), m.group("lang"), i
            j = i + 1
            while j < len(lines) and lines[j].rstrip() != ticks:
                j += 1
            if j == len(lines):
                raise ValueError(f"{page}:{start + 1}: a code fence that never closes")
            if lang == "python":
                prev = DIRECTIVE.match(lines[start - 1]) if start > 0 else None
                opts = _options(prev.group("opts"), f"{page}:{start}") if prev else {}
                found.append(Snippet(page, len(found) + 1, start + 1,
                                     "\n".join(lines[start + 1:j]) + "\n",
                                     file=str(opts.get("file", "snippet.py")),
                                     run=opts.get("run") or None,  # type: ignore[arg-type]
                                     stderr=bool(opts.get("stderr")),
                                     directive=prev.group("opts") if prev else "",
                                     after=j + 1))
            i = j + 1
            continue
        if d and not (i + 1 < len(lines) and FENCE.match(lines[i + 1])):
            opts = _options(d.group("opts"), f"{page}:{i + 1}")
            if "run" not in opts:
                raise ValueError(f"{page}:{i + 1}: a snippet directive without a code block "
                                 f"below it needs run=COMMAND")
            found.append(Snippet(page, len(found) + 1, i + 1, None,
                                 run=str(opts["run"]), stderr=bool(opts.get("stderr")),
                                 directive=d.group("opts"), after=i + 1))
        i += 1
    for s in found:
        k = s.after
        while k < len(lines) and not lines[k].strip() and s.code is not None:
            k += 1          # a blank line between a block and its output
        if k < len(lines) and lines[k] == BEGIN:
            e = k + 1
            while e < len(lines) and not END.match(lines[e]) and lines[e] != BEGIN:
                e += 1
            m = END.match(lines[e]) if e < len(lines) else None
            if m is None:
                raise ValueError(f"{page}:{k + 1}: an output begin marker without its end "
                                 f"marker (`<!-- end of output; snippet sha256 ..., output "
                                 f"sha256 ... -->`)")
            s.output = (k, e)
            s.stored_code, s.stored_body = m.group("code"), m.group("body")
            s.body = "\n".join(lines[k + 1:e])
    return found


def snippets(pages: tuple[str, ...] = PAGES) -> list[Snippet]:
    out: list[Snippet] = []
    for page in pages:
        out += parse(page, (ROOT / page).read_text(encoding="utf-8"))
    return out


# ---- running one -------------------------------------------------------------------------

@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False
    files: list[str] = field(default_factory=list)


def run(s: Snippet, timeout: float = SNIPPET_TIMEOUT_S) -> Result:
    """Run the snippet alone in a new empty folder, as a reader would."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.setdefault("PYTHONIOENCODING", "utf-8")
    with tempfile.TemporaryDirectory(prefix="spatialhub-snippet-") as folder:
        if s.code is not None:
            Path(folder, s.file).write_text(s.code, encoding="utf-8")
        t0 = time.perf_counter()
        try:
            p = subprocess.run(s.argv(), cwd=folder, env=env, capture_output=True, text=True,
                               encoding="utf-8", errors="replace", timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            def text(b: object) -> str:
                return b.decode("utf-8", "replace") if isinstance(b, bytes) else str(b or "")
            return Result(-1, text(exc.stdout), text(exc.stderr), time.perf_counter() - t0,
                          timed_out=True)
        return Result(p.returncode, p.stdout, p.stderr, time.perf_counter() - t0)


# ---- writing its output ------------------------------------------------------------------

def _version(dist: str) -> str | None:
    try:
        from importlib.metadata import version
        return version(dist)
    except Exception:   # noqa: BLE001 - not installed
        return None


def machine() -> str:
    """One line: the CPU, CPUs, OS, interpreter and the packages the examples use."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for row in f:
                if row.startswith("model name"):
                    cpu = row.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    libs = ", ".join(f"{name} {v}" for name, v in
                     (("NumPy", _version("numpy")), ("torch", _version("torch")),
                      ("onnxruntime", _version("onnxruntime")),
                      ("matplotlib", _version("matplotlib"))) if v)
    return (f"{cpu}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}, {libs}")


def _load() -> str:
    try:
        return f"load average {os.getloadavg()[0]:.2f}"
    except OSError:
        return "load average unknown"


def _fenced(text: str) -> list[str]:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return [ticks + "text", *text.rstrip("\n").split("\n"), ticks]


def render(s: Snippet, r: Result, when: str, where: str, load: str) -> str:
    """The lines between the markers: the header (when, which command wrote it and ran
    the snippet, the machine and its load), stdout, and stderr where asked."""
    head = [f"# {when}, `{COMMAND}`: `{s.command}` in an empty folder, {r.seconds:.1f} s",
            f"# {where}; {load} before it ran"]
    out = r.stdout if r.stdout.strip() else "(nothing printed)\n"
    lines = _fenced("\n".join(head) + "\n" + out)
    if s.stderr:
        lines += ["", "On stderr:", ""] + _fenced(r.stderr if r.stderr.strip() else
                                                  "(nothing)\n")
    return "\n".join(lines)


def region(s: Snippet, body: str) -> list[str]:
    return [BEGIN, body, f"<!-- end of output; snippet sha256 {digest(s.key)}, output sha256 "
                         f"{digest(body)} -->"]


def write(page: str, outputs: dict[int, str]) -> None:
    """Replace (or add) the outputs of the page's snippets numbered in `outputs`."""
    path = ROOT / page
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    # bottom up, so that earlier line numbers stay valid
    for s in sorted(parse(page, text), key=lambda s: -s.after):
        if s.number not in outputs:
            continue
        new = region(s, outputs[s.number])
        if s.output is not None:
            b, e = s.output
            lines[b:e + 1] = new
        else:
            lines[s.after:s.after] = ([""] if s.code is not None else []) + new
    path.write_text("\n".join(lines), encoding="utf-8")


# ---- the command -------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--update", action="store_true", help="write the outputs into the pages")
    ap.add_argument("--list", action="store_true", help="list the snippets and stop")
    ap.add_argument("--only", action="append", metavar="PAGE:N",
                    help="only these snippets (README.md:1, guide.md:3); repeatable")
    a = ap.parse_args(argv)
    chosen = snippets()
    if a.only:
        ids = set(a.only)
        unknown = ids - {s.id for s in chosen}
        if unknown:
            ap.error(f"no snippet {', '.join(sorted(unknown))}; --list shows them")
        chosen = [s for s in chosen if s.id in ids]
    if a.list:
        for s in chosen:
            state = ("no output yet" if s.output is None else
                     "output current" if s.stored_code == digest(s.key) else
                     "output stale (the snippet changed)")
            print(f"{s.id:14} {s.page}:{s.line:<5} {s.command:45} {state}")
        return 0
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    where = machine()
    print(f"{len(chosen)} snippets, one at a time, each in an empty folder; {where}",
          flush=True)
    outputs: dict[str, dict[int, str]] = {}
    failed = []
    t0 = time.perf_counter()
    for s in chosen:
        load = _load()
        r = run(s)
        ok = r.returncode == 0 and not r.timed_out
        verdict = "ok" if ok else ("TIMED OUT" if r.timed_out else f"FAILED (exit {r.returncode})")
        print(f"{s.id:14} {r.seconds:6.1f} s  {verdict}  {s.page}:{s.line}", flush=True)
        if not ok:
            failed.append(s)
            print("    " + "\n    ".join((r.stderr or r.stdout).rstrip().split("\n")[-15:]))
            continue
        outputs.setdefault(s.page, {})[s.number] = render(s, r, when, where, load)
    print(f"total {time.perf_counter() - t0:.1f} s", flush=True)
    if failed:
        print(f"{len(failed)} snippet(s) failed: {', '.join(s.id for s in failed)}; "
              f"{'nothing written' if a.update else 'fix them first'}", file=sys.stderr)
        return 1
    if a.update:
        for page, outs in outputs.items():
            write(page, outs)
        print(f"wrote the outputs of {len(chosen)} snippets into {', '.join(outputs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
