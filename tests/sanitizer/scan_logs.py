"""Judge the sanitizer logs of .ci/sanitize.sh.

    python tests/sanitizer/scan_logs.py LOGDIR

Every process of the sanitized run (pytest, its Python children, the
notebook kernel, ...) writes its reports to LOGDIR/<tool>.<pid>.  A report
fails the job when it is
  * any AddressSanitizer error (heap/stack/global overflow, use after free,
    double free, SEGV, ...) or internal CHECK failure, in any process;
  * any fatal message of a sanitizer's own: LeakSanitizer dying at exit ("has
    encountered a fatal error", its tracer's "Tracer caught signal"), "...
    Sanitizer failed to ..." (allocate, mmap, deallocate), a DEADLYSIGNAL, an
    "ERROR: ...Sanitizer:" line of any kind but the leak summary (leaks are
    judged record by record, below): a run whose checker died checked nothing;
  * any UndefinedBehaviorSanitizer "runtime error";
  * a leak record with a frame in our code (csrc/, shp_*, the _native module),
    or any leak at all in a "leakcheck.*" log (the full-stack focused run,
    where the CPython/NumPy suppressions apply and nothing else may remain).
Leak records of the whole-suite run without a frame of ours are CPython's and
NumPy's own exit-time allocations (the suite runs with fast unwinding, which
cannot see past CPython's frames to tell them apart by suppression); they are
counted and listed by their top frames, not failed.
Exit status: 0 clean, 1 findings, 3 when the only findings are LeakSanitizer's
own tracer dying at a process's exit ("Tracer caught signal"): a fault of
LeakSanitizer's thread-stopping under ptrace, seen about once in several CI
runs, after which that process's leaks were not checked.  .ci/sanitize.sh then
reruns the tests that failed with it and passes only if they pass clean.
"""
import re
import sys
from collections import Counter
from pathlib import Path

# Every way a sanitizer says it died or could not do its job.  A leak summary
# ("ERROR: LeakSanitizer: detected memory leaks") is not one of them: its
# records are judged one by one below.
FATAL = re.compile(
    r"\w*Sanitizer has encountered a fatal error"
    r"|Tracer caught signal"
    r"|^.*\w*Sanitizer failed to .*$"
    r"|\w*Sanitizer:DEADLYSIGNAL"
    r"|\w*Sanitizer: nested bug"
    r"|\w*Sanitizer: internal allocator is out of memory"
    r"|ERROR: Failed to mmap"
    r"|ERROR: (?!AddressSanitizer: )\w*Sanitizer: (?!detected memory leaks).*", re.M)
# The one "failed to" that is not fatal: with allocator_may_return_null=1 a
# request too large for the allocator returns NULL (the MemoryError tests)
# after this warning.  Its internal allocators failing reads "ERROR: ...
# failed to allocate 0x... (...) bytes of ..." instead.
MAY_RETURN_NULL = re.compile(
    r"^(==\d+==)?WARNING: AddressSanitizer failed to allocate 0x[0-9a-f]+ bytes$")
OURS = re.compile(r"/csrc/|\bcsrc/|\bshp_\w+|_native\.cpython|\(_native")
# LeakSanitizer's tracer dying while it stops the threads at exit: its two
# messages, and the log holds nothing else of the sanitizers'
LSAN_TRACER = re.compile(r"Tracer caught signal|LeakSanitizer has encountered a fatal error")
FRAME = re.compile(r"^\s*#\d+ 0x[0-9a-f]+ in (\S+)")


def split_leaks(text):
    """Leak records: a 'Direct/Indirect leak of' line and its frames."""
    recs, cur = [], None
    for line in text.splitlines():
        if re.match(r"^(Direct|Indirect) leak of ", line):
            if cur:
                recs.append(cur)
            cur = [line]
        elif cur is not None:
            if line.strip().startswith("#"):
                cur.append(line)
            else:
                recs.append(cur)
                cur = None
    if cur:
        recs.append(cur)
    return recs


def main(logdir):
    logdir = Path(logdir)
    findings, foreign, counts = [], Counter(), Counter()
    tracer_only = True          # every finding so far is LeakSanitizer's tracer dying
    files = sorted(p for p in logdir.iterdir() if p.is_file()) if logdir.is_dir() else []
    for path in files:
        text = path.read_text(errors="replace")
        strict = path.name.startswith("leakcheck")
        for m in re.finditer(r"ERROR: AddressSanitizer: .*|Sanitizer: CHECK failed: .*", text):
            counts["asan errors"] += 1
            start = max(0, m.start() - 200)
            findings.append(f"{path.name}: {text[start:start + 4000]}")
        for m in FATAL.finditer(text):
            if MAY_RETURN_NULL.match(m.group(0).strip()):
                counts["allocations refused (allocator_may_return_null)"] += 1
                continue
            counts["sanitizer fatal errors"] += 1
            tracer_only = tracer_only and bool(LSAN_TRACER.search(m.group(0)))
            start = max(0, m.start() - 200)
            findings.append(f"{path.name}: {text[start:start + 3000]}")
        for m in re.finditer(r"^.*runtime error: .*$", text, re.M):
            counts["ubsan reports"] += 1
            findings.append(f"{path.name}: {text[m.start():m.start() + 3000]}")
        for rec in split_leaks(text):
            body = "\n".join(rec)
            if OURS.search(body) or strict:
                counts["leaks (ours)" if OURS.search(body) else "leaks (focused run)"] += 1
                findings.append(f"{path.name}: {body}")
            else:
                counts["leaks (CPython/NumPy, not ours)"] += 1
                top = [FRAME.match(f).group(1) for f in rec[1:] if FRAME.match(f)]
                top = [t for t in top if not t.startswith("__interceptor")][:3]
                foreign[" <- ".join(top) or "?"] += 1
    print(f"sanitizer logs: {len(files)} file(s) in {logdir}")
    for k in ("asan errors", "sanitizer fatal errors", "ubsan reports", "leaks (ours)",
              "leaks (focused run)", "allocations refused (allocator_may_return_null)",
              "leaks (CPython/NumPy, not ours)"):
        print(f"  {k}: {counts[k]}")
    for stack, n in foreign.most_common(8):
        print(f"    {n:5d} x {stack}")
    if findings:
        print("\nFINDINGS:")
        for f in findings[:40]:
            print("-" * 70)
            print(f)
        others = sum(counts[k] for k in ("asan errors", "ubsan reports", "leaks (ours)",
                                          "leaks (focused run)"))
        if tracer_only and not others:
            print("\nOnly LeakSanitizer's tracer died (at a process's exit): exit status 3")
            return 3
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
