"""namesrv-grpc: Apache RocketMQ's NameServer (route registry), with two front doors over one core.

Where a request goes: ``grpc_api/servicers.py`` (gRPC, protobuf in/out) or ``remoting/handlers.py``
(RocketMQ's remoting protocol, one handler per request code, same names) -> ``core/processor.py``
(validation, request rules) -> ``core/route_table.py`` (the five route tables) and
``core/kvconfig.py`` (persisted KV config). ``security/`` decides who may do what; ``server.py``
wires everything; ``cli.py`` is the ``namesrv`` command.
"""
