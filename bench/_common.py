"""Helpers shared by the bench/ scripts (not part of the package).

Every figure is a ratio or a count measured side by side in one process or
one run, as the median of several interleaved rounds: these machines are
shared and noisy, so absolute times move by 2x from one minute to the next
while ratios of interleaved measurements hold.
"""
import datetime
import importlib.util
import os
import platform
import statistics
import subprocess
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SRC = os.path.join(ROOT, "src")

# One BLAS thread: NumPy's OpenBLAS pool otherwise spins on the second core
# of a 2-core machine while we time things.  Must be set before numpy loads.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")


def ensure_importable():
    """Make `spatialhub` importable from the source tree when not installed."""
    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    try:
        import spatialhub.utils.profiling  # noqa: F401
    except ImportError:
        sys.path.insert(0, SRC)
        import spatialhub.utils.profiling  # noqa: F401


def quiet_warnings():
    """The no-op figures trigger BenchmarkWarning by design; hide it."""
    from spatialhub.utils.profiling import BenchmarkWarning
    warnings.filterwarnings("ignore", category=BenchmarkWarning)


def child_env():
    """Environment for child processes: the same `spatialhub` this process
    imports (source tree or installed) and bench/ on PYTHONPATH, one BLAS
    thread, a fixed hash seed (callgrind counts stay reproducible)."""
    ensure_importable()
    import spatialhub.utils.profiling as pkg
    # spatialhub is a namespace package (no __file__): up from spatialhub/utils/profiling/
    pkg_parent = os.path.abspath(os.path.join(os.path.dirname(pkg.__file__), "..", "..", ".."))
    env = dict(os.environ)
    paths = [pkg_parent, HERE] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PYTHONHASHSEED"] = "0"
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"
    return env


def released_module():
    """The released spatialhub 0.1.7's profiling.py, loaded from an unpacked wheel
    (SPATIALHUB_RELEASED_DIR, as CI sets it), or None where it is not there."""
    from pathlib import Path
    root = Path(os.environ.get("SPATIALHUB_RELEASED_DIR", "/tmp/rel/whl"))
    path = root / "spatialhub" / "utils" / "profiling.py"
    if not path.is_file():
        return None
    spec = importlib.util.spec_from_file_location("released_profiling", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["released_profiling"] = mod
    spec.loader.exec_module(mod)
    return mod


def median(xs):
    return statistics.median(xs)


def machine():
    """A dict describing this machine, for the tables and the docs."""
    model = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        avail = len(os.sched_getaffinity(0))
    except AttributeError:
        avail = os.cpu_count()
    try:
        import numpy
        npv = numpy.__version__
    except ImportError:
        npv = "-"
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit(),
        "nproc": avail,
        "cpu": model,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "numpy": npv,
    }


def commit():
    """The tree measured: the short commit, "+ changes" when the work tree differs from it."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                              capture_output=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=ROOT, text=True, capture_output=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown (no git)"
    if not head:
        return "unknown (not a git checkout)"
    return f"commit {head}" + (" + uncommitted changes" if dirty else "")


def load_average():
    """The 1-minute load average (NaN where the platform has none)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return float("nan")


def machine_line():
    m = machine()
    return (f"{m['date']}; nproc {m['nproc']}; {m['cpu']}; Linux {m['kernel']}; "
            f"Python {m['python']}; NumPy {m['numpy']}; {m['commit']}; "
            f"load average {load_average():.2f}")


class Figure:
    """One figure: what was measured, its value, its target, the verdict.

    ok: True (PASS), False (MISS) or None (recorded only, no target)."""

    def __init__(self, bench, what, value, target, ok=None):
        self.bench, self.what, self.value, self.target, self.ok = bench, what, value, target, ok

    @property
    def verdict(self):
        return {True: "PASS", False: "MISS", None: "INFO"}[self.ok]


def print_details(title, header, rows):
    """A small Markdown table of the raw measurements behind the figures."""
    print(f"\n#### {title}\n")
    print("| " + " | ".join(header) + " |")
    print("| " + " | ".join(":---" if i == 0 else "---:" for i in range(len(header))) + " |")
    for r in rows:
        print("| " + " | ".join(str(c) for c in r) + " |")


def print_figures(figs, title="Figures"):
    print(f"\n### {title}\n")
    print("| bench | figure | measured | target | |")
    print("| :--- | :--- | ---: | :--- | :--- |")
    for f in figs:
        print(f"| {f.bench} | {f.what} | {f.value} | {f.target} | {f.verdict} |")


def run_script(module_run, argv=None):
    """`main()` of a figure script: parse --quick, run, print."""
    import argparse
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    a = p.parse_args(argv)
    print(machine_line())
    figs = module_run(quick=a.quick)
    print_figures(figs)
    return 0


def fmt_ns(ms):
    return f"{ms * 1e6:.0f} ns"


def run_child(args, timeout=600, **kw):
    """Run a child Python process with child_env(); returns CompletedProcess."""
    return subprocess.run([sys.executable] + list(args), capture_output=True, text=True,
                          env=child_env(), timeout=timeout, **kw)
