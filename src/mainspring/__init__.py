"""mainspring: an agent engine for Python.

An application hands a :class:`Session` a user's message and iterates the
events it streams back while the engine calls the model, runs reads in
parallel, pauses writes for approval, and keeps going until the turn is done.
"""

from mainspring._version import __version__
from mainspring.agent import Agent
from mainspring.cost import CostTracker, ModelPrice
from mainspring.decisions import Approve, ClientResult, Decision, Reject
from mainspring.errors import (
    ApprovalError,
    BudgetExceeded,
    ConfigError,
    DecisionConflict,
    FieldNotModifiable,
    MainspringError,
    ModelError,
    SessionBusy,
    ToolError,
    ToolInputError,
    ToolTimeout,
    UnknownAttempt,
)
from mainspring.events import (
    Canvas,
    ErrorEvent,
    Event,
    PendingAction,
    StreamStarted,
    TextDelta,
    ThinkingDelta,
    ThinkingDone,
    ToolCallDelta,
    ToolProgress,
    ToolResult,
    ToolStart,
    TurnComplete,
    UsageEvent,
)
from mainspring.guards import Guard
from mainspring.hooks import Hooks
from mainspring.messages import Message
from mainspring.models.scripted import ScriptedCall, ScriptedModel, ScriptedResponse
from mainspring.permissions import Allow, Deny, PermissionRules, UsdTiers
from mainspring.session import Session
from mainspring.sse import parse_sse, serialize_sse
from mainspring.tools import (
    Flag,
    Tool,
    ToolContext,
    ToolOutput,
    ToolRegistry,
    client_tool,
    tool,
    usd,
)
from mainspring.usage import Usage

__all__ = [
    "Agent",
    "Allow",
    "ApprovalError",
    "Approve",
    "BudgetExceeded",
    "Canvas",
    "ClientResult",
    "ConfigError",
    "CostTracker",
    "Decision",
    "DecisionConflict",
    "Deny",
    "ErrorEvent",
    "Event",
    "FieldNotModifiable",
    "Flag",
    "Guard",
    "Hooks",
    "MainspringError",
    "Message",
    "ModelError",
    "ModelPrice",
    "PendingAction",
    "PermissionRules",
    "Reject",
    "ScriptedCall",
    "ScriptedModel",
    "ScriptedResponse",
    "Session",
    "SessionBusy",
    "StreamStarted",
    "TextDelta",
    "ThinkingDelta",
    "ThinkingDone",
    "Tool",
    "ToolCallDelta",
    "ToolContext",
    "ToolError",
    "ToolInputError",
    "ToolOutput",
    "ToolProgress",
    "ToolRegistry",
    "ToolResult",
    "ToolStart",
    "ToolTimeout",
    "TurnComplete",
    "UnknownAttempt",
    "Usage",
    "UsageEvent",
    "UsdTiers",
    "__version__",
    "client_tool",
    "parse_sse",
    "serialize_sse",
    "tool",
    "usd",
]
