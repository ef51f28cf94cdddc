"""Expose an agent's tools, and its skills, to MCP clients.

``build_mcp_server(agent)`` returns the official SDK's low-level
:class:`mcp.server.lowlevel.Server`:

- ``tools/list`` lists the agent's tools with their JSON schema and
  annotations (``readOnlyHint`` from the policy; writes are
  ``destructiveHint``; the ``external`` flag sets ``openWorldHint``).
- ``tools/call`` validates with :meth:`Tool.validate`, runs the preflight and
  :meth:`Tool.call` (under the tool's timeout); invalid input, a failed
  preflight, a timeout or a raising tool become ``isError`` results naming
  the problem, so the calling model can correct itself.
- ``prompts/list`` and ``prompts/get`` serve declared prompt templates
  (:class:`~mainspring.mcp.offers.ServedPrompt`, with arguments, images and
  embedded resources) and a :class:`SkillCatalog`: one prompt per skill,
  whose text is the skill's ``SKILL.md`` body.
- ``resources/*`` serve declared resources and templates (list, read, text
  or binary, subscribe); ``completion/complete`` completes prompt and
  template arguments; ``logging/setLevel`` sets the level from which a
  tool's :meth:`~mainspring.tools.context.ToolContext.log` messages reach
  the client as ``notifications/message`` (mcp/_serve_offers.py).

Approval. Inside mainspring a confirm-tier write (static ``"confirm"``, a
permission resolver, USD tiers) or a client-executed tool pauses the turn for
a decision. MCP has no such pause: the client decides whether to ask its user
before each call. So those tools are hidden unless ``expose_confirm=True``;
then their description starts with an approval note, their annotations say
``readOnlyHint=false, destructiveHint=true`` with a title ending in
"(requires approval)", and ``_meta`` carries ``"mainspring/requiresApproval":
true``. The server asks only a client that declared form elicitation: a call that
needs an approval from any other client is an error result saying so (and
how to get one), never a request the client did not ask for, and nothing
runs. The form (``mcp/_approval_form.py``) has an approve checkbox and the
tool's editable (modifiable) fields with their current values as defaults;
a changed field is an edit of the approval, judged by the dispatch path.
A client-executed tool has no body here and can never run over MCP: it is
never listed. Tools matching the agent's ``permissions.deny`` patterns are
never exposed either.

Identity. Every call runs as one caller, ``principal`` (``service:mcp`` by
default): the tools' ``ctx.caller``, and the key of what the toolkits keep
(memories, notes, artifacts, todo lists, shell sessions). A stdio server has
one client; over HTTP every holder of the bearer token is that one caller, so
serve one server (or one token) per principal whose data must stay apart.

Both protocol eras, as the SDK negotiates them. On a 2025-era connection
(the initialize handshake) a call that needs approval asks the client's user
by elicitation, mid-request. On a 2026-07-28 connection (``server/discover``,
stateless) it answers the first request with an ``input_required`` result (an
approve/reject elicitation and a ``requestState`` sealed by the SDK's
``RequestStateBoundary``, bound to the request) and runs on the retry that
carries the approval: once, for that input (``mcp/_approval_rounds.py``).

Several workers behind one URL. Give every one the same ``store`` (a session
store every worker reaches: ``open_session_store("sqlite:///…")`` on one
machine, ``"postgresql://…"`` on many; ``mainspring mcp serve --store``) and
the same ``request_state_security`` keys: the used approval nonces and each
caller's auto-approved spend are kept there, so a retry replayed to another
worker is refused and the session auto-spend cap counts every worker's writes.
Without a store both live in this process only.

Runners: :func:`serve_stdio` and :func:`serve_http` (streamable HTTP, loopback
only unless ``allow_remote=True`` with a bearer ``token``; DNS-rebinding
protection and no cross-site form posts, on every host); :func:`http_app` is
the ASGI app.
"""

from __future__ import annotations

import json
import logging
import socket
import warnings
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

try:
    import mcp_types as types
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server
    from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
    from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS
    from starlette.applications import Starlette
