"""``namesrv-admin watch TOPIC...``: print every route change of the topics as it arrives, one JSON
line each, until interrupted (Ctrl-C / SIGTERM: exit 0).

Each line: ``{"namesrv": "h:p", "revision": N, "topic": "...", "removed": false, "resync": true,
"route": {...}}`` (``route`` in the .proto's field names; absent when ``removed``). ``resync`` marks
the lines of a stream's first message: the current route of every watched topic, printed again
after reconnecting to another NameServer of ``-n``. Exit code 1 when the NameServer refuses the
watch (bad topic names, too many topics).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from typing import Any

from google.protobuf.json_format import MessageToDict

from namesrv_grpc.client.route_cache import CHANNEL_OPTIONS, RouteCache, RouteUpdate, WatchRefusedError
from namesrv_grpc.client.security import ClientSecurity


def add_watch_parser(sub: Any) -> None:
    """The ``watch`` sub-command."""
    watch = sub.add_parser("watch", help="print route changes of topics as JSON lines (WatchTopicRoutes)")
    watch.add_argument("topics", nargs="+", metavar="TOPIC")


def update_json(update: RouteUpdate) -> str:
    """One change as a JSON line."""
    line: dict[str, Any] = {
        "namesrv": update.namesrv,
        "revision": update.revision,
        "topic": update.topic,
        "removed": update.route is None,
        "resync": update.resync,
    }
    if update.route is not None:
        line["route"] = MessageToDict(update.route, preserving_proto_field_name=True)
    return json.dumps(line, ensure_ascii=False, sort_keys=True)


def run_watch(args: argparse.Namespace) -> int:
    """Watch ``args.topics`` on the NameServers of ``args.namesrv`` ("h:p;h:p") until a signal."""
    done = threading.Event()
    lock = threading.Lock()

    def emit(update: RouteUpdate) -> None:
        with lock:
            print(update_json(update), flush=True)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    client_security: ClientSecurity = getattr(args, "client_security", None) or ClientSecurity()
    cache = RouteCache(
        args.namesrv,
        args.topics,
        on_update=emit,
        channel_factory=lambda address: client_security.channel(address, CHANNEL_OPTIONS),
    )
    with cache:
        while not done.wait(0.2):
            try:
                cache.wait_synced(timeout=0)
            except WatchRefusedError as error:
                print(f"namesrv-admin: INVALID_ARGUMENT: {error}", file=sys.stderr)
                return 1
    return 0
