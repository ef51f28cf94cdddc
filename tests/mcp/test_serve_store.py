"""``mainspring mcp serve --http --store URL``: several servers behind one URL share the guards.

Two real ``mcp serve`` processes on one store (a SQLite file; or PostgreSQL
with ``$MAINSPRING_SIGNING_KEY`` shared) serve ``tests.mcp._store_agent``. The
tools log their own runs; the log is the judge.

- An approval round begun on one server is answered on the other (one sealing
  key for both), and the approved retry replayed to the first is refused.
- Concurrent $99 auto-tier calls across both against a $500 cap: five run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any

import anyio
import mcp_types as mt
import pytest

from mcp import Client
from tests.server.test_workers import _as_url

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
APPROVE = {"mainspring_approval": mt.ElicitResult(action="accept", content={"approve": True})}
CALLS = 20


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, str]]:
    """The ``--store`` URL, and the environment every server gets."""
    env = {k: v for k, v in os.environ.items() if k != "MAINSPRING_SIGNING_KEY"}
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'shared.db'}", env
    env["MAINSPRING_SIGNING_KEY"] = "5e" * 32  # PostgreSQL keeps no key: the operator shares one
    return _as_url(request.getfixturevalue("postgres_url")), env


def _url_of(process: subprocess.Popen[str], log: IO[str]) -> str:
    """Reads the server's stderr up to the line naming its URL (or its exit)."""
    assert process.stderr is not None
    for line in process.stderr:
        log.write(line)
        found = re.search(r"serving MCP at (http://127\.0\.0\.1:\d+/mcp)", line)
        if found:
            return found.group(1)
    raise AssertionError(f"mcp serve exited with {process.wait(timeout=30)}")


@pytest.fixture
def servers(
    store: tuple[str, dict[str, str]], tmp_path: Path
) -> Iterator[tuple[list[str], Path, str]]:
    url, env = store
    effects = tmp_path / "effects.txt"
    effects.touch()
    env = {**env, "MAINSPRING_TEST_EFFECTS": str(effects)}
    command = [sys.executable, "-m", "mainspring", "mcp", "serve", "tests.mcp._store_agent:agent"]
    command += ["--http", "--port", "0", "--expose-confirm", "--store", url]
    processes: list[subprocess.Popen[str]] = []
    urls: list[str] = []
    log = (tmp_path / "servers.log").open("w")
    try:
        for _ in range(2):
            process = subprocess.Popen(
                command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                text=True,
            )  # fmt: skip
            processes.append(process)
            urls.append(_url_of(process, log))
        log.flush()
        yield urls, effects, (tmp_path / "servers.log").read_text()
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
            if process.stderr is not None:
                process.stderr.close()
        log.close()


async def _unused(context: object, params: mt.ElicitRequestParams) -> mt.ElicitResult:
    """Declares elicitation (the server asks only such a client); the rounds are driven here."""
    return mt.ElicitResult(action="decline")


@asynccontextmanager
async def client(url: str) -> AsyncIterator[Client]:
    async with Client(url, mode="2026-07-28", elicitation_callback=_unused) as connected:
        yield connected


def text_of(result: Any) -> str:
    return "".join(c.text for c in result.content if isinstance(c, mt.TextContent))


async def test_an_approval_answered_on_either_server_runs_once(
    servers: tuple[list[str], Path, str],
) -> None:
    (a, b), effects, said = servers
    assert "approval signing key" in said or "MAINSPRING_SIGNING_KEY" in said
    args = {"account": "acme"}
    with anyio.fail_after(60):
        async with client(a) as on_a, client(b) as on_b:
            first = await on_a.session.call_tool("delete_account", args, allow_input_required=True)
            assert isinstance(first, mt.InputRequiredResult), first
            assert effects.read_text() == "", "nothing runs before the approval"
            ran = await on_b.session.call_tool(  # the approval reaches the other server
                "delete_account",
                args,
                input_responses=APPROVE,  # type: ignore[arg-type]  # the SDK's union
                request_state=first.request_state,
            )
            assert not ran.is_error and text_of(ran) == "deleted acme", ran
            replayed = await on_a.session.call_tool(  # the very same retry, recorded
                "delete_account",
                args,
                input_responses=APPROVE,  # type: ignore[arg-type]  # the SDK's union
                request_state=first.request_state,
            )
            assert replayed.is_error and "already used" in text_of(replayed)
    assert effects.read_text().splitlines() == ["deleted acme"]


async def test_concurrent_auto_approved_calls_across_servers_spend_at_most_the_cap(
    servers: tuple[list[str], Path, str],
) -> None:
    (a, b), effects, _ = servers
    args: dict[str, Any] = {"to": "bob", "amount_usd": 99}
    results: list[Any] = [None] * CALLS
    with anyio.fail_after(120):
        async with client(a) as on_a, client(b) as on_b:
            sessions = (on_a.session, on_b.session)

            async def call(i: int) -> None:
                results[i] = await sessions[i % 2].call_tool("pay", args, allow_input_required=True)

            async with anyio.create_task_group() as tg:
                for i in range(CALLS):
                    tg.start_soon(call, i)
    paid = effects.read_text().splitlines()
    assert paid == ["paid bob 99"] * 5, paid  # $495: five fit under $500, the sixth would not
    ran = [r for r in results if isinstance(r, mt.CallToolResult)]
    asked = [r for r in results if isinstance(r, mt.InputRequiredResult)]
    assert len(ran) == 5 and all(not r.is_error and "paid $99" in text_of(r) for r in ran)
    assert len(asked) == CALLS - 5  # the others ask for an approval, as a serial caller's would


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("redis://127.0.0.1:1", "redis:// holds checkpoints and locks, not sessions"),
        ("bogus://x", "unknown store URL 'bogus://x'"),
    ],
)
def test_a_store_that_cannot_keep_the_guards_is_refused_at_start(url: str, problem: str) -> None:
    command = [sys.executable, "-m", "mainspring", "mcp", "serve", "--http", "--port", "0"]
    done = subprocess.run(
        [*command, "--store", url], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()  # one line, naming the problem; nothing served
    assert line.startswith(f"error: {problem}"), done.stderr
