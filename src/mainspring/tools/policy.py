"""What a tool is allowed to do, and how the engine must treat it.

A :class:`ToolPolicy` is pure data. The engine reads it to decide whether a
call may run in parallel (read-only and concurrency-safe), whether it needs a
decision first (``permission``), how long it may take and how much of its
result the model will see.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from enum import StrEnum
from typing import Literal, TypeAlias

from mainspring._lowlevel.frozen import dataclass
from mainspring._lowlevel.json_value import JsonValue
from mainspring.errors import ConfigError

__all__ = [
    "DEFAULT_MAX_RESULT_CHARS",
    "PERMISSIONS",
    "PREVIEW_SOURCE",
    "Details",
    "Flag",
    "Permission",
    "PermissionResolver",
    "Preflight",
    "Preview",
    "Regenerate",
    "Summarize",
    "ToolInput",
    "ToolPolicy",
    "UsdAmount",
    "resolve_permission",
    "run_preflight",
    "usd",
]

Permission: TypeAlias = Literal["auto", "confirm"]
"""``auto`` runs at once; ``confirm`` pauses the turn for a decision."""

PERMISSIONS: tuple[Permission, ...] = ("auto", "confirm")
"""The static tiers a tool's ``permission`` string may name."""

ToolInput: TypeAlias = Mapping[str, JsonValue]
"""A call's validated input, as callbacks receive it."""

PermissionResolver: TypeAlias = Callable[[ToolInput], Permission]
"""Decides the tier from the call's (validated, JSON) input."""

Preflight: TypeAlias = Callable[[ToolInput], "str | Awaitable[str | None] | None"]
Preview: TypeAlias = Callable[[ToolInput], str]
"""What the approver of a paused call is shown (the path and a diff of a write, say).

Called in a worker thread when the call pauses; a preview that raises shows why."""
PREVIEW_SOURCE = "preview"
"""The ``source`` of the finding that carries a tool's preview in its pending action."""
"""Returns an error message when the call should not run (and not be asked about)."""

Details: TypeAlias = Callable[
    [ToolInput], "Mapping[str, JsonValue] | Awaitable[Mapping[str, JsonValue]]"
]
"""A paused call's extension fields for the approver (a quote, a route, projected values).

Sync ones run in a worker thread; one that raises puts ``details_error`` in their place."""
Regenerate: TypeAlias = Callable[[ToolInput], "ToolInput | Awaitable[ToolInput]"]
"""A fresh input for a paused call (a new quote), from the input the model asked for."""
Summarize: TypeAlias = Callable[[str, int], "str | Awaitable[str]"]
"""``(content, limit) -> text`` for a result over the tool's ``max_result_chars``."""

DEFAULT_MAX_RESULT_CHARS = 50_000


class Flag(StrEnum):
    """Well-known tool flags; any other string is allowed too."""

    MUTATING = "mutating"
    IRREVERSIBLE = "irreversible"
    REQUIRES_BALANCE = "requires_balance"
    AFFECTS_HEALTH = "affects_health"
    EXTERNAL = "external"
    """Reaches outside the process (network, third parties)."""


@dataclass(frozen=True, slots=True)
class UsdAmount:
    """Permission by money: the session's USD tiers decide from ``amount(input)``."""

    amount: Callable[[ToolInput], float | None]


def usd(amount: Callable[[ToolInput], float | None]) -> UsdAmount:
    """Resolve a tool's permission from the USD amount its input moves.

    ```python
    @tool(permission=usd(lambda args: float(args["amount_usd"])))
    async def send_payment(to: str, amount_usd: float) -> str: ...
    ```
    """
    return UsdAmount(amount)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolPolicy:
    """How the engine must treat a tool."""

    read_only: bool = False
    concurrency_safe: bool | None = None
    """Defaults to ``read_only``: reads may run in parallel, writes never do."""
    permission: Permission | PermissionResolver | UsdAmount = "auto"
    flags: frozenset[str] = frozenset()
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS
    preflight: Preflight | None = None
    modifiable_fields: tuple[str, ...] = ()
    """Fields an approver may edit before approving."""
    timeout: float | None = None
    """Seconds; a call running longer becomes an error result."""
    preview: Preview | None = None
    """Shown with a pending action of this tool (a finding, ``source="preview"``)."""
    details: Details | None = None
    """Extension fields of this tool's pending actions (``PendingAction.details``)."""
    regenerate: Regenerate | None = None
    """Makes a fresh input for a paused call (``Session.regenerate``)."""
    post_write_refresh: tuple[str, ...] = ()
    """Read tools re-run (with no arguments) after a successful call of this
    write; their fresh results are added to its result, so the model sees them
    before it answers."""
    summarize_on_truncate: Summarize | None = None
    """Shortens a result over ``max_result_chars`` instead of cutting it (what it
    returns is still cut to the limit; one that raises falls back to the cut)."""

    def __post_init__(self) -> None:
        perm = self.permission
        if not (callable(perm) or isinstance(perm, UsdAmount) or perm in PERMISSIONS):
            raise ConfigError(
                f"permission {perm!r} is not a tier: use 'auto', 'confirm', "
                "a resolver of the input, or usd(...)"
            )

    @property
    def parallel(self) -> bool:
        """Whether calls may run concurrently with other reads."""
        safe = self.read_only if self.concurrency_safe is None else self.concurrency_safe
        return self.read_only and safe

    @property
    def is_write(self) -> bool:
        """Anything not read-only is a write."""
        return not self.read_only


def resolve_permission(
    policy: ToolPolicy, args: dict[str, JsonValue]
) -> tuple[Permission | None, float | None]:
    """The static tier, or ``(None, amount)`` when USD tiers must decide."""
    perm = policy.permission
    if isinstance(perm, UsdAmount):
        return None, perm.amount(args)
    if callable(perm):
        return perm(args), None
    return perm, None


async def run_preflight(policy: ToolPolicy, args: dict[str, JsonValue]) -> str | None:
    """Run the policy's preflight check (sync or async)."""
    if policy.preflight is None:
        return None
    result = policy.preflight(args)
    if inspect.isawaitable(result):
        result = await result
    return result
