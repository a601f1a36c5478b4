"""The ``--acl-file``: accounts and what they may do, YAML in the spirit of RocketMQ 4.x ``plain_acl.yml``.

::

    anonymousRead: true              # lookups and lists without credentials (default true)
    globalWhiteRemoteAddresses: []   # these source addresses may do everything (RocketMQ's meaning)
    dateTimeSkewSeconds: 300         # freshness of gRPC signatures (see security.signature)
    accounts:
      - accessKey: broker-a-ak
        secretKey: "..."
        brokerNames: [broker-a]      # may register, heartbeat, open sessions, unregister these only
      - accessKey: ops
        secretKey: "..."
        admin: true                  # AdminService, KV writes, UpdateNamesrvConfig, ExportRouteSnapshot
      - certificateSubject: "CN=broker-b"   # an mTLS client identity instead of a key pair
        brokerNames: [broker-b]

Address patterns (``globalWhiteRemoteAddresses``) take the forms of RocketMQ's
``RemoteAddressStrategyFactory``: ``*`` (also ``*.*.*.*``), one address (IPv4 or IPv6), a list
``10.0.0.1,10.0.0.2``, braces ``10.0.0.{1,2,3}``, and per-part wildcards and ranges ``10.0.*.*``,
``10.0.1.1-100``, ``2001:db8::*``; and, beyond RocketMQ, CIDR blocks ``10.0.0.0/8``.

A certificate subject is a distinguished name as RFC 4514 writes it (``CN=broker-b,O=Example``) or
as OpenSSL prints it (``/O=Example/CN=broker-b``); attribute order does not matter.

Every problem is a :class:`~namesrv_grpc.runtime.properties.ConfigError` naming the file, the field
(``accounts[1].secretKey``) and what is wrong; ``namesrv`` reports it on one line and exits 2.
Secret keys never appear in messages or logs.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from namesrv_grpc.runtime.properties import ConfigError
from namesrv_grpc.security.signature import DEFAULT_SKEW_SECONDS

if TYPE_CHECKING:  # cryptography (about 10 MB resident) is loaded only where certificates are used
    from cryptography import x509

MAX_ACL_FILE_BYTES = 1024 * 1024
"""Larger ACL files are refused unread."""

MIN_SECRET_KEY_LENGTH = 7
"""RocketMQ's ``PlainPermissionManager`` wants secret keys longer than 6 characters."""

TOP_LEVEL_KEYS = ("anonymousRead", "globalWhiteRemoteAddresses", "dateTimeSkewSeconds", "accounts")
ACCOUNT_KEYS = ("accessKey", "secretKey", "certificateSubject", "brokerNames", "admin")

_ACCESS_KEY = re.compile(r"[A-Za-z0-9._~+=@:-]{1,128}")
"""Access keys: no white space, commas or slashes (they delimit ``Credential=<ak>/...``)."""

SubjectKey = tuple[tuple[str, str], ...]
"""A distinguished name, normalised: sorted (attribute OID, value) pairs."""


@dataclass(frozen=True, slots=True)
class Account:
    """One account. ``name`` identifies it in logs and audit lines (``ak:KEY`` or ``cert:SUBJECT``)."""

    name: str
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)
    certificate_subject: str | None = None
    broker_names: frozenset[str] = frozenset()
    admin: bool = False


AddressMatcher = Callable[[ipaddress.IPv4Address | ipaddress.IPv6Address], bool]


@dataclass(frozen=True, slots=True)
class AddressPattern:
    """One ``globalWhiteRemoteAddresses`` entry, as written and as a predicate."""

    text: str
    matches: AddressMatcher


@dataclass(frozen=True, slots=True)
class AclConfig:
    """A loaded ACL file."""

    source: str
    anonymous_read: bool = True
    white_addresses: tuple[AddressPattern, ...] = ()
    accounts: tuple[Account, ...] = ()
    date_time_skew_seconds: int = DEFAULT_SKEW_SECONDS
    by_access_key: Mapping[str, Account] = field(default_factory=dict)
    by_subject: Mapping[SubjectKey, Account] = field(default_factory=dict)

    def secret_of(self, access_key: str) -> str | None:
        """The secret key of ``access_key``, or None when no account has it."""
        account = self.by_access_key.get(access_key)
        return account.secret_key if account is not None else None

    def is_white(self, address: str) -> bool:
        """Whether a peer address (an IP, without port) matches ``globalWhiteRemoteAddresses``."""
        if not self.white_addresses:
            return False
        ip = parse_ip(address)
        return ip is not None and any(pattern.matches(ip) for pattern in self.white_addresses)


def parse_ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """An IP address (IPv4-mapped IPv6 becomes IPv4; a zone ``%eth0`` is dropped), or None."""
    try:
        ip = ipaddress.ip_address(text.split("%", 1)[0].strip("[]"))
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def subject_key(subject: x509.Name) -> SubjectKey:
    """The normalised form of a certificate's subject (attribute order and case of names ignored)."""
    pairs = []
    for attribute in subject:
        value = attribute.value
        pairs.append((attribute.oid.dotted_string, value if isinstance(value, str) else value.hex()))
    return tuple(sorted(pairs))


