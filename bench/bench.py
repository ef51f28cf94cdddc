"""Benchmark mainspring's engine against the floor: a hand-written asyncio loop.

Run by hand from the repository root (it is not a pytest test)::

    python bench/bench.py            # full run, well under two minutes
    python bench/bench.py --quick    # fewer iterations, a few seconds
    python bench/bench.py --profile  # where the engine spends time beyond the floor

Every engine figure is printed next to its floor: the same work (the same
ScriptedModel class playing the same script, the same tool functions, the same
transcript) done by the plainest loop that honours the engine's contract. The
ratio is the engine's overhead factor. See bench/README.md for each figure.
"""

from __future__ import annotations

# Only what the workload needs is imported here: the --probe-rss process measures an
# application's footprint (mainspring, an agent, a session), so the runner's own modules
# (asyncio, subprocess, statistics, argparse, cProfile...) are imported where used.
import dataclasses
import gc
import inspect
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial

from pydantic import JsonValue

from mainspring import (
    Agent,
    ContextOptions,
    ErrorEvent,
    Event,
    Message,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    TextDelta,
    Tool,
    ToolCallDelta,
    ToolResult,
    TurnComplete,
    Usage,
    tool,
)
from mainspring._run.results import truncate_result
from mainspring.messages import Part, TextPart, ToolCallPart, ToolResultPart
from mainspring.models.base import ModelRequest, SystemBlock, ToolCallEnd

Run = Callable[[], Awaitable[None]]
"""One timed unit of work: a prepared turn, awaited inside the timed region."""
Prepare = Callable[[int], list[Run]]
"""Builds ``n`` fresh runs (models, sessions, histories): setup, never timed."""
ToolFn = Callable[..., Awaitable[str]]

# ----------------------------------------------------------------- workload

INSTRUCTIONS = (
    "You are a careful coding assistant working in a Python repository. Read the code "
    "before answering, cite file paths and line numbers, and keep answers short."
)
USER_TEXT = "Where does the engine start read-only tool calls, and can two of them overlap?"
FINAL_TEXT = (
    "Reads start in `Loop._on_call` (src/mainspring/_loop.py): as soon as the model "
    "closes a call's arguments, a read-only, concurrency-safe tool is judged and started on "
    "the step's task group, while the model is still streaming. So yes, reads overlap with "
    "each other and with the rest of the stream. Writes wait until the stream ends and then "
    "run one at a time, in the order the model asked for them; a confirm-tier write pauses "
    "the turn with a pending action instead."
)
_WORDS = (
    "async def await return self state message result tool engine stream model step "
    "session event read write call input output parts text usage cost turn index view "
    "cancel scope task group emit record append json loads dumps policy guard hook"
).split()


def _chunk(seed: int, size: int) -> str:
    """Deterministic source-like text of about ``size`` characters."""
    lines: list[str] = []
    total, x, line_no = 0, seed * 2654435761 % 2**32 or 1, 1
    while total < size:
        words = []
        for _ in range(4 + x % 7):
            x = (1103515245 * x + 12345) % 2**31
            words.append(_WORDS[x % len(_WORDS)])
        line = f"{line_no:5d}  " + " ".join(words)
        lines.append(line)
        total += len(line) + 1
        line_no += 1
    return "\n".join(lines)


_RESULTS = tuple(_chunk(seed, 300 + 150 * seed) for seed in range(12))
"""Canned tool results, 344 to 1,985 characters."""


def _result(key: str, salt: int) -> str:
    return _RESULTS[(len(key) + salt) % len(_RESULTS)]


@tool(read_only=True)
async def read_file(path: str, start_line: int = 1, max_lines: int = 200) -> str:
    """Read a range of lines from a file in the repository.

    Args:
        path: File path relative to the repository root.
        start_line: First line to return (1-based).
        max_lines: How many lines to return at most.
    """
    return _result(path, start_line + max_lines)