except ImportError as exc:
    raise ImportError('the MCP server needs: pip install "mainspring[mcp]"') from exc

import anyio
from anyio.abc import TaskStatus

if TYPE_CHECKING:
    import uvicorn

from mainspring._direct import DirectCaller
from mainspring._http_guard import (
    BearerAuth,
    CrossSiteGuard,
    HostGuard,
    is_loopback,
    served_address,
)
from mainspring.agent import Agent
from mainspring.decisions import Decision, Reject
from mainspring.errors import ConfigError
from mainspring.events import Event, PendingAction, ToolProgress
from mainspring.mcp._approval_form import CannotAsk, approval_schema, can_ask, decision_of
from mainspring.mcp._approval_rounds import ApprovalRounds, NeedsApproval, retry_decider
from mainspring.mcp._caller_client import McpCallerClient
from mainspring.mcp._serve_offers import Offers
from mainspring.mcp._stdin import stdin_lines
from mainspring.mcp.offers import McpServe, ServedPrompt, ServedResource, ServedResourceTemplate
from mainspring.namespaces import InMemoryKeyValueStore
from mainspring.principals import Caller
from mainspring.skills import SkillCatalog
from mainspring.stores.base import SessionStore, SharedRecords
from mainspring.tools.context import RunScope, caller_client, run_scope
from mainspring.tools.define import Tool, ToolOutput
from mainspring.tools.policy import Flag, UsdAmount
from mainspring.tools.registry import matches_any

log = logging.getLogger("mainspring.mcp")

__all__ = [
    "APPROVAL_META_KEY",
    "build_mcp_server",
    "http_app",
    "is_loopback",
    "needs_approval",
    "serve_http",
    "serve_stdio",
]

APPROVAL_META_KEY = "mainspring/requiresApproval"
"""``Tool._meta`` key set on tools whose calls need the user's approval."""

_APPROVAL_NOTE = (
    "REQUIRES THE USER'S APPROVAL: this action changes things on the user's behalf; "
    "ask the user to confirm each call before running it."
)
_ServerContext = ServerRequestContext[Any, Any]


def needs_approval(tool: Tool) -> bool:
    """Whether mainspring would pause this tool's calls for a decision."""
    perm = tool.policy.permission
    return (
        tool.client_executed or isinstance(perm, UsdAmount) or callable(perm) or perm == "confirm"
    )


def _annotations(tool: Tool, *, approval: bool) -> types.ToolAnnotations:
    read_only = tool.policy.read_only and not approval
    return types.ToolAnnotations(
        title=f"{tool.name} (requires approval)" if approval else None,
        read_only_hint=read_only,
        destructive_hint=not read_only,
        open_world_hint=Flag.EXTERNAL in tool.policy.flags,
    )


def _mcp_tool(tool: Tool) -> types.Tool:
    approval = needs_approval(tool)
    description = f"{_APPROVAL_NOTE}\n\n{tool.description}" if approval else tool.description
    schema: dict[str, Any] = dict(tool.input_schema)
    schema.setdefault("type", "object")
    return types.Tool(
        name=tool.name,
        description=description,
        input_schema=schema,
        annotations=_annotations(tool, approval=approval),
        _meta={APPROVAL_META_KEY: approval},
    )


def _exposed(agent: Agent, *, expose_confirm: bool) -> dict[str, Tool]:
    tools: dict[str, Tool] = {}
    for name in agent.tool_names:
        tool = agent.tool(name)
        if tool is None or tool.client_executed or matches_any(agent.permissions.deny, name):
            continue  # a client-executed tool has no body here: it can never run over MCP
        if needs_approval(tool) and not expose_confirm:
            continue
        tools[name] = tool
    return tools


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def _result(output: ToolOutput, limit: int) -> types.CallToolResult:
    text = output.content
    if len(text) > limit:
        text = text[:limit] + f"\n[truncated: {len(output.content) - limit} more characters]"
    content: list[types.ContentBlock] = [types.TextContent(text=text)]
    for image in output.images:
        if image.data is not None:
            content.append(types.ImageContent(data=image.data, mime_type=image.media_type))
        elif image.url is not None:
            content.append(types.TextContent(text=f"[image: {image.url}]"))
    return types.CallToolResult(content=content, is_error=output.is_error)


