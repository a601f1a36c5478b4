"""The watchdog over ``namesrv``'s own processes (src/namesrv_grpc/processes/watchdog.py, issue 39),
over real sockets: a stopped serving process is killed and replaced, a stopped route-table process
turns health NOT_SERVING (and past its bound stops ``namesrv``), brokers are not expired for our
pause, and no merged counter falls when a serving process is replaced."""

from __future__ import annotations

import os
import signal
import threading
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from namesrv.v1 import admin_service_pb2 as admin_pb2
from namesrv_grpc.core.model import DataVersion
from namesrv_grpc.remoting.codes import RequestCode, ResponseCode
from namesrv_grpc.wire import bodies
from tests.metrics_support import Scrape, free_port, scrape
from tests.remoting_support import RemotingTestClient
from tests.support import (
    LOADED_BOX_SLACK_SECONDS,
    NamesrvProcess,
    Stubs,
    poll_until,
    running_namesrv,
    spawn_namesrv,
)
from tests.test_processes import TOPICS, answers_both_doors, register, remoting_route, route_table_pid, serving_pids

HEARTBEAT_TIMEOUT_MILLIS = 1500
"""``processHeartbeatTimeoutMillis`` of these tests' servers (default 10,000)."""


def config_file(tmp_path: Path, **keys: int) -> str:
    path = tmp_path / "namesrv.conf"
    path.write_text("".join(f"{key}={value}\n" for key, value in keys.items()))
    return str(path)


@contextmanager
def watched_namesrv(tmp_path: Path, **keys: int) -> Iterator[tuple[NamesrvProcess, str]]:
    """Two serving processes, a 200 ms expiry scan, a metrics port, the watchdog's timeout 1.5 s."""
    port = free_port()
    conf = config_file(tmp_path, processHeartbeatTimeoutMillis=HEARTBEAT_TIMEOUT_MILLIS, **keys)
    args = ("-c", conf, "--workers", "2", "--scan-not-active-broker-interval", "200", "--metrics-port", str(port))
    with running_namesrv(tmp_path / "ns", *args) as server:
        yield server, f"http://127.0.0.1:{port}"


def ready(base: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"{base}/ready", timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def health(server: NamesrvProcess) -> int:
    with server.channel() as channel:
        status: int = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5).status
        return status


def assert_no_counter_fell(before: Scrape, after: Scrape) -> None:
    """Every counter, histogram bucket, count and sum of ``before`` is in ``after`` and not lower."""
    later = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in after.samples}
    checked = 0
    for family, kind in before.types.items():
        if kind not in ("counter", "histogram"):
            continue
        for sample in before.samples:
            if not sample.name.startswith(family) or sample.name.endswith("_created"):
                continue
            key = (sample.name, tuple(sorted(sample.labels.items())))
            assert key in later, f"{key} is gone"
            assert later[key] >= sample.value, f"{key} fell from {sample.value} to {later[key]}"
            checked += 1
    assert checked > 100, checked


def test_a_stopped_serving_process_is_killed_and_replaced_and_no_counter_falls(tmp_path: Path) -> None:
    """SIGSTOP of a serving process: within processHeartbeatTimeoutMillis it is killed (its sockets
    leave the SO_REUSEPORT group) and started again, /ready says so meanwhile, every new connection
    is answered afterwards, and no counter of /metrics fell across the stop and the restart."""
    with watched_namesrv(tmp_path) as (server, base), RemotingTestClient(server.remoting_address) as broker:
        register(broker, "broker-a", "10.6.0.1:10911", TOPICS, 1)  # its connection stays open: S15
        for _ in range(40):
            assert answers_both_doors(server)
        before = scrape(f"{base}/metrics")
        assert before.value("namesrv_processes", role="serving") == 2
        victim = serving_pids(server)[0]
        os.kill(victim, signal.SIGSTOP)
        stopped_at = time.monotonic()
        try:
            poll_until(lambda: ready(base)[0] == 503, HEARTBEAT_TIMEOUT_MILLIS / 1000 + LOADED_BOX_SLACK_SECONDS)
            poll_until(lambda: victim not in serving_pids(server), HEARTBEAT_TIMEOUT_MILLIS / 1000 + 30)
        finally:
            if victim in serving_pids(server):
                os.kill(victim, signal.SIGCONT)
        killed_after = time.monotonic() - stopped_at
        assert killed_after >= HEARTBEAT_TIMEOUT_MILLIS / 1000 - 0.1
        poll_until(lambda: ready(base)[0] == 200 and len(serving_pids(server)) == 2, 60)
        for _ in range(40):  # every new connection is served: none lands on a stopped process
            assert answers_both_doors(server)
        after = scrape(f"{base}/metrics")
        assert_no_counter_fell(before, after)
        assert after.value("namesrv_process_silences_total", role="serving") == 1
        assert after.value("namesrv_serving_process_restarts_total") == 1
        assert after.value("namesrv_processes", role="serving") == 2
    log = server.stderr_path.read_text()
    assert f"serving process 1 (pid {victim})" in log or f"serving process 2 (pid {victim})" in log
    assert "(processHeartbeatTimeoutMillis): killed, to be started again" in log