@tool(read_only=True)
async def search_code(query: str, path_glob: str = "**/*.py", limit: int = 20) -> str:
    """Search the repository for a regular expression.

    Args:
        query: The regular expression.
        path_glob: Only search files matching this glob.
        limit: At most this many matches.
    """
    return _result(query + path_glob, limit)


@tool(read_only=True)
async def list_dir(path: str) -> str:
    """List a directory of the repository.

    Args:
        path: Directory path relative to the repository root.
    """
    return _result(path, 3)


@tool(read_only=True)
async def get_issue(number: int) -> str:
    """Fetch an issue of the project's tracker, with its comments.

    Args:
        number: The issue number.
    """
    return _result("issue", number)


TOOLS: tuple[Tool, ...] = (read_file, search_code, list_dir, get_issue)


def _plain(t: Tool) -> ToolFn:
    assert t.fn is not None and t.is_async
    fn: ToolFn = t.fn
    return fn


FLOOR_TOOLS: dict[str, ToolFn] = {t.name: _plain(t) for t in TOOLS}
FLOOR_LIMITS: dict[str, int] = {t.name: t.policy.max_result_chars for t in TOOLS}
SYSTEM = (SystemBlock(text=INSTRUCTIONS, source="instructions", cache_breakpoint=True),)
SPECS = tuple(t.spec for t in TOOLS)


def _usage(input_tokens: int, output_tokens: int) -> Usage:
    # Explicit usage, as a provider reports it: otherwise ScriptedModel estimates input
    # tokens by walking the whole history, a test-double cost that would swamp S3.
    return Usage(input_tokens=input_tokens, output_tokens=output_tokens, requests=1)


S1_ARGS: dict[str, JsonValue] = {
    "path": "src/mainspring/_loop.py",  # canned data: the bytes the benchmark has always sent
    "start_line": 1,
    "max_lines": 120,
}
S1_SCRIPT: tuple[ScriptedResponse, ...] = (
    ScriptedResponse(tool_calls=[ScriptedCall("read_file", S1_ARGS)], usage=_usage(1_200, 30)),
    ScriptedResponse(text=FINAL_TEXT, usage=_usage(1_800, 120)),
)

_MODULES = ("engine", "session", "messages", "events", "agent", "codec", "sse", "state", "cost")
S2_STEPS = 10


def _s2_step(i: int) -> ScriptedResponse:
    module = _MODULES[i % len(_MODULES)]
    calls = [
        ScriptedCall(
            "read_file", {"path": f"src/mainspring/{module}.py", "start_line": 1 + 40 * i}
        ),
        ScriptedCall("search_code", {"query": f"def _?{module}\\w*\\(", "limit": 10 + i}),
        ScriptedCall("list_dir", {"path": f"tests/{module}"}),
        ScriptedCall("get_issue", {"number": 100 + i}),
    ]
    return ScriptedResponse(tool_calls=calls, usage=_usage(1_500 + 900 * i, 110))


S2_SCRIPT: tuple[ScriptedResponse, ...] = (
    *(_s2_step(i) for i in range(S2_STEPS)),
    ScriptedResponse(text=FINAL_TEXT, usage=_usage(11_000, 120)),
)


def build_history(n: int) -> tuple[Message, ...]:
    """``n`` messages of earlier turns: user, assistant calling tools, tool results, answer.

    Every turn is four messages; every fifth turn makes two calls, and every seventh
    repeats S1's read (identical calls return identical results, which microcompact
    collapses in the model's view).
    """
    out: list[Message] = []
    turn = 0
    while len(out) < n:
        module = _MODULES[turn % len(_MODULES)]
        out.append(Message.user(f"Turn {turn}: what does {module}.py do with its inputs?"))
        calls = [
            ToolCallPart(
                id=f"toolu_h{turn}_0",
                name="read_file",
                arguments=(
                    dict(S1_ARGS)
                    if turn % 7 == 0
                    else {"path": f"src/mainspring/{module}.py", "start_line": 1 + turn}
                ),
            )
        ]
        if turn % 5 == 0:
            calls.append(
                ToolCallPart(id=f"toolu_h{turn}_1", name="search_code", arguments={"query": module})
            )
        out.append(Message(role="assistant", parts=(TextPart(text="Let me look."), *calls)))
        out.append(
            Message.tool_results(
                ToolResultPart(
                    tool_use_id=c.id,
                    name=c.name,
                    content=_result(json.dumps(c.arguments, sort_keys=True), 0),
                )
                for c in calls
            )
        )
        out.append(Message.assistant(FINAL_TEXT[: 200 + turn % 200]))
        turn += 1
    return tuple(out[:n])


