"""The five-layer prompt, as processors.

1. :class:`BaseSystemPrompt` — the agent's instructions (system, session).
2. :class:`ContextBlock` — a host-supplied block, e.g. a daily account
   snapshot (system, session; call :meth:`ContextCompiler.invalidate` with its
   id when the host's data changes).
3. :class:`MemoryRecall` — top-K items from a :class:`~mainspring.memory.MemoryStore`
   for the latest user message, recalled once per turn and reused by the
   turn's later model calls; attached to the latest user message (after the
   cache breakpoint). A failing store is logged and the turn goes on
   without the layer; so does one that takes longer than the layer's
   ``timeout``.
4. :class:`SkillRecipe` — a skill block (system, session by default).
5. The messages themselves.

Placement follows the cache: the session-scoped layers (1, 2, 4) form the
stable system prefix that ends at the prompt-cache breakpoint; memory (3)
changes every turn, so it sits after the history's cached part. An empty
layer contributes nothing.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from mainspring.context.pipeline import CacheScope, LastUserProcessor, Phase, SystemProcessor
from mainspring.errors import ConfigError

if TYPE_CHECKING:
    from mainspring.context._compilation import Compilation
    from mainspring.memory import MemoryItem, MemoryStore

__all__ = ["BaseSystemPrompt", "ContextBlock", "MemoryRecall", "SkillRecipe", "TextSource"]

log = logging.getLogger("mainspring.context")

TextSource = str | Callable[[], str | Awaitable[str]]
"""Text, or a function (sync or async) returning it."""


async def _resolve(source: TextSource) -> str:
    if isinstance(source, str):
        return source
    value = source()
    if inspect.isawaitable(value):
        value = await value
    if not isinstance(value, str):
        raise ConfigError(f"a text source returned {type(value).__name__}, not str")
    return value


class BaseSystemPrompt(SystemProcessor):
    """Layer 1: the base system prompt."""

    source = "system"

    def __init__(self, text: TextSource, *, id: str = "base-system") -> None:
        """``text``: the instructions (or a function returning them)."""
        super().__init__(id)
        self._text = text
        self.waits = not isinstance(text, str)  # a function's text may be awaited

    async def text(self, ctx: Compilation[Any]) -> str:
        """The instructions."""
        return await _resolve(self._text)


class ContextBlock(SystemProcessor):
    """Layer 2: a host-supplied context block (session-scoped: cached)."""

    phase: Phase = "stable-context"
    source = "context"

    def __init__(
        self,
        text: TextSource,
        *,
        id: str = "context-block",
        title: str | None = None,
        scope: CacheScope = "session",
    ) -> None:
        """``text`` (or a function returning it), optionally under a ``title`` heading."""
        super().__init__(id, scope=scope)
        self._text = text
        self._title = title
        self.waits = not isinstance(text, str)

    async def text(self, ctx: Compilation[Any]) -> str:
        """The block, or ``""`` when the host has nothing."""
        body = (await _resolve(self._text)).strip()
        if not body:
            return ""
        return f"## {self._title}\n\n{body}" if self._title else body


class SkillRecipe(SystemProcessor):
    """Layer 4: a skill block — e.g. a catalog's resident block or a chosen recipe."""

    phase: Phase = "stable-context"
    source = "skill"

    def __init__(
        self, text: TextSource, *, id: str = "skill-recipe", scope: CacheScope = "session"
    ) -> None:
        """``text`` (or a function returning it)."""
        super().__init__(id, scope=scope, after=("context-block",))
        self._text = text
        self.waits = not isinstance(text, str)

    async def text(self, ctx: Compilation[Any]) -> str:
        """The skill text."""
        return (await _resolve(self._text)).strip()


class MemoryRecall(LastUserProcessor):
    """Layer 3: recalled memories for the latest user message, once per turn."""

    source = "memory"

    def __init__(
        self,
        store: MemoryStore | None = None,
        *,
        k: int = 5,
        scope: str | None = None,
        agent: str = "",
        id: str = "memory-recall",
        heading: str = "Relevant memories:",
        timeout: float = 5.0,
    ) -> None:
        """Recall from ``store`` (default: the compiler's ``"memory"`` service).

        ``scope`` ``None`` (the default) is the running caller's own with
        ``agent`` (:func:`~mainspring.principals.data_scope`, the scope
        ``memory_tools`` saves to by default); a string is that scope, for
        every caller alike.

        A recall that takes more than ``timeout`` seconds is abandoned: the
        turn goes on without memories (counted in :attr:`failures`).
        """
        super().__init__(id)
        if k < 1:
            raise ConfigError(f"memory recall k must be at least 1, got {k}")
        if not timeout > 0:
            raise ConfigError(f"memory recall timeout must be positive, got {timeout}")
        self.timeout = timeout
        self._store = store
        self.k = k
        self.memory_scope = scope
        self.agent = agent
        self.heading = heading
        self.failures = 0
        """How many recalls failed (the turn went on without memories)."""

    async def text(self, ctx: Compilation[Any]) -> str:
        """The recalled items as a bullet list; ``""`` when none or the store failed."""
        key = f"memory-recall:{self.id}"
        if key in ctx.turn_cache:
            cached: str = ctx.turn_cache[key]
            return cached
        store = self._store or ctx.services.get("memory")
        query = ctx.last_user_text
        text = ""
        if store is not None and query.strip():
            try:
                with anyio.fail_after(self.timeout):
                    items = await store.recall(query, k=self.k, scope=self._scope())
            except Exception:  # degrade honestly: log it and go on without the layer
                self.failures += 1
                log.warning("memory recall failed; the turn goes on without it", exc_info=True)
                items = ()
            text = _render(self.heading, items)
        ctx.turn_cache[key] = text
        return text

    def _scope(self) -> str:
        if self.memory_scope is not None:
            return self.memory_scope
        from mainspring.principals import data_scope
        from mainspring.tools.context import current_caller

        return data_scope(current_caller(), self.agent)


def _render(heading: str, items: Sequence[MemoryItem]) -> str:
    lines = [f"- {item.text.strip()}" for item in items if item.text.strip()]
    return "\n".join([heading, *lines]) if lines else ""
