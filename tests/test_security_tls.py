"""TLS and mutual TLS end to end, with certificates made here (``cryptography``): who gets in, who
does not, certificate identities under the ACL, the agent and the CLIs over mTLS, the plaintext
health-only port, and certificate reloads (SIGHUP, file change) that keep the route table."""

from __future__ import annotations

import json
import signal
import socket
import ssl
import subprocess
import sys
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from grpc_health.v1 import health_pb2, health_pb2_grpc

from namesrv.v1 import kv_config_service_pb2 as kv_pb2
from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv_grpc.cli import parse_boot_line
from namesrv_grpc.client.security import ClientSecurity
from namesrv_grpc.core.model import DataVersion
from namesrv_grpc.remoting.codes import RequestCode, ResponseCode
from namesrv_grpc.wire import bodies
from tests.remoting_support import RemotingTestClient
from tests.support import (
    ROOT,
    LineWatcher,
    Stubs,
    _env,
    error_info,
    fixture_path,
    free_port,
    poll_until,
    register_request,
    run_cli,
    spawn_agent,
    topic,
    wait_serving,
)
from tests.tls_support import Issued, TestCA

T = 10


@dataclass
class Pki:
    ca: TestCA
    rogue: TestCA
    server: Issued
    broker_a: Issued
    admin: Issued
    rogue_client: Issued


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    directory = tmp_path_factory.mktemp("pki")
    ca = TestCA(directory / "ca")
    rogue = TestCA(directory / "rogue", name="rogue-ca")
    return Pki(
        ca=ca,
        rogue=rogue,
        server=ca.server(),
        broker_a=ca.client("broker-a"),
        admin=ca.client("ops-admin", organization="Example"),
        rogue_client=rogue.client("broker-a"),
    )


def client(pki: Pki, cert: Issued | None = None, ca: TestCA | None = None, **keys: str) -> ClientSecurity:
    return ClientSecurity(
        tls=True,
        ca_pem=(ca or pki.ca).cert_file.read_bytes(),
        cert_pem=cert.cert_file.read_bytes() if cert else None,
        key_pem=cert.key_file.read_bytes() if cert else None,
        **keys,
    )


@dataclass
class SecureNamesrv:
    process: subprocess.Popen[str]
    port: int
    health_port: int
    log: LineWatcher
    remoting_port: int = 0
    cert_file: Path | None = None
    key_file: Path | None = None
    workers: int = 1
    """Serving processes (each loads the certificates and logs its reloads)."""

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


@pytest.fixture
def start_secure(tmp_path: Path) -> Iterator[Callable[..., SecureNamesrv]]:
    started: list[SecureNamesrv] = []

    def start(*extra: str) -> SecureNamesrv:
        health_port = free_port()
        workdir = tmp_path / f"ns{len(started)}"
        workdir.mkdir()
        args = [
            sys.executable, "-m", "namesrv_grpc", "--host", "127.0.0.1", "--port", "0", "--remoting-port", "0",
            "--kv-config-path", str(workdir / "kv.json"), "--config-store-path", str(workdir / "ns.properties"),
            "--snapshot-dir", str(workdir / "snapshots"), "--health-port", str(health_port), *extra,
        ]  # fmt: skip
        process = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=ROOT
        )
        assert process.stdout is not None
        line = process.stdout.readline()
        if "boot success" not in line:
            process.kill()
            raise AssertionError(f"no boot line: {line!r} {process.communicate(timeout=10)[1]}")
        ports = parse_boot_line(line)
        server = SecureNamesrv(
            process, ports["gRPC"], health_port, LineWatcher(process.stderr), ports["remoting"],
            workers=ports["serving processes"],
        )  # fmt: skip
        started.append(server)
        wait_serving(f"127.0.0.1:{health_port}")  # the plaintext health-only port
        return server

    yield start
    for server in started:
        if server.process.poll() is None:
            server.process.send_signal(signal.SIGTERM)
            server.process.wait(15)


def health(security: ClientSecurity, address: str) -> int:
    with security.channel(address) as channel:
        return int(health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5).status)


def refused(security: ClientSecurity, address: str) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as caught:
        health(security, address)
    code: grpc.StatusCode = caught.value.code()
    return code