# ------------------------------------------------------------------- engine


def make_agent(model: ScriptedModel) -> Agent:
    # No compaction: at 5,000 messages the history passes the 200k-token budget and
    # the first turn would compact it once (~13 ms), which is not per-turn cost.
    return Agent(
        model=model,
        name="bench",
        instructions=INSTRUCTIONS,
        tools=TOOLS,
        context=ContextOptions(budget=None),
    )


async def engine_turn(session: Session) -> None:
    async for _ in session.send(USER_TEXT):
        pass


def engine_prepare(script: Sequence[ScriptedResponse], history: Sequence[Message] = ()) -> Prepare:
    def prepare(n: int) -> list[Run]:
        return [
            partial(engine_turn, Session(make_agent(ScriptedModel(script)), messages=history))
            for _ in range(n)
        ]

    return prepare


# -------------------------------------------------------------------- floor


async def floor_turn(
    model: ScriptedModel, transcript: list[Message], text: str
) -> AsyncIterator[TextDelta | ToolCallDelta]:
    """The floor: the engine's observable work, written as plainly as possible.

    It streams the same deltas to its consumer, runs the same tool functions
    (reads in parallel), keeps the transcript the engine keeps and sends each
    request an immutable snapshot of it. No validation, permissions, guards,
    hooks, events, usage or cancellation: that is the overhead being measured.
    """
    import asyncio  # a dict lookup once per turn; see the note on imports at the top

    transcript.append(Message.user(text))
    while True:
        request = ModelRequest(system=SYSTEM, messages=tuple(transcript), tools=SPECS)
        texts: list[str] = []
        ends: list[ToolCallEnd] = []
        async for event in model.stream(request):
            kind = type(event)
            if kind is TextDelta:
                assert isinstance(event, TextDelta)
                texts.append(event.text)
                yield event
            elif kind is ToolCallDelta:
                assert isinstance(event, ToolCallDelta)
                yield event
            elif kind is ToolCallEnd:
                assert isinstance(event, ToolCallEnd)
                ends.append(event)
        parts: list[Part] = [TextPart(text="".join(texts))] if texts else []
        args = [json.loads(end.arguments) for end in ends]
        parts.extend(
            ToolCallPart(id=end.tool_use_id, name=end.name, arguments=a)
            for end, a in zip(ends, args, strict=True)
        )
        transcript.append(Message(role="assistant", parts=tuple(parts)))
        if not ends:
            return
        outputs = await asyncio.gather(
            *(FLOOR_TOOLS[end.name](**a) for end, a in zip(ends, args, strict=True))
        )
        transcript.append(
            Message.tool_results(
                ToolResultPart(
                    tool_use_id=end.tool_use_id,
                    name=end.name,
                    content=truncate_result(out, FLOOR_LIMITS[end.name]),
                )
                for end, out in zip(ends, outputs, strict=True)
            )
        )


async def floor_consume(model: ScriptedModel, transcript: list[Message]) -> None:
    async for _ in floor_turn(model, transcript, USER_TEXT):
        pass


def floor_prepare(script: Sequence[ScriptedResponse], history: Sequence[Message] = ()) -> Prepare:
    def prepare(n: int) -> list[Run]:
        return [partial(floor_consume, ScriptedModel(script), list(history)) for _ in range(n)]

    return prepare


