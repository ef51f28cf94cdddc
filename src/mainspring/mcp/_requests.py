"""Requests a server sends its client: elicitation (ask the user) and sampling (ask a model).

Neither is answered unless the host says how. Without an ``on_elicit``
handler the client does not declare the elicitation capability, so a server
does not ask (and the SDK refuses if it does); without :class:`McpSampling`
sampling is refused the same way. With them:

- an elicitation goes to the host's ``on_elicit`` (its UI, or a policy) as an
  :class:`McpElicitation`; the :class:`ElicitAnswer` it returns is sent back.
  A handler that raises, or answers ``accept`` with content that is not a
  flat JSON object, declines. An accepted form gets the schema's
  ``default`` for each field the answer omits (SEP-1034), when that default
  is a plain value that fits its own field (type, enum); others stay omitted.
- a sampling request goes to :attr:`McpSampling.model`, its ``max_tokens``
  capped by :attr:`McpSampling.max_tokens`, at most
  :attr:`McpSampling.max_requests` per manager; past that, it is refused.
  Only text is sampled (tool use in sampling is not offered). Its cost
  counts toward the spend and budget of the session whose MCP call the
  server sampled for (when that call is the only one in flight); with no
  ``sampling`` given, servers' sampling requests are declined.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal, TypeAlias, cast

from pydantic import JsonValue
from pydantic_core import to_jsonable_python

from mainspring.cost import CostTracker, ModelPrice
from mainspring.events import TextDelta
from mainspring.messages import Message
from mainspring.models.base import (
    Model,
    ModelRequest,
    ModelSettings,
    ModelStop,
    ModelUsage,
    SystemBlock,
)
from mainspring.usage import Usage

try:
    import mcp.types as mcp_types
    from mcp.client.session import ClientRequestContext, ElicitationFnT, SamplingFnT
except ImportError as exc:
    raise ImportError('McpClientManager needs: pip install "mainspring[mcp]"') from exc

__all__ = [
    "ElicitAnswer",
    "McpElicitation",
    "McpSampling",
    "OnElicit",
    "elicitation_callback",
    "sampling_callback",
    "with_defaults",
]

logger = logging.getLogger("mainspring.mcp.client")

_MESSAGE_CHARS = 2_000


@dataclass(frozen=True, slots=True, kw_only=True)
class McpElicitation:
    """A server asks the user for input (``form``) or to visit a URL (``url``)."""

    server: str
    message: str
    """What the server says it wants (cut at 2,000 characters)."""
    mode: Literal["form", "url"] = "form"
    requested_schema: dict[str, JsonValue] = field(default_factory=dict)
    """The flat JSON schema of the form (``form`` mode)."""
    url: str | None = None
    """Where the user is asked to go (``url`` mode); show it, never open it unasked."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ElicitAnswer:
    """The user's answer to an elicitation."""

    action: Literal["accept", "decline", "cancel"]
    content: dict[str, str | int | float | bool | list[str] | None] | None = None
    """The form's values (``accept`` in ``form`` mode only)."""


OnElicit: TypeAlias = Callable[[McpElicitation], Awaitable[ElicitAnswer]]
"""The host's answer to a server's elicitation (its UI, or a policy)."""


@dataclass(slots=True, kw_only=True)
class McpSampling:
    """Lets servers sample :attr:`model`, bounded."""

    model: Model
    max_tokens: int = 1024
    """A request's ``maxTokens`` is capped at this."""
    max_requests: int = 20
    """Sampling requests answered per manager; later ones are refused."""
    requests: int = 0
    """Requests answered so far."""
    usage: Usage = field(default_factory=Usage)
    """Tokens the answered requests used."""
    price: ModelPrice | None = None
    """What :attr:`model` costs (else looked up by its name, as a session does)."""
    cost_usd: float = 0.0
    """USD the answered requests cost."""

    def cost(self, usage: Usage) -> float:
        """USD ``usage`` of :attr:`model` costs (0 when no price is known)."""
        if self.price is not None:
            return self.price.cost(usage)
        return CostTracker().price_of(self.model.name, usage) or 0.0


def _flat(content: object) -> bool:
    if content is None:
        return True
    if not isinstance(content, dict):
        return False
    for value in content.values():
        if isinstance(value, list):
            if not all(isinstance(x, str) for x in value):
                return False
        elif not isinstance(value, str | int | float | bool) and value is not None:
            return False
    return True


def _fits(prop: dict[str, JsonValue], value: JsonValue) -> bool:
    """Whether ``value`` is a plain value of the form field ``prop`` (its type, its choices)."""
    kind = prop.get("type")
    if kind == "array":
        items = prop.get("items")
        if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
            return False
        return not isinstance(items, dict) or all(_fits(items, x) for x in value)
    typed = {
        "string": isinstance(value, str),
        "boolean": isinstance(value, bool),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
    }
    if isinstance(kind, str) and not typed.get(kind, False):
        return False
    choices = prop.get("enum")
    if isinstance(choices, list) and value not in choices:
        return False
    consts = prop.get("oneOf", prop.get("anyOf"))
    if isinstance(consts, list) and all(isinstance(c, dict) and "const" in c for c in consts):
        return any(isinstance(c, dict) and c.get("const") == value for c in consts)
    return True


