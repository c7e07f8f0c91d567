"""Chrome Trace Event JSON export: valid JSON of complete ("X") events in microseconds, one
per scope call, properly nested per lane (what Perfetto, chrome://tracing and speedscope
need), from a bounded buffer that keeps the most recent calls."""
import asyncio
import json
import threading

import pytest

from spatialhub.utils.profiling import HierarchicalProfiler


def x_events(trace):
    return [e for e in trace["traceEvents"] if e["ph"] == "X"]


def assert_lanes_nest(events):
    """Within each (pid, tid), any two events are disjoint or one contains the other."""
    by_lane = {}
    for e in events:
        by_lane.setdefault((e["pid"], e["tid"]), []).append(e)
    for lane in by_lane.values():
        lane.sort(key=lambda e: (e["ts"], -e["dur"]))
        open_ends = []
        for e in lane:
            start, end = e["ts"], e["ts"] + e["dur"]
            while open_ends and open_ends[-1] <= start + 1e-6:
                open_ends.pop()
            assert not open_ends or end <= open_ends[-1] + 1e-6, ("partial overlap", e)
            open_ends.append(end)


def test_trace_is_valid_json_with_one_event_per_call(tmp_path):
    p = HierarchicalProfiler("Pipe", track_ram=False)
    for _ in range(3):
        with p("frame"):
            with p("pre"):
                pass
            with p("model"):
                with p("conv"):
                    pass
    path = tmp_path / "trace.json"
    trace = p.export_chrome_trace(path)
    loaded = json.loads(path.read_text())
    assert loaded == json.loads(json.dumps(trace))
    evs = x_events(loaded)
    assert len(evs) == 3 * 4
    for e in evs:
        assert set(e) >= {"name", "ph", "ts", "dur", "pid", "tid", "cat"}
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        assert e["ts"] >= 0 and e["dur"] >= 0
    assert sorted({e["args"]["path"] for e in evs}) == ["frame", "frame/model",
                                                        "frame/model/conv", "frame/pre"]
    names = {e["name"]: e for e in evs}
    assert names["conv"]["args"]["depth"] == 3
    # durations match the tree (µs in the trace, seconds on the nodes)
    frame_total_us = sum(e["dur"] for e in evs if e["name"] == "frame")
    assert frame_total_us == pytest.approx(p.root.children["frame"].total_wall_time * 1e6,
                                           rel=1e-9)
    assert_lanes_nest(evs)
    meta = [e for e in loaded["traceEvents"] if e["ph"] == "M"]
    assert {m["name"] for m in meta} == {"process_name", "thread_name"}
    assert loaded["displayTimeUnit"] == "ms"


def test_the_buffer_is_bounded_and_keeps_the_latest_calls():
    p = HierarchicalProfiler("R", track_ram=False, trace_capacity=10)
    assert p.trace_capacity == 10
    for i in range(100):
        with p(f"s{i}"):
            pass
    trace = p.export_chrome_trace()
    evs = x_events(trace)
    assert [e["name"] for e in evs] == [f"s{i}" for i in range(90, 100)]
    assert trace["otherData"]["events_dropped"] == 90
    # the tree keeps everything
    assert len(p.root.children) == 100


def test_capacity_zero_records_no_events_and_reset_clears():
    p = HierarchicalProfiler("R", track_ram=False, trace_capacity=0)
    with p("a"):
        pass
    assert x_events(p.export_chrome_trace()) == []
    q = HierarchicalProfiler("R", track_ram=False)
    with q("a"):
        pass
    q.reset()
    assert x_events(q.export_chrome_trace()) == []
    with pytest.raises(ValueError, match=r"HierarchicalProfiler\(\): trace_capacity must be >= 0, got -1"):
        HierarchicalProfiler(trace_capacity=-1)


def test_threads_get_their_own_lanes():
    p = HierarchicalProfiler("R", track_ram=False)
    barrier = threading.Barrier(3)

    def worker():
        with p("work"):
            barrier.wait()
            with p("step"):
                pass
            barrier.wait()

    ts = [threading.Thread(target=worker) for _ in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    evs = x_events(p.export_chrome_trace())
    assert len(evs) == 6
    assert len({e["tid"] for e in evs}) == 3
    assert_lanes_nest(evs)


def test_interleaved_asyncio_tasks_get_lanes_that_nest():
    p = HierarchicalProfiler("R", track_ram=False)

    async def task(i):
        with p("task"):
            await asyncio.sleep(0.001 * (i % 3))
            with p("io"):
                await asyncio.sleep(0.002)

    async def main():
        await asyncio.gather(*(task(i) for i in range(6)))

    asyncio.run(main())
    evs = x_events(p.export_chrome_trace())
    assert len(evs) == 12
    assert len({e["tid"] for e in evs}) >= 2      # overlapping tasks cannot share one lane
    assert_lanes_nest(evs)


def test_a_sibling_task_inside_anothers_time_is_not_drawn_as_its_child():
    """Task B's scope lies wholly within task A's in time, at the same depth: on one
    track it would look like A's child, so it goes on a track of its own."""
    p = HierarchicalProfiler("R", track_ram=False)

    async def long():
        with p("long"):
            await asyncio.sleep(0.05)

    async def short():
        await asyncio.sleep(0.01)
        with p("short"):
            await asyncio.sleep(0.005)

    async def main():
        await asyncio.gather(long(), short())

    asyncio.run(main())
    evs = {e["name"]: e for e in x_events(p.export_chrome_trace())}
    assert evs["short"]["ts"] > evs["long"]["ts"]
    assert evs["short"]["ts"] + evs["short"]["dur"] < evs["long"]["ts"] + evs["long"]["dur"]
    assert evs["short"]["tid"] != evs["long"]["tid"]
