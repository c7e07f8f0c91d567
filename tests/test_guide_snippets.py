"""The guide's snippets marked "runs as pasted" run as pasted: each is written to a file of
its own and run as a script (`python snippet.py`), as a reader would, in an empty
directory; it must exit 0 (issue 22: the repetition snippets used to need names they
never defined, and without a main guard never ended)."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guide.md"
MARK = "<!-- runs as pasted: tests/test_guide_snippets.py -->"


def snippets():
    text = GUIDE.read_text(encoding="utf-8")
    found = re.findall(re.escape(MARK) + r"\n```python\n(.*?)```", text, flags=re.S)
    assert len(found) == text.count(MARK), "a marked snippet is not a ```python block"
    return found


def test_the_guide_marks_its_repetition_snippets():
    code = "\n".join(snippets())
    for name in ("benchmark_repeated", "compare_repeated", "compare_callables", "rerun_low_ms"):
        assert name in code


@pytest.mark.parametrize("index", range(len(snippets())))
def test_a_marked_snippet_runs_as_pasted(index, tmp_path):
    path = tmp_path / "snippet.py"
    path.write_text(snippets()[index], encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run([sys.executable, "-W", "ignore", str(path)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip(), "a snippet prints what it shows"
