"""store/config/topics.json as the broker agent reads it (S37), the system topics of a fresh broker
(S38), the broker permission (S35) and TopicSource: the .bak fallback, keeping the last good topics and
bumping the DataVersion of a hand-edited file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from broker_agent.config import BrokerConfig, load_broker_config
from broker_agent.topics import (
    TopicsFileError,
    TopicSource,
    apply_broker_permission,
    parse_topics_json,
    read_topics_file,
    system_topics,
)
from namesrv_grpc.core.model import DataVersion, TopicConfig
from namesrv_grpc.runtime.properties import read_properties
from tests.support import FakeClock, fixture_path

QUICKSTART_TOPICS = {
    "TopicTest",
    "SELF_TEST_TOPIC",
    "DefaultCluster",
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "broker-a",
    "TBW102",
    "BenchmarkTest",
    "OFFSET_MOVED_EVENT",
    "%RETRY%please_rename_unique_group_name_4",
}
SYSTEM_TOPIC_NAMES = {"SELF_TEST_TOPIC", "TBW102", "BenchmarkTest", "DefaultCluster", "broker-a", "OFFSET_MOVED_EVENT"}


def broker_config(**overrides: str) -> BrokerConfig:
    props = read_properties(fixture_path("broker-a.properties"))
    props.update(brokerIP1="127.0.0.1", **overrides)
    return load_broker_config(props, "broker-a.properties", namesrv_addr_override="127.0.0.1:9876", environ={})


def write(path: Path, text: str | bytes, mtime_ns: int | None = None) -> None:
    """Replace ``path`` the way the broker does (write a new file, rename over), with a distinct mtime."""
    tmp = path.with_name(path.name + ".tmp")
    if isinstance(text, str):
        tmp.write_text(text, encoding="utf-8")
    else:
        tmp.write_bytes(text)
    if mtime_ns is not None:
        os.utime(tmp, ns=(mtime_ns, mtime_ns))
    os.replace(tmp, path)


def topics_doc(topics: dict[str, dict[str, object]], counter: int = 1, timestamp: int = 1_000) -> str:
    return json.dumps({"dataVersion": {"counter": counter, "timestamp": timestamp}, "topicConfigTable": topics})


# --- the real files ----------------------------------------------------------------------------


def test_s37_quickstart_fixture():
    read = read_topics_file(fixture_path("topics-quickstart.json"))
    assert read is not None
    topics, version = read
    assert set(topics) == QUICKSTART_TOPICS
    assert len(topics) == 9
    assert topics["TopicTest"] == TopicConfig("TopicTest", 4, 4, 6, 0, False, "SINGLE_TAG")
    assert topics["%RETRY%please_rename_unique_group_name_4"].read_queue_nums == 1
    assert version == DataVersion(state_version=0, timestamp=1551626364371, counter=3)


def test_s37_dev_fixture():
    read = read_topics_file(fixture_path("topics-dev.json"))
    assert read is not None
    topics, version = read
    assert len(topics) == 11
    assert version.counter == 5
    assert version.timestamp == 1694067032723
    assert topics["test_order_message_topic_111"] == TopicConfig("test_order_message_topic_111", 4, 4, 6)
    assert topics["lsqTopic1"].write_queue_nums == 4
    assert topics["%RETRY%lsqGroup"].read_queue_nums == 1


# --- tolerated shapes -----------------------------------------------------------------------------


def test_s37_unknown_fields_ignored_5x_style():
    text = json.dumps(
        {
            "dataVersion": {"counter": 7, "timestamp": 1700000000000, "stateVersion": 2},
            "topicConfigTable": {
                "T5": {
                    "topicName": "T5",
                    "readQueueNums": 8,
                    "writeQueueNums": 8,
                    "perm": 6,
                    "topicSysFlag": 0,
                    "order": False,
                    "topicFilterType": "SINGLE_TAG",
                    "attributes": {"+message.type": "NORMAL"},
                    "somethingNew": [1, 2, 3],
                }
            },
            "topicQueueMappingInfoMap": {},
            "topicQueueMappingCleanTime": 0,
        }
    )
    topics, version = parse_topics_json(text, "topics.json")
    assert topics["T5"] == TopicConfig("T5", 8, 8, 6, attributes={"+message.type": "NORMAL"})
    assert topics["T5"].attributes == {"+message.type": "NORMAL"}
    assert version == DataVersion(state_version=2, timestamp=1700000000000, counter=7)


def test_s37_missing_fields_take_rocketmq_defaults():
    topics, version = parse_topics_json('{"topicConfigTable": {"Bare": {}}}', "topics.json")
    bare = topics["Bare"]
    assert (bare.topic_name, bare.read_queue_nums, bare.write_queue_nums, bare.perm) == ("Bare", 16, 16, 6)
    assert (bare.topic_sys_flag, bare.order, bare.topic_filter_type) == (0, False, "SINGLE_TAG")
    assert version == DataVersion()


def test_s37_numbers_as_strings():
    text = (
        '{"dataVersion": {"counter": "5", "timestamp": "1551626364371"},'
        ' "topicConfigTable": {"S": {"readQueueNums": "4", "writeQueueNums": "2", "perm": "7",'
        ' "topicSysFlag": "1", "order": "true"}}}'
    )
    topics, version = parse_topics_json(text, "topics.json")
    assert topics["S"] == TopicConfig("S", 4, 2, 7, 1, True)
    assert version == DataVersion(0, 1551626364371, 5)


def test_s37_bom_tabs_crlf(tmp_path: Path):
    original = fixture_path("topics-quickstart.json").read_text(encoding="utf-8")
    crlf = original.replace("\r\n", "\n").replace("\n", "\r\n")
    assert "\t" in crlf
    path = tmp_path / "topics.json"
    path.write_bytes(b"\xef\xbb\xbf" + crlf.encode("utf-8"))
    read = read_topics_file(path)
    assert read is not None
    topics, version = read
    assert set(topics) == QUICKSTART_TOPICS
    assert topics["TopicTest"].read_queue_nums == 4
    assert version.counter == 3


def test_s37_missing_file_reads_as_none(tmp_path: Path):
    assert read_topics_file(tmp_path / "nope.json") is None


# --- errors --------------------------------------------------------------------------------------


def topics_error(text: str, tmp_path: Path) -> str:
    path = tmp_path / "topics.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TopicsFileError) as info:
        read_topics_file(path)
    message = str(info.value)
    assert str(path) in message
    assert "\n" not in message
    return message


def test_s37_invalid_json(tmp_path: Path):
    message = topics_error('{"topicConfigTable": {', tmp_path)
    assert "JSON" in message


def test_s37_empty_file_is_an_error(tmp_path: Path):
    assert "empty" in topics_error("  \n", tmp_path)


def test_s37_perm_16(tmp_path: Path):
    message = topics_error(topics_doc({"TopicTest": {"perm": 16}}), tmp_path)
    assert "TopicTest" in message
    assert "perm" in message
    assert "16" in message


def test_s37_negative_read_queue_nums(tmp_path: Path):
    message = topics_error(topics_doc({"TopicTest": {"readQueueNums": -1}}), tmp_path)
    assert "TopicTest" in message
    assert "readQueueNums" in message


def test_s37_bad_topic_filter_type(tmp_path: Path):
    message = topics_error(topics_doc({"TopicTest": {"topicFilterType": "X"}}), tmp_path)
    assert "TopicTest" in message
    assert "topicFilterType" in message
    assert "'X'" in message


def test_s37_topic_config_table_not_an_object(tmp_path: Path):
    message = topics_error('{"topicConfigTable": ["TopicTest"]}', tmp_path)
    assert "topicConfigTable" in message


def test_s37_topic_config_not_an_object(tmp_path: Path):
    message = topics_error('{"topicConfigTable": {"TopicTest": 4}}', tmp_path)
    assert "TopicTest" in message


def test_s37_not_utf8(tmp_path: Path):
    path = tmp_path / "topics.json"
    path.write_bytes(b'{"topicConfigTable": {"\xff": {}}}')
    with pytest.raises(TopicsFileError, match="UTF-8"):
        read_topics_file(path)


# --- S38 system topics -------------------------------------------------------------------------


def test_s38_system_topics_of_a_fresh_broker():
    topics = system_topics(broker_config())
    assert set(topics) == SYSTEM_TOPIC_NAMES
    assert topics["SELF_TEST_TOPIC"] == TopicConfig("SELF_TEST_TOPIC", 1, 1, 6)
    assert topics["TBW102"] == TopicConfig("TBW102", 8, 8, 7)
    assert topics["BenchmarkTest"] == TopicConfig("BenchmarkTest", 1024, 1024, 6)
    assert topics["DefaultCluster"] == TopicConfig("DefaultCluster", 16, 16, 7)
    assert topics["broker-a"] == TopicConfig("broker-a", 1, 1, 7)
    assert topics["OFFSET_MOVED_EVENT"] == TopicConfig("OFFSET_MOVED_EVENT", 1, 1, 6)


def test_s38_system_topics_match_what_a_real_broker_wrote():
    """topics-quickstart.json was written by a real 4.x broker of DefaultCluster/broker-a: each system
    topic must be there exactly as the agent builds it."""
    read = read_topics_file(fixture_path("topics-quickstart.json"))
    assert read is not None
    written = read[0]
    for name, config in system_topics(broker_config()).items():
        assert written[name] == config, name


def test_s38_tbw102_only_with_auto_create():
    topics = system_topics(broker_config(autoCreateTopicEnable="false"))
    assert "TBW102" not in topics
    assert set(topics) == SYSTEM_TOPIC_NAMES - {"TBW102"}


def test_s38_tbw102_uses_default_topic_queue_nums():
    assert system_topics(broker_config(defaultTopicQueueNums="4"))["TBW102"] == TopicConfig("TBW102", 4, 4, 7)


def test_s38_cluster_and_broker_topic_names_follow_the_config():
    topics = system_topics(broker_config(brokerClusterName="ProdCluster", brokerName="broker-z"))
    assert topics["ProdCluster"] == TopicConfig("ProdCluster", 16, 16, 7)
    assert topics["broker-z"] == TopicConfig("broker-z", 1, 1, 7)
    assert "DefaultCluster" not in topics


def test_s38_disabled_cluster_topic_is_inherit_only():
    topics = system_topics(broker_config(clusterTopicEnable="false", brokerTopicEnable="false"))
    assert topics["DefaultCluster"].perm == 1
    assert topics["broker-a"].perm == 1


# --- S35 broker permission ---------------------------------------------------------------------


def test_s35_read_only_broker_overrides_every_perm():
    topics = {"A": TopicConfig("A", 4, 4, 6), "B": TopicConfig("B", 1, 1, 7)}
    assert {name: t.perm for name, t in apply_broker_permission(topics, 4).items()} == {"A": 4, "B": 4}
    assert apply_broker_permission(topics, 4)["A"].read_queue_nums == 4
    assert apply_broker_permission(topics, 6) == topics
    assert apply_broker_permission(topics, 7) == topics


def test_s35_topic_source_applies_broker_permission(tmp_path: Path):
    source = TopicSource(broker_config(brokerPermission="4"), fixture_path("topics-quickstart.json"), FakeClock())
    topics = source.load_initial()
    assert set(topics.topic_config_table) == QUICKSTART_TOPICS
    assert {t.perm for t in topics.topic_config_table.values()} == {4}


# --- TopicSource -------------------------------------------------------------------------------


def test_s38_missing_file_gives_system_topics_and_fresh_version(tmp_path: Path):
    clock = FakeClock(1_700_000_000_123)
    source = TopicSource(broker_config(), tmp_path / "config" / "topics.json", clock)
    topics = source.load_initial()
    assert topics.topic_config_table == system_topics(broker_config())
    assert topics.data_version == DataVersion(0, 1_700_000_000_123, 0)


def test_s37_file_topics_override_system_topics(tmp_path: Path):
    path = tmp_path / "topics.json"
    write(path, topics_doc({"TBW102": {"readQueueNums": 2, "writeQueueNums": 2, "perm": 7}, "Mine": {}}))
    topics = TopicSource(broker_config(), path, FakeClock()).load_initial()
    assert topics.topic_config_table["TBW102"] == TopicConfig("TBW102", 2, 2, 7)
    assert topics.topic_config_table["Mine"] == TopicConfig("Mine")
    assert set(topics.topic_config_table) >= SYSTEM_TOPIC_NAMES
    assert topics.data_version == DataVersion(0, 1_000, 1)


def test_s37_broken_file_at_start_uses_bak(tmp_path: Path):
    path = tmp_path / "topics.json"
    path.write_text('{"topicConfigTable": {', encoding="utf-8")
    (tmp_path / "topics.json.bak").write_text(
        topics_doc({"FromBak": {"readQueueNums": 3, "writeQueueNums": 3}}, counter=9, timestamp=42),
        encoding="utf-8",
    )
    topics = TopicSource(broker_config(), path, FakeClock()).load_initial()
    assert topics.topic_config_table["FromBak"] == TopicConfig("FromBak", 3, 3)
    assert topics.data_version == DataVersion(0, 42, 9)


def test_s37_missing_file_at_start_uses_bak(tmp_path: Path):
    (tmp_path / "topics.json.bak").write_text(topics_doc({"FromBak": {}}, counter=2), encoding="utf-8")
    topics = TopicSource(broker_config(), tmp_path / "topics.json", FakeClock()).load_initial()
    assert "FromBak" in topics.topic_config_table
    assert topics.data_version.counter == 2


def test_s37_broken_file_at_start_without_bak_is_an_error(tmp_path: Path):
    path = tmp_path / "topics.json"
    path.write_text(topics_doc({"TopicTest": {"perm": 16}}), encoding="utf-8")
    source = TopicSource(broker_config(), path, FakeClock())
    with pytest.raises(TopicsFileError, match="perm") as info:
        source.load_initial()
    assert str(path) in str(info.value)


def test_s37_broken_file_at_start_with_broken_bak_is_an_error(tmp_path: Path):
    path = tmp_path / "topics.json"
    path.write_text("{", encoding="utf-8")
    (tmp_path / "topics.json.bak").write_text("also broken", encoding="utf-8")
    with pytest.raises(TopicsFileError):
        TopicSource(broker_config(), path, FakeClock()).load_initial()


def test_s37_broken_file_later_keeps_last_good(tmp_path: Path):
    path = tmp_path / "topics.json"
    write(path, topics_doc({"Good": {"readQueueNums": 4, "writeQueueNums": 4}}, counter=1), 1_000_000_000)
    source = TopicSource(broker_config(), path, FakeClock())
    first = source.load_initial()
    write(path, '{"topicConfigTable": {"Good": {"perm": 99}}}', 2_000_000_000)
    assert source.changed_on_disk()
    assert source.current() == first
    assert source.last_error is not None
    assert "perm" in source.last_error
    # repaired: picked up again, error cleared
    write(path, topics_doc({"Good": {}, "New": {}}, counter=2), 3_000_000_000)
    repaired = source.current()
    assert "New" in repaired.topic_config_table
    assert repaired.data_version.counter == 2
    assert source.last_error is None


def test_s37_vanished_file_later_keeps_last_good(tmp_path: Path):
    path = tmp_path / "topics.json"
    write(path, topics_doc({"Good": {}}, counter=4))
    source = TopicSource(broker_config(), path, FakeClock())
    first = source.load_initial()
    path.unlink()
    assert source.current() == first
    assert "Good" in source.current().topic_config_table
    assert source.current().data_version.counter == 4


def test_s37_unchanged_file_is_not_reread(tmp_path: Path):
    path = tmp_path / "topics.json"
    write(path, topics_doc({"Good": {}}))
    source = TopicSource(broker_config(), path, FakeClock())
    first = source.load_initial()
    assert not source.changed_on_disk()
    assert source.current() is first


def test_s37_new_data_version_in_file_is_used(tmp_path: Path):
    path = tmp_path / "topics.json"
    write(path, topics_doc({"A": {}}, counter=3, timestamp=100), 1_000_000_000)
    clock = FakeClock(5_000)
    source = TopicSource(broker_config(), path, clock)
    source.load_initial()
    write(path, topics_doc({"A": {}, "B": {}}, counter=4, timestamp=200), 2_000_000_000)
    topics = source.current()
    assert "B" in topics.topic_config_table
    assert topics.data_version == DataVersion(0, 200, 4)


def test_s06_changed_content_same_version_gets_next_version(tmp_path: Path):
    path = tmp_path / "topics.json"
    write(path, topics_doc({"A": {"readQueueNums": 4, "writeQueueNums": 4}}, counter=3, timestamp=100), 1_000_000_000)
    clock = FakeClock(1_700_000_000_000)
    source = TopicSource(broker_config(), path, clock)
    assert source.load_initial().data_version == DataVersion(0, 100, 3)

    clock.advance(1_234)
    write(path, topics_doc({"A": {"readQueueNums": 8, "writeQueueNums": 8}}, counter=3, timestamp=100), 2_000_000_000)
    topics = source.current()
    assert topics.topic_config_table["A"].read_queue_nums == 8
    assert topics.data_version == DataVersion(0, 1_700_000_001_234, 4)

    clock.advance(1_000)
    write(path, topics_doc({"A": {}, "Added": {}}, counter=3, timestamp=100), 3_000_000_000)
    again = source.current()
    assert "Added" in again.topic_config_table
    assert again.data_version == DataVersion(0, 1_700_000_002_234, 5)


def test_s06_touched_file_with_same_content_keeps_version(tmp_path: Path):
    path = tmp_path / "topics.json"
    text = topics_doc({"A": {}}, counter=3, timestamp=100)
    write(path, text, 1_000_000_000)
    clock = FakeClock()
    source = TopicSource(broker_config(), path, clock)
    first = source.load_initial()
    clock.advance(5_000)
    write(path, text, 2_000_000_000)
    assert source.changed_on_disk()
    assert source.current() == first
    assert source.current().data_version == DataVersion(0, 100, 3)
