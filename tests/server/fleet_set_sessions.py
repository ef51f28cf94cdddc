"""The session doors of the fleet property test: conversations, decisions, kills, cancels.

Hypothesis draws a conversation (a plan of reads, auto-tier and confirm-tier
writes and client tools), the door and worker of its turn (REST, AI SDK,
AG-UI, or A2A: such a conversation lives in the session of an A2A context,
made by a first task, and its plan is a second task), then per pause the
decisions posted at once through random doors and workers (duplicates and
conflicting ones among them), maybe with a cancel, and a SIGKILL of a worker
just before a random store operation. Whatever happened, any live worker
then continues the session: it decides what waits and runs a turn that ends.

A decision through A2A is the reply to the conversation's paused task (a
message naming its ``taskId``, on a random worker). It needs the task on
every worker: so on Redis (the task records are there), and on SQLite only
once A2A tasks are shared there (:data:`A2A_TASKS_SHARED_ON_SQLITE`). Where
the task is not shared, or the conversation has no A2A task, an A2A decision
goes through REST instead.
"""

from __future__ import annotations

import json
import random
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
from hypothesis import example, given
from hypothesis import strategies as st

from tests.server.fleet import WAIT, WORKERS, Fleet, Worker, client, property_settings, record
from tests.server.fleet_doors import (
    A2A_TASK_NOT_FOUND,
    DOORS,
    TURN_DOORS,
    Door,
    Kind,
    Seen,
    decide,
    decide_a2a,
    follow,
    send,
    send_a2a,
)
from tests.server.fleet_judge import judge

A2A_TASKS_SHARED_ON_SQLITE = True
"""Whether a SQLite deployment's workers share A2A task records. Today they live in
each worker's memory (``task_store_for``), so a reply to a task on the other worker
is ``TaskNotFound``; the shared SQLite/PostgreSQL task store (branch b-a2a) makes it
True. Until then A2A decisions on SQLite go through REST."""

A2A_REPLIES_AT_ONCE_PER_WORKER = 3
"""A2A replies to one task a worker gets at once (the rest of a round's go through REST).

All of a round's (at most 3): a worker refuses a reply while another to the
same task is handled (one JSON-RPC error), where the A2A SDK would tap it into
the running task's queue (``tests/server/test_a2a_replies.py``)."""

DECISION_DOORS: tuple[Door, ...] = (*DOORS, "a2a")
"""The doors a decision goes through (A2A: a reply to the conversation's paused task)."""

STEPS = st.one_of(
    st.just(["look"]),
    st.tuples(st.just("spend"), st.sampled_from([10, 30, 45, 60])).map(list),
    st.just(["sign"]),
    st.just(["wallet"]),
)
DECISIONS = st.lists(
    st.tuples(
        st.sampled_from(DECISION_DOORS),
        st.integers(0, WORKERS - 1),
        st.sampled_from(["yes", "no"]),
    ),
    min_size=1,
    max_size=3,
)
Post = tuple[Door, int, str]


@dataclass(frozen=True)
class Script:
    """One example, drawn whole before it runs (what happens then cannot change the draws)."""

    steps: list[list[Any]]
    kill_at: int
    """Kill a worker just before its Nth store operation from the first turn on (0: none)."""
    door: Door
    rounds: list[tuple[list[Post], bool]]
    """Per pause: the decisions posted at once, and whether a cancel goes with them."""
    seed: int
    """Which live worker each request goes to (the workers alive depend on the run)."""


SCRIPTS = st.lists(STEPS, min_size=1, max_size=4).flatmap(
    lambda steps: st.builds(
        Script,
        steps=st.just(steps),
        kill_at=st.sampled_from([0, 1, 3, 6, 10, 15, 25, 40]),
        door=st.sampled_from(TURN_DOORS),
        rounds=st.lists(
            st.tuples(DECISIONS, st.booleans()), min_size=len(steps), max_size=len(steps)
        ),
        seed=st.integers(0, 2**32 - 1),
    )
)