def run_script(*args: str) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).parent / "grpc-health-check"  # a console script of this package
    return subprocess.run([str(script), *args], capture_output=True, text=True, env=_env(), timeout=30)


def test_tls_refuses_plaintext_and_unknown_cas(pki: Pki, start_secure: Callable[..., SecureNamesrv]) -> None:
    server = start_secure("--tls-cert-file", str(pki.server.cert_file), "--tls-key-file", str(pki.server.key_file))
    serving = health_pb2.HealthCheckResponse.SERVING
    assert health(client(pki), server.address) == serving
    assert refused(ClientSecurity(), server.address) == grpc.StatusCode.UNAVAILABLE  # plaintext
    assert refused(client(pki, ca=pki.rogue), server.address) == grpc.StatusCode.UNAVAILABLE  # wrong CA
    # No client certificate needed without --tls-client-ca-file; the server's own RPCs work.
    with client(pki).channel(server.address) as channel:
        with pytest.raises(grpc.RpcError) as caught:
            Stubs(channel).ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic="Nope"), timeout=T)
        assert error_info(caught.value).reason == "TOPIC_ROUTE_NOT_FOUND"
    # Probes: the plaintext health-only port, and the exec script with the CA.
    assert health(ClientSecurity(), f"127.0.0.1:{server.health_port}") == serving
    with ClientSecurity().channel(f"127.0.0.1:{server.health_port}") as channel:
        with pytest.raises(grpc.RpcError) as caught:
            Stubs(channel).ns.GetAllTopicList(ns_pb2.GetAllTopicListRequest(), timeout=T)
        assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED
    ok = run_script("--tls-ca-file", str(pki.ca.cert_file), server.address)
    assert ok.returncode == 0, ok.stderr
    assert "SERVING" in ok.stdout
    assert run_script(server.address).returncode == 1  # plaintext against TLS


def test_bad_tls_files_exit_2_with_one_line(pki: Pki, tmp_path: Path) -> None:
    not_pem = tmp_path / "x.pem"
    not_pem.write_text("hello\n")
    cases = {
        ("--tls-cert-file", str(pki.server.cert_file)): "--tls-key-file",
        ("--tls-cert-file", str(pki.server.cert_file), "--tls-key-file", str(not_pem)): "not PEM",
        ("--tls-cert-file", str(pki.server.cert_file), "--tls-key-file", str(pki.admin.key_file)): "not a usable",
        (
            "--tls-cert-file", str(pki.server.cert_file), "--tls-key-file", str(pki.server.key_file),
            "--tls-client-ca-file", str(tmp_path / "missing.pem"),
        ): "cannot read",
        ("--tls-client-ca-file", str(pki.ca.cert_file)): "need TLS",
    }  # fmt: skip
    for args, problem in cases.items():
        result = run_cli("namesrv_grpc", "--port", "0", "--remoting-port", "0", *args)
        assert result.returncode == 2, (args, result.stderr)
        lines = [line for line in result.stderr.splitlines() if line.startswith("namesrv:")]
        assert len(lines) == 1, result.stderr
        assert problem in lines[0], lines[0]
        assert "Traceback" not in result.stderr


ACL = """\
anonymousRead: false
accounts:
  - certificateSubject: "CN=broker-a"
    brokerNames: [broker-a]
  - certificateSubject: "/O=Example/CN=ops-admin"
    admin: true
  - accessKey: snapshotter
    secretKey: "snapshot-secret"
"""


@pytest.fixture
def mtls_server(pki: Pki, start_secure: Callable[..., SecureNamesrv], tmp_path: Path) -> SecureNamesrv:
    acl = tmp_path / "acl.yml"
    acl.write_text(ACL)
    cert_file, key_file = tmp_path / "server.crt", tmp_path / "server.key"  # copies: the reload test rewrites them
    cert_file.write_bytes(pki.server.cert_file.read_bytes())
    key_file.write_bytes(pki.server.key_file.read_bytes())
    server: SecureNamesrv = start_secure(
        "--tls-cert-file", str(cert_file), "--tls-key-file", str(key_file),
        "--tls-client-ca-file", str(pki.ca.cert_file), "--acl-file", str(acl),
    )  # fmt: skip
    server.cert_file, server.key_file = cert_file, key_file
    return server


