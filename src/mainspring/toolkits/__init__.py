"""Workspace toolkits: tools that give an agent a workspace it cannot escape.

- Files (:func:`file_tools`, :func:`readonly_file_tools`): read, list, search,
  write and edit, confined to roots through directory handles and no-follow
  opens (:class:`FileWorkspace`); search patterns and globs on a linear-time
  engine (RE2, extra ``re2``), else in a child process killed at a deadline.
- :func:`patch_tools`: ``apply_patch`` in the ``*** Begin Patch`` format,
  checked whole (exact, unique context; versions) before its first write.
- :func:`shell_tools`: ``shell`` and ``shell_session`` on a :class:`Shell`,
  in a bubblewrap sandbox (:class:`SandboxPolicy`) with an allowlisted
  environment and resource limits (:class:`SandboxLimits`); process groups
  cleaned up on stop, cancel and exit.
- :func:`notes_tools` (per agent) and :func:`todo_tools` (per session) over a
  :class:`ToolDataStore` (:class:`InMemoryToolDataStore`,
  :class:`SQLiteToolDataStore`).
- :func:`memory_tools`: ``remember`` (in the background), ``recall`` and
  ``forget`` (confirm-tier) over a :class:`~mainspring.memory.MemoryStore`.
- ``mainspring.toolkits.conversations``: ``ConversationMemory``, opt-in search
  of a principal's earlier sessions by the model.
- ``mainspring.toolkits.artifacts`` (extra ``artifacts``): ``artifact_result``
  stores a large result in an :class:`~mainspring.stores.artifacts.ArtifactStore`
  and gives the model a summary and a reference; ``artifact_tools`` lets it
  read its artifacts in pages.
- :func:`fetch_tools`: ``fetch`` (GET) and ``http_post`` through httpx, to an
  allowlist of hosts only (none by default), redirects re-checked, bounded,
  HTML turned into text.
- :func:`a2a_tool` (extra ``a2a``, imported on first use): a remote A2A
  agent as a tool; its questions pause the session as pending actions.
- Bundles: :func:`coding_tools` (reads, ``apply_patch``, shell) and the
  torus-compatible :func:`builtin_tools` (``read_file``, ``write_file``,
  ``list_dir``).
- Every write tool previews its call (the path and a diff) in the pending
  action of a paused call (``source=PREVIEW_SOURCE``; :func:`preview_of`).

``Workspace``, the old name of :class:`FileWorkspace`, still imports from here
for one release, with a :class:`DeprecationWarning`.
"""

import warnings
from typing import TYPE_CHECKING

from mainspring.toolkits.bundles import builtin_tools, coding_tools
from mainspring.toolkits.confine import MAX_FILE_BYTES, FileWorkspace, WorkspaceError
from mainspring.toolkits.data import InMemoryToolDataStore, SQLiteToolDataStore, ToolDataStore
from mainspring.toolkits.fetch import FetchLimits, fetch_tools, html_text
from mainspring.toolkits.files import file_tools, readonly_file_tools
from mainspring.toolkits.memory import memory_tools
from mainspring.toolkits.notes import notes_tools
from mainspring.toolkits.patch import patch_tools
from mainspring.toolkits.patch_format import PatchError, PatchLimits
from mainspring.toolkits.preview import PREVIEW_SOURCE, preview_of
from mainspring.toolkits.sandbox import SandboxLimits, SandboxPolicy, SandboxUnavailable
from mainspring.toolkits.shell import Shell, ShellLimits, ShellResult, shell_tools
from mainspring.toolkits.todo import TodoChange, TodoItem, todo_tools

__all__ = [
    "MAX_FILE_BYTES",
    "PREVIEW_SOURCE",
    "A2ACardError",
    "FetchLimits",
    "FileWorkspace",
    "InMemoryToolDataStore",
    "PatchError",
    "PatchLimits",
    "SQLiteToolDataStore",
    "SandboxLimits",
    "SandboxPolicy",
    "SandboxUnavailable",
    "Shell",
    "ShellLimits",
    "ShellResult",
    "TodoChange",
    "TodoItem",
    "ToolDataStore",
    "WorkspaceError",
    "a2a_tool",
    "builtin_tools",
    "coding_tools",
    "fetch_tools",
    "file_tools",
    "html_text",
    "memory_tools",
    "notes_tools",
    "patch_tools",
    "preview_of",
    "readonly_file_tools",
    "shell_tools",
    "todo_tools",
]

if TYPE_CHECKING:
    from mainspring.toolkits.a2a import A2ACardError, a2a_tool

    Workspace = FileWorkspace  # the deprecated name, as type checkers see it

_LAZY = ("A2ACardError", "a2a_tool")
"""Names of ``mainspring.toolkits.a2a`` (the ``a2a`` extra), imported on first use."""


def __getattr__(name: str) -> object:
    """The A2A names, imported on first use; ``Workspace``, :class:`FileWorkspace`'s old name."""
    if name in _LAZY:
        from mainspring.toolkits import a2a

        value: object = getattr(a2a, name)
        globals()[name] = value
        return value
    if name == "Workspace":
        warnings.warn(
            "mainspring.toolkits.Workspace is deprecated: use mainspring.toolkits.FileWorkspace",
            DeprecationWarning,
            stacklevel=2,
        )
        return FileWorkspace
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
