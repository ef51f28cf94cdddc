"""Guardrails: checks on a turn's input and on its final answer that can end the turn.

Not to be confused with :mod:`mainspring.guards`:

| | guards (``Agent(guards=…)``) | guardrails (``input_guardrails=…``) |
|---|---|---|
| judges | one tool call before it runs (its result after) | the user's message, the final answer |
| may | block the call, ask for approval, add a hint | trip: end the whole turn |
| when | as each call is judged | beside the first model call; on the final answer |

A guardrail is a function (sync or async) of ``(ctx, text)`` returning a
:class:`GuardrailResult`, or an object with such a ``__call__`` (its ``name``
attribute, or its class name, names it). ``text`` is the user's message
(input guardrail) or the final answer (output guardrail); ``ctx`` is a
:class:`GuardrailContext`: who asks, in which session, and
:meth:`GuardrailContext.complete` to ask a (cheaper) model of its own, whose
spend counts toward the turn's.

```python
def no_secrets(ctx: GuardrailContext, text: str) -> GuardrailResult:
    return GuardrailResult(tripwire="password" in text, reason="asks for a password")

agent = Agent(model=..., input_guardrails=[no_secrets])
```

Every verdict is a ``guardrail_verdict`` event (:class:`~mainspring.events.GuardrailVerdict`)
and reaches ``Hooks.guardrail_checked``. A tripped one ends the turn with
``turn_complete(stop_reason="guardrail_tripped")`` (``Session.run`` raises
:class:`~mainspring.errors.GuardrailTripwire`); a guardrail that raises ends
the run with an ``error`` event (``code="guardrail_failed"``): it fails
closed. How a trip meets the model stream and the tools is told in
``docs/concepts/guardrails.md``.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Literal, TypeAlias

from mainspring._lowlevel.frozen import dataclass
from mainspring._lowlevel.json_value import JsonValue
from mainspring.errors import ConfigError
from mainspring.events import TextDelta
from mainspring.messages import Message
from mainspring.models.base import ModelRequest, ModelSettings, ModelUsage, SystemBlock
from mainspring.usage import Usage

if TYPE_CHECKING:
    from mainspring.models.base import Model
    from mainspring.principals import Caller

__all__ = [
    "Guardrail",
    "GuardrailCheck",
    "GuardrailContext",
    "GuardrailResult",
    "GuardrailStage",
    "as_guardrails",
]

GuardrailStage: TypeAlias = Literal["input", "output"]
"""Which text a guardrail reads: the user's message, or the final answer."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GuardrailResult:
    """A guardrail's verdict: ``tripwire=True`` ends the turn."""

    tripwire: bool = False
    reason: str = ""
    """Why it tripped (or passed), for people: it goes into the event and the hook."""
    info: JsonValue = None
    """Anything JSON the guardrail wants on record (scores, labels)."""


GuardrailCheck: TypeAlias = Callable[
    ["GuardrailContext", str], "GuardrailResult | Awaitable[GuardrailResult]"
]
"""``(ctx, text) -> GuardrailResult``, sync or async."""


class GuardrailContext:
    """What a running guardrail may know about and do: its caller, its session, a model.

    Made by the engine for each guardrail of each turn.
    """

    __slots__ = ("_account", "agent_name", "caller", "name", "session_id", "stage", "turn_index")

    def __init__(
        self,
        *,
        name: str,
        stage: GuardrailStage,
        session_id: str,
        agent_name: str,
        turn_index: int,
        caller: Caller,
        account: Callable[[str, Usage], None],
    ) -> None:
        """A context for guardrail ``name``; ``account`` counts a model call's usage."""
        self.name = name
        """The guardrail's name."""
        self.stage = stage
        self.session_id = session_id
        self.agent_name = agent_name
        self.turn_index = turn_index
        self.caller = caller
        """The verified caller of the run (the principal); as a tool's ``ctx.caller``."""
        self._account = account

    async def complete(
        self,
        model: Model,
        prompt: str,
        *,
        system: str = "",
        settings: ModelSettings | None = None,
    ) -> str:
        """Ask ``model`` (any :class:`~mainspring.models.base.Model`) once; return its text.

        Its usage is priced with the agent's prices and counted toward the
        turn's usage and spend (and the session's budget), attributed to
        this guardrail: a ``usage`` event with ``model="guardrail:<name>/<model>"``.
        Usage reported before a failure or a cancellation counts too. Cancelling
        stops the model stream; nothing else is left behind.

        Raises:
            ModelError: The model failed (the guardrail fails closed unless it catches it).
        """
        request = ModelRequest(
            system=(SystemBlock(text=system),) if system else (),
            messages=(Message.user(prompt),),
            settings=settings or ModelSettings(),
        )
        text: list[str] = []
        usage = Usage()
        try:
            async with aclosing(model.stream(request)) as stream:  # type: ignore[type-var]  # adapters return async generators
                async for event in stream:
                    if isinstance(event, TextDelta):
                        text.append(event.text)
                    elif isinstance(event, ModelUsage):
                        usage = usage + event.usage
        finally:
            if usage != Usage():
                self._account(model.name, usage)
        return "".join(text)


@dataclass(frozen=True, slots=True)
class Guardrail:
    """A named guardrail: ``check(ctx, text)`` returns a :class:`GuardrailResult`.

    ``Agent(input_guardrails=[fn])`` wraps a plain function in one, named after it.
    """

    check: GuardrailCheck
    name: str = ""
    """Defaults to the function's ``__name__`` (or an object's ``name``, or its class name)."""

    def __post_init__(self) -> None:
        if not callable(self.check):
            raise ConfigError(f"a guardrail must be callable, not {self.check!r}")
        if not self.name:
            object.__setattr__(self, "name", _name_of(self.check))

    async def run(self, ctx: GuardrailContext, text: str) -> GuardrailResult:
        """Run the check (awaited when it is async).

        Raises:
            TypeError: The check returned something else than a :class:`GuardrailResult`.
            Exception: What the check raised.
        """
        result = self.check(ctx, text)
        if inspect.isawaitable(result):
            result = await result
        if not isinstance(result, GuardrailResult):
            raise TypeError(
                f"guardrail {self.name!r} returned {type(result).__name__}, not a GuardrailResult"
            )
        return result


def _name_of(check: object) -> str:
    name = getattr(check, "name", None) or getattr(check, "__name__", None)
    return name if isinstance(name, str) and name else type(check).__name__


def as_guardrails(items: Sequence[Guardrail | GuardrailCheck]) -> tuple[Guardrail, ...]:
    """Guardrails from guardrails and plain checks (each name used once).

    Raises:
        ConfigError: An item is not callable, or two have the same name.
    """
    out = tuple(item if isinstance(item, Guardrail) else Guardrail(item) for item in items)
    names = [g.name for g in out]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(f"guardrail names must be unique; given twice: {', '.join(twice)}")
    return out