def test_mtls_needs_a_client_certificate_from_the_ca(pki: Pki, mtls_server: SecureNamesrv) -> None:
    address = mtls_server.address
    assert refused(client(pki), address) == grpc.StatusCode.UNAVAILABLE  # no client certificate
    assert refused(client(pki, pki.rogue_client), address) == grpc.StatusCode.UNAVAILABLE  # other CA
    assert refused(ClientSecurity(), address) == grpc.StatusCode.UNAVAILABLE  # plaintext
    assert health(client(pki, pki.broker_a), address) == health_pb2.HealthCheckResponse.SERVING


def test_certificate_subjects_are_acl_identities(pki: Pki, mtls_server: SecureNamesrv) -> None:
    address = mtls_server.address
    with client(pki, pki.broker_a).channel(address) as channel:
        stubs = Stubs(channel)
        stubs.ns.RegisterBroker(register_request(broker_name="broker-a", topics=[topic("TopicA")]), timeout=T)
        calls: tuple[Callable[[], object], ...] = (
            lambda: stubs.ns.RegisterBroker(register_request(broker_name="broker-b"), timeout=T),
            lambda: stubs.kv.PutKVConfig(kv_pb2.PutKVConfigRequest(namespace="n", key="k", value="v"), timeout=T),
        )
        for call in calls:
            with pytest.raises(grpc.RpcError) as caught:
                call()
            assert error_info(caught.value).reason == "ACCESS_DENIED"
    with client(pki, pki.admin).channel(address) as channel:  # O=Example,CN=ops-admin, written /O=.../CN=...
        Stubs(channel).kv.PutKVConfig(kv_pb2.PutKVConfigRequest(namespace="n", key="k", value="v"), timeout=T)
    # A certificate with no account is anonymous: with anonymousRead false it may not even read.
    other = pki.ca.client("somebody-else")
    with client(pki, other).channel(address) as channel:
        with pytest.raises(grpc.RpcError) as caught:
            Stubs(channel).ns.GetAllTopicList(ns_pb2.GetAllTopicListRequest(), timeout=T)
        assert error_info(caught.value).reason == "ACCESS_DENIED"


def test_agent_admin_cli_and_snapshot_over_mtls(pki: Pki, mtls_server: SecureNamesrv, tmp_path: Path) -> None:
    address = mtls_server.address
    ca = ["--tls-ca-file", str(pki.ca.cert_file)]
    agent = spawn_agent(
        "--broker-config", str(fixture_path("broker-a.properties")),
        "--topics-json", str(fixture_path("topics-quickstart.json")),
        "--namesrv-addr", address, "--set", "brokerIP1=127.0.0.1",
        *ca, "--tls-cert-file", str(pki.broker_a.cert_file), "--tls-key-file", str(pki.broker_a.key_file),
    )  # fmt: skip
    admin = [*ca, "--tls-cert-file", str(pki.admin.cert_file), "--tls-key-file", str(pki.admin.key_file)]
    try:

        def route_known() -> bool:
            result = run_cli("namesrv_grpc.admin.cli", "-n", address, *admin, "route", "TopicTest")
            return result.returncode == 0

        poll_until(route_known, timeout=30, interval=0.5)
        route = json.loads(run_cli("namesrv_grpc.admin.cli", "-n", address, *admin, "route", "TopicTest").stdout)
        assert route["route"]["broker_datas"][0]["broker_name"] == "broker-a"
        put = run_cli("namesrv_grpc.admin.cli", "-n", address, *admin, "kv-put", "ns", "key", "value")
        assert put.returncode == 0, put.stderr
        # The agent's certificate is not an admin's.
        agent_cert = [*ca, "--tls-cert-file", str(pki.broker_a.cert_file), "--tls-key-file", str(pki.broker_a.key_file)]
        denied = run_cli("namesrv_grpc.admin.cli", "-n", address, *agent_cert, "kv-put", "ns", "key", "evil")
        assert denied.returncode == 1
        assert "PERMISSION_DENIED" in denied.stdout + denied.stderr
        # namesrv-snapshot: mTLS (any client certificate of the CA) plus an access key that may read.
        out = tmp_path / "snap"
        snap = run_cli(
            "namesrv_grpc.admin.snapshot_cli", "-n", address, "-o", str(out), *agent_cert,
            "--access-key", "snapshotter", "--secret-key", "snapshot-secret",
        )  # fmt: skip
        assert snap.returncode == 0, snap.stderr
        assert "TopicTest" not in snap.stderr
        assert list(out.rglob("*.parquet"))
    finally:
        agent.send_signal(signal.SIGTERM)
        agent.communicate(timeout=20)
    assert agent.returncode == 0


