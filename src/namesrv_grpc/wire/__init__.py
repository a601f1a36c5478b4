"""The bodies in their wire formats, decoded and encoded: RocketMQ's JSON as fastjson writes it
(:mod:`.fastjson`, :mod:`.bodies`: ``RegisterBrokerBody`` plain and compressed, ``TopicRouteData``,
``ClusterInfo``, ``KVTable``, ``TopicList``) and the registration body of each door
(:mod:`.remoting_register_body`, :mod:`.grpc_register_body`: the protobuf one of the gRPC contract).

Used by both doors and by the route-table process, which decodes the registration bodies the doors
leave to it (compressed or larger than 2 MiB: docs/performance.md, "Processes"). This room imports
only the core: the route-table process imports no module of a door.
"""
