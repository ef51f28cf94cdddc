"""Memory tools for the model: ``remember``, ``recall`` and ``forget``.

Built with ``@tool``, so every call passes the one dispatch path (permission
rules, guards, hooks, the approval gate)::

    memory = await open_memory_store("sqlite:///agent.db", embedder=HashingEmbedder())
    agent = Agent(model=..., tools=memory_tools(memory), memory=memory)

- ``remember`` (auto tier) hands the text to a :class:`~mainspring.memory.MemoryWriter`
  and returns at once: a slow or failing store never holds up the turn.
- ``recall`` (read-only) lists at most ``max_results`` items, each cut to
  ``max_item_chars``, with its id and score.
- ``forget`` is confirm-tier and irreversible: it pauses the turn with a
  pending action until the user approves.

``scope`` names the memory namespace. By default it is the caller's own with
this agent (``ctx.data_scope``: ``principal/<kind>/<id>/agent/<agent>``), so a
server's principals never recall, or forget, each other's memories; the
per-turn memory layer (``ContextOptions.memory_scope=None``, its default)
recalls from the same one. A string is one namespace shared by every caller,
an explicit choice (``scope=DEFAULT_SCOPE`` reaches memories saved before
memories were kept per caller); a function of the call's
:class:`~mainspring.tools.context.ToolContext` picks its own (give the
memory layer the same).
"""

from __future__ import annotations

from collections.abc import Callable

from mainspring.errors import ConfigError
from mainspring.memory import MemoryStore, MemoryWriter
from mainspring.tools.context import ToolContext
from mainspring.tools.define import Tool, tool
from mainspring.tools.policy import Flag

__all__ = ["MAX_MEMORY_CHARS", "memory_tools", "own_scope"]

MAX_MEMORY_CHARS = 2_000
"""The longest text ``remember`` accepts."""

Scope = str | Callable[[ToolContext], str]


def own_scope(ctx: ToolContext) -> str:
    """The default memory scope: the caller's own with this agent (``ctx.data_scope``)."""
    return ctx.data_scope


def memory_tools(
    store: MemoryStore,
    *,
    scope: Scope = own_scope,
    writer: MemoryWriter | None = None,
    max_results: int = 10,
    max_item_chars: int = 500,
) -> list[Tool]:
    """``remember``, ``recall`` and ``forget`` over ``store``.

    Args:
        store: Where memories live.
        scope: The caller's own namespace with this agent by default; a string
            is one namespace every caller shares (an explicit opt-in), a
            function of the call's context returns the namespace to use.
        writer: Writes ``remember`` calls in the background (default: a
            :class:`MemoryWriter` on ``store`` with its default timeout).
        max_results: The most items one ``recall`` returns.
        max_item_chars: Each recalled text is cut to this many characters.

    Raises:
        ConfigError: ``max_results`` or ``max_item_chars`` is not positive.
    """
    if max_results < 1 or max_item_chars < 1:
        raise ConfigError("max_results and max_item_chars must be positive")
    background = writer if writer is not None else MemoryWriter(store)

    def namespace(ctx: ToolContext) -> str:
        return scope(ctx) if callable(scope) else scope

    @tool(name="remember", flags={Flag.MUTATING})
    async def remember(text: str, ctx: ToolContext) -> str:
        """Remember a fact for later conversations (saved in the background).

        Args:
            text: One self-contained fact, e.g. "The user prefers metric units".
            ctx: The run context (not shown to the model).
        """
        if len(text) > MAX_MEMORY_CHARS:
            raise ValueError(f"a memory is at most {MAX_MEMORY_CHARS} characters")
        meta = {"session_id": ctx.session_id, "agent": ctx.agent_name}
        if not background.remember(text, scope=namespace(ctx), meta=meta):
            raise RuntimeError("too many memories are being saved; try again later")
        return "will remember that"

    @tool(name="recall", read_only=True)
    async def recall(query: str, ctx: ToolContext, k: int = 5) -> str:
        """Search your long-term memory; lists the best matches with their ids.

        Args:
            query: What to look for, in plain words.
            ctx: The run context (not shown to the model).
            k: How many memories to return (at most the tool's limit).
        """
        items = await store.recall(query, k=max(1, min(k, max_results)), scope=namespace(ctx))
        if not items:
            return "no memories match"
        lines = []
        for item in items:
            text = " ".join(item.text.split())
            if len(text) > max_item_chars:
                text = text[: max_item_chars - 1] + "…"
            lines.append(f"- [{item.id}] {text} (score {item.score:.3f})")
        return "\n".join(lines)

    @tool(name="forget", permission="confirm", flags={Flag.MUTATING, Flag.IRREVERSIBLE})
    async def forget(memory_id: str, ctx: ToolContext) -> str:
        """Delete one memory for good (asks the user first).

        Args:
            memory_id: The id ``recall`` showed in brackets.
            ctx: The run context (not shown to the model).
        """
        if await store.forget(memory_id, scope=namespace(ctx)):
            return f"forgot {memory_id}"
        raise LookupError(f"no memory {memory_id!r}")

    return [remember, recall, forget]
