"""A serving process's side of the writes (:class:`~namesrv_grpc.core.commands.RouteTableWrites`): a
command is sent to the route-table process and its answer returned, which comes once every serving
process (this one too) applied what the command changed. Raises what the route-table process's
:class:`~namesrv_grpc.core.processor.NameServer` raised, or
:class:`~namesrv_grpc.core.errors.RouteTableUnavailableError` when the route-table process is gone."""

from __future__ import annotations

import dataclasses
from typing import TypeVar, cast

from namesrv_grpc.core.commands import Command, RegisterBroker, RegistrationReply
from namesrv_grpc.core.errors import RouteTableUnavailableError
from namesrv_grpc.processes.channel import Channel, ChannelClosedError

ResultT = TypeVar("ResultT")

ELIDED_BODY_MIN_BYTES = 64 * 1024
"""Registration bodies at least this long are first sent by fingerprint alone."""


class RouteTableClient:
    """The writes of one serving process, over its link to the route-table process."""

    def __init__(self, channel: Channel) -> None:
        self._channel = channel

    async def send(self, command: Command[ResultT]) -> ResultT:
        """Apply ``command`` in the route-table process; its result. A :class:`RegisterBroker` whose
        body is :data:`ELIDED_BODY_MIN_BYTES` or more is sent without it at first: a broker's
        periodic re-registration carries the same body as last time (up to megabytes of topics),
        which the route-table process would not decode; it asks for the body only when the table
        holds another one (``body_needed``: new topics, or a broker not registered yet), and then it
        is sent. Under load, 300 KB bodies had queued up in the link to the route-table process
        (docs/performance.md)."""
        if isinstance(command, RegisterBroker) and len(command.body) >= ELIDED_BODY_MIN_BYTES:
            elided = dataclasses.replace(command, body=b"", body_elided=True)
            reply = cast(RegistrationReply, await self._send(elided))
            if not reply.body_needed:
                return cast(ResultT, reply)
        return cast(ResultT, await self._send(command))

    async def _send(self, command: Command[object]) -> object:
        try:
            return await self._channel.command(command)
        except ChannelClosedError:
            raise RouteTableUnavailableError(
                "the NameServer's route-table process is gone; the request was not applied, ask another NameServer"
            ) from None