def _modern(ctx: _ServerContext) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


async def _run(
    caller: DirectCaller,
    ctx: _ServerContext,
    tool: Tool,
    params: types.CallToolRequestParams,
    rounds: ApprovalRounds,
) -> types.CallToolResult | types.InputRequiredResult:
    """The call through the engine's one dispatch path, as if the model had made it.

    A pause for approval asks the client: by elicitation on a 2025-era
    connection, by an ``input_required`` round trip on a 2026-07-28 one; a
    client that did not declare form elicitation is not asked: the call ends
    with an error result, unrun.
    """
    if tool.fn is None:
        return _error(f"tool {tool.name!r} is executed by the host application, not this server")
    arguments = params.arguments or {}

    def form(pending: PendingAction) -> dict[str, Any]:
        return approval_schema(pending, tool.input_schema)

    decide: Callable[[PendingAction], Awaitable[Decision]]
    if not can_ask(ctx.session.client_capabilities):

        async def decide(pending: PendingAction) -> Decision:
            raise CannotAsk(pending)

    elif not _modern(ctx):

        async def decide(pending: PendingAction) -> Decision:
            return await _ask_client(ctx, pending, form(pending))

    elif params.request_state is not None:
        decide = retry_decider(
            *await rounds.decision(tool.name, params.request_state, params.input_responses),
            form,
        )
    else:

        async def decide(pending: PendingAction) -> Decision:
            raise NeedsApproval(pending)

    try:
        return await _call(caller, ctx, tool, arguments, decide)
    except CannotAsk as unasked:
        return _error(unasked.message())
    except NeedsApproval as asked:
        pending = asked.pending
        return rounds.input_required(pending, _approval_message(pending), form(pending))


async def _call(
    caller: DirectCaller,
    ctx: _ServerContext,
    tool: Tool,
    arguments: dict[str, Any],
    decide: Callable[[PendingAction], Awaitable[Decision]],
) -> types.CallToolResult:

    steps = 0

    async def forward(event: Event) -> None:
        """A tool's progress as MCP progress (a no-op unless the client asked for it)."""
        nonlocal steps
        if isinstance(event, ToolProgress):
            steps += 1
            total = 100.0 if event.pct is not None else None
            done = event.pct if event.pct is not None else float(steps)
            try:
                await ctx.session.report_progress(done, total, event.message[:1000])
            except Exception:  # a client gone or a transport without progress: never fatal
                log.debug("could not forward progress of %s", tool.name, exc_info=True)

    result = await caller.call(tool.name, arguments, decide=decide, on_event=forward)
    content: list[types.ContentBlock] = [types.TextContent(text=result.content)]
    for image in result.images:
        if image.data is not None:
            content.append(types.ImageContent(data=image.data, mime_type=image.media_type))
        elif image.url is not None:
            content.append(types.TextContent(text=f"[image: {image.url}]"))
    return types.CallToolResult(content=content, is_error=result.is_error)


def _approval_message(pending: PendingAction) -> str:
    return (
        f"{pending.name} needs your approval: {pending.reason}\n"
        f"input: {json.dumps(pending.input)[:2000]}"
    )


async def _ask_client(
    ctx: _ServerContext, pending: PendingAction, schema: dict[str, Any]
) -> Decision:
    """A pending action as an elicitation to the client's user: approve, or it is rejected."""
    try:
        answer = await ctx.session.elicit_form(
            _approval_message(pending), schema, related_request_id=ctx.request_id
        )
    except Exception as exc:  # no back channel, a broken client
        return Reject(f"approval could not be asked of the client: {exc}")
    if answer.action != "accept":
        return Reject(f"the client's user did not approve ({answer.action})")
    return decision_of(pending, schema, answer.content)


