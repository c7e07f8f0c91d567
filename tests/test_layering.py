"""csrc/ stays layered: no call cycle between .c files, no .c file over 620 lines.

The C sources are read as text (no compiler needed): each file's top-level
function definitions named shp_* are collected, then every call of such a
function in another file is an edge from the calling file to the defining
one (a reference without a call, as in a method table, counts too).
Static inline functions in profiling.h belong to no .c file; calls
made through them are not edges (the header's inline code calls only
leaves: the clock, the driver binding, sync.c's Python sync).

The layer picture and where a new concern goes: docs/decisions.md
("Layers") and the file map at the top of csrc/profiling.h.
"""
import re
from pathlib import Path

import pytest

CSRC = Path(__file__).resolve().parent.parent / "csrc"
MAX_LINES = 620

# A definition: the return type on its own line (STYLE.md), then the name at
# the start of the next line, followed by "(".  Prototypes end with ";".
_DEF = re.compile(r"^(shp_\w+)\s*\(", re.M)
# a call, or a reference (a method table entry, a function pointer)
_CALL = re.compile(r"\b(shp_\w+)\b")
_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_STRING = re.compile(r'"(?:\\.|[^"\\\n])*"')


def _strip(text):
    """The code only: comments and string literals blanked."""
    return _STRING.sub('""', _COMMENT.sub(" ", text))


def _sources():
    files = sorted(CSRC.glob("*.c"))
    assert len(files) >= 10, f"no C sources found under {CSRC}"
    return {f.name: f.read_text() for f in files}


def _definitions(texts):
    owner = {}
    for name, text in texts.items():
        for m in _DEF.finditer(text):
            fn = m.group(1)
            # a definition has a body: the next non-space after ")" is "{"
            depth, i = 1, m.end()
            while depth and i < len(text):
                depth += {"(": 1, ")": -1}.get(text[i], 0)
                i += 1
            rest = text[i:].lstrip()
            if rest.startswith("{"):
                assert fn not in owner or owner[fn] == name, (
                    f"{fn} is defined in both {owner[fn]} and {name}")
                owner[fn] = name
    return owner


def call_graph(texts=None):
    """{file: {callee file: sorted shp_ functions it calls there}}"""
    texts = {k: _strip(v) for k, v in (_sources() if texts is None else texts).items()}
    owner = _definitions(texts)
    graph = {name: {} for name in texts}
    for name, text in texts.items():
        for m in _CALL.finditer(text):
            fn = m.group(1)
            target = owner.get(fn)
            if target is not None and target != name:
                graph[name].setdefault(target, set()).add(fn)
    return {k: {t: sorted(fns) for t, fns in v.items()} for k, v in graph.items()}


def find_cycle(graph):
    """A list of files forming a cycle (first == last), or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if state.get(nxt) is None:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if state.get(node) is None:
            found = visit(node)
            if found:
                return found
    return None


def test_the_graph_is_read_from_the_sources():
    # the check would pass vacuously on an empty graph: these edges exist
    g = call_graph()
    assert "shp_benchmark_callable" in _definitions({k: _strip(v) for k, v in _sources().items()})
    assert "bench.c" in g["module.c"]
    assert "summary.c" in g["bench.c"]
    assert "args.c" in g["table.c"]
    assert "cuda.c" in g["cudasync.c"]


def test_no_call_cycle_between_c_files():
    g = call_graph()
    cycle = find_cycle(g)
    if cycle:
        edges = [f"{a} -> {b} ({', '.join(g[a][b])})" for a, b in zip(cycle, cycle[1:])]
        pytest.fail("call cycle between csrc files:\n  " + "\n  ".join(edges))


def test_the_cycle_finder_finds_a_planted_cycle():
    texts = {
        "a.c": "int\nshp_a(void)\n{\n    return shp_b();\n}\n",
        "b.c": "int\nshp_b(void)\n{\n    return shp_c();\n}\n",
        "c.c": "int\nshp_c(void)\n{\n    /* shp_a() in a comment is no call */\n    return shp_a();\n}\n",
        "d.c": "int\nshp_d(void)\n{\n    return shp_a();\n}\n",
    }
    assert find_cycle(call_graph(texts)) == ["a.c", "b.c", "c.c", "a.c"]
    texts["c.c"] = "int\nshp_c(void)\n{\n    /* shp_a() */\n    return \"shp_a()\"[0];\n}\n"
    assert find_cycle(call_graph(texts)) is None


def test_leaves_call_no_other_file():
    g = call_graph()
    for leaf in ("clock.c", "memory.c", "dynlib.c", "args.c", "device.c", "notes.c",
                 "markup.c", "summary.c", "cudafork.c"):
        assert g[leaf] == {}, f"{leaf} is a leaf but calls {g[leaf]}"
    # the driver binding uses the platform's loader, split off it (issue 13)
    assert set(g["cuda.c"]) <= {"dynlib.c"}, f"cuda.c calls {g['cuda.c']}"


def test_no_c_file_is_over_the_line_limit():
    sizes = {f.name: len(f.read_text().splitlines()) for f in CSRC.glob("*.c")}
    big = {k: v for k, v in sizes.items() if v > MAX_LINES}
    assert not big, f"split these by concern (limit {MAX_LINES} lines): {big}"
