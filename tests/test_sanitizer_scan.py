"""tests/sanitizer/scan_logs.py, the judge of .ci/sanitize.sh's logs: a log in which a
sanitizer reported a fault, or died, or could not do its job fails the run; a log with
only what the run expects (CPython's own exit-time leaks, the allocator refusing a huge
request that the MemoryError tests make on purpose) passes.  Issue 23, item 9: the scan
passed a log where LeakSanitizer died at exit."""
import subprocess
import sys
from pathlib import Path

import pytest

SCAN = Path(__file__).resolve().parent / "sanitizer" / "scan_logs.py"

# Messages as the GCC 12 runtimes print them (==PID== prefixes included).
FATAL_LOGS = {
    "lsan fatal at exit": (
        "==4242==LeakSanitizer has encountered a fatal error.\n"
        "==4242==HINT: For debugging, try setting environment variable "
        "LSAN_OPTIONS=verbosity=1:log_threads=1\n"
        "==4242==HINT: LeakSanitizer does not work under ptrace (strace, gdb, etc)\n"),
    "lsan tracer crashed": (
        "==4243==Tracer caught signal 11: addr=0x0 pc=0x7f3a1c2b4e10 sp=0x7f3a0bffec40\n"),
    "asan internal allocation failed": (
        "==4244==ERROR: AddressSanitizer failed to allocate 0x10000 (65536) bytes of "
        "SizeClassAllocator (error code: 12)\n"),
    "asan failed to deallocate": (
        "==4245==AddressSanitizer failed to deallocate 0x1000 (4096) bytes at address "
        "0x7f0000000000\n"),
    "deadly signal": (
        "AddressSanitizer:DEADLYSIGNAL\n"
        "=================================================================\n"
        "==4246==ERROR: AddressSanitizer: SEGV on unknown address 0x000000000008 (pc "
        "0x7f3a1c2b4e10 bp 0x7ffd sp 0x7ffd T0)\n"),
    "ubsan deadly signal": (
        "UndefinedBehaviorSanitizer:DEADLYSIGNAL\n"
        "==4247==ERROR: UndefinedBehaviorSanitizer: SEGV on unknown address 0x000000000000\n"),
    "ubsan runtime error": (
        "csrc/scope/scopetimer.c:262:5: runtime error: signed integer overflow: "
        "9223372036854775807 + 1 cannot be represented in type 'long long int'\n"),
    "heap overflow": (
        "==4248==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x602000000018\n"
        "    #0 0x7f in Profiler_trace csrc/scope/scope.c:430\n"),
    "a leak of ours": (
        "==4249==ERROR: LeakSanitizer: detected memory leaks\n\n"
        "Direct leak of 40 byte(s) in 1 object(s) allocated from:\n"
        "    #0 0x7f in __interceptor_malloc\n"
        "    #1 0x7f in shp_window_open csrc/platform/memory.c:300\n\n"
        "SUMMARY: AddressSanitizer: 40 byte(s) leaked in 1 allocation(s).\n"),
    "check failed": (
        "==4250==AddressSanitizer CHECK failed: sanitizer_common.cpp:51 \"((0)) != (0)\" "
        "(0x0, 0x0)\n==4250==Sanitizer: CHECK failed: x\n"),
    "nested bug": "==4251==AddressSanitizer: nested bug in the same thread, aborting.\n",
}

CLEAN_LOGS = {
    "nothing": "",
    "allocator_may_return_null": (
        "==4300==WARNING: AddressSanitizer failed to allocate 0xe8d4a51000 bytes\n"),
    "cpython's own leak": (
        "==4301==ERROR: LeakSanitizer: detected memory leaks\n\n"
        "Direct leak of 576 byte(s) in 1 object(s) allocated from:\n"
        "    #0 0x7f in __interceptor_malloc\n"
        "    #1 0x5f in PyObject_Malloc\n\n"
        "SUMMARY: AddressSanitizer: 576 byte(s) leaked in 1 allocation(s).\n"),
}


def scan(tmp_path, text, name="asan.4242"):
    (tmp_path / name).write_text(text)
    return subprocess.run([sys.executable, str(SCAN), str(tmp_path)], capture_output=True,
                          text=True, timeout=60)


# LeakSanitizer's own tracer dying at exit: the scan says so apart (status 3), and
# .ci/sanitize.sh reruns the tests that failed with it
LSAN_TRACER = ("lsan fatal at exit", "lsan tracer crashed")


@pytest.mark.parametrize("case", sorted(FATAL_LOGS))
def test_a_fault_or_a_dead_sanitizer_fails_the_scan(tmp_path, case):
    done = scan(tmp_path, FATAL_LOGS[case])
    assert done.returncode == (3 if case in LSAN_TRACER else 1), (case, done.stdout)
    assert "FINDINGS" in done.stdout


@pytest.mark.parametrize("case", sorted(set(FATAL_LOGS) - set(LSAN_TRACER)))
def test_lsans_tracer_dying_beside_a_real_finding_is_a_finding(tmp_path, case):
    (tmp_path / "asan.1").write_text(FATAL_LOGS["lsan tracer crashed"])
    done = scan(tmp_path, FATAL_LOGS[case], name="asan.2")
    assert done.returncode == 1, (case, done.stdout)


@pytest.mark.parametrize("case", sorted(CLEAN_LOGS))
def test_what_the_run_expects_passes(tmp_path, case):
    done = scan(tmp_path, CLEAN_LOGS[case])
    assert done.returncode == 0, (case, done.stdout)


def test_the_fatal_lsan_message_is_found_amid_a_clean_log(tmp_path):
    """The gate test's child under ASan: a clean run, then LeakSanitizer dies at exit."""
    text = (CLEAN_LOGS["cpython's own leak"] + CLEAN_LOGS["allocator_may_return_null"]
            + FATAL_LOGS["lsan fatal at exit"])
    done = scan(tmp_path, text, name="asan.777")
    assert done.returncode == 3 and "sanitizer fatal errors: 1" in done.stdout, done.stdout
    assert "leaks (CPython/NumPy, not ours): 1" in done.stdout
