"""The readiness report as a reader sees it (issue 35): headless Chromium renders it
offline -- name resolution off, every request the page makes recorded -- and the page
asks for nothing but itself, raises no script error, shows the candidates, the verdicts,
the failed budget, the environment and the versions in its DOM, draws its figures, and
prints.  A control page that does load a resource and throw shows the checks can fail.

Skipped where no chromium is installed (CI installs Debian's: .ci/run).
"""
from __future__ import annotations

import re
import struct
from html.parser import HTMLParser

import numpy as np
import pytest

from spatialhub.utils.profiling import write_report
from spatialhub.utils.profiling._numbers import number

from _chromium import Browser, find_chromium
from _report_scene import EVIL, make_scene

pytestmark = pytest.mark.skipif(find_chromium() is None,
                                reason="chromium is not installed (apt-get install chromium)")


class Text(HTMLParser):
    def __init__(self, html):
        super().__init__(convert_charrefs=True)
        self.parts, self.tags, self.skip = [], [], 0
        self.feed(html)
        self.text = " ".join("".join(self.parts).split())

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag in ("style", "title"):
            self.skip += 1

    def handle_endtag(self, tag):
        if tag in ("style", "title"):
            self.skip -= 1

    def handle_data(self, data):
        if not self.skip:
            self.parts.append(data)


@pytest.fixture(scope="module")
def browser():
    with Browser(width=1200, height=900) as b:
        yield b


@pytest.fixture(scope="module")
def rendered(browser, tmp_path_factory):
    folder = tmp_path_factory.mktemp("browser")
    scene = make_scene()
    path = write_report(scene["results"], folder / "report.html", title="Can it ship?",
                        budgets=scene["budgets"], command="python bench.py")
    got = browser.open(path.resolve().as_uri(), screenshot=folder / "report.png",
                       pdf=folder / "report.pdf")
    got.update(scene=scene, url=path.resolve().as_uri(), png=folder / "report.png")
    return got


def test_the_checks_can_fail_on_a_page_that_loads_and_throws(browser, tmp_path):
    page = tmp_path / "control.html"
    page.write_text('<!DOCTYPE html><p>control</p><img src="http://example.invalid/a.png">'
                    '<script>throw new Error("boom")</script>')
    got = browser.open(page.resolve().as_uri())
    assert any(u.startswith("http://example.invalid") for u in got["requests"])
    assert any("Uncaught" in e for e in got["errors"])


def test_it_asks_for_nothing_but_itself_and_raises_nothing(rendered):
    assert rendered["requests"] == [rendered["url"]]
    assert rendered["errors"] == []
    assert "script" not in Text(rendered["html"]).tags


def test_the_dom_shows_candidates_verdicts_budgets_and_environment(rendered):
    text = Text(rendered["html"]).text
    scene = rendered["scene"]
    for name in ("fp32", EVIL, "int8", "net batch_size=4", "net-served"):
        assert name in text, name
    assert "Does not meet the stated checks" in text
    assert f"fp32: p99_ms {number(scene['base'].p99_ms)} ms against ≤ 9 ms" in text
    assert f"{EVIL}: faster:" in text
    assert "FAILED" in text and "met" in text
    assert "Environment" in text and "3.11.7 (CPython)" in text
    assert f"NumPy {np.__version__}" in text or np.__version__ in text
    assert '"spatialhub-profiling==9.9.9"' in text and "python bench.py" in text
    assert "The highest rate whose P99 meets the bound of 10 ms: 300 requests/s" in text


def test_it_draws_its_figures_and_prints(rendered):
    assert Text(rendered["html"]).tags.count("svg") >= 4
    assert rendered["height"] > 2000              # a long page, laid out
    png = rendered["png"].read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert width == 1200 and height == rendered["height"]
    assert len(png) > 100_000                     # not a blank page
    assert rendered["pdf_pages"] >= 2


def test_the_markdown_report_is_not_for_the_browser(tmp_path):
    # (the Markdown variant is read by GitHub's renderer: tests/test_report.py)
    scene = make_scene()
    text = write_report(scene["results"], tmp_path / "r.md").read_text()
    assert not re.search(r"(?<!\\)<(script|svg|img)", text)     # \<script: escaped text
