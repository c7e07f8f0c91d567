"""What a user reads when a figure should not be trusted (issue 20; docs/statistics.md,
"Warnings"): at most one warning per benchmark call, listing its causes; a fixed text per
cause with the numbers on the warning's attributes, so a loop of thousands of benchmarks
says a handful of lines and the warnings registry stays small; a class per cause; the
location is the user's own line, however many of our wrappers lie between; every remedy
names an argument of the function the user called; a busy machine is said once per process
while it stays busy."""
import inspect
import json
import re
import subprocess
import sys
import textwrap
import warnings

import pytest

import spatialhub.utils.profiling as prof
from spatialhub.utils.profiling import _native, benchmark_callable

LABELS = {   # a cause as results (stats.flags) and warnings (.causes) name it -> its class
    "noisy": "NoisyWarning", "multimodal": "MultimodalWarning", "drifting": "DriftingWarning",
    "busy machine": "BusyMachineWarning", "launch-bound": "LaunchBoundWarning",
    "overhead-dominated": "OverheadWarning", "page faults": "PageFaultWarning",
    "warm-up too short": "WarmupWarning", "coarse timer": "CoarseTimerWarning",
    "GPU clock moved": "GPUClockWarning", "GPU throttled": "ThrottledWarning",
    "shared GPU": "SharedGPUWarning", "no device sync": "NoDeviceSyncWarning",
    "VRAM not tracked": "VRAMNotTrackedWarning", "GPU time not measured": "GPUTimeWarning",
    "counters not available": "CountersWarning", "overloaded": "OverloadedWarning",
    "no requests": "NoRequestsWarning",
}
CAUSES = list(LABELS.values())


def recorded(fn, *args, **kwargs):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = fn(*args, **kwargs)
    return out, [r for r in w if issubclass(r.category, prof.BenchmarkWarning)]


def test_one_class_per_cause_under_benchmark_warning():
    for name in CAUSES:
        cls = getattr(prof, name)
        assert issubclass(cls, prof.BenchmarkWarning) and name in prof.__all__
        assert cls.__module__ == "spatialhub.utils.profiling" and cls.__doc__


def test_one_warning_per_call_and_its_class_matches_every_cause():
    # a no-op on 20 iterations: overhead-dominated, and often noisy or drifting as well
    for _ in range(5):
        s, w = recorded(benchmark_callable, _native._noop, num_warmup=1, num_iters=20)
        assert len(w) <= 1
        if w:
            m = w[0].message
            assert m.stats is s and m.benchmark == "BenchmarkTarget"
            assert set(m.causes) <= set(s.flags) | {"coarse timer"}
            for label in m.causes:
                assert isinstance(m, getattr(prof, LABELS[label])), (label, type(m).__mro__)
            assert all(f"  {label}: " in str(m) for label in m.causes)


def test_a_class_filter_silences_its_cause():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=prof.OverheadWarning)
        benchmark_callable(_native._noop, num_warmup=1, num_iters=20)
    assert not [r for r in w if issubclass(r.category, prof.OverheadWarning)]


# every number a warning can carry, at values that make its line the longest
EXAMPLE = dict(iqr_share=0.43, p95_share=2.7, mode_low_ms=1.0, mode_high_ms=1.62,
               slow_share=0.23, drift=-0.18, others_cpu_share=0.76, load_average=2.6, cpus=2,
               host_share=0.93, median_ms=4e-05, overhead_ms=2e-05, faults_per_call=1234.0,
               head_ms=5.72, steady_ms=1.23, head_calls=5, settle_calls=1234567,
               timer_resolution_ns=1000.0, clock_min_mhz=1410.0, clock_max_mhz=1980.0,
               reasons="SwPowerCap, HwSlowdown", other_processes=12345, device="xpu",
               reason="the driver has no cuMemGetInfo_v2 " * 5)


