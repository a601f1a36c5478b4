"""Encoded route answers found by content (issue 41): a topic whose route has the layout of another
topic's (the same QueueData records) gets that topic's encoded answer without encoding it again,
unless its answer carries something of its own. The oracle: every answer, in every form the two
doors send (the gRPC ``PickupTopicRouteResponse``, the remoting JSON in both of its forms, zone
filtered), byte for byte what the same NameServer encodes with no cached answer at all, on the
route-table process's NameServer and on a serving process's replica fed its change stream, through
random registrations, removals, write-permission changes, order configurations and switches."""

from __future__ import annotations

import pickle
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from namesrv_grpc.config import NamesrvConfig
from namesrv_grpc.core.kvconfig import KVConfigManager
from namesrv_grpc.core.model import DataVersion, TopicConfig
from namesrv_grpc.core.processor import NameServer
from namesrv_grpc.core.route_answers import RouteAnswers
from namesrv_grpc.core.route_table import RouteInfoManager
from namesrv_grpc.grpc_api.encoded_responses import encode_route_response
from namesrv_grpc.remoting.handlers import route_old_json, route_standard_json
from namesrv_grpc.wire.grpc_register_body import encode_body
from tests.support import FakeClock, register_broker

BROKER_NAMES = ["broker-a", "broker-b", "broker-c"]
ADDRS = [f"10.0.0.{i}:10911" for i in range(1, 6)]
TOPICS = ["T0", "T1", "T2", "T3", "T4", "SYNC_BROKER_MEMBER_GROUP_broker-a"]
"""The last is answered per topic under acting master (S52 leaves its route as it is)."""
ZONES = ["", "zone-1", "zone-2"]
ORDER = "ORDER_TOPIC_CONFIG"
STORE = tempfile.TemporaryDirectory(prefix="answers-by-content-")
"""Where the machines' NameServers persist their configuration (removed at exit)."""


ENCODINGS = [encode_route_response, route_standard_json, route_old_json]
"""What the doors send: gRPC, remoting 4.9.4+ (standard JSON), older remoting clients and zone mode."""

nums = st.sampled_from([(4, 4, 6, 0), (4, 4, 4, 0), (1, 2, 6, 0), (8, 8, 7, 1)])
topic_sets = st.one_of(
    # every topic with the same queue numbers: the common case the answers are shared for
    st.builds(
        lambda names, n: [TopicConfig(name, *n) for name in names],
        st.lists(st.sampled_from(TOPICS), unique=True, max_size=6),
        nums,
    ),
    st.lists(
        st.builds(lambda name, n: TopicConfig(name, *n), st.sampled_from(TOPICS), nums),
        max_size=6,
        unique_by=lambda t: t.topic_name,
    ),
)