def register_with_timeout(client: RemotingTestClient, counter: int, heartbeat_timeout_millis: int) -> int:
    """REGISTER_BROKER of broker-w over ``client`` with its own heartbeat timeout (RocketMQ 5.x
    header field); the answer's code."""
    body = bodies.encode_register_broker_body(TOPICS, DataVersion(0, counter, counter), compressed=False)
    fields = {
        "clusterName": "c1", "brokerName": "broker-w", "brokerId": "0", "brokerAddr": "10.6.0.9:10911",
        "haServerAddr": "10.6.0.9:10912", "compressed": "false", "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
        "heartbeatTimeoutMillis": str(heartbeat_timeout_millis),
    }  # fmt: skip
    code: int = client.call(RequestCode.REGISTER_BROKER, fields, body).code
    return code


def test_a_stopped_route_table_process_turns_health_not_serving_and_expires_no_broker_for_it(
    tmp_path: Path,
) -> None:
    """SIGSTOP of the route-table process for longer than a broker's heartbeat timeout, while the
    broker sends its next registration: health says NOT_SERVING and /ready 503 while it is silent,
    SERVING again once it answers; the registration that waited is applied before any expiry scan,
    so the broker is never expired (issue 39: the scan ran first and removed a live broker)."""
    with (
        watched_namesrv(tmp_path) as (server, base),
        RemotingTestClient(server.remoting_address, timeout=60) as broker,
    ):
        assert register_with_timeout(broker, 1, 4_000) == ResponseCode.SUCCESS
        assert scrape(f"{base}/metrics").value("namesrv_brokers_live") == 1  # as Prometheus scrapes
        pid = route_table_pid(server)
        os.kill(pid, signal.SIGSTOP)
        answers: list[int] = []
        resend = threading.Thread(target=lambda: answers.append(register_with_timeout(broker, 2, 4_000)))
        try:
            poll_until(
                lambda: health(server) == health_pb2.HealthCheckResponse.NOT_SERVING,
                HEARTBEAT_TIMEOUT_MILLIS / 1000 + LOADED_BOX_SLACK_SECONDS,
            )
            status, why = ready(base)
            assert status == 503
            assert why.startswith("the route-table process has not answered for"), why
            # its last scraped values stand in (a scrape lacked namesrv_brokers_live while it was stopped)
            assert scrape(f"{base}/metrics").value("namesrv_brokers_live") == 1
            resend.start()
            time.sleep(5)  # past the broker's 4 s: only our pause makes it look silent
        finally:
            os.kill(pid, signal.SIGCONT)
        resend.join(60)
        assert answers == [ResponseCode.SUCCESS]
        poll_until(lambda: health(server) == health_pb2.HealthCheckResponse.SERVING, 10 + LOADED_BOX_SLACK_SECONDS)
        poll_until(lambda: ready(base)[0] == 200, 10)
        metrics = scrape(f"{base}/metrics")
        assert metrics.value("namesrv_process_silences_total", role="route_table") == 1
        assert metrics.total("namesrv_broker_expirations_total") == 0
        assert remoting_route(server.remoting_address, "RYW-0") is not None
    log = server.stderr_path.read_text()
    assert "health says NOT_SERVING until it does" in log
    assert "the route-table process answers again after" in log