def test_each_cause_is_one_short_line_in_the_callers_words():
    """One line a cause, at most ~100 characters (never over 110, whatever the numbers),
    its numbers coarse and no placeholder or exponent; each knob a remedy names is a
    parameter of the function the user called, a flag of the CLI, an option of the plugin."""
    from spatialhub.utils.profiling import _words
    from spatialhub.utils.profiling.pytest_plugin.options import add_options

    class Parser:   # the plugin's option names, as pytest would register them
        names = set()

        def getgroup(self, name):
            return self

        def addoption(self, *names, **kw):
            Parser.names.update(names)

    add_options(Parser())
    from spatialhub.utils.profiling.cli import build_parser
    cli_flags = {o for a in build_parser()._actions for o in a.option_strings}
    params = {
        # a direct call's words serve benchmark_callable and benchmark_load alike
        _words.CALLABLE: set(inspect.signature(prof.benchmark_callable).parameters)
        | set(inspect.signature(prof.benchmark_load).parameters),
        _words.MODELS: set(inspect.signature(prof.benchmark_onnx).parameters)
        & set(inspect.signature(prof.profile_model).parameters),
        _words.COMPARE: inspect.signature(prof.compare_callables).parameters,
        _words.CLI: cli_flags,
        # benchmark.load(func, qps=..., workers=...) takes benchmark_load's parameters
        _words.PYTEST: Parser.names | set(inspect.signature(prof.benchmark_load).parameters),
    }
    for words, known in params.items():
        for attrs in (EXAMPLE, None):
            with _words.remedy_words(words):
                texts = _native._warning_texts(attrs)
            assert sorted(texts) == sorted(CAUSES)
            for cls, text in texts.items():
                assert "\n" not in text and len(text) <= 110, (words, cls, len(text), text)
                assert "{" not in text and "?" not in text and "nan" not in text, text
                assert not re.search(r"\de[+-]\d", text), (words, cls, text)
                if cls in ("OverloadedWarning", "NoRequestsWarning") and \
                        words in (_words.MODELS, _words.COMPARE):
                    continue    # said by benchmark_load only: direct, CLI and pytest words
                for named in re.findall(r"(?:raise|set) ((?:--)?[a-z_-]+)", text):
                    assert named in known, (words, cls, named)
    t = _native._warning_texts(EXAMPLE)
    assert "raise num_warmup" in t["DriftingWarning"] and "18%" not in t["DriftingWarning"]
    assert "drifting: latency moved 20% over the run" in t["DriftingWarning"]   # coarse: to 10%
    assert "set num_warmup to 1,200,000 or more" in t["WarmupWarning"]     # 2 digits
    with _words.remedy_words(_words.MODELS):
        assert "raise warmup" in _native._warning_texts(EXAMPLE)["DriftingWarning"]
    with _words.remedy_words(_words.PYTEST):
        t = _native._warning_texts(EXAMPLE)
    assert "raise --benchmark-warmup-iterations" in t["DriftingWarning"]
    said = " ".join(t.values())
    assert not re.search(r"num_warmup|num_iters|benchmark_repeated|compare_callables", said)


def test_the_texts_stay_few_however_many_numbers_a_loop_sees():
    """The registry keys on the text: 10,000 different share values give a handful of
    distinct lines, not 10,000."""
    import numpy as np
    lines = {_native._warning_texts(dict(EXAMPLE, iqr_share=float(x)))["NoisyWarning"]
             for x in np.random.default_rng(0).uniform(0.1, 3.0, 10_000)}
    assert len(lines) <= 20, len(lines)


def test_torch_threads_are_named_when_the_samples_split(monkeypatch):
    """Two modes with torch running more than one thread: the remedy is the threads."""
    import types
    fake = types.SimpleNamespace(get_num_threads=lambda: 2)
    monkeypatch.setitem(sys.modules, "torch", fake)
    t = _native._warning_texts(EXAMPLE)
    assert "2 torch threads: torch.set_num_threads(1)" in t["MultimodalWarning"]
    assert "pin threads (torch.set_num_threads(1))" in t["NoisyWarning"]
    fake.get_num_threads = lambda: 1
    assert "torch" not in _native._warning_texts(EXAMPLE)["MultimodalWarning"]


def test_no_c_string_matches_a_python_name_of_the_package():
    """The core takes its words from its callers (remedy_words), never from the stack:
    no function or file name of the package is compared in warn.c."""
    import pathlib
    src = (pathlib.Path(__file__).resolve().parents[1] / "csrc" / "types" / "warn.c").read_text()
    for name in ('"benchmark_onnx"', '"profile_model"', '"sweep"', '"cli.py"',
                 '"__main__.py"', "co_name", "CompareWithASCIIString(fn"):
        assert name not in src, name


