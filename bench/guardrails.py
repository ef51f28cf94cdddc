"""What one passing input guardrail costs on S1, in instructions and CPU time.

Run by hand from the repository root (it is not a pytest test)::

    python bench/guardrails.py            # callgrind counts (a minute or two) and CPU time
    python bench/guardrails.py --no-valgrind   # CPU time only
    QUICK=1 python bench/guardrails.py --only-valgrind   # fewer runs under callgrind

S1 is the peer benchmark's one-tool, one-turn shape (``bench/peers``): a fresh
``Session`` per run, a model fake that hands over whole answers (one
``get_balance`` call, then the text ``done``), one ``@tool(read_only=True)``
async read. Two agents, identical but for ``input_guardrails=[passing]`` (a
plain synchronous function returning ``GuardrailResult()``).

Instructions: each variant runs in a fresh process under
``valgrind --tool=callgrind``: a warm-up, then ``FEW`` and ``MANY`` runs
between markers (``os.getppid``) at which callgrind dumps its count; the
difference over the extra runs is one run's instructions, as
``bench/peers/instructions.py`` counts them. CPU time: both variants in this
process, batches interleaved, ``time.process_time`` per batch, the median of
the batches. Ratios are to the baseline measured in the same invocation.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import time
from collections.abc import AsyncIterator

import callgrind
from mainspring import (
    Agent,
    ErrorEvent,
    GuardrailContext,
    GuardrailResult,
    Session,
    TextDelta,
    TurnComplete,
    Usage,
    tool,
)
from mainspring.messages import Message, ToolResultPart
from mainspring.models import ModelEvent, ModelRequest, ModelStop, ModelUsage, ToolCallEnd

FEW, MANY = (3, 23) if os.environ.get("QUICK") else (10, 110)
WARMUP = 5 if os.environ.get("QUICK") else 20
_USAGE = Usage(input_tokens=10, output_tokens=5, requests=1)


def _results_since_user(messages: list[Message] | tuple[Message, ...]) -> int:
    count = 0
    for message in reversed(messages):
        if message.role == "user":
            break
        if message.role == "tool":
            count += sum(1 for p in message.parts if type(p) is ToolResultPart)
    return count


class S1Model:
    """The peer benchmark's S1 fake: one read call, then the final text, whole."""

    @property
    def name(self) -> str:
        return "fake-s1"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if _results_since_user(list(request.messages)) == 0:
            yield ToolCallEnd(tool_use_id="call_0", name="get_balance", index=0, arguments="{}")
            yield ModelUsage(usage=_USAGE)
            yield ModelStop(stop_reason="tool_use", model="fake-s1")
            return
        yield TextDelta(text="done")
        yield ModelUsage(usage=_USAGE)
        yield ModelStop(stop_reason="end_turn", model="fake-s1")


@tool(read_only=True)
async def get_balance() -> dict[str, object]:
    """Return the account balance."""
    return {"currency": "USD", "available": 1234.56}


def passing(ctx: GuardrailContext, text: str) -> GuardrailResult:
    """A guardrail that always passes."""
    return GuardrailResult()


def agent(guarded: bool) -> Agent:
    return Agent(
        model=S1Model(),
        name="s1",
        tools=[get_balance],
        input_guardrails=[passing] if guarded else [],
    )


async def s1(on: Agent) -> None:
    text: list[str] = []
    async for event in Session(on).send("hi"):
        if type(event) is TextDelta:
            text.append(event.text)
        elif type(event) is TurnComplete and event.stop_reason != "end_turn":
            raise AssertionError(f"turn ended with {event.stop_reason!r}")
        elif type(event) is ErrorEvent:
            raise AssertionError(f"error event: {event}")
    if "".join(text) != "done":
        raise AssertionError("unexpected final text")


async def many(on: Agent, runs: int) -> None:
    for _ in range(runs):
        await s1(on)


def child(variant: str) -> None:
    """Under callgrind: warm up, then FEW and MANY runs between markers."""
    on = agent(variant == "guardrail")
    asyncio.run(many(on, WARMUP))
    os.getppid()
    asyncio.run(many(on, FEW))
    os.getppid()
    asyncio.run(many(on, MANY))
    os.getppid()


def instructions(variant: str) -> float:
    """One run's instructions (callgrind; see ``bench/callgrind.py``)."""
    return callgrind.per_run(__file__, variant, few=FEW, many=MANY)


def cpu_times(batches: int, runs: int) -> dict[str, float]:
    """Median CPU microseconds per run of each variant, batches interleaved."""
    agents = {"baseline": agent(False), "guardrail": agent(True)}
    samples: dict[str, list[float]] = {name: [] for name in agents}

    async def measure() -> None:
        for on in agents.values():
            await many(on, WARMUP)
        for _ in range(batches):
            for name, on in agents.items():
                start = time.process_time()
                await many(on, runs)
                samples[name].append((time.process_time() - start) * 1e6 / runs)

    asyncio.run(measure())
    return {name: statistics.median(values) for name, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--child", choices=("baseline", "guardrail"))
    parser.add_argument("--no-valgrind", action="store_true")
    parser.add_argument("--batches", type=int, default=15)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--only-valgrind", action="store_true")
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    print("| S1 | baseline | one passing input guardrail | ratio |")
    print("|---|---:|---:|---:|")
    if not args.no_valgrind:
        if shutil.which("valgrind") is None:
            raise SystemExit("needs valgrind (or --no-valgrind)")
        base, guarded = instructions("baseline"), instructions("guardrail")
        print(f"| instructions per run | {base:,.0f} | {guarded:,.0f} | {guarded / base:.3f} |")
    if args.only_valgrind:
        return
    cpu = cpu_times(args.batches, args.runs)
    base_us, guarded_us = cpu["baseline"], cpu["guardrail"]
    ratio = guarded_us / base_us
    print(f"| CPU µs per run (median) | {base_us:,.1f} | {guarded_us:,.1f} | {ratio:.3f} |")


if __name__ == "__main__":
    main()
