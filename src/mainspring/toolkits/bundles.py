"""Ready-made tool sets: a coding agent's, and the torus SDK's built-ins."""

from __future__ import annotations

from mainspring.toolkits.files import Roots, file_tools, readonly_file_tools, workspace_of
from mainspring.toolkits.patch import patch_tools
from mainspring.toolkits.sandbox import SandboxPolicy
from mainspring.toolkits.shell import shell_tools
from mainspring.tools.define import Tool
from mainspring.tools.policy import Permission

__all__ = ["builtin_tools", "coding_tools"]


def coding_tools(
    root: Roots, *, sandbox: SandboxPolicy | None = None, permission: Permission = "confirm"
) -> list[Tool]:
    """``read_file``, ``list_dir``, ``search_files``, ``apply_patch``, ``shell``, ``shell_session``.

    Reads run in parallel without asking; patches and commands are ``permission``
    (confirm by default). Commands run in ``sandbox``, by default
    :meth:`SandboxPolicy.workspace` of the first root.
    """
    ws = workspace_of(root)
    return [
        *readonly_file_tools(ws),
        *patch_tools(ws, permission=permission),
        *shell_tools(ws, sandbox=sandbox, permission=permission),
    ]


def builtin_tools(root: Roots, *, write_permission: Permission = "confirm") -> list[Tool]:
    """The torus SDK's ``read_file``, ``write_file`` and ``list_dir``, confined to ``root``."""
    wanted = {"read_file", "write_file", "list_dir"}
    return [t for t in file_tools(root, write_permission=write_permission) if t.name in wanted]
