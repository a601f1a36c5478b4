"""Checks of request fields. Each raises :class:`~namesrv_grpc.core.errors.InvalidFieldError` naming the
field as the .proto names it, before anything changes (CONTRACT.md, "Errors").

The limits (docs/field-limits.md):

=========================================  ===========================================================
field                                      accepted
=========================================  ===========================================================
topic (lookups, bodies, admin calls)       1..127 characters of ``%|a-zA-Z0-9_-`` (RocketMQ
                                           ``TopicValidator``)
cluster, broker name, KV namespace and key 1..255 characters, no control character, no white space at
                                           either end
``zone_name``, ``instance_id``             as names, but may be empty
addresses (``broker_addr``, ...)           ``host:port``, host 1..255 characters without white space
                                           or control characters (IPv6 in brackets), port 1..65535
``heartbeat_timeout_millis``               0 (= 120,000) or 100 .. 3,600,000 ms
=========================================  ===========================================================

Error messages quote at most :data:`QUOTE_PREFIX` characters of a bad value (:func:`quote`), so a
megabyte of garbage does not come back in the reply or reach the logs.
"""

from __future__ import annotations

import re

from namesrv_grpc.core.errors import InvalidFieldError

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SPACE_OR_CONTROL = re.compile(r"[\s\x00-\x1f\x7f-\x9f]")

MAX_NAME_LENGTH = 255
"""Longest cluster, broker, namespace, key, zone or instance id accepted (RocketMQ has no rule for
these; 255 is as long as a DNS name, which broker names often are)."""

MAX_TOPIC_LENGTH = 127
"""Longest topic name (RocketMQ ``TopicValidator.TOPIC_MAX_LENGTH``)."""

TOPIC_PATTERN = re.compile(r"[%|a-zA-Z0-9_-]{1,127}")
"""A whole valid topic name: RocketMQ ``TopicValidator``'s ``^[%|a-zA-Z0-9_-]+$``, at most 127 long."""

MAX_HOST_LENGTH = 255
"""Longest host part of ``host:port`` (a DNS name is at most 253 characters)."""

MAX_QUEUE_NUMS = 65535
"""Largest read/write queue count (CONTRACT.md)."""

MAX_PERM = 15
"""All ``perm`` bits set: PRIORITY|READ|WRITE|INHERIT."""

MIN_HEARTBEAT_TIMEOUT_MILLIS = 100
"""Shortest broker heartbeat timeout, ms (0 means RocketMQ's default, 120,000)."""

MAX_HEARTBEAT_TIMEOUT_MILLIS = 3_600_000
"""Longest broker heartbeat timeout, ms (one hour): a broker that stopped would otherwise keep its
routes for as long as it asked."""

QUOTE_PREFIX = 64
"""Characters of a bad value quoted in an error message."""


def quote(value: str, limit: int = QUOTE_PREFIX) -> str:
    """``repr(value)``, shortened to its first ``limit`` characters plus ``…`` and the length when
    longer. Control characters come out escaped (``'\\n'``), so the result is safe for logs."""
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}… ({len(value)} characters)"


def safe_for_log(value: str, limit: int = QUOTE_PREFIX) -> str:
    """``value`` with control characters escaped (``\\n``, ``\\x1b``) and shortened to ``limit``
    characters like :func:`quote`, for log lines that include what a client sent."""
    text = value if len(value) <= limit else f"{value[:limit]}… ({len(value)} characters)"
    return text if _CONTROL.search(text) is None else text.encode("unicode_escape").decode("ascii")


def is_valid_name(value: str) -> bool:
    """True for a name :func:`require_name` accepts."""
    return 0 < len(value) <= MAX_NAME_LENGTH and value == value.strip() and _CONTROL.search(value) is None


def require_name(field: str, value: str) -> str:
    """Return ``value`` if it is a non-empty name of at most 255 characters without control
    characters or surrounding white space; else raise InvalidFieldError."""
    if not value:
        raise InvalidFieldError(field, "must not be empty")
    if len(value) > MAX_NAME_LENGTH:
        raise InvalidFieldError(field, f"{quote(value)} is longer than {MAX_NAME_LENGTH} characters")
    if value != value.strip() or _CONTROL.search(value):
        raise InvalidFieldError(field, f"{quote(value)} has white space at an end or a control character")
    return value


def require_optional_name(field: str, value: str) -> str:
    """Return ``value`` if it is empty or a name :func:`require_name` accepts (``zone_name``,
    ``instance_id``)."""
    return value if not value else require_name(field, value)


def is_valid_topic(value: str) -> bool:
    """True for a topic name RocketMQ's ``TopicValidator`` accepts (1..127 of ``%|a-zA-Z0-9_-``)."""
    return TOPIC_PATTERN.fullmatch(value) is not None


def require_topic(field: str, value: str) -> str:
    """Return ``value`` if it is a valid topic name (RocketMQ ``TopicValidator``: not blank, only
    ``%|a-zA-Z0-9_-``, at most 127 characters); else raise InvalidFieldError."""
    if TOPIC_PATTERN.fullmatch(value) is not None:
        return value
    if not value:
        raise InvalidFieldError(field, "must not be empty")
    if len(value) > MAX_TOPIC_LENGTH:
        raise InvalidFieldError(field, f"{quote(value)} is longer than {MAX_TOPIC_LENGTH} characters")
    raise InvalidFieldError(field, f"{quote(value)} has characters other than ^[%|a-zA-Z0-9_-]+$ (RocketMQ topic rule)")


