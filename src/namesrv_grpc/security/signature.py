"""Request signatures as RocketMQ's own clients compute them, and their checks.

gRPC (RocketMQ 5, ``apache/rocketmq-clients`` ``Signature.sign``; the server side is RocketMQ's
``DefaultAuthenticationContextBuilder``): every call carries the metadata

- ``x-mq-date-time``: ``yyyyMMdd'T'HHmmss'Z'`` (e.g. ``20261122T193000Z``), the time of the call;
- ``authorization``: ``MQv2-HMAC-SHA1 Credential=<accessKey>, SignedHeaders=x-mq-date-time,
  Signature=<hex HMAC-SHA1(secretKey, value of x-mq-date-time)>``.

  The Go and C++ clients send ``Credential=<accessKey>/<more>`` (for instance ``ak//Rocketmq``): as
  RocketMQ does, the access key is what precedes the first ``/``. The hex digits may be of either case.

Remoting (RocketMQ 4.x ACL, ``AclClientRPCHook`` + ``AclUtils.combineRequestContent`` +
``AclSigner``): the client adds the ext field ``AccessKey`` (and ``SecurityToken`` when it has one),
then ``Signature`` = base64(HMAC-SHA1(secretKey, content)), where content is the values of every
ext field except ``Signature``, in the order of their sorted names, concatenated as UTF-8, followed
by the body bytes.

Freshness (our rule; RocketMQ checks none): the gRPC signature covers only the date-time, so a
captured header can be replayed with any request while the date-time is accepted. A date-time is
fresh when it is within ``skew`` of the current UTC time. Clients in the wild stamp their *local*
time with a ``Z`` (rocketmq-python-client 5.1.2 uses ``datetime.now()``), so a date-time off by a
real time-zone offset (a whole quarter hour from UTC-12:00 to UTC+14:00) is accepted too, but only
for the offsets an access key has *pinned*: the first such request of a key pins its offset (logged
as a warning), later ones must match a pinned offset within ``skew``; at most
:data:`MAX_PINNED_OFFSETS` per key, kept until the ACL is reloaded (SIGHUP). A replayed header drifts
away from every pinned offset as time passes and is refused once it is more than ``skew`` old, unless
its age happens to be a whole quarter hour and the key still has a free pin: so an old header serves
an attacker at most :data:`MAX_PINNED_OFFSETS` times, for at most ``2 * skew`` each. The signature
covers nothing but the date-time (RocketMQ's design), so a header captured on the wire can be used for
any request while it is fresh: TLS is what keeps headers from being captured at all.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone

log = logging.getLogger(__name__)

ALGORITHM = "MQv2-HMAC-SHA1"
AUTHORIZATION_KEY = "authorization"
DATE_TIME_KEY = "x-mq-date-time"
DATE_TIME_FORMAT = "%Y%m%dT%H%M%SZ"
"""``yyyyMMdd'T'HHmmss'Z'`` (RocketMQ ``Signature.DATE_TIME_FORMAT``)."""

ACCESS_KEY_FIELD = "AccessKey"
SIGNATURE_FIELD = "Signature"
SECURITY_TOKEN_FIELD = "SecurityToken"
"""Remoting ext field names (RocketMQ ``SessionCredentials``)."""

DEFAULT_SKEW_SECONDS = 300
"""Largest accepted distance between a request's ``x-mq-date-time`` and the server's clock (or a
pinned time-zone offset from it)."""

MAX_PINNED_OFFSETS = 2
"""Time-zone offsets besides UTC one access key may pin (its clients stamp local time in this many zones)."""

QUARTER_HOUR = 15 * 60
ZONE_OFFSETS = range(-12 * 3600, 14 * 3600 + 1, QUARTER_HOUR)
"""Real time-zone offsets, seconds: UTC-12:00 .. UTC+14:00 in quarter hours."""

VERIFIED_CACHE_SIZE = 4096
"""Verified (authorization, date-time) pairs remembered."""

MAX_AUTHORIZATION_LENGTH = 1024
"""Longer ``authorization`` values are refused before they are parsed."""


class SignatureError(Exception):
    """A request's signature is missing, malformed, wrong or stale. ``kind`` is one of
    ``bad_signature``, ``unknown_access_key``, ``stale_date_time`` (metric label values)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def format_date_time(when: datetime) -> str:
    """``when`` (aware; converted to UTC) as ``yyyyMMdd'T'HHmmss'Z'``."""
    return when.astimezone(timezone.utc).strftime(DATE_TIME_FORMAT)


def hmac_sha1(secret_key: str, data: bytes) -> bytes:
    """HMAC-SHA1 of ``data`` keyed with the UTF-8 bytes of ``secret_key`` (RocketMQ ``AclSigner``)."""
    return hmac.new(secret_key.encode("utf-8"), data, hashlib.sha1).digest()


