"""Instruction counts: the ``--instructions`` modes and the gate that judges counts.

``spatialhub-bench --instructions`` and ``pytest --benchmark-instructions`` run the same
command again under valgrind's callgrind (``rerun``), with collection limited to the
timed calls: the native loop makes every timed call through one C function
(``shp_counted_call``: the call and the release of its result), callgrind collects only
inside it, and around each benchmark's timed loop the harness zeroes callgrind's counters
and dumps them, then reads that dump back (csrc/platform/callgrind.c).  Every result of the run
carries ``instructions_per_call``: the mean over the timed calls, warm-up excluded, with
none of the harness's own work in it (no clock read, no sync, no bookkeeping: it is
outside the counted function, so nothing has to be subtracted).

A count does not move with the machine's load: separate runs of identical code agree to
within a few hundredths of a percent (docs/guide.md, "Instruction counts"), so a gate on
it can call a 2% change in one run on a machine where wall time moves by 1.45x between
runs.  What it does not see -- time in the kernel, I/O and sleeps, cache misses and
branch mispredictions, other threads' work, GPU work -- is listed in docs/guide.md.

``judge_counts`` is the one rule for counts, used by the CLI's ``--compare
--instructions`` and by the pytest plugin's ``--benchmark-compare-fail=instructions:N%``.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import asdict, dataclass
from typing import Optional

__all__ = ["WARMUP", "ITERATIONS", "MARGIN", "NOISE", "RUNS", "LAYOUT_SPREAD", "DIR_ENV",
           "ValgrindNotFound", "active", "probing", "lowest", "disagreements", "find_valgrind",
           "callgrind_command", "rerun", "CountVerdict", "judge_counts"]

#: Warm-up calls before the counted ones.  CPython specialises a function's bytecode
#: over its first calls (3.11 quickens a code object at its 8th); counted before that,
#: the same function read up to 4% more (measured: docs/guide.md).
WARMUP = 10
#: Counted calls.  A count hardly varies from call to call once warm: five are
#: plenty, and each costs ~50x its native time under callgrind.
ITERATIONS = 5
#: A change of the count below this reads "same" when no threshold is given.
MARGIN = 0.01
#: How far separate runs of identical code may read apart (address layout: a different
#: command line moves addresses; FIXED holds the hash seed): a change under this is never
#: called one, whatever threshold is asked for.
NOISE = 0.002
#: Separate callgrind processes that count each benchmark; the lowest count is the one
#: reported.  A count depends on objects' addresses wherever a lookup hashes one (a
#: context variable's hash is its address's XOR its name's hash), and addresses differ
#: between processes even under valgrind: one process in ~10 read a NumPy pipeline
#: 0.5-2.4% high under pytest (a collision in the context's HAMT, docs/guide.md).  A
#: collision only adds work, so the lowest of three processes is the code's count unless
#: all three collide.  The first RUNS - 1 (the probes) run side by side with their output
#: kept aside; the last one is the run the user sees.
RUNS = 3
#: The most a benchmark's counted runs may read apart and still be taken for one code in
#: different address layouts (the collisions measured read 0.5-3.0% high): beyond it the
#: runs did not run the same code -- a probe took another path, failed, or ran other
#: tests before -- and the reported run keeps its own count, saying so (a lower count of
#: a probe would otherwise hide a regression).
LAYOUT_SPREAD = 0.05
#: The folder callgrind writes its dumps to; set for the re-run command only.
DIR_ENV = "SPATIALHUB_CALLGRIND_DIR"
#: In a probe: the file it appends its counts to (and it writes no result files).
PROBE_ENV = "SPATIALHUB_CALLGRIND_PROBE"
#: In the reported run: the folder that holds the probes' counts.
PROBES_ENV = "SPATIALHUB_CALLGRIND_PROBES"
#: Thread pools set to one thread in the re-run (when the user has not set them):
#: callgrind counts the calling thread only, and runs threads one at a time anyway.
ONE_THREAD = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
              "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")
#: The re-run's environment beside them (when the user has not set these): one hash
#: seed.  A context variable's hash is its address's XOR its name's str hash, random per
#: process unless the seed is fixed, and a lookup of one that is not set (NumPy's memory
#: handler, on every array) walks the context's HAMT by those hashes: under pytest, where
#: decimal's context variable is set, NumPy's count moved by up to 0.5% between runs of
#: identical code with random seeds, and not at all with one seed (docs/guide.md, "What
#: a count misses").  The same command then also allocates alike, run after run.
FIXED = {"PYTHONHASHSEED": "0"}


def rerun_env(folder, base=None):
    """The environment of the counted re-run: ``base`` (default: this process's) with
    the dump folder, one thread per pool and the fixed hash seed, where not set."""
    env = dict(os.environ if base is None else base)
    env[DIR_ENV] = folder
    for var in ONE_THREAD:
        env.setdefault(var, "1")
    for var, value in FIXED.items():
        env.setdefault(var, value)
    return env


_COUNTED = "shp_counted_call"
_ZERO = "shp_cg_zero_point"
_DUMP = "shp_cg_dump_point"


class ValgrindNotFound(RuntimeError):
    """The instruction count needs valgrind, and it is not installed."""


def active():
    """True in a process that runs under callgrind with our options: each benchmark's
    result carries the instruction count of its timed calls."""
    from ._native import _callgrind_active

    return bool(_callgrind_active())


def probing():
    """True in a probe of a counted run (``RUNS``): it counts like the reported run, but
    writes no result file (no --json, no saved run) and its output is kept aside."""
    return bool(os.environ.get(PROBE_ENV))


class _Ledger:
    """One process's side of the lowest-of-``RUNS`` rule: a probe appends each
    benchmark's count to its file (one JSON array a line); the reported run lowers its
    own count to the lowest any run read for the same benchmark, and keeps the
    benchmarks whose runs read apart by more than ``NOISE`` (``disagreements``).  A
    benchmark is its name and how many times that name came before in the process (a
    sweep repeats a name), so probes and the reported run agree whatever order they ran
    in."""

    def __init__(self):
        self.seen = {}
        self.probes = None
        self.apart = []

    def key(self, name):
        n = self.seen.get(name, 0)
        self.seen[name] = n + 1
        return [name, n]

    def probe_counts(self, folder):
        if self.probes is None:
            self.probes = {}
            for entry in sorted(os.listdir(folder)):
                if not (entry.startswith("probe.") and entry.endswith(".counts")):
                    continue
                with open(os.path.join(folder, entry), encoding="utf-8") as f:
                    for line in f:
                        try:
                            name, n, count = json.loads(line)
                        except (ValueError, TypeError):
                            continue        # a probe ended in mid-line
                        value = _count(count)
                        if value is not None:
                            self.probes.setdefault((str(name), n), []).append(value)
        return self.probes

    def lowest(self, name, count):
        name, n = self.key(str(name))
        mine = _count(count)
        if mine is None:
            return count
        probe = os.environ.get(PROBE_ENV)
        if probe:
            with open(probe, "a", encoding="utf-8") as f:
                f.write(json.dumps([name, n, mine]) + "\n")
            return count
        folder = os.environ.get(PROBES_ENV)
        if not folder:
            return count
        counts = [mine, *self.probe_counts(folder).get((name, n), ())]
        low, high = min(counts), max(counts)
        if high > low * (1.0 + NOISE):
            self.apart.append((name, len(counts), low, high, mine))
        if len(counts) == 1 or high > low * (1.0 + LAYOUT_SPREAD):
            return count
        return low


_ledger = _Ledger()


def lowest(name, count):
    """A counted benchmark's instructions per call as reported: in a probe, ``count``
    (written down for the reported run); in the reported run, the lowest of ``count``
    and the probes' counts of the same benchmark (``name`` and its order among the
    benchmarks of that name) when they read within ``LAYOUT_SPREAD``, else ``count``;
    elsewhere ``count``.  Call it once per benchmark."""
    return _ledger.lowest(name, count)


def disagreements():
    """The reported run's benchmarks whose counted runs read apart by more than
    ``NOISE``, as lines to show under the results (empty when they agreed).  Within
    ``LAYOUT_SPREAD`` the lowest count is the one reported (a hash collision that depends
    on where objects landed only adds work); beyond it, the reported run's own."""
    lines = []
    for name, runs, low, high, mine in _ledger.apart:
        spread = high / low - 1
        said = (f"{name}: the {runs} counted runs read {low:,.0f} to {high:,.0f} "
                f"instructions per call (+{100 * spread:.2f}%); ")
        if spread > LAYOUT_SPREAD:
            said += (f"more than the {100 * LAYOUT_SPREAD:g}% an address layout explains: "
                     f"the runs did not run the same code (a probe took another path, "
                     f"failed, or ran other tests before), so this run's own count, "
                     f"{mine:,.0f}, is reported")
        else:
            said += "the lowest is reported"
        lines.append(said)
    return lines


