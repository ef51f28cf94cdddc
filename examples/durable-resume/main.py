"""Durable sessions: a run pauses for approval, the process exits, another one continues it.

Run it from the repository root (it runs its three steps as three processes):

    python examples/durable-resume/main.py

or run the steps yourself, each in a process of its own:

    python examples/durable-resume/main.py ask --db agent.db
    python examples/durable-resume/main.py approve --db agent.db --session ID
    python examples/durable-resume/main.py replay --db agent.db --session ID --stream ID
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import anyio

from mainspring import (
    Agent,
    Approve,
    Message,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    StreamStarted,
    ToolResult,
    tool,
)
from mainspring.models import ToolSpec
from mainspring.stores import Stores, open_stores


def paid_file(db: Path) -> Path:
    """Where the payment tool records each payment it really made (one line each)."""
    return db.with_suffix(".payments")


def make_agent(db: Path) -> Agent:
    """Every process builds the same agent: the session's state lives in the store."""

    @tool(permission="confirm")
    def pay(to: str, amount_usd: float) -> str:
        """Send money to someone."""
        with paid_file(db).open("a") as out:
            out.write(f"{to} {amount_usd:.2f}\n")
        return f"sent ${amount_usd:.2f} to {to}"

    def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse | str:
        if messages[-1].role == "tool":
            return "Done: Bob has his $5."
        return ScriptedResponse(tool_calls=[ScriptedCall("pay", {"to": "bob", "amount_usd": 5})])

    return Agent(model=ScriptedModel(answer), tools=[pay])


async def ask(db: Path) -> None:
    """Step 1: start a turn; it pauses on the payment and this process exits."""
    stores = await open_stores(f"sqlite:///{db}")
    session = Session(make_agent(db), **stores.session_kwargs())
    async for _ in session.send("Pay Bob $5"):
        pass
    assert session.pending is not None
    print(f"paused for approval of {session.pending.name} {session.pending.input}")
    print(f"session={session.session_id}")
    await stores.aclose()


async def load(db: Path, session_id: str) -> tuple[Stores, Session]:
    """The stored session, in this (new) process."""
    stores = await open_stores(f"sqlite:///{db}")
    assert stores.sessions is not None
    session = await Session.load(
        make_agent(db),
        stores.sessions,
        session_id,
        checkpoint_store=stores.checkpoints,
        run_lock=stores.locks,
    )
    return stores, session


async def approve(db: Path, session_id: str) -> None:
    """Step 2: a new process loads the session and approves the waiting payment."""
    stores, session = await load(db, session_id)
    if session.pending is None:  # decided already (here, or by another process)
        await stores.aclose()
        raise SystemExit(f"session {session_id} has nothing waiting for a decision")
    print(f"loaded; still waiting: {session.pending.name} {session.pending.input}")
    async for event in session.resume(session.pending.attempt_id, Approve()):
        if isinstance(event, StreamStarted):  # the id a client keeps to reconnect
            print(f"stream={event.stream_id}")
        elif isinstance(event, ToolResult):
            print(f"approved and ran: {event.content}")
    print(f"the model said: {session.messages[-1].text}")
    await stores.aclose()


async def replay(db: Path, session_id: str, stream_id: str) -> None:
    """Step 3: a reconnecting client replays that stream from its checkpoint log."""
    stores, session = await load(db, session_id)
    kinds = [event.type async for event in session.send(resume_stream_id=stream_id)]
    print(f"replayed {len(kinds)} events: {' '.join(kinds)}")
    await stores.aclose()


def step(*args: str) -> dict[str, str]:
    """Run this file as a child process; echo its output and return its key=value lines."""
    done = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, check=True, timeout=120
    )
    print(f"$ main.py {' '.join(args[:1])}\n{done.stdout}", end="")
    return dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)


def run_all() -> None:
    """The three steps, each in a process of its own, on one SQLite file."""
    with tempfile.TemporaryDirectory() as folder:
        db = str(Path(folder) / "agent.db")
        session_id = step("ask", "--db", db)["session"]
        stream_id = step("approve", "--db", db, "--session", session_id)["stream"]
        step("replay", "--db", db, "--session", session_id, "--stream", stream_id)
        paid = paid_file(Path(db)).read_text().splitlines()
        print(f"payments made across three processes: {paid} (the write ran once)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", nargs="?", choices=["ask", "approve", "replay"])
    parser.add_argument("--db", type=Path, default=Path("agent.db"))
    parser.add_argument("--session", default="")
    parser.add_argument("--stream", default="")
    args = parser.parse_args()
    if args.step == "ask":
        anyio.run(ask, args.db)
    elif args.step == "approve":
        anyio.run(approve, args.db, args.session)
    elif args.step == "replay":
        anyio.run(replay, args.db, args.session, args.stream)
    else:
        run_all()
