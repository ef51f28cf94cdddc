"""mainspring: an agent engine for Python.

An application hands a :class:`Session` a user's message and iterates the
events it streams back while the engine calls the model, runs reads in
parallel, pauses writes for approval, and keeps going until the turn is done.
"""

from typing import TYPE_CHECKING

from mainspring._lowlevel.lazy import lazy_attributes
from mainspring._version import __version__

if TYPE_CHECKING:
    from mainspring.agent import Agent, Limits
    from mainspring.context.options import ContextOptions
    from mainspring.cost import CostTracker, ModelPrice
    from mainspring.decisions import Approve, ClientResult, Decision, Reject
    from mainspring.embeddings import Embedder, HashingEmbedder
    from mainspring.errors import (
        ApprovalError,
        ConfigError,
        DecisionConflict,
        FieldNotModifiable,
        GuardrailTripwire,
        InputChanged,
        InvalidEdits,
        LeaseLost,
        MainspringError,
        ModelError,
        RunFailed,
        SessionBusy,
        SessionClosed,
        ToolError,
        ToolInputError,
        ToolTimeout,
        UnknownAttempt,
    )
    from mainspring.events import (
        Canvas,
        ErrorEvent,
        Event,
        GuardrailVerdict,
        PendingAction,
        SteeringQueued,
        SteeringTaken,
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
    from mainspring.guardrails import Guardrail, GuardrailContext, GuardrailResult
    from mainspring.guards import Guard
    from mainspring.hooks import Hooks
    from mainspring.messages import Message
    from mainspring.models.scripted import ScriptedCall, ScriptedModel, ScriptedResponse
    from mainspring.permissions import Allow, Deny, PermissionRules, UsdTiers
    from mainspring.result import RunResult
    from mainspring.session import Session
    from mainspring.sse import parse_sse, serialize_sse
    from mainspring.subagents import SubagentHandle, subagent_tool
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

# Names load on first use (PEP 562), so `import mainspring` stays cheap and
# `from mainspring import Agent` loads only what Agent needs.
_LAZY: dict[str, str] = {
    "Agent": "mainspring.agent",
    "Allow": "mainspring.permissions",
    "ApprovalError": "mainspring.errors",
    "Approve": "mainspring.decisions",
    "Canvas": "mainspring.events",
    "ClientResult": "mainspring.decisions",
    "ConfigError": "mainspring.errors",
    "CostTracker": "mainspring.cost",
    "Decision": "mainspring.decisions",
    "DecisionConflict": "mainspring.errors",
    "Deny": "mainspring.permissions",
    "ErrorEvent": "mainspring.events",
    "Event": "mainspring.events",
    "FieldNotModifiable": "mainspring.errors",
    "Flag": "mainspring.tools",
    "Guard": "mainspring.guards",
    "Guardrail": "mainspring.guardrails",
    "GuardrailContext": "mainspring.guardrails",
    "GuardrailResult": "mainspring.guardrails",
    "GuardrailTripwire": "mainspring.errors",
    "GuardrailVerdict": "mainspring.events",
    "Hooks": "mainspring.hooks",
    "InputChanged": "mainspring.errors",
    "InvalidEdits": "mainspring.errors",
    "LeaseLost": "mainspring.errors",
    "MainspringError": "mainspring.errors",
    "Limits": "mainspring.agent",
    "ContextOptions": "mainspring.context.options",
    "Embedder": "mainspring.embeddings",
    "HashingEmbedder": "mainspring.embeddings",
    "Message": "mainspring.messages",
    "ModelError": "mainspring.errors",
    "ModelPrice": "mainspring.cost",
    "PendingAction": "mainspring.events",
    "PermissionRules": "mainspring.permissions",
    "Reject": "mainspring.decisions",
    "ScriptedCall": "mainspring.models.scripted",
    "ScriptedModel": "mainspring.models.scripted",
    "ScriptedResponse": "mainspring.models.scripted",
    "RunFailed": "mainspring.errors",
    "RunResult": "mainspring.result",
    "Session": "mainspring.session",
    "SessionBusy": "mainspring.errors",
    "SessionClosed": "mainspring.errors",
    "SteeringQueued": "mainspring.events",
    "SteeringTaken": "mainspring.events",
    "StreamStarted": "mainspring.events",
    "SubagentHandle": "mainspring.subagents",
    "TextDelta": "mainspring.events",
    "ThinkingDelta": "mainspring.events",
    "ThinkingDone": "mainspring.events",
    "Tool": "mainspring.tools",
    "ToolCallDelta": "mainspring.events",
    "ToolContext": "mainspring.tools",
    "ToolError": "mainspring.errors",
    "ToolInputError": "mainspring.errors",
    "ToolOutput": "mainspring.tools",
    "ToolProgress": "mainspring.events",
    "ToolRegistry": "mainspring.tools",
    "ToolResult": "mainspring.events",
    "ToolStart": "mainspring.events",
    "ToolTimeout": "mainspring.errors",
    "TurnComplete": "mainspring.events",
    "UnknownAttempt": "mainspring.errors",
    "Usage": "mainspring.usage",
    "UsageEvent": "mainspring.events",
    "UsdTiers": "mainspring.permissions",
    "client_tool": "mainspring.tools",
    "parse_sse": "mainspring.sse",
    "subagent_tool": "mainspring.subagents",
    "serialize_sse": "mainspring.sse",
    "tool": "mainspring.tools",
    "usd": "mainspring.tools",
}


__getattr__, __dir__ = lazy_attributes("mainspring", globals(), _LAZY)


__all__ = [
    "Agent",
    "Allow",
    "ApprovalError",
    "Approve",
    "Canvas",
    "ClientResult",
    "ConfigError",
    "ContextOptions",
    "CostTracker",
    "Decision",
    "DecisionConflict",
    "Deny",
    "Embedder",
    "ErrorEvent",
    "Event",
    "FieldNotModifiable",
    "Flag",
    "Guard",
    "Guardrail",
    "GuardrailContext",
    "GuardrailResult",
    "GuardrailTripwire",
    "GuardrailVerdict",
    "HashingEmbedder",
    "Hooks",
    "InputChanged",
    "InvalidEdits",
    "LeaseLost",
    "Limits",
    "MainspringError",
    "Message",
    "ModelError",
    "ModelPrice",
    "PendingAction",
    "PermissionRules",
    "Reject",
    "RunFailed",
    "RunResult",
    "ScriptedCall",
    "ScriptedModel",
    "ScriptedResponse",
    "Session",
    "SessionBusy",
    "SessionClosed",
    "SteeringQueued",
    "SteeringTaken",
    "StreamStarted",
    "SubagentHandle",
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
    "subagent_tool",
    "tool",
    "usd",
]
