"""Benchmark the checkpoint stores, and what one adds to an engine turn.

Run by hand from the repository root (it is not a pytest test)::

    python bench/stores.py            # full run, under a minute
    python bench/stores.py --quick    # a few seconds, noisier

Two tables:

- **checkpoint stores**: appends per second (one awaited ``append`` after
  another, as a session makes them) and replayed events per second (``load``
  of whole streams), for each backend in :data:`BACKENDS`. The events are the
  ones a real S1 turn yields (see ``bench.py``), so payload sizes are real.
  Redis is added when ``redis-server`` is on ``PATH`` (started on a free
  loopback port, no persistence) and ``mainspring.stores.redis`` imports.
- **S1 with a checkpoint store**: the S1 turn of ``bench.py`` through
  ``Session(agent, checkpoint_store=store)`` against the same turn without a
  store, batches interleaved, medians of batch means; the ratio is what
  checkpointing every event costs. Target: SQLite under 1.25x.

Every backend is verified first: the events loaded back must equal the events
appended.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import anyio.to_thread

import bench
from mainspring import Event, ScriptedModel, Session
from mainspring.stores import CheckpointStore, InMemoryCheckpointStore, SQLiteCheckpointStore

Factory = Callable[[], Awaitable[CheckpointStore]]
"""Opens a fresh store (a new file, a new key prefix...)."""
Backend = tuple[str, Factory]

S1_TARGET = 1.25
"""Largest acceptable S1 ratio (with a SQLite checkpoint store / without)."""


# ---------------------------------------------------------------- backends


async def _memory() -> CheckpointStore:
    return InMemoryCheckpointStore()


def sqlite_backend(workdir: Path) -> Backend:
    counter = iter(range(1_000_000))

    async def factory() -> CheckpointStore:
        return await SQLiteCheckpointStore.open(workdir / f"checkpoints-{next(counter)}.db")

    return "sqlite", factory


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _redis_answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


@contextlib.contextmanager
def redis_backend(workdir: Path) -> Iterator[Backend | None]:
    """A redis-server on a free port and a factory on it, or ``None`` where unavailable."""
    binary = shutil.which("redis-server")
    try:
        from mainspring.stores.redis import RedisCheckpointStore
    except ImportError:
        binary = None
    if binary is None:
        yield None
        return
    port = _free_port()
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(workdir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while not _redis_answers(port):
            if process.poll() is not None or time.monotonic() > deadline:
                print("note: redis-server did not start; skipping redis", file=sys.stderr)
                yield None
                return
            time.sleep(0.01)
        counter = iter(range(1_000_000))

        async def factory() -> CheckpointStore:
            url = f"redis://127.0.0.1:{port}/0"
            return await RedisCheckpointStore.open(url, prefix=f"bench-{next(counter)}:")

        yield "redis", factory
    finally:
        process.terminate()
        process.wait(timeout=10)


# ----------------------------------------------------------------- figures


@dataclass(frozen=True, slots=True)
class Plan:
    streams: int
    """Streams per round, each holding one S1 turn's events."""
    rounds: int
    s1: bench.Plan


FULL = Plan(streams=40, rounds=7, s1=bench.Plan(warmup=50, batch=100, batches=8))
QUICK = Plan(streams=10, rounds=3, s1=bench.Plan(warmup=10, batch=30, batches=4))


async def s1_events() -> list[Event]:
    """The events one S1 turn yields: the checkpoint workload."""
    session = Session(bench.make_agent(ScriptedModel(bench.S1_SCRIPT)))
    return [event async for event in session.send(bench.USER_TEXT)]


@dataclass(frozen=True, slots=True)
class Throughput:
    name: str
    appends_per_s: float
    replayed_per_s: float


async def throughput(name: str, factory: Factory, events: list[Event], plan: Plan) -> Throughput:
    """Median rates over rounds, each on a fresh store."""
    appends: list[float] = []
    replays: list[float] = []
    for round_ in range(plan.rounds):
        store = await factory()
        try:
            ids = [f"r{round_}-s{n}" for n in range(plan.streams)]
            start = time.perf_counter()
            for stream_id in ids:
                for event in events:
                    await store.append(stream_id, event)
            appended = time.perf_counter() - start
            start = time.perf_counter()
            loaded = [await store.load(stream_id) for stream_id in ids]
            replayed = time.perf_counter() - start
            if any(log != events for log in loaded):
                raise SystemExit(f"{name}: loaded events differ from the appended ones")
        finally:
            await store.aclose()
        total = len(ids) * len(events)
        appends.append(total / appended)
        replays.append(total / replayed)
    return Throughput(name, statistics.median(appends), statistics.median(replays))