def find_valgrind():
    """valgrind's path, or ``ValgrindNotFound`` naming the package to install."""
    path = shutil.which("valgrind")
    if path is None:
        raise ValgrindNotFound(
            "counting instructions runs the benchmarks under valgrind's callgrind, and "
            "valgrind is not installed: install the system package 'valgrind' (Debian / "
            "Ubuntu: apt-get install valgrind; Fedora / RHEL: dnf install valgrind; Alpine: "
            "apk add valgrind; conda: conda install -c conda-forge valgrind). Where valgrind "
            "does not run (Windows, macOS on Apple silicon), counters=('instructions',) reads "
            "the CPU's own counter on Linux machines that expose it")
    return path


def callgrind_command(argv, folder, valgrind="valgrind"):
    """The command that runs ``argv`` (an interpreter and its arguments) under callgrind,
    collecting inside the counted call only, one dump per benchmark in ``folder``."""
    return [valgrind, "--tool=callgrind", f"--toggle-collect={_COUNTED}",
            f"--zero-before={_ZERO}", f"--dump-after={_DUMP}",
            f"--callgrind-out-file={os.path.join(folder, 'callgrind.%p.out')}",
            f"--log-file={os.path.join(folder, 'valgrind.%p.log')}", *argv]


#: What in valgrind's log means a counted run's figures cannot be trusted, as valgrind
#: 3.19 words it (its lines start "==PID== ", "--PID-- " or nothing): valgrind itself
#: failed -- at startup ("valgrind: failed to start tool ..."), an assertion or "the
#: 'impossible' happened", out of memory, a fatal error, an internal error, "Valgrind
#: cannot continue"; the program met an instruction valgrind cannot run (it gets
#: SIGILL); the program was ended by a signal; callgrind could not write its dump (the
#: count is lost).  Such a log turns a clean exit into 1 and is shown.
_VALGRIND_TROUBLE = re.compile(
    r"^(?:(?:==|--)\d+(?:==|--) )?"
    r"(?:valgrind: "                                   # startup, assertions, the 'impossible'
    r"|.*[Cc]annot continue"                           # "Valgrind cannot continue.  Sorry."
    r"|.*out of memory"
    r"|Fatal error|FATAL|Valgrind: FATAL|VALGRIND INTERNAL ERROR|Emulation fatal error"
    r"|vex \S+->IR: unhandled instruction"            # then "valgrind: Unrecognised ..."
    r"|Process terminating with default action of signal"
    r"|Error: can not open)", re.M)
