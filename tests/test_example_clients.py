"""The example clients of examples/clients/ (Go, Java, TypeScript), as built by ``make clients``
(scripts/install-clients.sh), run against real NameServer processes over loopback: a route and the
queue picked from it match what the Python client sees, error details are read by reason, a change
made over remoting reaches each watcher within a second and the watcher carries on after a
NameServer restart, and a killed broker session removes its broker at once.

Without the built programs these tests skip, unless ``NAMESRV_REQUIRE_CLIENTS=1`` (``make test``
sets it): then they fail.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv.v1 import types_pb2
from namesrv_grpc.cli import parse_boot_line
from namesrv_grpc.core.model import DataVersion
from namesrv_grpc.remoting.codes import RequestCode, ResponseCode
from namesrv_grpc.wire import bodies
from tests.remoting_support import RemotingTestClient
from tests.support import (
    LOADED_BOX_SLACK_SECONDS,
    ROOT,
    SHORT_JVM_OPTIONS,
    LineWatcher,
    NamesrvProcess,
    Stubs,
    _env,
    error_info,
    free_port,
    register_request,
    spawn_namesrv,
    topic,
    wait_serving,
)
from tests.tls_support import Issued, TestCA

pytestmark = [pytest.mark.xdist_group("example-clients"), pytest.mark.shared_namesrv]
"""Every test of the module on one pytest-xdist worker: two of them change the Go client's source and
rebuild or overwrite its program (restored afterwards), which the others run and the build steps
compare (a fresh-clone run on 4 workers saw a concurrent rebuild in the "rebuilds nothing" test)."""

LANGUAGES = ["go", "java", "ts"]
PROGRAMS = {
    "go": [str(ROOT / "build" / "clients" / "namesrv-client-go")],
    "java": [
        "java",
        *SHORT_JVM_OPTIONS.split(),
        "-jar",
        str(ROOT / "examples" / "clients" / "java" / "target" / "namesrv-client.jar"),
    ],
    "ts": ["node", str(ROOT / "examples" / "clients" / "ts" / "dist" / "main.js")],
}
PUSH_SECONDS = 1.0
"""A route change made over remoting reaches every watcher within this (the issue's promise)."""


@pytest.fixture(params=LANGUAGES)
def program(request: pytest.FixtureRequest) -> list[str]:
    """The command line that runs one example client."""
    command = PROGRAMS[request.param]
    if not Path(command[-1]).exists():
        message = f"{command[-1]} is not built: run `make clients`"
        if os.environ.get("NAMESRV_REQUIRE_CLIENTS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return command


def run(program: list[str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*program, *args], capture_output=True, text=True, timeout=timeout)


def summary(route: types_pb2.TopicRouteData) -> str:
    """The canonical text every example prints for a route (see their routeSummary)."""
    queues = sorted(
        f"{q.broker_name}:r{q.read_queue_nums}:w{q.write_queue_nums}:p{q.perm}:f{q.topic_sys_flag}"
        for q in route.queue_datas
    )
    brokers = sorted(
        f"{b.broker_name}@{b.cluster}" + "".join(f"/{i}={b.broker_addrs[i]}" for i in sorted(b.broker_addrs))
        for b in route.broker_datas
    )
    text = f"queues={','.join(queues)} brokers={','.join(brokers)}"
    return text + (f" order={route.order_topic_conf}" if route.order_topic_conf else "")


def writable_queues(route: types_pb2.TopicRouteData) -> set[tuple[str, int, str]]:
    """(broker name, queue id, master address) a RocketMQ producer may send to (no order config)."""
    masters = {b.broker_name: b.broker_addrs[0] for b in route.broker_datas if 0 in b.broker_addrs}
    return {
        (q.broker_name, queue_id, masters[q.broker_name])
        for q in route.queue_datas
        if q.perm & 2 and q.broker_name in masters
        for queue_id in range(q.write_queue_nums)
    }


def test_route_and_picked_queue_match_the_python_client(
    program: list[str], namesrv: NamesrvProcess, stubs: Stubs
) -> None:
    def zoned(request: ns_pb2.RegisterBrokerRequest, zone: str) -> ns_pb2.RegisterBrokerRequest:
        request.zone_name = zone
        return request

    stubs.ns.RegisterBroker(zoned(register_request(topics=[topic("TopicTest", 4, 4)]), "zone-a"), timeout=10)
    slave = register_request(broker_id=1, broker_addr="127.0.0.1:10921", topics=[topic("TopicTest", 4, 4)])
    stubs.ns.RegisterBroker(zoned(slave, "zone-a"), timeout=10)
    broker_b = register_request(
        broker_name="broker-b", broker_addr="127.0.0.1:10931", topics=[topic("TopicTest", 2, 3)]
    )
    stubs.ns.RegisterBroker(zoned(broker_b, "zone-b"), timeout=10)
    # broker-c holds the topic read-only: no queue of it may be picked
    stubs.ns.RegisterBroker(
        register_request(broker_name="broker-c", broker_addr="127.0.0.1:10941", topics=[topic("TopicTest", perm=4)]),
        timeout=10,
    )
    route = stubs.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic="TopicTest"), timeout=10).route
    writable = writable_queues(route)
    assert len(writable) == 7
    for _ in range(3):  # the pick is random: a few runs
        ran = run(program, "route", "--addr", namesrv.address, "--topic", "TopicTest")
        assert ran.returncode == 0, ran.stderr
        lines = ran.stdout.splitlines()
        assert lines[0] == f"route topic=TopicTest {summary(route)}"
        picked = re.fullmatch(r"picked topic=TopicTest broker=(\S+) queue=(\d+) addr=(\S+) writable=(\d+)", lines[1])
        assert picked, lines
        assert (picked[1], int(picked[2]), picked[3]) in writable
        assert int(picked[4]) == len(writable)
    # Zone mode: the route as the server filters it for zone-a (RocketMQ 5.x ZoneRouteRPCHook: broker-a;
    # broker-b is in zone-b, broker-c has no zone), the same for the example as for Python.
    zone_route = stubs.ns.PickupTopicRoute(
        ns_pb2.PickupTopicRouteRequest(topic="TopicTest", zone_name="zone-a"), timeout=10
    ).route
    zoned_run = run(program, "route", "--addr", namesrv.address, "--topic", "TopicTest", "--zone", "zone-a")
    assert zoned_run.returncode == 0, zoned_run.stderr
    assert [b.broker_name for b in zone_route.broker_datas] == ["broker-a"]
    assert zoned_run.stdout.splitlines()[0] == f"route topic=TopicTest {summary(zone_route)}"
    assert zoned_run.stdout.splitlines()[1].endswith(f" writable={len(writable_queues(zone_route))}")


