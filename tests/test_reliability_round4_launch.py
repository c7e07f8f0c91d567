"""Reliability round 4 (issue 30), the fresh-process launcher: what crosses into a fresh
interpreter (benchmark_repeated, compare_repeated, the CLI's --processes) and back arrives
as it left.  A non-contiguous structured, sub-array or metadata-carrying array keeps its
dtype whole (defect 2); a relayed warning is the class an in-process run raises, with its
attributes, .causes, .benchmark and .stats, so filters and -W error match (defect 7), and
is counted once per process; a child that fails to load the script with a long report
while a large job is sent is reported, bounded, never a deadlock, on both the POSIX path
and the stdout-pipe path Windows takes (defect 9); a user's exception whose __init__
plain pickle cannot call arrives as itself.  The audit's other kinds of arguments (object,
0-d, byte-swapped, datetime64, negative strides, Fortran order, read-only) are checked
to arrive as the parent holds them, an array of objects keeps its strides, and the
pooled result keeps what every run measured (cache mode, counters, GPU times).  Each of
those tests failed on a601027; two guard what already held and must stay so: a warning
class the parent lacks still arrives, and Ctrl-C while the job is sent ends the child and
leaves no thread (docs/reliability.md, "Round 4")."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

import _fresh
import spatialhub.utils.profiling as prof
from spatialhub.utils.profiling import _native, benchmark_repeated

HERE = os.path.dirname(os.path.abspath(__file__))
ONE = dict(num_warmup=0, num_iters=1, track_ram=False)


def described(tmp_path, *arrays):
    """How a fresh process holds `arrays`, and how this one does, as JSON rows."""
    out = tmp_path / "d.jsonl"
    benchmark_repeated(_fresh.describe, str(out), *arrays, repeat=1, **ONE)
    child = json.loads(out.read_text().splitlines()[-1])
    _fresh.describe(str(tmp_path / "here.jsonl"), *arrays)
    here = json.loads((tmp_path / "here.jsonl").read_text().splitlines()[-1])
    return child, here


# ---- defect 2: a strided array's dtype arrives whole --------------------------------------

def test_a_strided_structured_array_keeps_its_fields_subarrays_and_metadata(tmp_path):
    pair = np.zeros(6, dtype=[("x", "<f4"), ("y", "<i8")])
    pair["x"], pair["y"] = np.arange(6) / 2, 10 * np.arange(6)
    aligned = np.zeros(6, dtype=np.dtype([("x", "<f4"), ("y", "<i8")], align=True))
    aligned["y"] = [7, 8, 9, 10, 11, 12]
    vectors = np.zeros((4, 3), dtype=[("v", "<f4", (2,))])
    vectors["v"] = np.arange(24).reshape(4, 3, 2)
    metres = np.arange(10, dtype=np.dtype(np.float64, metadata={"unit": "m"}))
    arrays = (pair[::2], aligned[::2], vectors[:, ::2], metres[::3])
    assert not any(a.flags.c_contiguous or a.flags.f_contiguous for a in arrays)
    child, here = described(tmp_path, *arrays)
    assert child == here
    # what a user reads: the fields by name, the sub-array, the unit
    assert child[0]["dtype"]["names"] == ["x", "y"]
    assert child[0]["values"] == "[(0.0, 0), (1.0, 20), (2.0, 40)]"
    assert child[1]["dtype"]["aligned_struct"] is True
    assert child[1]["values"] == "[(0.0, 7), (0.0, 9), (0.0, 11)]"
    assert child[2]["dtype"]["descr"] == "[('v', '<f4', (2,))]" and child[2]["shape"] == [4, 2]
    assert child[3]["dtype"]["metadata"] == {"unit": "m"}
    assert [c["strides"] for c in child] == [[24], [32], [24, 16], [24]]   # still views


def test_arguments_of_every_other_kind_arrive_as_the_parent_holds_them(tmp_path):
    objects = np.array([1, "a", None, (2, 3)], dtype=object)
    swapped = np.arange(10, dtype=">i4")
    stamps = np.array(["2026-01-01T00:00:00.001", "2026-01-02", "2026-03-04"],
                      dtype="datetime64[ms]")
    fortran = np.asfortranarray(np.arange(12.0).reshape(3, 4))
    frozen = np.asfortranarray(np.arange(6.0).reshape(2, 3))
    frozen.flags.writeable = False
    strided_ro = np.arange(10.0)[::2]
    strided_ro.flags.writeable = False
    field = np.zeros(5, dtype=[("a", "<i2"), ("b", "<f8")])
    field["b"] = np.arange(5) * 1.5
    arrays = (objects, objects[::2], np.array(3.5), swapped[::3], stamps[::2],
              np.arange(10.0)[::-1], fortran, frozen, strided_ro, field["b"])
    child, here = described(tmp_path, *arrays)
    assert child == here
    assert child[3]["dtype"]["byteorder"] == ">" and child[3]["values"] == "[0, 3, 6, 9]"
    assert child[4]["dtype"]["datetime_unit"] == "ms"
    assert child[5]["strides"] == [-8] and child[6]["f_contiguous"] is True
    assert child[7]["writeable"] is False and child[8]["writeable"] is False
    assert child[9]["strides"] == [10]   # a field's view: a stride of the record size
