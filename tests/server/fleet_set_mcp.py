"""The MCP server in the fleet property test: two server processes, retries, kills, cancels.

Two :mod:`tests.server.fleet_mcp` processes over streamable HTTP share the
request-state key, the approval nonces and the spend ledger (the fleet's
stores). Concurrent tool calls go to either; a call that needs a decision
answers ``input_required`` (the 2026-07-28 round trip), and its retries
(approve or reject, maybe the same retry again to the other server) go at
once: one of them is judged, the others are refused as used. A tool call
itself is never replayed: over MCP a repeated call is a new call (the
scripts' ``replays`` draws are unused here).

Hypothesis also draws a SIGKILL of a server just before a random store
operation, and the cancellation of one request (a call or a retry) by its
client: the client gives up after a drawn number of its own event-loop
turns, so wherever that lands (before the request left, while the server
runs it, after), the invariants hold. Then the survivors continue (a dead
server is replaced at the next example), and every call whose outcome its
client never learned is called again (a new call) and approved on a live
server: it runs once.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import anyio
import anyio.lowlevel
from hypothesis import example, given

from tests.server.fleet import McpServer, McpServers, property_settings, record
from tests.server.fleet_doors import mcp_call, mcp_retry
from tests.server.fleet_judge import judge, runs_of
from tests.server.fleet_set_engine import ENGINE_SCRIPTS, EngineScript

GIVE_UP_TURNS = 40
"""Event-loop turns a client waits before it gives up on its request, times ``cancel_at``."""
USED = "already used"
"""What a retry whose approval was used already is told."""
NO_ANSWER = "(no answer)"


@dataclass
class McpRun:
    """One example over the MCP servers: where each request goes and what came back."""

    servers: McpServers
    script: EngineScript
    clients: list[Any]
    tag: str
    requests: int = 0
    """Requests sent so far (the ``cancel_at``-th is cancelled by its client)."""
    unknown: dict[int, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    """Calls whose outcome their client never learned (no answer), by index."""

    def on(self, index: int) -> Any:
        return self.clients[index % len(self.clients)].session

    async def ask(self, request: Callable[[], Awaitable[Any]]) -> Any:
        """Send one request; ``NO_ANSWER`` when its server died or its client gave up."""
        self.requests += 1
        cancel = self.requests == self.script.cancel_at
        answer: list[Any] = []
        try:
            async with anyio.create_task_group() as tg:

                async def run() -> None:
                    answer.append(await request())
                    tg.cancel_scope.cancel()  # answered: the client need not give up

                tg.start_soon(run)
                if cancel:  # the client gives up after its Nth turn of the event loop
                    for _ in range(GIVE_UP_TURNS * self.script.cancel_at):
                        await anyio.lowlevel.checkpoint()
                    tg.cancel_scope.cancel()
        except Exception as exc:  # (an ExceptionGroup of the request's errors)
            failed = exc.exceptions if isinstance(exc, ExceptionGroup) else (exc,)
            if any(isinstance(e, AssertionError) for e in failed):
                raise
            # Only a dead server leaves a request unanswered (the client can know no more).
            if not await self.servers.died(self.servers.armed()):
                raise AssertionError(f"a live MCP server failed a request: {exc!r}") from exc
        return answer[0] if answer else NO_ANSWER

    async def call(self, i: int, tool: str, amount: int, index: int) -> None:
        arguments: dict[str, Any] = {"ref": f"mcp:{self.tag}-{i}"}
        if tool == "spend":
            arguments["amount_usd"] = amount
        state = await self.ask(lambda: mcp_call(self.on(index), tool, arguments))
        if state == NO_ANSWER:
            self.unknown[i] = (tool, arguments)
        elif state is not None:
            await self.decide(i, tool, arguments, state)

    async def decide(self, i: int, tool: str, arguments: dict[str, Any], state: str) -> None:
        posts = self.script.decisions[i]
        if any(answer == "yes" for _, answer, _ in posts):
            record(self.servers.fleet.effects, f"approve-sent {arguments['ref']}")
        answers: list[str] = []

        async def retry(index: int, approve: bool) -> None:
            answers.append(
                await self.ask(lambda: mcp_retry(self.on(index), tool, arguments, state, approve))
            )

        async with anyio.create_task_group() as tg:
            for index, answer, replayed in posts:
                tg.start_soon(retry, index, answer == "yes")
                if replayed:
                    tg.start_soon(retry, index + 1, answer == "yes")
        # Whichever server each retry reached, exactly one of them was judged (of those
        # answered: a retry without an answer may have been judged, or not).
        judged = [text for text in answers if USED not in text and text != NO_ANSWER]
        if NO_ANSWER in answers:
            assert len(judged) <= 1, f"{arguments['ref']}: {answers}"
            if not judged:
                self.unknown[i] = (tool, arguments)
        else:
            assert len(judged) == 1, f"{arguments['ref']}: {answers}"

    async def resume(self, clients: list[Any]) -> None:
        """Every call whose outcome is unknown is called again (a new ref) and approved: once."""
        self.clients = clients
        for i, (tool, arguments) in self.unknown.items():
            again = {**arguments, "ref": f"{arguments['ref']}-again"}
            ref = str(again["ref"])
            state = await mcp_call(self.on(i), tool, again)
            if state is not None:
                record(self.servers.fleet.effects, f"approve-sent {ref}")
                text = await mcp_retry(self.on(i + 1), tool, again, state, approve=True)
                assert USED not in text, f"{ref}: {text}"
            assert runs_of(self.servers.fleet.effects, ref) == 1, f"{ref} did not run once"


async def _declines(context: object, params: object) -> Any:
    import mcp_types as mt

    return mt.ElicitResult(action="decline")


@asynccontextmanager
async def _connected(servers: McpServers) -> AsyncIterator[list[Any]]:
    """A client of each live server, each owned by a task of its own.

    A killed server's client fails in its own task (and that failure is
    dropped once the server's exit is waited on), not in the test's.
    """
    from mcp import Client

    done = anyio.Event()

    async def own(server: McpServer, *, task_status: Any) -> None:
        try:
            # Declares elicitation (the server asks only such a client); rounds are driven here.
            async with Client(
                server.url, mode="2026-07-28", elicitation_callback=_declines
            ) as connected:
                task_status.started(connected)
                await done.wait()
        except Exception:
            if not await servers.died(server):
                raise

    async with anyio.create_task_group() as tg:
        clients = [await tg.start(partial(own, server)) for server in servers.live()]
        try:
            yield clients
        finally:
            done.set()


async def _mcp_example(servers: McpServers, script: EngineScript) -> None:
    """MCP tool calls at once over two servers; each approval round's retries at once."""
    tag = uuid.uuid4().hex[:8]
    await servers.refill()
    async with _connected(servers) as clients:
        run = McpRun(servers, script, clients, tag)
        if script.kill_at:
            live = servers.live()
            servers.arm(live[script.kill_worker % len(live)], script.kill_at)
        async with anyio.create_task_group() as tg:
            for i, (tool, amount, index) in enumerate(script.calls):
                tg.start_soon(run.call, i, tool, amount, index)
        servers.disarm()
    servers.bury()
    async with _connected(servers) as clients:
        await run.resume(clients)
    judge(servers.fleet.effects, [], f"mcp:{tag}")


def mcp_property(servers: McpServers) -> None:
    """The MCP door set's property on ``servers``."""

    @property_settings(default=1)  # (after three explicit examples)
    @given(script=ENGINE_SCRIPTS)
    # An approved retry replayed to the other server; conflicting retries on both.
    @example(EngineScript([("sign", 0, 0)], [False], [[(0, "yes", True)]]))
    @example(EngineScript([("sign", 0, 1)], [False], [[(0, "yes", False), (1, "no", False)]]))
    # A server killed at its first store operation (a retry's nonce), a request
    # its client gave up on.
    @example(
        EngineScript(
            [("sign", 0, 0), ("sign", 0, 1)],
            [False] * 2,
            [[(0, "yes", True)], [(1, "yes", False)]],
            kill_at=1,
            cancel_at=3,
        )
    )
    def holds(script: EngineScript) -> None:
        anyio.run(_mcp_example, servers, script)

    holds()
