"""What a wheel must carry, checked on the copy the tests import.

CI installs the built wheel into a fresh environment and runs this suite from
outside the source tree (.ci/run), so `spatialhub.utils.profiling` here is the
wheel's copy: a module, the type stub, py.typed or the license left out of the
wheel fails these tests.  From a source checkout they compare the tree with itself
and pass trivially; that is what the CI arrangement is for.
"""
import ast
import importlib.metadata as md
from pathlib import Path

import pytest

import spatialhub.utils.profiling as prof
from spatialhub.utils.profiling import _native

REPO = Path(__file__).resolve().parents[1]
SRC_PKG = REPO / "src" / "spatialhub" / "utils" / "profiling"
PKG_DIR = Path(prof.__file__).resolve().parent
DIST = "spatialhub-profiling"


def _files(root):
    return {p.relative_to(root).as_posix() for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts
            and p.suffix not in (".pyc", ".so", ".pyd")}


def test_the_imported_package_has_every_file_of_the_source_package():
    if not SRC_PKG.is_dir():
        pytest.skip("no source tree beside the tests")
    missing = sorted(_files(SRC_PKG) - _files(PKG_DIR))
    assert missing == [], f"{PKG_DIR} lacks {missing}"


def test_the_native_core_is_the_packages_own():
    assert Path(_native.__file__).resolve().parent == PKG_DIR


def test_type_information_ships_and_describes_the_native_core():
    """py.typed marks the package as typed (PEP 561); _native.pyi is the only source of
    types for the C module, so every public name of the module must be in it."""
    assert (PKG_DIR / "py.typed").is_file()
    stub = PKG_DIR / "_native.pyi"
    declared = set()
    for node in ast.parse(stub.read_text()).body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            declared.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            declared.add(node.target.id)
        elif isinstance(node, ast.Assign):
            declared.update(t.id for t in node.targets if isinstance(t, ast.Name))
    public = {n for n in dir(_native) if not n.startswith("_")} | {"__version__"}
    assert sorted(public - declared) == [], f"{stub} does not declare them"


def test_the_installed_metadata():
    """The license as an SPDX expression with its file, the entry points users rely on."""
    try:
        dist = md.distribution(DIST)
    except md.PackageNotFoundError:
        pytest.skip(f"the distribution {DIST} is not installed in this environment")
    meta = dist.metadata
    assert meta["Name"] == DIST
    assert meta["License-Expression"] == "MIT"
    assert meta.get_all("Classifier") and not [c for c in meta.get_all("Classifier")
                                              if c.startswith("License ::")]
    assert meta.get_all("License-File") == ["LICENSE"]
    license_text = dist.read_text("licenses/LICENSE") or dist.read_text("LICENSE")
    assert license_text and "MIT License" in license_text
    eps = {(e.group, e.name): e.value for e in dist.entry_points}
    assert eps[("console_scripts", "spatialhub-bench")] == "spatialhub.utils.profiling.cli:main"
    assert eps[("pytest11", "spatialhub_benchmark")] == "spatialhub.utils.profiling.pytest_plugin"
