"""Finance: the flagship agent as a library; a swap confirmed on a fresh quote.

Run it from the repository root:

    python examples/finance/main.py

The agent is the package beside this file, ``mainspring_finance``: a ledger,
its tools and guards, built on mainspring's public API only. mainspring's wheel
installs it too, which is how ``mainspring demo finance`` runs it.
"""

from __future__ import annotations

import anyio

from mainspring import Approve, InputChanged, Session
from mainspring.testing import collect, pending_of
from mainspring_finance import FINANCE_MESSAGE, finance_demo


async def main() -> None:
    """Ask for a swap, refresh its quote, approve the fresh one; show the ledger."""
    demo = await finance_demo()  # an in-memory SQLite ledger, seeded; a scripted model
    try:
        session = Session(demo.agent)
        print(f"you: {FINANCE_MESSAGE}")
        first = pending_of(await collect(session.send(FINANCE_MESSAGE)))
        print(f"waiting: {first.name} on quote {first.input['quote_id']}")
        print(f"balances so far: {await anyio.to_thread.run_sync(demo.ledger.balances)}")

        # The quote may be stale by the time a person looks: regenerate it first.
        fresh = pending_of(await collect(session.regenerate(first.attempt_id)))
        print(f"refreshed: {fresh.name} on quote {fresh.input['quote_id']}")
        try:
            session.resume(first.attempt_id, Approve(input_hash=first.input_hash))
        except InputChanged:
            print("an approval of the old quote is refused (InputChanged)")

        await collect(session.resume(fresh.attempt_id, Approve(input_hash=fresh.input_hash)))
        print(f"agent: {session.messages[-1].text}")
        print(f"balances now: {await anyio.to_thread.run_sync(demo.ledger.balances)}")
    finally:
        await anyio.to_thread.run_sync(demo.ledger.close)


if __name__ == "__main__":
    anyio.run(main)
