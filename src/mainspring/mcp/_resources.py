"""A server's resources as two read-only tools the model can call, bounded.

``mcpr__<server>__list`` pages through the resources and resource templates;
``mcpr__<server>__read`` reads one URI (from the list, a filled-in template,
or a resource link in a tool result). Tool names of servers are always
``mcp__…``, so the ``mcpr__`` prefix can never collide with one. Text is cut
at the server's ``output_budget``; an image comes back as an image (when
small enough), any other binary content as a note naming it.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Annotated

from pydantic import Field, JsonValue

from mainspring.messages import ImagePart
from mainspring.tools.define import Tool, ToolOutput, tool

try:
    import mcp.types as mcp_types
except ImportError as exc:
    raise ImportError('McpClientManager needs: pip install "mainspring[mcp]"') from exc

__all__ = ["MAX_IMAGE_BYTES", "PAGE", "list_page_text", "read_output", "resource_tools"]

PAGE = 50
"""Resources (and templates) shown per list call at most."""
MAX_IMAGE_BYTES = 5_000_000
"""A larger image resource is described, not sent."""

Lister = Callable[[str | None], Awaitable[ToolOutput]]
Reader = Callable[[str], Awaitable[ToolOutput]]


def list_page_text(
    resources: list[mcp_types.Resource],
    templates: list[mcp_types.ResourceTemplate],
    next_cursor: str | None,
    *,
    budget: int,
) -> str:
    """One page of a server's resources as JSON, at most ``budget`` characters."""
    page: dict[str, object] = {
        "resources": [
            {
                k: v
                for k, v in {
                    "uri": str(r.uri),
                    "name": r.name,
                    "description": (r.description or "")[:300],
                    "mimeType": r.mime_type,
                }.items()
                if v
            }
            for r in resources[:PAGE]
        ],
        "templates": [
            {
                "uriTemplate": t.uri_template,
                "name": t.name,
                "description": (t.description or "")[:300],
            }
            for t in templates[:PAGE]
        ],
        "next_cursor": next_cursor,
    }
    text = json.dumps(page, ensure_ascii=False)
    if len(text) > budget:
        text = text[:budget] + f"\n[truncated at {budget} characters]"
    return text


def read_output(result: mcp_types.ReadResourceResult, *, budget: int) -> ToolOutput:
    """A resource's contents as a tool result: text (bounded), images, notes for the rest."""
    texts: list[str] = []
    images: list[ImagePart] = []
    for item in result.contents:
        if isinstance(item, mcp_types.TextResourceContents):
            texts.append(item.text)
            continue
        mime = item.mime_type or "application/octet-stream"
        try:
            size = len(base64.b64decode(item.blob, validate=True))
        except (binascii.Error, ValueError):
            texts.append(f"[resource {item.uri}: invalid base64 content]")
            continue
        if mime.startswith("image/") and size <= MAX_IMAGE_BYTES:
            images.append(ImagePart(media_type=mime, data=item.blob))
            texts.append(f"[image {item.uri} ({mime})]")
        else:
            texts.append(f"[binary resource {item.uri} ({mime}, {size} bytes) not shown]")
    text = "\n".join(texts)
    if len(text) > budget:
        text = text[:budget] + f"\n[truncated: showing {budget} of {len(text)} characters]"
    return ToolOutput(content=text, images=tuple(images))


def resource_tools(server: str, *, list_page: Lister, read: Reader) -> list[Tool]:
    """The list and read tools of one server's resources."""
    where = f"MCP server {server!r}"

    @tool(
        name=f"mcpr__{server}__list",
        description=f"List the resources and URI templates of {where}, a page at a time.",
        read_only=True,
    )
    async def list_resources(
        cursor: Annotated[str | None, Field(max_length=4096)] = None,
    ) -> ToolOutput:
        """List resources.

        Args:
            cursor: The next_cursor of the previous page, to get the next one.
        """
        return await list_page(cursor)

    @tool(
        name=f"mcpr__{server}__read",
        description=(
            f"Read a resource of {where} by its URI (from the list, a filled-in "
            "template, or a resource link in a tool result)."
        ),
        read_only=True,
    )
    async def read_resource(
        uri: Annotated[str, Field(min_length=1, max_length=4096)],
    ) -> ToolOutput:
        """Read a resource.

        Args:
            uri: The resource's URI.
        """
        return await read(uri)

    meta: dict[str, JsonValue] = {"mcp_server": server, "mcp_resources": True}
    return [replace(t, meta=dict(meta)) for t in (list_resources, read_resource)]
