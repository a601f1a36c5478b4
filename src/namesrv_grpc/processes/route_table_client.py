"""A serving process's side of the writes (:class:`~namesrv_grpc.core.commands.RouteTableWrites`): a
command is sent to the route-table process and its answer returned, which comes once every serving
process (this one too) applied what the command changed. Raises what the route-table process's
:class:`~namesrv_grpc.core.processor.NameServer` raised, or
:class:`~namesrv_grpc.core.errors.RouteTableUnavailableError` when the route-table process is gone."""

from __future__ import annotations

from typing import TypeVar, cast

from namesrv_grpc.core.commands import Command
from namesrv_grpc.core.errors import RouteTableUnavailableError
from namesrv_grpc.processes.channel import Channel, ChannelClosedError

ResultT = TypeVar("ResultT")


class RouteTableClient:
    """The writes of one serving process, over its link to the route-table process."""

    def __init__(self, channel: Channel) -> None:
        self._channel = channel

    async def send(self, command: Command[ResultT]) -> ResultT:
        """Apply ``command`` in the route-table process; its result."""
        try:
            return cast(ResultT, await self._channel.command(command))
        except ChannelClosedError:
            raise RouteTableUnavailableError(
                "the NameServer's route-table process is gone; the request was not applied, ask another NameServer"
            ) from None
