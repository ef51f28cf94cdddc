"""Todo: a validated task list per session, updated incrementally.

The list lives in a :class:`ToolDataStore` under ``todo`` keyed by the
conversation (``ToolContext.conversation``: the caller and the session id), so
a session loaded again from its session store (in another process) continues
with the same list, and no other caller's session ever reaches it. At most
one item is in progress.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, TypeAdapter

from mainspring.toolkits.data import ToolDataStore
from mainspring.tools.context import ToolContext
from mainspring.tools.define import Tool, tool

__all__ = ["TodoChange", "TodoItem", "todo_tools"]

Status = Literal["pending", "in_progress", "done"]
MAX_ITEMS = 100
NAMESPACE = "todo"


class TodoItem(BaseModel):
    """One task."""

    id: str = Field(min_length=1, max_length=40, pattern=r"^[A-Za-z0-9_.-]+$")
    content: str = Field(min_length=1, max_length=500)
    status: Status = "pending"


class TodoChange(BaseModel):
    """A change to an existing task: a new status, new content, or both."""

    id: str
    status: Status | None = None
    content: str | None = Field(default=None, min_length=1, max_length=500)


_ITEMS = TypeAdapter(list[TodoItem])


def _validate(items: list[TodoItem]) -> None:
    if len(items) > MAX_ITEMS:
        raise ValueError(f"a todo list holds at most {MAX_ITEMS} items")
    ids = [item.id for item in items]
    if len(set(ids)) != len(ids):
        raise ValueError("todo ids must be unique")
    if sum(item.status == "in_progress" for item in items) > 1:
        raise ValueError("at most one item may be in_progress")


def _render(items: list[TodoItem]) -> str:
    if not items:
        return "the todo list is empty"
    marks = {"pending": "[ ]", "in_progress": "[>]", "done": "[x]"}
    done = sum(item.status == "done" for item in items)
    rows = [f"{marks[i.status]} {i.id}: {i.content}" for i in items]
    return "\n".join([f"{done}/{len(items)} done", *rows])


def todo_tools(store: ToolDataStore) -> list[Tool]:
    """``todo_read`` and ``todo_write`` over ``store`` (one list per session)."""

    async def load(ctx: ToolContext) -> list[TodoItem]:
        raw = await store.get(NAMESPACE, ctx.conversation)
        return [] if raw is None else _ITEMS.validate_python(raw)

    @tool(name="todo_read", read_only=True)
    async def todo_read(ctx: ToolContext) -> str:
        """The session's todo list."""
        return _render(await load(ctx))

    @tool(name="todo_write")
    async def todo_write(
        ctx: ToolContext,
        add: list[TodoItem] | None = None,
        update: list[TodoChange] | None = None,
        remove: list[str] | None = None,
        replace: list[TodoItem] | None = None,
    ) -> str:
        """Change the session's todo list: replace it, or add, update and remove items.

        Args:
            add: New items, appended.
            update: Status or content changes to items by id.
            remove: Ids to drop.
            replace: The whole new list (applied before the other changes).
            ctx: The run context (not shown to the model).
        """
        items = list(replace) if replace is not None else await load(ctx)
        drop = set(remove or ())
        missing = drop - {item.id for item in items}
        if missing:
            raise ValueError(f"no todo items {sorted(missing)}")
        items = [item for item in items if item.id not in drop]
        items += list(add or ())
        by_id = {item.id: index for index, item in enumerate(items)}
        for change in update or ():
            if change.id not in by_id:
                raise ValueError(f"no todo item {change.id!r}")
            old = items[by_id[change.id]]
            items[by_id[change.id]] = old.model_copy(
                update={
                    k: v for k, v in (("status", change.status), ("content", change.content)) if v
                }
            )
        _validate(items)
        await store.put(NAMESPACE, ctx.conversation, _ITEMS.dump_python(items, mode="json"))
        return _render(items)

    return [todo_read, todo_write]
