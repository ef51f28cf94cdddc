"""Two worker processes on Redis + PostgreSQL: one dies mid-stream, the other finishes it.

The workers' leases (``--lock-ttl``) outlive the test, so a worker the machine
stalls never loses its run; once the test has seen worker A die (it waited on
its SIGKILL), it drops A's lease as a supervisor would (``release`` with A's
name, a no-op unless A still holds it), and B takes over at once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server.conftest import ALICE, KEYS, client_for, read_sse
from tests.stores.servers import RedisServer, free_port

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 60.0
LEASE = "3600"
"""Seconds a worker's run lease lasts: longer than any test, however slow the machine."""


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output = log.read_text(errors="replace")[-2000:]
            raise WorkerExited(f"worker exited with {process.returncode}:\n{output}")
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError("worker did not become ready")


class WorkerExited(RuntimeError):
    """A worker process ended before it was ready (its output is the message)."""


def _lost_its_port(error: WorkerExited) -> bool:
    """Whether another process took the free port between its pick and the bind."""
    text = str(error).lower()
    return "address already in use" in text or "errno 98" in text


def start_serve_worker(
    args: list[str],
    *,
    folder: Path,
    env: dict[str, str],
    processes: list[subprocess.Popen[bytes]],
    logs: list[Any],
) -> str:
    """Start ``mainspring serve <args>`` on a free port and wait until it is ready; its URL.

    The process joins ``processes`` and its log file ``logs`` (the caller stops
    and closes them). A port another process took between its pick and the bind
    is tried again, twice at most.
    """
    for attempt in range(3):
        port = free_port()
        command = [sys.executable, "-m", "mainspring", "serve", *args, "--port", str(port)]
        path = folder / f"worker-{port}.log"
        log = path.open("wb")
        logs.append(log)
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        processes.append(process)
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_ready(url, process, path)
        except WorkerExited as exc:
            processes.remove(process)
            if attempt == 2 or not _lost_its_port(exc):
                raise
            continue
        return url
    raise AssertionError("unreachable")  # (the last attempt returns or raises)


@pytest.fixture
def workers(
    redis_server: RedisServer, postgres_url: str, tmp_path: Path
) -> Iterator[tuple[list[str], list[subprocess.Popen[bytes]], Path, Path]]:
    ledger, gate = tmp_path / "ledger.txt", tmp_path / "gate"
    env = {
        **os.environ,
        "MAINSPRING_API_KEYS": ",".join(f"{who}={key}" for key, who in KEYS.items()),
        "MAINSPRING_SIGNING_KEY": "ab" * 32,
        "MAINSPRING_TEST_LEDGER": str(ledger),
        "MAINSPRING_TEST_GATE": str(gate),
    }
    processes: list[subprocess.Popen[bytes]] = []
    urls: list[str] = []
    logs: list[Any] = []

    def start() -> None:
        args = [
            "tests.server.worker_agent:agent", "--sessions", _as_url(postgres_url),
            "--checkpoints", redis_server.url, "--locks", redis_server.url, "--lock-ttl", LEASE,
        ]  # fmt: skip
        urls.append(
            start_serve_worker(args, folder=tmp_path, env=env, processes=processes, logs=logs)
        )

    try:
        for _ in range(2):
            start()
        yield urls, processes, ledger, gate
    finally:
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        for log in logs:
            log.close()


def _as_url(conninfo: str) -> str:
    """A libpq ``key=value`` string as a ``postgresql://`` URL (what store URLs take)."""
    import shlex
    from urllib.parse import quote, urlencode

    params = dict(part.split("=", 1) for part in shlex.split(conninfo))
    dbname = params.pop("dbname", "postgres")
    return f"postgresql:///{dbname}?{urlencode(params, quote_via=quote)}"


async def release_dead_worker(locks_url: str, session_id: str) -> None:
    """Drop the session's lease, held by a worker this test saw die."""
    from mainspring.stores.urls import open_stores

    stores = await open_stores(locks=locks_url)
    try:
        assert stores.locks is not None
        owner = await stores.locks.holder(session_id)
        assert owner is not None  # the dead worker's run still held it
        await stores.locks.release(session_id, owner)
    finally:
        await stores.aclose()


