"""MCP: use the tools and prompts of Model Context Protocol servers.

Needs the ``mcp`` extra: ``pip install "mainspring[mcp]"``.
"""

from __future__ import annotations

from mainspring.mcp.client import (
    MCP_PERMISSIONS,
    McpClientManager,
    McpPermission,
    McpPrompt,
    McpServerConfig,
    McpStartupError,
    RawResult,
)

__all__ = [
    "MCP_PERMISSIONS",
    "McpClientManager",
    "McpPermission",
    "McpPrompt",
    "McpServerConfig",
    "McpStartupError",
    "RawResult",
]
