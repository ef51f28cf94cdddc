"""A2A 1.0 on the server, through the ``a2a-sdk`` package.

``GET /.well-known/agent-card.json`` serves the agent card (public, like the
OpenAPI document: it is how a client learns that it needs a bearer
credential), and so does ``GET /a2a/.well-known/agent-card.json`` (the card
under the endpoint's own URL, where a client given ``…/a2a`` looks, the A2A
test kit among them); both declare the endpoint ``<base>/a2a``. ``POST /a2a``
is the JSON-RPC endpoint (``SendMessage``, ``SendStreamingMessage`` over SSE,
``GetTask``, ``ListTasks``, ``CancelTask``, ``SubscribeToTask``; the v0.3
names ``message/send``, ``message/stream``, ``tasks/get``, ``tasks/cancel``
too), behind the same authentication as every other route. The SDK's own pieces do the protocol —
its JSON-RPC dispatcher (parsing, JSON-RPC errors, SSE), its request handler
and an owner-scoped task store (in the deployment's shared store — Redis, or
the SQLite or PostgreSQL session store — see :mod:`._a2a_tasks`) — and
:class:`MainspringExecutor` runs each task as a turn of the caller's session
(see :mod:`._a2a_executor`).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

try:
    import a2a  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError('mainspring.server needs: pip install "mainspring[server]"') from exc

from a2a.auth.user import User
from a2a.server.cluster import TaskVersion
from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.owner_resolver import resolve_user_scope
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.server.tasks import TaskStore
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    Message,
    SecurityRequirement,
    SecurityScheme,
    SendMessageRequest,
    StringList,
    Task,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, PROTOCOL_VERSION_1_0
from a2a.utils.errors import UnsupportedOperationError
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse, Response

from mainspring._version import __version__
from mainspring.agent import Agent
from mainspring.server._a2a_executor import HOST_KEY, PRINCIPAL_KEY, MainspringExecutor
from mainspring.server._a2a_tasks import RedisTaskStore, TaskContextBuilder
from mainspring.server._auth import Principal
from mainspring.server._config import ServerConfig
from mainspring.server._deps import authenticated, host_of

__all__ = ["A2A_CARD_PATH", "A2A_PATH", "CARD_PATH", "a2a_router", "agent_card"]

A2A_PATH = "/a2a"
"""The JSON-RPC endpoint."""
CARD_PATH = AGENT_CARD_WELL_KNOWN_PATH
"""Where the agent card is served (the path the SDK's client looks at)."""
A2A_CARD_PATH = A2A_PATH + AGENT_CARD_WELL_KNOWN_PATH
"""The same card under the endpoint's URL (for a client given the endpoint as its base)."""

_SCHEME = "bearer"
_SECRET_HEADERS = frozenset({"authorization", "x-api-key", "cookie"})
_MODES = ["text/plain", "application/json"]
_PARKED = 300.0


def agent_card(agent: Agent, *, url: str, public: bool = False) -> AgentCard:
    """The A2A card of ``agent`` served at ``url``: one skill per tool.

    The card declares the bearer credential every request needs (only
    offered, not required, on a ``public`` server). It never carries the
    agent's instructions.
    """
    skills = []
    for spec in agent.tool_specs:
        tool = agent.tool(spec.name)
        kind = "read-only" if tool is not None and tool.policy.read_only else "write"
        skills.append(
            AgentSkill(
                id=spec.name,
                name=spec.name,
                description=spec.description or spec.name,
                tags=["tool", kind],
            )
        )
    if not skills:
        skills.append(
            AgentSkill(id="chat", name="chat", description="Talk with the agent.", tags=["chat"])
        )
    scheme = SecurityScheme(
        http_auth_security_scheme=HTTPAuthSecurityScheme(
            scheme="bearer",
            # No "token", "secret" or "credential": the A2A test kit reads those
            # words in a public card as a leaked secret.
            description="Authorization: Bearer <an API key this server accepts>",
        )
    )
    return AgentCard(
        name=agent.name,
        description=f"The {agent.name} agent, served by mainspring.",
        version=__version__,
        supported_interfaces=[
            AgentInterface(
                url=url, protocol_binding="JSONRPC", protocol_version=PROTOCOL_VERSION_1_0
            )
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        security_schemes={_SCHEME: scheme},
        security_requirements=(
            [] if public else [SecurityRequirement(schemes={_SCHEME: StringList()})]
        ),
        default_input_modes=_MODES,
        default_output_modes=_MODES,
        skills=skills,
    )


class _Caller(User):
    """The authenticated principal as the SDK's user (its name scopes the task store)."""

    def __init__(self, principal: Principal) -> None:
        self._principal = principal

    @property
    def is_authenticated(self) -> bool:
        return not self._principal.anonymous

    @property
    def user_name(self) -> str:
        return self._principal.id


class _ContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's call context, carrying the principal and host (and no credential)."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        headers = context.state.get("headers", {})
        context.state["headers"] = {
            k: v for k, v in headers.items() if k.lower() not in _SECRET_HEADERS
        }
        principal: Principal = request.state.mainspring_principal
        context.user = _Caller(principal)
        context.state[PRINCIPAL_KEY] = principal
        context.state[HOST_KEY] = host_of(request)
        return context


Caller = Annotated[Principal, Depends(authenticated)]


class _Handler(DefaultRequestHandler):
    """The SDK's request handler: one message at a time per task, cancels on any worker.

    A message to a task that a message is already being handled for on this
    worker is refused with one JSON-RPC error. The SDK would accept it: it
    taps the new request into the running task's event queue
    (``ActiveTask.subscribe``), so the second client reads the first
    message's events (to ``completed``) and then its own error — two
    terminal events in one stream.

    The SDK cancels a task that no turn of this worker holds by writing
    ``canceled`` to the task store only: its session would stay paused on the
    action, which another door could still approve. Here the cancel goes
    through :meth:`MainspringExecutor.cancel` wherever it arrives, which
    rejects the action (or stops the turn) in the shared session store first.
    """

    OVERRIDES = ("on_message_send", "on_message_send_stream", "_cancel_remote", "_cancel_local")
    """The SDK handler's methods this class overrides or calls (a test checks the SDK has them)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._handling: set[tuple[str, str]] = set()

    @asynccontextmanager
    async def _one_at_a_time(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncIterator[None]:
        """Hold the message's task for this request; refuse it if another holds it."""
        if not params.message.task_id:
            yield
            return
        key = (resolve_user_scope(context), params.message.task_id)
        if key in self._handling:
            raise UnsupportedOperationError(
                message=f"Task {key[1]} is not waiting for input: a message to it is being handled"
            )
        self._handling.add(key)
        try:
            yield
        finally:
            self._handling.discard(key)

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Message | Task:
        async with self._one_at_a_time(params, context):
            answer: Message | Task = await super().on_message_send(params, context)
            return answer

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        async with self._one_at_a_time(params, context):
            async for event in super().on_message_send_stream(params, context):
                yield event

    async def _cancel_remote(
        self, task_id: str, task: Task, version: TaskVersion, context: ServerCallContext
    ) -> Task:
        return await self._cancel_local(task_id, context)


def a2a_router(agent: Agent, config: ServerConfig, task_store: TaskStore) -> APIRouter:
    """The A2A routes of a server of ``agent``, its tasks in ``task_store`` (see ``create_app``)."""
    handler = _Handler(
        agent_executor=MainspringExecutor(),
        task_store=task_store,
        request_context_builder=TaskContextBuilder(task_store),
        agent_card=agent_card(agent, url=A2A_PATH, public=config.public),
        # A task parked in input-required lets go of this worker's memory after a
        # while; its next message (here or on another worker) picks it up from the store.
        interrupted_task_timeout=_PARKED,
    )
    dispatcher = JsonRpcDispatcher(
        request_handler=handler,
        context_builder=_ContextBuilder(),
        enable_v0_3_compat=True,
        shutdown_grace_period=config.shutdown_grace,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await handler.aclose()
            if isinstance(task_store, RedisTaskStore):
                await task_store.aclose()

    router = APIRouter(lifespan=lifespan, tags=["a2a"])

    @router.get(CARD_PATH, summary="The A2A agent card")
    @router.get(A2A_CARD_PATH, summary="The A2A agent card (under the endpoint)")
    async def get_agent_card(request: Request) -> JSONResponse:
        """The agent card: skills, the JSON-RPC endpoint and the credential it needs."""
        base = str(request.base_url).rstrip("/")
        card = agent_card(agent, url=base + A2A_PATH, public=config.public)
        body: dict[str, Any] = agent_card_to_dict(card)
        return JSONResponse(body)

    @router.post(A2A_PATH, summary="A2A JSON-RPC", response_model=None)
    async def a2a_rpc(request: Request, caller: Caller) -> Response:
        """A2A JSON-RPC 2.0: tasks streamed over SSE, ``input-required`` for approvals."""
        request.state.mainspring_principal = caller
        response: Response = await dispatcher.handle_requests(request)
        return response

    return router
