"""How to reach one MCP server, and how far to trust its tools."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from mainspring.errors import ConfigError
from mainspring.tools.registry import matches, matches_any

__all__ = [
    "ESSENTIAL_ENV",
    "MCP_PERMISSIONS",
    "MCP_PROTOCOLS",
    "McpPermission",
    "McpProtocol",
    "McpServerConfig",
]

ESSENTIAL_ENV = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "TEMP",
    "TMP",
    "SYSTEMROOT",
)
"""Variables a stdio server inherits unless ``inherit_env`` is set."""

McpPermission: TypeAlias = Literal["auto", "confirm", "deny"]
"""An override of a server tool's tier: run at once, ask first, or never offer it."""

MCP_PERMISSIONS: tuple[McpPermission, ...] = ("auto", "confirm", "deny")

McpProtocol: TypeAlias = Literal["auto", "2025", "2026-07-28"]
"""Which MCP protocol era to speak: the newest the server offers (``server/discover``,
falling back to the 2025-era ``initialize`` handshake), only the handshake, or only
the stateless 2026-07-28 revision (a server without it fails to start)."""

MCP_PROTOCOLS: tuple[McpProtocol, ...] = ("auto", "2025", "2026-07-28")


@dataclass(frozen=True, slots=True, kw_only=True)
class McpServerConfig:
    """How to reach one MCP server, and how far to trust it.

    A tool's tier comes from its annotations unless overridden: ``readOnlyHint``
    makes it a read (no approval, run in parallel); ``destructiveHint``, or no
    annotations at all, makes it a confirm-tier write; an explicit
    ``readOnlyHint: false, destructiveHint: false`` an auto-tier write.
    ``tool_permissions`` (by tool name or ``*``-suffixed pattern, the exact
    name first) overrides that for single tools, ``permission`` for the rest.
    """

    name: str
    transport: Literal["stdio", "http"] = "stdio"
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    """Extra variables for a stdio server, on top of :data:`ESSENTIAL_ENV`."""
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    startup_timeout: float = 30.0
    call_timeout: float = 60.0
    max_concurrent_calls: int = 4
    output_budget: int = 50_000
    """Characters of text a result may carry; longer results are cut with a note."""
    required: bool = True
    """A required server that fails to start fails :meth:`McpClientManager.start`."""
    allow: tuple[str, ...] | None = None
    """Tool name patterns (``*`` suffix for a prefix) to keep; ``None`` keeps all."""
    deny: tuple[str, ...] = ()
    inherit_env: bool = False
    """Give a stdio server this process's whole environment."""
    permission: McpPermission | None = None
    """Every tool's tier, instead of the one its annotations imply."""
    tool_permissions: Mapping[str, McpPermission] = field(default_factory=dict)
    """Tiers of single tools (server-side name or ``*`` pattern), over ``permission``."""
    cache_ttl: float = 0.0
    """Seconds a read-only tool's successful result is reused for the same arguments
    (``0``: no cache). The cache is dropped when the server's tool or resource list
    changes and when it reconnects."""
    cache_entries: int = 256
    """Results the cache keeps at most (least recently used go first)."""
    resources: bool = True
    """Offer the server's resources (if it has any) as ``mcpr__<server>__list`` and
    ``mcpr__<server>__read`` tools."""
    protocol: McpProtocol = "auto"
    """The protocol era (see :data:`McpProtocol`)."""
    input_rounds: int = 10
    """``input_required`` rounds one 2026-07-28 call may take (a server asking
    for ever is cut off with an error result)."""

    def __post_init__(self) -> None:
        name = self.name
        if (
            not name
            or "__" in name
            or name.startswith("_")
            or name.endswith("_")
            or not name.replace("-", "_").isidentifier()
        ):
            raise ConfigError(
                f"MCP server name {name!r} must be letters, digits, '_', '-' "
                "(no '__', not starting or ending with '_')"
            )
        if self.transport == "stdio" and not self.command:
            raise ConfigError(f"MCP server {name!r}: a stdio server needs a command")
        if self.transport == "http" and not self.url:
            raise ConfigError(f"MCP server {name!r}: an http server needs a url")
        for label, value in (
            ("startup_timeout", self.startup_timeout),
            ("call_timeout", self.call_timeout),
            ("max_concurrent_calls", self.max_concurrent_calls),
            ("output_budget", self.output_budget),
            ("input_rounds", self.input_rounds),
        ):
            if value <= 0:
                raise ConfigError(f"MCP server {name!r}: {label} must be positive")
        if not (self.cache_ttl >= 0 and self.cache_entries >= 0):  # NaN fails too
            raise ConfigError(f"MCP server {name!r}: cache_ttl and cache_entries must be >= 0")
        if self.protocol not in MCP_PROTOCOLS:
            raise ConfigError(
                f"MCP server {name!r}: protocol is {self.protocol!r}; "
                f"use one of {', '.join(map(repr, MCP_PROTOCOLS))}"
            )
        tiers = {"permission": self.permission} if self.permission is not None else {}
        tiers |= {f"tool_permissions[{k!r}]": v for k, v in self.tool_permissions.items()}
        for label, tier in tiers.items():
            if tier not in MCP_PERMISSIONS:
                raise ConfigError(
                    f"MCP server {name!r}: {label} is {tier!r}; "
                    f"use one of {', '.join(map(repr, MCP_PERMISSIONS))}"
                )

    def wants(self, tool_name: str) -> bool:
        """Whether the allow/deny patterns keep a tool (by its server-side name)."""
        if self.allow is not None and not matches_any(self.allow, tool_name):
            return False
        return not matches_any(self.deny, tool_name)

    def override(self, tool_name: str) -> tuple[McpPermission, str] | None:
        """The configured tier of a tool and where it comes from, if any."""
        exact = self.tool_permissions.get(tool_name)
        if exact is not None:
            return exact, f"tool_permissions[{tool_name!r}]"
        for pattern, tier in self.tool_permissions.items():
            if matches(pattern, tool_name):
                return tier, f"tool_permissions[{pattern!r}]"
        if self.permission is not None:
            return self.permission, "permission"
        return None

    def stdio_env(self) -> dict[str, str]:
        """The environment a stdio server is started with."""
        if self.inherit_env:
            base = dict(os.environ)
        else:
            base = {k: v for k in ESSENTIAL_ENV if (v := os.environ.get(k)) is not None}
        return base | dict(self.env)
