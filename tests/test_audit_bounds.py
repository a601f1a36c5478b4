"""The audit trail and the log lines peers cause are bounded (issue 30: one captured signed
REGISTER_BROKER replayed 84,857 times in 20 s wrote 20.7 MB of audit log and 22.4 MB of stderr;
25 s of anonymous registrations grew the log by 47 MB).

Identical audit events within ``auditRepeatWindowSeconds`` write one line and, when the window
ends, a summary with their count; past ``auditLogLinesPerSecond`` lines are dropped and counted,
with at most one line a second saying how many; the route-table process's lines (registration
conflicts, brokers removed as their connection closed) are rate-limited like the doors'. In
process with a clock of our own, then over real NameServer processes."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from namesrv_grpc.config import NamesrvConfig
from namesrv_grpc.remoting.codec import FrameDecoder, RemotingCommand, encode_command
from namesrv_grpc.remoting.codes import RequestCode, ResponseCode
from namesrv_grpc.security import audit as audit_module
from namesrv_grpc.security.audit import AUDIT_LOGGER, AuditLog, peer_address, suppressed_lines
from namesrv_grpc.security.setup import server_guard
from tests.metrics_support import free_port, scrape
from tests.support import NamesrvProcess, running_namesrv
from tests.test_security_acl import write_acl
from tests.test_security_remoting import register_body, register_fields, sign


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [1000.0]
    monkeypatch.setattr("namesrv_grpc.security.audit.time.monotonic", lambda: now[0])
    return now


class Lines:
    """The audit lines written so far (parsed): ``now()``."""

    def __init__(self, caplog: pytest.LogCaptureFixture) -> None:
        self._caplog = caplog

    def now(self) -> list[dict[str, Any]]:
        return [json.loads(r.getMessage()) for r in self._caplog.records if r.name == AUDIT_LOGGER]


@pytest.fixture
def lines(caplog: pytest.LogCaptureFixture) -> Iterator[Lines]:
    with caplog.at_level("INFO", logger=AUDIT_LOGGER):
        yield Lines(caplog)


REGISTER = {"clusterName": "DefaultCluster", "brokerName": "broker-a", "brokerId": "0", "brokerAddr": "10.0.0.7:10911"}


def test_peer_address_drops_the_port() -> None:
    assert peer_address("remoting:10.0.0.7:53122") == "remoting:10.0.0.7"
    assert peer_address("remoting:::1:53122") == "remoting:::1"
    assert peer_address("ipv4:10.0.0.7:1") == "ipv4:10.0.0.7"
    assert peer_address("ipv6:[::1]:5") == "ipv6:[::1]"
    assert peer_address("unix:/run/x") == "unix:/run/x"


def test_identical_events_write_one_line_and_a_summary(clock: list[float], lines: Lines) -> None:
    before = suppressed_lines()
    log = AuditLog(repeat_window_seconds=60)
    for port in range(1000, 1500):  # a replay: new connections, new ports, the same event
        log.ok("ak:broker-a-ak", f"remoting:6.6.6.6:{port}", "REGISTER_BROKER", **REGISTER)
    log.ok("ak:broker-a-ak", "remoting:6.6.6.7:1", "REGISTER_BROKER", **REGISTER)  # another address
    log.ok("ak:broker-a-ak", "remoting:6.6.6.6:1", "REGISTER_BROKER", **{**REGISTER, "brokerId": "1"})
    assert [(line["peer"], line["brokerId"]) for line in lines.now()] == [
        ("remoting:6.6.6.6:1000", "0"),
        ("remoting:6.6.6.7:1", "0"),
        ("remoting:6.6.6.6:1", "1"),
    ]
    clock[0] += 61
    log.ok("ak:ops", "ipv4:10.0.0.1:1", "PutKVConfig", namespace="n", key="k")  # any line ends due windows
    summary, kv = lines.now()[3:]
    assert summary == {
        "audit": "REGISTER_BROKER",
        "result": "ok",
        "identity": "ak:broker-a-ak",
        "peer": "remoting:6.6.6.6",
        **REGISTER,
        "repeats": 499,
        "repeat_window_seconds": 60,
    }
    assert kv["audit"] == "PutKVConfig"
    log.ok("ak:broker-a-ak", "remoting:6.6.6.6:2000", "REGISTER_BROKER", **REGISTER)  # a new window
    assert lines.now()[-1]["peer"] == "remoting:6.6.6.6:2000"
    assert suppressed_lines()["repeat"] - before["repeat"] == 499


def test_the_summary_comes_when_the_window_ends_without_another_line(lines: Lines) -> None:
    async def scenario() -> None:
        log = AuditLog(repeat_window_seconds=1)
        for _ in range(20):
            log.ok("anonymous", "remoting:6.6.6.6:1", "DELETE_KV_CONFIG", namespace="n", key="k")
        assert len(lines.now()) == 1
        for _ in range(40):
            await asyncio.sleep(0.1)
            if len(lines.now()) == 2:
                break
        assert lines.now()[1]["repeats"] == 19

    asyncio.run(scenario())


def test_close_writes_the_pending_summaries(clock: list[float], lines: Lines) -> None:
    log = AuditLog(repeat_window_seconds=60)
    for _ in range(3):
        log.ok("anonymous", "remoting:6.6.6.6:1", "DELETE_KV_CONFIG", namespace="n", key="k")
    log.close()
    assert [line.get("repeats") for line in lines.now()] == [None, 2]


def test_lines_past_the_rate_are_dropped_counted_and_summarised(clock: list[float], lines: Lines) -> None:
    before = suppressed_lines()
    log = AuditLog(repeat_window_seconds=60, lines_per_second=100)
    for index in range(250):  # distinct events: new brokers every time
        log.ok("anonymous", "remoting:6.6.6.6:1", "REGISTER_BROKER", **{**REGISTER, "brokerName": f"b{index}"})
    assert len(lines.now()) == 100
    clock[0] += 0.5  # 50 lines' worth of tokens
    for index in range(250, 260):
        log.ok("anonymous", "remoting:6.6.6.6:1", "REGISTER_BROKER", **{**REGISTER, "brokerName": f"b{index}"})
    written = lines.now()[100:]
    assert written[0] == {
        "audit": "AuditLinesSuppressed",
        "result": "suppressed",
        "lines": 150,
        "lines_per_second": 100,
    }
    assert [line["brokerName"] for line in written[1:]] == [f"b{index}" for index in range(250, 260)]
    assert suppressed_lines()["rate"] - before["rate"] == 150


@pytest.mark.parametrize(("workers", "share"), [(1, 100), (2, 50), (3, 34)])
def test_the_line_rate_is_shared_by_the_serving_processes(workers: int, share: int) -> None:
    """auditLogLinesPerSecond bounds the whole NameServer: each serving process's audit log takes its
    share (rounded up), so a flood's audit trail does not grow with the cores."""
    guard = server_guard(NamesrvConfig(audit_log_lines_per_second=100), None, workers)
    assert guard.audit_log.lines_per_second == share
    guard.audit_log.close()


