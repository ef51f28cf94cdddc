"""Benchmark the model adapters against parsing the same SSE bytes alone.

Run by hand from the repository root (it is not a pytest test)::

    python bench/adapters.py            # full run, about half a minute
    python bench/adapters.py --quick    # fewer iterations, a few seconds

For each provider the longest recorded SSE stream in ``shared/fixtures/wire``
(most ``data:`` frames) is served through an ``httpx2.MockTransport`` into the
real SDK, and three things are timed per streamed frame:

- **adapter**: ``model.stream(request)`` fully consumed (request building, SDK,
  our translation to neutral events; no network);
- **sdk**: the SDK's own stream of raw events, iterated without our adapter;
- **baseline**: the same SSE bytes through mainspring's ``SSEDecoder`` plus a
  ``json.loads`` of every data frame: the work any client has to do.

The ratios are adapter / baseline and sdk / baseline; adapter - sdk is what our
adapter adds on top of the SDK. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
from google import genai

from mainspring.errors import ModelError
from mainspring.messages import Message
from mainspring.models.anthropic import AnthropicModel
from mainspring.models.base import Model, ModelEvent, ModelRequest, ModelStop
from mainspring.models.gemini import GeminiModel
from mainspring.models.openai import OpenAIChatModel
from mainspring.models.openai_responses import OpenAIResponsesModel
from mainspring.models.retry import RetryPolicy
from mainspring.sse import SSEDecoder

ROOT = Path(__file__).resolve().parents[1]
WIRE = Path(
    os.environ.get("MAINSPRING_WIRE_FIXTURES", ROOT.parent / "shared" / "fixtures" / "wire")
)

Clock = Callable[[], int]
CLOCKS: dict[str, Clock] = {"wall": time.perf_counter_ns, "cpu": time.process_time_ns}
Run = Callable[[], Awaitable[int]]
"""One timed unit: consume one whole stream, return how many items it yielded."""

ONCE = RetryPolicy(max_attempts=1)
REQUEST = ModelRequest(system=(), messages=[Message.user("hi")])

# Base URLs per recorded host, so the SDK builds the same kind of URL it would live.
HOSTS = {
    "api.anthropic.com": "https://api.anthropic.com",
    "api.openai.com": "https://api.openai.com/v1",
    "openrouter.ai": "https://openrouter.ai/api/v1",
    "api.deepseek.com": "https://api.deepseek.com",
    "api.groq.com": "https://api.groq.com/openai/v1",
    "localhost:11434": "http://localhost:11434/v1",
}


# ----------------------------------------------------------------- fixtures


@dataclass(frozen=True)
class Stream:
    """One recorded SSE response: its file, raw bytes and headers."""

    path: Path
    host: str
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def frames(self) -> int:
        return sum(1 for line in self.body.splitlines() if line.startswith(b"data:"))


def load_stream(path: Path) -> Stream | None:
    data: dict[str, Any] = json.loads(path.read_text())
    response = data["response"]
    if "sse" not in response:
        return None
    headers = dict(response.get("headers_subset", {}))
    headers["content-type"] = "text/event-stream"
    return Stream(
        path=path,
        host=data["request"]["host"],
        status=response["status"],
        headers=headers,
        body=response["sse"].encode(),
    )


def longest(provider: str, prefix: str = "") -> Stream:
    """The recorded stream with the most data frames (ties: the most bytes)."""
    streams = [
        s
        for path in sorted((WIRE / provider).glob(f"{prefix}*.json"))
        if (s := load_stream(path)) is not None
    ]
    if not streams:
        sys.exit(f"no recorded SSE stream in {WIRE / provider} (prefix {prefix!r})")
    return max(streams, key=lambda s: (s.frames, len(s.body)))


def client_for(stream: Stream) -> httpx2.AsyncClient:
    """An HTTP client whose every request is answered by the recorded stream."""

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(stream.status, headers=stream.headers, content=stream.body)

    return httpx2.AsyncClient(transport=httpx2.MockTransport(handler))


# ----------------------------------------------------------------- the three sides


async def consume_adapter(model: Model) -> int:
    n = 0
    async for _ in model.stream(REQUEST):
        n += 1
    return n


def baseline(body: bytes) -> int:
    """SSE decoding plus one ``json.loads`` per data frame: the floor."""
    decoder = SSEDecoder()
    frames = decoder.feed(body)
    decoder.close()
    n = 0
    for frame in frames:
        if frame.data and frame.data != "[DONE]":
            json.loads(frame.data)
            n += 1
    return n


async def consume_baseline(body: bytes) -> int:
    return baseline(body)


@dataclass
class Case:
    """One row: a recorded stream, the adapter reading it, the SDK reading it raw."""

    label: str
    stream: Stream
    model: Model
    sdk: Callable[[], AsyncIterator[object]]


def _openai_client(http: httpx2.AsyncClient, base_url: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(api_key="k", base_url=base_url, http_client=http, max_retries=0)


def build_cases() -> list[Case]:
    cases: list[Case] = []

    s = longest("anthropic")
    http = client_for(s)
    a_client = anthropic.AsyncAnthropic(
        api_key="k", base_url=HOSTS[s.host], http_client=http, max_retries=0
    )

    async def anthropic_raw() -> AsyncIterator[object]:
        stream = await a_client.messages.create(
            model="m", max_tokens=1024, messages=[{"role": "user", "content": "hi"}], stream=True
        )
        async with stream:
            async for event in stream:
                yield event

    cases.append(
        Case(
            "anthropic",
            s,
            AnthropicModel("claude-sonnet-4-5", client=a_client, retry=ONCE),
            anthropic_raw,
        )
    )

    for label, provider, prefix, name in (
        ("openai chat", "openai", "chat_", "openai"),
        ("openai-compatible chat", "openai_compatible", "", ""),
    ):
        s = longest(provider, prefix)
        o_client = _openai_client(client_for(s), HOSTS[s.host])
        served_by = name or s.path.stem.split("_", 1)[0]

        async def chat_raw(c: openai.AsyncOpenAI = o_client) -> AsyncIterator[object]:
            stream = await c.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], stream=True
            )
            async with stream:
                async for chunk in stream:
                    yield chunk

        model = OpenAIChatModel("m", client=o_client, retry=ONCE, provider=served_by)
        cases.append(Case(label, s, model, chat_raw))

    s = longest("openai", "responses_")
    r_client = _openai_client(client_for(s), HOSTS[s.host])

    async def responses_raw() -> AsyncIterator[object]:
        stream = await r_client.responses.create(model="m", input="hi", stream=True)
        async with stream:
            async for event in stream:
                yield event

    cases.append(
        Case(
            "openai responses",
            s,
            OpenAIResponsesModel("m", client=r_client, retry=ONCE),
            responses_raw,
        )
    )

    s = longest("gemini")
    g_client = genai.Client(
        api_key="k",
        http_options=genai.types.HttpOptions(
            api_version="v1beta", httpx_async_client=client_for(s)
        ),
    )

    async def gemini_raw() -> AsyncIterator[object]:
        chunks = await g_client.aio.models.generate_content_stream(
            model="gemini-2.5-flash", contents="hi"
        )
        async for chunk in chunks:
            yield chunk

    cases.append(
        Case(
            "gemini",
            s,
            GeminiModel("gemini-2.5-flash", client=g_client, retry=ONCE),
            gemini_raw,
        )
    )
    return cases


async def consume_sdk(sdk: Callable[[], AsyncIterator[object]]) -> int:
    n = 0
    async for _ in sdk():
        n += 1
    return n


# ----------------------------------------------------------------- verification


@dataclass(frozen=True)
class Counts:
    frames: int
    parsed: int
    sdk_events: int
    events: int
    stop: str


async def verify(case: Case) -> Counts:
    """Run each side once; stop the bench unless the adapter ends with a clean stop."""
    try:
        events: list[ModelEvent] = [e async for e in case.model.stream(REQUEST)]
    except ModelError as exc:
        sys.exit(f"{case.label}: the adapter failed on {case.stream.path.name}: {exc!r}")
    stop = events[-1] if events else None
    if not isinstance(stop, ModelStop):
        sys.exit(f"{case.label}: the adapter did not end with ModelStop ({stop!r})")
    parsed = baseline(case.stream.body)
    if parsed == 0:
        sys.exit(f"{case.label}: the baseline parsed no frame")
    return Counts(
        frames=case.stream.frames,
        parsed=parsed,
        sdk_events=await consume_sdk(case.sdk),
        events=len(events),
        stop=stop.stop_reason,
    )


# ----------------------------------------------------------------- timing


@dataclass(frozen=True)
class Plan:
    warmup: int
    batches: int
    batch: int


FULL = Plan(warmup=30, batches=10, batch=40)
QUICK = Plan(warmup=10, batches=4, batch=20)


async def _timed_batch(run: Run, size: int, clock: Clock) -> float:
    """Mean ns of one run over a batch of ``size`` runs."""
    gc.collect()
    gc.freeze()
    try:
        start = clock()
        for _ in range(size):
            await run()
        elapsed = clock() - start
    finally:
        gc.unfreeze()
    return elapsed / size


async def compare(runs: dict[str, Run], plan: Plan, clock: Clock) -> dict[str, float]:
    """Median of batch means per side; sides rotate their order from batch to batch."""
    names = list(runs)
    for name in names:
        for _ in range(plan.warmup):
            await runs[name]()
    samples: dict[str, list[float]] = {name: [] for name in names}
    for i in range(plan.batches):
        k = i % len(names)
        for name in names[k:] + names[:k]:
            samples[name].append(await _timed_batch(runs[name], plan.batch, clock))
    return {name: statistics.median(values) for name, values in samples.items()}


@dataclass(frozen=True)
class Row:
    case: Case
    counts: Counts
    ns: dict[str, float]

    def per_frame_us(self, side: str) -> float:
        return self.ns[side] / self.counts.frames / 1000


async def run_all(plan: Plan, clock: Clock) -> list[Row]:
    rows: list[Row] = []
    for case in build_cases():
        counts = await verify(case)
        body = case.stream.body
        runs: dict[str, Run] = {
            "adapter": partial(consume_adapter, case.model),
            "sdk": partial(consume_sdk, case.sdk),
            "baseline": partial(consume_baseline, body),
        }
        rows.append(Row(case, counts, await compare(runs, plan, clock)))
    return rows


# ----------------------------------------------------------------- output


def print_fixtures(rows: list[Row]) -> None:
    print(f"\nlongest recorded streams ({WIRE}):")
    print(
        f"  {'adapter':<24}{'fixture':<52}{'bytes':>7}{'frames':>8}"
        f"{'sdk events':>12}{'our events':>12}  stop"
    )
    for row in rows:
        c = row.counts
        fixture = f"{row.case.stream.path.parent.name}/{row.case.stream.path.name}"
        print(
            f"  {row.case.label:<24}{fixture:<52}{len(row.case.stream.body):>7,}{c.frames:>8}"
            f"{c.sdk_events:>12}{c.events:>12}  {c.stop}"
        )


def print_timing(rows: list[Row]) -> None:
    print("\nper streamed frame (µs; the figure for a whole stream / its data frames):")
    print(
        f"  {'adapter':<24}{'adapter':>9}{'sdk':>9}{'baseline':>10}"
        f"{'adapter/base':>14}{'sdk/base':>10}{'ours':>8}{'ours %':>8}{'stream ms':>11}"
    )
    for row in rows:
        a, s, b = (row.per_frame_us(side) for side in ("adapter", "sdk", "baseline"))
        ours = a - s
        print(
            f"  {row.case.label:<24}{a:>9.1f}{s:>9.1f}{b:>10.2f}"
            f"{a / b:>13.1f}x{s / b:>9.1f}x{ours:>8.1f}{100 * ours / a:>7.0f}%"
            f"{row.ns['adapter'] / 1e6:>11.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer iterations (a smoke run)")
    parser.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="wall: time.perf_counter_ns (default); cpu: this process's CPU time",
    )
    args = parser.parse_args()
    plan = QUICK if args.quick else FULL
    started = time.perf_counter()
    print(
        f"mainspring adapter bench ({'quick' if args.quick else 'full'}): "
        f"Python {sys.version.split()[0]}, httpx2 {httpx2.__version__}, "
        f"anthropic {anthropic.__version__}, openai {openai.__version__}, "
        f"google-genai {genai.__version__}"
    )
    print(
        f"warm-up {plan.warmup} runs per side, then {plan.batches} batches x {plan.batch} "
        f"runs; figures are medians of batch means; clock: {args.clock}; "
        f"load {_load()}"
    )
    rows = asyncio.run(run_all(plan, CLOCKS[args.clock]))
    print_fixtures(rows)
    print_timing(rows)
    print(f"\ntotal bench time {time.perf_counter() - started:.1f} s, load {_load()}")


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:  # pragma: no cover - no load average on this platform
        return "n/a"


if __name__ == "__main__":
    main()