def grpc_signature_metadata(access_key: str, secret_key: str, now: datetime) -> tuple[tuple[str, str], ...]:
    """The two metadata entries a RocketMQ 5 client sends, signed at ``now`` (aware datetime)."""
    date_time = format_date_time(now)
    signature = hmac_sha1(secret_key, date_time.encode("ascii")).hex()
    authorization = f"{ALGORITHM} Credential={access_key}, SignedHeaders={DATE_TIME_KEY}, Signature={signature}"
    return ((DATE_TIME_KEY, date_time), (AUTHORIZATION_KEY, authorization))


@dataclass(frozen=True, slots=True)
class Authorization:
    """A parsed ``authorization`` value: the access key and the raw signature bytes."""

    access_key: str
    signature: bytes


def parse_authorization(value: str) -> Authorization:
    """Parse ``MQv2-HMAC-SHA1 Credential=..., SignedHeaders=..., Signature=<hex>``.

    Raises SignatureError (``bad_signature``) naming what is wrong.
    """
    if len(value) > MAX_AUTHORIZATION_LENGTH:
        raise SignatureError("bad_signature", f"authorization: longer than {MAX_AUTHORIZATION_LENGTH} characters")
    algorithm, _, rest = value.strip().partition(" ")
    if algorithm != ALGORITHM:
        raise SignatureError("bad_signature", f"authorization: algorithm must be {ALGORITHM}")
    fields: dict[str, str] = {}
    for item in rest.split(","):
        name, sep, text = item.strip().partition("=")
        if not sep:
            raise SignatureError("bad_signature", "authorization: expected NAME=VALUE items separated by commas")
        fields[name] = text.strip()
    access_key = fields.get("Credential", "").split("/", 1)[0]
    if not access_key:
        raise SignatureError("bad_signature", "authorization: no Credential")
    signed_headers = fields.get("SignedHeaders", DATE_TIME_KEY)
    if signed_headers.lower() != DATE_TIME_KEY:
        raise SignatureError("bad_signature", f"authorization: SignedHeaders must be {DATE_TIME_KEY}")
    try:
        signature = bytes.fromhex(fields.get("Signature", ""))
    except ValueError:
        raise SignatureError("bad_signature", "authorization: Signature is not hexadecimal") from None
    if len(signature) != hashlib.sha1().digest_size:
        raise SignatureError("bad_signature", "authorization: Signature is not an HMAC-SHA1 (40 hex digits)")
    return Authorization(access_key, signature)


def parse_date_time(value: str) -> datetime:
    """``yyyyMMdd'T'HHmmss'Z'`` as an aware UTC datetime; SignatureError (``bad_signature``) otherwise."""
    try:  # by hand: strptime costs about 10 us
        if len(value) != 16 or value[8] != "T" or value[15] != "Z" or not (value[:8] + value[9:15]).isdigit():
            raise ValueError
        return datetime(
            int(value[0:4]), int(value[4:6]), int(value[6:8]),
            int(value[9:11]), int(value[11:13]), int(value[13:15]), tzinfo=timezone.utc,
        )  # fmt: skip
    except ValueError:
        raise SignatureError("bad_signature", f"{DATE_TIME_KEY}: not yyyyMMddTHHmmssZ") from None


def remoting_signed_fields(ext_fields: Mapping[str, str]) -> bytes:
    """The ext-field part of what a RocketMQ 4.x client signs: the values of the ext fields other
    than ``Signature``, ordered by name, concatenated (UTF-8)."""
    # Java's TreeMap orders by UTF-16 code units; sorting the UTF-16 encodings gives that order.
    names = sorted((n for n in ext_fields if n != SIGNATURE_FIELD), key=lambda n: n.encode("utf-16-be"))
    return "".join(ext_fields[n] for n in names).encode("utf-8")


def remoting_signed_content(ext_fields: Mapping[str, str], body: bytes | None) -> bytes:
    """The bytes a RocketMQ 4.x client signs (``AclUtils.combineRequestContent``): the values of the
    ext fields other than ``Signature``, ordered by name, concatenated (UTF-8), then the body."""
    return remoting_signed_fields(ext_fields) + (body or b"")


def remoting_signature(ext_fields: Mapping[str, str], body: bytes | None, secret_key: str) -> str:
    """``Signature`` for a remoting request (base64 of the HMAC-SHA1, as ``AclSigner.calSignature``)."""
    return base64.b64encode(hmac_sha1(secret_key, remoting_signed_content(ext_fields, body))).decode("ascii")


SecretLookup = Callable[[str], "str | None"]
"""Access key -> secret key, or None for an unknown key."""


