"""``mainspring sessions list|show|delete --store URL``: the sessions a store holds."""

from __future__ import annotations

import json
import shlex
from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar

import anyio
import typer
from rich.console import Console

from mainspring.cli.exit import Debug, ExitCode, error_line, failing_cleanly, require_database
from mainspring.errors import ConfigError, StoreError
from mainspring.stores.base import SessionStore
from mainspring.stores.urls import open_session_store

__all__ = ["sessions_app"]

T = TypeVar("T")

sessions_app = typer.Typer(
    name="sessions", help="The sessions a store holds.", no_args_is_help=True
)

Store = Annotated[str, typer.Option("--store", help="The store, e.g. sqlite:///agent.db.")]


def _with_sessions(url: str, action: Callable[[SessionStore], Awaitable[T]], *, debug: bool) -> T:
    """Run ``action`` on the store's session store; errors are one line (exit 2, 4 or 1).

    A SQLite file that is not there is an error, not a new empty database.
    """

    async def go() -> T:
        sessions = await open_session_store(url)  # redis:// fails here: it holds no sessions
        try:
            return await action(sessions)
        finally:
            await sessions.aclose()

    with failing_cleanly(debug=debug):
        if url.startswith("memory:"):
            raise ConfigError(
                f"{url} lives inside one process: nothing is there for this command; "
                "use the sqlite:///… or postgresql://… store the sessions were kept in"
            )
        require_database(url)
        result = anyio.run(go)
    return result


@sessions_app.command("list")
def list_sessions(
    store: Store,
    limit: Annotated[int, typer.Option(min=1, help="At most this many.")] = 100,
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
        error_line(Console(stderr=True), _unknown(session_id, store))
        raise typer.Exit(ExitCode.USAGE)
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

    async def forget(sessions: SessionStore) -> bool:
        try:
            found = await sessions.load(session_id) is not None
        except StoreError:
            found = True  # there, though unreadable: it can still be deleted
        if found:
            await sessions.delete(session_id)
        return found

    if not _with_sessions(store, forget, debug=debug):
        error_line(Console(stderr=True), _unknown(session_id, store))
        raise typer.Exit(ExitCode.USAGE)
    typer.echo(f"deleted {session_id}")


def _unknown(session_id: str, store: str) -> str:
    return (
        f"no stored session {session_id!r} in {store}: "
        f"mainspring sessions list --store {shlex.quote(store)} lists them"
    )
