"""Agent: a declarative definition of what runs a conversation.

An agent names its model, instructions, tools (and an allowlist over them),
permission rules, guards, hooks and limits. It holds no conversation state;
a :class:`~mainspring.session.Session` does.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from mainspring.context.accounting import Accounting
from mainspring.context.compaction import Compaction, Summarizer
from mainspring.context.compiler import ContextCompiler
from mainspring.context.history import Microcompact
from mainspring.context.layers import (
    BaseSystemPrompt,
    ContextBlock,
    MemoryRecall,
    SkillRecipe,
    TextSource,
)
from mainspring.context.pipeline import Module, Processor
from mainspring.cost import ModelPrice
from mainspring.errors import ConfigError
from mainspring.guards import Guard
from mainspring.hooks import AutoExecuted, Hooks
from mainspring.models.base import Model, ModelSettings, ToolSpec
from mainspring.models.registry import model_from_string
from mainspring.permissions import PermissionRules
from mainspring.tools.define import Tool
from mainspring.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from mainspring.memory import MemoryStore
    from mainspring.messages import Message

__all__ = ["Agent", "Limits"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """What one turn may use: model steps, money, and time for a cancelled write.

    ```python
    Agent(model=..., limits=Limits(max_steps=10, budget_usd=0.50))
    ```
    """

    max_steps: int = 25
    """Model calls allowed in one turn (the turn then ends with ``stop_reason="max_turns"``)."""
    budget_usd: float | None = None
    """Per-session spend limit; the run stops cleanly once it is reached."""
    write_cancel_grace: float = 30.0
    """Seconds a running write may keep going after ``Session.cancel()``."""

    def __post_init__(self) -> None:
        if self.max_steps < 1:
            raise ConfigError("max_steps must be at least 1")
        if self.budget_usd is not None and self.budget_usd < 0:
            raise ConfigError("budget_usd must not be negative")
        if self.write_cancel_grace < 0:
            raise ConfigError("write_cancel_grace must not be negative")


@dataclass(frozen=True, kw_only=True)
class Agent:
    """What an agent is: model, instructions, tools, policies and limits."""

    model: Model | str
    """The model, or a model string such as ``"anthropic:claude-sonnet-4-5"`` (built
    by :func:`~mainspring.models.model_from_string`)."""
    name: str = "agent"
    instructions: str = ""
    tools: Sequence[Tool] | ToolRegistry = ()
    allowed_tools: Sequence[str] | None = None
    """Allowlist of tool names (trailing ``*`` wildcards); ``None`` allows all."""
    permissions: PermissionRules = PermissionRules()
    guards: Sequence[Guard] = ()
    hooks: Hooks = Hooks()
    on_auto_executed: AutoExecuted | None = None
    """Called after every auto-tier write."""
    limits: Limits = Limits()
    """Steps per turn, budget, write grace."""
    max_turns: int | None = None
    """Deprecated: ``limits=Limits(max_steps=…)`` (it counts model steps, not turns)."""
    budget_usd: float | None = None
    """Deprecated: ``limits=Limits(budget_usd=…)``."""
    prices: Mapping[str, ModelPrice] = field(default_factory=dict[str, ModelPrice])
    """USD per million tokens by model name."""
    model_settings: ModelSettings = ModelSettings()
    microcompact: bool = True
    """Show a large repeated identical tool result once, once the history passes the
    compaction trigger: the newest copy in full, the older one as a note pointing to
    it (see :class:`~mainspring.context.Microcompact`). Nothing is collapsed without
    a ``context_budget``: with no pressure on room, cache hits are worth more."""
    context_block: TextSource | None = None
    """Layer 2: a host-supplied block (text, or a function returning it)."""
    skill_recipe: TextSource | None = None
    """Layer 4: a skill block, e.g. ``SkillCatalog.resident_block()``."""
    memory: MemoryStore | None = None
    """Layer 3: recall the top ``memory_k`` items for each turn's user message."""
    memory_k: int = 5
    memory_scope: str = "default"
    context_budget: int | None = 200_000
    """History tokens before compaction (at 85%); ``None`` turns compaction off."""
    summarizer: Summarizer | None = None
    """Writes compaction summaries when pruning old tool results is not enough."""
    context_modules: Sequence[Module | Callable[[], Module]] = ()
    """More context modules; give factories for modules that keep per-session state."""
    accounting: Accounting | None = None
    """Per-source token accounting and snapshots (off by default)."""
    write_cancel_grace: float | None = None
    """Deprecated: ``limits=Limits(write_cancel_grace=…)``."""
    _tool_map: dict[str, Tool] = field(init=False, repr=False, compare=False)
    _specs: tuple[ToolSpec, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.model, str):
            object.__setattr__(self, "model", model_from_string(self.model))
        self._fold_deprecated_limits()
        if self.memory_k < 1:
            raise ConfigError("memory_k must be at least 1")
        if self.context_budget is not None and self.context_budget < 1:
            raise ConfigError("context_budget must be positive (or None for no compaction)")
        registry = self.tools if isinstance(self.tools, ToolRegistry) else ToolRegistry(self.tools)
        allowed = registry.allowed(self.allowed_tools)
        object.__setattr__(self, "_tool_map", {t.name: t for t in allowed})
        object.__setattr__(self, "_specs", tuple(t.spec for t in allowed))

    def _fold_deprecated_limits(self) -> None:
        given = [
            name
            for name, value in (
                ("max_turns", self.max_turns),
                ("budget_usd", self.budget_usd),
                ("write_cancel_grace", self.write_cancel_grace),
            )
            if value is not None
        ]
        if not given:
            return
        warnings.warn(
            f"Agent({'=…, '.join(given)}=…) is deprecated: use Agent(limits=Limits(...)) "
            "(max_turns is Limits.max_steps)",
            DeprecationWarning,
            stacklevel=4,
        )
        limits = self.limits
        if self.max_turns is not None:
            limits = replace(limits, max_steps=self.max_turns)
        if self.budget_usd is not None:
            limits = replace(limits, budget_usd=self.budget_usd)
        if self.write_cancel_grace is not None:
            limits = replace(limits, write_cancel_grace=self.write_cancel_grace)
        object.__setattr__(self, "limits", limits)
        for field_name in ("max_turns", "budget_usd", "write_cancel_grace"):
            object.__setattr__(self, field_name, None)  # folded: a replace() does not repeat it

    def context_compiler(
        self, messages: Iterable[Message] = (), *, session_id: str = ""
    ) -> ContextCompiler[Message]:
        """A new context compiler for one session of this agent.

        It holds the five layers, microcompact, compaction and the agent's own
        modules.
        """
        processors: list[Processor] = []
        if self.instructions:
            processors.append(BaseSystemPrompt(self.instructions))
        if self.context_block is not None:
            processors.append(ContextBlock(self.context_block))
        if self.skill_recipe is not None:
            processors.append(SkillRecipe(self.skill_recipe))
        if self.memory is not None:
            processors.append(MemoryRecall(self.memory, k=self.memory_k, scope=self.memory_scope))
        if self.microcompact and self.context_budget is not None:
            # Collapse repeats only where compaction would start to act anyway: below
            # that, the cache hits they would cost are worth more than their tokens.
            processors.append(Microcompact(over_tokens=int(0.85 * self.context_budget)))
        if self.context_budget is not None:
            processors.append(Compaction(self.context_budget, summarizer=self.summarizer))
        modules = [m if isinstance(m, Module) else m() for m in self.context_modules]
        return ContextCompiler(
            messages=messages,
            processors=processors,
            modules=modules,
            accounting=self.accounting,
            session_id=session_id,
            model=self.resolved_model.name,
        )

    @property
    def resolved_model(self) -> Model:
        """The model (a model string given to the constructor is built by then)."""
        model = self.model
        assert not isinstance(model, str), "built in __post_init__"
        return model

    def tool(self, name: str) -> Tool | None:
        """The tool this agent may use under ``name``, if any."""
        return self._tool_map.get(name)

    @property
    def tool_names(self) -> tuple[str, ...]:
        """Names of the tools this agent may use."""
        return tuple(self._tool_map)

    @property
    def tool_specs(self) -> tuple[ToolSpec, ...]:
        """What the model is told about the tools."""
        return self._specs
