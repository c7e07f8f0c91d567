"""Reports: pytest-benchmark's JSON schema (plus our fields) and the .benchmarks/ store
(the tables are table.py's)."""
from __future__ import annotations

import json
import math
import os
import platform
import re
import subprocess
from datetime import datetime, timezone
from pathlib import Path

__all__ = ["machine_info", "commit_info", "bench_to_json", "session_json", "Storage",
           "stats_from_json", "machine_id", "cprofile_functions"]


def _version():
    from .._version import __version__   # ours, not the released `spatialhub` distribution's

    return __version__


def machine_info(env=None):
    """pytest-benchmark's ``machine_info`` keys; ``cpu`` from our environment probe
    (no py-cpuinfo dependency)."""
    impl = platform.python_implementation()
    env = env or {}
    return {
        "node": platform.node(),
        "processor": platform.processor(),
        "machine": platform.machine(),
        "python_compiler": platform.python_compiler(),
        "python_implementation": impl,
        "python_implementation_version": platform.python_version(),
        "python_version": platform.python_version(),
        "python_build": list(platform.python_build()),
        "release": platform.release(),
        "system": platform.system(),
        "cpu": {"brand_raw": env.get("cpu"), "count": env.get("cpu_count") or os.cpu_count(),
                "arch": platform.machine()},
        "spatialhub": {k: v for k, v in env.items() if k not in ("cpu", "cpu_count")},
    }


def _git(*args):
    return subprocess.check_output(("git",) + args, stderr=subprocess.DEVNULL, text=True,
                                   timeout=10).strip()


def commit_info(project_name=None):
    """pytest-benchmark's ``commit_info`` keys, from git when the directory is a checkout."""
    info = {"id": "unversioned", "time": None, "author_time": None, "dirty": False,
            "project": project_name or Path.cwd().name, "branch": "(unknown)"}
    try:
        _git("rev-parse", "--git-dir")
    except Exception:
        return info
    try:
        info["id"] = _git("rev-parse", "HEAD")
        info["dirty"] = bool(_git("status", "--porcelain", "--untracked-files=no"))
        info["time"] = _git("show", "-s", "--pretty=format:%cI")
        info["author_time"] = _git("show", "-s", "--pretty=format:%aI")
        branch = _git("rev-parse", "--abbrev-ref", "HEAD")
        info["branch"] = "(detached head)" if branch == "HEAD" else branch
    except Exception as exc:   # a repository without commits, git missing mid-way
        info["id"] = "unknown"
        info["error"] = repr(exc)
    return info


def machine_id():
    """The folder name pytest-benchmark stores runs under (``Linux-CPython-3.11-64bit``)."""
    return "{}-{}-{}-{}".format(platform.system(), platform.python_implementation(),
                                ".".join(platform.python_version_tuple()[:2]),
                                platform.architecture()[0])


def quiet_attr(s, attr):
    """An attribute of a BenchmarkStats without the warning reading ``p99_ms`` of a
    short run emits (the report states the sample count next to it)."""
    import warnings

    from .._native import BenchmarkWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BenchmarkWarning)
        return getattr(s, attr)


def _finite(x):
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else x


