"""``namesrv-admin`` against real NameServer processes: ``-n "h:p;h:p"`` as ``mqadmin`` reads it
(reads from the first NameServer that answers, changes on every NameServer with one line each), the
liveness table of ``clusters``, and a closed stdout pipe."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv_grpc.admin.cli import parse_namesrv_list
from namesrv_grpc.core.model import DataVersion
from tests.support import (
    ROOT,
    NamesrvProcess,
    SharedNamesrv,
    Stubs,
    free_port,
    register_request,
    run_cli_in_process,
    topic,
)

ADMIN = "namesrv_grpc.admin.cli"


@pytest.fixture
def two_namesrvs(module_namesrv_pair: tuple[SharedNamesrv, SharedNamesrv]) -> tuple[NamesrvProcess, NamesrvProcess]:
    """Two NameServers, each with broker-a (topics T1, T2) and broker-b (T2) registered: the
    module's two (tests/conftest.py), emptied first."""
    for server, empty in module_namesrv_pair:
        empty()
        with server.channel() as channel:
            stubs = Stubs(channel)
            stubs.ns.RegisterBroker(register_request(topics=[topic("T1"), topic("T2")]), timeout=10)
            stubs.ns.RegisterBroker(
                register_request(broker_name="broker-b", broker_addr="127.0.0.1:10921", topics=[topic("T2")]),
                timeout=10,
            )
    return module_namesrv_pair[0][0], module_namesrv_pair[1][0]


def perms(server: NamesrvProcess, topic_name: str) -> dict[str, int]:
    with server.channel() as channel:
        route = Stubs(channel).ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic=topic_name), timeout=10).route
    return {q.broker_name: q.perm for q in route.queue_datas}


def both(servers: tuple[NamesrvProcess, NamesrvProcess]) -> str:
    return f"{servers[0].address};{servers[1].address}"


def test_parse_namesrv_list() -> None:
    assert parse_namesrv_list(" a:1 ; b:2;;a:1 ") == ["a:1", "b:2"]
    with pytest.raises(ValueError, match="'b' "):
        parse_namesrv_list("a:1;b")
    with pytest.raises(ValueError, match="names no NameServer"):
        parse_namesrv_list(" ; ")


def test_wipe_write_perm_changes_every_namesrv(two_namesrvs: tuple[NamesrvProcess, NamesrvProcess]) -> None:
    one, two = two_namesrvs
    result = run_cli_in_process(ADMIN, "-n", both(two_namesrvs), "wipe-write-perm", "broker-a")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"{one.address}: OK write permission wiped: 2 topics of broker-a",
        f"{two.address}: OK write permission wiped: 2 topics of broker-a",
    ]
    for server in two_namesrvs:
        assert perms(server, "T2") == {"broker-a": 4, "broker-b": 6}
    back = run_cli_in_process(ADMIN, "-n", both(two_namesrvs), "add-write-perm", "broker-a")
    assert back.returncode == 0, back.stderr
    for server in two_namesrvs:
        assert perms(server, "T1") == {"broker-a": 6}


