"""The NameServer's outgoing NOTIFY_MIN_BROKER_ID_CHANGE sender (S53): the frame as RocketMQ sends
it, bounded in flight, failures counted and logged at a limited rate, nothing sent when stopped,
safe to call from another thread."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest
from prometheus_client import CollectorRegistry

from namesrv_grpc.core.model import MinBrokerIdChange
from namesrv_grpc.remoting.codec import decode_command, encode_command
from namesrv_grpc.remoting.codes import FLAG_ONEWAY, NOTIFY_MIN_BROKER_ID_CHANGE
from namesrv_grpc.remoting.notifier import BrokerNotifier, notify_min_broker_id_change_command
from tests.metrics_support import free_port
from tests.support import poll_until
from tests.test_acting_master_doors import FakeBroker


def change(*recipients: str, offline: str = "", ha: str = "") -> MinBrokerIdChange:
    return MinBrokerIdChange("c1", "broker-a", 1, "10.0.0.2:10911", offline, ha, recipients)


def counts(registry: CollectorRegistry) -> dict[str, float]:
    return {
        r: registry.get_sample_value("namesrv_broker_notifications_total", {"result": r}) or 0.0
        for r in ("sent", "failed", "dropped")
    }


def test_frame_is_rocketmq_header() -> None:
    frame = encode_command(notify_min_broker_id_change_command(change("a:1", offline="10.0.0.1:10911"), 7))
    command = decode_command(frame[4:])
    assert command.code == NOTIFY_MIN_BROKER_ID_CHANGE == 905
    assert command.flag == FLAG_ONEWAY
    assert command.ext_fields == {
        "minBrokerId": "1",
        "minBrokerAddr": "10.0.0.2:10911",
        "offlineBrokerAddr": "10.0.0.1:10911",
    }
    with_ha = notify_min_broker_id_change_command(change("a:1", ha="10.0.0.1:10912"))
    assert with_ha.ext_fields == {
        "minBrokerId": "1",
        "minBrokerAddr": "10.0.0.2:10911",
        "haBrokerAddr": "10.0.0.1:10912",
    }


def test_sends_counts_and_caps_in_flight() -> None:
    registry = CollectorRegistry()
    fakes = [FakeBroker() for _ in range(3)]

    async def main() -> None:
        notifier = BrokerNotifier(registry, max_in_flight=2)
        notifier.attach(asyncio.get_running_loop())
        notifier(change(*(f.addr for f in fakes)))  # the third is over the cap: dropped at once
        assert notifier.in_flight == 2
        await notifier.drain()
        await notifier.close()

    asyncio.run(main())
    poll_until(lambda: len(fakes[0].commands()) == 1 and len(fakes[1].commands()) == 1, 10)
    assert fakes[2].connections == 0
    assert counts(registry) == {"sent": 2, "failed": 0, "dropped": 1}
    for fake in fakes:
        fake.close()


def test_failures_counted_and_logged_at_a_limited_rate(caplog: pytest.LogCaptureFixture) -> None:
    registry = CollectorRegistry()
    dead = [f"127.0.0.1:{free_port()}" for _ in range(3)]

    async def main() -> None:
        notifier = BrokerNotifier(registry, log_interval_seconds=3600)
        notifier.attach(asyncio.get_running_loop())
        notifier(change(*dead, "not-an-address"))
        await notifier.drain()

    with caplog.at_level(logging.WARNING, logger="namesrv_grpc.remoting.notifier"):
        asyncio.run(main())
    assert counts(registry) == {"sent": 0, "failed": 4, "dropped": 0}
    assert len(caplog.records) == 1  # one line per interval


def test_from_another_thread_and_after_close() -> None:
    registry = CollectorRegistry()
    fake = FakeBroker()

    async def main() -> None:
        notifier = BrokerNotifier(registry)
        notifier(change(fake.addr))  # not attached yet: dropped
        notifier.attach(asyncio.get_running_loop())
        thread = threading.Thread(target=notifier, args=(change(fake.addr),))
        thread.start()
        thread.join()
        for _ in range(500):
            if counts(registry)["sent"]:
                break
            await asyncio.sleep(0.01)
        await notifier.close()
        notifier(change(fake.addr))  # closed: dropped

    asyncio.run(main())
    assert counts(registry) == {"sent": 1, "failed": 0, "dropped": 2}
    poll_until(lambda: len(fake.commands()) == 1, 10)
    fake.close()
