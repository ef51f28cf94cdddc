"""``mainspring sessions list|show|delete --store URL``: the sessions a store holds."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar

import anyio
import typer
from rich.console import Console

from mainspring._cli_render import Debug, error_line, failing_cleanly
from mainspring.errors import ConfigError
from mainspring.stores.base import SessionStore
from mainspring.stores.urls import open_stores

__all__ = ["sessions_app"]

T = TypeVar("T")

sessions_app = typer.Typer(
    name="sessions", help="The sessions a store holds.", no_args_is_help=True
)

Store = Annotated[str, typer.Option("--store", help="The store, e.g. sqlite:///agent.db.")]


def _with_sessions(url: str, action: Callable[[SessionStore], Awaitable[T]], *, debug: bool) -> T:
    """Run ``action`` on the store's session store; errors are one line (exit 2 or 1)."""

    async def go() -> T:
        stores = await open_stores(url)
        try:
            if stores.sessions is None:
                raise ConfigError(f"{url} holds no sessions: use sqlite:///… or postgresql://…")
            return await action(stores.sessions)
        finally:
            await stores.aclose()

    with failing_cleanly(debug=debug):
        result = anyio.run(go)
    return result


@sessions_app.command("list")
def list_sessions(
    store: Store,
    limit: Annotated[int, typer.Option(help="At most this many.")] = 100,
    debug: Debug = False,
) -> None:
    """The ids of the stored sessions, one a line."""
    for session_id in _with_sessions(store, lambda s: s.session_ids(limit=limit), debug=debug):
        typer.echo(session_id)


@sessions_app.command()
def show(
    session_id: Annotated[str, typer.Argument(help="The session's id.")],
    store: Store,
    debug: Debug = False,
) -> None:
    """A session as JSON: its agent, turns, messages, pending action, spend."""
    state = _with_sessions(store, lambda s: s.load(session_id), debug=debug)
    if state is None:
        error_line(Console(stderr=True), f"no stored session {session_id!r}")
        raise typer.Exit(1)
    pending = state.pending
    summary = {
        "session_id": state.session_id,
        "agent": state.agent_name,
        "turns": state.turn_index,
        "messages": len(state.messages),
        "last_message": state.messages[-1].text[:200] if state.messages else None,
        "pending": None
        if pending is None
        else {"attempt_id": pending.attempt_id, "tool": pending.name, "input": pending.input},
        "cost_usd": state.cost_usd,
        "interrupted": state.active_stream is not None,
    }
    typer.echo(json.dumps(summary, indent=2, ensure_ascii=False))


@sessions_app.command()
def delete(
    session_id: Annotated[str, typer.Argument(help="The session's id.")],
    store: Store,
    debug: Debug = False,
) -> None:
    """Forget a session and everything recorded for it."""
    _with_sessions(store, lambda s: s.delete(session_id), debug=debug)
    typer.echo(f"deleted {session_id}")
