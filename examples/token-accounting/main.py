"""Token accounting: where every token of a turn went, what it cost, and what the cache saved.

Run it from the repository root:

    python examples/token-accounting/main.py --out token-report

It prints one table per model call (each segment of the request by source, module and
processor) with the call's usage, cache status and cost, and writes the session file
(`tokens.jsonl`) and the standalone HTML report (`report.html`) into the --out folder.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import anyio

from mainspring import (
    Agent,
    ConfigError,
    ContextOptions,
    ModelPrice,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    Usage,
    tool,
)
from mainspring.context import Accounting, CallSnapshot, InMemorySink, JsonlSink
from mainspring.devtools import write_report
from mainspring.models import Model, model_from_string
from mainspring.stores import InMemoryMemoryStore

# USD per million tokens; cache reads are cheap, cache writes cost a little more.
PRICES = {"scripted": ModelPrice(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)}


@tool(read_only=True)
def order_history(customer: str) -> str:
    """The customer's recent orders."""
    rows = [f"order {n}: {n % 4 + 1} x widget, ${n * 7 % 90 + 10}.00, delivered" for n in range(40)]
    return f"{customer}:\n" + "\n".join(rows)


def scripted_model() -> ScriptedModel:
    """Two model calls, with the usage a provider with prompt caching would report."""
    lookup = ScriptedCall("order_history", {"customer": "ada"})
    return ScriptedModel(
        [
            # First call: the stable prefix (tools, system, context) is written to the cache.
            ScriptedResponse(
                tool_calls=[lookup],
                usage=Usage(input_tokens=18, cache_write_tokens=67, output_tokens=20),
            ),
            # Second call: the prefix is read from the cache; the tool result is new input.
            ScriptedResponse(
                text="Ada ordered 40 times; every order was delivered.",
                usage=Usage(input_tokens=425, cache_read_tokens=67, output_tokens=14),
            ),
        ]
    )


def print_call(call: CallSnapshot) -> None:
    """One model call: its segments, then its usage, cache status and cost."""
    print(f"\ncall {call.step} to {call.model}: {call.tokens} tokens ({call.tokenizer})")
    print(f"  {'source':<12} {'module':<14} {'processor':<22} {'tokens':>6} {'share':>6}")
    for s in call.segments:
        print(f"  {s.source:<12} {s.module:<14} {s.processor:<22} {s.tokens:>6} {s.share:>6.1%}")
    u = call.usage
    hit = "n/a" if call.cache_hit_rate is None else f"{call.cache_hit_rate:.0%}"
    print(
        f"  usage: {u.input_tokens} uncached in, {u.cache_read_tokens} cache read, "
        f"{u.cache_write_tokens} cache write, {u.output_tokens} out; cache hit rate {hit}"
    )
    print(
        f"  prefix: {call.stable_tokens} tokens before the cache breakpoint; "
        f"{call.prefix_tokens} ({call.prefix_reuse:.0%}) sent as the previous call sent them"
    )
    print(f"  cost: ${call.cost.usd:.6f} ({call.cost.price_source} prices)")


async def main(model: Model, out: Path) -> None:
    """Run one turn with accounting on; print the figures; write the report into ``out``."""
    session_file = out / "tokens.jsonl"
    memory = InMemoryMemoryStore()
    await memory.remember("Ada prefers short answers.")
    kept = InMemorySink()
    agent = Agent(
        model=model,
        instructions="You are the shop's support assistant. Be brief.",
        context_block="Today is a weekday; the shop ships within two days.",
        memory=memory,
        tools=[order_history],
        prices=PRICES,
        context=ContextOptions(
            memory_scope="default",  # the shared scope remember() wrote to (default: per caller)
            accounting=Accounting(sinks=[kept, JsonlSink(session_file)]),
        ),
    )
    session = Session(agent)
    async for _ in session.send("How did Ada's orders go?"):
        pass
    (turn,) = kept.snapshots
    for call in turn.calls:
        print_call(call)
    print(f"\nturn total: {session.usage.total_tokens} tokens, ${session.cost_usd:.6f}")
    report = write_report(session_file, out / "report.html", title="Token accounting example")
    print(f"wrote {session_file} and {report}")
    await session.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a model string such as openai:gpt-4.1 (default: offline)")
    parser.add_argument("--out", type=Path, default=Path("token-report"), help="output folder")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "tokens.jsonl").unlink(missing_ok=True)  # a fresh session file each run
    try:
        model = model_from_string(args.model) if args.model else scripted_model()
    except (ConfigError, ImportError) as exc:  # no key, or the provider's extra is missing
        parser.error(str(exc))
    anyio.run(main, model, args.out)
