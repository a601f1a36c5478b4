"""namesrv_grpc.runtime.pauses (garbage-collection pauses, event-loop lag) and the route table's
representation, which keeps a large table out of what a full collection walks."""

from __future__ import annotations

import asyncio
import gc
import time

from namesrv_grpc.core.model import QueueData, TopicConfig
from namesrv_grpc.core.route_table import RouteInfoManager
from namesrv_grpc.metrics import GC_PAUSE_BUCKETS, LOOP_LAG_BUCKETS, FastHistogram
from namesrv_grpc.runtime.pauses import GC_GENERATIONS, GcPauses, LoopLagProbe, freeze_startup_objects


def total(histogram: FastHistogram) -> int:
    return sum(histogram.counts)


def test_gc_pauses_counted_by_generation_while_installed() -> None:
    histograms = {generation: FastHistogram(GC_PAUSE_BUCKETS) for generation in GC_GENERATIONS}
    pauses = GcPauses(histograms)
    pauses.install()
    pauses.install()  # idempotent: one callback
    try:
        gc.collect(0)
        gc.collect(2)
    finally:
        pauses.uninstall()
    assert total(histograms["0"]) >= 1
    assert total(histograms["2"]) == 1
    assert 0 < histograms["2"].sum < 5
    gc.collect(2)  # uninstalled: not counted
    assert total(histograms["2"]) == 1
    pauses.uninstall()  # idempotent


def test_loop_lag_probe_records_a_blocked_loop() -> None:
    histogram = FastHistogram(LOOP_LAG_BUCKETS)

    async def main() -> None:
        probe = LoopLagProbe(histogram, interval=0.02)
        probe.start()
        await asyncio.sleep(0.1)
        time.sleep(0.3)  # noqa: ASYNC251 -- blocking the loop on purpose: the probe runs ~0.3 s late
        await asyncio.sleep(0.1)
        await probe.stop()

    asyncio.run(main())
    assert total(histogram) >= 4
    late = sum(histogram.counts[LOOP_LAG_BUCKETS.index(0.25) + 1 :])
    assert late == 1, histogram.counts  # exactly one observation above 250 ms
    assert histogram.sum >= 0.25


def test_large_table_is_not_tracked_by_the_collector() -> None:
    """QueueData as plain int tuples, each topic's as two tuples, the topic index as dicts, cached
    routes as tuples of bytes: after a collection none of them is tracked, not even the dicts of all
    topics, so a full collection does not walk the table (a NamedTuple, a set or a dict of dicts is
    tracked for ever)."""
    rt = RouteInfoManager()
    for b in range(4):
        configs = {f"T{t}": TopicConfig(f"T{t}", 8, 8) for t in range(b % 2, 2000, 2)}
        rt.register_broker(
            cluster_name="c", broker_name=f"broker-{b}", broker_id=0, broker_addr=f"10.0.0.{b}:10911",
            topic_configs=configs,
        )  # fmt: skip
    rt.pickup_topic_route_cached("T1", lambda route: b"encoded", key="grpc")
    gc.collect()
    gc.collect()  # a tuple of tuples is untracked one level per collection
    assert rt.topic_queue_table["T1"] == {
        "broker-1": QueueData("broker-1", 8, 8, 6, 0),
        "broker-3": QueueData("broker-3", 8, 8, 6, 0),
    }
    records = list(rt.topic_queue_nums.values())
    assert len(records) == 2000
    assert not any(gc.is_tracked(record) for record in records)
    assert not any(gc.is_tracked(nums) for _, values in records for nums in values)
    assert not gc.is_tracked(rt.topic_queue_nums)  # the 2,000-entry dict itself is not walked
    assert not any(gc.is_tracked(topics) for topics in rt.topics_by_broker_name.values())
    assert not any(gc.is_tracked(answers) for answers in rt.route_answers.dicts())
    assert len({id(record) for record in records}) == 2  # two distinct records (broker-0/2, broker-1/3), shared
    values = {id(nums) for _, values in records for nums in values}
    assert len(values) == 1  # one shared (8, 8, 6, 0)


def test_startup_objects_are_frozen_out_of_collections() -> None:
    try:
        frozen = freeze_startup_objects()
        # Another thread of the test process may free a frozen object meanwhile (CI: 208,091 frozen,
        # 208,090 a moment later); nothing joins the frozen generation but gc.freeze().
        assert 1_000 < gc.get_freeze_count() <= frozen
        assert not any(obj is test_startup_objects_are_frozen_out_of_collections for obj in gc.get_objects())
    finally:
        gc.unfreeze()
