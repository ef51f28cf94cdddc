"""The engine two worker processes serve at ``/v1/engine`` in ``test_engine_workers``.

Its tools write what they do to ``$MAINSPRING_TEST_EFFECTS`` themselves (one
line per run, appended), so the test judges "at most once" by the effect,
not by what mainspring reports.
"""

from __future__ import annotations

import os

from mainspring import tool
from mainspring.engine import Engine, ManagementPolicy


def _effect(line: str) -> None:
    with open(os.environ["MAINSPRING_TEST_EFFECTS"], "a", encoding="utf-8") as out:
        out.write(line + "\n")


@tool
def transfer(to: str, cents: int) -> str:
    """Move money (a write that needs no approval)."""
    _effect(f"transfer {to} {cents}")
    return f"sent {cents} to {to}"


@tool(permission="confirm")
def close_account(account: str) -> str:
    """Close an account (needs the caller's decision)."""
    _effect(f"close {account}")
    return f"closed {account}"


def engine() -> Engine:
    """A fresh engine per worker (each process builds its own)."""
    return (
        Engine("bank", policy=ManagementPolicy(visibility="protected"))
        .add_tool(transfer, export=True)
        .add_tool(close_account, export=True)
    )
