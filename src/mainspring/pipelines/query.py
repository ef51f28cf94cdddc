"""``query(prompt, …)``: one agent run as an async iterator of events, then its result.

The minimal agent SDK's single-run surface, on the engine::

    async for item in query("Summarize notes.md", model=model, tools=[...]):
        if isinstance(item, QueryResult):
            print(item.text, item.cost_usd)
        else:
            ...  # an engine event: text_delta, tool_start, tool_result, …

Every engine event of the run is yielded as it happens; the last item is a
:class:`QueryResult`. A write that needs approval goes to ``on_approval``
and the run continues with its decision; without a handler (or when it
returns ``None``) the run ends paused and the result carries the pending
action. Permission overlays (``deny``, ``can_use_tool``) and the turn limit
apply as in :class:`~mainspring.pipelines.PipelineRunner`.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Literal, TypeAlias

import anyio

from mainspring.agent import Agent, Limits
from mainspring.decisions import Decision
from mainspring.events import (
    ErrorEvent,
    Event,
    PendingAction,
    StopReason,
    TextDelta,
    TurnComplete,
    UsageEvent,
)
from mainspring.models.base import Model
from mainspring.permissions import CanUseTool, PermissionRules
from mainspring.session import Session
from mainspring.tools.define import Tool
from mainspring.usage import Usage

__all__ = ["QueryApproval", "QueryResult", "query"]

QueryApproval: TypeAlias = Callable[[PendingAction], "Decision | Awaitable[Decision | None] | None"]
"""Decides a write the run paused on; ``None`` leaves the run paused."""


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryResult:
    """What one :func:`query` came to (its last item)."""

    text: str
    """The assistant's text over the whole run."""
    stop_reason: StopReason | Literal["error"]
    session_id: str
    turns: int
    """Model calls made."""
    usage: Usage = Usage()
    cost_usd: float = 0.0
    pending: PendingAction | None = None
    """The action still waiting for a decision, when the run ended paused."""
    error: str | None = None
    """The error event's message, when the run failed."""
    type: Literal["result"] = "result"

    @property
    def is_error(self) -> bool:
        """Whether the run ended in an error."""
        return self.error is not None


async def query(
    prompt: str,
    *,
    model: Model,
    instructions: str = "",
    tools: Sequence[Tool] = (),
    allowed_tools: Sequence[str] | None = None,
    max_turns: int | None = None,
    deny: Sequence[str] = (),
    can_use_tool: CanUseTool | None = None,
    on_approval: QueryApproval | None = None,
) -> AsyncGenerator[Event | QueryResult, None]:
    """Run ``prompt`` once; yield each engine event, then a :class:`QueryResult`.

    Args:
        prompt: The user message.
        model: The model to run on.
        instructions: The system prompt.
        tools: Tools the model may call.
        allowed_tools: Allowlist of tool-name patterns (``mcp__server__*``); ``None`` allows all.
        max_turns: Model calls allowed (the run then stops with ``max_turns``).
        deny: Tool-name patterns always denied.
        can_use_tool: A permission callback (see :mod:`mainspring.permissions`).
        on_approval: Decides writes the run pauses on.

    Cancelling stops the run as ``Session.cancel`` does; the session's
    context pipeline is closed either way.
    """
    agent = Agent(
        model=model,
        name="query",
        instructions=instructions,
        tools=list(tools),
        allowed_tools=allowed_tools,
        permissions=PermissionRules(deny=tuple(deny), can_use_tool=can_use_tool),
        limits=Limits(max_steps=max_turns) if max_turns is not None else Limits(),
    )
    session = Session(agent)
    seen: list[Event] = []
    try:
        stream = session.send(prompt)
        while True:
            async with aclosing(stream) as events:
                async for event in events:
                    seen.append(event)
                    yield event
            last = seen[-1] if seen else None
            pending = last if isinstance(last, PendingAction) else session.pending
            if pending is None or on_approval is None:
                break
            decision = on_approval(pending)
            if inspect.isawaitable(decision):
                decision = await decision
            if decision is None:
                break
            stream = session.resume(pending.attempt_id, decision)
        yield _result(session, seen)
    finally:
        with anyio.CancelScope(shield=True):
            await session.aclose()


def _result(session: Session, events: Sequence[Event]) -> QueryResult:
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    error = next((e for e in reversed(events) if isinstance(e, ErrorEvent)), None)
    done = next((e for e in reversed(events) if isinstance(e, TurnComplete)), None)
    stop: StopReason | Literal["error"] = "error" if error is not None else "cancelled"
    if error is None and done is not None:
        stop = done.stop_reason
    return QueryResult(
        text=text,
        stop_reason=stop,
        session_id=session.session_id,
        turns=sum(1 for e in events if isinstance(e, UsageEvent)),
        usage=session.usage,
        cost_usd=session.cost_usd,
        pending=session.pending if error is None else None,
        error=error.message if error is not None else None,
    )
