from namesrv.v1 import name_server_service_pb2 as ns_pb2
from tests.support import Stubs, register_request, topic


def test_register_then_route(stubs: Stubs) -> None:
    stubs.ns.RegisterBroker(register_request(topics=[topic("TopicTest")]))
    route = stubs.ns.PickupTopicRoute(ns_pb2.PickupTopicRouteRequest(topic="TopicTest")).route
    assert [q.broker_name for q in route.queue_datas] == ["broker-a"]
    assert dict(route.broker_datas[0].broker_addrs) == {0: "127.0.0.1:10911"}