def parse_subject(text: str) -> SubjectKey:
    """Parse an RFC 4514 (``CN=a,O=b``) or OpenSSL (``/O=b/CN=a``) distinguished name.

    Raises ValueError.
    """
    text = text.strip()
    if text.startswith("/"):
        parts = [p for p in re.split(r"(?<!\\)/", text[1:]) if p]
        text = ",".join(reversed([p.replace(",", "\\,") for p in parts]))
    from cryptography import x509  # about 10 MB resident: loaded only when an ACL names a certificate

    try:
        name = x509.Name.from_rfc4514_string(text)
    except ValueError as exc:
        raise ValueError(f"not a distinguished name like CN=broker-b,O=Example ({exc})") from None
    if not len(name):
        raise ValueError("empty distinguished name")
    return subject_key(name)


def _octet_matcher(part: str, high: int, base: int) -> Callable[[int], bool]:
    part = part.strip()
    if part == "*":
        return lambda _value: True
    if "-" in part:
        low_text, _, high_text = part.partition("-")
        low_value, high_value = int(low_text, base), int(high_text, base)
        if not 0 <= low_value <= high_value <= high:
            raise ValueError(f"range {part} is not within 0..{high} or is reversed")
        return lambda value: low_value <= value <= high_value
    exact = int(part, base)
    if not 0 <= exact <= high:
        raise ValueError(f"{part} is out of range 0..{high}")
    return lambda value: value == exact


def _expand_ipv6_parts(text: str) -> list[str]:
    if text.count("::") > 1:
        raise ValueError("more than one '::'")
    if "::" in text:
        head, tail = text.split("::")
        head_parts = head.split(":") if head else []
        tail_parts = tail.split(":") if tail else []
        missing = 8 - len(head_parts) - len(tail_parts)
        if missing < 1:
            raise ValueError("too many parts")
        return [*head_parts, *["0"] * missing, *tail_parts]
    return text.split(":")