def tls_context(pki: Pki, cert: Issued | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.ca.cert_file))
    if cert is not None:
        context.load_cert_chain(str(cert.cert_file), str(cert.key_file))
    return context


def remoting_client(pki: Pki, port: int, cert: Issued | None) -> RemotingTestClient:
    """A remoting connection over TLS (handshake done; raises ssl.SSLError / OSError when refused)."""
    client = RemotingTestClient(f"127.0.0.1:{port}")
    client.sock = tls_context(pki, cert).wrap_socket(client.sock, server_hostname="localhost")
    return client


def remoting_call(pki: Pki, port: int, cert: Issued | None, code: int) -> None:
    with remoting_client(pki, port, cert) as client:
        client.call(code)


def served_certificate(pki: Pki, port: int) -> x509.Certificate:
    """The certificate a new TLS connection to ``port`` is shown (client certificate broker-a)."""
    context = tls_context(pki, pki.broker_a)
    context.set_alpn_protocols(["h2"])
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der)


def test_certificates_reload_on_sighup_and_file_change(pki: Pki, mtls_server: SecureNamesrv) -> None:
    address = mtls_server.address
    with client(pki, pki.broker_a).channel(address) as channel:
        Stubs(channel).ns.RegisterBroker(register_request(broker_name="broker-a", topics=[topic("Kept")]), timeout=T)
    cert_file, key_file = mtls_server.cert_file, mtls_server.key_file
    assert cert_file is not None
    assert key_file is not None
    first = served_certificate(pki, mtls_server.port)
    assert first.serial_number == pki.server.cert.serial_number

    renewed = pki.ca.issue("server-renewed", pki.server.cert.subject, server=True)
    cert_file.write_bytes(renewed.cert_file.read_bytes())
    key_file.write_bytes(renewed.key_file.read_bytes())
    mtls_server.process.send_signal(signal.SIGHUP)
    mtls_server.log.wait_for("TLS certificate reloaded (SIGHUP)", count=mtls_server.workers)
    assert served_certificate(pki, mtls_server.port).serial_number == renewed.cert.serial_number
    assert served_certificate(pki, mtls_server.remoting_port).serial_number == renewed.cert.serial_number

    # Replaced again, without a signal: the file watch notices within seconds.
    again = pki.ca.issue("server-again", pki.server.cert.subject, server=True)
    key_file.write_bytes(again.key_file.read_bytes())
    cert_file.write_bytes(again.cert_file.read_bytes())
    mtls_server.log.wait_for("TLS certificate reloaded (files changed)", count=mtls_server.workers, timeout=30)
    assert served_certificate(pki, mtls_server.port).serial_number == again.cert.serial_number
    assert served_certificate(pki, mtls_server.remoting_port).serial_number == again.cert.serial_number

    # A broken file is reported and the served certificate stays.
    cert_file.write_text("garbage\n")
    mtls_server.process.send_signal(signal.SIGHUP)
    mtls_server.log.wait_for("TLS reload (SIGHUP) failed", count=mtls_server.workers)
    assert served_certificate(pki, mtls_server.port).serial_number == again.cert.serial_number
    cert_file.write_bytes(again.cert_file.read_bytes())

    # The route table survived every reload, and new connections work.
    with client(pki, pki.broker_a).channel(address) as channel:
        route = Stubs(channel).ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic="Kept"), timeout=T)
    assert route.route.broker_datas[0].broker_name == "broker-a"