def test_namesrv_addr_environment_names_every_namesrv(two_namesrvs: tuple[NamesrvProcess, NamesrvProcess]) -> None:
    env = {**os.environ, "NAMESRV_ADDR": both(two_namesrvs), "PYTHONPATH": str(ROOT / "src")}
    result = subprocess.run(
        [sys.executable, "-m", ADMIN, "kv-put", "ORDER_TOPIC_CONFIG", "T1", "broker-a:4"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 2
    for server in two_namesrvs:
        got = run_cli_in_process(ADMIN, "-n", server.address, "kv-get", "ORDER_TOPIC_CONFIG", "T1")
        assert '"value": "broker-a:4"' in got.stdout


def test_change_with_one_namesrv_down_reports_it_and_fails(
    two_namesrvs: tuple[NamesrvProcess, NamesrvProcess],
) -> None:
    one, _ = two_namesrvs
    dead = f"127.0.0.1:{free_port()}"
    result = run_cli_in_process(ADMIN, "-n", f"{dead};{one.address}", "--timeout", "3", "wipe-write-perm", "broker-b")
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"{dead}: FAILED UNAVAILABLE")
    assert lines[1] == f"{one.address}: OK write permission wiped: 1 topics of broker-b"
    assert perms(one, "T2") == {"broker-a": 6, "broker-b": 4}


def test_wipe_write_perm_of_unknown_broker_says_so(two_namesrvs: tuple[NamesrvProcess, NamesrvProcess]) -> None:
    result = run_cli_in_process(ADMIN, "-n", both(two_namesrvs), "wipe-write-perm", "broker-x")
    assert result.returncode == 1
    for server, line in zip(two_namesrvs, result.stdout.splitlines(), strict=True):
        assert line == (
            f"{server.address}: NOT FOUND broker name 'broker-x' has no topic on this NameServer "
            "(not registered here?); nothing changed"
        )
    assert "known to no NameServer" in result.stderr


def test_read_asks_the_first_namesrv_that_answers(two_namesrvs: tuple[NamesrvProcess, NamesrvProcess]) -> None:
    one, _ = two_namesrvs
    dead = f"127.0.0.1:{free_port()}"
    result = run_cli_in_process(ADMIN, "-n", f"{dead};{one.address}", "--timeout", "3", "route", "T1")
    assert result.returncode == 0, result.stderr
    assert '"broker_name": "broker-a"' in result.stdout
    assert f"{dead} did not answer (UNAVAILABLE" in result.stderr
    # an answer that is an error is the answer: the next NameServer is not asked
    missing = run_cli_in_process(ADMIN, "-n", both(two_namesrvs), "route", "NoSuchTopic")
    assert missing.returncode == 1
    assert missing.stderr.count("NOT_FOUND") == 1
    nobody = run_cli_in_process(ADMIN, "-n", dead, "--timeout", "3", "topics")
    assert nobody.returncode == 1
    assert "no NameServer answered" in nobody.stderr


def test_each_reads_every_namesrv(two_namesrvs: tuple[NamesrvProcess, NamesrvProcess]) -> None:
    one, two = two_namesrvs
    run_cli_in_process(ADMIN, "-n", two.address, "wipe-write-perm", "broker-a")
    result = run_cli_in_process(ADMIN, "-n", both(two_namesrvs), "--each", "route", "T1")
    assert result.returncode == 0, result.stderr
    first, second = result.stdout.split(f"== {two.address}\n")
    assert first.startswith(f"== {one.address}\n")
    assert '"perm": 6' in first
    assert '"perm": 4' in second


def test_bad_namesrv_list_is_a_usage_error() -> None:
    result = run_cli_in_process(ADMIN, "-n", "127.0.0.1:8081;nohostport", "topics")
    assert result.returncode == 2
    assert "-n/--namesrv" in result.stderr
    assert "nohostport" in result.stderr
    assert "Traceback" not in result.stderr


def test_clusters_shows_liveness_per_broker_address(namesrv: NamesrvProcess, stubs: Stubs) -> None:
    stubs.ns.RegisterBroker(register_request(topics=[topic("T1")], heartbeat_timeout_millis=30_000), timeout=10)
    stubs.ns.RegisterBroker(
        register_request(broker_id=1, broker_addr="127.0.0.1:10915", version=DataVersion(0, 7, 7)), timeout=10
    )
    result = run_cli_in_process(ADMIN, "-n", namesrv.address, "clusters")
    assert result.returncode == 0, result.stderr
    header, master, slave = result.stdout.splitlines()
    assert header.split() == [
        "CLUSTER", "BROKER", "NAME", "ID", "ADDRESS", "PROTOCOL", "SESSION", "AGE", "TIMEOUT", "DATA", "VERSION"
    ]  # fmt: skip
    cells = master.split()
    assert cells[:6] == ["DefaultCluster", "broker-a", "0", "127.0.0.1:10911", "grpc", "no"]
    assert cells[6].endswith("s")
    assert cells[7:] == ["30s", "0/1/1"]
    assert slave.split()[2:4] == ["1", "127.0.0.1:10915"]
    assert slave.split()[-2:] == ["120s", "0/7/7"]
    as_json = run_cli_in_process(ADMIN, "-n", namesrv.address, "clusters", "--json")
    assert '"protocol": "REGISTRATION_PROTOCOL_GRPC"' in as_json.stdout
    assert '"heartbeat_timeout_millis": "30000"' in as_json.stdout


def test_closed_stdout_pipe_gives_no_traceback(namesrv: NamesrvProcess, stubs: Stubs) -> None:
    """``namesrv-admin ... | head``: the reader is gone before anything is written."""
    stubs.ns.RegisterBroker(register_request(topics=[topic(f"T{i}") for i in range(200)]), timeout=10)
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(
            [sys.executable, "-m", ADMIN, "-n", namesrv.address, "topics"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
            timeout=30,
        )
    finally:
        os.close(write_end)
    assert result.stderr == ""
    assert result.returncode == 141