def test_a_route_table_process_silent_past_its_bound_stops_namesrv_with_one_line(tmp_path: Path) -> None:
    conf = config_file(tmp_path, processHeartbeatTimeoutMillis=1_000, routeTableHeartbeatExitMillis=3_000)
    server = spawn_namesrv(tmp_path / "ns", "-c", conf, "--workers", "1")
    try:
        pid = route_table_pid(server)
        os.kill(pid, signal.SIGSTOP)
        code = server.process.wait(3 + 30)
    finally:
        if server.process.poll() is None:
            server.process.kill()
    assert code == 1
    errors = [line for line in server.stderr_path.read_text().splitlines() if " ERROR " in line]
    stop_lines = [
        line for line in errors if "(routeTableHeartbeatExitMillis): killed; stopping: restart namesrv" in line
    ]
    assert len(stop_lines) == 1, errors
    assert not any("route-table process exited" in line for line in errors), errors


@pytest.mark.parametrize("key", ["processHeartbeatTimeoutMillis", "routeTableHeartbeatExitMillis"])
def test_heartbeat_bounds_below_one_second_are_refused(tmp_path: Path, key: str) -> None:
    with pytest.raises(RuntimeError, match=f"namesrv did not start.*{key}"):
        spawn_namesrv(tmp_path / "ns", "-c", config_file(tmp_path, **{key: 999})).stop()


LIBFAKETIME = next(
    (p for p in Path("/usr/lib").glob("*-linux-gnu/faketime/libfaketime.so.1")),
    None,
)
"""Debian's libfaketime (``make test`` installs it: scripts/install-faketime.sh)."""


@pytest.mark.skipif(LIBFAKETIME is None, reason="libfaketime is not installed (scripts/install-faketime.sh)")
def test_a_wall_clock_step_expires_no_broker(tmp_path: Path) -> None:
    """Issue 39: with the system clock stepped +300 s (libfaketime, the monotonic clock untouched) a
    live broker registered 2 s earlier expired 0.71 s later. S13 measures silence on the monotonic
    clock: after the step the broker stays through many expiry scans, and its registration time is
    still shown on the wall clock."""
    offset = tmp_path / "faketime"
    offset.write_text("+0\n")
    env = {
        "LD_PRELOAD": str(LIBFAKETIME),
        "FAKETIME_TIMESTAMP_FILE": str(offset),
        "FAKETIME_CACHE_DURATION": "1",  # the file is read again after at most 1 s
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }
    port = free_port()
    args = ("--workers", "1", "--scan-not-active-broker-interval", "200", "--metrics-port", str(port))
    with (
        running_namesrv(tmp_path / "ns", *args, env=env) as server,
        RemotingTestClient(server.remoting_address) as broker,
    ):
        assert register_with_timeout(broker, 1, 10_000) == ResponseCode.SUCCESS
        offset.write_text("+300\n")
        base = f"http://127.0.0.1:{port}"

        def live_table() -> admin_pb2.GetBrokerLiveTableResponse:
            with server.channel() as channel:
                table: admin_pb2.GetBrokerLiveTableResponse = Stubs(channel).admin.GetBrokerLiveTable(
                    admin_pb2.GetBrokerLiveTableRequest(), timeout=10
                )
                return table

        # the route-table process sees the new wall time
        poll_until(lambda: live_table().now_millis > time.time() * 1000 + 200_000, 10)
        time.sleep(2)  # ten expiry scans on the stepped clock
        assert scrape(f"{base}/metrics").total("namesrv_broker_expirations_total") == 0
        assert remoting_route(server.remoting_address, "RYW-0") is not None
        (entry,) = live_table().brokers
        assert abs(entry.last_update_timestamp_millis - time.time() * 1000) < 60_000, "shown as stamped"


def test_a_scrape_waits_for_a_child_only_until_it_would_count_as_silent() -> None:
    """Issue 39: a scrape in the first moments of a stall waited the whole 5 s for the stopped
    process's metrics. Now it waits until the child would count as silent (2 s), at least 0.5 s,
    and does not ask a silent one at all (its last values stand in)."""
    from namesrv_grpc.processes.supervisor import METRICS_MIN_WAIT_SECONDS, metrics_wait_seconds
    from namesrv_grpc.processes.watchdog import STALE_AFTER_SECONDS

    assert metrics_wait_seconds(0.0) == STALE_AFTER_SECONDS
    assert metrics_wait_seconds(1.2) == pytest.approx(STALE_AFTER_SECONDS - 1.2)
    assert metrics_wait_seconds(STALE_AFTER_SECONDS - 0.1) == METRICS_MIN_WAIT_SECONDS
    assert metrics_wait_seconds(STALE_AFTER_SECONDS) is None
    assert metrics_wait_seconds(30.0) is None