def parse_address_pattern(text: str) -> AddressPattern:
    """One ``globalWhiteRemoteAddresses`` entry (forms in the module docstring). Raises ValueError."""
    text = str(text).strip()
    if not text:
        raise ValueError("empty address pattern")
    if text in ("*", "*.*.*.*", "*:*:*:*:*:*:*:*"):
        return AddressPattern(text, lambda _ip: True)
    if "/" in text:
        network = ipaddress.ip_network(text, strict=False)
        return AddressPattern(text, lambda ip: ip.version == network.version and ip in network)
    if text.endswith("}"):
        head, brace, inner = text.partition("{")
        if not brace or not inner.endswith("}") or not head or head[-1] not in ".:":
            raise ValueError("braces must close the pattern, as in 10.0.0.{1,2,3}")
        return _exact_set(text, [head + item.strip() for item in inner[:-1].split(",") if item.strip()])
    if "," in text:
        return _exact_set(text, [item.strip() for item in text.split(",") if item.strip()])
    if "*" not in text and "-" not in text:
        return _exact_set(text, [text])
    if ":" in text:
        parts = _expand_ipv6_parts(text)
        if len(parts) != 8:
            raise ValueError("an IPv6 pattern needs 8 parts")
        matchers = [_octet_matcher(p, 0xFFFF, 16) for p in parts]

        def matches_v6(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
            hextets = ip.exploded.split(":")
            return ip.version == 6 and all(m(int(h, 16)) for m, h in zip(matchers, hextets, strict=True))

        return AddressPattern(text, matches_v6)
    octets = text.split(".")
    if len(octets) != 4:
        raise ValueError("an IPv4 pattern needs 4 parts, as in 10.0.1.1-100 or 10.0.*.*")
    v4 = [_octet_matcher(p, 255, 10) for p in octets]
    return AddressPattern(text, lambda ip: ip.version == 4 and all(m(o) for m, o in zip(v4, ip.packed, strict=True)))


def _exact_set(text: str, items: list[str]) -> AddressPattern:
    addresses = set()
    for item in items:
        ip = parse_ip(item)
        if ip is None or "[" in item:
            raise ValueError(f"{item!r} is not an IP address")
        addresses.add(ip)
    if not addresses:
        raise ValueError("no address")
    return AddressPattern(text, lambda ip: ip in addresses)


def load_acl(path: Path) -> AclConfig:
    """Read and check an ACL file. Raises ConfigError naming the file, field and problem."""
    source = str(path)
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_ACL_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(source, None, f"cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_ACL_FILE_BYTES:
        raise ConfigError(source, None, f"larger than {MAX_ACL_FILE_BYTES} bytes")
    import yaml  # only --acl-file reads YAML: importing it costs every serving process ~20 ms of CPU

    try:
        document = yaml.safe_load(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(source, None, f"not UTF-8 text (byte {exc.start})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise ConfigError(source, None, f"not valid YAML{where}: {problem}") from None
    return parse_acl(document, source)


def parse_acl(document: Any, source: str) -> AclConfig:
    """Check a parsed ACL document (see the module docstring). Raises ConfigError."""
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise ConfigError(source, None, "must be a mapping with the keys " + ", ".join(TOP_LEVEL_KEYS))
    for key in document:
        if key not in TOP_LEVEL_KEYS:
            raise ConfigError(source, str(key), "unknown key; known keys: " + ", ".join(TOP_LEVEL_KEYS))
    anonymous_read = _boolean(document.get("anonymousRead", True), source, "anonymousRead")
    skew = document.get("dateTimeSkewSeconds", DEFAULT_SKEW_SECONDS)
    if isinstance(skew, bool) or not isinstance(skew, int) or not 1 <= skew <= 3600:
        raise ConfigError(source, "dateTimeSkewSeconds", f"must be a whole number of seconds 1..3600, got {skew!r}")
    white = document.get("globalWhiteRemoteAddresses")
    white = [] if white is None else white
    if not isinstance(white, list):
        raise ConfigError(source, "globalWhiteRemoteAddresses", "must be a list of address patterns")
    patterns = []
    for index, item in enumerate(white):
        key = f"globalWhiteRemoteAddresses[{index}]"
        if not isinstance(item, str):
            raise ConfigError(source, key, f"must be a string, got {type(item).__name__}")
        try:
            patterns.append(parse_address_pattern(item))
        except ValueError as exc:
            raise ConfigError(source, key, f"{item!r}: {exc}") from None
    accounts_doc = document.get("accounts")
    accounts_doc = [] if accounts_doc is None else accounts_doc
    if not isinstance(accounts_doc, list):
        raise ConfigError(source, "accounts", "must be a list of accounts")
    accounts: list[Account] = []
    by_access_key: dict[str, Account] = {}
    by_subject: dict[SubjectKey, Account] = {}
    for index, item in enumerate(accounts_doc):
        account, subject = _account(item, source, f"accounts[{index}]")
        if account.access_key is not None:
            if account.access_key in by_access_key:
                raise ConfigError(source, f"accounts[{index}].accessKey", "the same key is in an earlier account")
            by_access_key[account.access_key] = account
        if subject is not None:
            if subject in by_subject:
                raise ConfigError(
                    source, f"accounts[{index}].certificateSubject", "the same subject is in an earlier account"
                )
            by_subject[subject] = account
        accounts.append(account)
    return AclConfig(
        source=source,
        anonymous_read=anonymous_read,
        white_addresses=tuple(patterns),
        accounts=tuple(accounts),
        date_time_skew_seconds=skew,
        by_access_key=by_access_key,
        by_subject=by_subject,
    )


def _boolean(value: Any, source: str, key: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(source, key, f"must be true or false, got {value!r}")
    return value


def _account(item: Any, source: str, where: str) -> tuple[Account, SubjectKey | None]:
    if not isinstance(item, dict):
        raise ConfigError(source, where, "must be a mapping with the keys " + ", ".join(ACCOUNT_KEYS))
    for key in item:
        if key not in ACCOUNT_KEYS:
            raise ConfigError(source, f"{where}.{key}", "unknown key; known keys: " + ", ".join(ACCOUNT_KEYS))
    access_key = item.get("accessKey")
    secret_key = item.get("secretKey")
    certificate_subject = item.get("certificateSubject")
    if access_key is None and certificate_subject is None:
        raise ConfigError(source, where, "needs accessKey and secretKey, or certificateSubject")
    if access_key is not None:
        if not isinstance(access_key, str) or not _ACCESS_KEY.fullmatch(access_key):
            raise ConfigError(
                source, f"{where}.accessKey", "must be 1-128 letters, digits or ._~+=@:- (no spaces, commas, slashes)"
            )
        if not isinstance(secret_key, str) or len(secret_key) < MIN_SECRET_KEY_LENGTH:
            problem = f"must be a string of at least {MIN_SECRET_KEY_LENGTH} characters"
            raise ConfigError(source, f"{where}.secretKey", problem)
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in secret_key):
            raise ConfigError(source, f"{where}.secretKey", "must not contain control characters")
    elif secret_key is not None:
        raise ConfigError(source, f"{where}.secretKey", "given without accessKey")
    subject: SubjectKey | None = None
    if certificate_subject is not None:
        if not isinstance(certificate_subject, str):
            raise ConfigError(source, f"{where}.certificateSubject", "must be a string such as CN=broker-b")
        try:
            subject = parse_subject(certificate_subject)
        except ValueError as exc:
            raise ConfigError(source, f"{where}.certificateSubject", str(exc)) from None
    names_doc = item.get("brokerNames")
    names_doc = [] if names_doc is None else names_doc
    if not isinstance(names_doc, list) or not all(isinstance(n, str) and n.strip() for n in names_doc):
        raise ConfigError(source, f"{where}.brokerNames", "must be a list of broker names")
    admin = _boolean(item.get("admin", False), source, f"{where}.admin")
    name = f"ak:{access_key}" if access_key is not None else f"cert:{certificate_subject}"
    account = Account(
        name=name,
        access_key=access_key,
        secret_key=secret_key,
        certificate_subject=certificate_subject,
        broker_names=frozenset(n.strip() for n in names_doc),
        admin=admin,
    )
    return account, subject
