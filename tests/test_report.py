"""The readiness report (issue 35) as a reader sees it, and the output checks beside it.

- ``check_outputs`` agrees with NumPy's own difference to 1e-6 on arrays, tuples,
  dicts, float16 and 2-D logits; a torch model against its float16 copy and an ONNX
  Runtime session against NumPy give the figures computed from their outputs.
- ``write_report``'s HTML, parsed with html.parser: every section, the figures, every
  name escaped (a result named ``<script>...`` is text, and no ``<script`` tag exists),
  nothing loaded from anywhere, budgets met and failed with their margins, the load
  section from a stand-in with the fields of a load result.
- Its Markdown renders as tables in GitHub's engine (cmark-gfm) and in markdown-it, each
  name cell reading back as the name given.
The results are built from fixed samples (``_stats_from_samples``): no timing, so the
figures the report states are known.
"""
from __future__ import annotations

import copy
import re
from html.parser import HTMLParser

import numpy as np
import pytest

from spatialhub.utils.profiling import (BenchmarkStats, check_outputs, compare_benchmarks,
                                        write_report)
from spatialhub.utils.profiling import _native
from spatialhub.utils.profiling._numbers import number
from spatialhub.utils.profiling.report import render_report

from _report_scene import EVIL, _stats, _sweep, make_scene


@pytest.fixture(scope="module")
def scene():
    return make_scene()


# ---- check_outputs against NumPy ----------------------------------------------------------

def _expect(ref, cand, rtol, atol):
    """NumPy's own figures for one output pair, in float64."""
    r, c = np.asarray(ref, np.float64), np.asarray(cand, np.float64)
    d = np.abs(c - r)
    nz = r != 0
    score = d / (atol + rtol * np.abs(r))
    return {"abs": d.max(), "rel": (d[nz] / np.abs(r[nz])).max(),
            "passed": np.allclose(c, r, rtol=rtol, atol=atol),
            "worst": np.unravel_index(np.argmax(score), r.shape), "score": score.max()}


def _cos(a, b):
    a = np.concatenate([np.ravel(np.asarray(x, np.float64)) for x in a])
    b = np.concatenate([np.ravel(np.asarray(x, np.float64)) for x in b])
    return a @ b / np.linalg.norm(a) / np.linalg.norm(b)


def test_arrays_agree_with_numpy():
    rng = np.random.default_rng(1)
    ref = rng.standard_normal((16, 9))
    cand = ref + rng.standard_normal(ref.shape) * 1e-4
    got = check_outputs(lambda x: x, lambda x: cand, [ref])
    want = _expect(ref, cand, 1e-3, 1e-5)
    assert got.max_abs_error == pytest.approx(want["abs"], rel=1e-6, abs=1e-12)
    assert got.max_rel_error == pytest.approx(want["rel"], rel=1e-6)
    assert got.cosine_similarity == pytest.approx(_cos([ref], [cand]), abs=1e-6)
    assert got.passed == want["passed"]
    assert got.worst_index == tuple(int(i) for i in want["worst"])
    assert got.worst_key is None
    assert got.worst_reference == ref[want["worst"]]
    assert got.worst_candidate == cand[want["worst"]]
    assert got.elements == ref.size and got.nonfinite == 0
    assert got.top1_agreement == pytest.approx(_top1(ref, cand, 1e-3, 1e-5))


def _top1(ref, cand, rtol, atol):
    """NumPy's top-1 agreement: the candidate's arg-max, or a class the reference scores
    within the tolerance of its top."""
    pick = np.argmax(cand, 1)
    top = ref.max(1)
    return np.mean((pick == np.argmax(ref, 1))
                   | (top - ref[np.arange(len(ref)), pick] <= atol + rtol * np.abs(top)))


def test_passed_is_allclose_on_every_output():
    ref = np.array([1.0, 100.0, 0.0])
    # inside: |c - r| <= atol + rtol * |r| element by element (relative to the reference)
    inside = ref + np.array([1e-3 * 1.0, 1e-3 * 100.0, 1e-5]) * 0.99
    outside = ref + np.array([0.0, 0.0, 2e-5])
    assert check_outputs(lambda: ref, lambda: inside, []).passed
    bad = check_outputs(lambda: ref, lambda: outside, [])
    assert not bad.passed and bad.worst_index == (2,)
    assert bad.max_rel_error == 0.0          # the reference is 0 there: atol judges it
    assert bad.max_abs_error == pytest.approx(2e-5, rel=1e-9)


