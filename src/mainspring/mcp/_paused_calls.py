"""MCP calls paused on a server's elicitation: the session's turn waits, the request stays live.

With ``McpClientManager(pause_on_elicit=True)``, an elicitation that arrives
while an engine-run tool call is the only one in flight on that server pauses
the session's turn: the tool suspends (:meth:`ToolContext.suspend`) on a
``pending_action`` naming the MCP tool, its reason the server's message, the
form's fields as ``modifiable_fields`` and the schema in ``details``. The
MCP ``tools/call`` and the server's ``elicitation/create`` stay pending on
the connection meanwhile (a task of the manager owns the call), so deciding
it answers the very request the server waits on and the tool's side effect
runs once: ``Approve(edits=…)`` accepts with the edits as content (checked
against the server's schema first; a bad answer pauses again with the error
as the reason), ``Reject`` declines.

This is the 2025 era (the ``initialize`` handshake). Limits, by design: the
wait lives in this process, because the server's request is a live JSON-RPC
request on this connection. It is bounded (``elicit_timeout``: past it the
server gets ``cancel``); a process restart or a lost connection ends it
(deciding then is an error result the model sees, and the call is not
re-sent). An elicitation while several engine calls are in flight on one
server cannot be attributed to one of them (the request names no call): it
goes to ``on_elicit`` if given, else is declined. The 2026-07-28 revision
has neither limit: its questions come back as the call's own
``input_required`` result, which the session keeps
(:mod:`mainspring.mcp._input_rounds`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anyio
from pydantic import JsonValue

from mainspring.decisions import Approve, Decision, Reject
from mainspring.events import PendingAction
from mainspring.mcp._requests import ElicitAnswer, McpElicitation
from mainspring.tools.context import ToolContext
from mainspring.tools.define import ToolOutput

__all__ = ["Flight", "Parked", "await_flight", "check_answer"]


@dataclass(slots=True, eq=False)
class Parked:
    """An elicitation the server waits on, until the user answers (or the wait ends)."""

    asked: McpElicitation
    answered: anyio.Event = field(default_factory=anyio.Event)
    answer: ElicitAnswer = field(default_factory=lambda: ElicitAnswer(action="cancel"))

    def give(self, answer: ElicitAnswer) -> None:
        if not self.answered.is_set():
            self.answer = answer
            self.answered.set()


@dataclass(slots=True, eq=False)
class Flight:
    """One engine call's MCP request, run by a task of the manager."""

    ctx: ToolContext | None
    """The context of the tool run waiting on it now (``None`` while paused)."""
    done: anyio.Event = field(default_factory=anyio.Event)
    output: ToolOutput | None = None
    parked: Parked | None = None
    woke: anyio.Event = field(default_factory=anyio.Event)
    """Set when an elicitation parks or the call ends."""
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    abandoned: bool = False
    extend: float = 0.0
    """Seconds added to the call's deadline for each elicitation (the user's time)."""

    def park(self, asked: McpElicitation) -> Parked:
        parked = self.parked = Parked(asked)
        self.scope.deadline = max(self.scope.deadline, anyio.current_time() + self.extend)
        self.woke.set()
        return parked

    def finish(self, output: ToolOutput) -> None:
        self.output = output
        self.done.set()
        self.woke.set()

    def progress(self, message: str, pct: float | None) -> None:
        if self.ctx is not None:
            self.ctx.progress(message, pct)

    def charge(self, usd: float, what: str) -> None:
        if self.ctx is not None:
            self.ctx.charge(usd, what=what)


async def await_flight(flight: Flight, ctx: ToolContext, tool: str) -> ToolOutput:
    """Wait for the call's result, or suspend the turn on an elicitation it waits on."""
    flight.ctx = ctx
    try:
        while True:
            await flight.woke.wait()
            flight.woke = anyio.Event()
            if flight.output is not None:
                return flight.output
            parked = flight.parked
            if parked is not None and not parked.answered.is_set():
                flight.ctx = None
                ctx.suspend(pending_for(parked.asked, tool, ctx))
    except anyio.get_cancelled_exc_class():
        flight.abandoned = True
        flight.scope.cancel()  # the turn was cancelled: abandon the MCP call
        raise


def pending_for(asked: McpElicitation, tool: str, ctx: ToolContext, why: str = "") -> PendingAction:
    schema = asked.requested_schema
    props = schema.get("properties")
    fields = tuple(props) if isinstance(props, dict) else ()
    reason = f"server {asked.server!r} asks: {asked.message}"
    if why:
        reason = f"{why}; {reason}"
    details: dict[str, JsonValue] = {
        "mcp_elicitation": {
            "server": asked.server,
            "mode": asked.mode,
            "message": asked.message,
            "requested_schema": schema,
            "url": asked.url,
        }
    }
    return PendingAction(
        attempt_id=f"elicit:{ctx.tool_use_id}",
        tool_use_id=ctx.tool_use_id,
        turn_index=ctx.turn_index,
        name=tool,
        input={},
        description=f"MCP server {asked.server!r} asks for input during {tool!r}",
        modifiable_fields=fields,
        reason=reason,
        details=details,
    )


def check_answer(asked: McpElicitation, decision: Decision) -> ElicitAnswer | str:
    """The answer ``decision`` gives, or why it cannot be sent (``Approve`` edits off-schema)."""
    if isinstance(decision, Reject):
        return ElicitAnswer(action="decline")
    if not isinstance(decision, Approve):
        return "an elicitation is answered by Approve(edits=…) or Reject, not a client result"
    if asked.mode == "url":
        return ElicitAnswer(action="accept")
    content: dict[str, Any] = dict(decision.edits)
    problem = _invalid(asked.requested_schema, content)
    if problem:
        return f"the answer does not fit the server's form: {problem}"
    return ElicitAnswer(action="accept", content=content)


def _invalid(schema: dict[str, JsonValue], content: dict[str, Any]) -> str:
    import jsonschema  # mcp tools already need it (raw JSON schemas)

    for value in content.values():
        if isinstance(value, dict) or (
            isinstance(value, list) and not all(isinstance(x, str) for x in value)
        ):
            return "values must be strings, numbers, booleans or lists of strings"
    try:
        validator = jsonschema.Draft202012Validator(_flat_schema(schema))
        error = jsonschema.exceptions.best_match(validator.iter_errors(content))
    except (jsonschema.exceptions.SchemaError, TypeError, ValueError) as exc:
        return f"the server's schema is unusable ({type(exc).__name__})"
    if error is None:
        return ""
    where = ".".join(str(p) for p in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message


_KEPT = (
    "type",
    "enum",
    "const",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "uniqueItems",
)
_KEPT_ITEMS = ("type", "enum")


def _flat_schema(schema: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """The parts of a server's (flat) form schema that are checked: no regexes, no refs.

    A hostile server could send a ``pattern`` that backtracks for ever, or
    a deep tree; elicitation forms are flat by the spec, so only these
    keywords of each property (and of an array property's ``items``) are kept.
    """
    props = schema.get("properties")
    kept: dict[str, JsonValue] = {}
    if isinstance(props, dict):
        for name, prop in props.items():
            if not isinstance(prop, dict):
                continue
            one: dict[str, JsonValue] = {k: prop[k] for k in _KEPT if k in prop}
            items = prop.get("items")
            if isinstance(items, dict):
                one["items"] = {k: items[k] for k in _KEPT_ITEMS if k in items}
            kept[name] = one
    required = schema.get("required")
    out: dict[str, JsonValue] = {"type": "object", "properties": kept}
    if isinstance(required, list):
        out["required"] = [r for r in required if isinstance(r, str)]
    return out
