"""One version, written once, and the same wherever a user or a result reads it.

src/spatialhub/utils/profiling/_version.py holds it; the build reads it for the
metadata (pip show, importlib.metadata) and compiles it into the native core; the
package, the command line, the pytest plugin's JSON and every result's environment
record state it.  The released `spatialhub` distribution (0.1.7) is another project
whose files share our import path: its version must appear nowhere of ours
(.ci/coexist.sh checks all of this beside the real 0.1.7 as well).
"""
import importlib.metadata as md
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

import spatialhub.utils.profiling as prof
from spatialhub.utils.profiling import _native, _version, benchmark_callable

REPO = Path(__file__).resolve().parents[1]
PKG_DIR = Path(prof.__file__).resolve().parent
DIST = "spatialhub-profiling"


def _installed_version():
    try:
        return md.version(DIST)
    except md.PackageNotFoundError:
        return None


def test_the_version_is_a_normalised_release_string():
    from packaging.version import Version   # pytest's own dependency

    v = prof.__version__
    assert isinstance(v, str) and str(Version(v)) == v, v
    assert "unknown" not in v and v != "0.1.7"


def test_package_and_native_core_state_one_version():
    assert prof.__version__ == _version.__version__ == _native.__version__


def test_the_version_is_written_in_one_place():
    """pyproject.toml takes it from _version.py, and no other source file spells it."""
    if not (REPO / "pyproject.toml").is_file():
        pytest.skip("no source tree beside the tests")
    text = (REPO / "pyproject.toml").read_text()
    project = text.split("[project]", 1)[1].split("\n[", 1)[0]
    assert not re.search(r"(?m)^version\s*=", project), "pyproject.toml states a version"
    assert re.search(r'(?m)^dynamic\s*=\s*\[[^]]*"version"', project)
    assert re.search(r'(?m)^version\s*=\s*\{\s*attr\s*=\s*"spatialhub\.utils\.profiling\._version'
                     r'\.__version__"\s*\}', text)
    # a line that names a version and spells ours is a second copy
    copy = re.compile(r"""(?im)^.*version.*["']%s["']""" % re.escape(prof.__version__))
    others = [p for p in [REPO / "setup.py", REPO / "pyproject.toml",
                          *(REPO / "src").rglob("*.py"), *(REPO / "csrc").glob("*.[ch]")]
              if p.name != "_version.py" and copy.search(p.read_text())]
    assert others == [], f"the version is written again in {others}"


def test_every_result_records_the_version_that_measured_it():
    with warnings.catch_warnings():   # a no-op on a shared machine: noisy, and says so
        warnings.simplefilter("ignore", prof.BenchmarkWarning)
        s = benchmark_callable(lambda: None, num_warmup=1, num_iters=5)
    assert s.env["spatialhub_profiling"] == prof.__version__
    assert json.loads(s.to_json())["env"]["spatialhub_profiling"] == prof.__version__
    back = type(s).from_dict(s.to_dict())
    assert back.env["spatialhub_profiling"] == prof.__version__


def _run(*cmd, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=120, env=e)


def test_the_command_line_prints_the_version_and_the_copy_it_runs():
    done = _run(sys.executable, "-m", "spatialhub.utils.profiling", "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "spatialhub-bench %s from %s (Python %d.%d.%d)\n" % (
        (prof.__version__, PKG_DIR) + tuple(sys.version_info[:3])), done.stdout
    # the console script pip installed beside this interpreter, where there is one
    script = shutil.which("spatialhub-bench", path=os.path.dirname(sys.executable))
    if script is not None and _installed_version() is not None:
        done = _run(script, "--version")
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("spatialhub-bench %s from " % prof.__version__), done.stdout


def test_the_installed_distribution_states_the_same_version():
    """What pip show and importlib.metadata say (skipped only where the package is
    imported from a tree that was never installed)."""
    installed = _installed_version()
    if installed is None:
        pytest.skip(f"the distribution {DIST} is not installed in this environment")
    assert installed == prof.__version__, (
        f"installed metadata says {installed}, the package {prof.__version__}: reinstall")
    done = _run(sys.executable, "-m", "pip", "show", DIST)
    if done.returncode != 0 and "No module named pip" in done.stderr:
        pytest.skip("no pip in this environment")
    assert done.returncode == 0, done.stderr
    assert "\nVersion: %s\n" % prof.__version__ in "\n" + done.stdout, done.stdout


def test_the_plugin_json_states_our_version_beside_the_released_spatialhub(tmp_path):
    """The metadata of the released spatialhub 0.1.7 on the path (what installing it
    beside ours leaves): the plugin's JSON still says our version, in its top-level
    `version` and in each benchmark's environment record."""
    site = tmp_path / "site"
    info = site / "spatialhub-0.1.7.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: spatialhub\nVersion: 0.1.7\n")
    (tmp_path / "test_subject.py").write_text(textwrap.dedent("""
        import importlib.metadata

        def test_it(benchmark):
            # the released distribution is visible to this process
            assert importlib.metadata.version("spatialhub") == "0.1.7"
            benchmark(sum, range(10))
    """))
    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH"))
                                         if p)}
    env_plain = dict(os.environ, **env)
    env_plain.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:benchmark",
         "--benchmark-json=report.json", "--benchmark-max-time=0.05",
         "--benchmark-max-rounds=50"],
        cwd=tmp_path, env=env_plain, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads((tmp_path / "report.json").read_text())
    assert doc["version"] == prof.__version__
    assert doc["machine_info"]["spatialhub"]["spatialhub_profiling"] == prof.__version__