def test_tuples_and_dicts_agree_with_numpy():
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((5, 4)), rng.standard_normal((3,)) * 50
    a2, b2 = a + 1e-6, b + rng.standard_normal(3) * 1e-2
    got = check_outputs(lambda: (a, b), lambda: [a2, b2], [])
    ea, eb = _expect(a, a2, 1e-3, 1e-5), _expect(b, b2, 1e-3, 1e-5)
    assert got.max_abs_error == pytest.approx(max(ea["abs"], eb["abs"]), rel=1e-6)
    assert got.max_rel_error == pytest.approx(max(ea["rel"], eb["rel"]), rel=1e-6)
    assert got.passed == (ea["passed"] and eb["passed"])
    assert got.cosine_similarity == pytest.approx(_cos([a, b], [a2, b2]), abs=1e-6)
    worst = max((ea, 0), (eb, 1), key=lambda t: t[0]["score"])
    assert got.worst_key == worst[1]
    assert [d.key for d in got.outputs] == [0, 1]

    # dicts: paired by key, whatever the order
    d = check_outputs(lambda: {"logits": a, "box": b}, lambda: {"box": b2, "logits": a2}, [])
    assert d.max_abs_error == got.max_abs_error
    assert d.worst_key == ("logits", "box")[worst[1]]
    assert [o.key for o in d.outputs] == ["logits", "box"]


def test_float16_candidate_is_judged_in_float64():
    rng = np.random.default_rng(3)
    ref = rng.standard_normal((64, 10)).astype(np.float32)
    cand = ref.astype(np.float16)
    got = check_outputs(lambda: ref, lambda: cand, [])
    want = _expect(ref, cand, 1e-3, 1e-5)
    assert got.max_abs_error == pytest.approx(want["abs"], rel=1e-6)
    assert got.max_rel_error == pytest.approx(want["rel"], rel=1e-6)
    assert got.outputs[0].candidate_dtype == "float16"
    assert got.passed == want["passed"]


def test_top1_agreement_of_2d_logits():
    rng = np.random.default_rng(4)
    ref = rng.standard_normal((200, 5))
    cand = ref.copy()
    flip = rng.choice(200, 37, replace=False)
    cand[flip] = -cand[flip]                 # another arg-max on most of those rows
    got = check_outputs(lambda: ref, lambda: cand, [])
    want = np.mean(np.argmax(ref, 1) == np.argmax(cand, 1))
    assert 0.7 < want < 0.95
    assert got.top1_agreement == pytest.approx(want, abs=1e-12)
    assert _top1(ref, cand, 1e-3, 1e-5) == want      # no near-tie among these rows
    assert not got.passed
    # a tie in the reference (saturated outputs) is not a disagreement
    tied = np.array([[1.0, 1.0, 0.2], [0.1, 0.9, 0.9]])
    jitter = tied + np.array([[0, 1e-7, 0], [0, 0, 1e-7]])
    assert check_outputs(lambda: tied, lambda: jitter, []).top1_agreement == 1.0
    assert np.mean(np.argmax(tied, 1) == np.argmax(jitter, 1)) == 0.0
    # not logits: 1-D, integer, or one column
    assert check_outputs(lambda: ref[:, 0], lambda: ref[:, 0], []).top1_agreement is None
    assert check_outputs(lambda: ref[:, :1], lambda: ref[:, :1], []).top1_agreement is None


def test_nonfinite_elements_fail_and_are_counted():
    ref = np.array([1.0, np.inf, 2.0, np.nan])
    cand = np.array([1.0, np.inf, np.nan, np.nan])
    got = check_outputs(lambda: ref, lambda: cand, [])
    assert not got.passed and got.nonfinite == 2     # NaN never equals; inf == inf does
    assert got.max_abs_error == 0.0                  # over the elements finite on both sides
    assert got.worst_index == (2,)


