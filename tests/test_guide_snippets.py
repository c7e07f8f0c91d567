"""What a user reads runs (issue 33, item 6): every ```python block of README.md and
docs/guide.md -- and each command whose output they show -- runs as pasted, alone, in an
empty folder, and exits 0 within docs/run_snippets.py's SNIPPET_TIMEOUT_S; and the output
shown under each is what `python docs/run_snippets.py --update` wrote for that very code
(a digest of the code beside it), never a hand edit (a digest of the output).  The
numbers in the outputs vary from run to run: they are not compared.

Issue 22 began this for four marked snippets (names they never defined, a missing
__main__ guard); before issue 33, 8 of the 15 blocks failed as pasted (names from earlier
sections, a CUDA provider on a CPU-only machine) and the outputs shown were stale.

A block whose imports this interpreter lacks (torch, onnxruntime, matplotlib on the
lanes without the heavy extras) is skipped, naming the module; CI's main lane has them
all, so there every block runs.
"""
import ast
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("run_snippets", ROOT / "docs" / "run_snippets.py")
run_snippets = importlib.util.module_from_spec(_spec)
sys.modules["run_snippets"] = run_snippets    # dataclasses look their module up there
_spec.loader.exec_module(run_snippets)

SNIPPETS = run_snippets.snippets()
REGENERATE = "run `python docs/run_snippets.py --update` (or --only {id} --update)"


def test_every_python_block_of_the_pages_is_a_snippet():
    text = {page: (ROOT / page).read_text(encoding="utf-8") for page in run_snippets.PAGES}
    blocks = sum(sum(1 for line in t.split("\n") if line == "```python") for t in text.values())
    python = [s for s in SNIPPETS if s.code is not None]
    assert len(python) == blocks >= 15
    # the repetitions, the rerun interval and the adapters are among them
    code = "\n".join(s.code for s in python)
    for name in ("benchmark_repeated", "compare_repeated", "compare_callables", "rerun_low_ms",
                 "profile_model", "benchmark_onnx", "sweep(", "plot_latency", "plot_sweep",
                 "HierarchicalProfiler"):
        assert name in code, name
    # the commands whose output the pages show: the demo, in both
    assert {s.command for s in SNIPPETS if s.code is None} == {
        "python -m spatialhub.utils.profiling", "spatialhub-bench"}


@pytest.mark.parametrize("s", SNIPPETS, ids=lambda s: s.id)
def test_the_output_shown_is_what_the_script_wrote_for_this_code(s):
    where = f"{s.page}:{s.line} ({s.id})"
    assert s.output is not None, f"{where} has no output below it: {REGENERATE.format(id=s.id)}"
    assert s.stored_code == run_snippets.digest(s.key), (
        f"{where} was edited after its output was written: {REGENERATE.format(id=s.id)}")
    assert s.stored_body == run_snippets.digest(s.body), (
        f"{where}: its output was edited by hand; {REGENERATE.format(id=s.id)}")
    head = s.body.split("\n")[1:3]     # after the ```text fence: when, how, where
    assert head[0].startswith("# 20") and f"`{run_snippets.COMMAND}`" in head[0], head
    assert f"`{s.command}` in an empty folder" in head[0], head
    assert "CPUs" in head[1] and "load average" in head[1], head


#: our functions that need an optional extra the snippet never imports itself
NEEDS = {"plot_latency": "matplotlib", "plot_load": "matplotlib", "plot_sweep": "matplotlib"}


def missing_modules(code):
    """The top-level modules `code` imports, or that the functions of ours it imports need
    (NEEDS), that this interpreter cannot find."""
    names = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
            names |= {NEEDS[a.name] for a in node.names if a.name in NEEDS}
    return sorted(n for n in names if importlib.util.find_spec(n) is None)


