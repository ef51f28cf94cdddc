"""The fleet of the property test: worker and MCP server processes on one deployment's stores.

:class:`Fleet` starts worker processes (:mod:`tests.server.fleet_worker`),
:class:`McpServers` MCP server processes (:mod:`tests.server.fleet_mcp`), all
on the same stores and writing the same effect log. Either can arm one of its
processes to SIGKILL itself before a given store operation
(:mod:`tests.server.fleet_switch`), wait on the exit of the processes that
died (the survivors go on), and start replacements at the next example.
Nothing here judges; the door sets do.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

import anyio
import httpx
from hypothesis import HealthCheck, settings

from tests.server.fleet_switch import arm
from tests.server.test_workers import WorkerExited, _lost_its_port, _wait_ready

ROOT = Path(__file__).resolve().parents[2]
KEY = "fleet-key-0123456789abcdef"
EXAMPLES = int(os.environ.get("FLEET_EXAMPLES", "0"))
"""Drawn examples per backend and door set, after the explicit ones (0: each set's
default, what CI runs). Deeper:
``FLEET_EXAMPLES=20 pytest --timeout 1200 tests/server/test_fleet_property.py``."""
WORKERS = 2
WAIT = 30.0
"""Seconds to wait for a killed process's exit (it is already dead: a bound, never a race)."""

F = TypeVar("F", bound=Callable[..., Any])


def property_settings(default: int) -> Callable[[F], F]:
    """Hypothesis settings of a door set: :data:`EXAMPLES` (else ``default``) drawn per backend.

    No deadline, no database: every run draws afresh.
    """
    chosen: Callable[[F], F] = settings(
        max_examples=EXAMPLES or default,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    return chosen


def client() -> httpx.AsyncClient:
    """An HTTP client with the fleet's API key."""
    return httpx.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}, timeout=60)


def record(effects: Path, line: str) -> None:
    """Append ``line`` to the effect log in one write (as the tools do)."""
    fd = os.open(effects, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


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
        from tests.stores.servers import free_port

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
        arm(self.folder, worker.process.pid, operations)
        worker.armed = operations > 0

    def disarm(self) -> None:
        """Disarm every live worker still armed (its switch never tripped)."""
        for worker in self.live():
            if worker.armed:
                self.arm(worker, 0)

    async def wait_for_the_killed(self) -> None:
        """A request went unanswered: the armed worker died; wait on its exit.

        Its socket closes before its exit can be waited on; only an armed worker
        may leave a request unanswered (a live one waited on for :data:`WAIT`
        seconds fails the test).
        """
        armed = [w for w in self.workers if w.armed]
        assert armed, "a request went unanswered, and no worker was armed to die"
        for worker in armed:
            try:
                await anyio.to_thread.run_sync(worker.process.wait, WAIT)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"worker {worker.name} left a request unanswered") from None

    async def bury(self, session_ids: Sequence[str] = ()) -> None:
        """Wait for workers that died, drop their leases of ``session_ids`` (as a supervisor).

        The survivors go on; :meth:`refill` starts replacements (at the next
        example: a replacement the last example would not use costs a start).
        """
        from mainspring.stores.urls import open_stores

        dead = [w for w in self.workers if w.process.poll() is not None]
        if not dead:
            return
        if session_ids:
            stores = await open_stores(locks=self.locks_url)
            try:
                assert stores.locks is not None
                for worker in dead:
                    worker.process.wait(timeout=WAIT)
                    for sid in session_ids:
                        for key in (sid, f"{sid}#create"):
                            await stores.locks.release(key, worker.name)
            finally:
                await stores.aclose()
        for worker in dead:
            worker.process.wait(timeout=WAIT)
            (self.folder / str(worker.process.pid)).unlink(missing_ok=True)  # (pids are reused)
            self.workers.remove(worker)
            worker.log.close()

    async def refill(self) -> None:
        """Bury the dead, then start workers until :data:`WORKERS` are live."""
        await self.bury()
        while len(self.live()) < WORKERS:
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


@dataclass
class McpServer:
    process: subprocess.Popen[str]
    url: str
    armed: bool = False


@dataclass
class McpServers:
    """MCP server processes (:mod:`tests.server.fleet_mcp`) on the fleet's stores.

    They share one request-state key (``state_key``), so a retry's state
    minted by one is read by any other, as behind one MCP URL.
    """

    fleet: Fleet
    state_key: str
    servers: list[McpServer] = field(default_factory=list)

    def start(self) -> McpServer:
        fleet = self.fleet
        stores = {k: fleet.fields.get(k) for k in ("store", "sessions", "checkpoints", "locks")}
        command = [
            sys.executable,
            "-m",
            "tests.server.fleet_mcp",
            json.dumps(stores),
            self.state_key,
        ]
        env = {
            **os.environ,
            "MAINSPRING_TEST_EFFECTS": str(fleet.effects),
            "FLEET_ARM_DIR": str(fleet.folder),
        }
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        assert process.stdout is not None
        line = process.stdout.readline()  # waits until it listens (or died: "")
        if not line.startswith("port "):
            process.stdout.close()
            raise AssertionError(f"MCP worker exited with {process.wait(timeout=WAIT)}")
        server = McpServer(process, f"http://127.0.0.1:{int(line.split()[1])}/mcp")
        self.servers.append(server)
        return server

    def live(self) -> list[McpServer]:
        return [s for s in self.servers if s.process.poll() is None]

    def arm(self, server: McpServer, operations: int) -> None:
        arm(self.fleet.folder, server.process.pid, operations)
        server.armed = operations > 0

    def disarm(self) -> None:
        """Disarm every live server still armed (its switch never tripped)."""
        for server in self.live():
            if server.armed:
                self.arm(server, 0)

    def armed(self) -> McpServer | None:
        """The server armed to die (the only one that may), if any."""
        return next((s for s in self.servers if s.armed), None)

    async def died(self, server: McpServer | None) -> bool:
        """Whether ``server`` (armed to die) did: its exit waited on, as a failure suggests.

        A failure its client saw is a dead server's only when that server
        exits (already dead: the wait is immediate); a live one is waited
        on for :data:`WAIT` seconds, then the failure stands.
        """
        if server is None or not server.armed:
            return False
        try:
            await anyio.to_thread.run_sync(server.process.wait, WAIT)
        except subprocess.TimeoutExpired:
            return False
        return True

    def bury(self) -> None:
        """Forget the servers that died (their exit waited on); the survivors go on."""
        for server in [s for s in self.servers if s.process.poll() is not None]:
            server.process.wait(timeout=WAIT)
            (self.fleet.folder / str(server.process.pid)).unlink(missing_ok=True)
            if server.process.stdout is not None:
                server.process.stdout.close()
            self.servers.remove(server)

    async def refill(self) -> None:
        """Bury the dead, then start servers until :data:`WORKERS` are live."""
        self.bury()
        while len(self.live()) < WORKERS:
            await anyio.to_thread.run_sync(self.start)

    def stop(self) -> None:
        for server in self.servers:
            if server.process.poll() is None:
                server.process.terminate()
        for server in self.servers:
            try:
                server.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.process.kill()
                server.process.wait(timeout=10)
            if server.process.stdout is not None:
                server.process.stdout.close()