def test_inputs_are_one_calls_arguments():
    seen = []

    def f(*args, **kwargs):
        seen.append((args, kwargs))
        return np.zeros(2)

    check_outputs(f, f, [1, 2])
    check_outputs(f, f, {"x": 3})
    check_outputs(f, f, np.ones(3))
    assert seen[0] == ((1, 2), {}) and seen[2] == ((), {"x": 3})
    assert seen[4][0][0].shape == (3,)
    with pytest.raises(TypeError, match="inputs must be"):
        check_outputs(f, f, 5)


@pytest.mark.parametrize("cand, match", [
    (lambda: np.zeros((2, 3)), "shape"),
    (lambda: (np.zeros(2), np.zeros(2)), "1 output"),
])
def test_outputs_that_cannot_be_paired_are_refused(cand, match):
    with pytest.raises(ValueError, match=match):
        check_outputs(lambda: np.zeros(2), cand, [])


def test_bad_tolerances_and_models_are_refused():
    with pytest.raises(ValueError, match="rtol"):
        check_outputs(np.abs, np.abs, [np.ones(2)], rtol=-1)
    with pytest.raises(TypeError, match="atol"):
        check_outputs(np.abs, np.abs, [np.ones(2)], atol="0")
    with pytest.raises(TypeError, match="callable"):
        check_outputs(np.abs, 3, [np.ones(2)])


def test_result_is_plain_data():
    got = check_outputs(np.tanh, lambda x: np.tanh(x) + 1e-7, [np.linspace(-1, 1, 6)],
                        name="fast tanh")
    d = got.to_dict()
    assert d["candidate"] == "fast tanh" and d["reference"] == "tanh"
    assert check_outputs(np.tanh, np.tanh, [np.ones(2)], reference_name="exact").reference \
        == "exact"
    assert check_outputs(lambda x: x, lambda x: x, [np.ones(2)]).name == \
        "candidate vs reference"
    assert isinstance(d["worst_index"], list) and isinstance(d["outputs"], list)
    assert got.name == "fast tanh vs tanh"
    text = str(got)
    assert text.startswith("fast tanh vs tanh: passed") and "e-0" not in text


def test_torch_model_and_its_float16_copy():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 10)).eval()
    half = copy.deepcopy(model).half()
    x = np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32)
    got = check_outputs(model, half, [x], rtol=1e-2, atol=1e-2, name="fp16")
    with torch.no_grad():      # what the two models give, by hand
        ref = model(torch.from_numpy(x)).numpy()
        cand = half(torch.from_numpy(x).half()).float().numpy()
    want = _expect(ref, cand, 1e-2, 1e-2)
    assert got.max_abs_error == pytest.approx(want["abs"], rel=1e-6)
    assert got.max_rel_error == pytest.approx(want["rel"], rel=1e-6)
    assert got.passed == want["passed"] and got.passed
    assert got.top1_agreement == pytest.approx(_top1(ref, cand, 1e-2, 1e-2))
    assert got.outputs[0].candidate_dtype == "float16"
    assert got.reference == "Sequential"
    # a dynamically quantised copy takes float32 inputs as they are
    quantize = getattr(getattr(torch, "ao", None), "quantization", None)
    if quantize is not None and hasattr(quantize, "quantize_dynamic"):
        import warnings

        with warnings.catch_warnings():    # torch 2.9+: deprecated for torchao
            warnings.simplefilter("ignore")
            q = quantize.quantize_dynamic(copy.deepcopy(model), {torch.nn.Linear},
                                          dtype=torch.qint8)
        qc = check_outputs(model, q, (torch.from_numpy(x),), rtol=0.05, atol=0.05)
        assert qc.cosine_similarity > 0.99


