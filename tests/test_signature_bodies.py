"""Remoting ACL signatures over large bodies (issue 30, "signatures over big bodies"). RocketMQ's
``AclClientRPCHook`` signs the ext fields *and the body*, so checking a signature costs an HMAC-SHA1
over up to 16 MiB: a body larger than its request code ever carries is refused by its size before
the signature is checked, and the HMAC of a body over ``OFF_LOOP_SIGNATURE_BYTES`` runs in a worker
thread. The answers stay what they were (NO_PERMISSION, the same remark).

A real NameServer with an ACL, signed as RocketMQ 4.x signs; and the Guard in process, to see where
the HMAC runs."""

from __future__ import annotations

import asyncio
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from namesrv_grpc.core.errors import BadSignatureError
from namesrv_grpc.core.model import DataVersion
from namesrv_grpc.remoting.codec import RemotingCommand
from namesrv_grpc.remoting.codes import RequestCode, ResponseCode
from namesrv_grpc.runtime.policy import OFF_LOOP_SIGNATURE_BYTES
from namesrv_grpc.security.acl import load_acl
from namesrv_grpc.security.audit import AuditLog
from namesrv_grpc.security.authz import Guard, Principal
from namesrv_grpc.security.signature import SignatureVerifier
from namesrv_grpc.wire import bodies
from tests.metrics_support import free_port, scrape
from tests.remoting_support import RemotingTestClient
from tests.support import NamesrvProcess, running_namesrv, topic
from tests.test_security_acl import write_acl
from tests.test_security_remoting import register_fields, sign

VERSION = DataVersion(0, 1, 1)
LARGE_TOPICS = 4000
"""Topics of a registration body well over OFF_LOOP_SIGNATURE_BYTES (~0.5 MB of JSON)."""


def large_body() -> bytes:
    body = bodies.encode_register_broker_body(
        {f"Topic-{i:05d}": topic(f"Topic-{i:05d}") for i in range(LARGE_TOPICS)}, VERSION, compressed=False
    )
    assert len(body) > OFF_LOOP_SIGNATURE_BYTES
    return body


@pytest.fixture(scope="module")
def acl_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NamesrvProcess]:
    workdir = tmp_path_factory.mktemp("signature-bodies")
    metrics_port = free_port()
    with running_namesrv(
        workdir / "ns", "--acl-file", str(write_acl(workdir / "acl.yml")), "--metrics-port", str(metrics_port)
    ) as server:
        server.metrics_port = metrics_port  # type: ignore[attr-defined]
        yield server


def call(server: NamesrvProcess, code: int, fields: dict[str, str], body: bytes) -> RemotingCommand:
    with RemotingTestClient(server.remoting_address, timeout=30) as client:
        return client.call(code, fields, body)


def bad_signatures(server: NamesrvProcess) -> float:
    metrics = scrape(f"http://127.0.0.1:{server.metrics_port}/metrics")  # type: ignore[attr-defined]
    return metrics.value("namesrv_auth_refusals_total", reason="bad_signature")


def test_a_signed_large_registration_is_checked_and_applied(acl_server: NamesrvProcess) -> None:
    body = large_body()
    answer = call(
        acl_server,
        RequestCode.REGISTER_BROKER,
        sign(register_fields("broker-a", "127.0.0.1:10911", body), body, "broker-a-ak"),
        body,
    )
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    # The signature is the right account's: broker-a-ak may not register broker names it does not hold.
    other = sign(register_fields("broker-x", "127.0.0.1:10912", body), body, "broker-a-ak")
    denied = call(acl_server, RequestCode.REGISTER_BROKER, other, body)
    assert (denied.code, denied.remark) == (
        ResponseCode.NO_PERMISSION,
        "ak:broker-a-ak may not RegisterBroker 'broker-x' (--acl-file)",
    )


@pytest.mark.parametrize("size", ["small", "large"])
def test_a_wrong_signature_is_answered_the_same_whatever_the_body_size(acl_server: NamesrvProcess, size: str) -> None:
    body = (
        large_body()
        if size == "large"
        else bodies.encode_register_broker_body({"T": topic("T"), "U": topic("U")}, VERSION, compressed=False)
    )
    fields = sign(register_fields("broker-a", "127.0.0.1:10911", body), body, "broker-a-ak")
    tampered = body[:-2] + b" }"  # the same length, other bytes: the HMAC does not match
    fields["bodyCrc32"] = str(zlib.crc32(tampered) & 0x7FFFFFFF)
    before = bad_signatures(acl_server)
    answer = call(acl_server, RequestCode.REGISTER_BROKER, fields, tampered)
    assert (answer.code, answer.remark) == (ResponseCode.NO_PERMISSION, "Signature: does not match the request")
    assert bad_signatures(acl_server) == before + 1


@pytest.mark.parametrize(
    ("code", "limit"),
    [
        (RequestCode.GET_ROUTEINFO_BY_TOPIC, OFF_LOOP_SIGNATURE_BYTES),
        (RequestCode.PUT_KV_CONFIG, OFF_LOOP_SIGNATURE_BYTES),
        (RequestCode.QUERY_DATA_VERSION, 16 * 1024),
        (RequestCode.REGISTER_TOPIC_IN_NAMESRV, 64 * 1024),
        (RequestCode.UPDATE_NAMESRV_CONFIG, 1024 * 1024),
    ],
    ids=lambda value: RequestCode(value).name if isinstance(value, RequestCode) else str(value),
)
def test_a_body_larger_than_its_request_code_carries_is_refused_before_its_signature(
    acl_server: NamesrvProcess, code: RequestCode, limit: int
) -> None:
    body = b"x" * (limit + 1)
    fields = {
        "topic": "TopicTest",
        "namespace": "ns",
        "key": "k",
        "value": "v",
        "AccessKey": "ops",
        "Signature": "AAAA",
    }
    before = bad_signatures(acl_server)
    answer = call(acl_server, code, fields, body)
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert answer.remark == f"{code.name} body of {limit + 1} bytes is over its {limit}-byte limit"
    assert bad_signatures(acl_server) == before  # refused by its size: no HMAC was computed


# ------------------------------------------------------------------------------------- in process


def test_the_hmac_of_a_large_body_runs_in_a_worker_thread(tmp_path: Path) -> None:
    guard = Guard(load_acl(write_acl(tmp_path / "acl.yml")), AuditLog())
    threads: list[int] = []
    real = SignatureVerifier.verify_remoting

    def recording(self: SignatureVerifier, *args: Any) -> str | None:
        threads.append(threading.get_ident())
        return real(self, *args)

    small = b"{}"
    large = large_body()
    loop_thread = threading.get_ident()

    async def scenario() -> None:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(SignatureVerifier, "verify_remoting", recording)
            now = guard.identify_remoting("10.0.0.1", sign({"topic": "T"}, small, "ops"), small, None)
            assert isinstance(now, Principal)
            assert now.name == "ak:ops"
            later = guard.identify_remoting("10.0.0.1", sign({"topic": "T"}, large, "ops"), large, None)
            assert not isinstance(later, Principal)
            principal = await later
            assert principal.name == "ak:ops"
            wrong = guard.identify_remoting("10.0.0.1", sign({"topic": "T"}, large, "ops"), large[:-1] + b"!", None)
            assert not isinstance(wrong, Principal)
            with pytest.raises(BadSignatureError, match="does not match"):
                await wrong

    asyncio.run(scenario())
    assert threads[0] == loop_thread
    assert loop_thread not in threads[1:]
    assert len(threads) == 3
