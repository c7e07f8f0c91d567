"""Judge a valgrind memcheck log of .ci/valgrind.sh.

    python tests/sanitizer/scan_valgrind.py LOG

Fails (exit 1) on any error record -- invalid read/write/free, use of an
uninitialised value, overlapping copy -- and on any definitely/indirectly
lost block whose stack has a frame of ours: a source file under csrc/ (the
log is written with --fullpath-after=, so our frames read .../csrc/x.c:N) or
the _native module itself (when it has no debug info).  Records wholly inside
CPython, NumPy or the loader are counted and summarised, not failed: they are
not ours, and the suppressions file already silences the known ones.
"""
import re
import sys
from collections import Counter

OURS = re.compile(r"/csrc/(?:\w+/)?\w+\.c:\d+|_native\.cpython|\bshp_\w+")
KINDS = re.compile(r"Invalid (read|write|free)|uninitialised|Mismatched free|overlap|"
                   r"definitely lost|indirectly lost|Syscall param")


def records(log):
    out, cur = [], []
    for line in log.splitlines():
        m = re.match(r"^==\d+== ?(.*)$", line)
        if not m:
            continue
        body = m.group(1)
        if not body.strip():
            if cur:
                out.append(cur)
            cur = []
        elif not body.startswith(" ") and not cur:
            cur = [body]
        elif cur:
            cur.append(body)
    if cur:
        out.append(cur)
    return out


def main(path):
    log = open(path, errors="replace").read()
    ours, foreign = [], Counter()
    for rec in records(log):
        head = rec[0]
        if not KINDS.search(head) or head.startswith(("LEAK SUMMARY", "ERROR SUMMARY")):
            continue
        text = "\n".join(rec)
        if OURS.search(text):
            ours.append(text)
        else:
            frames = [re.sub(r"^\s*(at|by) 0x[0-9A-F]+: ", "", f).split(" (")[0]
                      for f in rec[1:] if re.match(r"\s*(at|by) 0x", f)]
            foreign[re.sub(r"[\d,]+", "N", head)[:50] + " | " + " <- ".join(frames[:3])] += 1
    summary = [l for l in log.splitlines() if re.search(
        r"ERROR SUMMARY|definitely lost:|indirectly lost:|suppressed:", l)]
    print("\n".join(summary[-4:]))
    print(f"records with a frame of ours: {len(ours)}; not ours: {sum(foreign.values())}")
    for k, n in foreign.most_common(6):
        print(f"  {n:4d} x {k}")
    if ours:
        print("\nIN OUR CODE:")
        for r in ours[:20]:
            print("-" * 70)
            print(r)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