def test_refusals_are_limited_per_identity_then_as_identical_events(clock: list[float], lines: Lines) -> None:
    log = AuditLog()
    for _ in range(500):
        log.refused("anonymous", "ipv4:6.6.6.6:1", "RegisterBroker", "ACCESS_DENIED", broker_name="broker-a")
    for name in ("broker-b", "broker-c"):  # past 10 a minute for this identity and RPC: dropped too
        log.refused("anonymous", "ipv4:6.6.6.6:1", "RegisterBroker", "ACCESS_DENIED", broker_name=name)
    assert [line["broker_name"] for line in lines.now()] == ["broker-a"]
    clock[0] += 61
    log.refused("anonymous", "ipv4:6.6.6.6:1", "RegisterBroker", "ACCESS_DENIED", broker_name="broker-a")
    summary, last = lines.now()[1:]
    # 10 refusals passed the per-identity limit: 1 written, 9 identical ones summarised when the
    # window ended; the next line written says how many the per-identity limit dropped.
    assert (summary["broker_name"], summary["repeats"]) == ("broker-a", audit_module.REFUSALS_PER_MINUTE - 1)
    assert last["suppressed"] == 500 + 2 - audit_module.REFUSALS_PER_MINUTE
    assert "repeats" not in last


# ------------------------------------------------------------------------------ real NameServers


def metric(server: NamesrvProcess, name: str, **labels: str) -> float:
    return scrape(f"http://127.0.0.1:{server.metrics_port}/metrics").value(name, **labels)  # type: ignore[attr-defined]


