"""ToolContext: what a running tool may know about and do to its run."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from pydantic import JsonValue

from mainspring.events import Canvas, Event, ToolProgress

__all__ = ["ToolContext"]


class ToolContext:
    """Passed to any tool parameter annotated ``ToolContext``.

    Safe to use from sync tools, which run in worker threads.
    """

    __slots__ = (
        "_cancelled",
        "_charge",
        "_emit",
        "_loop_thread",
        "agent_name",
        "cache",
        "session_id",
        "tool_name",
        "tool_use_id",
        "turn_index",
    )

    def __init__(
        self,
        *,
        session_id: str,
        agent_name: str,
        tool_use_id: str,
        tool_name: str,
        turn_index: int,
        cache: dict[str, Any],
        emit: Callable[[Event], None],
        charge: Callable[[float, str], None] | None = None,
    ) -> None:
        self.session_id = session_id
        """The session this call belongs to."""
        self.agent_name = agent_name
        self.tool_use_id = tool_use_id
        self.tool_name = tool_name
        self.turn_index = turn_index
        self.cache = cache
        """Shared by every tool call of the current turn, then dropped."""
        self._emit = emit
        self._charge = charge
        self._loop_thread = threading.get_ident()
        self._cancelled = False

    @property
    def cancelled(self) -> bool:
        """True once the run was cancelled; long sync tools should check it and stop."""
        return self._cancelled

    def _cancel(self) -> None:
        self._cancelled = True

    def _send(self, event: Event) -> None:
        if threading.get_ident() == self._loop_thread:
            self._emit(event)
        else:
            import anyio.from_thread  # only sync tools, in worker threads, get here

            anyio.from_thread.run_sync(self._emit, event)

    def progress(self, message: str, pct: float | None = None) -> None:
        """Emit a ``tool_progress`` event (``pct`` from 0 to 100 when known)."""
        self._send(
            ToolProgress(
                tool_use_id=self.tool_use_id, name=self.tool_name, message=message, pct=pct
            )
        )

    def charge(self, usd: float, *, what: str = "") -> None:
        """Count ``usd`` spent by this call against the session's spend and budget.

        For what a tool spends beyond the session's own model calls (a
        subagent's model calls); the loop reports it as a ``usage`` event.
        """
        if usd < 0:
            raise ValueError(f"a charge must not be negative, got {usd}")
        if self._charge is not None and usd:
            self._charge(usd, what or self.tool_name)

    def canvas(self, kind: str, data: JsonValue, *, title: str = "") -> None:
        """Emit a ``canvas`` event for the host to render."""
        self._send(Canvas(kind=kind, data=data, title=title, tool_use_id=self.tool_use_id))
