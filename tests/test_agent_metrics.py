"""The broker agent's Prometheus metrics: result classification and series bookkeeping in process,
the hooks of BrokerAgent.register_all with stand-in NameServers, and ``broker-agent --metrics-port``
scraped over HTTP while it registers with a real NameServer and fails with a dead one."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import time
from pathlib import Path

import grpc
import pytest
from prometheus_client import generate_latest

from broker_agent.agent import BrokerAgent
from broker_agent.cli import build_parser
from broker_agent.config import load_broker_config
from broker_agent.metrics import RESULTS, AgentMetrics, registration_result
from broker_agent.topics import TopicSource
from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv_grpc.core.route_tables import wall_clock_millis
from namesrv_grpc.runtime.properties import read_properties
from tests.metrics_support import Scrape, free_port, parse, scrape, wait_until
from tests.support import NamesrvProcess, Stubs, fixture_path, spawn_agent

QUICKSTART = fixture_path("topics-quickstart.json")


def rpc_error(code: grpc.StatusCode) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details="test")


def scrape_registry(metrics: AgentMetrics) -> Scrape:
    return parse(generate_latest(metrics.registry).decode())


def test_registration_result_labels() -> None:
    assert registration_result(None) == "ok"
    assert registration_result(TimeoutError()) == "timeout"
    assert registration_result(asyncio.CancelledError()) == "timeout"
    assert registration_result(rpc_error(grpc.StatusCode.DEADLINE_EXCEEDED)) == "timeout"
    assert registration_result(rpc_error(grpc.StatusCode.UNAVAILABLE)) == "unavailable"
    for code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.DATA_LOSS, grpc.StatusCode.FAILED_PRECONDITION):
        assert registration_result(rpc_error(code)) == "rejected"
    assert registration_result(rpc_error(grpc.StatusCode.UNKNOWN)) == "error"
    assert registration_result(ValueError("x")) == "error"


def test_series_per_namesrv_and_forgetting() -> None:
    metrics = AgentMetrics()
    assert scrape_registry(metrics).find("broker_agent_registrations_total") == []
    metrics.observe_registration("10.0.0.1:9876", None, 0.01)
    metrics.observe_registration("10.0.0.2:9876", rpc_error(grpc.StatusCode.UNAVAILABLE), 0.02)
    metrics.observe_registration("10.0.0.2:9876", TimeoutError(), 24.0)
    metrics.observe_topics(12, 7)
    m = scrape_registry(metrics)
    for addr in ("10.0.0.1:9876", "10.0.0.2:9876"):
        assert {s.labels["result"] for s in m.find("broker_agent_registrations_total", namesrv=addr)} == set(RESULTS)
        assert m.value("broker_agent_session_state", namesrv=addr) == 0
    assert m.value("broker_agent_registrations_total", namesrv="10.0.0.1:9876", result="ok") == 1
    assert m.value("broker_agent_registrations_total", namesrv="10.0.0.2:9876", result="unavailable") == 1
    assert m.value("broker_agent_registrations_total", namesrv="10.0.0.2:9876", result="timeout") == 1
    assert m.value("broker_agent_registration_consecutive_failures", namesrv="10.0.0.1:9876") == 0
    assert m.value("broker_agent_registration_consecutive_failures", namesrv="10.0.0.2:9876") == 2
    assert m.value("broker_agent_registration_duration_seconds_count", namesrv="10.0.0.2:9876") == 2
    assert m.value("broker_agent_registration_duration_seconds_bucket", namesrv="10.0.0.2:9876", le="10.0") == 1
    assert abs(m.value("broker_agent_last_registration_success_timestamp_seconds") - time.time()) < 60
    assert m.value("broker_agent_topics") == 12
    assert m.value("broker_agent_data_version") == 7
    assert m.types["broker_agent_build_info"] == "gauge"

    metrics.observe_registration("10.0.0.2:9876", None, 0.01)
    m = scrape_registry(metrics)
    assert m.value("broker_agent_registration_consecutive_failures", namesrv="10.0.0.2:9876") == 0

    metrics.forget_namesrv("10.0.0.2:9876")
    metrics.forget_namesrv("10.0.0.99:9876")  # never seen: nothing to do
    m = scrape_registry(metrics)
    assert not [s for s in m.samples if s.labels.get("namesrv") == "10.0.0.2:9876"]
    assert m.find("broker_agent_registrations_total", namesrv="10.0.0.1:9876")


class StandInNamesrv:
    """A NameServer client that answers every registration, or fails with ``error``."""

    def __init__(self, address: str, error: BaseException | None) -> None:
        self.address = address
        self.error = error
        self.calls = 0

    async def register_broker(
        self, request: ns_pb2.RegisterBrokerRequest, timeout: float
    ) -> ns_pb2.RegisterBrokerResponse:
        self.calls += 1
        if self.error is not None:
            raise self.error
        return ns_pb2.RegisterBrokerResponse()

    async def unregister_broker(self, request: ns_pb2.UnregisterBrokerRequest, timeout: float) -> None:
        return None

    async def query_data_version(
        self, request: ns_pb2.QueryDataVersionRequest, timeout: float
    ) -> ns_pb2.QueryDataVersionResponse:
        return ns_pb2.QueryDataVersionResponse(changed=True)

    async def close(self) -> None:
        return None


def test_register_all_hooks() -> None:
    """Each round records every NameServer's result and duration, the topics and the DataVersion."""
    good, bad = "127.0.0.1:19876", "127.0.0.1:19877"
    errors: dict[str, BaseException | None] = {good: None, bad: rpc_error(grpc.StatusCode.FAILED_PRECONDITION)}
    props = read_properties(fixture_path("broker-a.properties"))
    props["brokerIP1"] = "127.0.0.1"
    config = load_broker_config(props, "broker-a.properties", namesrv_addr_override=f"{good};{bad}", environ={})
    source = TopicSource(config, QUICKSTART, wall_clock_millis)
    source.load_initial()
    metrics = AgentMetrics()
    agent = BrokerAgent(config, source, lambda addr: StandInNamesrv(addr, errors[addr]), metrics=metrics)

    async def rounds() -> None:
        for _ in range(3):
            outcome = await agent.register_all(force=True)
            assert set(outcome.responses) == {good}
            assert set(outcome.errors) == {bad}

    asyncio.run(rounds())
    m = scrape_registry(metrics)
    assert m.value("broker_agent_registrations_total", namesrv=good, result="ok") == 3
    assert m.value("broker_agent_registrations_total", namesrv=bad, result="rejected") == 3
    assert m.value("broker_agent_registration_consecutive_failures", namesrv=bad) == 3
    assert m.value("broker_agent_registration_consecutive_failures", namesrv=good) == 0
    assert m.value("broker_agent_registration_duration_seconds_count", namesrv=good) == 3
    assert m.find("broker_agent_last_registration_success_timestamp_seconds", namesrv=bad) == []
    topics = source.current()
    assert m.value("broker_agent_topics") == len(topics.topic_config_table)
    assert m.value("broker_agent_data_version") == topics.data_version.counter


