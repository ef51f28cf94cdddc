"""What one step of a turn came to: the loop goes on, waits for a decision, or ends.

```
StepOutcome = Paused | Continue | Finish(reason)
```

The dispatcher's serial pass, a regeneration, an answer without calls and a
steering check each return one; :class:`~mainspring._run.loop.Loop` matches it
(``match`` with ``assert_never``, so a new kind cannot go unhandled).

``Paused`` and ``Continue`` carry nothing, so they are the two members of
:class:`Step` (matched as ``case Step.PAUSED:``, a comparison); a class pattern
such as ``case Paused():`` would build a set and a list on every match (CPython's
``MATCH_CLASS``), once a step.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

from mainspring.events import StopReason

__all__ = ["CONTINUE", "PAUSED", "Continue", "Finish", "Paused", "Step", "StepOutcome"]


class Step(enum.Enum):
    """The outcomes that carry nothing: the turn waits, or goes on."""

    PAUSED = "paused"
    """The turn waits for a decision on its pending action (``turn.status == "paused"``)."""
    CONTINUE = "continue"
    """The turn goes on: the rest of the step, or its next step."""


Paused: TypeAlias = Literal[Step.PAUSED]
Continue: TypeAlias = Literal[Step.CONTINUE]
PAUSED: Final = Step.PAUSED
CONTINUE: Final = Step.CONTINUE


@dataclass(frozen=True, slots=True)
class Finish:
    """The turn ends with ``reason`` (its ``turn_complete``'s stop reason)."""

    reason: StopReason


StepOutcome: TypeAlias = Paused | Continue | Finish