def bench_to_json(fx, include_data=True, verdict=None, checks=None):
    """One ``benchmarks[]`` entry: pytest-benchmark's keys, its ``stats`` in seconds,
    our extra statistics beside them (``p90``, ``p95``, ``p99``, ``ci95_low``,
    ``ci95_high``, seconds too; ``instructions`` per call when counted, the field
    ``--benchmark-compare-fail=instructions:N%`` reads) and the rest under
    ``spatialhub``."""
    meta = fx.stats
    s = meta.native
    stats = meta.stats.as_dict()
    if include_data:
        stats["data"] = list(meta.stats.data)
    stats["iterations"] = meta.iterations
    for ours, key in (("p90_ms", "p90"), ("p95_ms", "p95"), ("p99_ms", "p99"),
                      ("ci95_low_ms", "ci95_low"), ("ci95_high_ms", "ci95_high")):
        v = quiet_attr(s, ours)
        stats[key] = None if v is None else v / 1e3
    if getattr(s, "instructions_per_call", None) is not None:
        stats["instructions"] = s.instructions_per_call
    native = getattr(fx, "native_clock", True)
    extra = {
        "device": s.device,
        "clock": "native" if native else "python",
        "warmup_rounds": s.warmup_iters,
        # rounds timed in Python with another timer track no memory
        "ram_delta_mb": s.ram_delta_mb if native else None,
        "vram_delta_mb": s.vram_delta_mb if native else None,
        "ram_peak_method": s.ram_peak_method,
        "torch_max_allocated_mb": s.torch_max_allocated_mb,
        "overhead_s": None if s.overhead_ms is None else s.overhead_ms / 1e3,
        "rel_ci_half_width": _rel_ci(s),
        "reference_s": fx.reference_s,
        "warnings": list(fx.warnings),
        # this benchmark's median in this process and in fresh ones (spread.py): its
        # spread between runs, measured
        "process_medians_s": getattr(fx, "process_medians", None),
    }
    if getattr(s, "counter_source", None) is not None:
        extra["counter_source"] = s.counter_source   # how stats["instructions"] was counted
        extra["cycles_per_call"] = s.cycles_per_call
    for attr in ("stability", "cv", "autocorr_lag1", "drift", "effective_n", "multimodal",
                 "run_sizes", "run_spread", "minor_faults_per_iter", "major_faults_per_iter",
                 "vol_ctx_switches_per_iter", "invol_ctx_switches_per_iter"):
        if hasattr(s, attr):    # fields the trust issue adds to BenchmarkStats
            v = quiet_attr(s, attr)
            extra[attr] = list(v) if isinstance(v, tuple) else _finite(v)
    if verdict is not None:
        extra["comparison"] = {"verdict": verdict.verdict, "ratio": verdict.ratio,
                               "machine_factor": verdict.machine_factor,
                               "ci95_low": verdict.ci_low, "ci95_high": verdict.ci_high,
                               "threshold": verdict.threshold, "fails": verdict.fails,
                               "reason": verdict.reason}
    if checks:
        extra["checks"] = [{"expr": str(c.rule), "field": c.rule.field, "method": c.rule.method,
                            "fails": c.fails, "reason": c.reason} for c in checks]
    out = {
        "group": fx.group,
        "name": fx.name,
        "fullname": fx.fullname,
        "params": fx.params,
        "param": fx.param,
        "extra_info": fx.extra_info,
        "options": dict(meta.options),
        "stats": stats,
        "spatialhub": extra,
    }
    if getattr(fx, "cprofile_stats", None) is not None:
        out["cprofile"] = cprofile_functions(
            fx.cprofile_stats, getattr(fx, "cprofile_sort_by", None), getattr(fx, "cprofile_top", 25))
    return out


def cprofile_functions(pstats_stats, sort_by=None, top=25):
    """The profile as pytest-benchmark's list of dicts (``ncalls_recursion``, ``ncalls``,
    ``tottime``, ``tottime_per``, ``cumtime``, ``cumtime_per``, ``function_name``): the
    top ``top`` by ``sort_by`` (default cumtime), file names relative to the folder above
    the current one."""
    parent = str(Path.cwd().parent)
    funcs = []
    for (path, line, name), (cc, nc, tt, ct, _callers) in pstats_stats.stats.items():
        if path.startswith(parent):
            path = path[len(parent):].lstrip("/\\")
        funcs.append({
            "ncalls_recursion": str(cc) if cc == nc else f"{nc}/{cc}",
            "ncalls": nc,
            "tottime": tt,
            "tottime_per": tt / cc if cc > 0 else 0.0,
            "cumtime": ct,
            "cumtime_per": ct / cc if cc > 0 else 0.0,
            "function_name": f"{path}:{line}({name})",
        })
    key = sort_by or "cumtime"
    funcs.sort(key=lambda f: f[key], reverse=True)
    return funcs[:max(0, int(top))]


