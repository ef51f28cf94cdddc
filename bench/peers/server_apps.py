"""The peers' servers ``bench/server_load.py --peers`` serves beside mainspring's (`.[peers]`).

Each streams what ``bench/_server_app.py``'s agent streams: ``WORDS`` text pieces
after ``PAUSE`` seconds, one model call, no tools.

* ``pydantic_ai_vercel``: a Starlette route handing the request to Pydantic
  AI's ``VercelAIAdapter.dispatch_request`` (the AI SDK UI message stream
  ``useChat`` reads), its agent on a streaming ``FunctionModel``.
* ``agno_os``: Agno's ``AgentOS`` app (``POST /agents/bench/runs`` with
  ``stream=true``: SSE), its agent on a streaming ``Model`` subclass; no
  database, telemetry off.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio

os.environ.setdefault("AGNO_TELEMETRY", "false")

WORDS = 40
PAUSE = float(os.environ.get("BENCH_PAUSE", "2.0"))
TEXT = " ".join(f"w{i:02d}" for i in range(WORDS))


def _pieces() -> list[str]:
    return [TEXT[i : i + 4] for i in range(0, len(TEXT), 4)]


def pydantic_ai_vercel() -> Any:
    """Pydantic AI's Vercel AI adapter behind one Starlette route."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.ui.vercel_ai import VercelAIAdapter
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        await anyio.sleep(PAUSE)
        for piece in _pieces():
            yield piece

    agent = Agent(FunctionModel(stream_function=stream, model_name="bench"))

    async def chat(request: Request) -> Response:
        return await VercelAIAdapter.dispatch_request(request, agent=agent)

    return Starlette(routes=[Route("/api/chat", chat, methods=["POST"])])


def agno_os() -> Any:
    """Agno's AgentOS app serving one agent."""
    from agno.agent import Agent
    from agno.models.base import Model
    from agno.models.response import ModelResponse
    from agno.os import AgentOS

    @dataclass
    class Streaming(Model):
        id: str = "bench"
        name: str = "Bench"
        provider: str = "Bench"

        def invoke(self, *args: Any, **kwargs: Any) -> ModelResponse:
            return ModelResponse(role="assistant", content=TEXT)

        async def ainvoke(self, *args: Any, **kwargs: Any) -> ModelResponse:
            return ModelResponse(role="assistant", content=TEXT)

        def invoke_stream(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("served async only")

        async def ainvoke_stream(self, *args: Any, **kwargs: Any) -> Any:
            await anyio.sleep(PAUSE)
            for piece in _pieces():
                yield ModelResponse(role="assistant", content=piece)

        def _parse_provider_response(self, response: Any, **kwargs: Any) -> ModelResponse:
            return response

        def _parse_provider_response_delta(self, response: Any) -> ModelResponse:
            return response

    agent = Agent(id="bench", name="bench", model=Streaming(), telemetry=False)
    return AgentOS(agents=[agent], telemetry=False).get_app()
