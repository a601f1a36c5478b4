"""Checks of request fields. Each raises :class:`~namesrv_grpc.core.errors.InvalidFieldError` naming the
field as the .proto names it, before anything changes (CONTRACT.md, "Errors")."""

from __future__ import annotations

import re

from namesrv_grpc.core.errors import InvalidFieldError

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

MAX_NAME_LENGTH = 255
"""Longest cluster, broker, topic, namespace or key name accepted (RocketMQ allows 127 for topics;
brokers written by older versions may have longer names in their own files)."""

MAX_QUEUE_NUMS = 65535
"""Largest read/write queue count (CONTRACT.md)."""

MAX_PERM = 15
"""All ``perm`` bits set: PRIORITY|READ|WRITE|INHERIT."""


def is_valid_name(value: str) -> bool:
    """True for a name :func:`require_name` accepts."""
    return 0 < len(value) <= MAX_NAME_LENGTH and value == value.strip() and _CONTROL.search(value) is None


def require_name(field: str, value: str) -> str:
    """Return ``value`` if it is a non-empty name of at most 255 characters without control
    characters or surrounding white space; else raise InvalidFieldError."""
    if not value:
        raise InvalidFieldError(field, "must not be empty")
    if len(value) > MAX_NAME_LENGTH:
        raise InvalidFieldError(field, f"longer than {MAX_NAME_LENGTH} characters")
    if value != value.strip() or _CONTROL.search(value):
        raise InvalidFieldError(field, f"{value!r} has white space at an end or a control character")
    return value


def parse_host_port(value: str) -> tuple[str, int]:
    """Split ``host:port`` (IPv6 hosts in brackets, ``[::1]:9876``) into host and port 1..65535.

    Raises ValueError with a sentence saying what is wrong.
    """
    if not value:
        raise ValueError("must be host:port, got an empty string")
    host, sep, port_text = value.rpartition(":")
    if not sep or not host:
        raise ValueError(f"{value!r} is not host:port")
    if host.startswith("[") != host.endswith("]") or (":" in host and not host.startswith("[")):
        raise ValueError(f"{value!r} is not host:port (write an IPv6 host in brackets)")
    if any(c.isspace() for c in value):
        raise ValueError(f"{value!r} contains white space")
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"port {port_text!r} of {value!r} is not a number from 1 to 65535")
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
