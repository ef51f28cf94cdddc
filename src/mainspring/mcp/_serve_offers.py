"""The MCP server's handlers for what it offers beside tools: resources, prompts, completion, logs.

:class:`Offers` holds the declarations (:mod:`mainspring.mcp.offers`) and a
skill catalog, and gives the SDK's low-level ``Server`` its handlers:
``resources/list``, ``resources/templates/list``, ``resources/read``,
``resources/subscribe`` / ``unsubscribe`` (kept per client session),
``prompts/list`` / ``get`` (declared prompts, then one per skill),
``completion/complete`` and ``logging/setLevel``. :meth:`Offers.logs` is the
sink a ``tools/call`` enters so the tool's :meth:`ToolContext.log` messages
reach its client at or above the level the client set (``info`` until it
sets one).
"""

from __future__ import annotations

import base64
import inspect
import logging
import re
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar, cast
from weakref import WeakKeyDictionary

import anyio
import anyio.to_thread

from mainspring.mcp.offers import (
    Completer,
    PromptPart,
    ServedPrompt,
    ServedResource,
    ServedResourceTemplate,
)
from mainspring.messages import ImagePart
from mainspring.skills import SkillCatalog
from mainspring.tools.context import LOG_LEVELS, LogLevel, log_sink

try:
    import mcp_types as types
    from mcp.server.context import ServerRequestContext
    from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS
except ImportError as exc:
    raise ImportError('the MCP server needs: pip install "mainspring[mcp]"') from exc

__all__ = ["Offers"]

log = logging.getLogger("mainspring.mcp")

_Ctx = ServerRequestContext[Any, Any]
T = TypeVar("T")
_RESOURCE_NOT_FOUND = -32002
"""The spec's error code for a resource no one serves."""
MAX_COMPLETIONS = 100
"""The most values one ``completion/complete`` answer carries (the spec's cap)."""


async def _call(fn: Callable[..., T | Awaitable[T]], **kwargs: Any) -> T:
    """``fn(**kwargs)``: awaited when async, in a worker thread when sync."""
    if inspect.iscoroutinefunction(fn):
        return cast("T", await fn(**kwargs))
    value = await anyio.to_thread.run_sync(lambda: fn(**kwargs))
    if inspect.isawaitable(value):
        return cast("T", await value)
    return value


