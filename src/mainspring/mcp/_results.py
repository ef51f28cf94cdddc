"""A server tool's result as a mainspring tool output; its progress as ``tool_progress``.

Nothing a server sends is trusted: text is cut to the server's output budget
with the full size reported, images are bounded in number
(:data:`MAX_IMAGES`) and in bytes (:data:`MAX_IMAGE_BYTES`) with the
dropped ones named in the text, progress numbers are clamped and messages
shortened. The latest results are kept for audit (:class:`Audit`), bounded:
a result larger than ``audit_chars`` is kept cut to that size, and goes
whole to the artifact store when the manager has one.
"""

from __future__ import annotations

import json
import logging
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

import anyio.to_thread
from pydantic import JsonValue
from pydantic_core import to_jsonable_python

from mainspring.messages import ImagePart
from mainspring.tools.define import ToolOutput

if TYPE_CHECKING:
    from mainspring.stores.artifacts import ArtifactStore

try:
    import mcp.types as mcp_types
    from mcp.shared.dispatcher import ProgressFnT
except ImportError as exc:
    raise ImportError('McpClientManager needs: pip install "mainspring[mcp]"') from exc

__all__ = [
    "MAX_IMAGES",
    "MAX_IMAGE_BYTES",
    "Audit",
    "Progress",
    "RawResult",
    "block_text",
    "cut_result",
    "output_of",
    "progress_callback",
    "result_size",
]

logger = logging.getLogger("mainspring.mcp.client")

Progress: TypeAlias = Callable[[str, "float | None"], None]
"""Receives a call's progress: a message and a percentage when known."""

_PROGRESS_MESSAGE_CHARS = 500

MAX_IMAGES = 8
"""The most images one MCP tool result hands the model; the others are named in its text."""
MAX_IMAGE_BYTES = 10_000_000
"""The most image data (decoded bytes) one MCP tool result hands the model, all images together."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RawResult:
    """A call's result as the server sent it, kept for audit (bounded: see ``complete``)."""

    server: str
    tool: str
    arguments: dict[str, JsonValue]
    result: mcp_types.CallToolResult
    """The result; cut to the manager's ``audit_chars`` when ``complete`` is false."""
    truncated: bool
    """Whether the model saw it cut to the server's ``output_budget``."""
    size: int = 0
    """Characters of the whole result's content (text, data, structured content)."""
    complete: bool = True
    """Whether ``result`` is the whole result."""
    artifact: str | None = None
    """The artifact URI of the whole result (JSON), when it was too large to keep here."""


class Audit:
    """The latest raw results, bounded in number and in size."""

    def __init__(
        self, *, limit: int, max_chars: int, artifacts: ArtifactStore | None = None
    ) -> None:
        """Keep ``limit`` results of at most ``max_chars`` characters each (in memory)."""
        self.results: deque[RawResult] = deque(maxlen=limit)
        self.max_chars = max_chars
        self.artifacts = artifacts

    async def output(
        self,
        result: mcp_types.CallToolResult,
        *,
        server: str,
        tool: str,
        arguments: dict[str, JsonValue],
        resources: bool,
        budget: int,
    ) -> ToolOutput:
        """The output the model sees; the result is recorded (cut or stored when large).

        Safe to cancel: the result is then neither stored nor recorded.
        """
        size = result_size(result)
        kept, artifact = result, None
        note = "the full result is kept for audit"
        if size > self.max_chars:
            kept = cut_result(result, self.max_chars)
            artifact = await self._store(server, tool, result)
            note = f"the full result is stored as {artifact}" if artifact else "the rest is dropped"
        output, truncated = output_of(
            result, server=server, resources=resources, budget=budget, note=note
        )
        self.results.append(
            RawResult(
                server=server,
                tool=tool,
                arguments=arguments,
                result=kept,
                truncated=truncated,
                size=size,
                complete=kept is result,
                artifact=artifact,
            )
        )
        return output

    async def _store(self, server: str, tool: str, result: mcp_types.CallToolResult) -> str | None:
        if self.artifacts is None:
            return None
        try:
            data = await anyio.to_thread.run_sync(_json_bytes, result)
            ref = await self.artifacts.put(
                f"mcp/{server}", data, name=tool, content_type="application/json"
            )
        except Exception as exc:  # (too large for the store, or the store failed)
            logger.warning("MCP server %r: a result of %r was not stored: %s", server, tool, exc)
            return None
        return ref.uri


def _json_bytes(result: mcp_types.CallToolResult) -> bytes:
    return result.model_dump_json(by_alias=True, exclude_none=True).encode()


def result_size(result: mcp_types.CallToolResult) -> int:
    """Characters of a result's content: text, binary data (base64) and structured content."""
    size = sum(len(_payload(block)) for block in result.content)
    if result.structured_content is not None:
        size += len(json.dumps(to_jsonable_python(result.structured_content)))
    return size


