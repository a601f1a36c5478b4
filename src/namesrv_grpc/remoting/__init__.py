"""RocketMQ's own TCP protocol ("remoting"): the NameServer's second front door, on port 9876.

Every RocketMQ broker, client and ``mqadmin`` speaks it. The modules, from the wire inwards:

- :mod:`.codes` -- request, response and language codes, serialize types, flag bits
  (RocketMQ ``RequestCode``, ``ResponseCode``, ``LanguageCode``, ``SerializeType``).
- :mod:`.codec` -- the frame and both header serializations (JSON and ROCKETMQ binary):
  :class:`~.codec.RemotingCommand`, :func:`~.codec.encode_command`, the incremental
  :class:`~.codec.FrameDecoder` (RocketMQ ``RemotingCommand``, ``RocketMQSerializable``, ``NettyDecoder``).
- :mod:`.fastjson` -- JSON bodies exactly as fastjson writes them (unquoted integer map keys).
- :mod:`.bodies` -- RocketMQ body formats (``RegisterBrokerBody`` plain and compressed,
  ``TopicRouteData``, ``ClusterInfo``, ``KVTable``, ``TopicList``) to and from the domain types of
  :mod:`namesrv_grpc.core.model`.

A small asyncio remoting client (the admin tools, tests, the bench) lives with the other client
code, in :mod:`namesrv_grpc.client.remoting`.

The server side, imported in one direction (no circle):

- :mod:`.connection` -- one connection (``asyncio.Protocol``) and its bounds: frames per turn,
  answers waiting (write-buffer water marks), requests in flight, frame deadline, idle timeout.
- :mod:`.budget` -- the server-wide bounds: ``maxConnections``, bytes held in unfinished frames.
- :mod:`.handlers` (with :mod:`.access`, :mod:`.errors`) -- dispatch of the request codes to
  :mod:`namesrv_grpc.core.reader` (reads) and :mod:`namesrv_grpc.core.commands` (writes).
- :mod:`.tls_sniff` -- TLS and plaintext on one port.
- :mod:`.server` -- the listener that ties them together.
"""
