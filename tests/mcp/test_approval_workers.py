"""An approval round trip of the 2026-07-28 MCP server is used once across workers.

Two worker processes serve one MCP server (the same request-state key, one
shared store). The approved retry is recorded and replayed to the other
worker: it must be refused there, not run ``delete_account`` again. The tool
logs its own runs; the log is the judge.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import mcp_types as mt
import pytest

from mcp import Client

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
APPROVE = {"mainspring_approval": mt.ElicitResult(action="accept", content={"approve": True})}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["sqlite", "postgres", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'shared.db'}"
    if request.param == "redis":
        return str(request.getfixturevalue("redis_server").url)
    from tests.server.test_workers import _as_url

    return _as_url(request.getfixturevalue("postgres_url"))


@pytest.fixture
def workers(store_url: str, tmp_path: Path) -> Iterator[tuple[list[str], Path]]:
    effects = tmp_path / "effects.txt"
    effects.touch()
    key = secrets.token_hex(32)
    processes: list[subprocess.Popen[str]] = []
    urls: list[str] = []
    try:
        for _ in range(2):
            process = subprocess.Popen(
                [sys.executable, "-m", "tests.mcp._approval_worker", store_url, str(effects), key],
                cwd=ROOT,
                env=dict(os.environ),
                stdout=subprocess.PIPE,
                text=True,
            )
            processes.append(process)
            assert process.stdout is not None
            line = process.stdout.readline()  # waits until it listens (or died: "")
            assert line.startswith("port "), f"worker exited with {process.wait(timeout=30)}"
            urls.append(f"http://127.0.0.1:{int(line.split()[1])}/mcp")
        yield urls, effects
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
            if process.stdout is not None:
                process.stdout.close()


async def _unused(context: object, params: mt.ElicitRequestParams) -> mt.ElicitResult:
    """Declares elicitation (the server asks only such a client); the rounds are driven here."""
    return mt.ElicitResult(action="decline")


@asynccontextmanager
async def client(url: str) -> AsyncIterator[Client]:
    async with Client(url, mode="2026-07-28", elicitation_callback=_unused) as connected:
        yield connected


async def test_a_replayed_approval_retry_does_not_run_on_another_worker(
    workers: tuple[list[str], Path],
) -> None:
    (a, b), effects = workers
    with anyio.fail_after(60):
        async with client(a) as on_a, client(b) as on_b:
            first = await on_a.session.call_tool(
                "delete_account", {"account": "acme"}, allow_input_required=True
            )
            assert isinstance(first, mt.InputRequiredResult), first
            state = first.request_state
            ran = await on_a.session.call_tool(
                "delete_account",
                {"account": "acme"},
                input_responses=APPROVE,  # type: ignore[arg-type]  # the SDK's union
                request_state=state,
            )
            assert not ran.is_error, ran
            replayed = await on_b.session.call_tool(  # the very same retry, recorded
                "delete_account",
                {"account": "acme"},
                input_responses=APPROVE,  # type: ignore[arg-type]  # the SDK's union
                request_state=state,
            )
            assert replayed.is_error
            assert "already used" in "".join(
                c.text for c in replayed.content if isinstance(c, mt.TextContent)
            )
    assert effects.read_text().splitlines() == ["deleted acme"]
