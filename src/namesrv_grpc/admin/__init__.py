"""The operators' commands that talk to a running NameServer or read what it wrote: ``namesrv-admin``
(:mod:`.cli`: routes, clusters, KV, watch, compare NameServers), ``namesrv-snapshot``
(:mod:`.snapshot_cli`) and ``grpc-health-check`` (:mod:`.health_check`). None of them is imported
by the server."""