class SignatureVerifier:
    """Checks signatures against the accounts' secret keys; keeps the pinned time-zone offsets.

    Thread-safe (remoting and gRPC handlers may verify from worker threads).
    """

    def __init__(
        self,
        secret_of: SecretLookup,
        *,
        skew_seconds: int = DEFAULT_SKEW_SECONDS,
        clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
    ) -> None:
        self._secret_of = secret_of
        self._skew = skew_seconds
        self._clock = clock
        self._pinned: dict[str, list[int]] = {}
        self._lock = threading.Lock()
        self._verified: OrderedDict[tuple[str, str], tuple[str, datetime]] = OrderedDict()
        """(authorization, date-time) pairs whose HMAC checked out -> (access key, date-time): a client
        signs once per second, so most calls repeat a pair (freshness is still checked every call)."""

    def verify_grpc(self, authorization: str, date_time: str | None) -> str:
        """Check a RocketMQ 5 gRPC signature; return the access key.

        Raises SignatureError: ``bad_signature`` (malformed, missing date-time, wrong HMAC),
        ``unknown_access_key``, ``stale_date_time`` (outside the freshness window, see the module).
        """
        if date_time:
            known = self._verified.get((authorization, date_time))
            if known is not None:
                self._check_fresh(*known)
                return known[0]
        parsed = parse_authorization(authorization)
        if not date_time:
            raise SignatureError("bad_signature", f"{DATE_TIME_KEY}: missing (the signature covers it)")
        stamped = parse_date_time(date_time)
        secret = self._secret_of(parsed.access_key)
        if secret is None:
            raise SignatureError("unknown_access_key", "authorization: unknown access key")
        expected = hmac_sha1(secret, date_time.encode("ascii"))
        if not hmac.compare_digest(expected, parsed.signature):
            raise SignatureError("bad_signature", "authorization: signature does not match")
        self._check_fresh(parsed.access_key, stamped)
        with self._lock:
            self._verified[(authorization, date_time)] = (parsed.access_key, stamped)
            if len(self._verified) > VERIFIED_CACHE_SIZE:
                self._verified.popitem(last=False)
        return parsed.access_key

    def verify_remoting(self, ext_fields: Mapping[str, str], body: bytes | None) -> str | None:
        """Check a RocketMQ 4.x ACL signature; return the access key, or None when the request
        carries no ``AccessKey`` (unsigned). Raises SignatureError (``bad_signature``,
        ``unknown_access_key``). Any thread (a large body's is checked in a worker thread)."""
        access_key = ext_fields.get(ACCESS_KEY_FIELD)
        if access_key is None:
            return None
        signature = ext_fields.get(SIGNATURE_FIELD)
        if not signature:
            raise SignatureError("bad_signature", "Signature: missing (AccessKey is set)")
        secret = self._secret_of(access_key)
        if secret is None:
            raise SignatureError("unknown_access_key", "AccessKey: unknown access key")
        try:
            given = base64.b64decode(signature, validate=True)
        except (binascii.Error, ValueError):
            raise SignatureError("bad_signature", "Signature: not base64") from None
        mac = hmac.new(secret.encode("utf-8"), remoting_signed_fields(ext_fields), hashlib.sha1)
        if body:
            mac.update(body)  # not copied behind the fields; releases the GIL for a large body
        if not hmac.compare_digest(mac.digest(), given):
            raise SignatureError("bad_signature", "Signature: does not match the request")
        return access_key

    def _check_fresh(self, access_key: str, stamped: datetime) -> None:
        now = self._clock()
        delta = (stamped - now).total_seconds()
        if abs(delta) <= self._skew:
            return
        with self._lock:
            pinned = self._pinned.setdefault(access_key, [])
            if any(abs(delta - offset) <= self._skew for offset in pinned):
                return
            offset = round(delta / QUARTER_HOUR) * QUARTER_HOUR
            if offset in ZONE_OFFSETS and abs(delta - offset) <= self._skew and len(pinned) < MAX_PINNED_OFFSETS:
                pinned.append(offset)
                log.warning(
                    "access key %r stamps x-mq-date-time %s from UTC (local time with a 'Z'): offset pinned",
                    access_key,
                    _offset_text(offset),
                )
                return
        raise SignatureError(
            "stale_date_time",
            f"{DATE_TIME_KEY}: {stamped.strftime(DATE_TIME_FORMAT)} is not within {self._skew} s of the server's "
            f"time ({now.strftime(DATE_TIME_FORMAT)}){' or of a pinned time-zone offset' if pinned else ''}",
        )

    def pinned_offsets(self, access_key: str) -> list[int]:
        """Time-zone offsets (seconds) pinned for ``access_key``."""
        with self._lock:
            return list(self._pinned.get(access_key, ()))


def _offset_text(seconds: int) -> str:
    sign = "+" if seconds >= 0 else "-"
    minutes = abs(seconds) // 60
    return f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def utc_now() -> datetime:
    """The current time, aware, UTC."""
    return datetime.now(timezone.utc)
