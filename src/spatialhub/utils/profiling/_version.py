"""The version of spatialhub-profiling, written here and nowhere else.

Read statically (never imported) by the build: pyproject.toml's
``[tool.setuptools.dynamic]`` takes it for the distribution's metadata (what
``pip show`` and ``importlib.metadata`` say), and setup.py compiles it into the
native core as SHP_VERSION (``_native.__version__`` and ``env["spatialhub_profiling"]``
of every result).  The package re-exports it as ``__version__``; the command line's
``--version`` and the pytest plugin's JSON ``version`` read it from there.  A
release tag ``vX.Y.Z`` must name this version (.ci/build.sh checks it); how to cut a
release: docs/building.md.
"""
__version__ = "0.1.0"
