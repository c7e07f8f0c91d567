"""Build the native core.  All metadata lives in pyproject.toml.

Build knobs (environment variables):
  SPATIALHUB_STRICT=1    -Wall -Wextra -Werror (CI builds this way)
  SPATIALHUB_SANITIZE=1  AddressSanitizer + UndefinedBehaviorSanitizer
  SPATIALHUB_DEBUG=1     -O0 -g
"""
import os
import sys

import numpy
from setuptools import Extension, setup


def knob(name):
    return os.environ.get(name, "") not in ("", "0")


# In layer order (csrc/profiling.h has the map): leaves, computation, fields,
# rendering, Python types, the run, the module.
SOURCES = [
    "clock.c", "memory.c", "rusage.c", "mallocstate.c", "dynlib.c", "cuda.c", "cudafork.c", "args.c", "device.c", "instattrs.c",
    "notes.c", "env.c", "cachecold.c", "nvml.c", "cudatime.c", "docstrings.c",
    "summary.c", "bootstrap.c", "markup.c", "scopedata.c", "verdict.c", "stability.c",
    "fields.c", "fielddoc.c",
    "flags.c", "cells.c", "table.c",
    "stats.c", "warn.c", "advice.c", "gpumem.c", "compare.c", "cudasync.c", "scopenode.c", "scopeframe.c", "scope.c", "scopetimer.c",
    "sync.c", "progress.c", "gcguard.c", "loop.c", "extras.c", "bench.c",
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
            include_dirs=["csrc", numpy.get_include()],
            define_macros=[("NPY_TARGET_VERSION", "NPY_1_21_API_VERSION")],
            extra_compile_args=compile_args,
            extra_link_args=link_args,
            libraries=libraries,
        )
    ],
)
