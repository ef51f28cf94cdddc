"""A 2026-07-28 call's ``input_required`` rounds: answered here, or a durable pause of the session.

The stateless revision has no requests from server to client. A
``tools/call`` that needs something from the client ends with an
``input_required`` result instead: input requests (an elicitation form or
URL, a sampling request, a roots request) and an opaque ``requestState``;
the client answers and sends the call again with ``inputResponses`` and the
state echoed, until the server gives the call's result. Here:

- a sampling request goes to :class:`~mainspring.mcp.McpSampling` at once
  (bounded, its cost charged to the calling session); with no sampling
  configured the call ends with an error result (the client never offered it).
  A roots request (never offered either) ends it too.
- an elicitation, with ``pause_on_elicit`` and a session's call of a tool
  that is not a read (reads run in parallel, and a parallel call cannot
  pause), pauses the session's turn: a ``pending_action`` per elicitation, the same shape the
  2025-era pause uses (the server's message as reason, the form's fields
  modifiable, the schema in ``details["mcp_elicitation"]``), and the server's
  whole round in ``details["mcp_input_required"]`` (its input requests, the
  answers given so far, the request state, the round number). That is stored
  with the session, so any process that loads the session can decide it:
  ``Approve(edits=…)`` accepts with the edits (checked against the form's
  reduced schema; no regex runs), ``Reject`` declines. When every
  elicitation of the round is answered the retry is sent, once: the session
  consumes the decision on record before the tool runs again, so a crash
  after that ends the turn with an error result instead of a second send
  (:mod:`mainspring._run.recovery`). Without the pause an ``on_elicit`` handler
  answers at once; with neither, the elicitation is declined.

The server is not trusted: its ``requestState`` must be a string of at most
:data:`MAX_STATE_CHARS` characters, a round carries at most
:data:`MAX_REQUESTS` requests (keys of at most :data:`MAX_KEY_CHARS`), a
form's schema is at most :data:`MAX_SCHEMA_CHARS` characters of JSON, and a
call takes at most ``McpServerConfig.input_rounds`` rounds; a server past
any bound gets no answer and the call ends with an error result.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypeAlias

import anyio
from pydantic import JsonValue, TypeAdapter
from pydantic_core import to_jsonable_python

from mainspring.events import PendingAction
from mainspring.mcp._paused_calls import check_answer, pending_for
from mainspring.mcp._requests import (
    ElicitAnswer,
    McpElicitation,
    McpSampling,
    OnElicit,
    elicitation_callback,
    sampling_callback,
)
from mainspring.tools.context import ToolContext

try:
    import mcp.types as mcp_types
    from mcp.client.session import ClientRequestContext, ClientSession
    from mcp.shared.dispatcher import ProgressFnT
except ImportError as exc:
    raise ImportError('McpClientManager needs: pip install "mainspring[mcp]"') from exc

__all__ = [
    "DETAILS_KEY",
    "MAX_KEY_CHARS",
    "MAX_REQUESTS",
    "MAX_SCHEMA_CHARS",
    "MAX_STATE_CHARS",
    "Asker",
    "InputRoundsError",
    "Send",
    "call_in_rounds",
    "drive",
    "persisted_round",
]

DETAILS_KEY = "mcp_input_required"
"""The key of a paused round in a pending action's ``details``."""
MAX_STATE_CHARS = 64_000
MAX_REQUESTS = 8
MAX_KEY_CHARS = 200
MAX_SCHEMA_CHARS = 20_000
_MESSAGE_CHARS = 2_000
_BACKOFF_FIRST, _BACKOFF_CAP = 0.05, 0.25

Result: TypeAlias = mcp_types.CallToolResult | mcp_types.InputRequiredResult
Send: TypeAlias = Callable[[mcp_types.InputResponses | None, str | None], Awaitable[Result]]
"""Sends the call (again): the responses so far and the server's request state."""

_REQUEST = TypeAdapter[mcp_types.InputRequest](mcp_types.InputRequest)
_ELICIT_RESULT = TypeAdapter(mcp_types.ElicitResult)
_SAMPLE_RESULT = TypeAdapter(mcp_types.CreateMessageResult)


class InputRoundsError(Exception):
    """The call cannot go on: the server broke a bound, or asked what is not offered."""