# ------------------------------------------------------------ verification


def _with_provider_ids(messages: Sequence[Message]) -> list[Message]:
    """The engine's transcript with each call's provider id where its engine id is."""
    ids = {c.id: c.provider_id for m in messages for c in m.tool_calls if c.provider_id}

    def part(p: Part) -> Part:
        if isinstance(p, ToolCallPart) and p.id in ids:
            return dataclasses.replace(p, id=ids[p.id], provider_id="")
        if isinstance(p, ToolResultPart) and p.tool_use_id in ids:
            return dataclasses.replace(p, tool_use_id=ids[p.tool_use_id])
        return p

    return [dataclasses.replace(m, parts=tuple(part(p) for p in m.parts)) for m in messages]


async def verify(script: Sequence[ScriptedResponse], history: Sequence[Message] = ()) -> None:
    """Fail loudly unless engine and floor did the same observable work, without errors."""
    session = Session(make_agent(ScriptedModel(script)), messages=history)
    events: list[Event] = [e async for e in session.send(USER_TEXT)]
    last = events[-1]
    if not isinstance(last, TurnComplete) or last.stop_reason != "end_turn":
        raise SystemExit(f"engine run did not end cleanly: {last!r}")
    bad = [
        e for e in events if isinstance(e, ErrorEvent) or (isinstance(e, ToolResult) and e.is_error)
    ]
    if bad:
        raise SystemExit(f"engine run reported errors: {bad!r}")
    transcript = list(history)
    deltas = [e async for e in floor_turn(ScriptedModel(script), transcript, USER_TEXT)]

    # The engine hands tool-call deltas its own call ids (the provider's are kept in
    # the transcript); compare everything else.
    def same(e: TextDelta | ToolCallDelta) -> object:
        return (e.type, e.name, e.index, e.args_delta) if isinstance(e, ToolCallDelta) else e

    streamed = [same(e) for e in events if isinstance(e, TextDelta | ToolCallDelta)]
    if streamed != [same(e) for e in deltas]:
        raise SystemExit("engine and floor streamed different deltas")
    if _with_provider_ids(session.messages) != transcript:
        raise SystemExit("engine and floor kept different transcripts")


# ----------------------------------------------------------------- timing


Clock = Callable[[], int]
CLOCKS: dict[str, Clock] = {"wall": time.perf_counter_ns, "cpu": time.process_time_ns}
"""``wall`` is the figure; ``cpu`` (this process's CPU time) resists other processes' load."""
CLOCK_NAMES = {
    "wall": "wall (time.perf_counter_ns)",
    "cpu": "cpu (time.process_time_ns; import time: children's user+system time)",
}


async def _timed_batch(runs: list[Run], clock: Clock) -> float:
    """Mean µs per run; the prepared objects are frozen out of the collector's way."""
    gc.collect()
    gc.freeze()
    try:
        start = clock()
        for run in runs:
            await run()
        elapsed = clock() - start
    finally:
        gc.unfreeze()
    return elapsed / len(runs) / 1_000


@dataclass(frozen=True, slots=True)
class Plan:
    warmup: int
    batch: int
    batches: int


async def compare(engine: Prepare, floor: Prepare, plan: Plan, clock: Clock) -> tuple[float, float]:
    """Median over batches of the mean µs per run, engine and floor batches interleaved."""
    import statistics

    for prepare in (engine, floor):
        for run in prepare(plan.warmup):
            await run()
    samples: dict[str, list[float]] = {"engine": [], "floor": []}
    for i in range(plan.batches):
        order = [("engine", engine), ("floor", floor)]
        for name, prepare in order if i % 2 == 0 else reversed(order):
            samples[name].append(await _timed_batch(prepare(plan.batch), clock))
    return statistics.median(samples["engine"]), statistics.median(samples["floor"])


# --------------------------------------------------------- process figures