@pytest.mark.parametrize("s", SNIPPETS, ids=lambda s: s.id)
def test_each_snippet_runs_as_pasted_in_an_empty_folder(s):
    if s.code is not None:
        missing = missing_modules(s.code)
        if missing:
            pytest.skip(f"{s.id} imports {', '.join(missing)}, not installed here")
    r = run_snippets.run(s)
    where = f"{s.page}:{s.line} ({s.id}, `{s.command}`)"
    assert not r.timed_out, f"{where} ran past {run_snippets.SNIPPET_TIMEOUT_S} s"
    assert r.returncode == 0, f"{where} exited {r.returncode}:\n{r.stderr[-3000:]}"
    assert r.seconds < run_snippets.SNIPPET_TIMEOUT_S
    if s.body is None:
        return                 # no output written yet: the test above says so
    printed_then = "(nothing printed)" not in s.body.split("\n")[3]
    assert bool(r.stdout.strip()) == printed_then, (
        f"{where} {'printed nothing' if printed_then else 'printed'} now, unlike the output "
        f"shown: {REGENERATE.format(id=s.id)}")


# ---- the script itself -------------------------------------------------------------------

PAGE = """# A page

```python
print("hello")
```

<!-- snippet: file=test_x.py; run=python -m pytest -q test_x.py; stderr -->
```python
def test_x():
    pass
```

Text.

<!-- snippet: run=spatialhub-bench --version -->

```sh
not a snippet
```
"""


def test_the_script_finds_blocks_and_commands_and_writes_their_outputs(tmp_path, monkeypatch):
    monkeypatch.setattr(run_snippets, "ROOT", tmp_path)
    (tmp_path / "page.md").write_text(PAGE, encoding="utf-8")
    found = run_snippets.parse("page.md", PAGE)
    assert [(s.code, s.file, s.command, s.stderr) for s in found] == [
        ('print("hello")\n', "snippet.py", "python snippet.py", False),
        ("def test_x():\n    pass\n", "test_x.py", "python -m pytest -q test_x.py", True),
        (None, "snippet.py", "spatialhub-bench --version", False)]
    assert found[2].argv()[:3] == [sys.executable, "-m", "spatialhub.utils.profiling"]
    assert all(s.output is None for s in found)

    r = run_snippets.run(found[0])
    assert (r.returncode, r.stdout) == (0, "hello\n")
    outs = {s.number: run_snippets.render(s, run_snippets.Result(0, f"out {s.number}\n", "warn\n",
                                                                   0.5),
                                          "2026-01-01 00:00 UTC", "a machine, 2 CPUs",
                                          "load average 0.50")
            for s in found}
    run_snippets.write("page.md", outs)
    written = (tmp_path / "page.md").read_text(encoding="utf-8")
    again = run_snippets.parse("page.md", written)
    assert [s.body.split("\n")[3] for s in again] == ["out 1", "out 2", "out 3"]
    assert "On stderr:" in again[1].body and "On stderr:" not in again[0].body
    for s in again:
        assert s.stored_code == run_snippets.digest(s.key)
        assert s.stored_body == run_snippets.digest(s.body)
    # writing twice replaces, never stacks
    run_snippets.write("page.md", outs)
    assert (tmp_path / "page.md").read_text(encoding="utf-8") == written
    # an edit of the code or of the output is seen
    edited = run_snippets.parse("page.md", written.replace('print("hello")', 'print("hi")')
                                .replace("out 3", "out 33"))
    assert edited[0].stored_code != run_snippets.digest(edited[0].key)
    assert edited[2].stored_body != run_snippets.digest(edited[2].body)


def test_a_bad_directive_is_named():
    with pytest.raises(ValueError, match=r"page.md:2: snippet directive 'stdout' is not "
                                         r"file=NAME, run=COMMAND or stderr"):
        run_snippets.parse("page.md", "x\n<!-- snippet: stdout -->\n```python\npass\n```\n")
    with pytest.raises(ValueError, match=r"page.md:1: a snippet directive without a code "
                                         r"block below it needs run=COMMAND"):
        run_snippets.parse("page.md", "<!-- snippet: stderr -->\n\ntext\n")
