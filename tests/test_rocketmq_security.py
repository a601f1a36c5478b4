"""Security with real RocketMQ Java software (README "Security"): requests signed by RocketMQ's own
``AclClientRPCHook`` (5.5.0 and 4.9.7 clients, a 5.5.0 broker's ``innerClientAuthenticationCredentials``,
``mqadmin`` with ``conf/tools.yml``) against our ``--acl-file``, and RocketMQ's Netty TLS client
(``tls.*`` system properties, with and without a client certificate) against our TLS settings.
Allowed calls pass; the others get ``NO_PERMISSION`` (16) with our remark, and change nothing.

Two NameServers for the module: one plaintext with the ACL, one TLS-only (enforcing, client
certificates optional) with the same ACL."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.remoting_support import RemotingTestClient
from tests.rocketmq_support import (
    ROCKETMQ_4,
    ROCKETMQ_5,
    JavaProcess,
    cluster_info,
    free_port_block,
    java_processes,
    mqadmin_batch,
    require_rocketmq,
    run_java_client,
    start_java_broker,
    wait_registered,
)
from tests.support import NamesrvProcess, running_namesrv
from tests.tls_support import TestCA

pytestmark = pytest.mark.slow

ACL = """\
anonymousRead: true
accounts:
  - accessKey: sec-broker-ak
    secretKey: sec-broker-secret
    brokerNames: [sec-a]
  - accessKey: sec-admin-ak
    secretKey: sec-admin-secret
    admin: true
  - accessKey: sec-reader-ak
    secretKey: sec-reader-secret
  - certificateSubject: "CN=sec-ops"
    admin: true
