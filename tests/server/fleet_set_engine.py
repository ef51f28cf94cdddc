"""The engine's direct calls in the fleet property test: signed route, replays, in process.

One calling engine (one signing key) calls the fleet's engine tools at once,
each call either a signed request to the ``/v1/engine`` route of a worker,
maybe replayed byte for byte to another worker, or ``Engine.tool_call`` in
the test process on the same stores as that same caller (:class:`Direct`).
The decisions on the calls that paused go at once through any of them, so a
pause of one door is decided through another. Hypothesis also draws a
SIGKILL of a worker just before a random store operation, and the
cancellation of an in-process call or decision just before or just after a
random store operation of its own (its caller gave up there).

Then, whatever happened, the survivors continue: the worker that died is
seen dead (it is replaced at the next example), and every call still
paused (listed from the shared store) is approved through a random live
worker or in process; each such approval is answered, and its write runs
exactly once.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
from hypothesis import example, given
from hypothesis import strategies as st

from tests.server.fleet import WORKERS, Fleet, Worker, client, property_settings, record
from tests.server.fleet_doors import Direct, Seen, Signed, direct, post_signed, signed
from tests.server.fleet_judge import judge, runs_of

AMOUNTS = st.sampled_from([10, 30, 45, 60])
CALLS = st.lists(
    st.tuples(st.sampled_from(["sign", "spend"]), AMOUNTS, st.integers(0, 9)),
    min_size=1,
    max_size=4,
)
POSTS = st.lists(
    st.tuples(st.integers(0, 9), st.sampled_from(["yes", "no"]), st.booleans()),
    min_size=1,
    max_size=3,
)
KILL_AT = st.sampled_from([0, 0, 0, 1, 2, 3, 5, 8])
"""A worker's store operations from the first call on: a few per call or decision."""
CANCEL_AT = st.sampled_from([0, 0, 1, 2, 3, 4, 6])
"""The in-process door's store operations over its calls and decisions."""


@dataclass(frozen=True)
class EngineScript:
    """Direct calls of the engine's tools, each maybe replayed, their decisions, a kill, a cancel.

    The MCP set (:mod:`tests.server.fleet_set_mcp`) draws the same scripts.
    """

    calls: list[tuple[str, int, int]]
    """(tool, amount, target): posted at once."""
    replays: list[bool]
    """Per call: the same signed request sent again, to the next worker."""
    decisions: list[list[tuple[int, str, bool]]]
    """Per call that pauses: (target, answer, replayed) posted at once."""
    kill_at: int = 0
    """Kill worker ``kill_worker`` just before its Nth store operation (0: none)."""
    kill_worker: int = 0
    cancel_at: int = 0
    """Cancel the in-process request that makes its door's Nth store operation (0: none)."""
    cancel_after: bool = False
    """Cancel it just after that operation returns (else just before it)."""


ENGINE_SCRIPTS = CALLS.flatmap(
    lambda calls: st.builds(
        EngineScript,
        calls=st.just(calls),
        replays=st.lists(st.booleans(), min_size=len(calls), max_size=len(calls)),
        decisions=st.lists(POSTS, min_size=len(calls), max_size=len(calls)),
        kill_at=KILL_AT,
        kill_worker=st.integers(0, WORKERS - 1),
        cancel_at=CANCEL_AT,
        cancel_after=st.booleans(),
    )
)


def paused_calls(seen: list[Seen]) -> dict[int, tuple[str, str]]:
    """Per call index: (ref, attempt id) of the calls that answered ``pending``."""
    paused: dict[int, tuple[str, str]] = {}
    for one in seen:
        answer = json.loads(one.body) if one.status == 200 else {}
        if answer.get("status") == "pending":
            ref = str(answer["pending"]["input"]["ref"])
            paused[int(ref.rsplit("-", 1)[1])] = (ref, str(answer["pending"]["attempt_id"]))
    return paused


