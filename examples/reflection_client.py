"""Call the NameServer from Python without its .proto files: the schema comes from the server's
reflection service (as grpcurl does). Needs only grpcio, grpcio-reflection and protobuf.

    python examples/reflection_client.py [HOST:PORT] [TOPIC]      # default 127.0.0.1:8081 TopicTest

Prints the topic's route as JSON; exit code 1 with the gRPC status when the call fails (e.g.
NOT_FOUND for a topic without a route).
"""

from __future__ import annotations

import sys

import grpc
from google.protobuf import message_factory
from google.protobuf.descriptor_pool import DescriptorPool
from google.protobuf.json_format import MessageToJson
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase


def pickup_topic_route(address: str, topic: str) -> str:
    """The route of ``topic`` as JSON, asked of the NameServer at ``address`` (gRPC port)."""
    with grpc.insecure_channel(address) as channel:
        pool = DescriptorPool(ProtoReflectionDescriptorDatabase(channel))
        service = pool.FindServiceByName("namesrv.v1.NameServerService")  # asks the server
        method = service.methods_by_name["PickupTopicRoute"]
        request_class = message_factory.GetMessageClass(method.input_type)
        response_class = message_factory.GetMessageClass(method.output_type)
        call = channel.unary_unary(
            "/namesrv.v1.NameServerService/PickupTopicRoute",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=response_class.FromString,
        )
        return str(MessageToJson(call(request_class(topic=topic), timeout=5)))


def main(argv: list[str]) -> int:
    address = argv[1] if len(argv) > 1 else "127.0.0.1:8081"
    topic = argv[2] if len(argv) > 2 else "TopicTest"
    try:
        print(pickup_topic_route(address, topic))
    except grpc.RpcError as error:
        print(f"{error.code().name}: {error.details()}", file=sys.stderr)  # type: ignore[attr-defined]
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