def _print_rss() -> None:
    # Runs in a subprocess; its source is also the bare-interpreter baseline (python -c).
    import sys

    try:
        with open("/proc/self/status") as status:
            kib = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
        source = "VmRSS"
    except OSError:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        kib = peak // 1024 if sys.platform == "darwin" else peak
        source = "ru_maxrss"
    print(kib, source)


def probe_rss() -> None:
    """``--probe-rss``: resident memory after setup, then after one S1 turn on asyncio."""
    import asyncio

    session = Session(make_agent(ScriptedModel(S1_SCRIPT)))
    _print_rss()
    asyncio.run(engine_turn(session))
    _print_rss()


def _python(args: list[str]) -> str:
    """Run this interpreter with bytecode cached in a temp dir; return its stdout + stderr."""
    import subprocess
    import tempfile

    # Import from cached bytecode, as after a pip install, even where the environment sets
    # PYTHONDONTWRITEBYTECODE; the cache goes to a temp dir, never into src/.
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = os.path.join(tempfile.gettempdir(), "mainspring-bench-pycache")
    proc = subprocess.run(
        [sys.executable, *args], check=True, capture_output=True, text=True, env=env, timeout=60
    )
    return proc.stdout + proc.stderr


@dataclass(frozen=True, slots=True)
class Memory:
    setup_mib: float
    turn_mib: float
    bare_mib: float
    source: str


def memory_figures(repeats: int = 3) -> Memory:
    """Resident memory of fresh processes (bare, after setup, after one turn); medians."""
    import statistics

    _python(["-c", "import mainspring"])  # fill the bytecode cache: compiling inflates RSS
    bare_code = inspect.getsource(_print_rss) + "\n_print_rss()\n"
    bare = [int(_python(["-c", bare_code]).split()[0]) for _ in range(repeats)]
    probes = [_python([os.path.abspath(__file__), "--probe-rss"]).split() for _ in range(repeats)]
    return Memory(
        setup_mib=statistics.median(int(p[0]) for p in probes) / 1024,
        turn_mib=statistics.median(int(p[2]) for p in probes) / 1024,
        bare_mib=statistics.median(bare) / 1024,
        source=probes[0][1],
    )


def _spawn_ms(code: str, cpu: bool) -> float:
    """Wall time of ``python -c code``, or its CPU time (user + system) with ``cpu``."""
    if cpu:
        import resource

        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        _python(["-c", code])
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        used = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        return used * 1000
    start = time.perf_counter_ns()
    _python(["-c", code])
    return (time.perf_counter_ns() - start) / 1e6


FULL_IMPORT = "from mainspring import *"
PROGRAM_IMPORT = (
    "from mainspring import Agent, Session, tool, ScriptedModel, Message, TextDelta, TurnComplete"
)
"""The names a program uses (issue 12: <= 100 ms net, with bytecode present)."""


def import_figures(repeats: int, *, cpu: bool) -> tuple[float, float, float, float]:
    """Milliseconds beyond ``python -c pass`` for ``import mainspring``, for the
    names a program uses, for loading the whole public API (``from mainspring
    import *``), and the baseline.

    ``import mainspring`` alone loads names lazily, so the other figures are the
    honest cost an application pays.
    """
    import statistics

    _spawn_ms(FULL_IMPORT, cpu)  # fill the bytecode cache
    bare: list[float] = []
    lazy: list[float] = []
    program: list[float] = []
    full: list[float] = []
    for _ in range(repeats):
        bare.append(_spawn_ms("pass", cpu))
        lazy.append(_spawn_ms("import mainspring", cpu))
        program.append(_spawn_ms(PROGRAM_IMPORT, cpu))
        full.append(_spawn_ms(FULL_IMPORT, cpu))
    base = statistics.median(bare)
    return (
        statistics.median(lazy) - base,
        statistics.median(program) - base,
        statistics.median(full) - base,
        base,
    )