def cut_result(result: mcp_types.CallToolResult, limit: int) -> mcp_types.CallToolResult:
    """A copy of ``result`` holding at most ``limit`` characters of its content.

    Text is cut; binary data (which cannot be cut) and structured content that
    do not fit are replaced by a note of their size.
    """
    blocks: list[mcp_types.ContentBlock] = []
    left = limit
    for block in result.content:
        payload = _payload(block)
        if len(payload) <= left:
            blocks.append(block)
            left -= len(payload)
        elif isinstance(block, mcp_types.TextContent):
            blocks.append(block.model_copy(update={"text": block.text[:left]}))
            left = 0
        else:
            note = f"[{type(block).__name__} of {len(payload)} characters not kept]"
            blocks.append(mcp_types.TextContent(type="text", text=note))
    structured = result.structured_content
    if structured is not None and len(json.dumps(to_jsonable_python(structured))) > left:
        structured = None
    return result.model_copy(update={"content": blocks, "structured_content": structured})


def _payload(block: mcp_types.ContentBlock) -> str:
    if isinstance(block, mcp_types.TextContent):
        return block.text
    if isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
        return block.data
    if isinstance(block, mcp_types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, mcp_types.TextResourceContents):
            return resource.text
        return resource.blob
    return ""


def output_of(
    result: mcp_types.CallToolResult,
    *,
    server: str,
    resources: bool,
    budget: int,
    note: str = "the full result is kept for audit",
) -> tuple[ToolOutput, bool]:
    """The output the model sees, and whether its text was cut to ``budget``.

    A cut text ends with its full size and ``note`` (where the rest is).
    Images past :data:`MAX_IMAGES` or :data:`MAX_IMAGE_BYTES` are dropped
    and named at the end of the text (after any cut, so the model sees it).
    """
    texts: list[str] = []
    images: list[ImagePart] = []
    dropped: list[str] = []
    image_bytes = 0
    for block in result.content:
        if isinstance(block, mcp_types.ImageContent):
            size = _decoded_size(block.data)
            if len(images) < MAX_IMAGES and image_bytes + size <= MAX_IMAGE_BYTES:
                images.append(ImagePart(media_type=block.mime_type, data=block.data))
                image_bytes += size
            else:
                dropped.append(f"{block.mime_type[:100]} of {size} bytes")
        elif isinstance(block, mcp_types.ResourceLink) and resources:
            texts.append(
                f"[resource link: {block.uri} ({block.name[:100]}); "
                f"read it with mcpr__{server}__read]"
            )
        else:
            texts.append(block_text(block))
    if not texts and result.structured_content is not None:
        texts.append(json.dumps(to_jsonable_python(result.structured_content)))
    text = "\n".join(texts)
    truncated = len(text) > budget
    if truncated:
        text = text[:budget] + f"\n[truncated: showing {budget} of {len(text)} characters; {note}]"
    if dropped:
        named = ", ".join(dropped[:5]) + (
            f" and {len(dropped) - 5} more" if len(dropped) > 5 else ""
        )
        text += (
            f"\n[{len(dropped)} image(s) not shown: {named}; a result shows at most "
            f"{MAX_IMAGES} images and {MAX_IMAGE_BYTES} bytes of images]"
        )
    output = ToolOutput(content=text, is_error=bool(result.is_error), images=tuple(images))
    return output, truncated


def _decoded_size(data: str) -> int:
    """The bytes a base64 string decodes to (not decoded: the string may be large)."""
    return len(data) * 3 // 4 - len(data[-2:]) + len(data[-2:].rstrip("="))


def progress_callback(report: Progress | None) -> ProgressFnT:
    """An SDK progress callback feeding ``report`` (a server's numbers are not trusted)."""

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        if report is None:
            return
        pct: float | None = None
        if total is not None and math.isfinite(total) and total > 0 and math.isfinite(progress):
            pct = min(100.0, max(0.0, progress / total * 100))
        text = (message or "")[:_PROGRESS_MESSAGE_CHARS]
        if not text:
            text = f"{progress:g}" if total is None else f"{progress:g} of {total:g}"
        report(text, pct)

    return on_progress


def block_text(block: mcp_types.ContentBlock) -> str:
    if isinstance(block, mcp_types.TextContent):
        return block.text
    if isinstance(block, mcp_types.ImageContent):
        return f"[image: {block.mime_type}]"
    if isinstance(block, mcp_types.AudioContent):
        return f"[audio: {block.mime_type}]"
    if isinstance(block, mcp_types.ResourceLink):
        return f"[resource: {block.uri}]"
    resource = block.resource
    if isinstance(resource, mcp_types.TextResourceContents):
        return resource.text
    return f"[binary resource: {resource.uri}]"
