"""docs/examples/quickstart.ipynb runs headless in a real kernel and renders tables."""
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOK = Path(__file__).resolve().parent.parent / "docs" / "examples" / "quickstart.ipynb"


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=180, kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path_factory.mktemp("nb"))}},
    )
    client.execute()
    return nb


def _results(nb):
    """The rich results (execute_result outputs) of the code cells, in order."""
    return [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "execute_result"]


def test_every_cell_runs_without_error(executed):
    errors = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert errors == []


def test_stats_cell_renders_as_a_markdown_table(executed):
    stats_out = _results(executed)[0]
    md = stats_out.data["text/markdown"]
    lines = md.splitlines()
    header = [line for line in lines if line.startswith("| Model / Target |")]
    rows = [line for line in lines if line.startswith("| **ImagePreprocessor** |")]
    assert len(header) == 1 and len(rows) == 1
    assert "`CPU`" in rows[0]
    assert "text/html" in stats_out.data


def test_samples_are_on_the_result(executed):
    printed = "".join(o.get("text", "") for c in executed.cells if c.cell_type == "code"
                      for o in c.outputs if o.output_type == "stream" and o.get("name") == "stdout")
    # (stderr may hold a BenchmarkWarning, e.g. "noisy" on a busy machine)
    assert printed.startswith("50 samples; P95 from NumPy:")
    numbers = [float(w) for w in printed.replace(";", " ").split() if w.replace(".", "", 1).isdigit()]
    assert numbers[1] == pytest.approx(numbers[2], abs=1e-4)  # NumPy's P95 == the table's


def test_sweep_cell_renders_one_row_per_height(executed):
    sweep_out = _results(executed)[1]
    md = sweep_out.data["text/markdown"]
    lines = md.splitlines()
    assert "height" in lines[0]
    rows = [line for line in lines if line.startswith("| **ImagePreprocessor** |")]
    assert len(rows) == 3
    for h, row in zip((120, 240, 480), rows):
        assert f" {h} " in row
    html = sweep_out.data["text/html"]
    assert html.count("<table>") == 1 and html.count("<tr>") == 4
