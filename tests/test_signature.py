"""Request signatures: RocketMQ 5 gRPC ``MQv2-HMAC-SHA1`` and RocketMQ 4.x remoting ACL, checked
against vectors from RocketMQ's own unit tests and against HMACs computed here by hand."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from namesrv_grpc.security.signature import (
    MAX_PINNED_OFFSETS,
    SignatureError,
    SignatureVerifier,
    format_date_time,
    grpc_signature_metadata,
    parse_authorization,
    remoting_signature,
    remoting_signed_content,
)

NOW = datetime(2026, 11, 22, 19, 30, 0, tzinfo=timezone.utc)
SECRETS = {"broker-a-ak": "broker-a-secret", "ops": "ops-secret-123"}


def by_hand(secret: str, date_time: str) -> str:
    return hmac.new(secret.encode(), date_time.encode(), hashlib.sha1).hexdigest()


def header(access_key: str, signature_hex: str) -> str:
    return f"MQv2-HMAC-SHA1 Credential={access_key}, SignedHeaders=x-mq-date-time, Signature={signature_hex}"


def verifier(now: datetime = NOW, skew: int = 300) -> tuple[SignatureVerifier, list[datetime]]:
    clock = [now]
    return SignatureVerifier(SECRETS.get, skew_seconds=skew, clock=lambda: clock[0]), clock


# --- vectors from RocketMQ's own tests ---------------------------------------------------------


def test_acl_signer_vector_from_rocketmq() -> None:
    # apache/rocketmq client/src/test/java/org/apache/rocketmq/acl/common/AclSignerTest.java:
    # AclSigner.calSignature("RocketMQ", "12345678") == "IUc8rrO/0gDch8CjObLQsW2rsiA="
    # A request whose only ext field value is "RocketMQ" signs exactly those bytes.
    assert remoting_signed_content({"AccessKey": "RocketMQ"}, None) == b"RocketMQ"
    assert remoting_signature({"AccessKey": "RocketMQ"}, None, "12345678") == "IUc8rrO/0gDch8CjObLQsW2rsiA="


def test_grpc_header_vector_from_rocketmq() -> None:
    # apache/rocketmq auth/src/test/.../DefaultAuthenticationContextBuilderTest.java: this header gives
    # username "abc" and signature (base64) "0YqcvN26kEHWaTJo/vFamJ5kQws=" (upper-case hex accepted).
    parsed = parse_authorization(header("abc", "D18A9CBCDDBA9041D6693268FEF15A989E64430B"))
    assert parsed.access_key == "abc"
    assert base64.b64encode(parsed.signature).decode() == "0YqcvN26kEHWaTJo/vFamJ5kQws="


# --- gRPC (RocketMQ 5) -----------------------------------------------------------------------------


def test_client_metadata_matches_a_hand_computed_hmac() -> None:
    metadata = dict(grpc_signature_metadata("broker-a-ak", "broker-a-secret", NOW))
    assert metadata["x-mq-date-time"] == "20261122T193000Z"
    expected = by_hand("broker-a-secret", "20261122T193000Z")
    assert metadata["authorization"] == header("broker-a-ak", expected)


def test_fresh_signature_verifies() -> None:
    v, _ = verifier()
    date_time = format_date_time(NOW - timedelta(seconds=20))
    assert v.verify_grpc(header("ops", by_hand("ops-secret-123", date_time)), date_time) == "ops"


@pytest.mark.parametrize(
    "credential",
    ["ops", "ops//Rocketmq", "ops/20261122/region/service"],
    ids=["java-python", "go-cpp", "scoped"],
)
def test_credential_shapes_of_every_client(credential: str) -> None:
    v, _ = verifier()
    date_time = format_date_time(NOW)
    signature = by_hand("ops-secret-123", date_time)
    assert v.verify_grpc(header(credential, signature.upper()), date_time) == "ops"


@pytest.mark.parametrize(
    ("authorization", "date_time", "kind"),
    [
        (header("ops", by_hand("wrong-secret", "20261122T193000Z")), "20261122T193000Z", "bad_signature"),
        (header("nobody", by_hand("ops-secret-123", "20261122T193000Z")), "20261122T193000Z", "unknown_access_key"),
        (header("ops", by_hand("ops-secret-123", "20261122T193000Z")), None, "bad_signature"),
        (header("ops", by_hand("ops-secret-123", "20261122T193000Z")), "2026-11-22T19:30:00Z", "bad_signature"),
        (header("ops", "zz" * 20), "20261122T193000Z", "bad_signature"),
        (header("ops", "ab" * 10), "20261122T193000Z", "bad_signature"),
        ("MQv1-HMAC-SHA1 Credential=ops, Signature=00", "20261122T193000Z", "bad_signature"),
        ("MQv2-HMAC-SHA1 garbage", "20261122T193000Z", "bad_signature"),
        ("MQv2-HMAC-SHA1 Credential=, Signature=" + "00" * 20, "20261122T193000Z", "bad_signature"),
        ("MQv2-HMAC-SHA1 " + "x" * 5000, "20261122T193000Z", "bad_signature"),
    ],
    ids=[
        "wrong-secret",
        "unknown-key",
        "no-date-time",
        "bad-date-format",
        "not-hex",
        "short-signature",
        "other-algorithm",
        "no-items",
        "empty-credential",
        "huge-header",
    ],
)
def test_bad_signatures_are_refused(authorization: str, date_time: str | None, kind: str) -> None:
    v, _ = verifier()
    with pytest.raises(SignatureError) as caught:
        v.verify_grpc(authorization, date_time)
    assert caught.value.kind == kind


def test_signature_of_another_time_does_not_verify() -> None:
    v, _ = verifier()
    signed_for = "20261122T192959Z"
    with pytest.raises(SignatureError, match="does not match"):
        v.verify_grpc(header("ops", by_hand("ops-secret-123", signed_for)), "20261122T193000Z")


@pytest.mark.parametrize("age_seconds", [301, 900, 3600, 86_400, -301])
def test_replay_outside_the_skew_is_refused(age_seconds: int) -> None:
    # A UTC client's header captured at NOW, replayed age_seconds later (or a clock ahead).
    v, clock = verifier()
    date_time = format_date_time(NOW)
    authorization = header("ops", by_hand("ops-secret-123", date_time))
    assert v.verify_grpc(authorization, date_time) == "ops"
    clock[0] = NOW + timedelta(seconds=age_seconds)
    if age_seconds % 900 and abs(age_seconds) < 900:
        with pytest.raises(SignatureError) as caught:
            v.verify_grpc(authorization, date_time)
        assert caught.value.kind == "stale_date_time"
        return
    # A whole quarter hour off looks like a time zone: the first such header pins that offset once...
    # ...but never twice from the same drifting replay: later it is stale again.
    with contextlib.suppress(SignatureError):
        v.verify_grpc(authorization, date_time)
    clock[0] += timedelta(seconds=301)
    with pytest.raises(SignatureError) as caught:
        v.verify_grpc(authorization, date_time)
    assert caught.value.kind == "stale_date_time"


def test_local_time_stamps_are_accepted_and_pinned() -> None:
    # rocketmq-python-client 5.1.2 stamps datetime.now() (local time) with a 'Z': UTC+05:30 here.
    v, clock = verifier()
    local = NOW + timedelta(hours=5, minutes=30)
    date_time = format_date_time(local)
    assert v.verify_grpc(header("ops", by_hand("ops-secret-123", date_time)), date_time) == "ops"
    assert v.pinned_offsets("ops") == [19_800]
    # The same client a minute later: still fine.
    clock[0] = NOW + timedelta(minutes=1)
    later = format_date_time(local + timedelta(minutes=1, seconds=3))
    assert v.verify_grpc(header("ops", by_hand("ops-secret-123", later)), later) == "ops"
    # Its header replayed 22.5 minutes later is stale: no pinned offset (nor a quarter hour) matches.
    replay = header("ops", by_hand("ops-secret-123", later))
    clock[0] = NOW + timedelta(minutes=22, seconds=30)
    with pytest.raises(SignatureError) as caught:
        v.verify_grpc(replay, later)
    assert caught.value.kind == "stale_date_time"
    # Replayed a whole hour later it looks like another zone and takes the last free pin, once...
    clock[0] = NOW + timedelta(hours=1, minutes=1)
    v.verify_grpc(replay, later)
    assert len(v.pinned_offsets("ops")) == MAX_PINNED_OFFSETS
    # ...and from then on every replay is refused, while the real client goes on.
    for minutes in (7, 60, 120, 600):
        clock[0] = NOW + timedelta(hours=1, minutes=1 + minutes)
        with pytest.raises(SignatureError):
            v.verify_grpc(replay, later)
    fresh = format_date_time(clock[0] + timedelta(hours=5, minutes=30))
    assert v.verify_grpc(header("ops", by_hand("ops-secret-123", fresh)), fresh) == "ops"
    # Pins are per access key.
    assert v.pinned_offsets("broker-a-ak") == []


def test_offsets_that_are_no_time_zone_are_refused() -> None:
    v, _ = verifier()
    for off in (timedelta(hours=5, minutes=7), timedelta(hours=15), timedelta(hours=-13)):
        date_time = format_date_time(NOW + off)
        with pytest.raises(SignatureError) as caught:
            v.verify_grpc(header("ops", by_hand("ops-secret-123", date_time)), date_time)
        assert caught.value.kind == "stale_date_time"
    assert v.pinned_offsets("ops") == []


def test_at_most_a_few_offsets_are_pinned_per_key() -> None:
    v, _ = verifier()
    for hours in range(1, MAX_PINNED_OFFSETS + 2):
        date_time = format_date_time(NOW + timedelta(hours=hours))
        authorization = header("ops", by_hand("ops-secret-123", date_time))
        if hours <= MAX_PINNED_OFFSETS:
            v.verify_grpc(authorization, date_time)
        else:
            with pytest.raises(SignatureError):
                v.verify_grpc(authorization, date_time)
    assert len(v.pinned_offsets("ops")) == MAX_PINNED_OFFSETS


def test_a_bad_hmac_never_pins_an_offset() -> None:
    v, _ = verifier()
    date_time = format_date_time(NOW + timedelta(hours=3))
    with pytest.raises(SignatureError):
        v.verify_grpc(header("ops", by_hand("wrong-secret", date_time)), date_time)
    assert v.pinned_offsets("ops") == []


@given(st.integers(min_value=-300, max_value=300))
def test_any_stamp_within_the_skew_verifies(offset: int) -> None:
    v, _ = verifier()
    date_time = format_date_time(NOW + timedelta(seconds=offset))
    assert v.verify_grpc(header("broker-a-ak", by_hand("broker-a-secret", date_time)), date_time) == "broker-a-ak"
    assert v.pinned_offsets("broker-a-ak") == []


# --- remoting (RocketMQ 4.x ACL) -------------------------------------------------------------------


def sign_remoting_by_hand(fields: dict[str, str], body: bytes, secret: str) -> str:
    # AclUtils.combineRequestContent: values in Java TreeMap (UTF-16) order of names, minus Signature.
    content = "".join(fields[name] for name in sorted(fields) if name != "Signature").encode() + body
    return base64.b64encode(hmac.new(secret.encode(), content, hashlib.sha1).digest()).decode()


def test_remoting_content_is_sorted_values_then_body() -> None:
    fields = {"topic": "TopicTest", "AccessKey": "ops", "brokerName": "broker-a", "Signature": "ignored"}
    assert remoting_signed_content(fields, b"BODY") == b"opsbroker-aTopicTestBODY"


def test_remoting_signature_verifies_and_detects_tampering() -> None:
    v, _ = verifier()
    fields = {"topic": "TopicTest", "AccessKey": "ops", "SecurityToken": "tok"}
    fields["Signature"] = sign_remoting_by_hand(fields, b"body", "ops-secret-123")
    assert remoting_signature(fields, b"body", "ops-secret-123") == fields["Signature"]
    assert v.verify_remoting(fields, b"body") == "ops"
    with pytest.raises(SignatureError, match="does not match"):
        v.verify_remoting({**fields, "topic": "Other"}, b"body")
    with pytest.raises(SignatureError, match="does not match"):
        v.verify_remoting(fields, b"other body")


def test_remoting_unsigned_and_broken() -> None:
    v, _ = verifier()
    assert v.verify_remoting({"topic": "TopicTest"}, None) is None
    with pytest.raises(SignatureError) as caught:
        v.verify_remoting({"AccessKey": "ops"}, None)
    assert caught.value.kind == "bad_signature"
    with pytest.raises(SignatureError) as caught:
        v.verify_remoting({"AccessKey": "nobody", "Signature": "AAAA"}, None)
    assert caught.value.kind == "unknown_access_key"
    with pytest.raises(SignatureError) as caught:
        v.verify_remoting({"AccessKey": "ops", "Signature": "not base64!"}, None)
    assert caught.value.kind == "bad_signature"


@given(
    st.dictionaries(
        st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=12),
        st.text(max_size=20),
        max_size=6,
    ),
    st.binary(max_size=64),
)
def test_remoting_signature_round_trip(fields: dict[str, str], body: bytes) -> None:
    fields = {**fields, "AccessKey": "broker-a-ak"}
    fields.pop("Signature", None)
    fields["Signature"] = sign_remoting_by_hand(fields, body, "broker-a-secret")
    v, _ = verifier()
    assert v.verify_remoting(fields, body) == "broker-a-ak"
