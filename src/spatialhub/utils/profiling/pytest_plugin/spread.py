"""The spread between runs, measured on the default path: the session's benchmarks again
in fresh pytest processes.

A run that saves or compares (``--benchmark-autosave``, ``--benchmark-save``,
``--benchmark-compare``) times each benchmark as usual, then runs the same pytest
command ``--benchmark-processes`` more times (default ``PROCESSES``), one after another,
each a fresh interpreter that runs only the benchmarked tests, briefly
(``--benchmark-max-time`` of ``PROBE_MAX_TIME``), and writes each benchmark's median.
A pytest started from inside another pytest's test takes none unless asked
(``default_processes``).
The session's own median and the probes' are the benchmark's *process medians*: saved
with the run (``spatialhub.process_medians_s``) and judged by the core's rule
(``compare_benchmarks`` over runs of one median each), so that a verdict rests on a
spread measured on this machine rather than an assumed one.  One process per probe runs
every benchmark of the session: a suite of twenty 1 ms benchmarks costs
``PROCESSES`` x (pytest's start + twenty short runs), about a minute.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

#: Fresh pytest processes a saving or comparing run adds (--benchmark-processes).
PROCESSES = 7
#: Each probe's --benchmark-max-time (seconds): a median, not a distribution.
PROBE_MAX_TIME = 0.1
#: In a probe: the file it writes each benchmark's median to (one JSON array a line).
PROBE_ENV = "SPATIALHUB_SPREAD_PROBE"
#: In a probe: the file listing the node ids it runs (one a line).
NODES_ENV = "SPATIALHUB_SPREAD_NODES"
#: A probe that takes longer than this (seconds) is ended; its benchmarks go without it.
PROBE_TIMEOUT = 600


def default_processes():
    """PROCESSES for a run started by a user or a CI job; 0 for a pytest started from
    inside another one's test (pytester, a suite testing its own plugin: the environment
    holds PYTEST_CURRENT_TEST), which is a test of a test suite, not a measurement --
    --benchmark-processes given explicitly always counts."""
    return 0 if os.environ.get("PYTEST_CURRENT_TEST") else PROCESSES


def probing():
    """True in a probe: it times like the session, and writes only its medians."""
    return bool(os.environ.get(PROBE_ENV))


def probe_nodes():
    """The node ids a probe runs (None outside a probe)."""
    path = os.environ.get(NODES_ENV)
    if not path:
        return None
    with open(path, encoding="utf-8") as f:
        return {line.rstrip("\n") for line in f if line.strip()}


def record(fixtures):
    """In a probe: each benchmark's median (seconds) to the probe's file."""
    path = os.environ.get(PROBE_ENV)
    with open(path, "a", encoding="utf-8") as f:
        for fx in fixtures:
            median = median_s(fx)
            if median is not None:
                f.write(json.dumps([fx.fullname, median]) + "\n")


def median_s(fx):
    """A fixture's median per call in seconds, or None (not run, errored)."""
    if fx.has_error or fx.stats is None:
        return None
    m = fx.stats.stats.median
    return float(m) if m and m > 0 else None


def measure(config, fixtures, n, say):
    """Run ``n`` probes of this pytest command over ``fixtures``' tests; return
    ``{fullname: [the session's median, then each probe's]}`` (seconds), and how long
    it took.  ``say(text)`` reports progress and a probe that failed (its benchmarks
    then have one median fewer).  A run under load (``benchmark.load``) is not probed:
    its length is the duration the test asked for, which a probe would repeat in full."""
    fixtures = [fx for fx in fixtures if getattr(fx, "load_stats", None) is None]
    medians = {fx.fullname: [median_s(fx)] for fx in fixtures if median_s(fx) is not None}
    if not medians or n < 1:
        return medians, 0.0
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="spatialhub-spread-") as folder:
        nodes = os.path.join(folder, "nodes")
        with open(nodes, "w", encoding="utf-8") as f:
            for fx in fixtures:
                f.write(fx.fullname + "\n")
        args = list(config.invocation_params.args)
        say(f"Measuring the spread between runs: {len(medians)} benchmark(s) in {n} more "
            f"fresh process(es) (--benchmark-processes=0 skips it) ...")
        for i in range(n):
            out = os.path.join(folder, f"probe.{i}")
            env = dict(os.environ)
            env[PROBE_ENV], env[NODES_ENV] = out, nodes
            cmd = [sys.executable, "-m", "pytest", *args, "-q", "-o",
                   f"cache_dir={os.path.join(folder, 'cache')}",
                   f"--benchmark-max-time={PROBE_MAX_TIME}"]
            try:
                p = subprocess.run(cmd, cwd=str(config.invocation_params.dir), env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   timeout=PROBE_TIMEOUT)
            except subprocess.TimeoutExpired:
                say(f"a spread probe ran over {PROBE_TIMEOUT} s and was ended")
                continue
            got = {}
            if os.path.exists(out):
                with open(out, encoding="utf-8") as f:
                    for line in f:
                        try:
                            name, m = json.loads(line)
                        except ValueError:
                            continue
                        if isinstance(m, (int, float)) and m > 0:
                            got[name] = float(m)
            if p.returncode not in (0, 1) and not got:   # 1: a test failed; medians stand
                say(f"a spread probe failed (exit {p.returncode}): "
                    f"{p.stderr.decode(errors='replace').strip()[-300:]}")
            for name in medians:
                if name in got:
                    medians[name].append(got[name])
    return medians, time.monotonic() - started