def test_remoting_port_speaks_tls_with_certificate_identities(pki: Pki, mtls_server: SecureNamesrv) -> None:
    port = mtls_server.remoting_port
    # Plaintext RocketMQ frames get no answer: the server waits for a TLS handshake, then drops them.
    with RemotingTestClient(f"127.0.0.1:{port}", timeout=5) as plain:
        plain.send(plain.request(RequestCode.GET_BROKER_CLUSTER_INFO))
        assert plain.wait_closed(timeout=15)
    # A client without a certificate, or with one of another CA, fails the handshake.
    # (With TLS 1.3 the server's verdict on the certificate arrives with the first read.)
    for cert in (None, pki.rogue_client):
        with pytest.raises((ssl.SSLError, OSError)):
            remoting_call(pki, port, cert, RequestCode.GET_BROKER_CLUSTER_INFO)
    body = bodies.encode_register_broker_body(
        {"Remote": topic("Remote"), "SELF_TEST_TOPIC": topic("SELF_TEST_TOPIC", 1, 1)},
        DataVersion(0, 1, 1),
        compressed=False,
    )
    fields = {
        "clusterName": "DefaultCluster",
        "brokerId": "0",
        "brokerAddr": "127.0.0.1:10960",
        "haServerAddr": "",
        "compressed": "false",
        "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
    }
    with remoting_client(pki, port, pki.broker_a) as client:  # CN=broker-a: its own broker only
        ok = client.call(RequestCode.REGISTER_BROKER, {**fields, "brokerName": "broker-a"}, body)
        assert ok.code == ResponseCode.SUCCESS, ok.remark
        refused = client.call(RequestCode.REGISTER_BROKER, {**fields, "brokerName": "broker-b"}, body)
        assert refused.code == ResponseCode.NO_PERMISSION
        assert "cert:CN=broker-a may not RegisterBroker 'broker-b'" in (refused.remark or "")
        route = client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Remote"})
        assert route.code == ResponseCode.SUCCESS


def test_permissive_remoting_from_a_rocketmq_config_file(
    pki: Pki, start_secure: Callable[..., SecureNamesrv], tmp_path: Path
) -> None:
    # RocketMQ's own key names (TlsSystemConfig) in the -c file; permissive: the remoting port takes
    # TLS and plaintext clients alike, as RocketMQ's default mode does; gRPC stays TLS-only.
    conf = tmp_path / "namesrv.conf"
    conf.write_text(
        f"tls.server.mode=permissive\ntls.server.certPath={pki.server.cert_file}\n"
        f"tls.server.keyPath={pki.server.key_file}\n"
    )
    server = start_secure("-c", str(conf))
    with RemotingTestClient(f"127.0.0.1:{server.remoting_port}") as plain:
        assert plain.call(RequestCode.GET_BROKER_CLUSTER_INFO).code == ResponseCode.SUCCESS
    with remoting_client(pki, server.remoting_port, None) as tls:
        assert tls.call(RequestCode.GET_BROKER_CLUSTER_INFO).code == ResponseCode.SUCCESS
        assert tls.sock.version() in ("TLSv1.2", "TLSv1.3")  # type: ignore[attr-defined]
    assert served_certificate(pki, server.remoting_port).serial_number == pki.server.cert.serial_number
    assert refused(ClientSecurity(), server.address) == grpc.StatusCode.UNAVAILABLE
    assert health(client(pki), server.address) == health_pb2.HealthCheckResponse.SERVING


