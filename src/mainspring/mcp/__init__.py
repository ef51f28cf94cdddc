"""MCP: use the tools and prompts of Model Context Protocol servers, and serve an agent's.

Needs the ``mcp`` extra: ``pip install "mainspring[mcp]"``.
"""

from __future__ import annotations

from mainspring.mcp.client import (
    MCP_PERMISSIONS,
    MCP_PROTOCOLS,
    ElicitAnswer,
    McpClientManager,
    McpElicitation,
    McpPermission,
    McpPrompt,
    McpProtocol,
    McpSampling,
    McpServerConfig,
    McpStartupError,
    OnElicit,
    RawResult,
)
from mainspring.mcp.offers import (
    McpServe,
    PromptArgument,
    ServedPrompt,
    ServedResource,
    ServedResourceTemplate,
)

__all__ = [
    "MCP_PERMISSIONS",
    "MCP_PROTOCOLS",
    "ElicitAnswer",
    "McpClientManager",
    "McpElicitation",
    "McpPermission",
    "McpPrompt",
    "McpProtocol",
    "McpSampling",
    "McpServe",
    "McpServerConfig",
    "McpStartupError",
    "OnElicit",
    "PromptArgument",
    "RawResult",
    "ServedPrompt",
    "ServedResource",
    "ServedResourceTemplate",
]