@dataclass
class Run:
    """One example: its session, what its clients saw, and the fleet it ran on."""

    fleet: Fleet
    script: Script
    client: httpx.AsyncClient
    a2a_shared: bool
    """Every worker knows every A2A task (so an A2A reply may go to any)."""
    session_id: str = ""
    context: str = ""
    """The A2A context of the session (when its conversation went through A2A)."""
    task_id: str = ""
    """The A2A task of the conversation's plan (a reply to it decides)."""
    seen: list[Seen] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.random = random.Random(self.script.seed)

    def pick(self) -> Worker:
        live = self.fleet.live()
        assert live, "every worker died"
        return self.random.choice(live)

    def saw(self, seen: Seen) -> Seen:
        assert seen.status is None or seen.status < 500, f"{seen.url}: {seen.status} {seen.body}"
        self.seen.append(seen)
        return seen

    async def pending(self) -> dict[str, Any] | None:
        for _ in range(3):
            await self.fleet.bury([self.session_id])
            worker = self.pick()
            try:
                response = await self.client.get(
                    f"{worker.url}/v1/sessions/{self.session_id}/pending"
                )
            except httpx.TransportError:
                # Only a killed worker drops a loopback connection; its socket closes
                # before its exit can be waited on: wait on that, so it is buried.
                await anyio.to_thread.run_sync(worker.process.wait, WAIT)
                continue
            assert response.status_code == 200, response.text
            pending: dict[str, Any] | None = response.json()["pending"]
            return pending
        raise AssertionError("no worker answered")

    def kind_of(self, pending: dict[str, Any], answer: str) -> Kind:
        if answer == "no":
            return "reject"
        return "client" if pending.get("client_executed") else "approve"

    async def post(self, worker: Worker, door: Door, pending: dict[str, Any], kind: Kind) -> None:
        """One decision through ``door`` (an A2A reply where the task is known, else REST)."""
        if door == "a2a" and not (self.task_id and self.a2a_shared):
            door = "rest"
        if door != "a2a":
            self.saw(await decide(self.client, worker.url, door, self.session_id, pending, kind))
            return
        seen = await decide_a2a(self.client, worker.url, self.context, self.task_id, pending, kind)
        assert seen.error_code != A2A_TASK_NOT_FOUND, (
            f"worker {worker.name} does not know A2A task {self.task_id} (TaskNotFound):"
            f" A2A tasks are not shared between this deployment's workers: {seen.last_data}"
        )
        self.saw(seen)

    async def decide_at_once(
        self, pending: dict[str, Any], posts: list[Post], cancel: bool
    ) -> None:
        """Post the drawn decisions on ``pending`` concurrently (and maybe a cancel)."""
        ref = str(pending["input"].get("ref", ""))
        live = self.fleet.live()
        if any(answer == "yes" for _, _, answer in posts):
            record(self.fleet.effects, f"approve-sent {ref}")

        async def cancel_it() -> None:
            worker = live[0]
            try:
                response = await self.client.post(
                    f"{worker.url}/v1/sessions/{self.session_id}/cancel", json={}
                )
            except httpx.TransportError:
                return
            assert response.status_code < 500, response.text

        replies: Counter[str] = Counter()
        async with anyio.create_task_group() as tg:
            for door, index, answer in posts:
                worker = live[index % len(live)]
                if door == "a2a":
                    replies[worker.name] += 1
                    if replies[worker.name] > A2A_REPLIES_AT_ONCE_PER_WORKER:
                        door = "rest"
                tg.start_soon(self.post, worker, door, pending, self.kind_of(pending, answer))
            if cancel:
                tg.start_soon(cancel_it)

    async def settle(self) -> None:
        """Any live worker continues the session: decide what waits, then a turn that ends."""
        for _ in range(12):
            pending = await self.pending()
            worker = self.pick()
            if pending is not None:
                kind = self.kind_of(pending, "yes")
                if kind == "approve":
                    record(self.fleet.effects, f"approve-sent {pending['input'].get('ref')}")
                self.saw(
                    await decide(self.client, worker.url, "rest", self.session_id, pending, kind)
                )
                continue
            seen = self.saw(await send(self.client, worker.url, "rest", self.session_id, "bye"))
            if seen.status == 409:  # a turn still runs (or a decision's stream goes on)
                self.saw(await follow(self.client, worker.url, self.session_id, None))
                continue
            if seen.status == 200 and seen.ended and seen.kinds[-1:] == ["turn_complete"]:
                return
        raise AssertionError(f"no worker could continue session {self.session_id}: {self.seen}")