def parse_host_port(value: str) -> tuple[str, int]:
    """Split ``host:port`` (IPv6 hosts in brackets, ``[::1]:9876``) into host and port 1..65535.
    The host is at most 255 characters, without white space or control characters.

    Raises ValueError with a sentence saying what is wrong (quoting at most 64 characters).
    """
    if not value:
        raise ValueError("must be host:port, got an empty string")
    if len(value) > MAX_HOST_LENGTH + 8:  # "[" host "]" ":" 5 digits
        raise ValueError(f"{quote(value)} is longer than a host of {MAX_HOST_LENGTH} characters and a port")
    if _SPACE_OR_CONTROL.search(value):
        raise ValueError(f"{quote(value)} contains white space or a control character")
    host, sep, port_text = value.rpartition(":")
    if not sep or not host:
        raise ValueError(f"{quote(value)} is not host:port")
    if host.startswith("[") != host.endswith("]") or (":" in host and not host.startswith("[")):
        raise ValueError(f"{quote(value)} is not host:port (write an IPv6 host in brackets)")
    bare = host[1:-1] if host.startswith("[") else host
    if not bare or len(bare) > MAX_HOST_LENGTH:
        raise ValueError(f"host of {quote(value)} must be 1 to {MAX_HOST_LENGTH} characters")
    if not port_text.isascii() or not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"port {quote(port_text)} of {quote(value)} is not a number from 1 to 65535")
    return host, int(port_text)


def require_addr(field: str, value: str, *, allow_empty: bool = False) -> str:
    """Return ``value`` if it is ``host:port`` with port 1..65535 (or empty when ``allow_empty``)."""
    if allow_empty and not value:
        return value
    try:
        parse_host_port(value)
    except ValueError as exc:
        raise InvalidFieldError(field, str(exc)) from None
    return value


def require_broker_id(field: str, value: int) -> int:
    """Return ``value`` if it is a broker id (>= 0)."""
    if value < 0:
        raise InvalidFieldError(field, f"must be >= 0 (0 = master, > 0 = slave), got {value}")
    return value


def require_queue_nums(field: str, value: int) -> int:
    """Return ``value`` if it is a queue count 0..65535."""
    if not 0 <= value <= MAX_QUEUE_NUMS:
        raise InvalidFieldError(field, f"must be from 0 to {MAX_QUEUE_NUMS}, got {value}")
    return value


def require_perm(field: str, value: int) -> int:
    """Return ``value`` if it is a combination of the perm bits (0..15)."""
    if not 0 <= value <= MAX_PERM:
        raise InvalidFieldError(field, f"must be a combination of PRIORITY=8 READ=4 WRITE=2 INHERIT=1, got {value}")
    return value


def require_non_negative(field: str, value: int) -> int:
    """Return ``value`` if it is >= 0."""
    if value < 0:
        raise InvalidFieldError(field, f"must be >= 0, got {value}")
    return value


def require_heartbeat_timeout(field: str, value: int) -> int:
    """Return ``value`` if it is 0 (RocketMQ's default of 120,000 ms) or from
    :data:`MIN_HEARTBEAT_TIMEOUT_MILLIS` to :data:`MAX_HEARTBEAT_TIMEOUT_MILLIS` ms."""
    if value != 0 and not MIN_HEARTBEAT_TIMEOUT_MILLIS <= value <= MAX_HEARTBEAT_TIMEOUT_MILLIS:
        raise InvalidFieldError(
            field,
            f"must be 0 (default 120000) or from {MIN_HEARTBEAT_TIMEOUT_MILLIS} to "
            f"{MAX_HEARTBEAT_TIMEOUT_MILLIS} ms, got {value}",
        )
    return value


def require_max_utf8_bytes(field: str, value: str, limit: int, setting: str) -> str:
    """Return ``value`` if its UTF-8 encoding is at most ``limit`` bytes; the error names the
    configuration key ``setting`` that raises the limit."""
    if len(value) > limit or len(value.encode("utf-8", "surrogatepass")) > limit:
        size = len(value.encode("utf-8", "surrogatepass"))
        raise InvalidFieldError(field, f"is {size} bytes, more than {limit} ({setting})")
    return value


def require_no_lone_surrogate(field: str, value: str) -> str:
    """Return ``value`` if UTF-8 can hold it: a lone UTF-16 surrogate (only a ``\\uD800``-style
    escape in a remoting JSON header can make one) cannot be written to a UTF-8 file, so a KV write
    carrying one is refused before anything changes (Java would write ``?`` in its place and keep
    another value in memory than on disk). Raises InvalidFieldError."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        surrogate = f"U+{ord(value[exc.start]):04X}"
        raise InvalidFieldError(
            field, f"holds a lone UTF-16 surrogate ({surrogate}) at {exc.start}, which UTF-8 cannot store"
        ) from None
    return value
