"""The broker agent and RocketMQ 5.x (S44): the zone comes from ``ROCKETMQ_ZONE`` as a Java broker
takes it (broker.conf ``zoneName`` only as a warned fallback), and the static-topic mappings of the
broker's ``store/config/topicQueueMapping.json`` are registered, against a real NameServer."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import grpc
import pytest

from broker_agent.agent import BrokerAgent
from broker_agent.config import BrokerConfig, load_broker_config
from broker_agent.topics import TopicsFileError, TopicSource, parse_topic_queue_mapping_json
from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv_grpc.core.model import TopicQueueMappingInfo
from namesrv_grpc.core.route_tables import wall_clock_millis
from namesrv_grpc.runtime.properties import ConfigError, read_properties
from tests.support import NamesrvProcess, Stubs, fixture_path

QUICKSTART = fixture_path("topics-quickstart.json")

# topicQueueMapping.json as RocketMQ 5.x's TopicQueueMappingManager persists it (fastjson, pretty off):
# hostedQueues is keyed by integers written unquoted. Logic queues 0 and 1 live on broker-a now;
# logic queue 2 moved to broker-b (its last item names broker-b), so broker-a registers 0 and 1 only.
MAPPING_FILE = (
    '{"dataVersion":{"counter":2,"stateVersion":0,"timestamp":1700000000000},'
    '"topicQueueMappingInfoMap":{"StaticTopic":{"bname":"broker-a","currIdMap":{},"dirty":false,'
    '"epoch":1700000000123,"hostedQueues":{'
    '0:[{"bname":"broker-a","endOffset":-1,"gen":0,"logicOffset":0,"queueId":0,"startOffset":0,'
    '"timeOfEnd":-1,"timeOfStart":-1}],'
    '1:[{"bname":"broker-a","endOffset":-1,"gen":0,"logicOffset":0,"queueId":1,"startOffset":0,'
    '"timeOfEnd":-1,"timeOfStart":-1}],'
    '2:[{"bname":"broker-a","endOffset":100,"gen":0,"logicOffset":0,"queueId":2,"startOffset":0,'
    '"timeOfEnd":-1,"timeOfStart":-1},{"bname":"broker-b","endOffset":-1,"gen":1,"logicOffset":100,'
    '"queueId":0,"startOffset":0,"timeOfEnd":-1,"timeOfStart":-1}]},'
    '"scope":"__global__","topic":"StaticTopic","totalQueues":3}}}'
)


def config_with(env: dict[str, str], warnings: list[str] | None = None, **overrides: str) -> BrokerConfig:
    props = read_properties(fixture_path("broker-a.properties"))
    props["brokerIP1"] = "127.0.0.1"
    props.update(overrides)
    return load_broker_config(props, "broker-a.properties", namesrv_addr_override="127.0.0.1:1", environ=env,
                              warnings=warnings)  # fmt: skip


def test_s44_zone_comes_from_rocketmq_zone_as_a_java_broker_reads_it() -> None:
    warnings: list[str] = []
    assert config_with({"ROCKETMQ_ZONE": "zone-a"}, warnings).zone_name == "zone-a"
    assert warnings == []
    assert config_with({}, warnings).zone_name == ""


def test_s44_zone_name_key_is_a_warned_fallback() -> None:
    warnings: list[str] = []
    assert config_with({}, warnings, zoneName="zone-f").zone_name == "zone-f"
    assert len(warnings) == 1
    assert "ROCKETMQ_ZONE" in warnings[0]
    assert "ignores" in warnings[0]
    warnings.clear()
    assert config_with({"ROCKETMQ_ZONE": "zone-e"}, warnings, zoneName="zone-f").zone_name == "zone-e"
    assert len(warnings) == 1
    assert "ignored" in warnings[0]
    with pytest.raises(ConfigError):
        config_with({"ROCKETMQ_ZONE": "zone\x01"})


def test_s44_mapping_file_is_registered_as_clone_as_mapping_info() -> None:
    mappings = parse_topic_queue_mapping_json(MAPPING_FILE, "topicQueueMapping.json")
    assert mappings == {
        "StaticTopic": TopicQueueMappingInfo(
            "StaticTopic", "broker-a", total_queues=3, epoch=1700000000123, curr_id_map={0: 0, 1: 1}
        )
    }
    with pytest.raises(TopicsFileError, match="bname"):
        parse_topic_queue_mapping_json('{"topicQueueMappingInfoMap":{"S":{"topic":"S"}}}', "f")


def test_s44_agent_sends_zone_and_mappings_and_follows_mapping_changes(namesrv: NamesrvProcess, tmp_path: Path) -> None:
    store = tmp_path / "store" / "config"
    store.mkdir(parents=True)
    topics = json.loads(QUICKSTART.read_text(encoding="utf-8"))
    topics["topicConfigTable"]["StaticTopic"] = {"topicName": "StaticTopic", "readQueueNums": 3, "writeQueueNums": 3}
    (store / "topics.json").write_text(json.dumps(topics), encoding="utf-8")
    (store / "topicQueueMapping.json").write_text(MAPPING_FILE, encoding="utf-8")
    props = read_properties(fixture_path("broker-a.properties"))
    props.update(brokerIP1="127.0.0.1", storePathRootDir=str(tmp_path / "store"))
    config = load_broker_config(props, "broker-a", namesrv_addr_override=namesrv.address,
                                environ={"ROCKETMQ_ZONE": "zone-a"})  # fmt: skip
    source = TopicSource(config, config.default_topics_json, wall_clock_millis)
    source.load_initial()

    async def round_trip() -> None:
        agent = BrokerAgent(config, source)
        try:
            result = await agent.register_all(force=True)
            assert not result.errors, result.errors
        finally:
            await agent.close()

    asyncio.run(round_trip())
    with grpc.insecure_channel(namesrv.address) as channel:
        stubs = Stubs(channel)
        info = stubs.ns.GetBrokerClusterInfo(ns_pb2.GetBrokerClusterInfoRequest(), timeout=5)
        assert info.broker_addr_table["broker-a"].zone_name == "zone-a"
        route = stubs.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic="StaticTopic"), timeout=5).route
        got = route.topic_queue_mapping_by_broker["broker-a"]
        assert (got.total_queues, got.epoch, dict(got.curr_id_map)) == (3, 1700000000123, {0: 0, 1: 1})

        # a remapping: the broker rewrites both files with new versions (delete + rename)
        changed = MAPPING_FILE.replace("1700000000123", "1700000000999")
        tmp = store / "topicQueueMapping.json.tmp"
        tmp.write_text(changed, encoding="utf-8")
        os.replace(tmp, store / "topicQueueMapping.json")
        topics["dataVersion"] = {"counter": 99, "timestamp": wall_clock_millis()}
        shutil.copy(store / "topics.json", store / "topics.json.bak")
        (store / "topics.json.tmp").write_text(json.dumps(topics), encoding="utf-8")
        os.replace(store / "topics.json.tmp", store / "topics.json")
        asyncio.run(round_trip())
        route = stubs.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic="StaticTopic"), timeout=5).route
        assert route.topic_queue_mapping_by_broker["broker-a"].epoch == 1700000000999
