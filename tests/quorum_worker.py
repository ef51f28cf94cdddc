"""One worker process of ``tests/test_approval_quorum.py``: pays once two others approve.

``python -m tests.quorum_worker COMMAND SESSION [ARGS] --sessions URL --locks URL``

- ``pause``: start session ``SESSION`` as the principal ``requester`` and run it
  until it pauses on ``pay`` (which needs 2 approving principals, not the
  requester). Prints ``{"attempt_id": …}``.
- ``approve ATTEMPT PRINCIPAL``: load the session, print ``"ready"``, wait for a
  line on stdin (so two workers start their approvals together), then approve
  as ``PRINCIPAL``. Prints ``{"outcome": "added"|"ran"|"refused", …}``.

``pay`` appends one line per run to ``$MAINSPRING_TEST_EFFECTS``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

import anyio

from mainspring import (
    Agent,
    ApprovalAdded,
    ApprovalError,
    ApprovalPolicy,
    ApprovalRule,
    Approve,
    PendingAction,
    PermissionRules,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    ToolResult,
    tool,
)
from mainspring.messages import Message
from mainspring.models.base import ToolSpec
from mainspring.state import SessionState
from mainspring.stores.urls import open_stores
from mainspring.testing import collect


@tool(permission="confirm")
def pay(to: str, cents: int) -> str:
    """Pay someone (needs two approvals)."""
    with open(os.environ["MAINSPRING_TEST_EFFECTS"], "a", encoding="utf-8") as out:
        out.write(f"pay {to} {cents}\n")
    return f"paid {cents} to {to}"


def _payer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
    if messages[-1].role == "tool":
        return ScriptedResponse(text="done")
    return ScriptedResponse(tool_calls=[ScriptedCall("pay", {"to": "mallory", "cents": 9900})])


def payer() -> Agent:
    """The agent every worker serves: ``pay`` needs 2 of n, never the requester."""
    rule = ApprovalRule(quorum=2, allow_self_approval=False)
    return Agent(
        model=ScriptedModel(_payer),
        tools=[pay],
        permissions=PermissionRules(approvals=ApprovalPolicy(tools={"pay": rule}), version="v7"),
    )


def _say(answer: object) -> None:
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()


async def main(args: argparse.Namespace) -> None:
    stores = await open_stores(sessions=args.sessions, locks=args.locks)
    assert stores.sessions is not None
    try:
        if args.command == "pause":
            state = SessionState(session_id=args.session, agent_name="agent", principal="requester")
            session = Session(payer(), state=state, **stores.session_kwargs())
            async for event in session.send("pay mallory"):
                if isinstance(event, PendingAction):
                    _say({"attempt_id": event.attempt_id})
            return
        attempt_id, principal = args.rest
        session = await Session.load(
            payer(),
            stores.sessions,
            args.session,
            checkpoint_store=stores.checkpoints,
            run_lock=stores.locks,
            when_busy="wait",
        )
        _say("ready")
        sys.stdin.readline()
        decision = Approve(principal=principal, policy_version="v7")
        try:
            events = await collect(session.resume(attempt_id, decision))
        except ApprovalError as exc:
            _say({"outcome": "refused", "error": type(exc).__name__, "message": str(exc)})
            return
        added = [e for e in events if isinstance(e, ApprovalAdded)]
        ran = [e for e in events if isinstance(e, ToolResult)]
        _say(
            {
                "outcome": "ran" if ran else "added",
                "approvals": list(added[0].approvals) if added else [],
                "types": [e.type for e in events],
            }
        )
    finally:
        await stores.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["pause", "approve"])
    parser.add_argument("session")
    parser.add_argument("rest", nargs="*")
    parser.add_argument("--sessions", required=True)
    parser.add_argument("--locks", required=True)
    anyio.run(main, parser.parse_args())