def replay(address: str, frame: bytes, times: int, new_connections: bool) -> None:
    host, port = address.rsplit(":", 1)
    sock: socket.socket | None = None
    for _ in range(times):
        if sock is None or new_connections:
            if sock is not None:
                sock.close()
            sock = socket.create_connection((host, int(port)), timeout=30)
        sock.sendall(frame)
        decoder = FrameDecoder()
        while not (answers := decoder.feed(sock.recv(1 << 16))):
            pass
        assert answers[0].code == ResponseCode.SUCCESS, answers[0].remark
    if sock is not None:
        sock.close()


@pytest.fixture
def acl_server(tmp_path: Path) -> Iterator[NamesrvProcess]:
    metrics_port = free_port()
    args = ["--acl-file", str(write_acl(tmp_path / "acl.yml")), "--audit-log-file", str(tmp_path / "audit.log")]
    with running_namesrv(tmp_path / "ns", *args, "--metrics-port", str(metrics_port)) as server:
        server.metrics_port = metrics_port  # type: ignore[attr-defined]
        server.audit_file = tmp_path / "audit.log"  # type: ignore[attr-defined]
        yield server


def test_a_replayed_signed_registration_writes_a_few_lines(acl_server: NamesrvProcess) -> None:
    """Each replay comes over a new connection: the broker is registered anew (or taken back from the
    previous connection, another instance id), so every replay is a change, audited; and the
    route-table process logs each broker removed as its connection closes (S15), or each
    registration conflict. 4 x 150 replays: one audit line per serving process (and its summary at
    the end), a handful of log lines."""
    body = register_body(topics=("TopicA", "TopicB"))
    fields = sign(register_fields("broker-a", "127.0.0.1:10911", body), body, "broker-a-ak")
    frame = encode_command(RemotingCommand(RequestCode.REGISTER_BROKER, 1, 0, None, fields, body))
    log_before = acl_server.stderr_path.stat().st_size
    threads = [threading.Thread(target=replay, args=(acl_server.remoting_address, frame, 150, True)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    audit_lines = acl_server.audit_file.read_text().splitlines()  # type: ignore[attr-defined]
    registrations = [line for line in audit_lines if '"REGISTER_BROKER"' in line]
    assert 1 <= len(registrations) <= 2, registrations  # one per serving process (2 CPUs here at most)
    assert metric(acl_server, "namesrv_audit_lines_suppressed_total", reason="repeat") >= 600 - len(registrations)
    new_log = acl_server.stderr_path.read_bytes()[log_before:].decode(errors="replace")
    route_table_lines = new_log.count("namesrv_grpc.core.processor")
    assert 1 <= route_table_lines <= 45, route_table_lines  # peerLogLinesPerKind (20) of a kind a 10 s
    suppressed = metric(acl_server, "namesrv_log_lines_suppressed_total", logger="namesrv_grpc.core.processor")
    assert suppressed > 0  # the route-table process drops them too
    assert len(new_log) < 40_000


def test_audit_line_rate_is_bounded_and_configurable(tmp_path: Path) -> None:
    """Anonymous registrations of ever new brokers (no ACL): distinct events, bounded by
    auditLogLinesPerSecond (3 here, shared by the serving processes)."""
    config = tmp_path / "namesrv.conf"
    config.write_text("auditLogLinesPerSecond=3\n")
    metrics_port = free_port()
    audit_file = tmp_path / "audit.log"
    args = ["-c", str(config), "--audit-log-file", str(audit_file), "--metrics-port", str(metrics_port)]
    with running_namesrv(tmp_path / "ns", *args) as server:
        server.metrics_port = metrics_port  # type: ignore[attr-defined]
        body = register_body(topics=("TopicA", "TopicB"))
        host, port = server.remoting_address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            decoder = FrameDecoder()
            for index in range(200):
                fields = register_fields(f"anon-{index}", f"10.9.{index // 250}.{index % 250}:10911", body)
                sock.sendall(encode_command(RemotingCommand(RequestCode.REGISTER_BROKER, index, 0, None, fields, body)))
                while not (answers := decoder.feed(sock.recv(1 << 16))):
                    pass
                assert answers[0].code == ResponseCode.SUCCESS
        rate = metric(server, "namesrv_audit_lines_suppressed_total", reason="rate")
    registrations = [line for line in audit_file.read_text().splitlines() if '"REGISTER_BROKER"' in line]
    assert len(registrations) + rate == 200
    assert rate > 100
    assert any('"AuditLinesSuppressed"' in line for line in audit_file.read_text().splitlines())
