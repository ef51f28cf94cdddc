"""ContextOptions: the context pipeline's knobs in one object (like httpx's ``Limits``).

```python
Agent(model=..., context=ContextOptions(budget=100_000, summarizer=model_summarizer(m)))
```
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from mainspring._lowlevel.frozen import dataclass
from mainspring.errors import ConfigError

if TYPE_CHECKING:
    from mainspring.context.accounting import Accounting
    from mainspring.context.compaction import Summarizer
    from mainspring.context.pipeline import Module

__all__ = ["ContextOptions"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextOptions:
    """How an agent's sessions build their context and keep it within room."""

    budget: int | None = 200_000
    """History tokens before compaction (it starts at 85%); ``None`` turns it off."""
    microcompact: bool = True
    """Show a large repeated identical tool result once, once the history passes the
    compaction trigger: the newest copy in full, the older one as a note pointing to
    it (see :class:`~mainspring.context.Microcompact`). Nothing is collapsed without
    a ``budget``: with no pressure on room, cache hits are worth more."""
    summarizer: Summarizer | None = None
    """Writes compaction summaries when pruning old tool results is not enough."""
    memory_k: int = 5
    """Items the memory layer recalls for each turn's user message."""
    memory_scope: str | None = None
    """The memory store's scope the layer recalls from: ``None`` is the running caller's
    own with this agent (where ``memory_tools`` saves by default); a string is one scope
    for every caller (``"default"`` holds memories saved before they were per caller)."""
    memory_timeout: float = 5.0
    """Seconds the memory layer waits for a recall before the turn goes on without it."""
    modules: Sequence[Module | Callable[[], Module]] = ()
    """More context modules; give factories for modules that keep per-session state."""
    accounting: Accounting | None = None
    """Per-source token accounting and snapshots (off by default)."""
    retain_turns: int | None = None
    """Turn snapshots a session keeps in memory (the newest; ``None`` keeps all).
    Sinks still get every snapshot, and the session summary counts every turn."""

    def __post_init__(self) -> None:
        if self.memory_k < 1:
            raise ConfigError("memory_k must be at least 1")
        if self.retain_turns is not None and self.retain_turns < 1:
            raise ConfigError("retain_turns must be at least 1 (or None to keep every turn)")
        if not self.memory_timeout > 0:
            raise ConfigError("memory_timeout must be positive")
        if self.budget is not None and self.budget < 1:
            raise ConfigError("the context budget must be positive (or None for no compaction)")
