"""The agent both the crashing child and the recovering parent run.

Turn 1 ("go"): two parallel reads, an auto-tier write (``transfer``), then a
confirm-tier write (``pay``) that pauses; after approval a final answer.
Turn 2 (anything else): a plain answer. Every tool appends its effect to a
file (flushed and fsynced) so the parent can count what really ran.

``CRASH_AT`` (environment) names the point where the process SIGKILLs itself.
"""

from __future__ import annotations

import os
import signal
import sqlite3
from collections.abc import AsyncIterator, Collection, Sequence
from pathlib import Path

from mainspring import (
    Agent,
    Event,
    Hooks,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    tool,
)
from mainspring.messages import Message
from mainspring.models.base import ModelEvent, ModelRequest, ToolSpec
from mainspring.state import SessionState, SpendKind, WriteRecord
from mainspring.stores import (
    CheckpointStore,
    ClaimRelease,
    Commit,
    JointCommit,
    SessionStore,
    SpendHolds,
)
from mainspring.tools import Tool, ToolInput, ToolOutput

PHASE = os.environ.get("CRASH_PHASE", "")

CHILD_LEASE = 3600.0
"""The child's ``lock_ttl``: it never runs out during a test, however slow the
machine, so a stalled child never loses its lease; the parent takes the session
over only once it has seen the child die (``test_crash.release_dead_worker``)."""


def maybe_crash(point: str) -> None:
    """SIGKILL this process if ``point`` (prefixed with the phase) is the crash point."""
    if os.environ.get("CRASH_AT") == f"{PHASE}:{point}":
        os.kill(os.getpid(), signal.SIGKILL)


