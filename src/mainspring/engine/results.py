"""What an engine's direct calls and runs return, and what a caller may see of it.

:class:`AgentRun` and :class:`ToolCallResult` come back from
:meth:`~mainspring.engine.Engine.agent_run`, :meth:`~mainspring.engine.Engine.tool_call`
and :meth:`~mainspring.engine.Engine.decide`; :class:`EngineInfo` from
:meth:`~mainspring.engine.Engine.information`. They are plain records, so the
served routes (:mod:`mainspring.engine.remote`) put them on the wire without
knowing the engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import JsonValue

from mainspring.engine.policy import Visibility
from mainspring.events import Event, PendingAction, StopReason

__all__ = ["AgentRun", "EngineInfo", "ToolCallResult"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentRun:
    """How one agent run (or a continued one) came out."""

    agent: str
    text: str
    """The agent's last assistant text."""
    stop_reason: StopReason | None
    """``None`` when the run ended in an error event."""
    error: str | None = None
    pending: PendingAction | None = None
    """Set when the run paused: decide it with :meth:`Engine.decide`."""
    session_id: str = ""
    cost_usd: float = 0.0
    """The session's spend so far (its subagents' included)."""
    events: tuple[Event, ...] = field(default=(), repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallResult:
    """How one direct tool call came out: its result, or the action it waits on."""

    name: str
    content: str = ""
    is_error: bool = False
    ran: bool = False
    pending: PendingAction | None = None
    """Set when the call paused: decide it with :meth:`Engine.decide`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineInfo:
    """What a caller may see of an engine."""

    name: str
    visibility: Visibility
    default_agent: str | None
    agents: tuple[dict[str, JsonValue], ...]
    """``{"name", "description"}`` of each agent the caller may run."""
    tools: tuple[dict[str, JsonValue], ...]
    """``{"name", "description", "input_schema", "read_only"}`` of each callable tool."""

    def to_dict(self) -> dict[str, JsonValue]:
        """The wire form (``GET /info`` of a served engine)."""
        return {
            "name": self.name,
            "visibility": self.visibility,
            "default_agent": self.default_agent,
            "agents": list(self.agents),
            "tools": list(self.tools),
        }
