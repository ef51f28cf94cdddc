"""Group commit: N concurrent conversations, each making one write, on one SQLite file.

Run by hand from the repository root (it is not a pytest test)::

    python bench/group_commit.py [--n 1,50,200] [--rounds 3] [--src OTHER/src]

Each conversation is a fresh ``Session`` with the README's durable recipe
(``open_stores("sqlite:///…").session_kwargs()``: session store, checkpoints,
run lock) and one turn: the model calls an auto-tier write tool, then
answers. The write's ledger entry goes on disk (fsynced) before the write
runs, so every conversation makes at least one fsynced commit. N of them start
at once (``asyncio.gather``), as a server's concurrent requests do.

With ``--approve`` the write is confirm-tier: N conversations pause on it
first (not timed), then N approvals arrive at once (``resume`` each), as a
server's users approving do. Each approval claims its decision (fsynced) and
records the write's ledger entry (fsynced) before the write runs.

Printed: wall milliseconds for all N, per conversation, and the number of
fsynced transactions (``PRAGMA synchronous=FULL`` switches seen by the
connection). With ``--src`` the same runs go first through another checkout's
``src`` (a baseline measured in the same invocation, in its own process),
and the ratio is printed. One process per (source, N, round); the file is fresh
each time. The disk decides the absolute figures: an fsync costs a few
microseconds on tmpfs and milliseconds on a real disk.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

RUNNER = r"""
import asyncio, json, sys, time
if SRC:
    sys.path.insert(0, SRC)
from mainspring import Agent, ScriptedCall, ScriptedResponse, ScriptedModel, Session
from mainspring import Approve, PendingAction, TurnComplete, tool
from mainspring.stores.urls import open_stores

@tool(permission="confirm" if APPROVE else "auto")
async def note(text: str) -> str:
    "Write a note (an auto-tier write: its ledger entry is fsynced before it runs)."
    return "noted"

def script(messages, tools):
    if messages[-1].role == "user":
        return ScriptedResponse(tool_calls=[ScriptedCall("note", {"text": "hi"})])
    return "done"

async def main():
    stores = await open_stores(f"sqlite:///{PATH}")
    synced = []
    stores.sessions._db._conn.set_trace_callback(
        lambda sql: synced.append(1) if sql == "PRAGMA synchronous=FULL" else None)
    agent = Agent(model=ScriptedModel(script), tools=[note])
    kwargs = stores.session_kwargs()

    async def one():
        async for event in Session(agent, **kwargs).send("note it"):
            last = event
        assert isinstance(last, TurnComplete), last

    async def paused():
        session = Session(agent, **kwargs)
        async for event in session.send("note it"):
            if isinstance(event, PendingAction):
                pending = event
        return session, pending.attempt_id

    async def approve(session, attempt_id):
        async for event in session.resume(attempt_id, Approve()):
            last = event
        assert isinstance(last, TurnComplete), last

    if APPROVE:
        await approve(*await paused())  # warm: imports, the first statements
        waiting = [await paused() for _ in range(N)]
        synced.clear()
        t = time.perf_counter()
        await asyncio.gather(*(approve(*w) for w in waiting))
    else:
        await one()  # warm: imports, the first statements
        synced.clear()
        t = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(N)))
    wall = time.perf_counter() - t
    await stores.aclose()
    print(json.dumps({"wall": wall, "synced": len(synced)}))

asyncio.run(main())
"""


def run(src: str, n: int, approve: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory(dir=os.environ.get("GROUP_COMMIT_DIR")) as tmp:
        path = str(Path(tmp) / "g.db")
        code = f"SRC = {src!r}\nN = {n}\nAPPROVE = {approve}\nPATH = {path!r}\n" + RUNNER
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=600
        )
        if out.returncode:
            raise SystemExit(out.stderr[-3000:])
        result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
        return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", default="1,50,200")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--src", default="", help="a baseline checkout's src")
    parser.add_argument("--approve", action="store_true", help="time N concurrent approvals")
    args = parser.parse_args()
    here = str(Path(__file__).resolve().parents[1] / "src")
    sources = [("baseline", args.src)] if args.src else []
    sources.append(("this", here))
    print(f"disk of the files: {os.environ.get('GROUP_COMMIT_DIR') or tempfile.gettempdir()}")
    for n in (int(x) for x in args.n.split(",")):
        best: dict[str, dict[str, float]] = {}
        for _ in range(args.rounds):
            for label, src in sources:  # interleaved: drift hits both alike
                r = run(src, n, args.approve)
                if label not in best or r["wall"] < best[label]["wall"]:
                    best[label] = r
        line = f"N={n:5d}"
        for label, r in best.items():
            line += (
                f"  {label}: {r['wall'] * 1e3:8.1f} ms ({r['wall'] * 1e6 / n:7.0f} us/conv,"
                f" {int(r['synced']):4d} fsynced commits)"
            )
        if "baseline" in best:
            line += f"  x{best['baseline']['wall'] / best['this']['wall']:.2f} faster"
        print(line)


if __name__ == "__main__":
    main()