def build_mcp_server(
    agent: Agent | McpServe,
    *,
    skills: SkillCatalog | None = None,
    expose_confirm: bool = False,
    name: str = "mainspring",
    request_state_security: RequestStateSecurity | None = None,
    principal: Caller | None = None,
    store: SharedRecords | None = None,
    resources: Sequence[ServedResource | ServedResourceTemplate] = (),
    prompts: Sequence[ServedPrompt] = (),
) -> Server[Any]:
    """An MCP server (the SDK's low-level ``Server``) for the agent's tools and skills.

    Besides the tools it always answers ``logging/setLevel`` (a tool's
    :meth:`ToolContext.log` messages reach the calling client at or above
    that level) and ``completion/complete``; given resources or prompts
    (:mod:`mainspring.mcp.offers`) it serves those too.

    Args:
        agent: Whose tools are exposed; an :class:`McpServe` adds its resources
            and prompts to those given here.
        skills: Served as prompts (one per skill, the ``SKILL.md`` body as text).
        resources: Resources (fixed URIs) and resource templates to serve.
        prompts: Prompt templates to serve (before the skills' prompts).
        expose_confirm: Also expose tools that need approval, marked as such
            (client-executed tools never: they cannot run over MCP).
        name: The server's name in the MCP handshake.
        request_state_security: How the 2026-07-28 ``requestState`` of an
            approval round trip is sealed (the SDK's; default: a key of this
            process, ten minutes). Several workers behind one URL need
            ``RequestStateSecurity(keys=[…])`` shared by all.
        principal: The caller every call runs as (``ctx.caller``; default
            ``Caller("mcp", kind="service")``): the toolkits key its data by it.
        store: The store every worker behind one URL shares: the approval
            nonces used are claimed in its shared records, so a recorded
            approval retry replayed to another worker is refused; and, when it
            keeps a spend ledger (the SQLite and PostgreSQL session stores do,
            a ``RedisRunLock`` does not), each caller's auto-approved spend is
            kept there, so the auto-spend cap counts every worker's writes.
            Default: this process's memory.
    """
    from mainspring._version import __version__

    if isinstance(agent, McpServe):
        resources = (*agent.resources, *resources)
        prompts = (*agent.prompts, *prompts)
        agent = agent.agent
    tools = _exposed(agent, expose_confirm=expose_confirm)
    listed = [_mcp_tool(t) for t in tools.values()]
    scope = RunScope(
        caller=principal or Caller("mcp", kind="service"), storage=InMemoryKeyValueStore()
    )
    # One dispatch path, spend carried across calls (and workers, with a store).
    given: object = store  # (a session store's spend ledger, when it is one)
    ledger = given if isinstance(given, SessionStore) else None
    caller = DirectCaller(agent, caller="mcp", store=ledger)

    async def list_tools(
        ctx: _ServerContext, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    security = request_state_security or RequestStateSecurity.ephemeral(ttl=600.0)
    rounds = ApprovalRounds(ttl=security.ttl, records=store)

    async def call_tool(
        ctx: _ServerContext, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        tool = tools.get(params.name)
        if tool is None:
            raise MCPError(types.INVALID_PARAMS, f"unknown tool {params.name!r}")
        with run_scope(scope):
            with caller_client(McpCallerClient(ctx)):
                async with offers.logs(ctx):
                    return await _run(caller, ctx, tool, params, rounds)

    offers = Offers(resources=resources, prompts=prompts, skills=skills)
    has_prompts = bool(prompts) or skills is not None
    with warnings.catch_warnings():  # logging and subscriptions: deprecated as of 2026-07-28
        warnings.simplefilter("ignore", MCPDeprecationWarning)  # (2025-era clients use them)
        server: Server[Any] = Server(
            name,
            version=__version__,
            instructions=agent.instructions or None,
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_list_prompts=offers.list_prompts if has_prompts else None,
            on_get_prompt=offers.get_prompt if has_prompts else None,
            on_list_resources=offers.list_resources if resources else None,
            on_list_resource_templates=offers.list_templates if resources else None,
            on_read_resource=offers.read_resource if resources else None,
            on_subscribe_resource=offers.subscribe if resources else None,
            on_unsubscribe_resource=offers.unsubscribe if resources else None,
            on_completion=offers.complete,
            on_set_logging_level=offers.set_level,
        )
    # Seals the 2026-07-28 requestState of an approval round trip, checks it on return.
    server.middleware.append(RequestStateBoundary(security, default_audience=name))
    return server


async def serve_stdio(server: Server[Any]) -> None:
    """Serve over this process's stdin and stdout until the client hangs up.

    Cancelling (Ctrl-C) stops it at once, also while it waits for the
    client's next message: stdin is read without a worker thread (``_stdin``).
    """
    from mcp.server.stdio import stdio_server

    async with stdin_lines() as lines:
        # The SDK only iterates its stdin line by line, which FdLines does.
        stdin = cast("anyio.AsyncFile[str] | None", lines)
        async with stdio_server(stdin=stdin) as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())


def _check_host(host: str, *, allow_remote: bool, token: str | None) -> None:
    if is_loopback(host):
        return
    if token is None:
        raise ConfigError(
            f"refusing to serve MCP on {host!r}: a non-loopback address needs a bearer token"
        )
    if not allow_remote:
        raise ConfigError(
            f"refusing to serve MCP on {host!r}: only loopback hosts unless allow_remote=True"
        )


def http_app(
    server: Server[Any],
    *,
    host: str = "127.0.0.1",
    path: str = "/mcp",
    allow_remote: bool = False,
    token: str | None = None,
    allowed_hosts: Sequence[str] = (),
) -> Starlette:
    """The streamable HTTP ASGI app, guarded.

    Requests must name a ``Host`` that is loopback (any of 127.0.0.0/8,
    ``[::1]``, ``localhost``), the address served on, or one of
    ``allowed_hosts`` (else 421), and an ``Origin``, when sent, on one of them
    (else 403): DNS rebinding protection. A ``POST`` without a JSON content type
    (or a bearer token) is refused (415): no cross-site form post. With
    ``token``, every request needs ``Authorization: Bearer <token>`` (else
    401). A non-loopback host needs ``allow_remote=True`` and a token.

    Serve it once: its lifespan runs the SDK's session manager.
    """
    from mcp.server.transport_security import TransportSecuritySettings

    _check_host(host, allow_remote=allow_remote, token=token)
    if token is not None and not token.strip():
        raise ConfigError("the MCP bearer token is empty")
    # The SDK's own check covers three literal hosts only; LoopbackOnly covers them all.
    unchecked = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    app = server.streamable_http_app(
        streamable_http_path=path, host=host, transport_security=unchecked
    )
    app.add_middleware(CrossSiteGuard)
    if token is not None:
        app.add_middleware(BearerAuth, token=token.strip())
    hosts = [*allowed_hosts, *served_address(host)]
    app.add_middleware(HostGuard, hosts=hosts)  # the outermost: a rebound page learns nothing
    return app


async def serve_http(
    server: Server[Any],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    allow_remote: bool = False,
    token: str | None = None,
    allowed_hosts: Sequence[str] = (),
    task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve over streamable HTTP at ``http://host:port/mcp`` until cancelled.

    With ``port=0`` the system picks one: ``port = await tg.start(serve_http, server, port=0)``.
    Cancelling shuts the server down gracefully.
    """
    import uvicorn

    app = http_app(
        server,
        host=host,
        path=path,
        allow_remote=allow_remote,
        token=token,
        allowed_hosts=allowed_hosts,
    )
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        config = uvicorn.Config(
            app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2
        )
        uv = uvicorn.Server(config)
        await _run_uvicorn(uv, sock, task_status)
    finally:
        sock.close()


async def _run_uvicorn(
    uv: uvicorn.Server, sock: socket.socket, task_status: TaskStatus[int]
) -> None:
    done = anyio.Event()

    async def run() -> None:
        try:
            with anyio.CancelScope(shield=True):  # stopped through should_exit, gracefully
                await uv.serve([sock])
        finally:
            done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        try:
            while not uv.started:
                if done.is_set():
                    raise ConfigError("the MCP HTTP server failed to start")
                await anyio.sleep(0.01)
            task_status.started(sock.getsockname()[1])
            await done.wait()
        finally:
            uv.should_exit = True