def record_effect(path: Path, effect: str) -> None:
    with path.open("a") as handle:
        handle.write(effect + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
    last = messages[-1]
    if last.role == "user":
        if last.text != "go":
            return ScriptedResponse(text="Nothing else to do today.")
        return ScriptedResponse(
            text="Let me look at both accounts first.",
            tool_calls=[
                ScriptedCall("lookup", {"account": "a"}),
                ScriptedCall("lookup", {"account": "b"}),
            ],
        )
    done = {p.name for m in messages for p in m.tool_results_parts}
    if "transfer" not in done:
        return ScriptedResponse(
            text="Moving a little money.",
            tool_calls=[ScriptedCall("transfer", {"amount": 5})],
        )
    if "pay" not in done:
        return ScriptedResponse(
            text="Now the payment.", tool_calls=[ScriptedCall("pay", {"amount": 50})]
        )
    return ScriptedResponse(text="All done: the accounts are settled.")


class CrashingModel:
    """A ScriptedModel that can die mid-stream."""

    def __init__(self) -> None:
        self._inner = ScriptedModel(script, name="crash-model", chunk_size=6)
        self._requests = 0

    @property
    def name(self) -> str:
        return self._inner.name

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self._requests += 1
        n = self._requests
        k = 0
        async for event in self._inner.stream(request):
            yield event
            k += 1
            maybe_crash(f"model{n}-delta{k}")
            if event.type == "tool_call_end":
                maybe_crash(f"model{n}-callend")


def make_agent(effects: Path) -> Agent:
    @tool(read_only=True)
    async def lookup(account: str) -> str:
        """Read an account."""
        maybe_crash(f"read-{account}-start")
        record_effect(effects, f"read:{account}")
        maybe_crash(f"read-{account}-after-effect")
        return f"account {account}: $100"

    @tool
    async def transfer(amount: float) -> str:
        """Move money between the user's own accounts (auto-approved)."""
        maybe_crash("transfer-before-effect")
        record_effect(effects, "write:transfer")
        maybe_crash("transfer-after-effect")
        return f"moved ${amount:g}"

    @tool(permission="confirm")
    async def pay(amount: float) -> str:
        """Pay a third party (asks first)."""
        maybe_crash("pay-before-effect")
        record_effect(effects, "write:pay")
        maybe_crash("pay-after-effect")
        return f"paid ${amount:g}"

    def before(t: Tool, args: ToolInput) -> None:
        maybe_crash(f"before-{t.name}")

    def after(t: Tool, args: ToolInput, out: ToolOutput) -> None:
        maybe_crash(f"after-{t.name}")

    def audited(t: Tool, args: ToolInput, out: ToolOutput) -> None:
        maybe_crash(f"audit-{t.name}")

    return Agent(
        name="crash",
        model=CrashingModel(),
        tools=[lookup, transfer, pay],
        hooks=Hooks(before_tool_call=before, after_tool_call=after),
        on_auto_executed=audited,
    )


class CrashingCheckpoints:
    """Wraps a checkpoint store; can die right after an append, before the yield."""

    def __init__(self, inner: CheckpointStore) -> None:
        self._inner = inner
        self._appends = 0
        self._batches = 0

    async def append(self, stream_id: str, event: Event) -> None:
        await self.append_many(stream_id, (event,))

    async def append_many(self, stream_id: str, events: Sequence[Event]) -> None:
        # Called only where a step's commit is not one transaction: its state and
        # ledger entries are on record, its events are not yet.
        self._batches += 1
        maybe_crash(f"commit{self._batches}-inside")
        await self._inner.append_many(stream_id, events)
        self.appended(len(events))

    def appended(self, n: int) -> None:
        """``n`` events went on record (here or in a joint commit), none delivered yet."""
        for _ in range(n):
            self._appends += 1
            maybe_crash(f"append{self._appends}")

    async def load(self, stream_id: str) -> list[Event]:
        return await self._inner.load(stream_id)

    async def clear(self, stream_id: str) -> None:
        await self._inner.clear(stream_id)

    async def aclose(self) -> None:
        await self._inner.aclose()


class CrashingSessions:
    """Wraps a session store; can die right after a decision is claimed, right
    after the save that consumes it (the two halves of deciding), or inside a
    run's step commit.

    When the inner store commits a step in one transaction with the checkpoint
    store (SQLite), so does this wrapper: the crash points then hit the real
    single commit. ``commitN-inside`` dies inside the N-th commit that logs
    events: for SQLite mid-transaction (a statement trace kills the process at
    the commit's first checkpoint row, before ``COMMIT``); for the Redis +
    PostgreSQL pair, which commit store by store, after the state's save and
    before the events' append (see :class:`CrashingCheckpoints`).
    """

    def __init__(self, inner: SessionStore, connection: sqlite3.Connection | None = None) -> None:
        self._inner = inner
        self._claimed = False
        self._commits = 0
        self._inside = False
        if connection is not None:
            connection.set_trace_callback(self._trace)

    def _trace(self, statement: str) -> None:
        if self._inside and statement.startswith("INSERT INTO mainspring_checkpoints"):
            maybe_crash(f"commit{self._commits}-inside")

    async def save(self, state: SessionState) -> None:
        await self._inner.save(state)
        self._consumed(state)

    def _consumed(self, state: SessionState) -> None:
        if self._claimed and state.turn is not None and state.turn.status == "executing":
            self._claimed = False
            maybe_crash("after-consume")

    def joins(self, checkpoints: CheckpointStore | None) -> bool:
        inner = self._inner
        return isinstance(inner, JointCommit) and inner.joins(_unwrapped(checkpoints))

    async def commit(self, commit: Commit, checkpoints: CheckpointStore | None) -> None:
        assert isinstance(self._inner, JointCommit)
        self._commits += 1 if commit.events else 0
        self._inside = bool(commit.events)
        try:
            await self._inner.commit(commit, _unwrapped(checkpoints))
        finally:
            self._inside = False
        if commit.state is not None:
            self._consumed(commit.state)
        if isinstance(checkpoints, CrashingCheckpoints):
            checkpoints.appended(len(commit.events))

    async def load(self, session_id: str) -> SessionState | None:
        return await self._inner.load(session_id)

    async def delete(self, session_id: str) -> None:
        await self._inner.delete(session_id)

    async def session_ids(self, *, limit: int = 100, principal: str | None = None) -> list[str]:
        return await self._inner.session_ids(limit=limit, principal=principal)

    async def claim_decision(self, session_id: str, attempt_id: str, decision: str) -> bool:
        claimed = await self._inner.claim_decision(session_id, attempt_id, decision)
        if claimed:
            self._claimed = True
            maybe_crash("after-claim")
        return claimed

    async def record_write(self, session_id: str, record: WriteRecord) -> None:
        await self._inner.record_write(session_id, record)

    # The inner store's spend ledger and claim release (SQLite and PostgreSQL have them).

    async def add_spend(
        self,
        session_id: str,
        kind: SpendKind,
        amount: float,
        *,
        cap: float | None = None,
        floor: float = 0.0,
        hold: str | None = None,
    ) -> float | None:
        inner = self._inner
        assert isinstance(inner, SpendHolds)
        total = await inner.add_spend(session_id, kind, amount, cap=cap, floor=floor, hold=hold)
        if hold is not None and total is not None:
            maybe_crash("after-reserve")  # reserved and held, the write not started
        return total

    async def release_holds(
        self, session_id: str, kind: SpendKind, started: Collection[str]
    ) -> float | None:
        inner = self._inner
        assert isinstance(inner, SpendHolds)
        return await inner.release_holds(session_id, kind, started)

    async def release_claim(self, session_id: str, attempt_id: str, decision: str) -> bool:
        inner = self._inner
        assert isinstance(inner, ClaimRelease)
        return await inner.release_claim(session_id, attempt_id, decision)

    async def aclose(self) -> None:
        await self._inner.aclose()


def _unwrapped(checkpoints: CheckpointStore | None) -> CheckpointStore | None:
    return checkpoints._inner if isinstance(checkpoints, CrashingCheckpoints) else checkpoints
