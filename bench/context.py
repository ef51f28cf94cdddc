"""Benchmark the context compiler's per-turn cost against the transcript's length.

Run by hand from the repository root (it is not a pytest test)::

    python bench/context.py            # full run, well under two minutes
    python bench/context.py --quick    # fewer repeats, a few seconds, noisier
    python bench/context.py --steady   # minima of short batches in thread CPU time
    python bench/context.py --instructions [--baseline OLD/src]  # valgrind counts

One *turn* is what a host does between two user messages that reach the
model: commit the user's message, ``compile`` the request, commit the
assistant's answer. Every figure is the median, over batches, of the mean µs
per turn of a batch (``time.perf_counter_ns``, garbage collector frozen and
disabled while a batch runs); ``--steady`` takes the minimum over many short
batches of thread CPU time instead, which a machine shared with other work
disturbs far less. The compilers being compared are all built and
filled first, then their batches are interleaved round-robin, so a baseline and
the runs measured against it share the same machine state.

Three tables:

- **append**: ``compiler.append([user])`` + ``compile(turn_index=next)`` +
  ``compiler.append([answer])`` with 1k, 10k and 100k messages already in the
  transcript. Ratios against 1k; target: flat within 1.5x.
- **sync**: the same turn by a host that keeps one Python list, appends to it
  and calls ``compiler.sync(the_list)`` (``trust_message_identity=True``, the
  identity fast path) before and after the compile. Ratios against 1k.
- **accounting** at 10k messages, warm count cache: the append turn with
  ``Accounting(tokenizer=TiktokenTokenizer("o200k_base"))`` against the same
  turn without accounting, then also ``record_call`` + ``end_turn`` into an
  ``InMemorySink``. Overhead as a percentage of the turn without accounting;
  target under 5%. The figures are worked out when first read, so a last
  row also reads each turn's snapshot (tokens, tokens per source, prefix
  reuse), as a JSONL or OpenTelemetry sink does: what reading them costs.

``--instructions`` counts the accounting table's turns instead of timing
them: each subject runs in its own process under valgrind's callgrind,
which dumps its instruction count at markers (``os.getppid()`` calls)
placed after the fill and a warm-up, after a few turns and after many more;
the difference over the extra turns is one turn's instructions, exact and
untouched by other work on the machine (valgrind runs ~50x slower, so the
history defaults to 1,000 messages). With ``--baseline`` an older
checkout's ``src/`` is counted too, interleaved round by round.

Processors (the same set at every size): BaseSystemPrompt, ContextBlock,
SkillRecipe, MemoryRecall (an InMemoryMemoryStore of 50 items, k=5),
Microcompact, ToolResultBudget (1,500 chars, so some canned results are cut)
and Compaction with a budget of 10^9 tokens: it runs its check at every
compile but never triggers, even at 100k messages (about 8M estimated tokens).
Nothing is asserted; the table says whether each target is met.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import JsonValue

import bench
from mainspring.context import (
    Accounting,
    BaseSystemPrompt,
    Compaction,
    ContextBlock,
    ContextCompiler,
    InMemorySink,
    MemoryRecall,
    Microcompact,
    Processor,
    SkillRecipe,
    ToolResultBudget,
)
from mainspring.context.snapshot import CostEstimate
from mainspring.memory import InMemoryMemoryStore
from mainspring.messages import Message, TextPart, ToolCallPart, ToolResultPart
from mainspring.tokens import TiktokenTokenizer
from mainspring.usage import Usage

SIZES = (1_000, 10_000, 100_000)
ACCOUNTING_SIZE = 10_000
FLAT_TARGET = 1.5
"""Largest acceptable ratio of a turn at 100k (or 10k) messages to one at 1k."""
ACCOUNTING_TARGET = 5.0
"""Largest acceptable accounting overhead, % of the turn without accounting."""
NO_COMPACTION = 10**9
"""A context budget (tokens) that 100k messages never reach: Compaction never triggers."""

# ----------------------------------------------------------------- workload

CONTEXT_BLOCK = (
    "Account: acme-corp (enterprise plan). Repository: mainspring, branch main, "
    "Python 3.12, src layout. Open incidents: none. Today's focus: context engine latency."
)
SKILL = (
    "When asked about code: locate the definition with search_code, read the surrounding "
    "lines with read_file, then answer citing file paths and line numbers. Prefer short "
    "answers; never guess a function's behaviour without reading it."
)
MEMORIES = tuple(
    f"The user prefers {style} answers about {module}.py; last discussed {topic} there."
    for style, module, topic in (
        (s, m, t)
        for s in ("short", "detailed", "annotated", "example-first", "step-by-step")
        for m, t in zip(
            (*bench._MODULES, "compiler"),
            (
                "streaming",
                "resume",
                "codec",
                "event order",
                "tool policy",
                "checkpoints",
                "SSE framing",
                "state machine",
                "pricing",
                "prefix reuse",
            ),
            strict=True,
        )
    )
)
"""50 memory items."""

_ANSWERS = tuple(bench.FINAL_TEXT[: 200 + i] for i in range(200))
_MODULE_COUNT = len(bench._MODULES)


def _turn_messages(turn: int) -> tuple[Message, Message, Message, Message]:
    """One earlier turn: user, assistant calling a tool, its result, the answer.

    Every seventh turn repeats the same read (Microcompact collapses the repeats).
    """
    module = bench._MODULES[turn % _MODULE_COUNT]
    call_id = f"toolu_{turn}"
    args: dict[str, JsonValue] = (
        dict(bench.S1_ARGS)
        if turn % 7 == 0
        else {"path": f"src/mainspring/{module}.py", "start_line": 1 + turn % 400}
    )
    content = bench._RESULTS[1 if turn % 7 == 0 else turn % len(bench._RESULTS)]
    return (
        Message.user(f"Turn {turn}: what does {module}.py do with its inputs?"),
        Message(
            role="assistant",
            parts=(
                TextPart(text="Let me look."),
                ToolCallPart(id=call_id, name="read_file", arguments=args),
            ),
        ),
        Message.tool_results(
            [ToolResultPart(tool_use_id=call_id, name="read_file", content=content)]
        ),
        Message.assistant(_ANSWERS[turn % 200]),
    )


def history(n: int) -> list[Message]:
    """``n`` messages of earlier turns, four per turn."""
    return [m for turn in range((n + 3) // 4) for m in _turn_messages(turn)][:n]


def new_turns(count: int, first: int) -> list[tuple[Message, Message]]:
    """(user, answer) pairs for the timed turns (built before timing)."""
    return [
        (
            Message.user(
                f"Turn {t}: how does {bench._MODULES[t % _MODULE_COUNT]}.py handle "
                "a cancelled tool call?"
            ),
            Message.assistant(_ANSWERS[t % 200]),
        )
        for t in range(first, first + count)
    ]


async def memory_store() -> InMemoryMemoryStore:
    store = InMemoryMemoryStore()
    for text in MEMORIES:
        await store.remember(text)
    return store


def processors(store: InMemoryMemoryStore) -> list[Processor]:
    return [
        BaseSystemPrompt(bench.INSTRUCTIONS),
        ContextBlock(CONTEXT_BLOCK, title="Account"),
        SkillRecipe(SKILL),
        MemoryRecall(store, k=5),
        Microcompact(),
        ToolResultBudget(1_500),
        Compaction(NO_COMPACTION),
    ]


# ------------------------------------------------------------------ subjects

Turn = Callable[[Message, Message], Awaitable[None]]


@dataclass
class Subject:
    """A compiler filled with history, and how one timed turn drives it."""

    name: str
    turn: Turn
    compiler: ContextCompiler[Message]
    next_turn: int
    length: int

    async def run(self, count: int, clock: Callable[[], int] = time.perf_counter_ns) -> float:
        """Mean µs per turn over ``count`` turns (messages built before the clock starts)."""
        pairs = new_turns(count, self.next_turn)
        turn = self.turn
        gc.collect(0)
        gc.disable()
        try:
            start = clock()
            for user, answer in pairs:
                await turn(user, answer)
            elapsed = clock() - start
        finally:
            gc.enable()
        self.next_turn += count
        return elapsed / count / 1_000


async def append_subject(
    name: str,
    n: int,
    *,
    accounting: Accounting | None = None,
    record: bool = False,
    read: bool = False,
) -> Subject:
    compiler: ContextCompiler[Message] = ContextCompiler(
        processors=processors(await memory_store()), accounting=accounting, model="gpt-4o"
    )
    compiler.append(history(n))
    state = {"turn": (n + 3) // 4}
    usage = Usage(input_tokens=12_000, output_tokens=120, requests=1)
    cost = CostEstimate(usd=0.0, priced=False, price_source="none")

    async def turn(user: Message, answer: Message) -> None:
        compiler.append([user])
        compiled = await compiler.compile(turn_index=state["turn"])
        compiler.append([answer])
        if record:
            compiler.record_call(compiled, model="gpt-4o", usage=usage, cost=cost)
            snapshot = compiler.end_turn()
            if read and snapshot is not None:
                snapshot.by_source()
                _ = snapshot.tokens, snapshot.prefix_reuse
        state["turn"] += 1

    return Subject(name, turn, compiler, state["turn"], n)


async def sync_subject(name: str, n: int) -> Subject:
    compiler: ContextCompiler[Message] = ContextCompiler(
        processors=processors(await memory_store()), trust_message_identity=True, model="gpt-4o"
    )
    host = history(n)
    compiler.sync(host)
    state = {"turn": (n + 3) // 4}

    async def turn(user: Message, answer: Message) -> None:
        host.append(user)
        compiler.sync(host)
        await compiler.compile(turn_index=state["turn"])
        host.append(answer)
        compiler.sync(host)
        state["turn"] += 1

    return Subject(name, turn, compiler, state["turn"], n)


# -------------------------------------------------------------------- timing


@dataclass(frozen=True, slots=True)
class Plan:
    warmup: int
    """Turns run on each subject before timing (fills caches, memory recall...)."""
    batch: int
    """Turns per timed batch."""
    batches: int
    """Batches per subject, interleaved round-robin across subjects."""
    steady: bool = False
    """Minimum over batches of thread CPU time, instead of the median of wall time."""


FULL = Plan(warmup=50, batch=100, batches=15)
QUICK = Plan(warmup=10, batch=40, batches=5)
STEADY = Plan(warmup=50, batch=20, batches=60, steady=True)


async def measure(subjects: list[Subject], plan: Plan) -> dict[str, float]:
    """Median (or, steady, minimum) over batches of the mean µs per turn, interleaved.

    The filled compilers (millions of objects at 100k messages) are frozen out of
    the collector's way once, so no batch pays for a full collection of them.
    """
    clock = time.thread_time_ns if plan.steady else time.perf_counter_ns
    gc.collect()
    gc.freeze()
    try:
        for s in subjects:
            await s.run(plan.warmup, clock)
        samples: dict[str, list[float]] = {s.name: [] for s in subjects}
        for i in range(plan.batches):
            # Rotate the order so no subject always runs first (or right after a fill).
            for s in subjects[i % len(subjects) :] + subjects[: i % len(subjects)]:
                samples[s.name].append(await s.run(plan.batch, clock))
    finally:
        gc.unfreeze()
    pick = min if plan.steady else statistics.median
    return {name: pick(values) for name, values in samples.items()}


# ------------------------------------------------------------------- tables


def _verdict(ok: bool) -> str:
    return "ok" if ok else "OVER"


def print_scaling(title: str, figures: dict[int, float]) -> None:
    base = figures[SIZES[0]]
    head = f"{title:<26} {'µs/turn':>9} {'vs 1k':>7} {'target':>8}"
    print(head)
    print("-" * len(head))
    for n in SIZES:
        ratio = figures[n] / base
        target = "—" if n == SIZES[0] else f"≤{FLAT_TARGET:.1f}x"
        verdict = "" if n == SIZES[0] else "  " + _verdict(ratio <= FLAT_TARGET)
        print(f"{f'{n:,} messages':<26} {figures[n]:>9.1f} {ratio:>6.2f}x {target:>8}{verdict}")


def print_accounting(plain: float, counted: float, recorded: float, read: float) -> None:
    label = f"accounting, {ACCOUNTING_SIZE:,} messages"
    head = f"{label:<34} {'µs/turn':>9} {'overhead':>9} {'target':>7}"
    print(head)
    print("-" * len(head))
    print(f"{'no accounting (baseline)':<34} {plain:>9.1f} {'—':>9} {'—':>7}")
    for label, value, targeted in (
        ("tiktoken o200k, compile", counted, True),
        ("+ record_call + end_turn (sink)", recorded, True),
        ("+ reading each snapshot", read, False),
    ):
        pct = (value / plain - 1) * 100
        target = f"<{ACCOUNTING_TARGET:.0f}%" if targeted else "—"
        verdict = "  " + _verdict(pct < ACCOUNTING_TARGET) if targeted else ""
        print(f"{label:<34} {value:>9.1f} {pct:>8.1f}% {target:>7}{verdict}")


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


async def run(plan: Plan) -> None:
    """Each table's compilers are built, measured together, then dropped."""
    started = time.perf_counter()
    print(
        f"plan: {plan.warmup} warm-up turns per compiler, then {plan.batches} batches of "
        f"{plan.batch} turns per compiler, interleaved; figures are "
        f"{'minima of batch means in thread CPU time' if plan.steady else 'medians of batch means'}"
        "\n"
    )

    fill = time.perf_counter()
    appended = [await append_subject(f"append {n}", n) for n in SIZES]
    print(f"(append compilers filled in {time.perf_counter() - fill:.1f} s)")
    a = await measure(appended, plan)
    print_scaling("append + compile + append", {x.length: a[x.name] for x in appended})
    del appended
    print()

    fill = time.perf_counter()
    synced = [await sync_subject(f"sync {n}", n) for n in SIZES]
    print(f"(sync compilers filled in {time.perf_counter() - fill:.1f} s)")
    s = await measure(synced, plan)
    print_scaling("sync + compile + sync", {x.length: s[x.name] for x in synced})
    del synced
    print()

    fill = time.perf_counter()
    tokenizer = TiktokenTokenizer("o200k_base")
    sink = InMemorySink(maxlen=1_000)
    accounted = [
        await append_subject("plain", ACCOUNTING_SIZE),
        await append_subject(
            "accounting", ACCOUNTING_SIZE, accounting=Accounting(tokenizer=tokenizer)
        ),
        await append_subject(
            "accounting+record",
            ACCOUNTING_SIZE,
            accounting=Accounting(tokenizer=tokenizer, sinks=[sink]),
            record=True,
        ),
        await append_subject(
            "accounting+record+read",
            ACCOUNTING_SIZE,
            accounting=Accounting(tokenizer=tokenizer, sinks=[InMemorySink(maxlen=1_000)]),
            record=True,
            read=True,
        ),
    ]
    print(f"(accounting compilers filled in {time.perf_counter() - fill:.1f} s)")
    counting = accounted[1].compiler.meter
    assert counting is not None
    cache = counting.cache
    hits, misses = cache.hits, cache.misses
    acc = await measure(accounted, plan)
    print_accounting(
        acc["plain"], acc["accounting"], acc["accounting+record"], acc["accounting+record+read"]
    )
    turns = plan.warmup + plan.batch * plan.batches
    print(
        f"(count cache, per timed turn: {(cache.hits - hits) / turns:.1f} hits, "
        f"{(cache.misses - misses) / turns:.1f} misses, mostly the new user message; "
        f"{cache.evictions} evictions; a text the compiler counted lately is answered "
        f"before the cache; sink holds {len(sink.snapshots)} snapshots)"
    )
    print(f"\ntotal bench time {time.perf_counter() - started:.1f} s, load {_load()}")


