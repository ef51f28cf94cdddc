"""What a server's tool list may offer: unique names, schemas compiled offline.

Both checks run when tools are listed, never when one is called, and each
refuses single tools with a diagnostic naming the server and the tool; the
others stay offered.

- **Names.** Each tool becomes ``mcp__<server>__<tool>``. Server names
  cannot end or start with ``_`` nor hold ``__`` (:class:`McpServerConfig`),
  so two servers never share a name; one server listing a name twice (or a
  list that changed into that) makes it ambiguous which tool a call runs, so
  every tool under that name is refused.
- **Schemas.** A tool's ``inputSchema`` (and ``outputSchema``) is compiled
  by :func:`mainspring.tools._schemas.compile_schema`: its dialect follows
  ``$schema``, and a ``$ref`` must resolve inside the schema — a remote
  reference is refused here, and nothing is ever fetched.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING

from mainspring.errors import ConfigError
from mainspring.tools._schemas import CompiledSchema, compile_schema

if TYPE_CHECKING:
    import mcp.types as mcp_types

    from mainspring.mcp._config import McpServerConfig

__all__ = ["checked_schema", "clashes", "full_name"]


def full_name(server: str, tool: str) -> str:
    """The registry name of a server's tool (``mcp__<server>__<tool>``)."""
    return f"mcp__{server}__{tool}"


def clashes(
    listed: Iterable[tuple[McpServerConfig, list[mcp_types.Tool]]],
) -> dict[str, str]:
    """Names claimed by more than one listed tool, each with why it is refused."""
    claims: dict[str, list[str]] = {}
    for config, tools in listed:
        for spec in tools:
            if config.wants(spec.name):
                claims.setdefault(full_name(config.name, spec.name), []).append(
                    f"server {config.name!r} tool {spec.name!r}"
                )
    return {
        name: (
            f"MCP tool name {name!r} is not unique: {', '.join(sorted(set(owners)))} "
            f"claim it {len(owners)} times; none of them is offered"
        )
        for name, owners in claims.items()
        if len(owners) > 1
    }


def checked_schema(server: str, spec: mcp_types.Tool) -> CompiledSchema:
    """The tool's input schema, compiled; its output schema is checked too.

    Raises:
        ConfigError: Either schema cannot be compiled (invalid, an unknown
            dialect, a ``$ref`` outside the schema), naming the server and tool.
    """
    owner = f"MCP server {server!r} tool {spec.name!r}"
    try:
        schema = json.loads(json.dumps(spec.input_schema))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{owner} has an input schema that is not JSON: {exc}") from None
    compiled = compile_schema(schema, owner=owner)
    if spec.output_schema is not None:
        compile_schema(spec.output_schema, owner=owner, kind="output schema")
    return compiled
