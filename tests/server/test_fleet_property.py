"""Many workers, many doors, crashes: the promises hold (a property, through real processes).

Two worker processes (:mod:`tests.server.fleet_worker`) serve
:mod:`tests.server.fleet_agent` from one deployment's stores: one SQLite
file, or PostgreSQL sessions with Redis checkpoints and locks. Hypothesis
draws conversations (plans of reads, auto-tier and confirm-tier writes and
client tools), the door and worker of each turn, decisions posted at once
through random doors and workers (duplicates and conflicting ones among
them), cancellations, and a SIGKILL of a worker just before a random store
operation. The tools write the effect log themselves; the test judges by it:

- no confirm-tier write runs before its decision (the test logs
  ``approve-sent`` before it posts an approval);
- every write runs at most once;
- the auto-approved spend of a session (or of a direct caller's account,
  across examples) never exceeds its cap;
- every stream a client read to its end ends with exactly one terminal event;
- whatever happened, any live worker can continue the session: decide what
  waits, then a new turn that ends normally;
- no request is answered with a 5xx (nor, over A2A, a JSON-RPC internal error).

A killed worker is seen dead (its exit is waited on), then the test drops its
leases as a supervisor would and starts a replacement.

Three door sets, each on both backends: the session doors (REST, AI SDK,
AG-UI: turns, decisions, kills, cancels, a settling turn; A2A for turns:
such a conversation lives in the session of an A2A context, made by a first
task, and its plan is a second task); the engine's
direct calls (concurrent calls of the same tools by one calling engine, each
either a signed request to the ``/v1/engine`` route of a worker, maybe
replayed byte for byte to another worker, or ``Engine.tool_call`` in the test
process on the same stores as that same caller; decisions posted at once
through any of them, so a pause of one door is decided through another); and
the MCP server (two :mod:`tests.server.fleet_mcp` processes over streamable
HTTP sharing the request-state key, the approval nonces and the spend
ledger: concurrent tool calls, then each ``input_required`` round's
retries at once, approving and rejecting, maybe the same retry to both
servers, of which exactly one is judged). Not here yet: decisions as A2A
replies to an ``input-required`` task (on SQLite the task records live in
the worker's memory, so another worker does not know the task), and kills and
cancellations outside the session doors.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import anyio
import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.server.fleet_agent import SESSION_CAP_USD
from tests.server.fleet_doors import (
    DOORS,
    TURN_DOORS,
    Direct,
    Door,
    Kind,
    Seen,
    Signed,
    decide,
    direct,
    follow,
    mcp_call,
    mcp_retry,
    post_signed,
    send,
    send_a2a,
    signed,
)
from tests.server.test_workers import WorkerExited, _as_url, _lost_its_port, _wait_ready
from tests.stores.servers import RedisServer, free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
KEY = "fleet-key-0123456789abcdef"
EXAMPLES = int(os.environ.get("FLEET_EXAMPLES", "3"))
"""Per backend and door set (each a conversation on two real workers). Deeper:
``FLEET_EXAMPLES=20 pytest --timeout 1200 tests/server/test_fleet_property.py``."""
WORKERS = 2


@dataclass
class Worker:
    name: str
    process: subprocess.Popen[bytes]
    url: str
    log: IO[bytes]
    armed: bool = False


@dataclass
class Fleet:
    """The worker processes of one deployment, and what the test needs to run them."""

    folder: Path
    fields: dict[str, Any]
    locks_url: str
    effects: Path
    workers: list[Worker] = field(default_factory=list)
    started: int = 0

    def start(self) -> Worker:
        import json

        for attempt in range(3):
            self.started += 1
            name = f"w{self.started}"
            port = free_port()
            config = {**self.fields, "worker": name}
            env = {
                **os.environ,
                "MAINSPRING_SERVER_CONFIG": json.dumps(
                    {"agent": "tests.server.fleet_agent:agent", "config": config}
                ),
                "MAINSPRING_TEST_EFFECTS": str(self.effects),
                "FLEET_ARM_DIR": str(self.folder),
            }
            path = self.folder / f"{name}.log"
            log = path.open("wb")
            command = [sys.executable, "-m", "tests.server.fleet_worker", str(port)]
            process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=log)
            url = f"http://127.0.0.1:{port}"
            try:
                _wait_ready(url, process, path)
            except WorkerExited as exc:
                log.close()
                if attempt == 2 or not _lost_its_port(exc):
                    raise
                continue
            worker = Worker(name, process, url, log)
            self.workers.append(worker)
            return worker
        raise AssertionError("unreachable")

    def live(self) -> list[Worker]:
        return [w for w in self.workers if w.process.poll() is None]

    def arm(self, worker: Worker, operations: int) -> None:
        (self.folder / str(worker.process.pid)).write_text(str(operations))
        worker.process.send_signal(signal.SIGUSR1)
        worker.armed = operations > 0

    async def replace_dead(self, session_id: str) -> None:
        """Wait for armed workers that died, drop their leases, start replacements."""
        from mainspring.stores.urls import open_stores

        dead = [w for w in self.workers if w.process.poll() is not None]
        if not dead:
            return
        stores = await open_stores(locks=self.locks_url)
        try:
            assert stores.locks is not None
            for worker in dead:
                worker.process.wait(timeout=10)
                for key in (session_id, f"{session_id}#create"):
                    await stores.locks.release(key, worker.name)
        finally:
            await stores.aclose()
        for worker in dead:
            self.workers.remove(worker)
            worker.log.close()
            await anyio.to_thread.run_sync(self.start)

    def stop(self) -> None:
        for worker in self.workers:
            if worker.process.poll() is None:
                worker.process.send_signal(signal.SIGTERM)
        for worker in self.workers:
            try:
                worker.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                worker.process.kill()
                worker.process.wait(timeout=10)
            worker.log.close()


def _client() -> httpx.AsyncClient:
    return httpx.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}, timeout=60)


def _record(effects: Path, line: str) -> None:
    fd = os.open(effects, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


STEPS = st.one_of(
    st.just(["look"]),
    st.tuples(st.just("spend"), st.sampled_from([10, 30, 45, 60])).map(list),
    st.just(["sign"]),
    st.just(["wallet"]),
)
DECISIONS = st.lists(
    st.tuples(st.sampled_from(DOORS), st.integers(0, WORKERS - 1), st.sampled_from(["yes", "no"])),
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
    session_id: str = ""
    context: str = ""
    """The A2A context of the session (when its conversation went through A2A)."""
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
            await self.fleet.replace_dead(self.session_id)
            worker = self.pick()
            try:
                response = await self.client.get(
                    f"{worker.url}/v1/sessions/{self.session_id}/pending"
                )
            except httpx.TransportError:
                # Only a killed worker drops a loopback connection; its socket closes
                # before its exit can be waited on: wait on that, so it is replaced.
                await anyio.to_thread.run_sync(worker.process.wait, 30)
                continue
            assert response.status_code == 200, response.text
            pending: dict[str, Any] | None = response.json()["pending"]
            return pending
        raise AssertionError("no worker answered")

    def kind_of(self, pending: dict[str, Any], answer: str) -> Kind:
        if answer == "no":
            return "reject"
        return "client" if pending.get("client_executed") else "approve"

    async def decide_at_once(
        self, pending: dict[str, Any], posts: list[Post], cancel: bool
    ) -> None:
        """Post the drawn decisions on ``pending`` concurrently (and maybe a cancel)."""
        ref = str(pending["input"].get("ref", ""))
        live = self.fleet.live()
        if any(answer == "yes" for _, _, answer in posts):
            _record(self.fleet.effects, f"approve-sent {ref}")

        async def post(door: Door, index: int, answer: str) -> None:
            worker = live[index % len(live)]
            kind = self.kind_of(pending, answer)
            seen = await decide(self.client, worker.url, door, self.session_id, pending, kind)
            self.saw(seen)

        async def cancel_it() -> None:
            worker = live[0]
            try:
                response = await self.client.post(
                    f"{worker.url}/v1/sessions/{self.session_id}/cancel", json={}
                )
            except httpx.TransportError:
                return
            assert response.status_code < 500, response.text

        async with anyio.create_task_group() as tg:
            for door, index, answer in posts:
                tg.start_soon(post, door, index, answer)
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
                    _record(self.fleet.effects, f"approve-sent {pending['input'].get('ref')}")
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


ACCOUNTS = ("engine:", "mcp:")
"""Refs of writes whose auto spend one account keeps across examples (not a session's)."""


def _judge(effects: Path, seen: list[Seen], prefix: str) -> None:
    """The invariants, from the tools' own effect log and what the clients saw.

    The log holds every example's lines (an engine caller's and the MCP
    server's auto spend add up across them); what fails is said of this
    example's writes (refs starting with ``prefix``), so a failure is this
    example's, and hypothesis can shrink it.
    """
    approved: set[str] = set()
    runs: Counter[str] = Counter()
    auto: Counter[str] = Counter()
    lines = effects.read_text().splitlines() if effects.exists() else []
    for line in lines:
        kind, ref, *rest = line.split()
        session = ref.split(":")[0] if ref.startswith(ACCOUNTS) else ref.rsplit("-", 1)[0]
        ours = ref.startswith(prefix)
        if kind == "approve-sent":
            approved.add(ref)
        elif kind in ("sign", "spend"):
            runs[ref] += 1
            assert runs[ref] == 1 or not ours, f"the write {ref} ran twice"
            if kind == "sign":
                assert ref in approved or not ours, f"the write {ref} ran before its decision"
            elif ref not in approved:
                auto[session] += int(float(rest[0]))
                spent = auto[session]
                assert spent <= SESSION_CAP_USD or not ours, f"{session} spent ${spent} unasked"
    for one in seen:
        if one.streamed and one.status == 200 and one.ended:
            assert one.terminals == 1 and one.last_is_terminal, f"{one.url}: {one.kinds}"
        # No lease runs out here (they outlive the test) and only dead workers' are dropped:
        # a run that loses its lock was robbed by a live one.
        assert "lease_lost" not in one.last_data, f"{one.url}: {one.last_data}"


async def _create(run: Run) -> str:
    """A new session, through REST; an A2A turn's through an A2A context's first task."""
    import uuid

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


async def _example(fleet: Fleet, script: Script) -> None:
    async with _client() as client:
        run = Run(fleet, script, client)
        run.session_id = sid = await _create(run)
        plan = [[step[0], f"{sid}-{i}", *step[1:]] for i, step in enumerate(script.steps)]
        if script.kill_at:
            fleet.arm(run.pick(), script.kill_at)
        door = script.door
        import json

        text = "plan " + json.dumps(plan)
        if door == "a2a":  # a new task of the context the session was made in
            run.saw(await send_a2a(client, run.pick().url, run.context, text))
        else:
            run.saw(await send(client, run.pick().url, door, sid, text))
        for posts, cancel in script.rounds:
            pending = await run.pending()
            if pending is None:
                break
            await run.decide_at_once(pending, posts, cancel)
        for live_worker in fleet.live():
            if live_worker.armed:
                fleet.arm(live_worker, 0)
        await run.settle()
    _judge(fleet.effects, run.seen, sid)


# ------------------------------------------------- the signed engine route


ENGINE_CALLS = st.lists(
    st.tuples(
        st.sampled_from(["sign", "spend"]), st.sampled_from([10, 30, 45, 60]), st.integers(0, 9)
    ),
    min_size=1,
    max_size=4,
)
ENGINE_POSTS = st.lists(
    st.tuples(st.integers(0, 9), st.sampled_from(["yes", "no"]), st.booleans()),
    min_size=1,
    max_size=3,
)


@dataclass(frozen=True)
class EngineScript:
    """Direct calls of the engine's tools, each maybe replayed, and their decisions."""

    calls: list[tuple[str, int, int]]
    """(tool, amount, worker): posted at once."""
    replays: list[bool]
    """Per call: the same signed request sent again, to the next worker."""
    decisions: list[list[tuple[int, str, bool]]]
    """Per call that pauses: (worker, answer, replayed) posted at once."""


ENGINE_SCRIPTS = ENGINE_CALLS.flatmap(
    lambda calls: st.builds(
        EngineScript,
        calls=st.just(calls),
        replays=st.lists(st.booleans(), min_size=len(calls), max_size=len(calls)),
        decisions=st.lists(ENGINE_POSTS, min_size=len(calls), max_size=len(calls)),
    )
)


def _paused_calls(seen: list[Seen]) -> dict[int, tuple[str, str]]:
    """Per call index: (ref, attempt id) of the calls that answered ``pending``."""
    import json

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

    A call's or decision's worker index picks among the live workers and the
    in-process engine (the last target): a pause is decided through either.
    """

    fleet: Fleet
    key: Any
    script: EngineScript
    client: httpx.AsyncClient
    direct: Direct
    tag: str
    seen: list[Seen] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.live = self.fleet.live()

    def target(self, index: int) -> Worker | None:
        """A worker, or ``None``: the in-process engine."""
        index %= len(self.live) + 1
        return self.live[index] if index < len(self.live) else None

    def saw(self, one: Seen) -> None:
        assert one.status is None or one.status < 500, f"{one.url}: {one.status} {one.body}"
        self.seen.append(one)

    async def send(self, request: Signed, index: int) -> None:
        worker = self.target(index) or self.live[index % len(self.live)]
        self.saw(await post_signed(self.client, worker.url, request))

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

    async def post(self, request: Signed, attempt: str, index: int, approve: bool) -> None:
        if self.target(index) is None:
            self.saw(await self.direct.decide(attempt, approve))
        else:
            await self.send(request, index)

    async def decide(self, i: int, ref: str, attempt: str) -> None:
        posts = self.script.decisions[i]
        if any(answer == "yes" for _, answer, _ in posts):
            _record(self.fleet.effects, f"approve-sent {ref}")
        before = len(self.seen)
        async with anyio.create_task_group() as tg:
            for index, answer, replayed in posts:
                approve = answer == "yes"
                kind = {"kind": "approved", "edits": {}} if approve else {"kind": "rejected"}
                request = signed(self.key, f"/v1/engine/decisions/{attempt}", {"decision": kind})
                tg.start_soon(self.post, request, attempt, index, approve)
                if replayed:  # the same request again (through the next door)
                    tg.start_soon(self.post, request, attempt, index + 1, approve)
        answers = [one.status for one in self.seen[before:] if one.url.endswith(attempt)]
        # Whichever worker or door each decision reached, one of them decided the paused call.
        assert 200 in answers, f"no worker could decide {ref} ({attempt}): {answers}"


async def _engine_example(fleet: Fleet, key: Any, script: EngineScript) -> None:
    """Direct calls at once (signed to a worker, or in process), replays, decisions at once."""
    import uuid

    tag = uuid.uuid4().hex[:8]
    async with _client() as client, direct(fleet.fields, key.key_id) as door:
        run = EngineRun(fleet, key, script, client, door, tag)
        async with anyio.create_task_group() as tg:
            for i, (tool, amount, index) in enumerate(script.calls):
                tg.start_soon(run.call, i, tool, amount, index)
        paused = _paused_calls(run.seen)
        async with anyio.create_task_group() as tg:
            for i, (ref, attempt) in paused.items():
                tg.start_soon(run.decide, i, ref, attempt)
    _judge(fleet.effects, run.seen, f"engine:{tag}")


def _property(fleet: Fleet) -> None:
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
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
    def holds(script: Script) -> None:
        anyio.run(_example, fleet, script)

    holds()


def _engine_property(fleet: Fleet, key: Any) -> None:
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(script=ENGINE_SCRIPTS)
    # What each shared-state promise of the engine route needs, always tried first:
    @example(EngineScript([("spend", 10, 0)], [True], [[(0, "yes", False)]]))  # a replay
    @example(EngineScript([("sign", 0, 0)], [False], [[(1, "yes", False)]]))  # another worker
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
    def holds(script: EngineScript) -> None:
        anyio.run(_engine_example, fleet, key, script)

    holds()


# ------------------------------------------------------------- the MCP server


@dataclass
class McpServers:
    """MCP server processes (:mod:`tests.server.fleet_mcp`) on the fleet's stores."""

    urls: list[str] = field(default_factory=list)
    processes: list[subprocess.Popen[str]] = field(default_factory=list)

    def start(self, fleet: Fleet, key: str) -> None:
        import json

        stores = {k: fleet.fields.get(k) for k in ("store", "sessions", "checkpoints", "locks")}
        command = [sys.executable, "-m", "tests.server.fleet_mcp", json.dumps(stores), key]
        env = {**os.environ, "MAINSPRING_TEST_EFFECTS": str(fleet.effects)}
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        self.processes.append(process)
        assert process.stdout is not None
        line = process.stdout.readline()  # waits until it listens (or died: "")
        assert line.startswith("port "), f"MCP worker exited with {process.wait(timeout=30)}"
        self.urls.append(f"http://127.0.0.1:{int(line.split()[1])}/mcp")

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
            if process.stdout is not None:
                process.stdout.close()


async def _mcp_example(fleet: Fleet, servers: McpServers, script: EngineScript) -> None:
    """MCP tool calls at once over two servers; each approval round's retries at once.

    A call that needs a decision answers ``input_required`` (the 2026-07-28
    round trip); its retries (approve or reject, maybe the same retry again to
    the next server) go at once: one of them is judged, the others are refused
    as used. A tool call itself is never replayed: over MCP a repeated call is
    a new call (the calls' ``replays`` draws are unused here).
    """
    import uuid
    from contextlib import AsyncExitStack

    from mcp import Client

    tag = uuid.uuid4().hex[:8]
    paused: dict[int, tuple[str, dict[str, Any], str]] = {}
    async with AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(Client(url, mode="2026-07-28")) for url in servers.urls
        ]

        def on(index: int) -> Any:
            return clients[index % len(clients)].session

        async def call(i: int, tool: str, amount: int, index: int) -> None:
            arguments: dict[str, Any] = {"ref": f"mcp:{tag}-{i}"}
            if tool == "spend":
                arguments["amount_usd"] = amount
            state = await mcp_call(on(index), tool, arguments)
            if state is not None:
                paused[i] = (tool, arguments, state)

        async def decide(i: int, tool: str, arguments: dict[str, Any], state: str) -> None:
            posts = script.decisions[i]
            if any(answer == "yes" for _, answer, _ in posts):
                _record(fleet.effects, f"approve-sent {arguments['ref']}")
            answers: list[str] = []

            async def retry(index: int, approve: bool) -> None:
                answers.append(await mcp_retry(on(index), tool, arguments, state, approve))

            async with anyio.create_task_group() as tg:
                for index, answer, replayed in posts:
                    tg.start_soon(retry, index, answer == "yes")
                    if replayed:
                        tg.start_soon(retry, index + 1, answer == "yes")
            # Whichever server each retry reached, exactly one of them was judged.
            judged = [text for text in answers if "already used" not in text]
            assert len(judged) == 1, f"{arguments['ref']}: {answers}"

        async with anyio.create_task_group() as tg:
            for i, (tool, amount, index) in enumerate(script.calls):
                tg.start_soon(call, i, tool, amount, index)
        async with anyio.create_task_group() as tg:
            for i, (tool, arguments, state) in paused.items():
                tg.start_soon(decide, i, tool, arguments, state)
    _judge(fleet.effects, [], f"mcp:{tag}")


