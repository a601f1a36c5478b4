"""Two broker agents for one broker (same broker.conf): the NameServer and the agents say so, and the
one that stops leaves the other's registration in place (no gap in the route)."""

from __future__ import annotations

import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import grpc

from namesrv.v1 import admin_service_pb2 as admin_pb2
from namesrv.v1 import name_server_service_pb2 as ns_pb2
from tests.support import Stubs, fixture_path, free_port, running_namesrv, spawn_agent


def start_agent(address: str) -> subprocess.Popen[str]:
    return spawn_agent(
        "--broker-config", str(fixture_path("broker-a.properties")),
        "--topics-json", str(fixture_path("topics-quickstart.json")),
        "--namesrv-addr", address,
        "--set", "brokerIP1=127.0.0.1",
        "--set", "brokerNotActiveTimeoutMillis=16000",  # session heartbeat every 4 s
    )  # fmt: skip


def holder(stubs: Stubs) -> str:
    """instance_id of broker-a id 0's live registration ("" when none)."""
    table = stubs.admin.GetBrokerLiveTable(admin_pb2.GetBrokerLiveTableRequest(), timeout=5)
    return next((b.instance_id for b in table.brokers if b.broker_name == "broker-a" and b.broker_id == 0), "")


def has_route(stubs: Stubs) -> bool:
    try:
        stubs.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic="TopicTest"), timeout=5)
    except grpc.RpcError as error:
        if error.code() == grpc.StatusCode.NOT_FOUND:
            return False
        raise
    return True


def wait_for(predicate: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def stop(agent: subprocess.Popen[str]) -> str:
    if agent.poll() is None:
        agent.send_signal(signal.SIGTERM)
    try:
        return agent.communicate(timeout=30)[1]
    except subprocess.TimeoutExpired:
        agent.kill()
        return agent.communicate(timeout=10)[1]


def test_two_agents_for_one_broker_are_reported_and_leave_no_gap(tmp_path: Path) -> None:
    metrics_port = free_port()
    with (
        running_namesrv(tmp_path / "ns", "--metrics-port", str(metrics_port)) as server,
        server.channel() as channel,
    ):
        stubs = Stubs(channel)
        first = start_agent(server.address)
        second = None
        try:
            wait_for(lambda: holder(stubs) != "", 30, "the first agent's registration")
            first_instance = holder(stubs)
            second = start_agent(server.address)
            wait_for(lambda: holder(stubs) not in ("", first_instance), 30, "the second agent's registration")
            # the first agent's session notices, it registers again: now they fight
            wait_for(lambda: "registration conflict" in server.stderr_path.read_text(), 30, "the conflict")
            scrape = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read()
            conflicts = [
                line
                for line in scrape.decode().splitlines()
                if line.startswith("namesrv_broker_registration_conflicts_total ")
            ]
            assert conflicts
            assert float(conflicts[0].split()[1]) >= 1
            # stop the second agent while the first one holds the registration
            wait_for(lambda: holder(stubs) == first_instance, 30, "the first agent holding the broker")
            second.send_signal(signal.SIGTERM)
            missing_since: float | None = None
            longest_gap = 0.0
            end = time.monotonic() + 5
            while time.monotonic() < end:
                now = time.monotonic()
                if has_route(stubs):
                    missing_since = None
                else:
                    missing_since = missing_since or now
                    longest_gap = max(longest_gap, now - missing_since)
                time.sleep(0.01)
            second_err = stop(second)
            assert second.returncode == 0, second_err
            assert longest_gap < 1.0, f"the route was missing for {longest_gap:.2f} s"
            assert has_route(stubs)
            assert holder(stubs) == first_instance
        finally:
            first_err = stop(first)
            if second is not None and second.poll() is None:
                stop(second)
    agents_err = first_err + second_err
    assert "another agent (instance" in agents_err
    assert "Run one agent per broker" in agents_err
    assert first.returncode == 0, first_err


def test_a_second_agent_that_stops_hands_the_broker_back_at_once(tmp_path: Path) -> None:
    """The second agent took the registration and stops before the first one noticed: its
    unregistration removes its own registration, and the NameServer asks the first agent's session
    to register at once (instead of at its next heartbeat, up to 10 s later)."""
    with running_namesrv(tmp_path / "ns") as server, server.channel() as channel:
        stubs = Stubs(channel)
        first = spawn_agent(
            "--broker-config", str(fixture_path("broker-a.properties")),
            "--topics-json", str(fixture_path("topics-quickstart.json")),
            "--namesrv-addr", server.address,
            "--set", "brokerIP1=127.0.0.1",
        )  # fmt: skip
        second = None
        try:
            wait_for(lambda: holder(stubs) != "", 30, "the first agent's registration")
            first_instance = holder(stubs)
            second = start_agent(server.address)
            wait_for(lambda: holder(stubs) not in ("", first_instance), 30, "the second agent's registration")
            second.send_signal(signal.SIGTERM)
            wait_for(lambda: second.poll() is not None, 30, "the second agent to stop")
            stopped = time.monotonic()
            wait_for(lambda: holder(stubs) == first_instance, 15, "the first agent's registration back")
            assert time.monotonic() - stopped < 2.0
            assert has_route(stubs)
        finally:
            stop(first)
            if second is not None:
                stop(second)
