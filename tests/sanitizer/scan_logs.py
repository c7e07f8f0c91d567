"""Judge the sanitizer logs of .ci/sanitize.sh.

    python tests/sanitizer/scan_logs.py LOGDIR

Every process of the sanitized run (pytest, its Python children, the
notebook kernel, ...) writes its reports to LOGDIR/<tool>.<pid>.  A report
fails the job when it is
  * any AddressSanitizer error (heap/stack/global overflow, use after free,
    double free, SEGV, ...) or internal CHECK failure, in any process;
  * any UndefinedBehaviorSanitizer "runtime error";
  * a leak record with a frame in our code (csrc/, shp_*, the _native module),
    or any leak at all in a "leakcheck.*" log (the full-stack focused run,
    where the CPython/NumPy suppressions apply and nothing else may remain).
Leak records of the whole-suite run without a frame of ours are CPython's and
NumPy's own exit-time allocations (the suite runs with fast unwinding, which
cannot see past CPython's frames to tell them apart by suppression); they are
counted and listed by their top frames, not failed.
Exit status: 0 clean, 1 findings.
"""
import re
import sys
from collections import Counter
from pathlib import Path

OURS = re.compile(r"/csrc/|\bcsrc/|\bshp_\w+|_native\.cpython|\(_native")
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
    files = sorted(p for p in logdir.iterdir() if p.is_file()) if logdir.is_dir() else []
    for path in files:
        text = path.read_text(errors="replace")
        strict = path.name.startswith("leakcheck")
        for m in re.finditer(r"ERROR: AddressSanitizer: .*|Sanitizer: CHECK failed: .*", text):
            counts["asan errors"] += 1
            start = max(0, m.start() - 200)
            findings.append(f"{path.name}: {text[start:start + 4000]}")
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
    for k in ("asan errors", "ubsan reports", "leaks (ours)", "leaks (focused run)",
              "leaks (CPython/NumPy, not ours)"):
        print(f"  {k}: {counts[k]}")
    for stack, n in foreign.most_common(8):
        print(f"    {n:5d} x {stack}")
    if findings:
        print("\nFINDINGS:")
        for f in findings[:40]:
            print("-" * 70)
            print(f)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
