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


# Folder by folder, bottom up (csrc/README.md is the map): each folder calls
# only the folders listed before it; module.c and constants.c at the top.
LAYERS = {
    "capi": ["args.c", "fields.c", "fielddoc.c", "notes.c", "instattrs.c", "docstrings.c"],
    "platform": ["clock.c", "memory.c", "rusage.c", "mallocstate.c", "dynlib.c", "cachecold.c",
                 "perfctr.c", "callgrind.c", "thread.c", "env.c"],
    "gpu": ["device.c", "cuda.c", "cudatime.c", "nvml.c"],
    "stats": ["summary.c", "bootstrap.c", "verdict.c", "stability.c", "queueing.c"],
    "render": ["markup.c", "flags.c", "cells.c", "columns.c", "table.c", "loadtable.c"],
    "types": ["benchstats.c", "warn.c", "gpumem.c", "compare.c", "cudasync.c", "rules.c",
              "loadstats.c"],
    "scope": ["scopedata.c", "scoperss.c", "scopenode.c", "scopeframe.c", "scope.c",
              "scopetimer.c"],
    "run": ["sync.c", "progress.c", "gcguard.c", "aio.c", "loop.c", "extras.c", "counters.c",
            "bench.c", "load.c"],
    ".": ["constants.c", "module.c"],
}
SOURCES = [os.path.normpath(os.path.join(folder, f)) for folder, files in LAYERS.items()
           for f in files]

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
            depends=[os.path.join(root, f) for root, _, files in os.walk("csrc")
                     for f in sorted(files) if f.endswith(".h")]
                    + [os.path.join("src", "spatialhub", "utils", "profiling", "_version.py")],
            include_dirs=["csrc", numpy.get_include()],
            # SHP_VERSION as a C string literal (csrc/shp.h)
            define_macros=[("NPY_TARGET_VERSION", "NPY_1_21_API_VERSION"),
                           ("SHP_VERSION", '"%s"' % version())],
            extra_compile_args=compile_args,
            extra_link_args=link_args,
            libraries=libraries,
        )
    ],
)