def test_remoting_reload_applies_to_clients_that_send_no_server_name(pki: Pki, tmp_path: Path) -> None:
    """Java brokers dial IP addresses and send no SNI: the switch to a reloaded certificate must not
    depend on it (OpenSSL calls the server-name callback for every ClientHello)."""
    import asyncio

    from namesrv_grpc.security.tls import ServerTls, ServerTlsSettings

    cert_file, key_file = tmp_path / "s.crt", tmp_path / "s.key"
    cert_file.write_bytes(pki.server.cert_file.read_bytes())
    key_file.write_bytes(pki.server.key_file.read_bytes())
    tls = ServerTls(ServerTlsSettings(cert_file, key_file))

    def serial(port: int, server_name: str | None) -> int:
        context = ssl.create_default_context(cafile=str(pki.ca.cert_file))
        context.check_hostname = False
        with (
            socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
            context.wrap_socket(raw, server_hostname=server_name) as conn,
        ):
            der = conn.getpeercert(binary_form=True)
        assert der is not None
        return int(x509.load_der_x509_certificate(der).serial_number)

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(asyncio.Protocol, "127.0.0.1", 0, ssl=tls.remoting_context())
        port = server.sockets[0].getsockname()[1]
        try:
            assert await asyncio.to_thread(serial, port, None) == pki.server.cert.serial_number
            renewed = pki.ca.issue("server-sni", pki.server.cert.subject, server=True)
            cert_file.write_bytes(renewed.cert_file.read_bytes())
            key_file.write_bytes(renewed.key_file.read_bytes())
            assert tls.changed_on_disk()
            assert tls.reload("test")
            assert await asyncio.to_thread(serial, port, None) == renewed.cert.serial_number
            assert await asyncio.to_thread(serial, port, "localhost") == renewed.cert.serial_number
        finally:
            server.close()

    asyncio.run(scenario())


def test_agent_checks_the_certificate_against_the_host_name_it_resolved(
    pki: Pki, start_secure: Callable[..., SecureNamesrv], tmp_path: Path
) -> None:
    """``--namesrv-addr localhost:PORT``: the agent dials 127.0.0.1 (what the name resolves to), and
    the server's certificate names only ``localhost``, no IP: verification uses the configured name."""
    dns_only = pki.ca.issue("server-dns-only", pki.server.cert.subject, server=True, ip_san=False)
    server = start_secure("--tls-cert-file", str(dns_only.cert_file), "--tls-key-file", str(dns_only.key_file))
    # A client dialling the IP without a server name is refused: the certificate does not name it.
    assert refused(client(pki), server.address) == grpc.StatusCode.UNAVAILABLE
    agent = spawn_agent(
        "--broker-config", str(fixture_path("broker-a.properties")),
        "--topics-json", str(fixture_path("topics-quickstart.json")),
        "--namesrv-addr", f"localhost:{server.port}", "--set", "brokerIP1=127.0.0.1",
        "--tls-ca-file", str(pki.ca.cert_file),
    )  # fmt: skip
    try:
        named = ClientSecurity(tls=True, ca_pem=pki.ca.cert_file.read_bytes(), server_name="localhost")

        def registered() -> bool:
            with named.channel(server.address) as channel:
                try:
                    Stubs(channel).ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic="TopicTest"), timeout=T)
                except grpc.RpcError:
                    return False
            return True

        poll_until(registered, timeout=30, interval=0.5)
    finally:
        agent.send_signal(signal.SIGTERM)
        agent.communicate(timeout=20)
    assert agent.returncode == 0


def test_certificate_expiry_and_reloads_are_metrics(pki: Pki, tmp_path: Path) -> None:
    from prometheus_client import CollectorRegistry

    from namesrv_grpc.security.tls import ServerTls, ServerTlsSettings, TlsCollector

    cert_file, key_file = tmp_path / "s.crt", tmp_path / "s.key"
    cert_file.write_bytes(pki.server.cert_file.read_bytes())
    key_file.write_bytes(pki.server.key_file.read_bytes())
    tls = ServerTls(ServerTlsSettings(cert_file, key_file))
    registry = CollectorRegistry()
    registry.register(TlsCollector(tls))

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    expiry = "namesrv_tls_certificate_expiry_timestamp_seconds"
    assert value(expiry) == pki.server.cert.not_valid_after_utc.timestamp()
    assert value("namesrv_tls_reloads_total", result="ok") == 0
    assert value("namesrv_tls_reloads_total", result="failed") == 0
    renewed = pki.ca.issue("server-metrics", pki.server.cert.subject, server=True)
    cert_file.write_bytes(renewed.cert_file.read_bytes())
    key_file.write_bytes(renewed.key_file.read_bytes())
    assert tls.reload("test")
    cert_file.write_text("broken\n")
    assert not tls.reload("test")
    assert value(expiry) == renewed.cert.not_valid_after_utc.timestamp()
    assert value("namesrv_tls_reloads_total", result="ok") == 1
    assert value("namesrv_tls_reloads_total", result="failed") == 1