def server_message(stubs: Stubs, name: str) -> str:
    """The gRPC status message of the NameServer's answer to PickupTopicRoute(``name``), as Python sees it."""
    with pytest.raises(grpc.RpcError) as caught:
        stubs.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic=name), timeout=10)
    assert error_info(caught.value).reason == "INVALID_FIELD"
    return str(caught.value.details())


def test_errors_are_read_by_reason_and_print_the_servers_message(
    program: list[str], namesrv: NamesrvProcess, stubs: Stubs
) -> None:
    missing = run(program, "route", "--addr", namesrv.address, "--topic", "NoSuchTopic")
    assert missing.returncode == 3, missing.stderr
    assert missing.stdout == "not_found topic=NoSuchTopic reason=TOPIC_ROUTE_NOT_FOUND\n"
    # The code, reason and metadata decide; the server's message, which says what is wrong, is
    # printed after them as a JSON string (the same in Go, Java and TypeScript).
    bad = "T" * 300
    message = server_message(stubs, bad)
    assert "is longer than" in message  # says what is wrong
    invalid = run(program, "route", "--addr", namesrv.address, "--topic", bad)
    assert invalid.returncode == 1, invalid.stderr
    assert invalid.stdout == ""
    assert invalid.stderr.splitlines()[-1] == (
        "error code=INVALID_ARGUMENT reason=INVALID_FIELD domain=namesrv.rocketmq field=topic "
        f"message={json.dumps(message, ensure_ascii=False)}"
    )


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["route"], id="route-missing"),
        pytest.param(["route", "--topic", ""], id="route-empty"),
        pytest.param(["watch"], id="watch-missing"),
        pytest.param(["watch", "--topic", "A", "--topic", ""], id="watch-empty"),
    ],
)
def test_an_empty_topic_is_refused_before_anything_is_sent(program: list[str], args: list[str]) -> None:
    """The same in all three languages (examples/clients/README.md): a missing or empty --topic is bad
    usage, exit status 2, named as the README spells the flag; nothing reaches a server (nothing
    listens at --addr: a call would end in UNAVAILABLE, a watch would retry for ever)."""
    command = args[0]
    refused = run(program, *args, "--addr", f"127.0.0.1:{free_port()}", timeout=30)
    assert refused.returncode == 2, refused.stderr
    assert refused.stdout == ""
    assert refused.stderr.splitlines()[-1] == f"{command}: --topic is required"
    assert "error code=" not in refused.stderr


