"""A serving process's side of the writes (:class:`~namesrv_grpc.core.writes.RouteTableWrites`): each
method sends the write to the route-table process and returns its answer, which comes once every
serving process (this one too) applied what the write changed. Raises what the route-table process's
:class:`~namesrv_grpc.core.processor.NameServer` raised, or
:class:`~namesrv_grpc.core.errors.RouteTableUnavailableError` when the route-table process is gone."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from namesrv_grpc.core.errors import RouteTableUnavailableError
from namesrv_grpc.core.model import BrokerLiveInfo, DataVersion, QueueData, RemovedBroker
from namesrv_grpc.core.writes import Registration, RegistrationReply
from namesrv_grpc.processes.channel import Channel, ChannelClosedError

if TYPE_CHECKING:
    from namesrv_grpc.snapshot import SnapshotInfo


ELIDED_BODY_MIN_BYTES = 64 * 1024
"""Registration bodies at least this long are first sent by fingerprint alone."""


class RouteTableClient:
    """The writes of one serving process, over its link to the route-table process."""

    def __init__(self, channel: Channel) -> None:
        self._channel = channel

    async def _call(self, method: str, *args: Any) -> Any:
        try:
            return await self._channel.call(method, *args)
        except ChannelClosedError:
            raise RouteTableUnavailableError(
                "the NameServer's route-table process is gone; the request was not applied, ask another NameServer"
            ) from None

    async def register_broker(self, registration: Registration) -> RegistrationReply:
        """Send the registration. A body of :data:`ELIDED_BODY_MIN_BYTES` or more is left out at first:
        a broker's periodic re-registration carries the same body as last time (up to megabytes of
        topics), which the route-table process would not decode; it asks for the body only when the
        table holds another one (``body_needed``: new topics, or a broker not registered yet), and
        then it is sent. Under load, 300 KB bodies had queued up in the link to the route-table
        process (docs/performance.md)."""
        if len(registration.body) >= ELIDED_BODY_MIN_BYTES:
            elided = dataclasses.replace(registration, body=b"", body_elided=True)
            reply: RegistrationReply = await self._call("register_broker", elided)
            if not reply.body_needed:
                return reply
        reply = await self._call("register_broker", registration)
        return reply

    async def unregister_broker(
        self, cluster_name: str, broker_name: str, broker_id: int, broker_addr: str, instance_id: str = ""
    ) -> RemovedBroker | None:
        removed: RemovedBroker | None = await self._call(
            "unregister_broker", cluster_name, broker_name, broker_id, broker_addr, instance_id
        )
        return removed

    async def broker_heartbeat(self, cluster_name: str, broker_name: str, broker_id: int, broker_addr: str) -> None:
        await self._call("broker_heartbeat", cluster_name, broker_name, broker_id, broker_addr)

    async def query_data_version(
        self, cluster_name: str, broker_name: str, broker_id: int, broker_addr: str, data_version: DataVersion
    ) -> tuple[bool, DataVersion | None]:
        answer: tuple[bool, DataVersion | None] = await self._call(
            "query_data_version", cluster_name, broker_name, broker_id, broker_addr, data_version
        )
        return answer

    async def put_kv_config(self, namespace: str, key: str, value: str) -> None:
        await self._call("put_kv_config", namespace, key, value)

    async def delete_kv_config(self, namespace: str, key: str) -> None:
        await self._call("delete_kv_config", namespace, key)

    async def wipe_write_perm_of_broker(self, broker_name: str) -> int:
        count: int = await self._call("wipe_write_perm_of_broker", broker_name)
        return count

    async def add_write_perm_of_broker(self, broker_name: str) -> int:
        count: int = await self._call("add_write_perm_of_broker", broker_name)
        return count

    async def delete_topic(self, topic: str, cluster_name: str) -> None:
        await self._call("delete_topic", topic, cluster_name)

    async def register_topic(self, topic: str, queue_datas: Sequence[QueueData]) -> None:
        await self._call("register_topic", topic, list(queue_datas))

    async def update_namesrv_config(self, changes: Mapping[str, str]) -> None:
        await self._call("update_namesrv_config", dict(changes))

    async def bind_session(
        self, cluster_name: str, broker_name: str, broker_id: int, broker_addr: str, instance_id: str
    ) -> tuple[int, int] | None:
        bound: tuple[int, int] | None = await self._call(
            "bind_session", cluster_name, broker_name, broker_id, broker_addr, instance_id
        )
        return bound

    async def session_heartbeat(self, broker_addr: str, session_id: int) -> bool:
        return bool(await self._call("session_heartbeat", broker_addr, session_id))

    async def session_ended(self, broker_addr: str, session_id: int, cause: str) -> bool:
        return bool(await self._call("session_ended", broker_addr, session_id, cause))

    async def session_handed_over(self, broker_addr: str, session_id: int) -> bool:
        return bool(await self._call("session_handed_over", broker_addr, session_id))

    async def sessions_ended(self, sessions: Sequence[tuple[str, int]], cause: str) -> int:
        return int(await self._call("sessions_ended", list(sessions), cause))

    async def master_of(self, broker_name: str) -> tuple[str, str]:
        master: tuple[str, str] = await self._call("master_of", broker_name)
        return master

    async def live_table(self) -> tuple[int, list[tuple[str, BrokerLiveInfo]]]:
        table: tuple[int, list[tuple[str, BrokerLiveInfo]]] = await self._call("live_table")
        return table

    async def export_snapshot(self) -> SnapshotInfo:
        info: SnapshotInfo = await self._call("export_snapshot")
        return info
