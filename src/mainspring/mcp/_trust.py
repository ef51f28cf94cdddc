"""A server tool's tier: its annotations, unless the config overrides them.

- ``readOnlyHint: true``: a read, run without asking and in parallel;
- ``destructiveHint: true``, or no annotations at all (or no
  ``destructiveHint``, which the protocol defaults to true): a confirm-tier write;
- ``readOnlyHint: false`` with ``destructiveHint: false``: an auto-tier write.

Annotations are the server's own claim, so the safe reading is the default and
the user's config has the last word.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from mainspring.mcp._config import McpServerConfig
from mainspring.tools.policy import Permission, ToolPolicy

if TYPE_CHECKING:
    import mcp.types as mcp_types

__all__ = ["Trust", "trust"]


@dataclass(frozen=True, slots=True)
class Trust:
    """How far a server tool is trusted, and why."""

    permission: Permission
    read_only: bool
    source: str
    """``annotations: …`` or the config field that decided it."""

    def policy(self, *, max_result_chars: int) -> ToolPolicy:
        """The tool's policy: reads are concurrency-safe, writes never run in parallel."""
        return ToolPolicy(
            read_only=self.read_only,
            concurrency_safe=self.read_only,
            permission=self.permission,
            max_result_chars=max_result_chars,
        )


def _from_annotations(annotations: mcp_types.ToolAnnotations | None) -> Trust:
    if annotations is None:
        return Trust("confirm", read_only=False, source="annotations: none")
    if annotations.read_only_hint:
        return Trust("auto", read_only=True, source="annotations: readOnlyHint")
    if annotations.destructive_hint is False:
        return Trust("auto", read_only=False, source="annotations: not destructive")
    return Trust("confirm", read_only=False, source="annotations: destructive")


def trust(config: McpServerConfig, spec: mcp_types.Tool) -> Trust | None:
    """The tool's tier, or ``None`` when the config denies it."""
    found = _from_annotations(spec.annotations)
    override = config.override(spec.name)
    if override is None:
        return found
    tier, source = override
    if tier == "deny":
        return None
    return Trust(tier, read_only=found.read_only, source=source)
