"""k-of-n approvals: a non-destructive "add approval", distinct principals, no self-approval.

The quorum's state is in the session store (one claimed row per approving
principal, then the attempt itself claimed by the approval that completes it),
so two worker processes approving at once neither lose an approval nor both
run the write: the last test runs two real processes on one SQLite file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from mainspring import (
    Agent,
    ApprovalAdded,
    ApprovalError,
    ApprovalPolicy,
    ApprovalRule,
    Approve,
    ApproverRefused,
    DecisionConflict,
    PendingAction,
    PermissionRules,
    Reject,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    TurnComplete,
    tool,
)
from mainspring.approvals import approval_key, approvers
from mainspring.messages import Message
from mainspring.models.base import ToolSpec
from mainspring.state import SessionState
from mainspring.stores import InMemorySessionStore
from mainspring.stores.urls import open_stores
from tests.helpers import pending_of, resume, send, types
from tests.server.test_workers import _as_url

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the quorum is the store's business, not the event loop's


ROOT = Path(__file__).resolve().parents[1]
wired: list[int] = []


@tool(permission="confirm")
def wire(to: str, cents: int) -> str:
    """Wire money (high tier: two approvers)."""
    wired.append(cents)
    return f"wired {cents} to {to}"


def _model(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
    if messages[-1].role == "tool":
        return ScriptedResponse(text="done: " + messages[-1].tool_results_parts[0].content)
    return ScriptedResponse(tool_calls=[ScriptedCall("wire", {"to": "acme", "cents": 500_000})])


def two_of_n(*, self_approval: bool = False) -> Agent:
    rule = ApprovalRule(quorum=2, allow_self_approval=self_approval)
    return Agent(
        model=ScriptedModel(_model),
        tools=[wire],
        permissions=PermissionRules(approvals=ApprovalPolicy(tools={"wire": rule})),
    )


async def paused(
    agent: Agent, store: InMemorySessionStore | None = None
) -> tuple[Session, PendingAction]:
    wired.clear()
    state = SessionState(session_id="quorum-1", agent_name=agent.name, principal="requester")
    session = Session(agent, state=state, session_store=store)
    pending = pending_of(await send(session, "wire acme"))
    assert pending.quorum == 2 and pending.requested_by == "requester"
    return session, pending


async def test_the_write_runs_once_the_quorum_is_reached_and_only_then() -> None:
    store = InMemorySessionStore()
    session, pending = await paused(two_of_n(), store)
    events = await resume(session, pending.attempt_id, Approve(principal="ann"))
    # Non-destructive: the approval is on record, the action still waits, nothing ran.
    assert types(events) == ["approval_added", "pending_action", "turn_complete"]
    added = events[0]
    assert isinstance(added, ApprovalAdded)
    assert (added.principal, added.approvals, added.quorum) == ("ann", ("ann",), 2)
    assert events[1] == pending and session.pending == pending
    assert wired == []
    stored = await store.load(session.session_id)
    assert stored is not None and approvers(stored.decided, pending.attempt_id) == ("ann",)
    assert pending.attempt_id not in stored.decided  # the attempt itself is not decided yet

    events = await resume(session, pending.attempt_id, Approve(principal="bob"))
    assert wired == [500_000]
    assert isinstance(events[-1], TurnComplete) and events[-1].stop_reason == "end_turn"
    assert "approval_added" not in types(events)
    stored = await store.load(session.session_id)
    assert stored is not None
    assert approvers(stored.decided, pending.attempt_id) == ("ann", "bob")
    assert json.loads(stored.decided[pending.attempt_id])["principal"] == "bob"
    with pytest.raises(DecisionConflict):
        session.resume(pending.attempt_id, Approve(principal="carol"))
    assert wired == [500_000]


async def test_a_principal_cannot_approve_twice() -> None:
    session, pending = await paused(two_of_n())
    await resume(session, pending.attempt_id, Approve(principal="ann"))
    with pytest.raises(ApproverRefused, match="approved 'wire' already") as caught:
        session.resume(pending.attempt_id, Approve(principal="ann"))
    assert caught.value.principal == "ann"
    assert wired == [] and session.pending == pending
    assert approvers(session.state.decided, pending.attempt_id) == ("ann",)


async def test_the_requester_cannot_approve_their_own_request() -> None:
    session, pending = await paused(two_of_n())
    with pytest.raises(ApproverRefused, match="may not approve"):
        session.resume(pending.attempt_id, Approve(principal="requester"))
    with pytest.raises(ApproverRefused, match="needs the approving principal"):
        session.resume(pending.attempt_id, Approve())
    assert wired == [] and approvers(session.state.decided, pending.attempt_id) == ()


async def test_the_requester_counts_where_the_policy_allows_it() -> None:
    session, pending = await paused(two_of_n(self_approval=True))
    await resume(session, pending.attempt_id, Approve(principal="requester"))
    await resume(session, pending.attempt_id, Approve(principal="ann"))
    assert wired == [500_000]


async def test_an_approval_of_a_quorum_cannot_edit() -> None:
    session, pending = await paused(two_of_n())
    with pytest.raises(ApprovalError, match="cannot edit"):
        session.resume(pending.attempt_id, Approve(principal="ann", edits={"cents": 1}))
    assert approvers(session.state.decided, pending.attempt_id) == ()


async def test_one_rejection_ends_the_wait_and_nothing_runs() -> None:
    session, pending = await paused(two_of_n())
    await resume(session, pending.attempt_id, Approve(principal="ann"))
    events = await resume(session, pending.attempt_id, Reject("no", principal="bob"))
    assert wired == [] and session.pending is None
    assert isinstance(events[-1], TurnComplete) and events[-1].stop_reason == "end_turn"
    with pytest.raises(DecisionConflict):
        session.resume(pending.attempt_id, Approve(principal="carol"))


async def test_an_approval_is_recorded_in_the_store_under_its_principal() -> None:
    store = InMemorySessionStore()
    session, pending = await paused(two_of_n(), store)
    await resume(session, pending.attempt_id, Approve(principal="ann"))
    # A second worker that loaded the session earlier still cannot count "ann" twice:
    # the store holds her approval's row.
    assert not await store.claim_decision(
        session.session_id, approval_key(pending.attempt_id, "ann"), "{}"
    )


# ------------------------------------------------------------- two processes


@pytest.fixture(params=["sqlite", "postgres+redis"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """``(sessions URL, locks URL)`` every worker shares."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'shared.db'}"
        return url, url
    redis = request.getfixturevalue("redis_server").url
    return _as_url(request.getfixturevalue("postgres_url")), redis


