"""mainspring: `Session(agent).send(...)` iterated to its terminal event.

Fake model: a minimal object implementing mainspring's public `Model` protocol
(`mainspring.models.base`: a `name` property and `stream(request)`, an async
iterator of model events).  Like the peers' fakes it hands over each whole
answer at once: per tool round one `ToolCallEnd` per call (arguments as the
raw JSON string, which the engine parses and validates) or, for the answer,
one `TextDelta("done")`; then one `ModelUsage` and the `ModelStop`.  No
argument deltas (a peer's fake returns whole responses too).  It counts the
`ToolResultPart`s of the `role="tool"` messages after the last user message
of `request.messages`.

Tools: `async def` with `@tool(read_only=True)` (read-only => concurrency-safe:
the engine starts them at once and runs a step's reads in parallel, the
equivalent of the peers' concurrent tool execution).  Agent defaults
otherwise (microcompact on, compaction processor with its 200k budget, no
accounting, no stores).  The final text is collected from the `TextDelta`
events of the stream, as a consumer would; every run checks it ended with
`turn_complete(end_turn)`.

S3: history goes in through the public constructor,
`Session(agent, messages=history)` -- built inside the timed region on each
turn, as the peers get their history with each call (Pydantic AI
`message_history`, Agents SDK input list, LangGraph input `messages`).

bench_mainspring_scripted.py runs the same scenarios with mainspring's own
offline `ScriptedModel(fn)` (the library's FunctionModel equivalent, which
streams in 8-character deltas and estimates usage by walking the messages).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import harness as h
from mainspring import Agent, ErrorEvent, Message, Session, TextDelta, TurnComplete, Usage, tool
from mainspring.messages import ToolResultPart
from mainspring.models import ModelRequest, ModelStop, ModelUsage, ToolCallEnd

_USAGE = Usage(input_tokens=10, output_tokens=5, requests=1)


def count_results(messages) -> int:
    n = 0
    for m in reversed(messages):
        role = m.role
        if role == "user":
            break
        if role == "tool":
            n += sum(1 for p in m.parts if type(p) is ToolResultPart)
    return n


class FakeModel:
    """The least a mainspring Model has to do: whole answers, no deltas."""

    def __init__(self, script) -> None:
        self.script = script
        self._name = f"fake-{script.__name__}"

    @property
    def name(self) -> str:
        return self._name

    async def stream(self, request: ModelRequest) -> AsyncIterator:
        calls = self.script(count_results(request.messages))
        if calls is None:
            yield TextDelta(text=h.FINAL_TEXT)
            yield ModelUsage(usage=_USAGE)
            yield ModelStop(stop_reason="end_turn", model=self._name)
            return
        for i, (name, args, cid) in enumerate(calls):
            yield ToolCallEnd(tool_use_id=cid, name=name, index=i, arguments=args)
        yield ModelUsage(usage=_USAGE)
        yield ModelStop(stop_reason="tool_use", model=self._name)


@tool(read_only=True)
async def get_balance() -> dict:
    """Return the account balance."""
    return h.balance_payload()


@tool(read_only=True)
async def read_note(key: str) -> str:
    """Read one note.

    Args:
        key: The note's key.
    """
    return h.note_payload(key)


async def run_turn(session: Session, prompt: str) -> str:
    text: list[str] = []
    async for event in session.send(prompt):
        kind = type(event)
        if kind is TextDelta:
            text.append(event.text)
        elif kind is TurnComplete:
            if event.stop_reason != "end_turn":
                raise AssertionError(f"turn ended with {event.stop_reason!r}")
        elif kind is ErrorEvent:
            raise AssertionError(f"error event: {event}")
    return "".join(text)


class Mainspring(h.Adapter):
    name = "mainspring"
    packages = ("mainspring", "anyio", "pydantic")
    imports = "from mainspring import Agent, Session, tool, TextDelta, TurnComplete"
    notes = ("Session(agent).send() iterated; minimal Model-protocol fake (whole answers);"
             " @tool(read_only=True) async tools; S3 via Session(agent, messages=history)")

    def make_model(self, script):
        return FakeModel(script)

    def before_run(self, model) -> None:
        pass

    def setup(self) -> None:
        self.m1 = self.make_model(h.script_s1)
        self.m2 = self.make_model(h.script_s2)
        self.m3 = self.make_model(h.script_s3)
        self.a1 = Agent(model=self.m1, name="s1", tools=[get_balance])
        self.a2 = Agent(model=self.m2, name="s2", tools=[read_note])
        self.a3 = Agent(model=self.m3, name="s3")

    async def s1(self) -> str:
        self.before_run(self.m1)
        return await run_turn(Session(self.a1), h.USER_PROMPT)

    async def s2(self) -> str:
        self.before_run(self.m2)
        return await run_turn(Session(self.a2), h.USER_PROMPT)

    def s3_history(self, n: int) -> list[Message]:
        out: list[Message] = []
        for i in range(n):
            role, text = h.history_text(i)
            out.append(Message.user(text) if role == "user" else Message.assistant(text))
        return out

    async def s3(self, history: list[Message]) -> str:
        self.before_run(self.m3)
        return await run_turn(Session(self.a3, messages=history), h.USER_PROMPT)


if __name__ == "__main__":
    h.main(Mainspring())
