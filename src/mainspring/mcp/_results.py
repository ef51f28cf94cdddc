"""A server tool's result as a mainspring tool output; its progress as ``tool_progress``.

Nothing a server sends is trusted: text is cut to the server's output budget
(the whole result kept for audit in :class:`RawResult`), progress numbers are
clamped and messages shortened.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeAlias

from pydantic import JsonValue
from pydantic_core import to_jsonable_python

from mainspring.messages import ImagePart
from mainspring.tools.define import ToolOutput

try:
    import mcp.types as mcp_types
    from mcp.shared.dispatcher import ProgressFnT
except ImportError as exc:
    raise ImportError('McpClientManager needs: pip install "mainspring[mcp]"') from exc

__all__ = ["Progress", "RawResult", "block_text", "output_of", "progress_callback"]

Progress: TypeAlias = Callable[[str, "float | None"], None]
"""Receives a call's progress: a message and a percentage when known."""

_PROGRESS_MESSAGE_CHARS = 500


@dataclass(frozen=True, slots=True, kw_only=True)
class RawResult:
    """A call's untruncated result, kept for audit."""

    server: str
    tool: str
    arguments: dict[str, JsonValue]
    result: mcp_types.CallToolResult
    truncated: bool


def output_of(
    result: mcp_types.CallToolResult, *, server: str, resources: bool, budget: int
) -> tuple[ToolOutput, bool]:
    """The output the model sees, and whether its text was cut to ``budget``."""
    texts: list[str] = []
    images: list[ImagePart] = []
    for block in result.content:
        if isinstance(block, mcp_types.ImageContent):
            images.append(ImagePart(media_type=block.mime_type, data=block.data))
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
        text = (
            text[:budget] + f"\n[truncated: showing {budget} of {len(text)} characters; "
            "the full result is kept for audit]"
        )
    output = ToolOutput(content=text, is_error=bool(result.is_error), images=tuple(images))
    return output, truncated


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