def test_metrics_port_flag_defaults_to_off() -> None:
    parser = build_parser()
    assert parser.parse_args(["-c", "x"]).metrics_port == 0
    assert parser.parse_args(["-c", "x", "--metrics-port", "9878"]).metrics_port == 9878
    with pytest.raises(SystemExit):
        parser.parse_args(["-c", "x", "--metrics-port", "70000"])


def agent_args(namesrv_addrs: str, metrics_port: int) -> list[str]:
    return [
        "--broker-config", str(fixture_path("broker-a.properties")),
        "--topics-json", str(QUICKSTART),
        "--namesrv-addr", namesrv_addrs,
        "--set", "brokerIP1=127.0.0.1",
        "--metrics-port", str(metrics_port),
    ]  # fmt: skip


def test_agent_serves_metrics(namesrv: NamesrvProcess, stubs: Stubs) -> None:
    """A real agent registers with a real NameServer and fails with a dead address; SIGHUP rounds
    make the dead one's consecutive failures reach the alert threshold (3)."""
    dead = f"127.0.0.1:{free_port()}"
    port = free_port()
    agent = spawn_agent(*agent_args(f"{namesrv.address};{dead}", port))
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        assert agent.stdout is not None
        assert agent.stdout.readline().startswith("broker-agent:")

        def registrations(addr: str, result: str) -> float:
            found = scrape(url).find("broker_agent_registrations_total", namesrv=addr, result=result)
            return found[0].value if found else 0.0

        wait_until(lambda: registrations(namesrv.address, "ok") >= 1, 20, "a registration")
        wait_until(lambda: registrations(dead, "unavailable") >= 1, 20, "a failed registration")
        for rounds in (2, 3):
            agent.send_signal(signal.SIGHUP)

            def round_done(rounds: int = rounds) -> bool:
                return registrations(dead, "unavailable") >= rounds and registrations(namesrv.address, "ok") >= rounds

            wait_until(round_done, 20, f"round {rounds}")
        m = scrape(url)
        assert m.value("broker_agent_registration_consecutive_failures", namesrv=dead) >= 3
        assert m.value("broker_agent_registration_consecutive_failures", namesrv=namesrv.address) == 0
        assert m.value("broker_agent_registrations_total", namesrv=namesrv.address, result="ok") >= 3
        last = m.value("broker_agent_last_registration_success_timestamp_seconds", namesrv=namesrv.address)
        assert abs(last - time.time()) < 60
        topics = stubs.ns.GetAllTopicList(ns_pb2.GetAllTopicListRequest()).topics
        assert m.value("broker_agent_topics") == len(topics)
        counter = json.loads(QUICKSTART.read_text(encoding="utf-8"))["dataVersion"]["counter"]
        assert m.value("broker_agent_data_version") == counter
        assert {s.labels["namesrv"] for s in m.samples if "namesrv" in s.labels} == {namesrv.address, dead}
        assert m.value("broker_agent_build_info") == 1
    finally:
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(20) == 0
        agent.stdout.close()  # type: ignore[union-attr]
        agent.stderr.close()  # type: ignore[union-attr]


def test_agent_metrics_port_in_use(namesrv: NamesrvProcess, tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("0.0.0.0", 0))
        busy.listen()
        agent = spawn_agent(*agent_args(namesrv.address, busy.getsockname()[1]))
        _, err = agent.communicate(timeout=30)
    assert agent.returncode == 2
    assert "--metrics-port" in err