@dataclass
class EngineRun:
    """One example of the engine's direct calls: where each request goes, what came back.

    A call's or decision's target index picks among the live workers and the
    in-process engine (the last target): a pause is decided through either.
    """

    fleet: Fleet
    key: Any
    script: EngineScript
    client: httpx.AsyncClient
    direct: Direct
    tag: str
    seen: list[Seen] = field(default_factory=list)
    decided: dict[str, list[tuple[bool, Seen]]] = field(default_factory=dict)
    """Per paused call's ref: each decision sent (approve?) and its answer."""

    def __post_init__(self) -> None:
        self.live = self.fleet.live()

    def target(self, index: int) -> Worker | None:
        """A worker, or ``None``: the in-process engine."""
        index %= len(self.live) + 1
        return self.live[index] if index < len(self.live) else None

    def saw(self, one: Seen) -> Seen:
        assert one.status is None or one.status < 500, f"{one.url}: {one.status} {one.body}"
        self.seen.append(one)
        return one

    async def send(self, request: Signed, index: int) -> Seen:
        worker = self.target(index) or self.live[index % len(self.live)]
        return self.saw(await post_signed(self.client, worker.url, request))

    async def call(self, i: int, tool: str, amount: int, index: int) -> None:
        arguments: dict[str, Any] = {"ref": f"engine:{self.tag}-{i}"}
        if tool == "spend":
            arguments["amount_usd"] = amount
        if self.target(index) is None:  # a direct call (nothing to replay: a new call is new)
            self.saw(await self.direct.call(tool, arguments))
            return
        request = signed(self.key, f"/v1/engine/tools/{tool}/call", {"arguments": arguments})
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.send, request, index)
            if self.script.replays[i]:  # byte for byte, to the next worker
                tg.start_soon(self.send, request, index + 1)

    async def post(self, request: Signed, attempt: str, index: int, approve: bool) -> Seen:
        if self.target(index) is None:
            return self.saw(await self.direct.decide(attempt, approve))
        return await self.send(request, index)

    async def decide(self, i: int, ref: str, attempt: str) -> None:
        posts = self.script.decisions[i]
        if any(answer == "yes" for _, answer, _ in posts):
            record(self.fleet.effects, f"approve-sent {ref}")
        answers: list[Seen] = []
        self.decided[ref] = sent = []

        async def post(request: Signed, index: int, approve: bool) -> None:
            answers.append(answer := await self.post(request, attempt, index, approve))
            sent.append((approve, answer))

        async with anyio.create_task_group() as tg:
            for index, answer, replayed in posts:
                approve = answer == "yes"
                kind = {"kind": "approved", "edits": {}} if approve else {"kind": "rejected"}
                request = signed(self.key, f"/v1/engine/decisions/{attempt}", {"decision": kind})
                tg.start_soon(post, request, index, approve)
                if replayed:  # the same request again (through the next door)
                    tg.start_soon(post, request, index + 1, approve)
        statuses = [one.status for one in answers]
        # Whichever worker or door each decision reached, one of them decided the paused call
        # (unless one was killed or cancelled on the way: the survivors continue it then).
        assert 200 in statuses or None in statuses, f"nobody decided {ref} ({attempt}): {statuses}"

    async def resume(self) -> None:
        """The survivors continue: every call still paused is approved, and runs once."""
        await self.fleet.bury()
        self.live = self.fleet.live()
        waiting = [w for w in await self.direct.waiting() if w["ref"].startswith(self.prefix)]
        for n, paused in enumerate(waiting):
            ref, attempt = paused["ref"], paused["attempt_id"]
            record(self.fleet.effects, f"approve-sent {ref}")
            approval = {"decision": {"kind": "approved", "edits": {}}}
            request = signed(self.key, f"/v1/engine/decisions/{attempt}", approval)
            answer = await self.post(request, attempt, n, approve=True)
            assert answer.status == 200, f"no survivor could decide {ref}: {answer}"
            assert json.loads(answer.body)["ran"], f"{ref} approved did not run: {answer.body}"
            assert runs_of(self.fleet.effects, ref) == 1, f"{ref} approved did not run once"
        left = [w for w in await self.direct.waiting() if w["ref"].startswith(self.prefix)]
        assert not left, f"calls still paused after their approval: {left}"
        for ref, sent in self.decided.items():
            self.check_not_lost(ref, sent)

    def check_not_lost(self, ref: str, sent: list[tuple[bool, Seen]]) -> None:
        """A paused call ran, was rejected, or a killed worker took its decision with it.

        A decision cancelled by its caller before it applied leaves the call
        waiting (so the survivors ran it); only a worker's death may lose one.
        """
        if runs_of(self.fleet.effects, ref) == 1:
            return
        if any(answer.status == 200 and not approve for approve, answer in sent):
            return
        if any(answer.status is None and answer.body != "cancelled" for _, answer in sent):
            return
        raise AssertionError(f"{ref}: neither ran nor was rejected nor waits: {sent}")

    @property
    def prefix(self) -> str:
        return f"engine:{self.tag}"


async def _engine_example(fleet: Fleet, key: Any, script: EngineScript) -> None:
    """Direct calls at once (signed to a worker, or in process), replays, decisions at once."""
    tag = uuid.uuid4().hex[:8]
    await fleet.refill()
    async with client() as http, direct(fleet.fields, key.key_id) as door:
        run = EngineRun(fleet, key, script, http, door, tag)
        if script.kill_at:
            fleet.arm(run.live[script.kill_worker % len(run.live)], script.kill_at)
        door.arm(script.cancel_at, after=script.cancel_after)
        async with anyio.create_task_group() as tg:
            for i, (tool, amount, index) in enumerate(script.calls):
                tg.start_soon(run.call, i, tool, amount, index)
        async with anyio.create_task_group() as tg:
            for i, (ref, attempt) in paused_calls(run.seen).items():
                tg.start_soon(run.decide, i, ref, attempt)
        if any(one.status is None and one.body != "cancelled" for one in run.seen):
            await fleet.wait_for_the_killed()
        fleet.disarm()
        door.arm(0)
        await run.resume()
    judge(fleet.effects, run.seen, run.prefix)


def engine_property(fleet: Fleet, key: Any) -> None:
    """The engine door set's property on ``fleet``, calling as ``key``."""

    @property_settings(default=1)  # (after four explicit examples)
    @given(script=ENGINE_SCRIPTS)
    # What each shared-state promise of the engine route needs, always tried first:
    @example(EngineScript([("spend", 10, 0)], [True], [[(0, "yes", False)]]))  # a replay
    @example(
        EngineScript([("spend", 10, 0), ("spend", 10, 0)], [False] * 2, [[(0, "no", False)]] * 2)
    )
    # A call in process decided on a worker; a worker's pause decided in process and signed.
    @example(
        EngineScript(
            [("sign", 0, WORKERS), ("spend", 60, 0)],
            [False] * 2,
            [[(0, "yes", False)], [(WORKERS, "yes", True)]],
        )
    )
    # A call paused on a worker that is killed at its decision's store operation
    # (the other worker decides it), and an in-process decision cancelled just
    # after it took its call (which waits again: the survivors decide it).
    @example(
        EngineScript(
            [("sign", 0, 0), ("sign", 0, WORKERS)],
            [False] * 2,
            [[(0, "yes", False), (1, "yes", False)], [(WORKERS, "yes", False)]],
            kill_at=3,
            cancel_at=2,
            cancel_after=True,
        )
    )
    def holds(script: EngineScript) -> None:
        anyio.run(_engine_example, fleet, key, script)

    holds()
