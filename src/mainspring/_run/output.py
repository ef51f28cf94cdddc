"""A turn's typed output: streamed as partial objects, checked when the model answers.

The loop holds one :class:`OutputCheck` when its agent has an ``output_type``
other than ``str`` (see :mod:`mainspring.output` for the public side):

```
stream ─► text (native) / final_result arguments (tool) ─► output_partial events
answer ─► validate (TypeAdapter) ─► output validators ─► final_output, the turn ends
                  │ invalid or rejected
                  ▼
          output_retry; the reason goes back to the model (a user message, or the
          final_result call's error result); past Agent.output_retries: OutputInvalid
```

The count of answers sent back is the turn's own (``Turn.output_retries``),
so it holds across a pause and a resume in another process. Private
machinery.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from mainspring._lowlevel.json_value import JsonValue
from mainspring.agent import Agent
from mainspring.errors import OutputInvalid, OutputRejected
from mainspring.events import (
    Event,
    FinalOutput,
    OutputPartial,
    OutputRetry,
    TextDelta,
    ToolResult,
)
from mainspring.messages import Message, ToolResultPart
from mainspring.output import FINAL_RESULT_TOOL, OutputContext, OutputSpec, feedback
from mainspring.state import Call, SessionState, Turn

__all__ = ["UNCHECKED", "OutputCheck"]

UNCHECKED = "the final answer was not checked (the run stopped before it was)"
"""The provisional result of a final_result call until the step is settled."""

_ACCEPTED = "Final answer received."
_ALONE = (
    f"{FINAL_RESULT_TOOL} must be the only call of its step: call your other tools first, "
    f"then {FINAL_RESULT_TOOL} alone."
)
_NO_CALL = f"Give your final answer by calling the {FINAL_RESULT_TOOL} tool."


class OutputCheck:
    """One run's typed output: partial objects while streaming, the answer's check."""

    __slots__ = (
        "_accepted",
        "_agent",
        "_args",
        "_emit",
        "_last",
        "_spec",
        "_state",
        "_text",
        "finals",
        "native",
    )

    def __init__(
        self, *, agent: Agent, spec: OutputSpec, state: SessionState, emit: Callable[[Event], None]
    ) -> None:
        """Check ``agent``'s output (``spec``) for the run on ``state``; ``emit`` its events."""
        self._agent = agent
        self._spec = spec
        self._state = state
        self._emit = emit
        self.native = agent.output_native
        """The model answers in text (native structured output), not through the tool."""
        self._text: list[str] = []
        self._args: dict[int, list[str]] = {}
        self._last: JsonValue | None = None
        self._accepted: _Accepted | None = None
        self.finals: dict[str, str] = {}
        """The step's final-answer calls: their raw arguments by engine call id."""

    # ------------------------------------------------------------ streaming

    def begin_step(self) -> None:
        """A model step starts: nothing streamed yet."""
        self._text.clear()
        self._args.clear()
        self.finals.clear()
        self._last = None
        self._accepted = None

    def tee(self, emit: Callable[[Event], None]) -> Callable[[TextDelta], None]:
        """``emit`` for text deltas, which on the native path are also the output's JSON."""
        if not self.native:
            return emit
        text = self._text

        def emit_text(event: TextDelta) -> None:
            emit(event)
            text.append(event.text)
            self._partial("".join(text))

        return emit_text

    def arguments(self, name: str, index: int, delta: str) -> None:
        """A piece of a call's arguments (the final-answer tool's are the output)."""
        if name == FINAL_RESULT_TOOL and not self.native:
            pieces = self._args.setdefault(index, [])
            pieces.append(delta)
            self._partial("".join(pieces))

    def _partial(self, text: str) -> None:
        value = self._spec.partial(text)
        if value is not None and value != self._last:
            self._last = value
            self._emit(OutputPartial(output=value))

    def take(self, call: Call, arguments: str) -> bool:
        """Whether ``call`` is the final answer: then it is held for :meth:`settle`.

        Held, it has a provisional error result (the dispatcher skips it, and a
        run that stops before the check leaves a transcript that says so).
        """
        if call.name != FINAL_RESULT_TOOL or self.native:
            return False
        self.finals[call.id] = arguments
        call.result = ToolResultPart(
            tool_use_id=call.id, name=call.name, content=UNCHECKED, is_error=True
        )
        return True

    # --------------------------------------------------------------- checks

    async def settle(self, turn: Turn) -> None:
        """Check the step's final-answer calls; each gets its result here.

        One alone in its step is checked; with other calls it is refused (the
        others run as usual).

        Raises:
            OutputInvalid: Refused once more than ``Agent.output_retries`` allow.
        """
        finals, self.finals = self.finals, {}
        alone = len(turn.calls) == 1
        for call in turn.calls:
            arguments = finals.get(call.id)
            if arguments is None:
                continue
            reason = await self._check(arguments, turn) if alone else _ALONE
            content = _ACCEPTED if reason is None else reason
            error = reason is not None
            call.result = ToolResultPart(
                tool_use_id=call.id, name=call.name, content=content, is_error=error
            )
            self._emit(
                ToolResult(tool_use_id=call.id, name=call.name, content=content, is_error=error)
            )
            if reason is not None:
                self._refuse(turn, reason)

    async def answer(self, turn: Turn, message: Message) -> Message | None:
        """Check an answer that ended the turn; the message that sends it back, if refused.

        Raises:
            OutputInvalid: Refused once more than ``Agent.output_retries`` allow.
        """
        reason = await self._check(message.text, turn) if self.native else _NO_CALL
        if reason is None:
            return None
        self._refuse(turn, reason)
        return Message(
            role="user",
            parts=Message.user(f"{reason}\n\nAnswer again.").parts,
            meta={"output_retry": turn.output_retries},
        )

    @property
    def accepted(self) -> bool:
        """Whether this step gave the turn its output (the loop then ends the turn)."""
        return self._accepted is not None

    def final(self, turn: Turn) -> FinalOutput:
        """The ``final_output`` event of the accepted output."""
        accepted = self._accepted
        assert accepted is not None, "only once accepted"
        return FinalOutput(output=self._spec.dump(accepted.value), turn_index=turn.index)

    async def _check(self, text: str, turn: Turn) -> str | None:
        """Why ``text`` is not an acceptable output (``None``: it is, and is kept)."""
        spec = self._spec
        try:
            value = spec.validate(text)
        except spec.invalid as exc:
            return (
                "Your answer is not valid for the required output schema:\n"
                f"{feedback(exc, wrapped=spec.wrapped)}"
            )
        validators = self._agent.output_validators
        if validators:
            context = OutputContext(
                session_id=self._state.session_id,
                principal=self._state.principal,
                turn_index=turn.index,
                retries=turn.output_retries,
            )
            for validator in validators:
                try:
                    verdict = validator(value, context)
                    if inspect.isawaitable(verdict):
                        await verdict
                except OutputRejected as exc:
                    return f"Your answer was rejected: {exc.reason}"
        self._accepted = _Accepted(value)
        return None

    def _refuse(self, turn: Turn, reason: str) -> None:
        retries = turn.refuse_output()
        if retries > self._agent.output_retries:
            raise OutputInvalid(reason, retries=retries - 1)
        self._emit(OutputRetry(reason=reason, retries=retries))


class _Accepted:
    """An accepted output (``None`` may be one, for a type that allows it)."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value
