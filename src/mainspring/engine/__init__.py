"""The engine: many agents and tools in one host, private by default.

An :class:`Engine` registers agents and tools, names a default agent, and
holds a :class:`ManagementPolicy`: a controller, managers, and a visibility
(``private`` by default, ``protected``, ``public``). Managers see and call
everything; other callers see (``information``) and call only what is
exported, and only if the visibility lets them in at all. Anything else is
refused with :class:`~mainspring.errors.AccessDenied`.

Direct calls (``tool_call``, ``agent_run``) take the model's path: a tool
call is a one-step turn through the dispatcher (permission rules, USD tiers,
guards, preflight, hooks, approvals, the write ledger), so a confirm-tier
tool pauses and the result carries the ``pending`` action, decided with
``decide``. Every run happens inside a
:class:`~mainspring.tools.context.RunScope`: tools see the verified caller
(``ctx.caller``), request metadata (``ctx.metadata``, never an authorization
source) and a storage namespace and cache of their own (``ctx.storage``,
``ctx.component_cache``) derived from their name; agent code reaches its own
through :func:`agent_storage`.

Every anonymous request is the one :data:`ANONYMOUS` caller: on a public
engine anonymous callers share its direct-call totals and, with
``one_run_per_caller``, its one run; a paused action is decided by whoever
holds its attempt id (a UUID4 returned only to the caller that paused).

Subagents are engine members (:mod:`mainspring.engine.members`) and remote
engines join over signed HTTP (:mod:`mainspring.engine.remote`, which needs
``pip install "mainspring[remote]"``).
"""

from __future__ import annotations

from mainspring.engine.core import Engine, agent_storage
from mainspring.engine.members import MemberSessions
from mainspring.engine.policy import ManagementPolicy, Visibility
from mainspring.engine.results import AgentRun, EngineInfo, ToolCallResult
from mainspring.errors import AccessDenied, CallerBusy, RemoteEngineError, SignatureRejected
from mainspring.principals import ANONYMOUS, Caller

__all__ = [
    "ANONYMOUS",
    "AccessDenied",
    "AgentRun",
    "Caller",
    "CallerBusy",
    "Engine",
    "EngineInfo",
    "ManagementPolicy",
    "MemberSessions",
    "RemoteEngineError",
    "SignatureRejected",
    "ToolCallResult",
    "Visibility",
    "agent_storage",
]
