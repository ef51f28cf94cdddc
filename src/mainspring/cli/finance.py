"""``mainspring demo finance``: the finance agent at the terminal.

Before a swap is confirmed its quote is regenerated (a fresh price, the
approval bound to the new input's hash); a client-executed transfer is
"signed" by the demo's wallet (the ledger) once approved.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path

import anyio.to_thread
from rich.console import Console

from mainspring.cli.exit import ExitCode
from mainspring.cli.render import Renderer, styled
from mainspring.decisions import Approve, Decision
from mainspring.errors import ConfigError
from mainspring.events import ErrorEvent, Event, PendingAction
from mainspring.finance import FINANCE_MESSAGE, execute_client_transfer, finance_demo
from mainspring.models.base import Model
from mainspring.session import Session

__all__ = ["auto_model", "run_finance_demo"]

_KEYS = (
    ("ANTHROPIC_API_KEY", "anthropic:claude-sonnet-4-5"),
    ("OPENAI_API_KEY", "openai:gpt-5"),
    ("GEMINI_API_KEY", "gemini:gemini-2.5-flash"),
    ("GOOGLE_API_KEY", "gemini:gemini-2.5-flash"),
)


def auto_model(env: Mapping[str, str] | None = None) -> str:
    """``--model auto``: the first provider whose key is set, else ``"scripted"``."""
    env = os.environ if env is None else env
    return next((model for key, model in _KEYS if env.get(key)), "scripted")


Ask = Callable[[Console, PendingAction], Decision]


async def run_finance_demo(
    message: str | None,
    *,
    ask: Ask,
    console: Console,
    model: Model | None,
    tiers: str,
    ledger: str | Path = ":memory:",
) -> int:
    """Converse once (with every approval the turn needs); the exit code.

    Raises:
        ConfigError: ``tiers`` is not a preset, or the ledger cannot be opened.
    """
    try:
        demo = await finance_demo(ledger, model=model, tiers=tiers)
    except sqlite3.Error as exc:
        raise ConfigError(
            f"cannot open the ledger {ledger}: {exc} (give --ledger a writable file path)"
        ) from None
    try:
        session = Session(demo.agent)
        render = Renderer(console)
        text = message or FINANCE_MESSAGE
        console.print(styled(("you", "bold"), f": {text}"))
        stream = session.send(text)
        while True:
            if not await _show(stream, render):
                return ExitCode.FAILURE
            pending = session.pending
            if pending is None:
                return ExitCode.OK
            if pending.can_regenerate:
                console.print(styled(("refreshing the quote before you confirm", "yellow")))
                if not await _show(session.regenerate(pending.attempt_id), render):
                    return ExitCode.FAILURE
                pending = session.pending
                if pending is None:
                    return ExitCode.OK
            decision = ask(console, pending)
            if isinstance(decision, Approve):
                if pending.client_executed:
                    console.print(styled(("signing in the wallet", "yellow")))
                    decision = await anyio.to_thread.run_sync(
                        execute_client_transfer, demo.ledger, pending
                    )
                else:
                    decision = Approve(decision.edits, input_hash=pending.input_hash)
            stream = session.resume(pending.attempt_id, decision)
    finally:
        await anyio.to_thread.run_sync(demo.ledger.close)


async def _show(stream: AsyncIterator[Event], render: Renderer) -> bool:
    """Render a stream; False when it ended in an error."""
    ok = True
    async for event in stream:
        render.show(event)
        if isinstance(event, ErrorEvent):
            ok = False
    return ok