#: The notes valgrind prints and survives with the count intact: none of them fails a
#: counted run (each has its test, with valgrind's own text:
#: tests/test_reliability_round4_plugin.py).  An unknown ioctl or syscall gets ENOSYS
#: or is passed through without checking its memory (which only memcheck would check);
#: the rest concern the program's memory map, stack switches, file descriptors, or how
#: callgrind sized a cache it does not simulate here.
ACCEPTED_NOTES = {
    "unhandled ioctl": "Warning: noted but unhandled ioctl 0x... with no size/direction hints.",
    "unhandled syscall": "WARNING: unhandled amd64-linux syscall: N (and its four lines)",
    "address range perms": "Warning: set address range perms: large range [...] (defined)",
    "switching stacks": "Warning: client switching stacks?  SP change: ...",
    "client syscall": "Warning: client syscall munmap tried to modify addresses ...",
    "invalid fd": "Warning: invalid file descriptor N in syscall close()",
    "unimplemented fcntl": "Warning: unimplemented fcntl command: N",
    "cache detection": "warning: L3 cache found, using its data for the LL simulation.",
}


def _probe_env(folder, i):
    env = rerun_env(folder)
    env[PROBE_ENV] = os.path.join(folder, f"probe.{i}.counts")
    return env


class _Terminated(BaseException):
    """SIGTERM to this process while it waits on its counted runs."""


