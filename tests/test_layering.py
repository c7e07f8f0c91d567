"""csrc/ stays layered: folders by layer, calls going down, no cycle.

The C sources are read as text (no compiler needed): each file's top-level
function definitions named shp_* are collected, then every call of such a
function in another file is an edge from the calling file to the defining
one (a reference without a call, as in a method table, counts too).
Static inline functions in a header belong to no .c file: a call made
inside one counts as a call from every .c file that uses the inline (so
loop.c's use of shp_progress_tick is an edge loop.c -> progress.c).

The folders and their order are csrc/README.md's map (``LAYERS`` below holds the
same order): a file calls only files of its own folder or of a folder below it, no
two files call each other in a circle, and an inline helper in a folder's header
calls nothing above that folder.  A file is as long as its concern needs: there is
no line cap.
"""
import re
from pathlib import Path

import pytest

CSRC = Path(__file__).resolve().parent.parent / "csrc"
# bottom up; "." is the top (module.c, constants.c) and the shared headers
LAYERS = ["capi", "platform", "gpu", "stats", "render", "types", "scope", "run", "."]

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


def _rel(path):
    return path.relative_to(CSRC).as_posix()


def _sources():
    files = sorted(CSRC.rglob("*.c"))
    assert len(files) >= 10, f"no C sources found under {CSRC}"
    return {_rel(f): f.read_text() for f in files}


def _headers():
    return {_rel(f): f.read_text() for f in sorted(CSRC.rglob("*.h"))}


