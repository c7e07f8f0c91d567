"""Build the native core.  All metadata lives in pyproject.toml, but the version, which
src/spatialhub/utils/profiling/_version.py holds and both files read.

Build knobs (environment variables):
  SPATIALHUB_STRICT=1    -Wall -Wextra -Werror (CI builds this way)
  SPATIALHUB_SANITIZE=1  AddressSanitizer + UndefinedBehaviorSanitizer
  SPATIALHUB_DEBUG=1     -O0 -g
"""
import ast
import os
import sys

import numpy
from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))


def knob(name):
    return os.environ.get(name, "") not in ("", "0")


def version():
    """__version__ from src/spatialhub/utils/profiling/_version.py, read without importing
    the package (whose __init__ needs the extension this builds).  pyproject.toml reads
    the same assignment for the metadata."""
    path = os.path.join(HERE, "src", "spatialhub", "utils", "profiling", "_version.py")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and getattr(node.targets[0], "id", None) == "__version__"):
            return ast.literal_eval(node.value)
    raise RuntimeError(f"no __version__ = '...' assignment in {path}")


# In layer order (csrc/profiling.h has the map): leaves, computation, fields,
# rendering, Python types, the run, the module.
SOURCES = [
    "clock.c", "memory.c", "rusage.c", "mallocstate.c", "dynlib.c", "cuda.c", "cudafork.c", "args.c", "device.c", "instattrs.c",
    "notes.c", "env.c", "cachecold.c", "nvml.c", "cudatime.c", "constants.c", "perfctr.c", "callgrind.c",
    "docstrings.c",
    "summary.c", "bootstrap.c", "markup.c", "scopedata.c", "scoperss.c", "verdict.c", "stability.c",
    "fields.c", "fielddoc.c",
    "flags.c", "cells.c", "columns.c", "table.c",
    "stats.c", "warn.c", "advice.c", "gpumem.c", "compare.c", "cudasync.c", "scopenode.c", "scopeframe.c", "scope.c", "scopetimer.c",
    "sync.c", "progress.c", "gcguard.c", "loop.c", "extras.c", "counters.c", "bench.c",
    "module.c",
]

compile_args, link_args, libraries = [], [], []
if sys.platform == "win32":
    compile_args += ["/W3"] + (["/WX"] if knob("SPATIALHUB_STRICT") else [])
else:
    compile_args += ["-std=c11", "-fvisibility=hidden"]
    if knob("SPATIALHUB_STRICT"):
        compile_args += ["-Wall", "-Wextra", "-Werror"]
    if knob("SPATIALHUB_DEBUG"):
        compile_args += ["-O0", "-g3"]
    if knob("SPATIALHUB_SANITIZE"):
        san = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer",
               "-fno-sanitize-recover=undefined"]
        compile_args += san + ["-O1", "-g"]
        link_args += san
    if sys.platform.startswith("linux"):
        libraries += ["dl", "m"]

setup(
    ext_modules=[
        Extension(
            "spatialhub.utils.profiling._native",
            sources=[os.path.join("csrc", s) for s in SOURCES],
            # a change to either rebuilds every object (SHP_VERSION comes from _version.py)
            depends=[os.path.join("csrc", "profiling.h"),
                     os.path.join("src", "spatialhub", "utils", "profiling", "_version.py")],
            include_dirs=["csrc", numpy.get_include()],
            # SHP_VERSION as a C string literal (csrc/profiling.h)
            define_macros=[("NPY_TARGET_VERSION", "NPY_1_21_API_VERSION"),
                           ("SHP_VERSION", '"%s"' % version())],
            extra_compile_args=compile_args,
            extra_link_args=link_args,
            libraries=libraries,
        )
    ],
)
