"""Notes: a caller's own persistent notes with an agent (add, list by page, read, search).

Notes belong to the caller and the agent (``ToolContext.data_scope``), not the
session, so they outlast conversations; they live in a :class:`ToolDataStore`
under ``notes/principal/<kind>/<id>/agent/<agent>``: on a server, one
principal never lists, reads or finds another's notes. ``shared=True`` keeps
one list per agent for every caller (``notes:<agent name>``, where notes were
kept before they were per caller): an explicit opt-in.
"""

from __future__ import annotations

import datetime

from mainspring.toolkits.data import ToolDataStore
from mainspring.tools.context import ToolContext
from mainspring.tools.define import Tool, tool

__all__ = ["notes_tools"]

MAX_NOTE_CHARS = 20_000
MAX_NOTES = 10_000
PAGE = 20


def _own(ctx: ToolContext) -> str:
    return f"notes/{ctx.data_scope}"


def _shared(ctx: ToolContext) -> str:
    return f"notes:{ctx.agent_name}"


def _line(key: str, value: object) -> str:
    note = value if isinstance(value, dict) else {}
    text = str(note.get("text", ""))
    first = text.splitlines()[0] if text else ""
    title = str(note.get("title") or first)[:80]
    return f"{int(key)}: {title} ({note.get('created', '?')})"


def notes_tools(store: ToolDataStore, *, shared: bool = False) -> list[Tool]:
    """``notes_add``, ``notes_list``, ``notes_read``, ``notes_search`` over ``store``.

    Each caller has its own notes with each agent; ``shared=True`` gives every
    caller of an agent the same notes (an explicit opt-in).
    """
    _namespace = _shared if shared else _own

    @tool(name="notes_add")
    async def notes_add(text: str, ctx: ToolContext, title: str = "") -> str:
        """Save a note for later conversations (your own notes).

        Args:
            text: The note.
            ctx: The run context (not shown to the model).
            title: A short title (default: its first line).
        """
        if not text.strip():
            raise ValueError("a note needs text")
        if len(text) > MAX_NOTE_CHARS:
            raise ValueError(f"a note is at most {MAX_NOTE_CHARS} characters")
        if await store.count(_namespace(ctx)) >= MAX_NOTES:
            raise ValueError(f"at most {MAX_NOTES} notes are kept")
        created = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
        key = await store.append(
            _namespace(ctx), {"text": text, "title": title, "created": created}
        )
        return f"saved note {int(key)}"

    @tool(name="notes_list", read_only=True)
    async def notes_list(ctx: ToolContext, page: int = 1) -> str:
        """List your notes, newest last, a page of 20 at a time.

        Args:
            page: 1 for the first page.
            ctx: The run context (not shown to the model).
        """
        page = max(1, page)
        after = f"{(page - 1) * PAGE:08d}"
        rows = await store.items(_namespace(ctx), after=after, limit=PAGE)
        total = await store.count(_namespace(ctx))
        pages = max(1, -(-total // PAGE))
        head = f"{total} notes, page {page} of {pages}"
        return "\n".join([head, *(_line(k, v) for k, v in rows)])

    @tool(name="notes_read", read_only=True)
    async def notes_read(note_id: int, ctx: ToolContext) -> str:
        """Read one note in full.

        Args:
            note_id: The number notes_list shows.
            ctx: The run context (not shown to the model).
        """
        value = await store.get(_namespace(ctx), f"{note_id:08d}")
        if not isinstance(value, dict):
            raise LookupError(f"no note {note_id}")
        return (
            f"note {note_id} ({value.get('created')}): {value.get('title') or ''}\n{value['text']}"
        )

    @tool(name="notes_search", read_only=True)
    async def notes_search(query: str, ctx: ToolContext, limit: int = 20) -> str:
        """Find notes containing ``query`` (case-insensitive).

        Args:
            query: Text to look for.
            ctx: The run context (not shown to the model).
            limit: At most this many notes.
        """
        return await _search(store, _namespace(ctx), query, limit)

    return [notes_add, notes_list, notes_read, notes_search]


async def _search(store: ToolDataStore, namespace: str, query: str, limit: int) -> str:
    needle = query.casefold()
    found: list[str] = []
    after = ""
    while len(found) < limit:
        rows = await store.items(namespace, after=after, limit=500)
        if not rows:
            break
        for key, value in rows:
            note = value if isinstance(value, dict) else {}
            if needle in f"{note.get('title', '')}\n{note.get('text', '')}".casefold():
                found.append(_line(key, value))
        after = rows[-1][0]
    return "\n".join(found[:limit]) if found else f"no notes contain {query!r}"
