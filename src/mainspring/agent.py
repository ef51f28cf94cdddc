"""Agent: a declarative definition of what runs a conversation.

An agent names its model, instructions, tools (and an allowlist over them),
permission rules, guards, hooks and limits. It holds no conversation state;
a :class:`~mainspring.session.Session` does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from mainspring.cost import ModelPrice
from mainspring.errors import ConfigError
from mainspring.guards import Guard
from mainspring.hooks import AutoExecuted, Hooks
from mainspring.models.base import Model, ModelSettings, ToolSpec
from mainspring.permissions import PermissionRules
from mainspring.tools.define import Tool
from mainspring.tools.registry import ToolRegistry

__all__ = ["Agent"]


@dataclass(frozen=True, kw_only=True)
class Agent:
    """What an agent is: model, instructions, tools, policies and limits."""

    model: Model
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
    max_turns: int = 25
    """Model calls allowed in one turn."""
    budget_usd: float | None = None
    """Per-session spend limit; the run stops cleanly once it is reached."""
    prices: Mapping[str, ModelPrice] = field(default_factory=dict[str, ModelPrice])
    """USD per million tokens by model name."""
    model_settings: ModelSettings = ModelSettings()
    microcompact: bool = True
    write_cancel_grace: float = 30.0
    """Seconds a running write may keep going after ``Session.cancel()``."""
    _tool_map: dict[str, Tool] = field(init=False, repr=False, compare=False)
    _specs: tuple[ToolSpec, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_turns < 1:
            raise ConfigError("max_turns must be at least 1")
        if self.budget_usd is not None and self.budget_usd < 0:
            raise ConfigError("budget_usd must not be negative")
        registry = self.tools if isinstance(self.tools, ToolRegistry) else ToolRegistry(self.tools)
        allowed = registry.allowed(self.allowed_tools)
        object.__setattr__(self, "_tool_map", {t.name: t for t in allowed})
        object.__setattr__(self, "_specs", tuple(t.spec for t in allowed))

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
