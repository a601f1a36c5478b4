"""namesrv-grpc: Apache RocketMQ's NameServer (route registry), with two front doors over one core.

Where a request goes: ``grpc_api/servicers.py`` (gRPC, protobuf in/out) or ``remoting/handlers.py``
(RocketMQ's remoting protocol, one handler per request code, same names), in a serving process.
Reads -> ``core/processor.py`` (validation, request rules) on the serving process's replica of
``core/route_table.py`` (the five route tables) and ``core/kvconfig.py``; writes -> one command
each (``core/commands.py``) -> the route-table process, which applies them with the same
``core/processor.py`` methods and sends the change to every serving process
(``core/replication.py``). ``processes/`` holds the supervisor, the route-table process and the
serving processes; ``security/`` decides who may do what; ``cli.py`` is the ``namesrv`` command.
"""
