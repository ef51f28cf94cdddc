"""Crash tests: a worker is SIGKILLed at 25 points; a new process takes over.

For each point, against SQLite and against Redis + PostgreSQL: the child
runs turn 1 (and, for the later points, a second child approves the paused
payment) and kills itself at the point. This test process then resumes the
cut stream and checks that the replay loses and duplicates no event the
client saw, that no write ran twice, and that the session goes on to a
normal ``turn_complete``.

Nothing here races the clock. A child holds its run lock with a lease that
outlives the test (``CHILD_LEASE``), so a stalled child never loses it; the
parent waits on the child's exit (its SIGKILL at the point under test), and
only then, as a supervisor that saw the worker die, drops the dead worker's
lease with the lock's own ``release(key, owner)`` (a no-op unless that owner
still holds it) and takes the session over.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from mainspring import Approve, Event, PendingAction, Session, TurnComplete
from mainspring.codec import event_from_json
from mainspring.stores.urls import Stores, open_stores
from tests.crash.scenario import make_agent

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SEND_POINTS = [
    "send:append1",  # only stream_started logged
    "send:model1-delta1",
    "send:model1-delta4",
    "send:model1-callend",
    "send:read-a-start",
    "send:read-b-after-effect",
    "send:append9",
    "send:model2-delta2",
    "send:before-transfer",
    "send:transfer-before-effect",
    "send:transfer-after-effect",
    "send:after-transfer",
    "send:audit-transfer",
    "send:model3-delta1",
    "send:end",  # paused for approval, then killed
    "send:commit2-inside",  # inside a step's one commit: nothing of it is on record
    "send:commit4-inside",
]
RESUME_POINTS = [
    "resume:after-claim",  # the decision is claimed in the store, not yet consumed
    "resume:after-consume",  # the save that consumes it is on record, nothing ran
    "resume:before-pay",
    "resume:pay-before-effect",
    "resume:pay-after-effect",
    "resume:model1-delta2",
    "resume:append3",
    "resume:commit2-inside",
]
POINTS = SEND_POINTS + RESUME_POINTS
assert len(POINTS) == 25


@dataclass(frozen=True)
class Urls:
    sessions: str
    checkpoints: str
    locks: str


@pytest.fixture(params=["sqlite", "redis+postgres"])
def urls(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Urls]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'crash.db'}"
        yield Urls(url, url, url)
        return
    redis = request.getfixturevalue("redis_server")
    postgres = request.getfixturevalue("postgres_server")
    import psycopg
    import redis as redis_sync

    db = f"crash_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres.url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {db}")
    redis_url = f"redis://127.0.0.1:{redis.port}/1"
    client = redis_sync.Redis.from_url(redis_url)
    client.flushdb()
    client.close()
    base, _, query = postgres.url.partition("?")
    pg_url = base.rsplit("/", 1)[0] + f"/{db}" + (f"?{query}" if query else "")
    yield Urls(pg_url, redis_url, redis_url)


def run_child(
    phase: str, crash_at: str, session_id: str, effects: Path, urls: Urls, *extra: str
) -> tuple[int, list[Event]]:
    env = {**os.environ, "CRASH_PHASE": phase, "CRASH_AT": crash_at}
    args = [sys.executable, "-m", "tests.crash.child", phase, session_id, str(effects)]
    args += [urls.sessions, urls.checkpoints, urls.locks, *extra]
    proc = subprocess.run(
        args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    events = [event_from_json(line) for line in proc.stdout.splitlines() if line.strip()]
    if proc.returncode not in (0, -9):
        raise AssertionError(f"child failed ({proc.returncode}):\n{proc.stderr}")
    return proc.returncode, events


async def release_dead_worker(stores: Stores, session_id: str) -> None:
    """Drop the lease of the session's holder, a worker this process saw die.

    What a supervisor does once it knows a worker is gone (here: its SIGKILL
    was waited on), rather than wait out the lease: ``release`` names the dead
    owner, so it can never drop a lease a live worker took meanwhile.
    """
    assert stores.locks is not None
    owner = await stores.locks.holder(session_id)
    if owner is not None:
        await stores.locks.release(session_id, owner)
    assert await stores.locks.holder(session_id) is None


async def recover(
    stores: Stores, session_id: str, effects: Path, seen: list[Event]
) -> tuple[Session, list[Event]]:
    """A new process: resume the cut stream."""
    assert stores.sessions is not None
    await release_dead_worker(stores, session_id)
    # when_busy="error": the lock is free now; a held one would be a bug, not a wait.
    session = await Session.load(
        make_agent(effects),
        stores.sessions,
        session_id,
        checkpoint_store=stores.checkpoints,
        run_lock=stores.locks,
        when_busy="error",
    )
    # A client that saw nothing never learnt the stream id: the session knows it.
    stream_id = seen[0].stream_id if seen else session.state.active_stream  # type: ignore[union-attr]  # the first event is StreamStarted, which has a stream_id
    if stream_id is None:  # it died deciding, before the stream began: nothing to replay
        return session, []
    replay = [event async for event in session.send(resume_stream_id=stream_id)]
    return session, replay


async def finish(session: Session) -> list[Event]:
    """Approve whatever waits, then one more turn: it must end normally."""
    events: list[Event] = []
    while session.pending is not None:
        events = [e async for e in session.resume(session.pending.attempt_id, Approve())]
    events = [e async for e in session.send("and now?")]
    return events


def crash_at(point: str, urls: Urls, tmp_path: Path) -> tuple[str, Path, list[Event]]:
    """Run the child(ren) until one dies at ``point``: the session, its effects, what it saw."""
    phase = point.split(":")[0]
    effects = tmp_path / "effects.log"
    effects.touch()
    session_id = str(uuid.uuid4())
    if phase == "resume":
        code, first = run_child("send", "none", session_id, effects, urls)
        assert code == 0, f"the first child did not pause: it saw {first[-1:]}"
        pending = next(e for e in first if isinstance(e, PendingAction))
        code, seen = run_child("resume", point, session_id, effects, urls, pending.attempt_id)
    else:
        code, seen = run_child("send", point, session_id, effects, urls)
    assert code == -9, f"the child never reached {point}: it saw {seen[-1:]}"
    return session_id, effects, seen


@pytest.mark.parametrize("point", POINTS)
def test_a_crash_loses_nothing_and_runs_no_write_twice(
    point: str, urls: Urls, tmp_path: Path
) -> None:
    session_id, effects, seen = crash_at(point, urls, tmp_path)
    assert not seen or seen[0].type == "stream_started"

    async def after_the_crash() -> tuple[list[Event], list[Event], Session]:
        stores = await open_stores(
            sessions=urls.sessions, checkpoints=urls.checkpoints, locks=urls.locks
        )
        try:
            session, replay = await recover(stores, session_id, effects, seen)
            final = await finish(session)
        finally:
            await stores.aclose()
        return replay, final, session

    replay, final, session = anyio.run(after_the_crash)
    # The replay starts with exactly what the client saw: nothing lost, nothing twice.
    assert replay[: len(seen)] == seen
    # Past that: only what was on record but not yet delivered, then one terminal
    # (none when it died deciding, before its stream began).
    if replay or point != "resume:after-claim":
        assert replay[-1].type in ("turn_complete", "error")
        assert sum(e.type in ("turn_complete", "error") for e in replay) == 1
    # No write ran twice, whatever happened.
    counts = Counter(effects.read_text().split())
    assert counts["write:transfer"] <= 1 and counts["write:pay"] <= 1, counts
    # The session went on to a normal end.
    assert isinstance(final[-1], TurnComplete) and final[-1].stop_reason == "end_turn"
    # A write cut after its effect is reported as unknown, never silently re-run.
    if point.endswith(("transfer-after-effect", "after-transfer", "audit-transfer")):
        assert counts["write:transfer"] == 1
        terminal = replay[-1]
        assert terminal.type == "error" and terminal.code == "tool_interrupted"
        results = [
            p for m in session.messages for p in m.tool_results_parts if p.name == "transfer"
        ]
        assert results and "outcome is unknown" in results[0].content