def _rel_ci(s):
    if s.ci95_low_ms is None or s.ci95_high_ms is None or not s.median_ms:
        return None
    return (s.ci95_high_ms - s.ci95_low_ms) / 2 / s.median_ms


def session_json(fixtures, minfo, cinfo, include_data=True, verdicts=None, checks=None):
    verdicts = verdicts or {}
    checks = checks or {}
    return {
        "machine_info": minfo,
        "commit_info": cinfo,
        "benchmarks": [bench_to_json(fx, include_data, verdicts.get(fx.fullname),
                                     checks.get(fx.fullname))
                       for fx in fixtures if not fx.has_error and fx.stats is not None],
        "datetime": datetime.now(timezone.utc).isoformat(),
        "version": _version(),
        "producer": "spatialhub.utils.profiling.pytest_plugin",
    }


def dumps(obj):
    return json.dumps(obj, indent=4, ensure_ascii=True, default=repr)


def stats_from_json(bench):
    """A ``BenchmarkStats`` with raw samples from a ``benchmarks[]`` entry (ours or
    pytest-benchmark's with ``data``); samples None when the file has none."""
    from .._native import BenchmarkStats, _stats_from_samples

    st = bench.get("stats", {})
    data = st.get("data")
    if data:
        s = _stats_from_samples([float(x) * 1e3 for x in data])
        s.name = str(bench.get("name", "baseline"))
        return s
    med = float(st.get("median", 0.0)) * 1e3
    mean = float(st.get("mean", 0.0)) * 1e3
    return BenchmarkStats(str(bench.get("name", "baseline")), "CPU", mean, med,
                          float(st.get("stddev", 0.0)) * 1e3, med, float(st.get("min", 0.0)) * 1e3,
                          float(st.get("max", 0.0)) * 1e3, 1e3 / mean if mean else 0.0, 0,
                          int(st.get("rounds", 0)))


# ---- saved runs read back ---------------------------------------------------------------

#: times every saved run holds (pytest-benchmark writes them all): numbers >= 0
SAVED_TIMES = ("min", "max", "mean", "stddev", "median")
#: pytest-benchmark's other figures: when present, numbers >= 0
SAVED_FIGURES = ("iqr", "q1", "q3", "ld15iqr", "hd15iqr", "ops", "total")
#: ours: numbers >= 0, or null where not measured (a short run's p99, a timed run's count)
SAVED_OPTIONAL = ("p90", "p95", "p99", "ci95_low", "ci95_high", "instructions")


def check_saved_run(doc):
    """A saved run as the compared run: every value the gate, the table, the Markdown
    summary and our ``compare_machine_info`` hook read from it is checked here, before
    any of them runs.  Raises ``_readback.BadValue`` naming the first bad one
    (``benchmarks[2].stats.median is not a number (null)``).  Files of pytest-benchmark
    (with or without raw data) and ours pass."""
    from .._readback import array, item, mapping, number, text

    mapping(doc, "the document")
    info = mapping(doc.get("machine_info"), "machine_info", null=True)
    if info is not None:
        mapping(info.get("cpu"), "machine_info.cpu", null=True)
    for i, b in enumerate(array(item(doc, "benchmarks", "benchmarks"), "benchmarks")):
        at = f"benchmarks[{i}]"
        mapping(b, at)
        text(item(b, "name", f"{at}.name"), f"{at}.name")
        text(item(b, "fullname", f"{at}.fullname"), f"{at}.fullname")
        for key in ("group", "param"):
            text(b.get(key), f"{at}.{key}", null=True)
        mapping(b.get("params"), f"{at}.params", null=True)
        st = mapping(item(b, "stats", f"{at}.stats"), f"{at}.stats")
        for key in SAVED_TIMES:
            number(item(st, key, f"{at}.stats.{key}"), f"{at}.stats.{key}", low=0)
        number(item(st, "rounds", f"{at}.stats.rounds"), f"{at}.stats.rounds", low=0,
               whole=True)
        for key in SAVED_FIGURES:
            if key in st:
                number(st[key], f"{at}.stats.{key}", low=0)
        for key in SAVED_OPTIONAL:
            number(st.get(key), f"{at}.stats.{key}", null=True, low=0)
        if "iterations" in st:
            number(st["iterations"], f"{at}.stats.iterations", low=1, whole=True)
        for j, x in enumerate(array(st.get("data"), f"{at}.stats.data", null=True) or ()):
            number(x, f"{at}.stats.data[{j}]", low=0)
        extra = mapping(b.get("spatialhub"), f"{at}.spatialhub", null=True) or {}
        for key in ("reference_s", "ram_delta_mb"):
            number(extra.get(key), f"{at}.spatialhub.{key}", null=True,
                   low=0 if key == "reference_s" else None)
        for j, x in enumerate(array(extra.get("process_medians_s"),
                                    f"{at}.spatialhub.process_medians_s", null=True) or ()):
            number(x, f"{at}.spatialhub.process_medians_s[{j}]", low=0)
    return doc


