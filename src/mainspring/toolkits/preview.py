"""Previews of workspace writes, carried into the pending action by a guard.

A write tool of this package registers how to preview a call (the path and a
diff of what it would change, computed without writing). :func:`preview_guard`
returns a guard that puts that preview into the ``pending_action`` of every
confirm-tier call of such a tool, as a finding (``source="workspace_preview"``).

The guard only speaks for calls whose own permission is ``confirm``: an
auto-tier write is not made to pause. (A write let through by
``PermissionRules.allow`` still pauses while the guard is installed: a guard
does not see the permission verdict.)
"""

from __future__ import annotations

import typing
import weakref
from collections.abc import Callable
from typing import Any, Literal

from pydantic import JsonValue

from mainspring.guards import Guard
from mainspring.tools.define import Tool
from mainspring.tools.policy import ToolInput, resolve_permission

__all__ = ["PREVIEW_SOURCE", "Previewer", "preview_guard", "preview_of", "register_preview"]

PREVIEW_SOURCE = "workspace_preview"
"""The ``source`` of the finding that carries a preview."""

Previewer = Callable[[ToolInput], str]
"""The path and a diff of what a call would change; raises when it cannot apply."""

_PREVIEWS: weakref.WeakKeyDictionary[Callable[..., Any], Previewer] = weakref.WeakKeyDictionary()


def register_preview(tool: Tool, previewer: Previewer) -> Tool:
    """Make ``previewer`` the preview of ``tool`` (and of its renamed copies)."""
    if tool.fn is None:
        raise ValueError("a client-executed tool has no body to preview")
    _PREVIEWS[tool.fn] = previewer
    return tool


def preview_of(tool: Tool, args: ToolInput) -> str | None:
    """The preview of a call, ``None`` when the tool has none.

    A call that would not apply gets a preview saying why (the call itself then
    fails its preflight check and is not asked about).
    """
    previewer = _PREVIEWS.get(tool.fn) if tool.fn is not None else None
    if previewer is None:
        return None
    try:
        return previewer(args)
    except Exception as exc:
        return f"preview unavailable: {exc}"


def preview_guard() -> Guard:
    """A guard that adds the preview of a confirm-tier workspace write to its pending action.

    ```python
    agent = Agent(model=..., tools=file_tools(root), guards=[preview_guard()])
    ```

    The preview is computed on the event loop when the call is judged; it reads
    at most the files the call names, each bounded by the workspace's limit, and
    diffs very large files as a summary only.
    """

    def before(tool: Tool, args: ToolInput) -> tuple[Literal["confirm"], str] | None:
        if tool.fn is None or tool.fn not in _PREVIEWS:
            return None
        tier, _ = resolve_permission(tool.policy, typing.cast(dict[str, JsonValue], dict(args)))
        if tier != "confirm":
            return None
        text = preview_of(tool, args)
        return None if text is None else ("confirm", text)

    return Guard(name=PREVIEW_SOURCE, tier="ux", before=before)