class _Sigterm:
    """SIGTERM (a CI job's timeout, `kill`) while ``rerun`` waits: raised as
    ``_Terminated`` where that is safe, so that every counted run is stopped and the dump
    folder removed; only marked while a child is being started (so that none escapes
    unrecorded) and while the runs are cleaned up.  Installed from the main thread only,
    and not over a handler installed from C (Python cannot put that one back)."""

    def __init__(self):
        self.held = self.pending = self.installed = False
        self.old = None
        if threading.current_thread() is not threading.main_thread():
            return
        try:
            old = signal.getsignal(signal.SIGTERM)
            if old is None:           # a handler installed from C: leave SIGTERM to it
                return
            signal.signal(signal.SIGTERM, self._handler)
        except (ValueError, OSError, AttributeError):   # no SIGTERM to catch here
            return
        self.old, self.installed = old, True

    def _handler(self, signum, frame):
        if self.held:
            self.pending = True
        else:
            raise _Terminated()

    @contextlib.contextmanager
    def held_while(self):
        """Mark, not raise, inside; raise on leaving if one came."""
        self.held = True
        try:
            yield
        finally:
            self.held = False
        if self.pending:
            raise _Terminated()

    def restore(self):
        if self.installed:
            signal.signal(signal.SIGTERM, self.old)
            self.installed = False


def _wait(p):
    """Wait for the reported run, which has the user's terminal: on Ctrl-C it had the
    same SIGINT and ends as it chooses (pytest writes its summary and its cache first),
    within a minute; a second Ctrl-C stops it at once."""
    try:
        return p.wait()
    except KeyboardInterrupt:
        try:
            p.wait(timeout=60)
        except (KeyboardInterrupt, subprocess.TimeoutExpired):
            p.kill()
            p.wait()
        raise


def rerun(argv, label, cwd=None, runs=RUNS, probe_argv=None):
    """Run this interpreter with ``argv`` again under callgrind (in ``cwd``), ``runs``
    times, and return the exit status of the last, reported run.  The first ``runs - 1``
    (the probes) run side by side, their output kept aside (shown only when valgrind
    reports trouble), each with ``probe_argv(folder, i)`` instead of ``argv`` when given
    (the pytest plugin gives each its own copy of pytest's cache); each benchmark of the
    reported run then carries the lowest count the runs read (``lowest``).  The reported
    run's output is the user's (inherited streams).  Ctrl-C ends the runs as they choose
    (130); SIGTERM stops them (143); the dump folder goes either way."""
    runs = int(runs)
    if runs < 1:
        raise ValueError(f"the counted runs must be at least 1, got {runs}")
    valgrind = find_valgrind()
    folder = tempfile.mkdtemp(prefix="spatialhub-callgrind-")
    how = (f"{runs} times, the lowest count of each benchmark kept" if runs > 1 else "once")
    print(f"{label}: counting instructions: running again under valgrind's callgrind {how} "
          f"(each ~50x slower than native; the calling thread only)", file=sys.stderr,
          flush=True)
    children = []
    term = _Sigterm()
    status = None
    try:
        for i in range(runs - 1):
            args = argv if probe_argv is None else probe_argv(folder, i)
            cmd = callgrind_command([sys.executable, *args], folder, valgrind)
            with term.held_while(), open(os.path.join(folder, f"probe.{i}.log"), "wb") as log:
                children.append(subprocess.Popen(cmd, env=_probe_env(folder, i), cwd=cwd,
                                                 stdin=subprocess.DEVNULL, stdout=log,
                                                 stderr=subprocess.STDOUT))
        for p in children:
            p.wait()
        env = rerun_env(folder)
        if runs > 1:
            env[PROBES_ENV] = folder
        cmd = callgrind_command([sys.executable, *argv], folder, valgrind)
        with term.held_while():
            children.append(subprocess.Popen(cmd, env=env, cwd=cwd))
        status = _wait(children[-1])
    except KeyboardInterrupt:
        status = 130
    except _Terminated:
        status = 128 + signal.SIGTERM
    finally:
        term.held = True               # from here on, a SIGTERM is only marked
        try:
            for p in children:
                if p.poll() is None:
                    p.terminate()
                try:
                    p.wait()
                except KeyboardInterrupt:
                    p.kill()
                    p.wait()
            if status is not None and status not in (130, 128 + signal.SIGTERM):
                status = _valgrind_trouble(folder, label, status)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
            term.restore()
    if term.pending:
        return 128 + signal.SIGTERM
    return status if status >= 0 else 128 - status


