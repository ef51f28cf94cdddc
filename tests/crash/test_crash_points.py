"""Crash and cancellation at single points of spending and deciding.

A child process (``tests.crash.child`` running :mod:`tests.crash.points`)
is SIGKILLed at a store operation; this process then takes the session over
as ``test_crash`` does: it waits on the child's death, drops the dead
worker's lease with ``release(key, owner)`` and loads the session. Against
SQLite and against Redis + PostgreSQL.

- Killed between the auto-tier spend reservation and the write's ``started``
  entry: the write never ran, and recovery gives its amount back to the cap.
- Killed after a client-executed tool's result was consumed, before it was
  committed to the transcript: recovery gives the model the client's result.
- Killed after a decision was claimed, before it was consumed: the claim of a
  dead worker binds nobody; another decision (or the same) goes on.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import anyio
import pytest

from mainspring import PendingAction, Session, TurnComplete
from mainspring.codec import event_from_json
from mainspring.decisions import Approve, Reject
from mainspring.events import Event
from mainspring.stores import SpendLedger
from mainspring.stores.urls import Stores, open_stores
from tests.crash import test_crash as crash
from tests.crash.points import make_points_agent
from tests.crash.test_crash import ROOT, Urls, release_dead_worker

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

urls = crash.urls  # the same stores: SQLite, and Redis + PostgreSQL


def child(
    phase: str, text: str, crash_at: str, sid: str, effects: Path, urls: Urls, *extra: str
) -> tuple[int, list[Event]]:
    env = {
        **os.environ,
        "CRASH_PHASE": phase,
        "CRASH_AT": crash_at,
        "CRASH_AGENT": "points",
        "CRASH_TEXT": text,
        "CRASH_DECISION": extra[1] if len(extra) > 1 else "approve",
    }
    args = [sys.executable, "-m", "tests.crash.child", phase, sid, str(effects)]
    args += [urls.sessions, urls.checkpoints, urls.locks, *extra[:1]]
    proc = subprocess.run(
        args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    if proc.returncode not in (0, -9):
        raise AssertionError(f"child failed ({proc.returncode}):\n{proc.stderr}")
    events = [event_from_json(line) for line in proc.stdout.splitlines() if line.strip()]
    return proc.returncode, events


async def take_over(stores: Stores, sid: str, effects: Path) -> Session:
    """A new worker: the dead one's lease dropped, the session loaded."""
    assert stores.sessions is not None
    await release_dead_worker(stores, sid)
    return await Session.load(
        make_points_agent(effects),
        stores.sessions,
        sid,
        checkpoint_store=stores.checkpoints,
        run_lock=stores.locks,
        when_busy="error",
    )


def paused(text: str, sid: str, effects: Path, urls: Urls) -> PendingAction:
    code, events = child("send", text, "none", sid, effects, urls)
    assert code == 0
    pending = events[-2]
    assert isinstance(pending, PendingAction), events[-2:]
    return pending


def setup(tmp_path: Path) -> tuple[str, Path]:
    effects = tmp_path / "effects.log"
    effects.touch()
    return str(uuid.uuid4()), effects


def test_a_reservation_of_a_write_that_never_started_is_given_back(
    urls: Urls, tmp_path: Path
) -> None:
    sid, effects = setup(tmp_path)
    code, seen = child("send", "spend", "send:after-reserve", sid, effects, urls)
    assert code == -9 and seen

    async def after() -> None:
        stores = await open_stores(
            sessions=urls.sessions, checkpoints=urls.checkpoints, locks=urls.locks
        )
        try:
            ledger: object = stores.sessions
            assert isinstance(ledger, SpendLedger)
            assert await ledger.add_spend(sid, "auto", 0.0) == 5.0  # held by the dead worker
            session = await take_over(stores, sid, effects)
            stream = session.state.active_stream
            assert stream is not None
            replay = [e async for e in session.send(resume_stream_id=stream)]
            assert isinstance(replay[-1], TurnComplete)
            assert await ledger.add_spend(sid, "auto", 0.0) == 0.0  # given back
            assert session.state.auto_spent_usd == 0.0
            # The cap has its whole room again: another $5 runs, and counts once.
            done = [e async for e in session.send("spend")]
            assert isinstance(done[-1], TurnComplete) and done[-1].stop_reason == "end_turn"
            assert await ledger.add_spend(sid, "auto", 0.0) == 5.0
        finally:
            await stores.aclose()

    anyio.run(after)
    assert effects.read_text().split() == ["write:transfer"]  # only the second one ran


def test_a_consumed_client_result_is_what_the_model_gets_after_a_crash(
    urls: Urls, tmp_path: Path
) -> None:
    sid, effects = setup(tmp_path)
    pending = paused("client", sid, effects, urls)
    assert pending.client_executed
    decision = "client:signed in the browser at 10:42"
    code, _ = child(
        "resume", "", "resume:after-consume", sid, effects, urls, pending.attempt_id, decision
    )
    assert code == -9

    async def after() -> Session:
        stores = await open_stores(
            sessions=urls.sessions, checkpoints=urls.checkpoints, locks=urls.locks
        )
        try:
            session = await take_over(stores, sid, effects)
            stream = session.state.active_stream
            assert stream is not None
            replay = [e async for e in session.send(resume_stream_id=stream)]
            assert replay[-1].type in ("turn_complete", "error")
            done = [e async for e in session.send("anything else?")]
            assert isinstance(done[-1], TurnComplete)
        finally:
            await stores.aclose()
        return session

    session = anyio.run(after)
    results = [p for m in session.messages for p in m.tool_results_parts if p.name == "sign"]
    assert [r.content for r in results] == ["signed in the browser at 10:42"]
    assert not results[0].is_error


@pytest.mark.parametrize("second", ["reject", "approve"])
def test_a_dead_workers_unconsumed_claim_binds_nobody(
    second: str, urls: Urls, tmp_path: Path
) -> None:
    sid, effects = setup(tmp_path)
    pending = paused("pay", sid, effects, urls)
    code, _ = child(
        "resume", "", "resume:after-claim", sid, effects, urls, pending.attempt_id, "approve"
    )
    assert code == -9

    async def after() -> list[Event]:
        stores = await open_stores(
            sessions=urls.sessions, checkpoints=urls.checkpoints, locks=urls.locks
        )
        try:
            session = await take_over(stores, sid, effects)
            assert session.pending is not None  # the claim was never consumed
            decision = Reject("changed my mind") if second == "reject" else Approve()
            events = [e async for e in session.resume(pending.attempt_id, decision)]
            assert isinstance(events[-1], TurnComplete), events[-1]
            # The session goes on: a new turn runs.
            more = [e async for e in session.send("anything else?")]
            assert isinstance(more[-1], TurnComplete) and more[-1].stop_reason == "end_turn"
        finally:
            await stores.aclose()
        return events

    anyio.run(after)
    ran = effects.read_text().split()
    assert ran == ([] if second == "reject" else ["write:pay"])