def folder_of(name):
    """The layer of a file given as a path relative to csrc/ ("run/loop.c" -> "run")."""
    return name.split("/", 1)[0] if "/" in name else "."


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

    `header` (every header's text, joined, when `texts` is None) supplies the static
    inline functions: what one calls is called by each file using it."""
    if texts is None:
        texts = _sources()
        header = "\n".join(_headers().values()) if header is None else header
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


def upward_calls(graph, layers=LAYERS):
    """Edges from a file to a file of a folder above its own: [(a, b, functions)]."""
    rank = {f: i for i, f in enumerate(layers)}
    return [(a, b, fns) for a, callees in sorted(graph.items())
            for b, fns in sorted(callees.items())
            if rank[folder_of(b)] > rank[folder_of(a)]]


def test_the_graph_is_read_from_the_sources():
    # the check would pass vacuously on an empty graph: these edges exist
    g = call_graph()
    assert "shp_benchmark_callable" in _definitions({k: _strip(v) for k, v in _sources().items()})
    assert "run/bench.c" in g["module.c"]
    assert "stats/summary.c" in g["run/bench.c"]
    assert "capi/args.c" in g["render/table.c"]
    assert "gpu/cuda.c" in g["types/cudasync.c"]
    assert g["gpu/cudatime.c"].keys() == {"gpu/cuda.c"}   # only the driver binding


def test_every_file_is_in_a_layer_and_at_most_three_at_the_top():
    folders = {folder_of(n) for n in _sources()} | {folder_of(n) for n in _headers()}
    assert folders <= set(LAYERS), folders - set(LAYERS)
    top = [n for n in _sources() if folder_of(n) == "."]
    assert len(top) <= 3, top
    # one header per folder, named after it
    for layer in LAYERS[:-1]:
        heads = [n for n in _headers() if folder_of(n) == layer]
        assert heads == [f"{layer}/{layer}.h"], (layer, heads)


def test_no_call_cycle_between_c_files():
    g = call_graph()
    cycle = find_cycle(g)
    if cycle:
        edges = [f"{a} -> {b} ({', '.join(g[a][b])})" for a, b in zip(cycle, cycle[1:])]
        pytest.fail("call cycle between csrc files:\n  " + "\n  ".join(edges))


def test_a_folder_calls_only_folders_below_it():
    up = upward_calls(call_graph())
    if up:
        pytest.fail("calls from a folder to one above it (LAYERS, csrc/README.md):\n  " +
                    "\n  ".join(f"{a} -> {b} ({', '.join(fns)})" for a, b, fns in up))


def test_no_inline_helper_calls_above_its_header():
    texts = {k: _strip(v) for k, v in _sources().items()}
    owner = _definitions(texts)
    rank = {f: i for i, f in enumerate(LAYERS)}
    bad = []
    for name, text in _headers().items():
        # the shared headers at the top (shp.h, objects.h) sit below every folder: their
        # inlines may call the C-API only
        level = rank[folder_of(name)] if folder_of(name) != "." or name == "module.h" else -1
        for fn, calls in _inlines(text).items():
            for c in calls:
                target = owner.get(c)
                if target is not None and rank[folder_of(target)] > level:
                    bad.append(f"{name}: {fn} calls {c} ({target})")
    assert not bad, bad


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


def test_the_folder_check_finds_a_planted_upward_call():
    texts = {
        "stats/x.c": "int\nshp_x(void)\n{\n    return shp_y();\n}\n",
        "run/y.c": "int\nshp_y(void)\n{\n    return 0;\n}\n",
        "run/z.c": "int\nshp_z(void)\n{\n    return shp_x();\n}\n",
    }
    assert upward_calls(call_graph(texts)) == [("stats/x.c", "run/y.c", ["shp_y"])]


def test_calls_inside_header_inlines_are_edges_of_their_users():
    # run.h's shp_progress_tick calls progress.c's shp_progress_update: loop.c, which
    # uses the inline, depends on progress.c
    assert "shp_progress_tick" in _inlines((CSRC / "run" / "run.h").read_text())
    assert "shp_progress_update" in call_graph()["run/loop.c"].get("run/progress.c", [])
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


def test_leaves_call_no_other_folder():
    g = call_graph()
    for name, callees in g.items():
        if folder_of(name) in ("capi", "platform", "stats"):
            outside = {b for b in callees if folder_of(b) != folder_of(name)}
            assert not outside, f"{name} is in a leaf folder but calls {outside}"
    # the driver binding uses the platform's loader only
    assert set(g["gpu/cuda.c"]) <= {"platform/dynlib.c"}, f"cuda.c calls {g['gpu/cuda.c']}"


def test_the_readme_map_names_every_file_in_its_folder():
    readme = (CSRC / "README.md").read_text()
    for name in list(_sources()) + list(_headers()):
        assert f"`{name.split('/')[-1]}`" in readme, f"csrc/README.md does not name {name}"
    order = [readme.index(f"`{layer}/`") for layer in LAYERS[:-1]]
    assert order == sorted(order), "csrc/README.md lists the folders out of order"


# ---- the Python package: no import circle ----------------------------------------------

PACKAGE = CSRC.parent / "src" / "spatialhub" / "utils" / "profiling"
PKG = "spatialhub.utils.profiling"


def import_graph(root=PACKAGE, pkg=PKG):
    """{module: modules of the package it imports}, imports inside functions included;
    ``from . import _native`` is an edge to the extension, not to the package."""
    import ast

    mods = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).with_suffix("").as_posix().replace("/", ".")
        name = pkg if rel == "__init__" else f"{pkg}.{rel.removesuffix('.__init__')}"
        mods[name] = path
    known = set(mods) | {f"{pkg}._native"}
    graph = {m: set() for m in mods}
    for name, path in mods.items():
        here = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = here
                for _ in range(max(node.level - 1, 0)):
                    base = base.rsplit(".", 1)[0]
                mod = (f"{base}.{node.module}" if node.module else base) if node.level \
                    else node.module
                targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod
                           for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            graph[name] |= {t for t in targets if t in known and t != name}
    return graph


def test_the_package_has_no_import_circle():
    g = import_graph()
    assert f"{PKG}._launch" in g and f"{PKG}.runner" in g[f"{PKG}.cli"] | g[PKG]
    cycle = find_cycle(g)
    assert cycle is None, "import circle: " + " -> ".join(c.rsplit(".", 1)[-1] for c in cycle)


def test_the_import_check_finds_a_circle_through_a_function_level_import(tmp_path):
    pkg = tmp_path / "p"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from .a import x\n")
    assert find_cycle(import_graph(pkg, "p")) == ["p.a", "p.b", "p.a"]
