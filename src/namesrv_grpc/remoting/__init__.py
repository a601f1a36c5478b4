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
- :mod:`.client` -- a small asyncio remoting client (tests, the bench).

The server side (connections, dispatch of the 23 request codes to :mod:`namesrv_grpc.core.processor`)
lives in :mod:`.server` and :mod:`.handlers`.
"""