def _script(code, tmp_path):
    path = tmp_path / "user_script.py"
    path.write_text(textwrap.dedent(code))
    done = subprocess.run([sys.executable, "-W", "default", str(path)], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_a_loop_of_thousands_of_benchmarks_says_a_handful_of_lines(tmp_path):
    from reliability_support import UNDER_SANITIZER
    if UNDER_SANITIZER:   # ASan's timings give every run causes of its own: a normal build's figure
        pytest.skip("the number of distinct warnings follows the timings of the normal build")
    # every message used to carry its own numbers: each was a new registry entry, shown
    # again (about 1,000 blocks and 400 kB for 2,050 benchmarks)
    done = _script("""
        import json, sys
        from spatialhub.utils.profiling import _native, benchmark_callable, suppressed_warnings
        def work():
            sum(range(50))
        for i in range(2050):
            benchmark_callable(work if i % 2 else _native._noop, num_warmup=1, num_iters=20,
                               track_ram=False)
        registry = globals().get("__warningregistry__", {})
        print(json.dumps([len(repr(registry)), suppressed_warnings()]))
    """, tmp_path)
    size, suppressed = json.loads(done.stdout.strip().splitlines()[-1])
    lines = done.stderr.splitlines()
    assert len(lines) <= 60, done.stderr[-3000:]
    assert size < 100_000, size
    # each warning points at the user's line, not at the library
    heads = [ln for ln in lines if "Warning: benchmark" in ln]
    assert heads and all(ln.startswith(str(tmp_path / "user_script.py") + ":")
                         for ln in heads), heads
    assert set(suppressed) <= {"busy machine"}


def test_warnings_through_our_wrappers_point_at_the_users_line():
    # sweep -> benchmark_callable: the frames of this package are skipped
    def factory(n):
        return _native._noop, ()

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1
        prof.sweep(factory, [1, 2], num_warmup=1, num_iters=20)
    w = [r for r in w if issubclass(r.category, prof.BenchmarkWarning)]
    assert w and all(r.filename == __file__ and r.lineno == line for r in w), \
        [(r.filename, r.lineno) for r in w]


def test_the_cli_says_each_warning_in_a_short_line_with_its_own_arguments(tmp_path):
    mod = tmp_path / "decaying_mod.py"
    mod.write_text(textwrap.dedent("""
        import time
        calls = [0]
        def work():
            calls[0] += 1
            time.sleep(max(0.0002, 0.012 - 0.001 * calls[0]))
    """))
    done = subprocess.run(
        [sys.executable, "-m", "spatialhub.utils.profiling", "--callable", "decaying_mod:work",
         "--warmup", "1", "--iters", "40", "--no-progress"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
        env={**__import__("os").environ, "PYTHONPATH": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert "spatialhub-bench: warning: benchmark" in done.stderr
    assert "warm-up too short: first calls" in done.stderr and "set --warmup to" in done.stderr
    assert "e+0" not in done.stderr and "e-0" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) <= 5 and max(map(len, lines)) <= 120, done.stderr


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "spatialhub.utils.profiling", *args],
                          capture_output=True, text=True, timeout=600, cwd=cwd)


def test_cli_checks_every_output_path_before_the_run(tmp_path):
    for option in ("--json", "--markdown", "--plot"):
        done = _cli(option, str(tmp_path / "missing" / "out.x"), "--iters", "3",
                    "--no-progress", cwd=tmp_path)
        assert done.returncode == 1 and done.stdout == "", (option, done.stdout)
        assert done.stderr.strip().splitlines()[-1].startswith(
            f"spatialhub-bench: error: {option}: cannot write {tmp_path / 'missing' / 'out.x'}: ")


@pytest.mark.skipif(not __import__("os").path.exists("/dev/full"), reason="needs /dev/full")
def test_cli_shows_the_table_when_a_write_fails_after_the_run(tmp_path):
    # /dev/full passes the check (its folder exists and takes files); writing to it fails
    done = _cli("--json", "/dev/full", "--markdown", str(tmp_path / "t.md"),
                "--iters", "3", "--no-progress", cwd=tmp_path)
    assert done.returncode == 1
    assert "| Model / Target |" in done.stdout              # what was measured is shown
    assert (tmp_path / "t.md").read_text().startswith("### ")   # the other output written
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("spatialhub-bench: error: --json: cannot write /dev/full: "), last


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the hogs need /proc/stat")
def test_a_busy_machine_is_said_once_per_process_and_the_repeats_counted(tmp_path):
    done = _script("""
        import json, os, subprocess, sys, time
        import spatialhub.utils.profiling as prof
        n = len(os.sched_getaffinity(0))
        prof.benchmark_callable(sum, range(100), num_iters=5)     # the reading before
        hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
        try:
            time.sleep(1.0)
            busy = [prof.benchmark_callable(sum, range(100), num_iters=5).machine_busy
                    for _ in range(4)]
        finally:
            for h in hogs:
                h.kill()
        print(json.dumps([busy, prof.suppressed_warnings()]))
    """, tmp_path)
    busy, suppressed = json.loads(done.stdout.strip().splitlines()[-1])
    if not all(busy):
        pytest.skip(f"the hogs did not make the machine read as busy: {busy}")
    assert done.stderr.count("busy machine:") == 1, done.stderr
    assert suppressed.get("busy machine", 0) >= 3, suppressed


def test_a_warning_is_at_most_five_lines_whatever_its_causes():
    labels = tuple(LABELS)
    lines = _native._warning_lines(labels, EXAMPLE)
    assert len(lines) == 4, lines   # with the header: five
    assert lines[-1].startswith(f"  and {len(labels) - 3} more: ")
    assert all(label in lines[-1] for label in labels[3:5]) and len(lines[-1]) <= 100
    assert len(_native._warning_lines(labels[:4], EXAMPLE)) == 4   # four fit as they are
    with pytest.raises(ValueError, match="a cause label"):
        _native._warning_lines(("no such cause",), None)


def test_a_share_near_all_reads_nearly_all_and_never_as_a_ratio():
    """A share is said in tens of percent; from 95% on "nearly all" -- "1.0x of the time"
    would read as a ratio."""
    def line(cause, **attrs):
        (text,) = _native._warning_lines((cause,), attrs)
        return text
    assert "took nearly all of the time" in line("launch-bound", host_share=0.996)
    assert "took 50% of the time" in line("launch-bound", host_share=0.5)
    assert "others used nearly all of the CPUs" in line("busy machine", others_cpu_share=0.97)
    assert "others used 90% of the CPUs" in line("busy machine", others_cpu_share=0.94)
    assert "1.0x" not in line("multimodal", mode_low_ms=1.0, mode_high_ms=2.0, slow_share=0.99)
    # modes under 2x apart in percent: 1.15x never reads "1.0x apart"
    assert "modes 20% apart, 40% slow" in line("multimodal", mode_low_ms=0.100,
                                               mode_high_ms=0.120, slow_share=0.4)
    assert "modes 3.0x apart" in line("multimodal", mode_low_ms=1.0, mode_high_ms=3.0,
                                      slow_share=0.4)
    # under load no interleaved comparison cancels the neighbours: the remedy says so
    busy = line("busy machine", others_cpu_share=0.7, under_load=1.0)
    assert "stop them: the requests share the CPUs with them" in busy
    assert "instructions" not in busy and "compare" not in busy


def test_the_demo_writes_at_most_five_short_lines_to_stderr(tmp_path):
    """Whatever the machine is doing (CI's lanes keep it busy), the demo's warnings read in
    two seconds: at most five lines, none over 120 characters."""
    done = _cli("--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) <= 5 and all(len(line) <= 120 for line in lines), done.stderr


def test_a_sweep_says_its_runs_warnings_as_one_block_at_the_users_line():
    """A 3-value sweep printed 13 lines (a block per value).  Its runs' warnings are said
    as one: a line per cause naming the values that showed it, the location this file."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = prof.sweep(lambda n: (_native._noop, ()), [1, 2, 3], param="n", num_warmup=1,
                            num_iters=30, track_ram=False)
    ours = [w for w in caught if issubclass(w.category, prof.BenchmarkWarning)]
    assert len(ours) == 1, [str(w.message) for w in ours]
    w = ours[0]
    lines = str(w.message).splitlines()
    assert lines[0].startswith("benchmark '_noop' over n (statistics.md#the-causes):")
    assert "  overhead-dominated: at n=1, 2, 3 -- time a larger workload and divide" in lines
    assert len(lines) <= 5 and w.filename == __file__
    assert isinstance(w.message, prof.OverheadWarning) and "overhead-dominated" in w.message.causes
    assert w.message.stats == list(result) and len(w.message.warnings) >= 3