async def test_a_worker_killed_mid_stream_the_client_finishes_on_the_other(
    workers: tuple[list[str], list[subprocess.Popen[bytes]], Path, Path],
    redis_server: RedisServer,
) -> None:
    (a, b), (process_a, _), ledger, gate = workers
    async with client_for(a, ALICE) as on_a, client_for(b, ALICE) as on_b:
        sid = (await on_a.post("/v1/sessions")).json()["session_id"]
        paused = await read_sse(
            on_a, "POST", f"/v1/sessions/{sid}/messages", json_body={"message": "pay bo"}
        )
        pending = next(f for f in paused if f.event == "pending_action").data
        # The decision, posted to A, on a stream that A will not finish.
        url = f"/v1/sessions/{sid}/decisions/{pending['approval_id']}"
        seen = [frame async for frame in _frames_until_result(on_a, url)]
        assert seen[-1].event == "tool_result"
        process_a.send_signal(signal.SIGKILL)
        process_a.wait(timeout=10)
        await release_dead_worker(redis_server.url, sid)
        gate.touch()
        # The client reconnects to B with the last id it saw.
        rest = await read_sse(
            on_b,
            "GET",
            f"/v1/sessions/{sid}/stream",
            headers={"Last-Event-ID": seen[-1].id},
        )
        ids = [f.id for f in seen + rest]
        assert len(ids) == len(set(ids))  # nothing repeated
        positions = [int(i.rpartition(":")[2]) for i in ids]
        assert positions == list(range(len(positions)))  # nothing lost
        assert rest[-1].event == "turn_complete"  # a terminal, synthesized by B
        # The session carries on, on B; the decision cannot be replayed.
        again = await on_b.post(url, json={"decision": "approve"})
        assert again.status_code == 409
        more = await read_sse(
            on_b, "POST", f"/v1/sessions/{sid}/messages", json_body={"message": "hi"}
        )
        assert more[-1].event == "turn_complete" and more[-1].data["stop_reason"] == "end_turn"
    assert ledger.read_text().splitlines() == ["bo 5.0"]  # the write ran once


async def _frames_until_result(client: httpx.AsyncClient, url: str) -> Any:
    import json

    from httpx_sse import aconnect_sse

    from tests.server.conftest import Frame

    async with aconnect_sse(client, "POST", url, json={"decision": "approve"}) as source:
        assert source.response.status_code == 200
        async for sse in source.aiter_sse():
            frame = Frame(sse.id, sse.event, json.loads(sse.data))
            yield frame
            if frame.event == "tool_result":
                return


async def test_a_shutdown_ends_a_running_stream_with_a_terminal_a_reconnect_finds(
    workers: tuple[list[str], list[subprocess.Popen[bytes]], Path, Path],
) -> None:
    (a, b), (process_a, _), ledger, _ = workers
    async with client_for(a, ALICE) as on_a, client_for(b, ALICE) as on_b:
        sid = (await on_a.post("/v1/sessions")).json()["session_id"]
        paused = await read_sse(
            on_a, "POST", f"/v1/sessions/{sid}/messages", json_body={"message": "pay bo"}
        )
        pending = next(f for f in paused if f.event == "pending_action").data
        url = f"/v1/sessions/{sid}/decisions/{pending['approval_id']}"
        seen = [frame async for frame in _frames_until_result(on_a, url)]
        process_a.send_signal(signal.SIGTERM)  # the model waits at the gate: mid-stream
        # uvicorn shuts down gracefully, then re-raises the signal it caught.
        assert process_a.wait(timeout=30) in (0, -signal.SIGTERM)
        rest = await read_sse(
            on_b, "GET", f"/v1/sessions/{sid}/stream", headers={"Last-Event-ID": seen[-1].id}
        )
    assert [f.event for f in rest] == ["turn_complete"]
    assert rest[0].data["stop_reason"] == "cancelled"  # recorded by A as it stopped
    assert ledger.read_text().splitlines() == ["bo 5.0"]
