"""A follower's poll of a long stream: the whole log read and sliced, against ``load_after``.

    python bench/follow_poll.py                       # memory and SQLite, N = 100, 1,000, 10,000
    python bench/follow_poll.py --n 100,1000 --backends sqlite
    python bench/follow_poll.py --redis-url redis://127.0.0.1:6379/0   # Redis too
    python bench/follow_poll.py --wall                # CPU time, without valgrind

A stream holds N events (appended in batches of 5, as a run's step boundaries
are); a follower that has seen them all polls it, as ``_run/follow.py`` does
between two appends of a run going on elsewhere. Each poll is one of:

- ``load``: the follower before ``load_after``: ``(await store.load(s))[seen - 1:]``;
- ``load_after``: ``await load_after(store, s, seen - 1)`` (the last event seen
  and the new ones: the follower reads one back to tell a cleared log).

Printed: instructions per poll (valgrind's count, load-independent), or with
``--wall`` CPU microseconds per poll. Each cell runs in a fresh process under
``valgrind --tool=callgrind``: after a warm-up, ``FEW`` polls then ``MANY``,
between markers at which callgrind writes its count (as
``peers/instructions.py`` does); a poll costs ``(many - few) / (MANY - FEW)``.
The whole-log poll grows with N; ``load_after``'s stays flat.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FEW, MANY = 3, 13
BATCH = 5

RUNNER = """
import asyncio, os, sys, tempfile, time
sys.path.insert(0, {src!r})
from mainspring.events import TextDelta
from mainspring.stores import load_after

async def open_store(backend, tmp):
    if backend == "memory":
        from mainspring.stores import InMemoryCheckpointStore
        return InMemoryCheckpointStore()
    if backend == "sqlite":
        from mainspring.stores import SQLiteCheckpointStore
        return await SQLiteCheckpointStore.open(os.path.join(tmp, "bench.db"))
    from mainspring.stores.redis import RedisCheckpointStore
    return await RedisCheckpointStore.open({redis!r}, prefix=f"bench-{{os.getpid()}}:")

async def main(backend, mode, n, few, many, wall):
    with tempfile.TemporaryDirectory() as tmp:
        store = await open_store(backend, tmp)
        for i in range(0, n, {batch}):
            last = min(n, i + {batch})
            batch = [TextDelta(text=f"event {{j}} of the stream") for j in range(i, last)]
            await store.append_many("s", batch)
        seen = n
        async def poll():
            if mode == "load":
                got = (await store.load("s"))[seen - 1:]
            else:
                got = await load_after(store, "s", seen - 1)
            assert len(got) == 1, len(got)
        for _ in range(3):
            await poll()
        os.getppid()
        start = time.process_time()
        for _ in range(few):
            await poll()
        os.getppid()
        for _ in range(many):
            await poll()
        os.getppid()
        if wall:
            print((time.process_time() - start) / (few + many) * 1e6)
        await store.clear("s")
        await store.aclose()

backend, mode, n, few, many, wall = sys.argv[1:7]
asyncio.run(main(backend, mode, int(n), int(few), int(many), wall == "1"))
"""


def per_poll(backend: str, mode: str, n: int, *, src: str, redis: str, wall: bool) -> float:
    """Instructions (or CPU microseconds with ``wall``) of one poll of ``n`` events."""
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "runner.py"
        script.write_text(RUNNER.format(src=src, redis=redis, batch=BATCH))
        args = [sys.executable, str(script), backend, mode, str(n), str(FEW), str(MANY)]
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        if wall:
            done = subprocess.run(
                [*args, "1"], capture_output=True, text=True, check=False, env=env, timeout=600
            )
            if done.returncode != 0:
                raise SystemExit(f"{backend} {mode} {n} failed:\n{done.stderr[-2000:]}")
            return float(done.stdout.strip())
        out = Path(tmp) / "cg.out"
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--dump-before=os_getppid",
                f"--callgrind-out-file={out}",
                *args,
                "0",
            ],
            capture_output=True,
            text=True,
            check=False,
            env=env,
            timeout=3600,
        )
        parts = []
        for dump in (Path(f"{out}.2"), Path(f"{out}.3")):  # .1: before the first marker
            found = re.search(r"^summary: (\d+)", dump.read_text() if dump.exists() else "", re.M)
            parts.append(int(found.group(1)) if found else -1)
        if done.returncode != 0 or min(parts) < 0:
            raise SystemExit(f"{backend} {mode} {n} failed:\n{done.stderr[-2000:]}")
        return (parts[1] - parts[0]) / (MANY - FEW)


def main() -> None:
    """Print the table: backends by N, a poll by ``load`` and by ``load_after``."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--n", default="100,1000,10000", help="stream lengths, comma-separated")
    parser.add_argument("--backends", default="memory,sqlite", help="memory, sqlite, redis")
    parser.add_argument("--redis-url", default="", help="a Redis server (adds the redis backend)")
    parser.add_argument("--src", default=str(ROOT / "src"), help="the checkout's src to measure")
    parser.add_argument("--wall", action="store_true", help="CPU time instead of valgrind")
    args = parser.parse_args()
    if not args.wall and shutil.which("valgrind") is None:
        raise SystemExit("needs valgrind (apt-get install valgrind), or pass --wall")
    backends = args.backends.split(",")
    if args.redis_url and "redis" not in backends:
        backends.append("redis")
    unit = "CPU µs" if args.wall else "instructions"
    print(f"| backend | N | poll by load ({unit}) | poll by load_after ({unit}) | ratio |")
    print("|---|---:|---:|---:|---:|")
    for backend in backends:
        for n in (int(x) for x in args.n.split(",")):
            t0 = time.monotonic()
            cells = [
                per_poll(backend, mode, n, src=args.src, redis=args.redis_url, wall=args.wall)
                for mode in ("load", "load_after")
            ]
            print(
                f"| {backend} | {n:,} | {cells[0]:,.0f} | {cells[1]:,.0f} |"
                f" {cells[0] / cells[1]:,.1f}x |",
                flush=True,
            )
            print(f"  ({time.monotonic() - t0:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