def s1_prepare(store: CheckpointStore | None) -> bench.Prepare:
    def prepare(n: int) -> list[bench.Run]:
        return [
            partial(
                bench.engine_turn,
                Session(bench.make_agent(ScriptedModel(bench.S1_SCRIPT)), checkpoint_store=store),
            )
            for _ in range(n)
        ]

    return prepare


@dataclass(frozen=True, slots=True)
class Overhead:
    name: str
    with_us: float
    without_us: float
    target: float | None

    @property
    def ratio(self) -> float:
        return self.with_us / self.without_us


async def s1_overhead(name: str, factory: Factory, plan: Plan, target: float | None) -> Overhead:
    store = await factory()
    try:
        with_us, without_us = await bench.compare(
            s1_prepare(store), s1_prepare(None), plan.s1, time.perf_counter_ns
        )
    finally:
        await store.aclose()
    return Overhead(name, with_us, without_us, target)


async def thread_hop_us(n: int = 2_000) -> float:
    """Mean µs of ``anyio.to_thread.run_sync`` on a no-op: the floor of every SQLite call."""
    start = time.perf_counter()
    for _ in range(n):
        await anyio.to_thread.run_sync(int)
    return (time.perf_counter() - start) / n * 1e6


# ------------------------------------------------------------------ report


def print_throughput(rows: list[Throughput]) -> None:
    head = f"{'checkpoint store':<18} {'appends/s':>11} {'µs/append':>10} {'replayed events/s':>18}"
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r.name:<18} {r.appends_per_s:>11,.0f} {1e6 / r.appends_per_s:>10.1f} "
            f"{r.replayed_per_s:>18,.0f}"
        )


def print_overhead(rows: list[Overhead], events: int) -> None:
    head = (
        f"{'S1 with a checkpoint store':<28} {'with µs':>10} {'without µs':>11} "
        f"{'added µs':>9} {'µs/event':>9} {'ratio':>7} {'target':>8}  result"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        added = r.with_us - r.without_us
        target = "-" if r.target is None else f"<= {r.target:.2f}x"
        verdict = "info" if r.target is None else ("PASS" if r.ratio <= r.target else "MISS")
        print(
            f"{r.name:<28} {r.with_us:>10,.1f} {r.without_us:>11,.1f} {added:>9,.1f} "
            f"{added / events:>9.1f} {r.ratio:>6.2f}x {target:>8}  {verdict}"
        )


# -------------------------------------------------------------------- main


async def run(plan: Plan, backends: list[Backend]) -> None:
    events = await s1_events()
    print(f"workload: the {len(events)} events of one S1 turn per stream\n")
    rows = [await throughput(name, factory, events, plan) for name, factory in backends]
    print_throughput(rows)
    print(f"\nthread round trip (anyio.to_thread.run_sync, no-op): {await thread_hop_us():.1f} µs")
    print()
    overheads = [
        await s1_overhead(name, factory, plan, S1_TARGET if name == "sqlite" else None)
        for name, factory in backends
    ]
    print_overhead(overheads, len(events))


def main() -> None:
    parser = argparse.ArgumentParser(description="Benchmark mainspring's checkpoint stores.")
    parser.add_argument("--quick", action="store_true", help="fewer iterations (a smoke run)")
    parser.add_argument("--no-redis", action="store_true", help="skip Redis even if available")
    args = parser.parse_args()
    plan = QUICK if args.quick else FULL
    started = time.perf_counter()
    print(
        f"mainspring store bench ({'quick' if args.quick else 'full'}): "
        f"{os.cpu_count()} CPUs, load {'/'.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    with tempfile.TemporaryDirectory(prefix="mainspring-bench-") as tmp:
        workdir = Path(tmp)
        backends: list[Backend] = [("memory", _memory), sqlite_backend(workdir)]
        with contextlib.ExitStack() as stack:
            if not args.no_redis:
                redis = stack.enter_context(redis_backend(workdir))
                if redis is not None:
                    backends.append(redis)
            asyncio.run(run(plan, backends))
    print(f"\ntotal bench time {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
