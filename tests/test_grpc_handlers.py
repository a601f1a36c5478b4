"""The gRPC handler wrappers (``grpc_api/handlers.py``) without a server: what they promise about
the wrapped behaviours' lifetimes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from namesrv_grpc.grpc_api.grpc_metrics import MethodMetrics
from namesrv_grpc.grpc_api.handlers import wrap_stream_response


class _Context:
    def code(self) -> None:
        return None


def test_closing_a_stream_paused_at_a_yield_closes_the_wrapped_generator_at_once() -> None:
    """A client that cancels right after a response: gRPC closes the wrapper while both generators
    are paused at a yield. The wrapped one's ``finally`` (a session's S15 removal) must run before
    the close returns, not when the garbage collector gets to it."""
    cleaned: list[str] = []

    async def behavior(request: Any, context: Any) -> AsyncIterator[str]:
        try:
            yield "accepted"
            await asyncio.sleep(3600)
            yield "never"
        finally:
            cleaned.append("session ended")

    async def scenario() -> None:
        wrapped = wrap_stream_response(behavior, MethodMetrics(("server_stream", "test.Service", "Method"), [0.1]))
        responses = wrapped(None, _Context())
        assert await responses.__anext__() == "accepted"
        await responses.aclose()
        assert cleaned == ["session ended"]

    asyncio.run(scenario())
