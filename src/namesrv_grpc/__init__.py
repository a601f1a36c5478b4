"""namesrv-grpc: Apache RocketMQ's NameServer (route registry) as a gRPC service.

Where a request goes: ``servicers.py`` (protobuf in/out) -> ``processor.py`` (validation, request
rules) -> ``route_table.py`` (the five route tables) and ``kvconfig.py`` (persisted KV config).
``server.py`` wires them; ``cli.py`` is the ``namesrv`` command.
"""
