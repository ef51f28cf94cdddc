"""Testing an agent: the support agent of support_agent.py, run once offline.

Run it, then its tests, from the repository root:

    python examples/testing-an-agent/main.py
    python -m pytest examples/testing-an-agent/test_agent.py
"""

from __future__ import annotations

import argparse

import anyio
from support_agent import Shop, build_agent

from mainspring import Approve, ConfigError, ScriptedCall, ScriptedModel, ScriptedResponse, Session
from mainspring.models import Model, model_from_string
from mainspring.testing import collect, pending_of


def scripted_model() -> ScriptedModel:
    """A lookup, then a refund, then an answer."""
    return ScriptedModel(
        [
            ScriptedResponse(tool_calls=[ScriptedCall("lookup_order", {"order_id": "A1"})]),
            ScriptedResponse(
                tool_calls=[ScriptedCall("refund", {"order_id": "A1", "amount_usd": 40})]
            ),
            "Refunded order A1.",
        ]
    )


async def main(model: Model) -> None:
    """One conversation: the refund is approved as asked."""
    shop = Shop()
    session = Session(build_agent(model, shop))
    pending = pending_of(await collect(session.send("Please refund my order A1")))
    print(f"waiting for approval: {pending.name} {pending.input}")
    await collect(session.resume(pending.attempt_id, Approve()))
    print(f"refunds: {shop.refunds}; the agent said: {session.messages[-1].text}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a model string such as openai:gpt-4.1 (default: offline)")
    args = parser.parse_args()
    try:
        model = model_from_string(args.model) if args.model else scripted_model()
    except (ConfigError, ImportError) as exc:  # no key, or the provider's extra is missing
        parser.error(str(exc))
    anyio.run(main, model)
