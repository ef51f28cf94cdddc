"""Tools: typed functions plus the policy the engine enforces."""

from mainspring.tools.context import ToolContext
from mainspring.tools.define import Tool, ToolOutput, client_tool, tool
from mainspring.tools.policy import Flag, Permission, ToolInput, ToolPolicy, UsdAmount, usd
from mainspring.tools.registry import ToolRegistry, matches, matches_any, namespaced

__all__ = [
    "Flag",
    "Permission",
    "Tool",
    "ToolContext",
    "ToolInput",
    "ToolOutput",
    "ToolPolicy",
    "ToolRegistry",
    "UsdAmount",
    "client_tool",
    "matches",
    "matches_any",
    "namespaced",
    "tool",
    "usd",
]
