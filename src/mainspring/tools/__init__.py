"""Tools: typed functions plus the policy the engine enforces."""

from typing import TYPE_CHECKING

from mainspring._lowlevel.lazy import lazy_attributes
from mainspring.tools.define import Tool, ToolOutput, client_tool, tool
from mainspring.tools.policy import Flag, Permission, ToolInput, ToolPolicy, UsdAmount, usd
from mainspring.tools.registry import ToolRegistry, matches, matches_any, namespaced

if TYPE_CHECKING:
    from mainspring.tools.context import ToolContext

# The run context loads on first use (PEP 562): defining a tool does not need it.
__getattr__, __dir__ = lazy_attributes(
    "mainspring.tools", globals(), {"ToolContext": "mainspring.tools.context"}
)

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
