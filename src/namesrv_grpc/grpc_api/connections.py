"""Closing one gRPC connection of this process, which grpcio has no API for.

grpcio's Python server (1.85) can end a call only from inside its handler, and only in order: a
status queued behind an answer the client never reads (its HTTP/2 window is 0) is never sent, and
cancelling the handler's task neither resets the stream nor frees the answer gRPC's core holds
(measured: 200 blocked streams of 2 MB kept 800 MiB after their tasks were cancelled). Closing the
connection does both: gRPC's core ends every call of the connection and frees its buffers, and the
client sees UNAVAILABLE and reconnects (every gRPC client does).

:func:`close_connection` finds the socket whose remote address is the call's peer among this
process's own descriptors (``psutil``, which reads ``/proc/self/fd`` and ``/proc/net/tcp*``), takes
a duplicate of the descriptor, checks that the duplicate's peer is still that address (the
descriptor may have been closed and reused meanwhile) and shuts the connection down
(``shutdown(SHUT_RDWR)``: the peer gets a FIN, gRPC's poller sees the hang-up and closes the
transport as if the peer had gone). gRPC keeps owning its descriptor and closes it itself; only the
duplicate is closed here. Linux and macOS; elsewhere it returns False. It costs a scan of the
process's sockets, so it is for the rare peer that broke a bound, never per call.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterable

import psutil

log = logging.getLogger(__name__)


def peer_endpoint(peer: str) -> tuple[str, int] | None:
    """(IP, port) of a gRPC peer string (``ipv4:1.2.3.4:5``, ``ipv6:[::1]:5``, ``ipv6:%5B::1%5D:5``);
    None for any other kind (``unix:``)."""
    kind, _, rest = peer.partition(":")
    if kind not in ("ipv4", "ipv6"):
        return None
    host, _, port = rest.replace("%5B", "[").replace("%5D", "]").rpartition(":")
    try:
        return host.strip("[]"), int(port)
    except ValueError:
        return None


def close_connection(peer: str) -> bool:
    """Shut down this process's TCP connection to ``peer`` (a gRPC peer string, as
    ``context.peer()`` gives it). Returns whether a connection was found and shut down; never raises
    (a peer already gone is not an error)."""
    return peer in close_connections([peer])


def close_connections(peers: Iterable[str]) -> set[str]:
    """:func:`close_connection` of each of ``peers`` with one scan of the process's sockets (many
    watches of one client dropped at once cost one scan, not one each). Returns the peers whose
    connection was shut down."""
    wanted: dict[tuple[str, int], str] = {}
    for name in peers:
        parsed = peer_endpoint(name)
        if parsed is not None:
            wanted[_normalized(parsed)] = name
    if not wanted:
        return set()
    try:
        connections = psutil.Process().net_connections(kind="tcp")
    except (psutil.Error, OSError, NotImplementedError) as exc:
        log.warning("cannot list this process's connections to close %d of them: %s", len(wanted), exc)
        return set()
    closed: set[str] = set()
    for connection in connections:
        if connection.fd < 0 or not isinstance(connection.raddr, tuple) or len(connection.raddr) < 2:
            continue
        endpoint = _normalized((str(connection.raddr[0]), int(connection.raddr[1])))
        found = wanted.get(endpoint)
        if found is None or found in closed:
            continue
        if _shut_down(connection.fd, endpoint):
            closed.add(found)
    return closed


def _normalized(endpoint: tuple[str, int]) -> tuple[str, int]:
    host, port = endpoint
    if host.startswith("::ffff:") and "." in host:  # IPv4 peers of a dual-stack socket
        host = host[len("::ffff:") :]
    return host, port


def _shut_down(fd: int, endpoint: tuple[str, int]) -> bool:
    """Shut down the connection of descriptor ``fd`` (through a duplicate) if its peer is still
    ``endpoint``: the descriptor may have been closed and reused since the scan."""
    try:
        duplicate = os.dup(fd)
    except OSError:
        return False
    try:
        sock = socket.socket(fileno=duplicate)
    except OSError:
        os.close(duplicate)
        return False
    with sock:
        try:
            peer = sock.getpeername()
            if not isinstance(peer, tuple) or _normalized((str(peer[0]), int(peer[1]))) != endpoint:
                return False
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            return False
    return True