def remoting_register(client: RemotingTestClient, topic_name: str, broker_addr: str, queues: int) -> None:
    """REGISTER_BROKER as a RocketMQ 4.x broker sends it (JSON body, CRC32 in bodyCrc32)."""
    body = bodies.encode_register_broker_body(
        {topic_name: topic(topic_name, queues, queues), "SELF_TEST_TOPIC": topic("SELF_TEST_TOPIC", 1, 1)},
        DataVersion(0, int(time.time() * 1000), queues),
        compressed=False,
    )
    fields = {
        "clusterName": "DefaultCluster",
        "brokerName": "broker-r",
        "brokerId": "0",
        "brokerAddr": broker_addr,
        "haServerAddr": "",
        "compressed": "false",
        "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
    }
    answer = client.call(RequestCode.REGISTER_BROKER, fields, body)
    assert answer.code == ResponseCode.SUCCESS, answer.remark


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[list[subprocess.Popen[str]]]:
    """Processes started by a test; killed afterwards."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(10)


def lines(out: LineWatcher) -> list[str]:
    return [line.rstrip("\n") for line in out.lines]


def start(
    spawn: list[subprocess.Popen[str]], program: list[str], *args: str
) -> tuple[subprocess.Popen[str], LineWatcher]:
    process = subprocess.Popen(
        [*program, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    )
    spawn.append(process)
    return process, LineWatcher(process.stdout)


def assert_pushed_within_a_second(remoting: RemotingTestClient, out: LineWatcher, broker_addr: str) -> None:
    """Register topic Watched over remoting and time the watcher's line for it. On a box loaded by
    other work a single stall can exceed the second, so up to three changes are timed (queue counts
    1, 2, 3): the fastest must arrive within PUSH_SECONDS; a client that polls, or a server that
    delays pushes, fails all three."""
    times = []
    for queues in (1, 2, 3):
        expected = (
            f"change topic=Watched queues=broker-r:r{queues}:w{queues}:p6:f0 "
            f"brokers=broker-r@DefaultCluster/0={broker_addr}"
        )
        remoting_register(remoting, "Watched", broker_addr, queues)
        registered = time.monotonic()
        out.wait_for(expected, timeout=PUSH_SECONDS + LOADED_BOX_SLACK_SECONDS)
        times.append(time.monotonic() - registered)
        if times[-1] < PUSH_SECONDS:
            return
    raise AssertionError(f"route changes took {', '.join(f'{t:.3f}' for t in times)} s to reach the watcher")


def test_watch_gets_remoting_changes_within_a_second_and_survives_a_restart(
    program: list[str], spawn: list[subprocess.Popen[str]], tmp_path: Path
) -> None:
    ports = ("--port", str(free_port()), "--remoting-port", str(free_port()))
    server = spawn_namesrv(tmp_path / "ns1", *ports)
    try:
        _, out = start(spawn, program, "watch", "--addr", server.address, "--topic", "Watched", "--topic", "Other")
        out.wait_for("change topic=Other removed=true", timeout=60)
        seen = lines(out)  # a JVM may print warnings first (stderr is merged)
        first = seen.index("snapshot revision=0 topics=2")
        assert seen[first + 1 : first + 3] == ["change topic=Watched removed=true", "change topic=Other removed=true"]
        with RemotingTestClient(server.remoting_address) as remoting:
            assert_pushed_within_a_second(remoting, out, "127.0.0.1:10951")
    finally:
        server.stop()
    # The NameServer restarts on the same ports with an empty table: the watcher reconnects and
    # takes the first message of the new stream as the whole state (revisions start again).
    out.wait_for("disconnected error code=UNAVAILABLE", timeout=30)
    server = spawn_namesrv(tmp_path / "ns2", *ports)
    try:
        out.wait_for("snapshot revision=0 topics=2", count=2, timeout=30)
        out.wait_for("change topic=Watched removed=true", count=2, timeout=30)
        with RemotingTestClient(server.remoting_address) as remoting:
            assert_pushed_within_a_second(remoting, out, "127.0.0.1:10952")
    finally:
        server.stop()


def test_watch_in_zone_mode(
    program: list[str], spawn: list[subprocess.Popen[str]], namesrv: NamesrvProcess, stubs: Stubs
) -> None:
    for name, addr, zone in (("broker-a", "127.0.0.1:10911", "zone-a"), ("broker-b", "127.0.0.1:10931", "zone-b")):
        request = register_request(broker_name=name, broker_addr=addr, topics=[topic("Zoned", 2, 2)])
        request.zone_name = zone
        stubs.ns.RegisterBroker(request, timeout=10)
    zone_route = stubs.ns.PickupTopicRoute(
        ns_pb2.PickupTopicRouteRequest(topic="Zoned", zone_name="zone-b"), timeout=10
    ).route
    assert [b.broker_name for b in zone_route.broker_datas] == ["broker-b"]
    _, out = start(spawn, program, "watch", "--addr", namesrv.address, "--topic", "Zoned", "--zone", "zone-b")
    out.wait_for(f"change topic=Zoned {summary(zone_route)}", timeout=60)


def test_registered_broker_lives_as_long_as_its_session(
    program: list[str], spawn: list[subprocess.Popen[str]], namesrv: NamesrvProcess, stubs: Stubs
) -> None:
    def route_or_none(name: str) -> types_pb2.TopicRouteData | None:
        try:
            answer: ns_pb2.PickupTopicRouteResponse = stubs.ns.PickupTopicRoute(
                ns_pb2.PickupTopicRouteRequest(topic=name), timeout=10
            )
        except grpc.RpcError as exc:
            if error_info(exc).reason != "TOPIC_ROUTE_NOT_FOUND":
                raise
            return None
        return answer.route

    args = ["register", "--addr", namesrv.address, "--broker-name", "broker-x", "--broker-addr", "127.0.0.1:10961",
            "--topic", "Agent:3:2", "--topic", "AgentRead:2:2:4", "--compress", "--zone", "zone-x",
            "--heartbeat-interval-ms", "200"]  # fmt: skip
    process, out = start(spawn, program, *args)
    out.wait_for("session accepted", timeout=60)
    registered = [line for line in lines(out) if line.startswith("registered ")]
    assert re.fullmatch(
        r"registered broker=broker-x id=0 addr=127\.0\.0\.1:10961 topics=2 compressed=true body_bytes=\d+ "
        r"crc32c=[0-9a-f]{8} master_addr=",
        registered[0],
    ), registered
    assert "session accepted heartbeat_timeout_ms=120000 heartbeat_every_ms=200" in lines(out)
    route = route_or_none("Agent")
    assert route is not None
    assert summary(route) == "queues=broker-x:r3:w2:p6:f0 brokers=broker-x@DefaultCluster/0=127.0.0.1:10961"
    assert route.broker_datas[0].zone_name == "zone-x"
    read_only = route_or_none("AgentRead")
    assert read_only is not None
    assert read_only.queue_datas[0].perm == 4
    # SIGKILL: no unregister, the session's end alone removes the broker (heartbeat timeout 120 s).
    time.sleep(0.5)  # a few heartbeats
    process.kill()
    killed = time.monotonic()
    while route_or_none("Agent") is not None:
        assert time.monotonic() - killed < LOADED_BOX_SLACK_SECONDS, "the broker outlived its session"
        time.sleep(0.02)
    # SIGTERM: the example unregisters on its way out.
    process, out = start(spawn, program, *args)
    out.wait_for("session accepted", timeout=60)
    assert route_or_none("Agent") is not None
    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 0
    out.wait_for("unregistered broker=broker-x id=0 addr=127.0.0.1:10961", timeout=10)
    assert route_or_none("Agent") is None


ACL = """
anonymousRead: false
accounts:
  - accessKey: example-client
    secretKey: example-secret
