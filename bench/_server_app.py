"""The apps ``server_streams.py`` serves: mainspring's, and the floor.

Both stream the same frames per conversation — ``WORDS`` text pieces, a
pause of ``PAUSE`` seconds half way (so every stream is open at once), then
the rest — over the same uvicorn and sse-starlette. The floor is a bare
Starlette route doing only that; mainspring's is ``mainspring serve`` with a
scripted agent, durable stores, auth, signed ids and all.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Sequence

import anyio
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from mainspring.agent import Agent
from mainspring.messages import Message
from mainspring.models.base import ToolSpec
from mainspring.testing import ScriptedModel, ScriptedResponse

WORDS = 40
PAUSE = float(os.environ.get("BENCH_PAUSE", "2.0"))


async def _script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
    await anyio.sleep(PAUSE)
    return ScriptedResponse(text=" ".join(f"w{i:02d}" for i in range(WORDS)))


def agent() -> Agent:
    """The agent: one model call streaming ``WORDS`` pieces after ``PAUSE`` seconds."""
    return Agent(name="bench", model=ScriptedModel(_script, chunk_size=4))


async def _create(request: Request) -> JSONResponse:
    return JSONResponse({"session_id": "floor"}, status_code=201)


async def _messages(request: Request) -> EventSourceResponse:
    await request.json()

    async def frames() -> AsyncIterator[ServerSentEvent]:
        yield ServerSentEvent(data=json.dumps({"type": "stream_started"}), event="stream_started")
        await anyio.sleep(PAUSE)
        text = " ".join(f"w{i:02d}" for i in range(WORDS))
        for i in range(0, len(text), 4):
            data = json.dumps({"text": text[i : i + 4], "type": "text_delta"})
            yield ServerSentEvent(data=data, event="text_delta", id=str(i))
        yield ServerSentEvent(data=json.dumps({"type": "turn_complete"}), event="turn_complete")

    return EventSourceResponse(frames(), ping=15, sep="\n")


floor = Starlette(
    routes=[
        Route("/v1/sessions", _create, methods=["POST"]),
        Route("/v1/sessions/{sid}/messages", _messages, methods=["POST"]),
    ]
)