def with_defaults(
    schema: dict[str, JsonValue], content: dict[str, str | int | float | bool | list[str] | None]
) -> dict[str, str | int | float | bool | list[str] | None]:
    """``content`` with each omitted field of the form ``schema`` set to its ``default`` (SEP-1034).

    Only a default that is a plain value fitting its own field (type, enum or
    titled choices) is used; a missing, ``null`` or ill-fitting one leaves the
    field omitted. The answer's own values are never replaced.
    """
    props = schema.get("properties")
    if not isinstance(props, dict):
        return content
    filled = dict(content)
    for name, prop in props.items():
        if name in filled or not isinstance(prop, dict) or "default" not in prop:
            continue
        default = prop["default"]
        if default is not None and _fits(prop, default):
            filled[name] = cast("str | int | float | bool | list[str]", default)
    return filled


def elicitation_callback(server: str, handler: OnElicit) -> ElicitationFnT:
    """The SDK callback that asks ``handler`` on behalf of ``server``."""

    async def on_elicit(
        context: ClientRequestContext, params: mcp_types.ElicitRequestParams
    ) -> mcp_types.ElicitResult | mcp_types.ErrorData:
        if isinstance(params, mcp_types.ElicitRequestURLParams):
            asked = McpElicitation(
                server=server, message=params.message[:_MESSAGE_CHARS], mode="url", url=params.url
            )
        else:
            schema: dict[str, JsonValue] = to_jsonable_python(params.requested_schema)
            asked = McpElicitation(
                server=server, message=params.message[:_MESSAGE_CHARS], requested_schema=schema
            )
        try:
            answer = await handler(asked)
        except Exception as exc:
            logger.warning("MCP server %r: elicitation handler failed: %s", server, exc)
            return mcp_types.ElicitResult(action="decline")
        if answer.action != "accept" or asked.mode == "url":
            return mcp_types.ElicitResult(action=answer.action)
        if not _flat(answer.content):
            logger.warning("MCP server %r: elicitation answer is not a flat object", server)
            return mcp_types.ElicitResult(action="decline")
        content = with_defaults(asked.requested_schema, answer.content or {})
        return mcp_types.ElicitResult(action="accept", content=content)

    return on_elicit


def _messages(params: mcp_types.CreateMessageRequestParams) -> list[Message] | None:
    messages: list[Message] = []
    for item in params.messages:
        texts = [b.text for b in item.content_as_list if isinstance(b, mcp_types.TextContent)]
        if len(texts) != len(item.content_as_list):
            return None  # images, audio, tool use: not sampled here
        text = "\n".join(texts)
        messages.append(Message.user(text) if item.role == "user" else Message.assistant(text))
    return messages


def sampling_callback(
    server: str, sampling: McpSampling, *, charge: Callable[[float, str], None] | None = None
) -> SamplingFnT:
    """The SDK callback that samples ``sampling.model`` for ``server``, within bounds.

    Each request's cost goes to ``charge`` (the session whose tool call the
    server sampled for, counted toward its spend and budget).
    """

    async def on_sample(
        context: ClientRequestContext, params: mcp_types.CreateMessageRequestParams
    ) -> (
        mcp_types.CreateMessageResult | mcp_types.CreateMessageResultWithTools | mcp_types.ErrorData
    ):
        if sampling.requests >= sampling.max_requests:
            return mcp_types.ErrorData(
                code=mcp_types.INVALID_REQUEST,
                message=f"sampling limit reached ({sampling.max_requests} requests)",
            )
        messages = _messages(params)
        if messages is None or params.tools:
            return mcp_types.ErrorData(
                code=mcp_types.INVALID_REQUEST, message="only text sampling is supported"
            )
        sampling.requests += 1
        request = ModelRequest(
            system=(SystemBlock(text=params.system_prompt),) if params.system_prompt else (),
            messages=messages,
            settings=ModelSettings(max_tokens=max(1, min(params.max_tokens, sampling.max_tokens))),
        )
        text: list[str] = []
        stop = "endTurn"
        try:
            async for event in sampling.model.stream(request):
                if isinstance(event, TextDelta):
                    text.append(event.text)
                elif isinstance(event, ModelUsage):
                    sampling.usage = sampling.usage + event.usage
                    usd = sampling.cost(event.usage)
                    sampling.cost_usd += usd
                    if charge is not None and usd > 0:
                        charge(usd, f"sampling for MCP server {server}")
                elif isinstance(event, ModelStop) and event.stop_reason == "max_tokens":
                    stop = "maxTokens"
        except Exception as exc:
            logger.warning("MCP server %r: sampling failed: %s", server, exc)
            return mcp_types.ErrorData(code=mcp_types.INTERNAL_ERROR, message="sampling failed")
        return mcp_types.CreateMessageResult(
            role="assistant",
            content=mcp_types.TextContent(type="text", text="".join(text)),
            model=sampling.model.name,
            stop_reason=stop,
        )

    return on_sample
