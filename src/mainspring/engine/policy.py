"""Who may see and call what in an engine: the management policy.

Visibility decides what callers who are not managers may do:

- ``private`` (the default): nothing; only the controller and managers call.
- ``protected``: identified callers (not anonymous) call what is exported.
- ``public``: anyone, anonymous included, calls what is exported.

Managers (and the controller) see and call everything, exported or not.
Identity is the caller's ``kind`` and ``id``; request metadata never counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mainspring.errors import AccessDenied, ConfigError
from mainspring.principals import Caller

__all__ = ["ManagementPolicy", "Visibility"]

Visibility = Literal["private", "protected", "public"]
"""Who may call an engine's exported members besides its managers."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ManagementPolicy:
    """The controller, the managers, and what everyone else may reach."""

    controller: Caller | None = None
    managers: frozenset[Caller] = frozenset()
    visibility: Visibility = "private"

    def __post_init__(self) -> None:
        if self.visibility not in ("private", "protected", "public"):
            raise ConfigError(
                f"visibility must be 'private', 'protected' or 'public', not {self.visibility!r}"
            )
        everyone = [self.controller, *self.managers]
        if any(c is not None and c.anonymous for c in everyone):
            raise ConfigError("the anonymous caller cannot manage an engine")

    def is_manager(self, caller: Caller) -> bool:
        """Whether ``caller`` is the controller or a manager."""
        if caller.anonymous:
            return False
        keys = {m.key for m in self.managers}
        if self.controller is not None:
            keys.add(self.controller.key)
        return caller.key in keys

    def check_caller(self, caller: Caller, engine: str) -> None:
        """Refuse a caller the engine does not serve at all.

        Raises:
            AccessDenied: The engine is private and the caller no manager, or it
                is protected and the caller anonymous.
        """
        if self.is_manager(caller):
            return
        if self.visibility == "private":
            raise AccessDenied(
                f"engine {engine!r} is private: only its managers may call it "
                f"(caller {caller.key!r} is not one)",
                target=engine,
            )
        if self.visibility == "protected" and caller.anonymous:
            raise AccessDenied(
                f"engine {engine!r} serves identified callers only; this request is anonymous",
                target=engine,
            )
