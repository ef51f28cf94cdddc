"""One worker process of ``tests/test_subagents_workers.py``: a host whose subagent pays.

``python -m tests.subagent_worker COMMAND PRINCIPAL [ARGS] --sessions URL --locks URL``

- ``pause TASK``: run the host as ``user:PRINCIPAL`` on ``TASK`` (``"<to> <cents>"``);
  its subagent pauses on ``pay``. Prints ``{"attempt_id": …}``, then waits to be killed.
- ``pending``: prints the attempt ids of the principal's paused subagent runs.
- ``decide ATTEMPT DECISION``: ``approve``, ``reject``, or ``edit-to`` (an edit of a
  field the tool does not allow). Prints ``{"outcome": "ran"|"unknown"|"refused", …}``.

The paused runs wait in the deployment's shared records (the run lock's when it
has them, Redis here; else the session store's). ``pay`` appends one line per
run to ``$MAINSPRING_TEST_EFFECTS`` itself.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

import anyio

from mainspring import Agent, ScriptedCall, ScriptedModel, ScriptedResponse, Session, tool
from mainspring.decisions import Approve, Decision, Reject
from mainspring.errors import ApprovalError, UnknownAttempt
from mainspring.messages import Message
from mainspring.models.base import ToolSpec
from mainspring.principals import Caller
from mainspring.stores.records import shared_records
from mainspring.stores.urls import open_stores
from mainspring.subagents import SubagentHandle
from mainspring.tools.context import RunScope, run_scope


@tool(permission="confirm", modifiable_fields=("cents",))
def pay(to: str, cents: int) -> str:
    """Pay someone (needs the caller's decision)."""
    with open(os.environ["MAINSPRING_TEST_EFFECTS"], "a", encoding="utf-8") as out:
        out.write(f"pay {to} {cents}\n")
    return f"paid {cents} to {to}"


def _payer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
    last = messages[-1]
    tasks = [m.text for m in messages if m.role == "user"]
    if last.role == "tool":
        return ScriptedResponse(text=f"{last.tool_results_parts[0].content}; tasks {tasks}")
    to, cents = last.text.split()
    return ScriptedResponse(tool_calls=[ScriptedCall("pay", {"to": to, "cents": int(cents)})])


def _host(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
    last = messages[-1]
    if last.role == "tool":
        return ScriptedResponse(text="waiting for the payer")
    return ScriptedResponse(tool_calls=[ScriptedCall("payer", {"task": last.text})])


def _say(answer: object) -> None:
    """One JSON line to the test, at once."""
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()


DECISIONS: dict[str, Decision] = {
    "approve": Approve(),
    "reject": Reject("no"),
    "edit-to": Approve(edits={"to": "eve"}),
}


async def main(args: argparse.Namespace) -> None:
    stores = await open_stores(sessions=args.sessions, locks=args.locks)
    records = shared_records(stores.locks, stores.sessions)
    assert records is not None
    payer = Agent(model=ScriptedModel(_payer, name="payer"), name="payer", tools=[pay])
    handle = SubagentHandle(payer, description="Pays people.", records=records)
    caller = Caller(args.principal, kind="user")
    try:
        if args.command == "pause":
            host = Session(Agent(model=ScriptedModel(_host, name="host"), tools=[handle.tool]))
            with run_scope(RunScope(caller=caller)):
                async for _ in host.send(args.rest[0]):
                    pass
            (pending,) = await handle.pending(caller=caller)
            _say({"attempt_id": pending.attempt_id})
            await anyio.sleep_forever()  # the test kills this worker now
        elif args.command == "pending":
            found = await handle.pending(caller=caller)
            _say([p.attempt_id for p in found])
        else:
            attempt_id, decision = args.rest
            try:
                result = await handle.resume(attempt_id, DECISIONS[decision], caller=caller)
            except UnknownAttempt:
                _say({"outcome": "unknown"})
            except ApprovalError as exc:
                _say({"outcome": "refused", "error": str(exc)})
            else:
                _say({"outcome": "ran", "text": result.text})
    finally:
        await stores.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["pause", "pending", "decide"])
    parser.add_argument("principal")
    parser.add_argument("rest", nargs="*")
    parser.add_argument("--sessions", required=True)
    parser.add_argument("--locks", required=True)
    anyio.run(main, parser.parse_args())
