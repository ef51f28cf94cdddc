"""Benchmark the audit log: what one entry costs, and what it adds to an S1 turn.

Run by hand from the repository root (it is not a pytest test)::

    python bench/audit.py             # full run, a few minutes (valgrind counts)
    python bench/audit.py --quick     # seconds, noisier, no instruction counts

Three tables, each measured in this run:

- **per entry**: ``AuditLog.append`` awaited one after another, on the in-memory
  store and on SQLite (a fresh file), in microseconds per entry (median of
  batch means) and machine instructions per entry (valgrind's callgrind, as
  ``bench/peers/instructions.py`` counts them: a marker call before and after
  the measured part). The parts of an entry beside it: the seal alone (canonical
  JSON, SHA-256, the Ed25519 signature of the head) and the signature alone.
- **S1, audit on vs off**: the one-tool shape of ``bench/peers/bench_mainspring.py``
  (a minimal Model-protocol fake, one tool call then the answer), with the tool
  a write the tier runs without asking (``permission="auto"``), so each turn
  appends one ``auto_executed`` entry; batches interleaved with the same turn
  without an audit log (the baseline), ratio of medians; instructions per turn
  for both.

Goal: at most 30 us per entry.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from mainspring import Agent, Session, TextDelta, TurnComplete, Usage, tool
from mainspring.audit import AuditLog, InMemoryAuditStore
from mainspring.audit.store import AuditStore
from mainspring.engine.signing import SigningKey
from mainspring.messages import ToolResultPart
from mainspring.models import ModelRequest, ModelStop, ModelUsage, ToolCallEnd
from mainspring.models.base import ModelEvent
from mainspring.stores.sqlite_audit import SQLiteAuditStore

KEY = SigningKey.generate("bench")
_USAGE = Usage(input_tokens=10, output_tokens=5, requests=1)
FINAL = "The balance is 1234.56 USD."


class FakeModel:
    """One tool call, then the answer (as bench/peers' fake: whole answers, no deltas)."""

    name = "fake-s1"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        last = request.messages[-1]
        if last.role == "tool" and any(isinstance(p, ToolResultPart) for p in last.parts):
            yield TextDelta(text=FINAL)
            yield ModelUsage(usage=_USAGE)
            yield ModelStop(stop_reason="end_turn", model=self.name)
            return
        yield ToolCallEnd(tool_use_id="c1", name="get_balance", index=0, arguments="{}")
        yield ModelUsage(usage=_USAGE)
        yield ModelStop(stop_reason="tool_use", model=self.name)


@tool(permission="auto")
async def get_balance() -> str:
    """Return the account balance (declared a write, so its run is on record)."""
    return '{"balance": 1234.56, "currency": "USD"}'


def agents() -> tuple[Agent, Agent, InMemoryAuditStore]:
    store = InMemoryAuditStore()
    plain = Agent(model=FakeModel(), name="s1", tools=[get_balance])
    audited = Agent(model=FakeModel(), name="s1", tools=[get_balance], audit=AuditLog(store, KEY))
    return plain, audited, store


async def turn(agent: Agent) -> None:
    async for event in Session(agent).send("What is my balance?"):
        if isinstance(event, TurnComplete) and event.stop_reason != "end_turn":
            raise AssertionError(event)


def append_one(log: AuditLog) -> Callable[[], Awaitable[object]]:
    def one() -> Awaitable[object]:
        return log.append(
            "auto_executed",
            outcome="ok",
            session_id="6f1c0e7e-2b1a-4a57-9a83-3f0b8c1b2d4e",
            principal="user:ann",
            tool="pay",
            args_hash="ab" * 32,
            amount_usd=12.5,
        )

    return one


async def per_call(fn: Callable[[], Awaitable[object]], runs: int, batches: int) -> float:
    """Median over batches of the mean seconds of one awaited call."""
    for _ in range(max(runs // 10, 10)):
        await fn()
    means = []
    for _ in range(batches):
        started = time.perf_counter()
        for _ in range(runs):
            await fn()
        means.append((time.perf_counter() - started) / runs)
    return statistics.median(means)


async def interleaved(
    a: Callable[[], Awaitable[object]], b: Callable[[], Awaitable[object]], runs: int, batches: int
) -> tuple[float, float]:
    """Medians of batch means of ``a`` and ``b``, their batches interleaved."""
    for _ in range(max(runs // 5, 10)):
        await a()
        await b()
    got: tuple[list[float], list[float]] = ([], [])
    for _ in range(batches):
        for fn, out in ((a, got[0]), (b, got[1])):
            started = time.perf_counter()
            for _ in range(runs):
                await fn()
            out.append((time.perf_counter() - started) / runs)
    return statistics.median(got[0]), statistics.median(got[1])


def seal_cost(runs: int) -> tuple[float, float]:
    """Seconds of one seal (JSON, SHA-256, signature) and of the signature alone."""
    log = AuditLog(InMemoryAuditStore(), KEY)
    body: dict[str, object] = {"kind": "auto_executed", "outcome": "ok", "tool": "pay"}
    started = time.perf_counter()
    for _ in range(runs):
        log._seal(dict(body), None)
    seal = (time.perf_counter() - started) / runs
    started = time.perf_counter()
    for _ in range(runs):
        KEY.private_key.sign(b"mainspring-audit-v1\naudit\n1\n" + b"0" * 64)
    return seal, (time.perf_counter() - started) / runs


# ------------------------------------------------------------ instructions

RUNNER = """
import asyncio, os, sys, tempfile
sys.path.insert(0, {here!r})
import audit as b
what, runs = sys.argv[1], int(sys.argv[2])
async def main():
    if what in ("memory", "sqlite"):
        if what == "memory":
            store = b.InMemoryAuditStore()
        else:
            store = await b.SQLiteAuditStore.open(tempfile.mkdtemp() + "/a.db")
        fn = b.append_one(b.AuditLog(store, b.KEY))
    else:
        plain, audited, _ = b.agents()
        agent = audited if what == "s1_audit" else plain
        fn = lambda: b.turn(agent)
    for _ in range(20):
        await fn()
    os.getppid()
    for _ in range({few}):
        await fn()
    os.getppid()
    for _ in range(runs):
        await fn()
    os.getppid()
asyncio.run(main())
"""
FEW, MANY = 10, 110


def instructions(what: str) -> float | None:
    """Instructions of one call of ``what`` (callgrind), or ``None`` without valgrind."""
    if shutil.which("valgrind") is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "runner.py"
        script.write_text(RUNNER.format(here=str(Path(__file__).parent), few=FEW))
        out = Path(tmp) / "cg.out"
        subprocess.run(
            ["valgrind", "--tool=callgrind", "--dump-before=os_getppid",
             f"--callgrind-out-file={out}", sys.executable, str(script), what, str(MANY)],
            capture_output=True, text=True, timeout=1800, check=False,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )  # fmt: skip
        parts = []
        for dump in (f"{out}.2", f"{out}.3"):
            text = Path(dump).read_text() if Path(dump).exists() else ""
            found = re.search(r"^summary: (\d+)", text, re.M)
            if found is None:
                return None
            parts.append(int(found.group(1)))
    return (parts[1] - parts[0]) / (MANY - FEW)


# ------------------------------------------------------------------- main


async def run(quick: bool) -> None:
    runs, batches = (200, 5) if quick else (2_000, 9)
    seal, sign = seal_cost(runs)
    memory = await per_call(append_one(AuditLog(InMemoryAuditStore(), KEY)), runs, batches)
    with tempfile.TemporaryDirectory() as tmp:
        sqlite: AuditStore = await SQLiteAuditStore.open(Path(tmp) / "audit.db")
        try:
            on_sqlite = await per_call(append_one(AuditLog(sqlite, KEY)), runs, batches)
        finally:
            await sqlite.aclose()
    plain, audited, store = agents()
    s1_runs, s1_batches = (100, 5) if quick else (1_000, 9)
    off, on = await interleaved(lambda: turn(plain), lambda: turn(audited), s1_runs, s1_batches)
    assert store.entries["audit"], "the audited S1 appended nothing"

    counts = {w: None if quick else instructions(w) for w in ("memory", "sqlite", "s1", "s1_audit")}

    def ins(what: str) -> str:
        value = counts[what]
        return "-" if value is None else f"{value:,.0f}"

    print(f"python {sys.version.split()[0]}, {'quick' if quick else 'full'} run")
    print("\nper entry                          us/entry   instructions")
    print(f"  seal (JSON + SHA-256 + Ed25519)  {seal * 1e6:8.1f}")
    print(f"  of which Ed25519 sign            {sign * 1e6:8.1f}")
    print(f"  append, in memory                {memory * 1e6:8.1f}   {ins('memory')}")
    print(f"  append, SQLite (WAL, NORMAL)     {on_sqlite * 1e6:8.1f}   {ins('sqlite')}")
    print("\nS1 (one auto-approved write)       us/turn    instructions   ratio")
    print(f"  audit off (baseline)             {off * 1e6:8.1f}   {ins('s1'):>12}   1.00x")
    ratio = on / off
    s1_ins = counts["s1"]
    s1_audit_ins = counts["s1_audit"]
    ins_ratio = (
        "" if s1_ins is None or s1_audit_ins is None else f" ({s1_audit_ins / s1_ins:.2f}x instr.)"
    )
    print(
        f"  audit on, in memory              {on * 1e6:8.1f}   {ins('s1_audit'):>12}   "
        f"{ratio:.2f}x{ins_ratio}"
    )
    print(f"  added per turn                   {(on - off) * 1e6:8.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="seconds, no instruction counts")
    asyncio.run(run(parser.parse_args().quick))


if __name__ == "__main__":
    main()