class AnswersByContent(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        store = Path(STORE.name) / "namesrv.properties"  # written by every switch, never read here
        self.ns = NameServer(
            NamesrvConfig(config_store_path=str(store)), RouteInfoManager(FakeClock()), KVConfigManager(None)
        )
        self.ns.track_changes()
        self.replica = NameServer(NamesrvConfig(), RouteInfoManager(FakeClock()), KVConfigManager(None))
        self.replica.apply_change(self.ns.replica_state())
        self.registered: dict[str, tuple[str, int]] = {}
        self.version = 0

    @rule(
        name=st.sampled_from(BROKER_NAMES),
        broker_id=st.integers(0, 1),
        addr=st.sampled_from(ADDRS),
        topics=topic_sets,
        zone=st.sampled_from(["", "zone-1", "zone-2"]),
        filters=st.lists(st.sampled_from(["10.9.0.1:1", "10.9.0.2:1"]), max_size=1),
    )
    def register(
        self, name: str, broker_id: int, addr: str, topics: list[TopicConfig], zone: str, filters: list[str]
    ) -> None:
        self.version += 1
        body, crc = encode_body({t.topic_name: t for t in topics}, DataVersion(1, self.version, 0), filters)
        try:
            register_broker(
                self.ns,
                cluster_name="c1",
                broker_name=name,
                broker_id=broker_id,
                broker_addr=addr,
                body=body,
                body_crc32c=crc,
                zone_name=zone,
            )
        except Exception:  # a refused registration (an address of another broker name) changes nothing
            return
        self.registered[addr] = (name, broker_id)

    @precondition(lambda self: bool(self.registered))
    @rule(data=st.data())
    def unregister(self, data: st.DataObject) -> None:
        addr = data.draw(st.sampled_from(sorted(self.registered)))
        name, broker_id = self.registered.pop(addr)
        self.ns.unregister_broker(cluster_name="c1", broker_name=name, broker_id=broker_id, broker_addr=addr)

    @rule(name=st.sampled_from(BROKER_NAMES), wipe=st.booleans())
    def write_perm(self, name: str, wipe: bool) -> None:
        if wipe:
            self.ns.wipe_write_perm_of_broker(name)
        else:
            self.ns.add_write_perm_of_broker(name)

    @rule(topic=st.sampled_from(TOPICS))
    def delete_topic(self, topic: str) -> None:
        self.ns.delete_topic(topic, "")

    @rule(topic=st.sampled_from(TOPICS), value=st.sampled_from([None, "broker-a:4", "broker-b:8"]))
    def order_config(self, topic: str, value: str | None) -> None:
        if value is None:
            self.ns.delete_kv_config(ORDER, topic)
        else:
            self.ns.put_kv_config(ORDER, topic, value)

    @rule(order=st.booleans(), acting=st.booleans())
    def switches(self, order: bool, acting: bool) -> None:
        self.ns.update_namesrv_config(
            {"orderMessageEnable": str(order).lower(), "supportActingMaster": str(acting).lower()}
        )

    @invariant()
    def every_answer_is_what_no_cache_encodes(self) -> None:
        """Asked twice (the second time from the answers the first left), on the NameServer and on
        its replica after the step's change crossed as pickled bytes."""
        change = self.ns.take_change()
        if change is not None:
            self.replica.apply_change(pickle.loads(pickle.dumps(change, protocol=pickle.HIGHEST_PROTOCOL)))
        for topic in TOPICS:
            for encode in ENCODINGS:
                for zone in ZONES:
                    expected = uncached(self.ns, topic, encode, zone)
                    for ns in (self.ns, self.replica, self.ns, self.replica):
                        assert ns.topic_route_encoded(topic, encode, zone) == expected, (topic, encode, zone)


def uncached(ns: NameServer, topic: str, encode: Any, zone: str) -> Any:
    """What ``ns`` answers with no answer cached (a fresh, empty :class:`RouteAnswers`)."""
    kept = ns.route_table.route_answers
    ns.route_table.route_answers = RouteAnswers()
    try:
        return ns.topic_route_encoded(topic, encode, zone)
    finally:
        ns.route_table.route_answers = kept


AnswersByContent.TestCase.settings = settings(
    max_examples=150, stateful_step_count=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestAnswersByContent = AnswersByContent.TestCase


def test_topics_of_one_layout_share_one_encoded_answer(tmp_path: Path) -> None:
    """1,000 topics on the same two broker names with the same queue numbers: one encoding per
    form, the other 999 first lookups are dict hits returning the same bytes object."""
    config = NamesrvConfig(config_store_path=str(tmp_path / "namesrv.properties"))
    ns = NameServer(config, RouteInfoManager(FakeClock()), KVConfigManager(None))
    topics = {f"T-{i}": TopicConfig(f"T-{i}", 4, 4) for i in range(1_000)}
    for n, name in enumerate(("broker-a", "broker-b")):
        body, crc = encode_body(topics, DataVersion(1, 1, 0), [])
        register_broker(
            ns, cluster_name="c1", broker_name=name, broker_id=0, broker_addr=ADDRS[n], body=body, body_crc32c=crc
        )
    encoded = 0

    def counting(route: Any) -> bytes:
        nonlocal encoded
        encoded += 1
        return route_standard_json(route)

    answers = [ns.topic_route_encoded(topic, counting) for topic in topics]
    assert encoded == 1
    assert all(answer is answers[0] for answer in answers)
    # one topic gets an order configuration of its own: only it is encoded again
    ns.update_namesrv_config({"orderMessageEnable": "true"})
    ns.put_kv_config(ORDER, "T-7", "broker-a:4")
    encoded = 0
    again = {topic: ns.pickup_topic_route_encoded(topic, counting) for topic in topics}
    assert encoded == 2  # the shared answer (the switch dropped every answer) and T-7's own
    assert b"broker-a:4" in again["T-7"]
    assert again["T-8"] == answers[0]
    # a change of one broker name's BrokerData reaches the shared answer
    body, crc = encode_body(topics, DataVersion(1, 2, 0), [])
    register_broker(
        ns, cluster_name="c1", broker_name="broker-b", broker_id=1, broker_addr=ADDRS[2], body=body, body_crc32c=crc
    )
    assert ADDRS[2].encode() in ns.pickup_topic_route_encoded("T-9", counting)
