"""Typed output's cost: S1 with ``output_type`` set against S1 without, in the same run.

Run by hand from the repository root (it is not a pytest test)::

    python bench/typed_output.py                  # CPU time and valgrind's instruction counts
    python bench/typed_output.py --no-instructions

S1 is the peers' one-tool, one-turn shape (``bench/peers``): a fake model
that hands over whole answers (a ``get_balance`` call, then the answer), a
read-only ``async`` tool, ``Session(agent).send(...)`` iterated to its
terminal event. Three agents:

- **text**: no ``output_type`` (the baseline); the answer is ``done``.
- **native**: ``output_type=Answer`` (a pydantic model) on a model that takes
  the schema (``native_output = True``); the answer is its JSON as text.
- **tool**: the same on a model without it: the answer is a ``final_result``
  call.

Instructions per run come from ``valgrind --tool=callgrind`` as in
``bench/peers/instructions.py``: a fresh process runs a warm-up, then a few
runs and many more between markers; the difference over the extra runs is one
run's count. CPU time is ``time.process_time`` over interleaved rounds in one
process (the median round). Ratios are to **text**, measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import anyio
from pydantic import BaseModel

import callgrind
from mainspring import Agent, ErrorEvent, Session, TurnComplete, tool
from mainspring.events import FinalOutput
from mainspring.models import ModelEvent, ModelRequest, ModelStop, ModelUsage, ToolCallEnd
from mainspring.output import FINAL_RESULT_TOOL
from mainspring.usage import Usage

KINDS = ("text", "native", "tool")
FEW, MANY = 10, 110
_USAGE = Usage(input_tokens=10, output_tokens=5, requests=1)


class Answer(BaseModel):
    balance: float
    currency: str
    summary: str


ANSWER = '{"balance": 1234.5, "currency": "EUR", "summary": "done"}'


class FakeModel:
    """Whole answers, no deltas (as the peers' fakes): a call, then the answer."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.native_output = kind != "tool"
        self._name = f"fake-{kind}"

    @property
    def name(self) -> str:
        return self._name

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        from mainspring.events import TextDelta

        if request.messages[-1].role == "user":
            yield ToolCallEnd(tool_use_id="c1", name="get_balance", index=0, arguments="{}")
            yield ModelUsage(usage=_USAGE)
            yield ModelStop(stop_reason="tool_use", model=self._name)
            return
        if self.kind == "tool":
            yield ToolCallEnd(tool_use_id="c2", name=FINAL_RESULT_TOOL, index=0, arguments=ANSWER)
            yield ModelUsage(usage=_USAGE)
            yield ModelStop(stop_reason="tool_use", model=self._name)
            return
        yield TextDelta(text="done" if self.kind == "text" else ANSWER)
        yield ModelUsage(usage=_USAGE)
        yield ModelStop(stop_reason="end_turn", model=self._name)


@tool(read_only=True)
async def get_balance() -> dict[str, Any]:
    """Return the account balance."""
    return {"account": "acc-1", "balance": 1234.5, "currency": "EUR"}


def agent_for(kind: str) -> Agent:
    model = FakeModel(kind)
    if kind == "text":
        return Agent(model=model, name="s1", tools=[get_balance])
    return Agent(model=model, name="s1", tools=[get_balance], output_type=Answer)


def runner(kind: str) -> Callable[[], Coroutine[Any, Any, None]]:
    agent = agent_for(kind)

    async def run() -> None:
        final = False
        async for event in Session(agent).send("hi"):
            if isinstance(event, FinalOutput):
                final = True
            elif isinstance(event, TurnComplete) and event.stop_reason != "end_turn":
                raise AssertionError(f"turn ended with {event.stop_reason!r}")
            elif isinstance(event, ErrorEvent):
                raise AssertionError(f"error event: {event}")
        if final != (kind != "text"):
            raise AssertionError(f"{kind}: final_output {'missing' if not final else 'unexpected'}")

    return run


async def _many(run: Callable[[], Coroutine[Any, Any, None]], n: int) -> None:
    for _ in range(n):
        await run()


def child(kind: str) -> None:
    """Under callgrind: warm-up, marker, FEW runs, marker, MANY runs, marker."""
    run = runner(kind)
    anyio.run(_many, run, 20)
    os.getppid()  # marker: callgrind dumps its counts here
    anyio.run(_many, run, FEW)
    os.getppid()
    anyio.run(_many, run, MANY)
    os.getppid()


def instructions(kind: str) -> float:
    """One run's instructions (callgrind; see ``bench/callgrind.py``)."""
    return callgrind.per_run(__file__, kind, few=FEW, many=MANY)


def cpu_times(rounds: int, per_round: int) -> dict[str, float]:
    """Median CPU seconds per run of each kind, over interleaved rounds."""
    runs = {kind: runner(kind) for kind in KINDS}
    samples: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for kind in KINDS:
        anyio.run(_many, runs[kind], 50)  # warm-up
    for _ in range(rounds):
        for kind in KINDS:
            start = time.process_time()
            anyio.run(_many, runs[kind], per_round)
            samples[kind].append((time.process_time() - start) / per_round)
    return {kind: statistics.median(values) for kind, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--child", choices=KINDS)
    parser.add_argument("--no-instructions", action="store_true")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--per-round", type=int, default=200)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    cpu = cpu_times(args.rounds, args.per_round)
    counted: dict[str, float] = {}
    if not args.no_instructions:
        if shutil.which("valgrind") is None:
            raise SystemExit("needs valgrind (apt-get install valgrind), or --no-instructions")
        counted = {kind: instructions(kind) for kind in KINDS}
    print("| S1 | instructions/run | vs text | CPU µs/run | vs text |")
    print("|---|---:|---:|---:|---:|")
    for kind in KINDS:
        ins = counted.get(kind)
        ins_cells = f"{ins:,.0f} | {ins / counted['text'] - 1:+.1%}" if ins is not None else "- | -"
        cpu_cells = f"{cpu[kind] * 1e6:,.0f} | {cpu[kind] / cpu['text'] - 1:+.1%}"
        print(f"| {kind} | {ins_cells} | {cpu_cells} |")


if __name__ == "__main__":
    main()
