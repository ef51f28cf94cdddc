"""Benchmark building a session from N prior messages, against a hand-written floor.

Run by hand from the repository root (it is not a pytest test)::

    python bench/session_build.py            # about a minute
    python bench/session_build.py --quick    # a few seconds, noisier
    python bench/session_build.py --clock wall

One *run* is what the peer harness's S3 times: ``Session(agent,
messages=history)`` built inside the timed region, then one turn whose model
answers text at once, iterated to its ``turn_complete``. The agent has the
defaults (microcompact, compaction with its 200k-token budget, no
accounting). Histories, at N = 1k, 5k, 20k and 100k messages:

- **same list**: alternating ``Message.user`` / ``Message.assistant`` texts, the
  same list (and the same message objects) every run, as the harness does;
- **fresh**: the same texts as new message objects before every run (built
  outside the timed region), as a program loading its history from its own
  database would hand them over;
- **tools**: fresh turns of user, assistant text + tool call, tool result,
  answer: the slow path (every part counted, tool calls as JSON).

**The floor** does the least any loop must: copy the history into its own
list, append the user message, call the same model with a snapshot (a tuple)
of the list, collect the text and append the answer. Engine and floor batches
are interleaved round-robin per size. The figure that matters is the slope:
µs per prior message between 1k and each larger N (target: at most 0.5 µs,
flat from 1k to 100k), shown beside the floor's. CPU time by default
(``time.process_time_ns``: other work on a shared machine does not count);
the garbage collector stays on, as in a program, and runs before each batch
(and, for the fresh histories, after each history is built).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from mainspring import Agent, Message, Session, TextDelta, TurnComplete, Usage
from mainspring.messages import TextPart, ToolCallPart, ToolResultPart
from mainspring.models import ModelEvent, ModelRequest, ModelStop, ModelUsage

SIZES = (1_000, 5_000, 20_000, 100_000)
TARGET_US_PER_MESSAGE = 0.5
ANSWER = "done"
_USAGE = Usage(input_tokens=10, output_tokens=5, requests=1)


class TextModel:
    """Answers text at once: one delta, usage, stop (the peer harness's fake)."""

    name = "text-model"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        yield TextDelta(text=ANSWER)
        yield ModelUsage(usage=_USAGE)
        yield ModelStop(stop_reason="end_turn", model=self.name)


def text_history(n: int) -> list[Message]:
    return [
        Message.user(f"user message {i}: please look at the account details again")
        if i % 2 == 0
        else Message.assistant(f"assistant message {i}: here is what I found about the account")
        for i in range(n)
    ]


def tool_history(n: int) -> list[Message]:
    out: list[Message] = []
    turn = 0
    while len(out) < n:
        call_id = f"call_{turn}"
        out += [
            Message.user(f"turn {turn}: what is the balance of account {turn % 7}?"),
            Message(
                role="assistant",
                parts=(
                    TextPart(text="Let me check."),
                    ToolCallPart(id=call_id, name="get_balance", arguments={"account": turn % 7}),
                ),
            ),
            Message.tool_results(
                [
                    ToolResultPart(
                        tool_use_id=call_id,
                        name="get_balance",
                        content=f'{{"account": {turn % 7}, "balance": {turn * 3.5}}}',
                    )
                ]
            ),
            Message.assistant(f"The balance is {turn * 3.5} EUR."),
        ]
        turn += 1
    return out[:n]


async def engine_run(agent: Agent, history: Sequence[Message]) -> None:
    text: list[str] = []
    async for event in Session(agent, messages=history).send("hi"):
        if type(event) is TextDelta:
            text.append(event.text)
        elif type(event) is TurnComplete:
            assert event.stop_reason == "end_turn"
    assert "".join(text) == ANSWER


async def floor_run(model: TextModel, history: Sequence[Message]) -> None:
    transcript = list(history)
    transcript.append(Message.user("hi"))
    request = ModelRequest(system=(), messages=tuple(transcript))
    text = [e.text async for e in model.stream(request) if type(e) is TextDelta]
    transcript.append(Message.assistant("".join(text)))
    assert text == [ANSWER]


async def batch(
    run: Callable[[Sequence[Message]], Awaitable[None]],
    histories: Callable[[], Sequence[Message]],
    runs: int,
    clock: Callable[[], int],
    *,
    fresh: bool,
) -> float:
    """Mean µs per run over ``runs`` runs, each on ``histories()`` (built untimed).

    With ``fresh`` histories the collector runs after each is built, so the
    full collection their allocation makes due is not charged to the run.
    """
    gc.collect()
    total = 0
    for _ in range(runs):
        history = histories()
        if fresh:
            gc.collect()
        t0 = clock()
        await run(history)
        total += clock() - t0
    return total / runs / 1_000


async def measure(
    n: int, kind: str, agent: Agent, model: TextModel, quick: bool, clock: Callable[[], int]
) -> tuple[float, float]:
    """Median µs per run of the engine and of the floor on ``n`` messages of ``kind``."""
    make = text_history if kind != "tools" else tool_history
    same = make(n)
    histories: Callable[[], Sequence[Message]] = (
        (lambda: same) if kind == "same list" else (lambda: make(n))
    )
    runs = max(1, (40_000 if quick else 200_000) // n)
    batches = 3 if quick else 7
    await engine_run(agent, same)  # warm
    engine: list[float] = []
    floor: list[float] = []
    for _ in range(batches):
        fresh = kind != "same list"
        engine.append(
            await batch(lambda h: engine_run(agent, h), histories, runs, clock, fresh=fresh)
        )
        floor.append(
            await batch(lambda h: floor_run(model, h), histories, runs, clock, fresh=fresh)
        )
    return statistics.median(engine), statistics.median(floor)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    args = parser.parse_args()
    clock = time.process_time_ns if args.clock == "cpu" else time.perf_counter_ns
    model = TextModel()
    agent = Agent(model=model, name="s3")
    print(
        f"session build from N messages ({args.clock} clock; load {os.getloadavg()[0]:.1f};"
        f" Python {sys.version.split()[0]})"
    )
    await engine_run(agent, text_history(SIZES[-1]))  # the heap grows once, before timing
    print(
        f"{'history':<11} {'N':>8} {'engine µs':>11} {'floor µs':>10} {'ratio':>8}"
        f" {'engine µs/msg':>14} {'floor µs/msg':>13}"
    )
    for kind in ("same list", "fresh", "tools"):
        base: tuple[float, float] | None = None
        for n in SIZES:
            eng, flo = await measure(n, kind, agent, model, args.quick, clock)
            if base is None:
                base = (eng, flo)
                slope = "(base)"
                floor_slope = ""
            else:
                per = (eng - base[0]) / (n - SIZES[0])
                mark = "ok" if per <= TARGET_US_PER_MESSAGE else "MISS"
                slope = f"{per:.3f} {mark}"
                floor_slope = f"{(flo - base[1]) / (n - SIZES[0]):.4f}"
            print(
                f"{kind:<11} {n:>8,} {eng:>11,.0f} {flo:>10,.1f} {eng / flo:>7.0f}x"
                f" {slope:>14} {floor_slope:>13}"
            )
    print(
        f"slope = (run at N - run at {SIZES[0]:,}) / (N - {SIZES[0]:,}); target"
        f" <= {TARGET_US_PER_MESSAGE} µs per prior message; load now {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    asyncio.run(main())