class Workers:
    """Worker processes (``tests/quorum_worker.py``) on shared stores."""

    def __init__(self, stores: tuple[str, str], tmp_path: Path) -> None:
        self.stores = ["--sessions", stores[0], "--locks", stores[1]]
        self.effects = tmp_path / "effects.txt"
        self.effects.touch()
        self.env = {**os.environ, "MAINSPRING_TEST_EFFECTS": str(self.effects)}

    def start(self, *args: str) -> subprocess.Popen[bytes]:
        command = [sys.executable, "-m", "tests.quorum_worker", *args, *self.stores]
        return subprocess.Popen(
            command,
            cwd=ROOT,
            env=self.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def answer(self, process: subprocess.Popen[bytes], stdin: bytes = b"") -> Any:
        out, err = process.communicate(stdin, timeout=120)
        assert process.returncode == 0, err.decode()
        return json.loads(out.splitlines()[-1])


@pytest.mark.slow
async def test_two_worker_processes_approving_at_once_complete_the_quorum_once(
    stores: tuple[str, str], tmp_path: Path
) -> None:
    workers = Workers(stores, tmp_path)
    attempt = workers.answer(workers.start("pause", "q-1"))["attempt_id"]
    assert workers.effects.read_text() == ""

    ann = workers.start("approve", "q-1", attempt, "ann")
    bob = workers.start("approve", "q-1", attempt, "bob")
    for worker in (ann, bob):  # both loaded the paused session before either approves
        assert worker.stdout is not None
        line = worker.stdout.readline()
        assert json.loads(line) == "ready", worker.communicate(timeout=120)[1].decode()
    assert ann.stdin is not None and bob.stdin is not None
    ann.stdin.write(b"go\n")
    bob.stdin.write(b"go\n")
    ann.stdin.flush()
    bob.stdin.flush()
    answers = {"ann": workers.answer(ann), "bob": workers.answer(bob)}

    outcomes = sorted(a["outcome"] for a in answers.values())
    assert outcomes == ["added", "ran"], answers  # exactly one completed the quorum
    assert workers.effects.read_text().splitlines() == ["pay mallory 9900"]
    added = next(a for a in answers.values() if a["outcome"] == "added")
    assert added["types"][-2:] == ["pending_action", "turn_complete"]

    # Neither approval was lost, and the requester's worker is refused.
    requester = workers.start("approve", "q-1", attempt, "requester")
    assert workers.answer(requester, b"go\n")["error"] == "DecisionConflict"
    late = workers.start("approve", "q-1", attempt, "ann")
    assert workers.answer(late, b"go\n")["outcome"] == "refused"
    assert workers.effects.read_text().splitlines() == ["pay mallory 9900"]
    opened = await open_stores(sessions=stores[0])
    try:
        assert opened.sessions is not None
        state = await opened.sessions.load("q-1")
    finally:
        await opened.aclose()
    assert state is not None and approvers(state.decided, attempt) == ("ann", "bob")
    assert json.loads(state.decided[attempt])["kind"] == "approved"
