"""Hooks: the application's callbacks around model and tool calls.

Each hook may be sync or async. ``before_model_call`` may return a replacement
request; ``before_tool_call`` may return a message to deny the call;
``guard_fired`` sees every pre-execution guard finding; ``guardrail_checked``
every guardrail's verdict;
``after_tool_call`` may return a replacement result. Exceptions in hooks are
not swallowed: a hook is the application's own code.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TypeAlias, TypeVar

from mainspring._lowlevel.frozen import dataclass
from mainspring.events import Finding, GuardrailVerdict
from mainspring.models.base import ModelRequest
from mainspring.tools.define import Tool, ToolOutput
from mainspring.tools.policy import ToolInput
from mainspring.usage import Usage

__all__ = ["AutoExecuted", "Hooks", "call_auto_executed", "call_hook"]

T = TypeVar("T")
_Maybe: TypeAlias = "Awaitable[T] | T"


@dataclass(frozen=True, slots=True, kw_only=True)
class Hooks:
    """Callbacks around model and tool calls."""

    before_model_call: Callable[[ModelRequest], _Maybe[ModelRequest | None]] | None = None
    after_model_call: Callable[[ModelRequest, Usage], _Maybe[None]] | None = None
    before_tool_call: Callable[[Tool, ToolInput], _Maybe[str | None]] | None = None
    """Return a message to deny the call."""
    after_tool_call: Callable[[Tool, ToolInput, ToolOutput], _Maybe[ToolOutput | None]] | None = (
        None
    )
    """Return a replacement output."""
    guard_fired: Callable[[Tool, ToolInput, Finding], _Maybe[None]] | None = None
    """The ``on_guard_fired`` observation hook: called for each finding of a
    guard's ``before`` check (block, confirm or hint) as the call is judged,
    whether or not it then pauses, and for each ``after`` hint (``action="hint"``)
    as its result is recorded."""
    guardrail_checked: Callable[[GuardrailVerdict], _Maybe[None]] | None = None
    """The audit of guardrails (:mod:`mainspring.guardrails`): called with each
    guardrail's verdict, passed or tripped (or failed), before the event is emitted."""


AutoExecuted: TypeAlias = (
    Callable[[Tool, ToolInput, ToolOutput, float | None], "Awaitable[None] | None"]
    | Callable[[Tool, ToolInput, ToolOutput], "Awaitable[None] | None"]
)
"""Called after an auto-tier write ran (for audit or notifications).

A callback with a fourth parameter also receives the USD amount the session's
tiers approved it for (``None`` when the tool's tier is not USD-based); one
with three is called as before."""


def _takes_amount(fn: Callable[..., object]) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # no signature to read: the original three
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 4 or any(p.kind is p.VAR_POSITIONAL for p in params)


async def call_auto_executed(
    fn: AutoExecuted, tool: Tool, args: ToolInput, output: ToolOutput, amount: float | None
) -> None:
    """Call an :data:`AutoExecuted` callback with the arguments it takes."""
    if _takes_amount(fn):
        await call_hook(fn(tool, args, output, amount))  # type: ignore[call-arg]  # four-parameter form
    else:
        await call_hook(fn(tool, args, output))  # type: ignore[call-arg]  # three-parameter form


async def call_hook(result: T | Awaitable[T]) -> T:
    """Await ``result`` when a hook returned an awaitable."""
    if inspect.isawaitable(result):
        return await result
    return result
