"""Approvals: a payment waits for a person, who approves it with an edit or denies it.

Run it from the repository root:

    python examples/approvals/main.py
"""

from __future__ import annotations

import argparse

import anyio

from mainspring import (
    Agent,
    Approve,
    ConfigError,
    DecisionConflict,
    FieldNotModifiable,
    Reject,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    tool,
)
from mainspring.models import Model, model_from_string
from mainspring.testing import collect, pending_of

PAYMENTS: list[str] = []  # what really left the account: the tool appends here


@tool(permission="confirm", modifiable_fields=("amount_usd",))
def send_payment(to: str, amount_usd: float) -> str:
    """Send money to someone. It waits for approval; the approver may lower the amount."""
    PAYMENTS.append(f"{to} ${amount_usd:.2f}")
    return f"sent ${amount_usd:.2f} to {to}"


def scripted_model() -> ScriptedModel:
    """What a model would do here, offline: two payments, each answered after its result."""
    return ScriptedModel(
        [
            ScriptedResponse(
                tool_calls=[ScriptedCall("send_payment", {"to": "alice", "amount_usd": 120})]
            ),
            "Paid Alice.",
            ScriptedResponse(
                tool_calls=[ScriptedCall("send_payment", {"to": "mallory", "amount_usd": 900})]
            ),
            "Understood: I did not pay Mallory.",
        ]
    )


async def main(model: Model) -> None:
    """Ask for two payments: approve the first with a lower amount, deny the second."""
    session = Session(Agent(model=model, tools=[send_payment]))

    # 1. The model asks for a payment: the turn pauses, nothing has run yet.
    pending = pending_of(await collect(session.send("Pay Alice $120 for the design work")))
    print(f"waiting: {pending.name}({pending.input}), may edit {list(pending.modifiable_fields)}")
    print(f"payments so far: {PAYMENTS}")

    # 2. The approver lowers the amount: only a modifiable field can change.
    events = await collect(session.resume(pending.attempt_id, Approve(edits={"amount_usd": 100})))
    # (an edited approval's result starts with a note of what ran: the last line is the tool's)
    results = [e.content.splitlines()[-1] for e in events if e.type == "tool_result"]
    print(f"approved with an edit -> {results}")

    # 3. A second decision for the same attempt is refused, never applied twice.
    try:
        session.resume(pending.attempt_id, Approve())
    except DecisionConflict:
        print("a second approval of the same attempt is refused (DecisionConflict)")

    # 4. The next payment: editing a field that is not modifiable is refused; then deny it.
    pending = pending_of(await collect(session.send("Pay Mallory $900")))
    try:
        session.resume(pending.attempt_id, Approve(edits={"to": "me"}))
    except FieldNotModifiable as exc:
        print(f"an edit of 'to' is refused: {exc}")
    await collect(session.resume(pending.attempt_id, Reject(reason="not a supplier of ours")))
    print(f"denied; the model answered: {session.messages[-1].text}")

    print(f"payments that ran: {PAYMENTS} (exactly once, at the approved amount)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a model string such as openai:gpt-4.1 (default: offline)")
    args = parser.parse_args()
    try:
        model = model_from_string(args.model) if args.model else scripted_model()
    except (ConfigError, ImportError) as exc:  # no key, or the provider's extra is missing
        parser.error(str(exc))
    anyio.run(main, model)
