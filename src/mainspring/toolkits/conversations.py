"""Conversation memory (opt-in): a principal's past sessions, searchable by the model.

The host decides whose conversations these are (the principal: a user id, an
account) and records each session's text as it goes; the model gets one
read-only tool to search the principal's *other* sessions::

    history = ConversationMemory(memory_store, principal="user-42")
    agent = Agent(model=..., tools=[*history.tools()])
    session = Session(agent)
    async for event in session.send("hello"):
        ...
    await history.record(session.session_id, session.messages)   # after each turn

Each user and assistant text becomes one memory in the scope
``conversations:<principal>`` (so one principal never sees another's), with
``session_id``, ``seq`` (its index in the transcript) and ``role`` in its
meta. :meth:`ConversationMemory.record` remembers only the messages after the
ones it already recorded for that session (in this process; pass ``start=``
after a restart). Tool calls and results are not recorded.
"""

from __future__ import annotations

from collections.abc import Sequence

from mainspring.errors import ConfigError
from mainspring.memory import MemoryStore, check_scope
from mainspring.messages import Message
from mainspring.tools.context import ToolContext
from mainspring.tools.define import Tool, tool

__all__ = ["ConversationMemory"]


class ConversationMemory:
    """One principal's conversations in a :class:`~mainspring.memory.MemoryStore`."""

    def __init__(
        self,
        store: MemoryStore,
        *,
        principal: str,
        max_chars: int = 2_000,
        max_results: int = 10,
    ) -> None:
        """Conversations of ``principal`` in ``store``.

        Args:
            store: Where the texts are kept (hybrid recall if it has an embedder).
            principal: Whose conversations these are; the namespace.
            max_chars: Longer messages are cut to this many characters when recorded.
            max_results: The most hits one search returns.

        Raises:
            ConfigError: An empty principal, or limits that are not positive.
        """
        if not principal:
            raise ConfigError("a conversation memory needs a principal (a non-empty str)")
        if max_chars < 1 or max_results < 1:
            raise ConfigError("max_chars and max_results must be positive")
        self._store = store
        self.scope = check_scope(f"conversations:{principal}")
        """The memory scope: ``conversations:<principal>``."""
        self._max_chars = max_chars
        self._max_results = max_results
        self._recorded: dict[str, int] = {}

    async def record(
        self, session_id: str, messages: Sequence[Message], *, start: int | None = None
    ) -> int:
        """Remember the session's user and assistant texts not recorded yet; how many.

        Raises:
            StoreError: The store failed (what was remembered before it stays).
        """
        first = self._recorded.get(session_id, 0) if start is None else start
        count = 0
        for seq in range(max(first, 0), len(messages)):
            message = messages[seq]
            text = message.text.strip() if message.role in ("user", "assistant") else ""
            if text:
                await self._store.remember(
                    text[: self._max_chars],
                    scope=self.scope,
                    meta={"session_id": session_id, "seq": seq, "role": message.role},
                )
                count += 1
            self._recorded[session_id] = seq + 1
        return count

    def tools(self) -> list[Tool]:
        """``search_conversations``: read-only, over the principal's other sessions."""
        store, scope, limit = self._store, self.scope, self._max_results

        @tool(name="search_conversations", read_only=True)
        async def search_conversations(query: str, ctx: ToolContext, k: int = 5) -> str:
            """Search this user's earlier conversations with you.

            Args:
                query: What to look for, in plain words.
                ctx: The run context (not shown to the model).
                k: How many passages to return.
            """
            want = max(1, min(k, limit))
            items = await store.recall(query, k=min(4 * want, 4 * limit), scope=scope)
            lines: list[str] = []
            for item in items:
                if item.meta.get("session_id") == ctx.session_id:
                    continue  # the current conversation is in the context already
                text = " ".join(item.text.split())[:500]
                lines.append(
                    f"- (session {item.meta.get('session_id')}, {item.meta.get('role')}) {text}"
                )
                if len(lines) == want:
                    break
            return "\n".join(lines) if lines else "no earlier conversation matches"

        return [search_conversations]
