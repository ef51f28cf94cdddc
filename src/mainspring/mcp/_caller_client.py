"""The MCP client of a ``tools/call``, as the tool's :class:`CallerClient`.

A tool's :meth:`ToolContext.ask_user` becomes an ``elicitation/create`` (form
mode) and :meth:`ToolContext.sample` a ``sampling/createMessage`` to the
client that made the call, related to that request, only when the client
declared the capability; otherwise the tool gets a ``RuntimeError`` that says
so (never a request the client did not ask for). On a 2026-07-28 connection
a server cannot send requests mid-call (it would answer ``input_required``
and be called again, which a tool's body cannot resume): there, too, the tool
is told, and its result says why.
"""

from __future__ import annotations

import warnings
from typing import Any, cast

from pydantic import JsonValue
from pydantic_core import to_jsonable_python

from mainspring.mcp._approval_form import can_ask
from mainspring.tools.context import UserAnswer

try:
    import mcp_types as types
    from mcp.server.context import ServerRequestContext
    from mcp.shared.exceptions import MCPDeprecationWarning
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS
except ImportError as exc:
    raise ImportError('the MCP server needs: pip install "mainspring[mcp]"') from exc

__all__ = ["McpCallerClient"]

_MESSAGE_CHARS = 2_000


class McpCallerClient:
    """Asks the client of one MCP request (its user, its model) for the tool it called."""

    def __init__(self, ctx: ServerRequestContext[Any, Any]) -> None:
        self._ctx = ctx

    def _check(self, what: str, declared: bool) -> None:
        if self._ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            raise RuntimeError(
                f"cannot {what} during a 2026-07-28 MCP call (the protocol asks by "
                "input_required rounds, which a running tool cannot take); use a 2025-era client"
            )
        if not declared:
            raise RuntimeError(f"the MCP client did not declare {what.split()[0]} support")

    async def ask_user(self, message: str, schema: dict[str, JsonValue]) -> UserAnswer:
        """The client's user's answer to a form (``elicitation/create``)."""
        ctx = self._ctx
        self._check("elicitation from a tool", can_ask(ctx.session.client_capabilities))
        form = cast("types.ElicitRequestedSchema", schema)
        result = await ctx.session.elicit_form(
            message[:_MESSAGE_CHARS], form, related_request_id=ctx.request_id
        )
        content = to_jsonable_python(result.content) if result.action == "accept" else None
        if content is not None and not isinstance(content, dict):
            return UserAnswer(action="decline")
        return UserAnswer(action=result.action, content=content)

    async def sample(self, prompt: str, *, system: str, max_tokens: int) -> str:
        """The client's model's text for ``prompt`` (``sampling/createMessage``)."""
        ctx = self._ctx
        declared = ctx.session.check_client_capability(
            types.ClientCapabilities(sampling=types.SamplingCapability())
        )
        self._check("sampling from a tool", declared)
        message = types.SamplingMessage(role="user", content=types.TextContent(text=prompt))
        with warnings.catch_warnings():  # (no await inside: no other task sees it)
            # The SDK marks sampling deprecated as of 2026-07-28; 2025-era clients offer it.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            asking = ctx.session.create_message(
                [message],
                max_tokens=max_tokens,
                system_prompt=system or None,
                related_request_id=ctx.request_id,
            )
        result = await asking
        content: object = result.content  # one block (a result with tools: a list)
        blocks = cast("list[object]", content) if isinstance(content, list) else [content]
        texts = [b.text for b in blocks if isinstance(b, types.TextContent)]
        if not texts:
            raise RuntimeError("the MCP client's model answered without text")
        return "".join(texts)
