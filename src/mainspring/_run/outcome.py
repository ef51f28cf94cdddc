"""What one step of a turn came to: the loop goes on, waits for a decision, or ends.

```
StepOutcome = Paused | Continue | Finish(reason)
```

The dispatcher's serial pass, a regeneration, an answer without calls and a
steering check each return one; :class:`~mainspring._run.loop.Loop` matches it
(``match`` with ``assert_never``, so a new kind cannot go unhandled).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from mainspring.events import StopReason

__all__ = ["CONTINUE", "PAUSED", "Continue", "Finish", "Paused", "StepOutcome"]


@dataclass(frozen=True, slots=True)
class Paused:
    """The turn waits for a decision on its pending action (``turn.status == "paused"``)."""


@dataclass(frozen=True, slots=True)
class Continue:
    """The turn goes on: the rest of the step, or its next step."""


@dataclass(frozen=True, slots=True)
class Finish:
    """The turn ends with ``reason`` (its ``turn_complete``'s stop reason)."""

    reason: StopReason


StepOutcome: TypeAlias = Paused | Continue | Finish

PAUSED = Paused()
CONTINUE = Continue()
