"""The processes of one NameServer (``namesrv``), and what crosses between them.

- :mod:`.supervisor` -- ``namesrv`` itself: starts the others, restarts serving processes, serves /metrics.
- :mod:`.route_table_process` -- the one writer: route table, KV config, expiry scan, snapshots.
- :mod:`.route_table_service` -- applies every write, one command (``core/commands.py``) at a time.
- :mod:`.serving_process` -- both front doors (remoting, gRPC) over a replica of the route table.
- :mod:`.route_table_client` -- a serving process's side of the writes.
- :mod:`.channel` -- the messages between them; :mod:`.child` -- how a child starts.

The change stream itself (what a replica holds and applies) is in :mod:`namesrv_grpc.core.replication`.
"""