@dataclass(slots=True, kw_only=True)
class Round:
    """One ``input_required`` answer of the server, and the client's answers so far."""

    number: int
    request_state: str | None
    requests: dict[str, mcp_types.InputRequest]
    answers: dict[str, mcp_types.InputResponse] = field(default_factory=dict)

    def unanswered(self) -> list[str]:
        return [k for k in self.requests if k not in self.answers]

    def to_json(self, server: str, tool: str, asking: str) -> dict[str, JsonValue]:
        dump = to_jsonable_python
        return {
            "server": server,
            "tool": tool,
            "round": self.number,
            "asking": asking,
            "request_state": self.request_state,
            "requests": {
                k: dump(r, by_alias=True, exclude_none=True) for k, r in self.requests.items()
            },
            "answers": {
                k: dump(a, by_alias=True, exclude_none=True) for k, a in self.answers.items()
            },
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Asker:
    """How one call answers what its server asks."""

    server: str
    tool: str
    """The server's name of the tool."""
    ctx: ToolContext | None
    """The session's call, when there is one (a direct call has none)."""
    pause: bool
    """Pause the session's turn on an elicitation (``pause_on_elicit``)."""
    on_elicit: OnElicit | None
    sampling: McpSampling | None
    max_rounds: int


async def call_in_rounds(
    session: ClientSession,
    tool: str,
    arguments: dict[str, Any],
    on_progress: ProgressFnT,
    asker: Asker,
) -> tuple[mcp_types.CallToolResult, int]:
    """:func:`drive` over ``tools/call``: the result, and how many times the call was sent."""
    sent = 0

    async def send(responses: mcp_types.InputResponses | None, state: str | None) -> Result:
        nonlocal sent
        sent += 1
        return await session.call_tool(
            tool,
            arguments,
            progress_callback=on_progress,
            input_responses=responses,
            request_state=state,
            allow_input_required=True,
        )

    return await drive(session, send, asker), sent


def persisted_round(ctx: ToolContext | None) -> tuple[Round, str] | None:
    """The round a session's call paused on (and the request asked), as the session kept it.

    Raises:
        InputRoundsError: The kept round is not one this module wrote (or breaks a bound).
    """
    nested = ctx.suspended_on if ctx is not None else None
    if nested is None or DETAILS_KEY not in nested.details:
        return None
    try:
        found, asking = _parsed(nested.details[DETAILS_KEY])
    except (KeyError, TypeError, ValueError) as exc:  # ValidationError is a ValueError
        raise InputRoundsError(f"the paused MCP request is unreadable ({exc})"[:500]) from exc
    _check(found)
    return found, asking


def _parsed(raw: JsonValue) -> tuple[Round, str]:
    if not isinstance(raw, dict):
        raise TypeError("not an object")
    requests, answers = raw["requests"], raw["answers"]
    number, asking, state = raw["round"], raw["asking"], raw["request_state"]
    if not (isinstance(requests, dict) and isinstance(answers, dict)):
        raise TypeError("requests and answers must be objects")
    if not (isinstance(number, int) and isinstance(asking, str) and asking in requests):
        raise TypeError("round must be a number and asking a key of requests")
    if state is not None and not isinstance(state, str):
        raise TypeError("request_state must be a string")
    parsed = {k: _REQUEST.validate_python(v) for k, v in requests.items()}
    given: dict[str, mcp_types.InputResponse] = {}
    for key, value in answers.items():
        if isinstance(parsed[key], mcp_types.ElicitRequest):
            given[key] = _ELICIT_RESULT.validate_python(value)
        else:
            given[key] = _SAMPLE_RESULT.validate_python(value)
    return Round(number=number, request_state=state, requests=parsed, answers=given), asking


async def drive(session: ClientSession, send: Send, asker: Asker) -> mcp_types.CallToolResult:
    """The call's result, through as many rounds as the server asks (within bounds).

    A session's call resumes the round it paused on (``ctx.suspended_on``,
    answered by ``ctx.decision``) instead of sending the call afresh.

    Raises:
        InputRoundsError: A bound was broken or something not offered was asked.
        ToolSuspended: The session's turn pauses on an elicitation.
    """
    resumed = persisted_round(asker.ctx)
    if resumed is None:
        current = await send(None, None)
        rounds = 0
    else:
        paused, asking = resumed
        await _answer_paused(paused, asking, asker)
        rounds = paused.number
        current = await send(paused.answers, paused.request_state)
    delay = _BACKOFF_FIRST
    while isinstance(current, mcp_types.InputRequiredResult):
        rounds += 1
        if rounds > asker.max_rounds:
            raise InputRoundsError(
                f"the server asked for input more than {asker.max_rounds} times (input_rounds)"
            )
        this = Round(
            number=rounds,
            request_state=current.request_state,
            requests=dict(current.input_requests or {}),
        )
        _check(this)
        if this.requests:
            delay = _BACKOFF_FIRST
            await _answer(session, this, asker)
        else:  # only state: the server is working; ask again, backing off
            await anyio.sleep(delay)
            delay = min(delay * 2, _BACKOFF_CAP)
        current = await send(this.answers or None, this.request_state)
    return current


def _check(round_: Round) -> None:
    state = round_.request_state
    if state is not None and len(state) > MAX_STATE_CHARS:  # a non-string fails the SDK's parse
        raise InputRoundsError(f"the server's requestState is over {MAX_STATE_CHARS:,} characters")
    if len(round_.requests) > MAX_REQUESTS:
        raise InputRoundsError(
            f"the server asked {len(round_.requests)} things at once (at most {MAX_REQUESTS})"
        )
    for key, request in round_.requests.items():
        if len(key) > MAX_KEY_CHARS:
            raise InputRoundsError(f"an input request key is over {MAX_KEY_CHARS} characters")
        params = request.params
        if isinstance(params, mcp_types.ElicitRequestFormParams):
            size = len(json.dumps(to_jsonable_python(params.requested_schema)))
            if size > MAX_SCHEMA_CHARS:
                raise InputRoundsError(
                    f"the server's form schema is {size:,} characters (at most "
                    f"{MAX_SCHEMA_CHARS:,})"
                )


async def _answer(session: ClientSession, round_: Round, asker: Asker) -> None:
    """Answer what can be answered now; pause on the first elicitation that waits for the user."""
    for key, request in round_.requests.items():
        match request:
            case mcp_types.CreateMessageRequest():
                round_.answers[key] = await _sample(session, key, request, asker)
            case mcp_types.ListRootsRequest():
                raise InputRoundsError(
                    "the server asked for roots, which this client does not offer"
                )
            case mcp_types.ElicitRequest():
                if not _pausing(asker):
                    round_.answers[key] = await _elicit_now(session, key, request, asker)
    _pause_on_next(round_, asker)


def _pausing(asker: Asker) -> bool:
    return asker.pause and asker.ctx is not None


def _pause_on_next(round_: Round, asker: Asker) -> None:
    waiting = round_.unanswered()
    if not waiting:
        return
    ctx = asker.ctx
    assert ctx is not None  # only a session's call leaves an elicitation unanswered
    key = waiting[0]
    request = round_.requests[key]
    assert isinstance(request, mcp_types.ElicitRequest)
    ctx.suspend(_pending(round_, key, request, asker, ctx))


def _pending(
    round_: Round,
    key: str,
    request: mcp_types.ElicitRequest,
    asker: Asker,
    ctx: ToolContext,
    why: str = "",
) -> PendingAction:
    made = pending_for(_elicitation(asker.server, request), ctx.tool_name, ctx, why=why)
    return replace(
        made,
        attempt_id=f"elicit:{ctx.tool_use_id}:{round_.number}:{key}"[:400],
        details={**made.details, DETAILS_KEY: round_.to_json(asker.server, asker.tool, key)},
    )


async def _answer_paused(round_: Round, asking: str, asker: Asker) -> None:
    """The decision answers the elicitation paused on; pause on the next one, if any."""
    ctx = asker.ctx
    if ctx is None or ctx.decision is None:
        raise InputRoundsError("the paused MCP request was resumed without a decision")
    request = round_.requests.get(asking)
    if not isinstance(request, mcp_types.ElicitRequest):
        raise InputRoundsError("the paused MCP request does not ask for the user's input")
    answer = check_answer(_elicitation(asker.server, request), ctx.decision)
    if isinstance(answer, str):  # off the form: ask again, saying why
        ctx.suspend(_pending(round_, asking, request, asker, ctx, why=answer))
    round_.answers[asking] = _elicit_result(answer)
    _pause_on_next(round_, asker)


def _elicitation(server: str, request: mcp_types.ElicitRequest) -> McpElicitation:
    params = request.params
    message = params.message[:_MESSAGE_CHARS]
    if isinstance(params, mcp_types.ElicitRequestURLParams):
        return McpElicitation(server=server, message=message, mode="url", url=params.url[:2_000])
    schema: dict[str, JsonValue] = to_jsonable_python(params.requested_schema)
    return McpElicitation(server=server, message=message, requested_schema=schema)


def _elicit_result(answer: ElicitAnswer) -> mcp_types.ElicitResult:
    if answer.action != "accept" or answer.content is None:
        return mcp_types.ElicitResult(action=answer.action)
    return mcp_types.ElicitResult(action="accept", content=answer.content)


def _context(session: ClientSession, key: str) -> ClientRequestContext:
    return ClientRequestContext(session=session, request_id=key, meta=None)


async def _elicit_now(
    session: ClientSession, key: str, request: mcp_types.ElicitRequest, asker: Asker
) -> mcp_types.ElicitResult:
    if asker.on_elicit is None:
        return mcp_types.ElicitResult(action="decline")
    answer = await elicitation_callback(asker.server, asker.on_elicit)(
        _context(session, key), request.params
    )
    if isinstance(answer, mcp_types.ErrorData):  # pragma: no cover - the callback declines instead
        return mcp_types.ElicitResult(action="decline")
    return answer


async def _sample(
    session: ClientSession, key: str, request: mcp_types.CreateMessageRequest, asker: Asker
) -> mcp_types.CreateMessageResult:
    if asker.sampling is None:
        raise InputRoundsError(
            "the server asked to sample a model, which this client does not offer "
            "(McpClientManager(sampling=…))"
        )
    ctx = asker.ctx

    def charge(usd: float, what: str) -> None:
        if ctx is not None:
            ctx.charge(usd, what=what)

    sampled: Any = await sampling_callback(asker.server, asker.sampling, charge=charge)(
        _context(session, key), request.params
    )
    if isinstance(sampled, mcp_types.ErrorData):
        raise InputRoundsError(f"sampling refused: {sampled.message}")
    assert isinstance(sampled, mcp_types.CreateMessageResult)
    return sampled