def _pattern(template: str) -> re.Pattern[str]:
    parts = re.split(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", template)
    regex = "".join(
        re.escape(part) if i % 2 == 0 else f"(?P<{part}>[^/]+)" for i, part in enumerate(parts)
    )
    return re.compile(f"^{regex}$")


def _contents(
    uri: str, mime_type: str, value: str | bytes
) -> types.TextResourceContents | types.BlobResourceContents:
    if isinstance(value, bytes):
        blob = base64.b64encode(value).decode("ascii")
        return types.BlobResourceContents(uri=uri, mime_type=mime_type, blob=blob)
    if isinstance(value, str):
        return types.TextResourceContents(uri=uri, mime_type=mime_type, text=value)
    raise MCPError(types.INTERNAL_ERROR, f"resource {uri!r} read neither text nor bytes")


def _client(ctx: _Ctx) -> object:
    """The client connection ``ctx`` belongs to: what its level and subscriptions are kept by.

    The SDK builds a ``ServerSession`` per request and keeps the per-client
    ``Connection`` behind it, with no public accessor (mcp 2.3).
    """
    return cast("object", getattr(ctx.session, "_connection", ctx.session))


class Offers:
    """Resources, prompts, completion and logging for one server (its handlers)."""

    def __init__(
        self,
        *,
        resources: Sequence[ServedResource | ServedResourceTemplate] = (),
        prompts: Sequence[ServedPrompt] = (),
        skills: SkillCatalog | None = None,
    ) -> None:
        self.fixed = {r.uri: r for r in resources if isinstance(r, ServedResource)}
        self.templates = [
            (r, _pattern(r.uri_template))
            for r in resources
            if isinstance(r, ServedResourceTemplate)
        ]
        self.prompts = {p.name: p for p in prompts}
        self.skills = skills
        self._levels: WeakKeyDictionary[object, int] = WeakKeyDictionary()
        self._subscribed: WeakKeyDictionary[object, set[str]] = WeakKeyDictionary()

    # resources

    async def list_resources(
        self, ctx: _Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=r.uri,
                    name=r.name,
                    description=r.description or None,
                    mime_type=r.mime_type,
                )
                for r in self.fixed.values()
            ]
        )

    async def list_templates(
        self, ctx: _Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    uri_template=t.uri_template,
                    name=t.name,
                    description=t.description or None,
                    mime_type=t.mime_type,
                )
                for t, _ in self.templates
            ]
        )

    async def read_resource(
        self, ctx: _Ctx, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        fixed = self.fixed.get(uri)
        if fixed is not None:
            value = await self.read(fixed)
            return types.ReadResourceResult(contents=[_contents(uri, fixed.mime_type, value)])
        for template, pattern in self.templates:
            found = pattern.match(uri)
            if found is not None:
                value = await _call(template.read, **found.groupdict())
                return types.ReadResourceResult(
                    contents=[_contents(uri, template.mime_type, value)]
                )
        raise MCPError(_RESOURCE_NOT_FOUND, f"no resource {uri!r}")

    @staticmethod
    async def read(resource: ServedResource) -> str | bytes:
        """A fixed resource's content (its text, its bytes, or what its ``read`` returns)."""
        if resource.read is not None:
            return await _call(resource.read)
        return resource.text if resource.text is not None else cast("bytes", resource.blob)

    def _known(self, uri: str) -> bool:
        return uri in self.fixed or any(p.match(uri) for _, p in self.templates)

    async def subscribe(self, ctx: _Ctx, params: types.SubscribeRequestParams) -> types.EmptyResult:
        uri = str(params.uri)
        if not self._known(uri):
            raise MCPError(_RESOURCE_NOT_FOUND, f"no resource {uri!r}")
        self._subscribed.setdefault(_client(ctx), set()).add(uri)
        return types.EmptyResult()

    async def unsubscribe(
        self, ctx: _Ctx, params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        self._subscribed.get(_client(ctx), set()).discard(str(params.uri))
        return types.EmptyResult()

    # prompts

    async def list_prompts(
        self, ctx: _Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        listed = [
            types.Prompt(
                name=p.name,
                description=p.description or None,
                arguments=[
                    types.PromptArgument(
                        name=a.name, description=a.description or None, required=a.required
                    )
                    for a in p.arguments
                ]
                or None,
            )
            for p in self.prompts.values()
        ]
        if self.skills is not None:
            catalog = self.skills
            found = await anyio.to_thread.run_sync(lambda: catalog.skills)
            listed += [
                types.Prompt(name=s.name, description=s.description)
                for s in found
                if s.name not in self.prompts
            ]
        return types.ListPromptsResult(prompts=listed)

    async def get_prompt(
        self, ctx: _Ctx, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        prompt = self.prompts.get(params.name)
        if prompt is None:
            return await self._skill_prompt(params.name)
        given = dict(params.arguments or {})
        declared = {a.name for a in prompt.arguments}
        unknown = sorted(set(given) - declared)
        missing = [a.name for a in prompt.arguments if a.required and a.name not in given]
        if unknown or missing:
            problem = f"unknown arguments {unknown}" if unknown else f"missing arguments {missing}"
            raise MCPError(types.INVALID_PARAMS, f"prompt {prompt.name!r}: {problem}")
        rendered = await _call(prompt.render, **given)
        parts: Sequence[PromptPart] = [rendered] if isinstance(rendered, str) else rendered
        messages = [
            types.PromptMessage(role="user", content=await self._block(p, prompt.name))
            for p in parts
        ]
        return types.GetPromptResult(description=prompt.description or None, messages=messages)

    async def _block(
        self, part: object, prompt: str
    ) -> types.TextContent | types.ImageContent | types.EmbeddedResource:
        if isinstance(part, str):
            return types.TextContent(text=part)
        if isinstance(part, ImagePart) and part.data is not None:
            return types.ImageContent(data=part.data, mime_type=part.media_type)
        if isinstance(part, ServedResource):
            value = await self.read(part)
            return types.EmbeddedResource(resource=_contents(part.uri, part.mime_type, value))
        raise MCPError(
            types.INTERNAL_ERROR,
            f"prompt {prompt!r} rendered a {type(part).__name__}: give text, an ImagePart "
            "with data, or a ServedResource",
        )

    async def _skill_prompt(self, name: str) -> types.GetPromptResult:
        catalog = self.skills
        skill = await anyio.to_thread.run_sync(catalog.get, name) if catalog else None
        if catalog is None or skill is None:
            raise MCPError(types.INVALID_PARAMS, f"no prompt named {name!r}")
        text = await anyio.to_thread.run_sync(_whole_body, catalog, name)
        message = types.PromptMessage(role="user", content=types.TextContent(text=text))
        return types.GetPromptResult(description=skill.description, messages=[message])

    # completion

    async def complete(
        self, ctx: _Ctx, params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        ref, argument = params.ref, params.argument
        source: Sequence[str] | Completer | None = None
        if isinstance(ref, types.PromptReference):
            prompt = self.prompts.get(ref.name)
            arg = (
                next((a for a in prompt.arguments if a.name == argument.name), None)
                if prompt
                else None
            )
            if arg is not None:
                source = arg.complete if arg.complete is not None else arg.choices
        else:
            template = next((t for t, _ in self.templates if t.uri_template == ref.uri), None)
            source = template.complete.get(argument.name) if template is not None else None
        typed = argument.value
        values: Sequence[str] = ()
        if callable(source):
            values = await _call(lambda prefix: source(prefix), prefix=typed)
        elif source is not None:
            values = [v for v in source if v.lower().startswith(typed.lower())]
        values = [str(v) for v in values]
        return types.CompleteResult(
            completion=types.Completion(
                values=values[:MAX_COMPLETIONS],
                total=len(values),
                has_more=len(values) > MAX_COMPLETIONS,
            )
        )

    # logging

    async def set_level(self, ctx: _Ctx, params: types.SetLevelRequestParams) -> types.EmptyResult:
        self._levels[_client(ctx)] = LOG_LEVELS.index(params.level)
        return types.EmptyResult()

    @asynccontextmanager
    async def logs(self, ctx: _Ctx) -> AsyncIterator[None]:
        """Inside: a tool's log messages go to ``ctx``'s client, at or above its level."""
        # A 2026-07-28 request carries its own level, which the SDK applies itself.
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        floor = 0 if modern else self._levels.get(_client(ctx), LOG_LEVELS.index("info"))
        send, receive = anyio.create_memory_object_stream[tuple[LogLevel, str, str, Any]](
            max_buffer_size=1000
        )

        def sink(level: LogLevel, tool: str, message: str, data: Any) -> None:
            if LOG_LEVELS.index(level) < floor:
                return
            try:
                send.send_nowait((level, tool, message, data))
            except anyio.WouldBlock:  # a tool logging faster than the client reads: dropped
                log.debug("dropped a log message of %s", tool)

        async def forward() -> None:
            async with receive:
                async for level, tool, message, data in receive:
                    body = (
                        {"message": message} if data is None else {"message": message, "data": data}
                    )
                    try:
                        with warnings.catch_warnings():  # (no await inside: no other task sees it)
                            # The SDK marks logging deprecated as of 2026-07-28; it still
                            # delivers it, and filters by the request's level in that era.
                            warnings.simplefilter("ignore", MCPDeprecationWarning)
                            sending = ctx.session.send_log_message(
                                level, body, logger=tool, related_request_id=ctx.request_id
                            )
                        await sending
                    except Exception:  # a client gone: never fatal to the call
                        log.debug("could not forward a log message of %s", tool, exc_info=True)

        async with anyio.create_task_group() as tg:
            tg.start_soon(forward)
            try:
                with log_sink(sink):
                    yield
            finally:
                send.close()


def _whole_body(skills: SkillCatalog, name: str) -> str:
    parts: list[str] = []
    offset: int | None = 0
    while offset is not None:
        page = skills.read(name, offset)
        parts.append(page.text)
        offset = page.next_offset
    return "".join(parts)
