"""A worker process for the crash tests: runs one phase, printing each event.

``python -m tests.crash.child PHASE SESSION_ID EFFECTS SESSIONS CHECKPOINTS LOCKS [ATTEMPT]``
with PHASE ``send`` (turn 1 until it pauses) or ``resume`` (approve ATTEMPT).
``CRASH_AGENT=points`` runs :mod:`tests.crash.points` instead, sending
``CRASH_TEXT`` and deciding ``CRASH_DECISION`` (see ``points.decision_of``).
Each consumed event is printed as one JSON line and flushed before the next
is pulled, so the parent knows exactly what a client saw.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path

import anyio

from mainspring import Approve, Session
from mainspring.codec import event_to_json
from mainspring.stores.urls import open_stores
from tests.crash.points import decision_of, make_points_agent
from tests.crash.scenario import (
    CHILD_LEASE,
    CrashingCheckpoints,
    CrashingSessions,
    make_agent,
    maybe_crash,
)


async def main(argv: list[str]) -> None:
    phase, session_id, effects, sessions_url, checkpoints_url, locks_url, *rest = argv
    stores = await open_stores(sessions=sessions_url, checkpoints=checkpoints_url, locks=locks_url)
    assert stores.sessions is not None and stores.checkpoints is not None
    points = os.environ.get("CRASH_AGENT") == "points"
    agent = make_points_agent(Path(effects)) if points else make_agent(Path(effects))
    decision = decision_of(os.environ.get("CRASH_DECISION", "approve")) if points else Approve()
    checkpoints = CrashingCheckpoints(stores.checkpoints)
    # The SQLite stores of one file share a connection: trace it for the crash inside a commit.
    db = getattr(stores.sessions, "_db", None)
    connection = getattr(db, "_conn", None)
    traced = connection if isinstance(connection, sqlite3.Connection) else None
    sessions = CrashingSessions(stores.sessions, traced)
    if phase == "send":
        session = Session(
            agent,
            session_id=session_id,
            session_store=sessions,
            checkpoint_store=checkpoints,
            run_lock=stores.locks,
            lock_ttl=CHILD_LEASE,
        )
        stream = session.send(os.environ.get("CRASH_TEXT", "go") if points else "go")
    else:
        session = await Session.load(
            agent,
            sessions,
            session_id,
            checkpoint_store=checkpoints,
            run_lock=stores.locks,
            lock_ttl=CHILD_LEASE,
        )
        stream = session.resume(rest[0], decision)
    async for event in stream:
        sys.stdout.write(event_to_json(event) + "\n")
        sys.stdout.flush()
    maybe_crash("end")
    await stores.aclose()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1:])