async def _create(run: Run) -> str:
    """A new session, through REST; an A2A turn's through an A2A context's first task."""
    from mainspring.server._a2a_executor import session_id_of
    from mainspring.server._auth import Principal

    worker = run.pick()
    if run.script.door != "a2a":
        created = await run.client.post(f"{worker.url}/v1/sessions", json={})
        assert created.status_code == 201, created.text
        return str(created.json()["session_id"])
    run.context = uuid.uuid4().hex
    first = run.saw(await send_a2a(run.client, worker.url, run.context, "hello"))
    assert first.kinds[-1:] == ["TASK_STATE_COMPLETED"], first
    return session_id_of("fleet", Principal("alice"), run.context)


async def _example(fleet: Fleet, script: Script, a2a_shared: bool) -> None:
    await fleet.refill()
    async with client() as http:
        run = Run(fleet, script, http, a2a_shared)
        run.session_id = sid = await _create(run)
        plan = [[step[0], f"{sid}-{i}", *step[1:]] for i, step in enumerate(script.steps)]
        if script.kill_at:
            fleet.arm(run.pick(), script.kill_at)
        text = "plan " + json.dumps(plan)
        if script.door == "a2a":  # a new task of the context the session was made in
            run.task_id = run.saw(await send_a2a(http, run.pick().url, run.context, text)).task_id
        else:
            run.saw(await send(http, run.pick().url, script.door, sid, text))
        for posts, cancel in script.rounds:
            pending = await run.pending()
            if pending is None:
                break
            await run.decide_at_once(pending, posts, cancel)
        fleet.disarm()
        await run.settle()
    judge(fleet.effects, run.seen, sid)


def session_property(fleet: Fleet, *, a2a_shared: bool) -> None:
    """The session doors' property on ``fleet`` (``a2a_shared``: every worker knows every task)."""

    @property_settings(default=2)
    @given(script=SCRIPTS)
    # A conversation through A2A (a worker killed on the way), decided through the others.
    @example(
        Script(
            steps=[["sign"], ["spend", 60]],
            kill_at=10,
            door="a2a",
            rounds=[
                ([("rest", 1, "yes"), ("agui", 0, "yes")], False),
                ([("aisdk", 0, "no")], False),
            ],
            seed=7,
        )
    )
    # Replies to the paused A2A task on both workers at once (one decides), then through AG-UI.
    @example(
        Script(
            steps=[["sign"], ["wallet"]],
            kill_at=0,
            door="a2a",
            rounds=[([("a2a", 1, "yes"), ("a2a", 0, "no")], False), ([("a2a", 0, "yes")], False)],
            seed=3,
        )
    )
    # Replies to the paused A2A task on one worker at once: one decides, the others get one answer.
    @example(
        Script(
            steps=[["sign"]],
            kill_at=0,
            door="a2a",
            rounds=[([("a2a", 0, "yes"), ("a2a", 0, "yes"), ("a2a", 0, "no")], False)],
            seed=5,
        )
    )
    def holds(script: Script) -> None:
        anyio.run(_example, fleet, script, a2a_shared)

    holds()
