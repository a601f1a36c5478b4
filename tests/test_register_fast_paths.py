"""The registration fast paths (identical body; same topic table with a new DataVersion) change
nothing that a full decode would not: a NameServer with them and one without, fed the same random
requests, end up with the same tables after every step (S06, S07, S09, S23, S25)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from namesrv.v1 import types_pb2
from namesrv_grpc.config import NamesrvConfig
from namesrv_grpc.core.kvconfig import KVConfigManager
from namesrv_grpc.core.model import DataVersion, TopicConfig
from namesrv_grpc.core.processor import NameServer
from namesrv_grpc.core.route_table import RouteInfoManager
from namesrv_grpc.wire import grpc_register_body as register_body_module
from namesrv_grpc.wire.grpc_register_body import (
    crc32c,
    data_version_to_proto,
    encode_body,
    parse_body,
    split_topic_table,
    topic_config_to_proto,
)
from tests.support import FakeClock, register_broker

T = TypeVar("T")

ADDRS = {("broker-a", 0): "10.0.0.1:10911", ("broker-a", 1): "10.0.0.2:10911", ("broker-b", 0): "10.0.0.3:10911"}


def nameserver(tmp_path: Path, **config: Any) -> NameServer:
    return NameServer(
        NamesrvConfig(
            kv_config_path=str(tmp_path / "kv.json"), config_store_path=str(tmp_path / "ns.properties"), **config
        ),
        RouteInfoManager(FakeClock()),
        KVConfigManager(None),
    )


def register(ns: NameServer, name: str, broker_id: int, body: bytes, compressed: bool = False) -> None:
    register_broker(ns,
        cluster_name="c", broker_name=name, broker_id=broker_id, broker_addr=ADDRS[(name, broker_id)],
        ha_server_addr="", body=body, body_crc32c=crc32c(body), compressed=compressed, heartbeat_timeout_millis=0,
    )  # fmt: skip


def tables(ns: NameServer) -> Any:
    rt = ns.route_table
    return (
        rt.topic_queue_table,
        {n: d.broker_addrs for n, d in rt.broker_addr_table.items()},
        {a: (live.data_version, live.broker_name, live.broker_id) for a, live in rt.broker_live_table.items()},
        rt.filter_server_table,
    )


# Few distinct topic tables, so that the same table comes back with another DataVersion often.
topic_sets = st.sampled_from(
    [
        {"T1": (4, 6)},
        {"T1": (4, 6), "T2": (8, 6)},
        {"T2": (8, 2), "T3": (1, 6)},
    ]
)
steps = st.lists(
    st.one_of(
        st.tuples(
            st.just("register"),
            st.sampled_from(sorted(ADDRS)),
            topic_sets,
            st.integers(1, 3),  # DataVersion counter
            st.sampled_from([(), ("10.0.9.9:7000",)]),
            st.booleans(),  # compressed
        ),
        st.tuples(st.just("wipe"), st.sampled_from(["broker-a", "broker-b"])),
        st.tuples(st.just("delete"), st.sampled_from(["T1", "T2", "T3"])),
    ),
    max_size=25,
)


def apply(ns: NameServer, step: tuple[Any, ...]) -> None:
    if step[0] == "register":
        _, (name, broker_id), topics, counter, filters, compressed = step
        configs = {t: TopicConfig(t, q, q, perm) for t, (q, perm) in topics.items()}
        body, _ = encode_body(configs, DataVersion(0, 1, counter), filters, compress=compressed)
        register(ns, name, broker_id, body, compressed)
    elif step[0] == "wipe":
        ns.wipe_write_perm_of_broker(step[1])
    else:
        ns.delete_topic(step[1], "")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=steps)
def test_fast_paths_agree_with_full_decoding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, steps: list[tuple[Any, ...]]
) -> None:
    fast, slow = nameserver(tmp_path / "fast"), nameserver(tmp_path / "slow")
    for step in steps:
        for ns in (fast, slow):
            with monkeypatch.context() as patch:
                if ns is slow:  # the reference decodes every body in full
                    patch.setattr(register_body_module, "split_topic_table", lambda raw: None)
                    patch.setattr(ns.route_table, "same_body_registered", lambda **kwargs: None)
                apply(ns, step)
        assert tables(fast) == tables(slow), step
        assert fast.route_table.route_digest() == slow.route_table.route_digest()


def test_new_data_version_with_same_topics_skips_topic_decoding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ns = nameserver(tmp_path)
    configs = {f"T{i}": TopicConfig(f"T{i}", 4, 4) for i in range(100)}
    register(ns, "broker-a", 0, encode_body(configs, DataVersion(0, 1, 1))[0])
    decoded_topics: list[int] = []

    def spy(body: bytes, *, compressed: bool, **limits: int) -> Any:
        result = parse_body(body, compressed=compressed, **limits)
        decoded_topics.append(len(result.topic_config_table))
        return result

    monkeypatch.setattr(register_body_module, "parse_body", spy)
    register(ns, "broker-a", 0, encode_body(configs, DataVersion(0, 1, 2))[0])
    assert decoded_topics == [0], "only the DataVersion part was decoded"
    assert ns.route_table.live_info("10.0.0.1:10911").data_version == DataVersion(0, 1, 2)  # type: ignore[union-attr]
    # An operator wiped the write permission: the next new DataVersion re-applies the topics (S06/S07).
    assert ns.wipe_write_perm_of_broker("broker-a") == 100
    register(ns, "broker-a", 0, encode_body(configs, DataVersion(0, 1, 3))[0])
    assert decoded_topics == [0, 100]
    assert ns.route_table.topic_queue_table["T7"]["broker-a"].perm == 6


def test_body_with_fields_out_of_order_is_decoded_in_full(tmp_path: Path) -> None:
    ns = nameserver(tmp_path)
    configs = {"T1": TopicConfig("T1", 4, 4)}
    register(ns, "broker-a", 0, encode_body(configs, DataVersion(0, 1, 1))[0])
    # DataVersion first, then the topics (valid protobuf; our split must not be fooled).
    version = types_pb2.RegisterBrokerBody(data_version=data_version_to_proto(DataVersion(0, 1, 2)))
    entries = types_pb2.RegisterBrokerBody()
    entries.topic_config_table["T1"].CopyFrom(topic_config_to_proto(TopicConfig("T1", 8, 8)))
    entries.topic_config_table["T2"].CopyFrom(topic_config_to_proto(TopicConfig("T2", 2, 2)))
    body = version.SerializeToString() + entries.SerializeToString()
    assert split_topic_table(body) is not None
    register(ns, "broker-a", 0, body)
    table = ns.route_table.topic_queue_table
    assert (table["T1"]["broker-a"].read_queue_nums, table["T2"]["broker-a"].read_queue_nums) == (8, 2)


def test_split_topic_table_separates_topics_from_the_rest() -> None:
    body, _ = encode_body({"T1": TopicConfig("T1"), "T2": TopicConfig("T2")}, DataVersion(0, 1, 9), ["10.0.9.9:7000"])
    split = split_topic_table(body)
    assert split is not None
    rest = types_pb2.RegisterBrokerBody.FromString(split[1])
    assert (len(rest.topic_config_table), rest.data_version.counter, list(rest.filter_server_list)) == (
        0, 9, ["10.0.9.9:7000"],
    )  # fmt: skip
    other, _ = encode_body({"T1": TopicConfig("T1"), "T2": TopicConfig("T2", 8, 8)}, DataVersion(0, 1, 9))
    assert split_topic_table(other)[0] != split[0]  # type: ignore[index]
    assert split_topic_table(body[:3]) is None  # an entry longer than the body
