"""How far separate runs of identical code move apart on this machine, measured once.

A single run cannot see the shift between runs (allocator state, address layout, core
placement, neighbours), so its rerun interval (``rerun_low_ms`` / ``rerun_high_ms``)
allows for a between-run spread it is told: ``run_spread=``, else this machine's
calibration, else the 15% assumed from a shared 2-core VM -- wide on a quiet machine.
:func:`calibrate_run_spread` measures it: ``processes`` fresh interpreters per
workload, in turn (A B, B A, ...), each timing a pure-Python workload (``sorted`` of
1,000 floats) and an allocation-heavy NumPy one (scale, clip and threshold a
1x3x240x320 float32 frame); the spread is the larger of the two workloads' standard
deviations of log run medians.  ``save=True`` (the CLI's ``--calibrate``) remembers it
for this machine in the user's cache directory, and every later process on this
machine uses it; nothing is written unless asked.  :func:`forget_run_spread` removes
it.  docs/statistics.md ("Rerun interval") says how well either covers.

The cache directory: ``$SPATIALHUB_CACHE_DIR`` if set, else
``$XDG_CACHE_HOME/spatialhub-profiling`` (``~/.cache/spatialhub-profiling``) on Linux,
``~/Library/Caches/spatialhub-profiling`` on macOS,
``%LOCALAPPDATA%\\spatialhub-profiling\\Cache`` on Windows.  The file
(``run_spread.json``) keeps one entry per machine (host name, CPU model, CPU count), so
a home directory shared between machines does not carry one machine's figure to another.
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import sys
from typing import Any

from . import _native

__all__ = ["calibrate_run_spread", "machine_run_spread", "forget_run_spread", "cache_dir"]

_FILE = "run_spread.json"
#: fresh interpreters per workload of a calibration (spatialhub-bench --calibrate)
DEFAULT_PROCESSES = 20


def cache_dir() -> str:
    """The directory this package keeps its per-user cache in (not created here)."""
    explicit = os.environ.get("SPATIALHUB_CACHE_DIR")
    if explicit:
        return explicit
    home = os.path.expanduser("~")
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.join(home, "AppData", "Local")
        return os.path.join(base, "spatialhub-profiling", "Cache")
    if sys.platform == "darwin":
        return os.path.join(home, "Library", "Caches", "spatialhub-profiling")
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache")
    return os.path.join(base, "spatialhub-profiling")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_id() -> str:
    """What a calibration is kept under: host name, CPU model and count."""
    return f"{platform.node()} | {_cpu_model()} | {os.cpu_count()} CPUs"


def _path() -> str:
    return os.path.join(cache_dir(), _FILE)


def _read_checked() -> tuple[dict[str, Any], str | None]:
    """The file's machines, and what is wrong with it for this machine (one line naming
    the file and the field), or None.  No file: no machines, nothing wrong."""
    from ._readback import BadFile, BadValue, mapping, read_json

    path = _path()
    if not os.path.exists(path):
        return {}, None
    try:
        data = mapping(read_json(path), "the document")
        machines = mapping(data.get("machines"), "machines")
    except BadFile as exc:
        return {}, str(exc)
    except BadValue as exc:
        return {}, f"{path}: {exc}"
    mid = machine_id()
    problem = _problem(machines[mid], f"machines[{json.dumps(mid)}]") if mid in machines \
        else None
    return machines, None if problem is None else f"{path}: {problem}"


def _read_all() -> dict[str, Any]:
    return _read_checked()[0]


def _problem(entry: Any, where: str) -> str | None:
    """What makes ``entry`` unusable as a calibration (``where.run_spread is not a
    number ("abc")``), or None."""
    from ._readback import BadValue, item, mapping, number

    try:
        mapping(entry, where)
        spread = number(item(entry, "run_spread", f"{where}.run_spread"), f"{where}.run_spread")
        if not 0 < spread < 1:
            raise BadValue(f"{where}.run_spread", f"is not in (0, 1) ({spread!r})")
        number(item(entry, "processes", f"{where}.processes"), f"{where}.processes", low=3,
               whole=True)
    except BadValue as exc:
        return str(exc)
    return None


def _valid(entry: Any) -> tuple[float, int] | None:
    if _problem(entry, "entry") is not None:
        return None
    return float(entry["run_spread"]), int(entry["processes"])


def machine_run_spread() -> dict[str, Any] | None:
    """This machine's remembered calibration, or None when it has none.

    Returns
    -------
    dict or None
        What :func:`calibrate_run_spread` returned when it saved it: ``run_spread``,
        ``processes``, ``when``, ...
    """
    entry = _read_all().get(machine_id())
    return dict(entry) if isinstance(entry, dict) and _valid(entry) else None


def _install(entry: dict[str, Any] | None) -> None:
    """Make the native results use `entry` (None: the assumed spread again)."""
    pair = _valid(entry) if entry else None
    _native._set_machine_run_spread(*(pair if pair else (None, None)))


def _write(machines: dict[str, Any]) -> str:
    d = cache_dir()
    os.makedirs(d, exist_ok=True)
    path = _path()
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"version": 1, "machines": machines}, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)
    return path


def forget_run_spread() -> bool:
    """Remove this machine's calibration: results made from now on allow for the
    assumed 15% again.

    Returns
    -------
    bool
        Whether there was one.
    """
    machines = _read_all()
    had = machines.pop(machine_id(), None) is not None
    if had:
        _write(machines)
    _install(None)
    return had


def _sort_work(values: list[float]) -> list[float]:
    return sorted(values)


def _pipeline_work(frame: Any) -> Any:
    import numpy as np

    return np.clip(frame * 1.5, 0.0, 1.0) > 0.6


def calibrate_run_spread(processes: int = DEFAULT_PROCESSES, *, save: bool = False,
                         num_iters: int = 300) -> dict[str, Any]:
    """Measure the between-run spread of this machine, remembered if ``save``.

    Two workloads (``sorted`` of 1,000 floats, a NumPy frame pipeline) each in
    ``processes`` fresh interpreters, alternating (about 40 s for the default 20 on a
    2-core machine).

    Parameters
    ----------
    processes : int, default 20
        Fresh interpreters per workload (>= 5).
    save : bool, default False
        Remember the result for this machine in the user's cache directory: single
        runs' rerun intervals use it from then on, in every process.
    num_iters : int, default 300
        Timed calls per run (>= 20).

    Returns
    -------
    dict
        ``run_spread`` (the larger workload's std of log run medians, a fraction),
        ``processes``, ``workloads`` (per-workload spreads and medians), ``when``
        (UTC), ``load_before``, ``load_after`` and ``machine``; with ``save=True``
        also ``path``, the file written.

    Raises
    ------
    TypeError, ValueError
        A bad argument.

    Examples
    --------
    >>> calibrate_run_spread(5, num_iters=20)["processes"]  # doctest: +SKIP
    5
    """
    import numpy as np

    from ._launch import Job
    from .runner import _count

    fn = "calibrate_run_spread"
    processes = _count(processes, "processes", fn, 5)
    num_iters = _count(num_iters, "num_iters", fn, 20)
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    values = list(np.random.default_rng(0).random(1000))
    frame = np.random.default_rng(0).random((1, 3, 240, 320)).astype(np.float32)
    opts: dict[str, Any] = dict(num_warmup=_native.DEFAULT_NUM_WARMUP, num_iters=num_iters,
                                track_ram=False, track_vram=False, progress=False)
    jobs = {"sorted 1,000 floats": Job(fn, _sort_work, (values,), dict(opts, name="sort")),
            "NumPy pipeline 1x3x240x320": Job(fn, _pipeline_work, (frame,),
                                              dict(opts, name="pipeline"))}
    medians: dict[str, list[float]] = {k: [] for k in jobs}
    names = list(jobs)
    for r in range(processes):
        for k in (names if r % 2 == 0 else names[::-1]):
            stats = jobs[k].run(r + 1, processes)
            medians[k].append(stats.median_ms)
    for job in jobs.values():
        job.warnings = []   # each child's busy / noisy warnings: the spread measures that
    spreads = {k: float(np.std(np.log(v), ddof=1)) for k, v in medians.items()}
    entry: dict[str, Any] = {
        "run_spread": max(spreads.values()),
        "processes": processes,
        "workloads": {k: {"run_spread": spreads[k], "median_ms": float(np.median(medians[k]))}
                      for k in jobs},
        "when": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "load_before": load_before,
        "load_after": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "machine": machine_id(),
    }
    if save:
        machines = _read_all()
        machines[machine_id()] = entry
        entry = dict(entry, path=_write(machines))
        _install(entry)
    return entry


def _load_at_import() -> None:
    """Use this machine's calibration, if the user saved one; never fails the import.  A
    file that cannot be read, or a bad entry for this machine, is no calibration, said in
    one warning naming the file and the field (the user believes the calibration holds)."""
    try:
        machines, problem = _read_checked()
        entry = machines.get(machine_id())
        _install(entry if isinstance(entry, dict) and problem is None else None)
        if problem is not None:
            import warnings

            warnings.warn(f"{problem}: this machine's calibration is not used (the assumed "
                          f"{100 * _native.ASSUMED_RUN_SPREAD:g}% between runs applies); "
                          "spatialhub-bench --calibrate writes a new one",
                          _native.BenchmarkWarning, stacklevel=3)
    except Exception:   # noqa: BLE001 - an unreadable cache is no calibration
        pass