def _valgrind_trouble(folder, label, status):
    """Show what valgrind itself reported in any run's log; a clean status becomes 1."""
    trouble = []
    for name in sorted(os.listdir(folder)):
        if name.startswith("valgrind.") and name.endswith(".log"):
            with open(os.path.join(folder, name), errors="replace") as f:
                text = f.read()
            if _VALGRIND_TROUBLE.search(text):
                trouble.append(text.strip()[-3000:])
    if trouble:
        print(f"{label}: valgrind reported:\n" + "\n".join(trouble), file=sys.stderr)
        if status == 0:
            status = 1
    return status


@dataclass(frozen=True)
class CountVerdict:
    """One benchmark's count against its baseline."""

    name: str
    verdict: str                  # "more" / "fewer" / "same" / "no data"
    ratio: Optional[float]        # candidate / baseline
    baseline: Optional[float]     # instructions per call
    candidate: Optional[float]
    threshold: Optional[float]    # allowed increase as a fraction; None: report only
    fails: bool
    reason: str

    def to_dict(self):
        return asdict(self)


def _count(x):
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) and v > 0 else None


def judge_counts(name, baseline, candidate, threshold=None, margin=None, what="instructions"):
    """Judge a count per call (``baseline`` then, ``candidate`` now: numbers or None).

    ``threshold``: the increase allowed, as a fraction (0.01 for 1%), or None to report
    only.  A change reads "more" / "fewer" beyond ``max(margin, NOISE)`` (``margin``:
    the threshold, else ``MARGIN``), "same" within it; it fails the gate when "more" by
    more than the threshold.  Unlike a time, a count needs no interval: separate runs of
    identical code read it to within ``NOISE``."""
    base, cand = _count(baseline), _count(candidate)
    if base is None or cand is None:
        side = "the baseline" if base is None else "the new run"
        return CountVerdict(name, "no data", None, base, cand, threshold, False,
                            f"{side} has no {what} count (measured without --instructions "
                            f"or counters=?): not judged")
    ratio = cand / base
    band = max(margin if margin is not None else
               threshold if threshold is not None else MARGIN, NOISE)
    if ratio > 1.0 + band:
        verdict = "more"
    elif ratio < 1.0 / (1.0 + band):
        verdict = "fewer"
    else:
        verdict = "same"
    fails = threshold is not None and verdict == "more" and ratio > 1.0 + threshold
    rule = (f"{threshold * 100:.3g}% allowed" if threshold is not None
            else f"{band * 100:.3g}% margin")
    reason = (f"{what} per call {ratio:.4f}x ({cand:,.0f} now, {base:,.0f} before): "
              f"{verdict}{', beyond the ' + rule if fails else ' (' + rule + ')'}")
    return CountVerdict(name, verdict, ratio, base, cand, threshold, fails, reason)