"""
BROKER_CREDENTIALS = json.dumps({"accessKey": "sec-broker-ak", "secretKey": "sec-broker-secret"})

PUT_KV = "100;namespace=sec-ns;key=k;value=v"
GET_KV = "101;namespace=sec-ns;key=k"
DELETE_KV = "102;namespace=sec-ns;key=k"
ROUTE = "105;topic=sec-a"
CLUSTER_INFO = "106"
WIPE = "205;brokerName=sec-a"
ADD_PERM = "327;brokerName=sec-a"
DELETE_TOPIC = "216;topic=sec-a"
UPDATE_CONFIG = "318;body=orderMessageEnable=true"


@dataclass
class Secured:
    acl_ns: NamesrvProcess
    tls_ns: NamesrvProcess
    broker: JavaProcess
    refused_broker: JavaProcess
    pki: TestCA
    workdir: Path


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    require_rocketmq(ROCKETMQ_5, ROCKETMQ_4)
    work = tmp_path_factory.mktemp("security")
    acl = work / "acl.yml"
    acl.write_text(ACL)
    pki = TestCA(work / "pki")
    server = pki.server()
    tls_conf = work / "tls.properties"
    tls_conf.write_text(f"tls.server.trustCertPath={pki.cert_file}\ntls.server.need.client.auth=optional\n")
    acl_args = ("--acl-file", str(acl), "--audit-log-file", str(work / "audit.log"))
    health_port = free_port_block(1)
    tls_args = (
        *("-c", str(tls_conf), "--tls-cert-file", str(server.cert_file), "--tls-key-file", str(server.key_file)),
        *("--health-port", str(health_port)),
    )
    with (
        running_namesrv(work / "acl-ns", *acl_args) as acl_ns,
        running_namesrv(work / "tls-ns", *acl_args, *tls_args, health_port=health_port) as tls_ns,
        java_processes() as procs,
    ):
        ns = acl_ns.remoting_address
        signed = {
            "innerClientAuthenticationCredentials": BROKER_CREDENTIALS,
            # 5.5.0 also keeps that user in its own auth store (the broker itself does not authenticate)
            "authenticationMetadataProvider": "org.apache.rocketmq.auth.authentication.provider."
            "LocalAuthenticationMetadataProvider",
        }
        procs.append(start_java_broker(ROCKETMQ_5, work / "sec-a", ns, {"brokerName": "sec-a", **signed}))
        procs.append(start_java_broker(ROCKETMQ_5, work / "sec-b", ns, {"brokerName": "sec-b", **signed}))
        wait_registered(ns, "sec-a")
        yield Secured(acl_ns, tls_ns, procs[0], procs[1], pki, work)


def ca_file(secured: Secured) -> Path:
    return secured.pki.cert_file


def remoting(
    secured: Secured, version: str, addr: str, *requests: str, name: str, credentials: tuple[str, str] | None = None,
    tls: bool = False, client_cert: str | None = None,
) -> list[tuple[int, str]]:  # fmt: skip
    """Run ``tests/rocketmq/java/Remoting.java`` (RocketMQ's NettyRemotingClient, signing with
    AclClientRPCHook when given credentials, over RocketMQ's TLS client when ``tls``); returns
    ``(response code, remark)`` per request (code -1: the call itself failed)."""
    args = [addr, *requests]
    if credentials:
        args += ["--ak", credentials[0], "--sk", credentials[1]]
    props = {}
    if tls:
        args.append("--tls")
        props = {
            "tls.test.mode.enable": "false",
            "tls.client.authServer": "true",
            "tls.client.trustCertPath": str(ca_file(secured)),
        }
        if client_cert:
            issued = secured.pki.client(client_cert)
            props |= {"tls.client.certPath": str(issued.cert_file), "tls.client.keyPath": str(issued.key_file)}
    done = run_java_client(version, "Remoting", *args, workdir=secured.workdir / name, props=props)
    results = []
    for line in done.stdout.splitlines():
        if line.startswith("RESP "):
            code, _, remark = line.removeprefix("RESP code=").partition(" remark=")
            results.append((int(code), remark))
        elif line.startswith("ERROR "):
            results.append((-1, line))
    assert len(results) == len(requests), done.stdout + done.stderr[-3000:]
    return results


def codes(results: list[tuple[int, str]]) -> list[int]:
    return [code for code, _ in results]


def test_a_broker_signing_with_its_key_registers_and_another_name_is_refused(secured: Secured) -> None:
    """The 5.5.0 broker signs REGISTER_BROKER with AclClientRPCHook (innerClientAuthenticationCredentials):
    ``sec-a`` is its account's broker and registers; ``sec-b`` with the same key is refused every time."""
    ns = secured.acl_ns.remoting_address
    assert wait_registered(ns, "sec-a") == secured.broker.addr
    deadline = time.monotonic() + 60
    audit = secured.workdir / "audit.log"
    while '"broker_name": "sec-b"' not in (audit.read_text() if audit.exists() else ""):
        assert time.monotonic() < deadline, "no audit line for sec-b's refused registration"
        time.sleep(0.2)
    assert "sec-b" not in cluster_info(ns)["brokerAddrTable"]
    entries = [json.loads(line.split(" ", 2)[2]) for line in audit.read_text().splitlines()]

    def outcomes(broker_name: str) -> set[tuple[str, str, str]]:
        return {
            (e["audit"], e["identity"], e["result"])
            for e in entries
            if broker_name in (e.get("broker_name"), e.get("brokerName"))
        }

    assert outcomes("sec-b") == {("RegisterBroker", "ak:sec-broker-ak", "refused: ACCESS_DENIED")}
    assert ("REGISTER_BROKER", "ak:sec-broker-ak", "ok") in outcomes("sec-a")


@pytest.mark.parametrize("version", [ROCKETMQ_5, ROCKETMQ_4])
def test_signed_java_clients_get_what_their_account_allows(secured: Secured, version: str) -> None:
    ns = secured.acl_ns.remoting_address
    admin = remoting(
        secured, version, ns, PUT_KV, GET_KV, DELETE_KV, WIPE, ADD_PERM, CLUSTER_INFO,
        name=f"admin-{version}", credentials=("sec-admin-ak", "sec-admin-secret"),
    )  # fmt: skip
    assert codes(admin) == [0, 0, 0, 0, 0, 0], admin
    reader = remoting(
        secured, version, ns, ROUTE, CLUSTER_INFO, GET_KV, PUT_KV, WIPE, DELETE_TOPIC, UPDATE_CONFIG,
        name=f"reader-{version}", credentials=("sec-reader-ak", "sec-reader-secret"),
    )  # fmt: skip
    assert codes(reader) == [0, 0, 22, 16, 16, 16, 16], reader
    for _, remark in reader[3:]:
        assert "ak:sec-reader-ak may not" in remark
    with RemotingTestClient(ns) as client:  # nothing the reader tried changed anything
        assert client.call(101, {"namespace": "sec-ns", "key": "k"}).code == 22
        assert client.call(105, {"topic": "sec-a"}).code == 0


def test_a_wrong_secret_or_unknown_key_is_refused_and_anonymous_may_only_read(secured: Secured) -> None:
    ns = secured.acl_ns.remoting_address
    forged = remoting(
        secured, ROCKETMQ_5, ns, ROUTE, PUT_KV, name="forged", credentials=("sec-admin-ak", "not-the-secret")
    )
    assert codes(forged) == [16, 16]
    assert all("ignature" in remark for _, remark in forged), forged
    unknown = remoting(secured, ROCKETMQ_5, ns, ROUTE, name="unknown", credentials=("nobody-ak", "nobody-secret"))
    assert codes(unknown) == [16]
    assert "unknown access key" in unknown[0][1]
    anonymous = remoting(secured, ROCKETMQ_5, ns, ROUTE, CLUSTER_INFO, PUT_KV, WIPE, name="anonymous")
    assert codes(anonymous) == [0, 0, 16, 16], anonymous
    assert "anonymous may not" in anonymous[2][1]


def test_mqadmin_signs_with_tools_yml(secured: Secured) -> None:
    ns = secured.acl_ns.remoting_address
    commands = [
        ("updateKvConfig", "-s", "sec-mqadmin", "-k", "k", "-v", "v", "-n", ns),
        ("deleteKvConfig", "-s", "sec-mqadmin", "-k", "k", "-n", ns),
    ]
    as_admin = mqadmin_batch(
        ROCKETMQ_5,
        commands,
        workdir=secured.workdir / "mqadmin-admin",
        access_key="sec-admin-ak",
        secret_key="sec-admin-secret",
    )
    assert "create or update kv config to namespace success." in as_admin[0]
    assert "delete kv config from namespace success." in as_admin[1]
    as_reader = mqadmin_batch(
        ROCKETMQ_5,
        commands[:1],
        workdir=secured.workdir / "mqadmin-reader",
        access_key="sec-reader-ak",
        secret_key="sec-reader-secret",
    )
    assert "CODE: 16" in as_reader[0]
    assert "ak:sec-reader-ak may not" in as_reader[0]


def test_java_tls_clients_against_our_tls_port(secured: Secured) -> None:
    """RocketMQ's Netty TLS client verifying our certificate: reads pass; a signature over TLS or a
    client certificate of an admin account may write; the same request in plaintext is dropped."""
    ns = secured.tls_ns.remoting_address
    anonymous = remoting(secured, ROCKETMQ_5, ns, ROUTE, CLUSTER_INFO, PUT_KV, name="tls-anonymous", tls=True)
    assert codes(anonymous) == [17, 0, 16], anonymous  # no broker on this one: TOPIC_NOT_EXIST
    signed = remoting(
        secured, ROCKETMQ_5, ns, PUT_KV, GET_KV, DELETE_KV, name="tls-signed", tls=True,
        credentials=("sec-admin-ak", "sec-admin-secret"),
    )  # fmt: skip
    assert codes(signed) == [0, 0, 0], signed
    by_certificate = remoting(
        secured, ROCKETMQ_5, ns, PUT_KV, DELETE_KV, name="tls-cert", tls=True, client_cert="sec-ops"
    )
    assert codes(by_certificate) == [0, 0], by_certificate
    other_certificate = remoting(secured, ROCKETMQ_4, ns, PUT_KV, name="tls-cert-4", tls=True, client_cert="sec-nobody")
    assert codes(other_certificate) == [16], other_certificate
    plaintext = remoting(secured, ROCKETMQ_5, ns, CLUSTER_INFO, name="tls-plaintext")
    assert codes(plaintext) == [-1], plaintext