"""


def test_tls_client_certificates_and_signatures(program: list[str], tmp_path: Path) -> None:
    ca = TestCA(tmp_path / "pki")
    server_cert = ca.server()
    client_cert = ca.client("example-client")
    acl = tmp_path / "acl.yml"
    acl.write_text(ACL)
    workdir = tmp_path / "ns"
    workdir.mkdir()
    health_port = free_port()
    args = [
        sys.executable, "-m", "namesrv_grpc", "--host", "127.0.0.1", "--port", "0", "--remoting-port", "0",
        "--kv-config-path", str(workdir / "kv.json"), "--config-store-path", str(workdir / "ns.properties"),
        "--health-port", str(health_port), "--acl-file", str(acl),
        "--tls-cert-file", str(server_cert.cert_file), "--tls-key-file", str(server_cert.key_file),
        "--tls-client-ca-file", str(ca.cert_file),
    ]  # fmt: skip
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=_env()) as server:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert "boot success" in line, line
        address = f"127.0.0.1:{parse_boot_line(line)['gRPC']}"
        wait_serving(f"127.0.0.1:{health_port}")  # the plaintext health-only port
        try:
            check_secure_calls(program, address, ca, client_cert)
        finally:
            server.terminate()


def check_secure_calls(program: list[str], address: str, ca: TestCA, client_cert: Issued) -> None:
    tls = ["--addr", address, "--tls-ca-file", str(ca.cert_file),
           "--tls-cert-file", str(client_cert.cert_file), "--tls-key-file", str(client_cert.key_file)]  # fmt: skip
    signed = run(program, "route", *tls, "--topic", "Secure", "--access-key", "example-client",
                 "--secret-key", "example-secret")  # fmt: skip
    assert signed.returncode == 3, signed.stderr  # allowed to read; the topic has no route
    assert signed.stdout == "not_found topic=Secure reason=TOPIC_ROUTE_NOT_FOUND\n"
    unsigned = run(program, "route", *tls, "--topic", "Secure")
    assert unsigned.returncode == 1
    assert "error code=PERMISSION_DENIED reason=ACCESS_DENIED " in unsigned.stderr
    wrong = run(program, "route", *tls, "--topic", "Secure", "--access-key", "example-client",
                "--secret-key", "not-the-secret")  # fmt: skip
    assert wrong.returncode == 1
    assert "error code=UNAUTHENTICATED reason=BAD_SIGNATURE " in wrong.stderr
    plaintext = run(program, "route", "--addr", address, "--topic", "Secure", "--timeout-ms", "3000")
    assert plaintext.returncode == 1
    assert plaintext.stderr.startswith("error code=")  # UNAVAILABLE, CANCELED: depends on the gRPC library


def test_go_example_is_gofmt_clean() -> None:
    gofmt = shutil.which("gofmt") or "/usr/local/go/bin/gofmt"
    if not Path(gofmt).exists():
        pytest.fail("gofmt (Go) is missing: make clients needs Go")
    sources = sorted(str(p) for p in (ROOT / "examples" / "clients" / "go").glob("*.go"))
    assert sources
    listed = subprocess.run([gofmt, "-l", *sources], capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout == "", f"not gofmt-formatted: {listed.stdout}"


INSTALL_CLIENTS = ROOT / "scripts" / "install-clients.sh"
BUILT = [
    ROOT / "build" / "clients",
    ROOT / "examples" / "clients" / "go" / "gen",
    ROOT / "examples" / "clients" / "java" / "gen",
    ROOT / "examples" / "clients" / "java" / "target",
    ROOT / "examples" / "clients" / "ts" / "src" / "gen",
    ROOT / "examples" / "clients" / "ts" / "dist",
    ROOT / "examples" / "clients" / "ts" / "node_modules",
]
"""Everything `make clients` writes."""


def install_clients(cache: Path) -> str:
    """Run scripts/install-clients.sh (as `make clients` does) with the build cache ``cache`` (not the
    user's: what these tests build from changed sources stays out of it); its output."""
    env = {**os.environ, "NAMESRV_BUILD_CACHE": str(cache)}
    ran = subprocess.run(["bash", str(INSTALL_CLIENTS)], capture_output=True, text=True, timeout=1200, env=env)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    return ran.stdout


def mtimes() -> dict[Path, int]:
    """Modification time (ns) of every file and directory under BUILT."""
    return {path: path.lstat().st_mtime_ns for top in BUILT for path in [top, *top.rglob("*")]}


@pytest.fixture
def built_clients() -> None:
    """The three programs exist (`make clients` ran); else skip, or fail under NAMESRV_REQUIRE_CLIENTS=1."""
    missing = [command[-1] for command in PROGRAMS.values() if not Path(command[-1]).exists()]
    if missing:
        message = f"{missing} not built: run `make clients`"
        if os.environ.get("NAMESRV_REQUIRE_CLIENTS") == "1":
            pytest.fail(message)
        pytest.skip(message)


STEPS = ["go-generators", "protoc", "protoc-gen-grpc-java", "npm-ci", "buf-generate", "go-build", "mvn-package", "tsc"]


@pytest.mark.usefixtures("built_clients")
def test_a_second_make_clients_rebuilds_nothing(tmp_path: Path) -> None:
    """Each step of scripts/install-clients.sh runs only when its inputs changed: run again with
    nothing changed (after a run that brings everything up to date), it says each step is up to date
    and writes no file; a touched but unchanged .proto file or source changes nothing either (the
    inputs are compared by content)."""
    install_clients(tmp_path)  # up to date from here on, whatever changed before the test
    before = mtimes()
    out = install_clients(tmp_path)
    assert [f"install-clients: {name}: up to date, skipped" for name in STEPS] == [
        line for line in out.splitlines() if line.endswith("up to date, skipped")
    ], out
    assert re.search(r"^install-clients: nothing changed, nothing rebuilt \(\d+ s\)$", out, re.MULTILINE), out
    assert mtimes() == before
    touched = [ROOT / "protos" / "namesrv" / "v1" / "types.proto", ROOT / "examples" / "clients" / "go" / "main.go"]
    saved = [path.stat() for path in touched]
    try:
        for path in touched:
            os.utime(path)
        assert "nothing changed, nothing rebuilt" in install_clients(tmp_path)
    finally:
        for path, stat in zip(touched, saved, strict=True):
            os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert mtimes() == before


@pytest.mark.usefixtures("built_clients")
def test_make_clients_rebuilds_what_a_change_reaches(tmp_path: Path) -> None:
    """A changed input runs the steps that read it and no other: a changed Go source rebuilds the Go
    program only (restored afterwards). A changed output is made again: the Go program rebuilt by
    hand from other sources is replaced by the next run, from the build cache, which holds what a
    run built from the same inputs (as a new clone gets it)."""
    source = ROOT / "examples" / "clients" / "go" / "main.go"
    program = ROOT / "build" / "clients" / "namesrv-client-go"
    cache = tmp_path / "cache"
    install_clients(cache)
    text = source.read_text(encoding="utf-8")
    try:
        source.write_text(text + "\n// changed by tests/test_example_clients.py\n", encoding="utf-8")
        assert_only_go_build_ran(install_clients(cache))
    finally:
        source.write_text(text, encoding="utf-8")
    assert_only_go_build_ran(install_clients(cache))  # the source as it was: built again (not cached yet)
    built = program.read_bytes()
    # A program made by something else (an older version of the script, a build by hand): replaced,
    # from the build cache this time (the run above kept it there).
    tampered = built + b"\0"
    program.write_bytes(tampered)
    out = install_clients(cache)
    assert "install-clients: go-build: restored from the build cache" in out, out
    assert "nothing changed, nothing rebuilt" in out, out
    assert program.read_bytes() == built


def assert_only_go_build_ran(out: str) -> None:
    ran = [line for line in out.splitlines() if re.fullmatch(r"install-clients: .* \(\d\d:\d\d:\d\d\)", line)]
    assert [line.rsplit(" (", 1)[0] for line in ran] == ["install-clients: go build (examples/clients/go)"], out
    for name in set(STEPS) - {"go-build"}:
        assert f"install-clients: {name}: up to date, skipped" in out, out