def test_onnx_session_against_numpy():
    ort = pytest.importorskip("onnxruntime")
    from _tiny_onnx import linear_model_bytes

    sess = ort.InferenceSession(linear_model_bytes(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(5).standard_normal((6, 4))       # float64: cast to float32
    got = check_outputs(lambda a: a @ np.ones((4, 3)) + 0.5, sess, [x], name="onnx")
    want = _expect(x @ np.ones((4, 3)) + 0.5,
                   x.astype(np.float32) @ np.ones((4, 3), np.float32) + np.float32(0.5),
                   1e-3, 1e-5)
    assert got.max_abs_error == pytest.approx(want["abs"], rel=1e-5, abs=1e-9)
    assert got.passed
    assert got.outputs[0].key == "y"              # the session's output name
    byname = check_outputs(lambda x: x @ np.ones((4, 3)) + 0.5, sess, {"x": x})
    assert byname.max_abs_error == got.max_abs_error


# ---- the page, parsed ---------------------------------------------------------------------

class Page(HTMLParser):
    """Every tag with its attributes, the text, and the text of each section."""

    def __init__(self, html):
        super().__init__(convert_charrefs=True)
        self.tags, self.text, self.sections = [], [], {}
        self._section = None
        self.feed(html)
        self.text = "".join(self.text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "section":
            self._section = dict(attrs).get("id")
            self.sections[self._section] = ""

    def handle_data(self, data):
        self.text.append(data)
        if self._section is not None:
            self.sections[self._section] += data


@pytest.fixture(scope="module")
def html(scene, tmp_path_factory):
    path = tmp_path_factory.mktemp("report") / "report.html"
    got = write_report(scene["results"], path, title=f"Ship {EVIL}?",
                       budgets=scene["budgets"], command="python bench.py --all")
    assert got == path
    return path.read_text(encoding="utf-8")


def test_every_section_is_there(html):
    page = Page(html)
    assert list(page.sections) == ["summary", "results", "distributions", "sweep", "load",
                                   "outputs", "flags", "environment", "reproduce"]
    assert sum(1 for t, _ in page.tags if t == "svg") >= 4
    assert sum(1 for t, _ in page.tags if t == "figure") >= 4
    assert html.startswith("<!DOCTYPE html>")
    # a figure says what it shows in words: title and description
    svgs = [a for t, a in page.tags if t == "svg"]
    assert all(a.get("role") == "img" and a.get("aria-labelledby") for a in svgs)


def test_every_name_is_escaped_and_no_script_exists(html):
    assert "<script" not in html.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    page = Page(html)
    assert EVIL in page.text                   # it reads as the name given
    assert f"Ship {EVIL}?" in page.text
    assert not any(t == "script" for t, _ in page.tags)
    assert not any(k.lower().startswith("on") for _, a in page.tags for k in a)


def test_nothing_is_loaded_from_anywhere(html):
    page = Page(html)
    for tag, attrs in page.tags:
        assert "src" not in attrs, tag
        for k in ("href", "xlink:href", "action", "srcset", "poster", "data"):
            v = attrs.get(k)
            assert v is None or v.startswith("#"), (tag, k, v)
        assert tag not in ("link", "img", "iframe", "object", "embed", "base", "script")
    assert not re.search(r"url\((?!#)", html)
    assert "@import" not in html and "http://" not in html and "https://" not in html
    csp = [a for t, a in page.tags if t == "meta" and a.get("http-equiv")]
    assert csp and "default-src 'none'" in csp[0]["content"]


def test_the_verdict_states_the_comparisons(html, scene):
    page = Page(html)
    summary = page.sections["summary"]
    c = compare_benchmarks(scene["base"], scene["fast"])
    assert c.verdict == "faster"
    assert (f"{EVIL}: faster: {number(c.ratio)}x the median of fp32 (95% interval "
            f"{number(c.ci95_low)} to {number(c.ci95_high)})") in summary
    assert "Baseline: fp32" in summary
    assert c.reason in summary


def test_budgets_met_and_failed_with_their_margins(html, scene):
    summary = Page(html).sections["summary"]
    fast, base, same = scene["fast"], scene["base"], scene["same"]
    assert base.p99_ms > 9.0 > fast.p99_ms
    over = base.p99_ms - 9.0
    assert f"{number(over)} ms over ({_pct(over / 9)})" in summary
    under = 9.0 - fast.p99_ms
    assert f"{number(under)} ms under ({_pct(under / 9)})" in summary
    # a result's own limit wins over the global one
    assert 9.0 < same.p99_ms < 12.5
    assert f"{number(12.5 - same.p99_ms)} ms under" in summary
    assert "Does not meet the stated checks" in summary
    assert f"fp32: p99_ms {number(base.p99_ms)} ms against ≤ 9 ms" in summary
    # the sweep: which batch sizes meet it
    sweep = _sweep()
    ok = [b for s, b in zip(sweep, sweep.values) if s.p99_ms <= 9.0]
    assert ok and len(ok) < 3
    assert f"met at batch_size {', '.join(map(str, ok))}" in summary
    # the load run: its p99 against the global budget
    assert f"net-served: p99_ms {number(7.0)} ms" not in summary     # 7 <= 9: met


def _pct(x):
    v = 100 * x
    return f"{v:.1f}%" if abs(v) < 10 else f"{v:.0f}%"


def test_outputs_section_states_each_check(html, scene):
    page = Page(html)
    text = page.sections["outputs"]
    bad = scene["bad"]
    assert "int8 vs reference" in text and "FAILED" in text
    assert number(bad.max_abs_error) in text
    assert "outputs differ beyond tolerance for int8 vs reference" in page.sections["summary"]


def test_load_section_of_a_peak_search(html, scene):
    """find_peak_qps's result: the peak its search found, with the searched percentile's
    value and interval at that rate, the bound drawn, a row per probe, the peak marked."""
    text = Page(html).sections["load"]
    assert "net-served: latency against the offered rate" in text
    at = scene["peak"].search["probes"][2]
    assert ("The highest rate whose P99 meets the bound of 10 ms: 300 requests/s "
            f"(net-served; P99 {number(at['value_ms'])} ms, 95% interval "
            f"{number(at['ci_low_ms'])} to {number(at['ci_high_ms'])} ms") in text, text
    assert "bound: P99 ≤ 10 ms" in text
    assert text.count("net-served") >= 6          # a row per rate tried
    assert "net-served (peak)" in text and text.count("(peak)") == 1


def test_a_search_capped_at_the_request_limit_reads_at_least_and_quotes_the_probe_that_met_it():
    """find_peak_qps runs an undecided probe again at the same rate: the peak's interval is
    the one that met the bound, not the short probe's; a search the request cap stopped
    says the peak is at least that rate."""
    from _report_scene import _load, _search

    short = _load(300, 30.0, completed=400, requests=400)      # undecided: too few above p99
    met = _load(300, 7.0)
    search = _search([_load(150, 5.0), short, met], 10.0, 300.0)
    search["probes"][1]["verdict"] = "undecided"
    search["capped"] = True
    peak = _load(300, 7.0, search=search)
    md = render_report([peak], format="markdown")
    assert (f"300 requests/s (net-served; P99 {number(met.p99_ms)} ms, 95% interval "
            f"{number(met.p99_ci_low_ms)} to {number(met.p99_ci_high_ms)} ms, within the "
            f"bound): the most a probe may ask for (LOAD_MAX_REQUESTS), so the peak is at "
            f"least that.") in md, md
    assert md.count("(peak)") == 1
    assert "met up to 300 requests/s (the most a probe may ask for)" in md


def test_a_load_runs_own_flags_are_explained_and_a_searchs_probes_flag_nothing(html, scene):
    flags = Page(html).sections["flags"]
    assert set(scene["jammed"].flags) == {"overloaded", "requests unserved", "few requests"}
    # the warning's own words for a cause, the load page's for the rest, each with a remedy
    assert "overloaded (net-jammed): Requests arrived faster than they were served" in flags
    assert "Remedy: Lower qps or raise workers." in flags
    assert "requests unserved (net-jammed): requests still waiting" in flags
    assert "few requests (net-jammed): fewer than 1,000 requests completed" in flags
    assert "requests above it. Remedy: A longer duration" in flags
    # the search's 500 req/s probe was overloaded by design: net-served is not flagged
    assert "net-served" not in flags


def test_a_search_that_found_no_peak_says_so(tmp_path):
    from _report_scene import _load, _search

    runs = [_load(q, 30.0) for q in (50, 100)]
    none = _load(50, 30.0, search=_search(runs, 10.0, None))
    out = write_report([none], tmp_path / "r.html")
    text = Page(out.read_text()).sections["load"]
    assert "No rate tried met the bound (P99 ≤ 10 ms)" in text and "down to 50" in text
    assert "(peak)" not in text and "The highest rate" not in text
    # the verdict says the bound was missed; a budget is not judged on the fallback run
    summary = Page(out.read_text()).sections["summary"]
    assert "Does not meet the stated checks" in summary
    assert "no rate tried met net-served's latency bound (P99 ≤ 10 ms)" in summary
    out = write_report([none], tmp_path / "b.html", budgets={"p99_ms": 1000})
    summary = Page(out.read_text()).sections["summary"]
    assert "net-served: p99_ms not measured" in summary and "budgets met" not in summary


def test_environment_and_reproduction(html):
    page = Page(html)
    env = page.sections["environment"]
    assert "3.11.7 (CPython)" in env and np.__version__ in env and "Test CPU, 2 CPUs" in env
    assert "not loaded" in env                   # torch
    repro = page.sections["reproduce"]
    assert '"spatialhub-profiling==9.9.9"' in repro and f'"numpy=={np.__version__}"' in repro
    assert "python bench.py --all" in repro


def test_flags_in_plain_words(html, scene):
    flags = Page(html).sections["flags"]
    words = {f: _native._warning_class((f,)).__doc__.split("\n")[0]
             for s in (scene["base"], scene["fast"]) for f in s.flags}
    assert words, "the fixed samples carry a flag"
    for flag, meaning in words.items():
        assert f"{flag} (" in flags and meaning in flags


def test_no_placeholder_or_raw_float_in_the_page(html, scene):
    text = Page(html).text
    assert "?" not in text.replace(f"Ship {EVIL}?", "")
    assert not re.search(r"\d[eE][+-]\d", text)
    assert "nan" not in text.lower().split()


# ---- options ------------------------------------------------------------------------------

def test_format_from_the_suffix_or_the_argument(tmp_path):
    s = _stats("a", 1.0)
    assert write_report(s, tmp_path / "r.md").read_text().startswith("# Readiness report")
    assert write_report(s, tmp_path / "r.htm").read_text().startswith("<!DOCTYPE html>")
    assert write_report(s, tmp_path / "r.txt", format="markdown").read_text().startswith("#")
    with pytest.raises(ValueError, match="format"):
        write_report(s, tmp_path / "r.txt")
    with pytest.raises(ValueError, match="format"):
        write_report(s, tmp_path / "r.html", format="pdf")


def test_baseline_by_name_none_or_false():
    a, b, c = _stats("a", 1.0), _stats("b", 2.0, seed=4), _stats("c", 1.0, seed=5)
    md = render_report([a, b, c], baseline="b", format="markdown")
    assert "Baseline: b (" in md and "- a: **faster**" in md
    md = render_report([a, b, c], baseline=False, format="markdown")
    assert "Baseline" not in md and "against the baseline" not in md
    assert "| Result | Budgets | Outputs |" in md
    md = render_report([a, b], format="markdown")
    assert "Baseline: a (" in md
    with pytest.raises(ValueError, match="baseline 'z'"):
        render_report([a, b], baseline="z")
    outside = _stats("outside", 1.0, seed=9)
    assert "Baseline: outside" in render_report([a], baseline=outside, format="markdown")


def test_comparisons_given_are_shown_as_they_are():
    a, b = _stats("a", 1.0), _stats("b", 1.5, seed=4)
    c = compare_benchmarks(a, b, margin=0.2, run_spread=0.01)
    assert c.verdict == "slower"
    md = render_report([a, b, c], format="markdown")
    assert f"- b: **slower**: {number(c.ratio)}x the median of a" in md
    assert "Baseline:" not in md                 # the comparison given is the verdict
    assert "| a | the baseline | baseline |" in md


def test_results_without_samples_are_tabled_not_drawn():
    bare = BenchmarkStats("bare", "CPU", 1.0, 1.0, 0.1, 1.2, 0.9, 1.3, 1000.0, 5, 20)
    other = _stats("other", 1.0)
    html = render_report([other, bare])
    page = Page(html)
    assert "bare" in page.sections["results"]
    assert "not compared" in page.sections["summary"]
    assert "Without raw samples (not drawn): bare" in page.sections["distributions"]


@pytest.mark.parametrize("budgets, error, match", [
    ({"p99": 3}, ValueError, "no result has that figure"),
    ({"nobody": {"p99_ms": 3}}, ValueError, "no result is named"),
    ({"a": {"gpu_p95": 3}}, ValueError, "no such figure"),
    ({"p99_ms": "fast"}, TypeError, "must be a number"),
    ({"p99_ms": float("nan")}, ValueError, "finite"),
    ([("p99_ms", 3)], TypeError, "dict"),
])
def test_budget_mistakes_are_said(budgets, error, match):
    with pytest.raises(error, match=match):
        render_report([_stats("a", 1.0)], budgets=budgets)


def test_floors_and_output_budgets():
    a = _stats("a", 1.0)
    chk = check_outputs(lambda: np.ones(3), lambda: np.ones(3) * 1.001, [], name="a")
    md = render_report([a, chk], budgets={"fps": 10 * a.fps, "a": {"cosine_similarity": 0.99}},
                       format="markdown")
    assert f"| a | fps | ≥ {number(10 * a.fps)} FPS |".replace(number(10 * a.fps),
                                                               _exact(10 * a.fps)) in md
    assert "short" in md and "**FAILED**" in md
    assert "| a vs reference | cosine_similarity | ≥ 0.99 |" in md


def _exact(x):
    from spatialhub.utils.profiling._numbers import exact
    return exact(x)


def test_wrong_results_are_refused():
    with pytest.raises(TypeError, match=r"results\[1\] is a str"):
        render_report([_stats("a", 1.0), "b"])
    with pytest.raises(ValueError, match="no results"):
        render_report([])
    with pytest.raises(TypeError, match="OutputCheck"):
        render_report([_stats("a", 1.0)], outputs=[1])


# ---- the Markdown variant renders as tables ------------------------------------------------

def _tables(html):
    """[[cells of each row]] of every table in an HTML fragment."""
    class T(HTMLParser):
        def __init__(self):
            super().__init__(convert_charrefs=True)
            self.tables, self.cell = [], None

        def handle_starttag(self, tag, attrs):
            if tag == "table":
                self.tables.append([])
            elif tag == "tr":
                self.tables[-1].append([])
            elif tag in ("td", "th"):
                self.cell = ""

        def handle_endtag(self, tag):
            if tag in ("td", "th"):
                self.tables[-1][-1].append(self.cell.strip())
                self.cell = None

        def handle_data(self, data):
            if self.cell is not None:
                self.cell += data

    t = T()
    t.feed(html)
    return t.tables


NAMES = [EVIL, "a|b", "vit_b_16", "__init__", "*bold* `code` [link](x)", "$5 & R&D"]


@pytest.mark.parametrize("engine", ["cmarkgfm", "markdown-it"])
def test_markdown_renders_as_tables_with_each_name_as_given(engine, scene):
    results = [_stats(n, 1.0 + i, seed=20 + i) for i, n in enumerate(NAMES)]
    md = render_report(results + [scene["check"]], format="markdown",
                       budgets={"p99_ms": 2.0})
    if engine == "cmarkgfm":
        cmarkgfm = pytest.importorskip("cmarkgfm")
        from cmarkgfm.cmark import Options
        html = cmarkgfm.github_flavored_markdown_to_html(md, options=Options.CMARK_OPT_UNSAFE)
    else:
        markdown_it = pytest.importorskip("markdown_it")
        html = markdown_it.MarkdownIt("commonmark").enable("table").render(md)
    tables = _tables(html)
    assert len(tables) >= 5
    results_table = next(t for t in tables if t[0][:3] == ["Result", "Device",
                                                          "P50 (95% CI) (ms)"])
    assert [row[0] for row in results_table[1:]] == NAMES
    summary = next(t for t in tables if t[0][0] == "Result" and "Verdict" in t[0])
    assert [row[0] for row in summary[1:len(NAMES) + 1]] == NAMES
    assert "<script" not in html.lower()


def test_a_budget_inside_the_interval_says_a_rerun_may_decide_otherwise():
    s = _stats("only", 1.0)
    just_above = (s.median_ms + s.ci95_high_ms) / 2       # met, but the interval crosses
    md = render_report([s], format="markdown", budgets={"median_ms": just_above})
    assert "crosses the limit: a rerun may fail it" in md and "**met**" in md
    just_below = (s.median_ms + s.ci95_low_ms) / 2
    md = render_report([s], format="markdown", budgets={"median_ms": just_below})
    assert "crosses the limit: a rerun may meet it" in md and "**FAILED**" in md
    md = render_report([s], format="markdown", budgets={"median_ms": 2 * s.ci95_high_ms})
    assert "crosses" not in md