# ------------------------------------------------------------- instructions

ACCOUNTED = ("plain", "accounting", "accounting+record", "accounting+record+read")
"""The accounting table's subjects, in its order."""
FEW, MANY = 20, 120
"""Turns in the two counted parts of ``--instructions`` (after 50 warm-up turns)."""


async def accounted_subject(name: str, n: int) -> Subject:
    """One of the accounting table's subjects, by name."""
    if name == "plain":
        return await append_subject(name, n)
    accounting = Accounting(
        tokenizer=TiktokenTokenizer("o200k_base"), sinks=[InMemorySink(maxlen=1_000)]
    )
    record = name != "accounting"
    return await append_subject(
        name, n, accounting=accounting, record=record, read=name.endswith("+read")
    )


async def counted_child(name: str, n: int) -> None:
    """Run one subject between callgrind's markers (see ``--instructions``)."""
    subject = await accounted_subject(name, n)
    await subject.run(50)
    gc.collect()
    gc.freeze()
    os.getppid()  # marker: callgrind dumps its counts at each call
    await subject.run(FEW)
    os.getppid()
    await subject.run(MANY)
    os.getppid()


def count_turn(name: str, n: int, src: str | None) -> float:
    """Instructions one turn of subject ``name`` executes (``src``: another mainspring)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cg.out"
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        if src is not None:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, (src, env.get("PYTHONPATH"))))
        proc = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--dump-before=os_getppid",
                f"--callgrind-out-file={out}",
                sys.executable,
                __file__,
                "--child",
                name,
                "--messages",
                str(n),
            ],
            capture_output=True,
            text=True,
            timeout=3_600,
            check=False,
            env=env,
        )
        parts = []
        for dump in (Path(f"{out}.2"), Path(f"{out}.3")):  # .1: everything before the first
            found = re.search(r"^summary: (\d+)", dump.read_text() if dump.exists() else "", re.M)
            parts.append(int(found.group(1)) if found else -1)
    if proc.returncode != 0 or min(parts) < 0:
        raise SystemExit(f"{name} failed under valgrind:\n{proc.stderr[-2000:]}")
    return (parts[1] - parts[0]) / (MANY - FEW)


def count_all(n: int, rounds: int, baseline: str | None, names: Sequence[str] = ACCOUNTED) -> None:
    """Print the accounting table by instructions per turn (and the baseline's)."""
    if shutil.which("valgrind") is None:
        raise SystemExit("needs valgrind (apt-get install valgrind)")
    trees = [("this tree", None)] + ([("baseline", baseline)] if baseline else [])
    counts: dict[tuple[str, str], list[float]] = {}
    for _ in range(rounds):
        for label, src in trees[:: 1 if _ % 2 == 0 else -1]:
            for name in names:
                counts.setdefault((label, name), []).append(count_turn(name, n, src))
    print(f"instructions per turn, {n:,} messages, {MANY - FEW} turns counted, {rounds} round(s)")
    for label, _src in trees:
        plain = statistics.median(counts[(label, "plain")])
        print(f"\n{label}: no accounting (baseline) {plain:>12,.0f}")
        for name in names[1:]:
            values = counts[(label, name)]
            value = statistics.median(values)
            spread = ", ".join(f"{(v / plain - 1) * 100:.1f}%" for v in values)
            print(f"  {name:<24} {value:>12,.0f}  {(value / plain - 1) * 100:>6.1f}%  ({spread})")


def main() -> None:
    parser = argparse.ArgumentParser(description="Benchmark mainspring's context compiler.")
    parser.add_argument("--quick", action="store_true", help="fewer repeats (a smoke run)")
    parser.add_argument(
        "--steady", action="store_true", help="minima of short batches in thread CPU time"
    )
    parser.add_argument(
        "--instructions", action="store_true", help="count the accounting table (valgrind)"
    )
    parser.add_argument("--messages", type=int, default=1_000, help="history (--instructions)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds (--instructions)")
    parser.add_argument("--baseline", help="an older checkout's src/ (--instructions)")
    parser.add_argument(
        "--subjects",
        default=",".join(ACCOUNTED[1:]),
        help="which accounted subjects to count besides plain (--instructions)",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        asyncio.run(counted_child(args.child, args.messages))
        return
    if args.instructions:
        chosen = [name for name in args.subjects.split(",") if name in ACCOUNTED[1:]]
        count_all(args.messages, args.rounds, args.baseline, ("plain", *chosen))
        return
    plan = STEADY if args.steady else QUICK if args.quick else FULL
    kind = "steady" if args.steady else "quick" if args.quick else "full"
    print(f"mainspring context bench ({kind}): python {sys.version.split()[0]}, load {_load()}")
    asyncio.run(run(plan))


if __name__ == "__main__":
    main()
