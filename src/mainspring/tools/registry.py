"""A registry of tools with namespacing and allowlists.

Grouped tools (an MCP server's, say) are registered as
``<prefix>__<group>__<tool>`` (``mcp__github__create_issue``). Allowlists
hold exact names or a prefix ending in ``*`` (``mcp__github__*``, ``get_*``,
``*``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from mainspring.errors import ConfigError
from mainspring.tools.define import Tool

__all__ = ["ToolRegistry", "matches", "matches_any", "namespaced"]


def namespaced(group: str, name: str, *, prefix: str = "mcp") -> str:
    """The registry name of a grouped tool: ``prefix__group__name``.

    One name, one tool: a group holds no ``__`` and neither starts nor ends
    with ``_``, so the name splits back at its first ``__`` after the prefix
    (group ``a_`` with tool ``pay`` would read as group ``a`` with tool
    ``_pay``, and pass an allowlist written for group ``a``).

    Raises:
        ConfigError: The group name could make two tools one name.
    """
    if not group or "__" in group or group.startswith("_") or group.endswith("_"):
        raise ConfigError(
            f"group name {group!r} must not contain '__', be empty, or start or end with '_'"
        )
    return f"{prefix}__{group}__{name}"


def matches(pattern: str, name: str) -> bool:
    """Exact match, or prefix match when the pattern ends in ``*``."""
    if pattern.endswith("*"):
        return name.startswith(pattern[:-1])
    return name == pattern


def matches_any(patterns: Iterable[str], name: str) -> bool:
    """Whether any pattern matches ``name``."""
    return any(matches(p, name) for p in patterns)


class ToolRegistry:
    """Tools by name; duplicates are an error."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        """Create a registry holding ``tools``."""
        self._tools: dict[str, Tool] = {}
        for t in tools:
            self.add(t)

    def add(self, tool: Tool, *, group: str | None = None, prefix: str = "mcp") -> Tool:
        """Register ``tool`` (renamed ``prefix__group__name`` when grouped)."""
        if group is not None:
            tool = tool.renamed(namespaced(group, tool.name, prefix=prefix))
        if tool.name in self._tools:
            raise ConfigError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        return tool

    def remove(self, name: str) -> None:
        """Unregister a tool; a missing name is ignored."""
        self._tools.pop(name, None)

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, if any."""
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def allowed(self, allowlist: Sequence[str] | None) -> list[Tool]:
        """Tools whose names match the allowlist (``None`` allows all)."""
        if allowlist is None:
            return list(self._tools.values())
        return [t for t in self._tools.values() if matches_any(allowlist, t.name)]
