"""The typed-output events as the UI doors send them: one value per event.

``output_partial``, ``output_retry`` and ``final_output`` become one JSON
object with a ``state`` (``partial``, ``retry``, ``final``): the AI SDK door
sends it as a ``data-output`` part updated in place, AG-UI as a
``mainspring.output`` custom event.
"""

from __future__ import annotations

from pydantic import JsonValue

from mainspring.events import FinalOutput, OutputPartial, OutputRetry

__all__ = ["output_value"]


def output_value(event: OutputPartial | OutputRetry | FinalOutput) -> dict[str, JsonValue]:
    """What a UI is sent for a typed-output event."""
    if isinstance(event, OutputRetry):
        return {"state": "retry", "reason": event.reason, "retries": event.retries}
    state = "partial" if isinstance(event, OutputPartial) else "final"
    return {"state": state, "output": event.output}
