"""A turn on a kept session with a long history over its budget: does its cost grow with it?

    python bench/long_history.py                    # 1,000, 10,000 and 100,000 messages
    python bench/long_history.py --sizes 10000,100000 --turns 40

A session holds N messages of plain talk (nothing compaction can prune) and a
context budget far below them, with no summarizer: the case where compaction
can do nothing. After a first turn (which builds the model view once), each
further turn is timed in CPU (user + system of this process). Printed per N:
median and mean µs per turn, and the median as a ratio to the smallest N's,
measured in the same run: a flat ratio means a turn costs the same whatever
the history's length.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import statistics
import time
from collections.abc import Sequence

from mainspring import Agent, ContextOptions, Message, ScriptedModel, Session
from mainspring.models import ToolSpec


def _answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
    return "ok"


async def _turns(n: int, turns: int, budget: int) -> list[float]:
    model = ScriptedModel(_answer)
    agent = Agent(model=model, name="long", context=ContextOptions(budget=budget))
    history: list[Message] = []
    for i in range(n // 2):
        history += [Message.user(f"question {i} about the ledger"), Message.assistant(f"{i}: ok")]
    session = Session(agent, messages=history)
    async for _ in session.send("first"):
        pass
    model.requests.clear()  # the scripted model keeps what it was sent: not the session's cost
    gc.collect()
    samples: list[float] = []
    for k in range(turns):
        started = time.process_time()
        async for _ in session.send(f"turn {k}"):
            pass
        samples.append(time.process_time() - started)
        model.requests.clear()
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="history lengths")
    parser.add_argument("--turns", type=int, default=40, help="turns timed per length")
    parser.add_argument("--budget", type=int, default=2000, help="the context budget (tokens)")
    options = parser.parse_args()
    logging.disable(logging.WARNING)  # the once-a-session "over its budget" line
    sizes = [int(s) for s in options.sizes.split(",")]
    print(f"| messages | median µs/turn | mean µs/turn | vs {sizes[0]:,} |")
    print("|---:|---:|---:|---:|")
    base: float | None = None
    for n in sizes:
        samples = asyncio.run(_turns(n, options.turns, options.budget))
        median = statistics.median(samples) * 1e6
        base = base or median
        mean = statistics.fmean(samples) * 1e6
        print(f"| {n:,} | {median:.0f} | {mean:.0f} | {median / base:.2f}x |")


if __name__ == "__main__":
    main()