def _mcp_property(fleet: Fleet, servers: McpServers) -> None:
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(script=ENGINE_SCRIPTS)
    # An approved retry replayed to the other server; conflicting retries on both.
    @example(EngineScript([("sign", 0, 0)], [False], [[(0, "yes", True)]]))
    @example(EngineScript([("sign", 0, 1)], [False], [[(0, "yes", False), (1, "no", False)]]))
    def holds(script: EngineScript) -> None:
        anyio.run(_mcp_example, fleet, servers, script)

    holds()


def _run_fleet(tmp_path: Path, fields: dict[str, Any], locks_url: str, doors: str) -> None:
    import secrets

    from mainspring.engine.signing import SigningKey, public_key_text

    key = SigningKey.generate("fleet-peer")
    fields = {
        **fields,
        "api_keys": {KEY: "alice"},
        "signing_key": "cd" * 32,
        "lock_ttl": 3600,
        "engine": "tests.server.fleet_agent:engine",
        "engine_keys": {key.key_id: public_key_text(key.public_key)},
    }
    fleet = Fleet(tmp_path, fields, locks_url, tmp_path / "effects.log")
    servers = McpServers()
    try:
        if doors == "mcp":
            state_key = secrets.token_hex(32)
            for _ in range(WORKERS):
                servers.start(fleet, state_key)
            _mcp_property(fleet, servers)
            return
        for _ in range(WORKERS):
            fleet.start()
        if doors == "engine":
            with pytest.MonkeyPatch.context() as patch:  # the direct door's tools log here too
                patch.setenv("MAINSPRING_TEST_EFFECTS", str(fleet.effects))
                _engine_property(fleet, key)
        else:
            _property(fleet)
    finally:
        servers.stop()
        fleet.stop()


DOOR_SETS = ("sessions", "engine", "mcp")
"""The session doors (REST, AI SDK, AG-UI); the signed engine route with in-process
direct calls; the MCP server."""


@pytest.mark.parametrize("doors", DOOR_SETS)
def test_the_promises_hold_across_sqlite_workers(tmp_path: Path, doors: str) -> None:
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    _run_fleet(tmp_path, {"store": url}, url, doors)


@pytest.mark.parametrize("doors", DOOR_SETS)
def test_the_promises_hold_across_redis_and_postgresql_workers(
    tmp_path: Path, redis_server: RedisServer, postgres_url: str, doors: str
) -> None:
    fields = {
        "store": None,
        "sessions": _as_url(postgres_url),
        "checkpoints": redis_server.url,
        "locks": redis_server.url,
    }
    _run_fleet(tmp_path, fields, redis_server.url, doors)
