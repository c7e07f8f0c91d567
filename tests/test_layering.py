"""csrc/ stays layered: no call cycle between .c files, no .c file over 620 lines.

The C sources are read as text (no compiler needed): each file's top-level
function definitions named shp_* are collected, then every call of such a
function in another file is an edge from the calling file to the defining
one (a reference without a call, as in a method table, counts too).
Static inline functions in profiling.h belong to no .c file: a call made
inside one counts as a call from every .c file that uses the inline (so
loop.c's use of shp_progress_tick is an edge loop.c -> progress.c).

The layer picture and where a new concern goes: docs/decisions.md
("Layers") and the file map at the top of csrc/profiling.h.
"""
import re
from pathlib import Path

import pytest

CSRC = Path(__file__).resolve().parent.parent / "csrc"
MAX_LINES = 620

# A definition: the return type on its own line (docs/design.md, "How the C reads"), then the name at
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


_INLINE = re.compile(r"static inline[^;{(]*?\b(shp_\w+)\s*\(")


def _inlines(header):
    """{inline function of the header: the shp_ names its body uses}"""
    header = _strip(header)
    found = {}
    for m in _INLINE.finditer(header):
        i = header.find("{", m.end())
        if i < 0 or ";" in header[m.end():i]:
            continue    # a prototype, not a definition
        depth, j = 0, i
        while j < len(header):
            depth += {"{": 1, "}": -1}.get(header[j], 0)
            j += 1
            if depth == 0:
                break
        found[m.group(1)] = set(_CALL.findall(header[i:j])) - {m.group(1)}
    return found


def call_graph(texts=None, header=None):
    """{file: {callee file: sorted shp_ functions it calls there}}

    `header` (profiling.h's text when `texts` is None) supplies the static
    inline functions: what one calls is called by each file using it."""
    if texts is None:
        texts = _sources()
        header = (CSRC / "profiling.h").read_text() if header is None else header
    texts = {k: _strip(v) for k, v in texts.items()}
    owner = _definitions(texts)
    inlines = _inlines(header or "")
    graph = {name: {} for name in texts}
    for name, text in texts.items():
        used, todo = set(), list(_CALL.findall(text))
        while todo:                 # through inlines calling inlines, too
            fn = todo.pop()
            if fn not in used:
                used.add(fn)
                todo.extend(inlines.get(fn, ()))
        for fn in used:
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
    assert g["cudatime.c"].keys() == {"cuda.c"}   # only the driver binding


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


def test_calls_inside_header_inlines_are_edges_of_their_users():
    # the header's shp_progress_tick calls progress.c's shp_progress_update:
    # loop.c, which uses the inline, depends on progress.c
    assert "shp_progress_tick" in _inlines((CSRC / "profiling.h").read_text())
    assert "shp_progress_update" in call_graph()["loop.c"].get("progress.c", [])
    # and a cycle closed only through an inline is found
    texts = {
        "a.c": "int\nshp_a(void)\n{\n    return shp_via();\n}\n",
        "b.c": "int\nshp_b(void)\n{\n    return shp_a();\n}\n",
    }
    header = ("static inline int shp_via2(void) { return shp_b(); }\n"
              "int shp_proto(void);\n"
              "static inline int\nshp_via(void)\n{\n    return shp_via2();\n}\n")
    assert find_cycle(call_graph(texts)) is None
    assert find_cycle(call_graph(texts, header)) == ["a.c", "b.c", "a.c"]


def test_leaves_call_no_other_file():
    g = call_graph()
    for leaf in ("clock.c", "memory.c", "dynlib.c", "args.c", "device.c", "notes.c",
                 "markup.c", "summary.c", "cudafork.c", "cachecold.c", "nvml.c",
                 "mallocstate.c", "constants.c", "perfctr.c", "callgrind.c"):
        assert g[leaf] == {}, f"{leaf} is a leaf but calls {g[leaf]}"
    # the driver binding uses the platform's loader, split off it (issue 13)
    assert set(g["cuda.c"]) <= {"dynlib.c"}, f"cuda.c calls {g['cuda.c']}"


def test_no_c_file_is_over_the_line_limit():
    sizes = {f.name: len(f.read_text().splitlines()) for f in CSRC.glob("*.c")}
    big = {k: v for k, v in sizes.items() if v > MAX_LINES}
    assert not big, f"split these by concern (limit {MAX_LINES} lines): {big}"
