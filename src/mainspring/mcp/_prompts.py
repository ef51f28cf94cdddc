"""A server's prompts: listed page by page, rendered as text."""

from __future__ import annotations

from dataclasses import dataclass

from mainspring.mcp._results import block_text

try:
    import mcp.types as mcp_types
    from mcp.client.session import ClientSession
except ImportError as exc:
    raise ImportError('McpClientManager needs: pip install "mainspring[mcp]"') from exc

__all__ = ["McpPrompt", "prompt_text", "prompts_of"]


@dataclass(frozen=True, slots=True, kw_only=True)
class McpPrompt:
    """A prompt a server offers."""

    server: str
    name: str
    description: str = ""
    arguments: tuple[tuple[str, bool], ...] = ()
    """``(name, required)`` of each argument."""


async def prompts_of(session: ClientSession, server: str) -> list[McpPrompt]:
    """Every prompt ``server`` lists, all pages."""
    prompts: list[McpPrompt] = []
    cursor: str | None = None
    while True:
        params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_prompts(params=params)
        prompts.extend(
            McpPrompt(
                server=server,
                name=p.name,
                description=p.description or "",
                arguments=tuple((a.name, bool(a.required)) for a in p.arguments or ()),
            )
            for p in page.prompts
        )
        cursor = page.next_cursor
        if not cursor:
            return prompts


def prompt_text(result: mcp_types.GetPromptResult) -> str:
    """A rendered prompt's messages' text, in order."""
    return "\n\n".join(block_text(m.content) for m in result.messages)
