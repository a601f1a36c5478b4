"""The route answers' byte budget (``routeCacheMaxBytes``, core/route_answers.py): what is held stays
within it, the count of bytes is exact through every change, answers asked for again stay, and a
lookup answers the same with any budget."""

from __future__ import annotations

import gc

from hypothesis import given, settings
from hypothesis import strategies as st

from namesrv_grpc.config import NamesrvConfig
from namesrv_grpc.core.capacity import RouteTableLimits
from namesrv_grpc.core.kvconfig import KVConfigManager
from namesrv_grpc.core.model import DataVersion, TopicConfig
from namesrv_grpc.core.reader import NameServerReader
from namesrv_grpc.core.route_answers import ENTRY_OVERHEAD_BYTES, RouteAnswers, answer_bytes
from namesrv_grpc.core.route_table import RouteInfoManager
from namesrv_grpc.wire import bodies


def held(answers: RouteAnswers) -> int:
    return sum(answer_bytes(value) for generation in answers.dicts() for value in generation.values())


def test_answers_stay_within_the_budget_and_the_oldest_go_first() -> None:
    answers = RouteAnswers(max_bytes=10 * (ENTRY_OVERHEAD_BYTES + 100))
    number = answers.encoding("json")
    for i in range(100):
        answers.put(number, f"T-{i}", b"x" * 100)
        assert answers.bytes == held(answers) <= answers.max_bytes
    assert answers.get(number, "T-99") == b"x" * 100  # the newest stay
    assert answers.get(number, "T-0") is None  # the oldest went
    assert answers.evictions == 100 - len(answers)
    assert 5 <= len(answers) <= 10


def test_an_answer_asked_for_again_moves_to_the_young_generation_and_stays() -> None:
    answers = RouteAnswers(max_bytes=4 * (ENTRY_OVERHEAD_BYTES + 10))
    number = answers.encoding("json")
    answers.put(number, "hot", b"h" * 10)
    for i in range(40):
        answers.put(number, f"T-{i}", b"x" * 10)
        assert answers.get(number, "hot") == b"h" * 10, f"the hot answer was dropped after {i} others"
    assert answers.bytes == held(answers)


def test_no_budget_keeps_everything() -> None:
    answers = RouteAnswers()
    number = answers.encoding("grpc")
    for i in range(1_000):
        answers.put(number, f"T-{i}", b"y" * 50)
    assert len(answers) == 1_000
    assert answers.evictions == 0
    assert answers.bytes == 1_000 * (ENTRY_OVERHEAD_BYTES + 50)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["put", "get", "drop", "drop_one", "clear"]),
            st.integers(0, 2),
            st.integers(0, 30),
            st.integers(0, 300),
        ),
        max_size=200,
    ),
    st.integers(0, 4_000),
)
def test_the_byte_count_is_exact_through_any_sequence(ops: list[tuple[str, int, int, int]], budget: int) -> None:
    answers = RouteAnswers(max_bytes=budget)
    numbers = [answers.encoding(key) for key in ("a", "b", "c")]
    largest = 0
    for op, encoding, topic, size in ops:
        name = f"T-{topic}"
        if op == "put":
            answers.put(numbers[encoding], name, b"z" * size)
            largest = max(largest, answer_bytes(b"z" * size))
        elif op == "get":
            value = answers.get(numbers[encoding], name)
            assert value is None or isinstance(value, bytes)
        elif op == "drop":
            answers.drop({name, f"T-{topic + 1}"})
        elif op == "drop_one":
            answers.drop_one(name)
        else:
            answers.clear()
        assert answers.bytes == held(answers)
        assert not budget or answers.bytes <= max(budget, 2 * largest)


def register(rt: RouteInfoManager, broker: int, topics: int) -> None:
    rt.register_broker(
        cluster_name="c1",
        broker_name=f"broker-{broker}",
        broker_id=0,
        broker_addr=f"10.0.0.{broker}:10911",
        data_version=DataVersion(0, 1, 1),
        topic_configs={f"T-{broker}-{i}": TopicConfig(f"T-{broker}-{i}", 4, 4) for i in range(topics)},
    )


def encode(route: object) -> bytes:
    return bodies.encode_topic_route_data(route)  # type: ignore[arg-type]


def test_a_route_table_with_a_small_budget_answers_the_same_and_holds_at_most_it() -> None:
    budget = 64 * 1024
    small = RouteInfoManager(limits=RouteTableLimits(route_cache_max_bytes=budget))
    unbounded = RouteInfoManager()
    for rt in (small, unbounded):
        for broker in range(4):
            register(rt, broker, 500)
    topics = sorted(small.topic_queue_nums)
    for _ in range(2):
        for topic in topics:
            assert small.pickup_topic_route_cached(topic, encode) == unbounded.pickup_topic_route_cached(topic, encode)
            assert small.route_answers.bytes <= budget
    assert small.route_answers.evictions > 0
    assert unbounded.route_answers.bytes > 5 * budget  # what the budget kept out
    # A change reaches answers in either generation: none is stale (broker-1 moves to another
    # address, its topics get 8 queues).
    for rt in (small, unbounded):
        rt.register_broker(
            cluster_name="c1",
            broker_name="broker-1",
            broker_id=0,
            broker_addr="10.0.0.99:10911",
            data_version=DataVersion(0, 2, 2),
            topic_configs={f"T-1-{i}": TopicConfig(f"T-1-{i}", 8, 8) for i in range(500)},
        )
    for topic in topics:
        assert small.pickup_topic_route_cached(topic, encode) == unbounded.pickup_topic_route_cached(topic, encode)
    assert small.route_answers.bytes == held(small.route_answers)
    gc.collect()
    assert not any(gc.is_tracked(answers) for answers in small.route_answers.dicts())


def test_the_budget_follows_the_limits() -> None:
    rt = RouteInfoManager()
    assert rt.route_answers.max_bytes == 0
    rt.limits = RouteTableLimits(route_cache_max_bytes=1234)
    assert rt.route_answers.max_bytes == 1234


def test_answers_per_change_share_the_routes_budget_and_are_built_once_per_change() -> None:
    """NameServerReader.answer_per_change keeps its answers in the table's one cache of encoded
    answers, under routeCacheMaxBytes, and builds again after a change."""
    table = RouteInfoManager()
    reader = NameServerReader(NamesrvConfig(route_cache_max_bytes=20_000), table, KVConfigManager(None))
    built: list[str] = []

    def build(name: str) -> bytes:
        built.append(name)
        return name.encode() * 1000

    assert reader.answer_per_change("all topics", lambda: build("A")) == b"A" * 1000
    assert reader.answer_per_change("all topics", lambda: build("A")) == b"A" * 1000
    assert built == ["A"]
    assert table.route_answers.bytes == held(table.route_answers) >= 1000
    table.register_broker(cluster_name="c", broker_name="b", broker_id=0, broker_addr="10.0.0.1:10911")
    reader.answer_per_change("all topics", lambda: build("A"))
    assert built == ["A", "A"]  # the table changed
    for i in range(100):  # many names: held within the budget, the oldest dropped
        reader.answer_per_change(("by cluster", str(i)), lambda: build("C"))
        assert table.route_answers.bytes == held(table.route_answers) <= 20_000
    assert table.route_answers.evictions > 0