def import_breakdown(top: int) -> list[tuple[str, float]]:
    """Self time of loading the public API (``-X importtime``) by top-level package, ms."""
    totals: dict[str, float] = {}
    for line in _python(["-X", "importtime", "-c", FULL_IMPORT]).splitlines():
        fields = line.split("|")
        if len(fields) != 3 or not fields[1].strip().isdigit():
            continue
        self_us = int(fields[0].rsplit(":", 1)[1])
        package = fields[2].strip().split(".")[0]
        totals[package] = totals.get(package, 0.0) + self_us / 1000
    return sorted(totals.items(), key=lambda kv: -kv[1])[:top]


# -------------------------------------------------------------------- report


@dataclass(frozen=True, slots=True)
class Row:
    scenario: str
    engine_us: float
    floor_us: float
    target: float | None = None
    """Largest acceptable engine/floor ratio; ``None``: reported, not judged."""

    @property
    def ratio(self) -> float:
        return self.engine_us / self.floor_us


def _verdict(ok: bool | None) -> str:
    return "info" if ok is None else ("PASS" if ok else "MISS")


def print_timing(rows: list[Row]) -> None:
    head = (
        f"{'scenario':<28} {'engine µs':>11} {'floor µs':>10} {'engine-floor':>12} "
        f"{'ratio':>7} {'target':>8}  result"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        target = "-" if r.target is None else f"<= {r.target:.1f}x"
        ok = None if r.target is None else r.ratio <= r.target
        print(
            f"{r.scenario:<28} {r.engine_us:>11,.1f} {r.floor_us:>10,.1f} "
            f"{r.engine_us - r.floor_us:>12,.1f} {r.ratio:>6.2f}x {target:>8}  {_verdict(ok)}"
        )


def print_scaling(s3: dict[int, Row]) -> None:
    base = s3[100]
    head = (
        f"{'S3 growth':<28} {'engine':>11} {'floor':>10} {'engine-floor':>12} "
        f"{'':>7} {'target':>8}  result"
    )
    print(head)
    print("-" * len(head))
    for n, target in ((1_000, None), (5_000, 1.5)):
        r = s3[n]
        eng = r.engine_us / base.engine_us
        flo = r.floor_us / base.floor_us
        over = (r.engine_us - r.floor_us) / (base.engine_us - base.floor_us)
        shown = "-" if target is None else f"<= {target:.1f}x"
        ok = None if target is None else eng <= target
        print(
            f"{f'S3@{n:,} / S3@100':<28} {eng:>10.2f}x {flo:>9.2f}x {over:>11.2f}x "
            f"{'':>7} {shown:>8}  {_verdict(ok)}"
        )


def print_process(
    import_ms: float, program_ms: float, full_ms: float, bare_ms: float, memory: Memory
) -> None:
    head = f"{'figure':<28} {'value':>11} {'baseline':>24} {'target':>10}  result"
    print(head)
    print("-" * len(head))
    rows = (
        (
            "import mainspring",
            f"{import_ms:.1f} ms",
            f"python -c pass {bare_ms:.1f} ms",
            "< 150 ms",
            import_ms < 150,
        ),
        (
            "the names a program uses",
            f"{program_ms:.1f} ms",
            f"python -c pass {bare_ms:.1f} ms",
            "<= 100 ms",
            program_ms <= 100,
        ),
        (
            "from mainspring import *",
            f"{full_ms:.1f} ms",
            f"python -c pass {bare_ms:.1f} ms",
            "< 150 ms",
            full_ms < 150,
        ),
        (
            f"RSS after setup ({memory.source})",
            f"{memory.setup_mib:.1f} MiB",
            f"bare python {memory.bare_mib:.1f} MiB",
            "< 40 MiB",
            memory.setup_mib < 40,
        ),
        ("RSS after one S1 turn", f"{memory.turn_mib:.1f} MiB", "(adds asyncio)", "-", None),
    )
    for name, value, baseline, target, ok in rows:
        print(f"{name:<28} {value:>11} {baseline:>24} {target:>10}  {_verdict(ok)}")


# ------------------------------------------------------------------ profile


def _where(code: object) -> str:
    if isinstance(code, str):
        return code  # a builtin, e.g. "<method 'append' of 'list' objects>"
    assert inspect.iscode(code)
    path = code.co_filename
    for marker in ("site-packages/", "/src/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    else:
        import sysconfig

        stdlib = sysconfig.get_paths()["stdlib"]
        if path.startswith(stdlib):
            path = "stdlib" + path[len(stdlib) :]
    return f"{path}:{code.co_firstlineno}({code.co_name})"


def _group(where: str) -> str:
    for prefix in ("mainspring/", "anyio/", "pydantic", "sniffio/", "stdlib/asyncio/"):
        if where.startswith(prefix):
            return prefix.rstrip("/").replace("stdlib/", "")
    if where.startswith("<string>"):
        return "dataclass __init__"
    if where.startswith("<"):
        return "builtins"
    return "stdlib" if where.startswith("stdlib/") else "other"


Stats = dict[str, tuple[float, float]]
"""where -> (self µs per run, calls per run)."""


async def _profiled(runs: list[Run]) -> Stats:
    import cProfile

    profiler = cProfile.Profile()
    profiler.enable()
    for run in runs:
        await run()
    profiler.disable()
    stats: Stats = {}
    for entry in profiler.getstats():
        key = _where(entry.code)
        self_us, calls = stats.get(key, (0.0, 0.0))
        stats[key] = (
            self_us + entry.inlinetime * 1e6 / len(runs),
            calls + entry.callcount / len(runs),
        )
    return stats


async def profile(name: str, engine: Prepare, floor: Prepare, runs: int, top: int) -> None:
    for prepare in (engine, floor):
        for run in prepare(max(1, runs // 10)):
            await run()
    eng = await _profiled(engine(runs))
    flo = await _profiled(floor(runs))
    excess = {
        k: (v[0] - flo.get(k, (0.0, 0.0))[0], v[1], flo.get(k, (0.0, 0.0))[1])
        for k, v in eng.items()
    }
    total_e = sum(v[0] for v in eng.values())
    total_f = sum(v[0] for v in flo.values())
    print(
        f"\n{name}: under cProfile {total_e:,.0f} µs/run engine, {total_f:,.0f} µs/run floor "
        f"({runs} runs each; profiler overhead inflates both)"
    )
    groups: dict[str, float] = {}
    for k, (d, _, _) in excess.items():
        groups[_group(k)] = groups.get(_group(k), 0.0) + d
    print(
        "  excess self time by package: "
        + ", ".join(f"{g} {v:,.0f} µs" for g, v in sorted(groups.items(), key=lambda kv: -kv[1]))
    )
    ranked = sorted(excess.items(), key=lambda kv: -kv[1][0])
    own = [kv for kv in ranked if kv[0].startswith("mainspring/")]
    for title, chosen in (("all code", ranked[:top]), ("mainspring only", own[:top])):
        print(f"  {'excess µs':>9} {'calls e/f':>11}  {title}: self time beyond the floor, per run")
        for k, (d, ce, cf) in chosen:
            print(f"  {d:>9.1f} {f'{ce:.0f}/{cf:.0f}':>11}  {k}")


# --------------------------------------------------------------------- main


@dataclass(frozen=True, slots=True)
class Plans:
    s1: Plan
    s2: Plan
    s3: Plan
    imports: int


FULL = Plans(Plan(200, 200, 10), Plan(20, 50, 10), Plan(20, 50, 10), imports=10)
QUICK = Plans(Plan(30, 50, 4), Plan(5, 10, 4), Plan(5, 10, 4), imports=4)
HISTORY_SIZES = (100, 1_000, 5_000)


async def run_timings(plans: Plans, clock: Clock) -> tuple[list[Row], dict[int, Row]]:
    histories = {n: build_history(n) for n in HISTORY_SIZES}
    await verify(S1_SCRIPT)
    await verify(S2_SCRIPT)
    for history in histories.values():
        await verify(S1_SCRIPT, history)
    rows = [
        Row(
            "S1 one read round",
            *await compare(engine_prepare(S1_SCRIPT), floor_prepare(S1_SCRIPT), plans.s1, clock),
            target=5.0,
        ),
        Row(
            f"S2 {S2_STEPS} steps x 4 reads",
            *await compare(engine_prepare(S2_SCRIPT), floor_prepare(S2_SCRIPT), plans.s2, clock),
            target=3.0,
        ),
    ]
    s3: dict[int, Row] = {}
    for n, history in histories.items():
        engine = engine_prepare(S1_SCRIPT, history)
        floor = floor_prepare(S1_SCRIPT, history)
        s3[n] = Row(f"S3 +1 turn @ {n:,} msgs", *await compare(engine, floor, plans.s3, clock))
    return rows + list(s3.values()), s3


async def run_profiles(quick: bool) -> None:
    s1_runs, s2_runs = (100, 10) if quick else (1_000, 100)
    print("Hotspots: cProfile self time, engine minus floor, per run (file:line(function)).")
    await profile("S1", engine_prepare(S1_SCRIPT), floor_prepare(S1_SCRIPT), s1_runs, top=10)
    await profile("S2", engine_prepare(S2_SCRIPT), floor_prepare(S2_SCRIPT), s2_runs, top=10)


def main() -> None:
    import argparse
    import asyncio
    import platform
    from importlib.metadata import version

    parser = argparse.ArgumentParser(description="Benchmark mainspring against a floor.")
    parser.add_argument("--quick", action="store_true", help="fewer iterations (a smoke run)")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="instead of timing, show where the engine spends time beyond the floor (S1, S2)",
    )
    parser.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="wall: time.perf_counter_ns (default); cpu: this process's CPU time, "
        "for a machine busy with other work",
    )
    parser.add_argument("--probe-rss", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe_rss:
        probe_rss()
        return
    if args.profile:
        asyncio.run(run_profiles(args.quick))
        return
    plans = QUICK if args.quick else FULL
    started = time.perf_counter()
    print(
        f"mainspring bench ({'quick' if args.quick else 'full'}): "
        f"Python {platform.python_version()} on {platform.machine()} {platform.system()}, "
        f"{os.cpu_count()} CPUs, load {_load()}, anyio {version('anyio')}, "
        f"pydantic {version('pydantic')}"
    )
    print(
        f"runs (warm-up + batches x runs): S1 {plans.s1.warmup} + {plans.s1.batches}x"
        f"{plans.s1.batch}, S2 {plans.s2.warmup} + {plans.s2.batches}x{plans.s2.batch}, "
        f"S3 {plans.s3.warmup} + {plans.s3.batches}x{plans.s3.batch} per size; "
        f"figures are medians of batch means; clock: {CLOCK_NAMES[args.clock]}"
    )
    cpus = os.cpu_count() or 1
    if args.clock == "wall" and _busy() > cpus / 2:
        print(
            f"warning: load average {_busy():.2f} on {cpus} CPUs; other processes will skew "
            "wall-clock figures (try --clock cpu)"
        )
    print()
    rows, s3 = asyncio.run(run_timings(plans, CLOCKS[args.clock]))
    import_ms, program_ms, full_ms, bare_ms = import_figures(plans.imports, cpu=args.clock == "cpu")
    memory = memory_figures()
    print_timing(rows)
    print()
    print_scaling(s3)
    print()
    print_process(import_ms, program_ms, full_ms, bare_ms, memory)
    print(
        "\npublic API import time by package (self time, -X importtime, one run): "
        + ", ".join(f"{name} {ms:.0f} ms" for name, ms in import_breakdown(8))
    )
    print(f"\ntotal bench time {time.perf_counter() - started:.1f} s, load {_load()}")


def _load() -> str:
    try:
        return "/".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def _busy() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return 0.0


if __name__ == "__main__":
    main()