def process_medians(bench):
    """A saved benchmark's medians of separate processes (seconds; spread.py), or None
    when it was saved without them (checked by ``check_saved_run``)."""
    pm = (bench.get("spatialhub") or {}).get("process_medians_s")
    return [float(x) for x in pm if x and x > 0] if pm else None


def history_medians(doc):
    """``{fullname: (median, reference)}`` of a saved run for the gate's history, in
    seconds; ``reference`` None when the run measured none for it (the reference off, or
    a run under load, which has none).  Checks what it reads (``_readback.BadValue``)."""
    from .._readback import array, item, mapping, number, text

    mapping(doc, "the document")
    out = {}
    for i, b in enumerate(array(item(doc, "benchmarks", "benchmarks"), "benchmarks")):
        at = f"benchmarks[{i}]"
        mapping(b, at)
        name = text(item(b, "fullname", f"{at}.fullname"), f"{at}.fullname")
        st = mapping(item(b, "stats", f"{at}.stats"), f"{at}.stats")
        med = number(item(st, "median", f"{at}.stats.median"), f"{at}.stats.median", low=0)
        extra = mapping(b.get("spatialhub"), f"{at}.spatialhub", null=True) or {}
        ref = number(extra.get("reference_s"), f"{at}.spatialhub.reference_s", null=True,
                     low=0)
        out[name] = (float(med), float(ref) if ref else None)
    return out


def history_of(entries, use_reference):
    """One benchmark's medians for the gate's spread, from its ``(median, reference)``
    entries: divided by their references when ``use_reference`` -- the corrected ones
    only, since one raw median among them would read as a huge spread -- unless none has
    a reference (a run under load never does): then the raw medians, alike."""
    if use_reference and any(ref for _, ref in entries):
        return [med / ref for med, ref in entries if ref]
    return [med for med, _ in entries]


# ---- the .benchmarks/ store -----------------------------------------------------------

_NUM = re.compile(r"^(\d{4})_")


class Storage:
    """``STORAGE/<machine id>/NNNN_<name>.json``, numbered like pytest-benchmark."""

    def __init__(self, path):
        path = str(path)
        if path.startswith("file://"):
            path = path[len("file://"):]
        self.root = Path(path)
        self.dir = self.root / machine_id()

    def runs(self):
        """Saved runs of this machine id, oldest first."""
        if not self.dir.is_dir():
            return []
        return sorted(p for p in self.dir.glob("*.json") if _NUM.match(p.name))

    def next_path(self, name):
        nums = [int(_NUM.match(p.name).group(1)) for p in self.runs()]
        return self.dir / f"{(max(nums) + 1 if nums else 1):04d}_{name}.json"

    def save(self, obj, name):
        path = self.next_path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(dumps(obj), encoding="utf-8")
        os.replace(tmp, path)
        return path

    def find(self, which):
        """``which`` True: the latest run; a string: a file path, or the run whose file
        name starts with it (``0001``, ``0001_name``).  Returns a Path or None."""
        if which is True:
            runs = self.runs()
            return runs[-1] if runs else None
        cand = Path(which)
        if cand.is_file():
            return cand
        for p in reversed(self.runs()):
            if p.name.startswith(str(which)):
                return p
        return None
