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


def _same_endpoint(address: object, endpoint: tuple[str, int]) -> bool:
    if not isinstance(address, tuple) or len(address) < 2:
        return False
    host, port = str(address[0]), int(address[1])
    wanted_host = endpoint[0]
    if host.startswith("::ffff:") and "." in host:  # IPv4 peers of a dual-stack socket
        host = host[len("::ffff:") :]
    if wanted_host.startswith("::ffff:") and "." in wanted_host:
        wanted_host = wanted_host[len("::ffff:") :]
    return port == endpoint[1] and host == wanted_host


def close_connection(peer: str) -> bool:
    """Shut down this process's TCP connection to ``peer`` (a gRPC peer string, as
    ``context.peer()`` gives it). Returns whether a connection was found and shut down; never raises
    (a peer already gone is not an error)."""
    endpoint = peer_endpoint(peer)
    if endpoint is None:
        return False
    try:
        connections = psutil.Process().net_connections(kind="tcp")
    except (psutil.Error, OSError, NotImplementedError) as exc:
        log.warning("cannot list this process's connections to close %s: %s", peer, exc)
        return False
    for connection in connections:
        if connection.fd < 0 or not _same_endpoint(connection.raddr, endpoint):
            continue
        try:
            duplicate = os.dup(connection.fd)
        except OSError:
            continue
        try:
            sock = socket.socket(fileno=duplicate)
        except OSError:
            os.close(duplicate)
            continue
        with sock:
            try:
                if not _same_endpoint(sock.getpeername(), endpoint):
                    continue  # closed and reused since the scan
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                continue
        return True
    return False
