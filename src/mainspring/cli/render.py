"""How the CLI shows a run: events as they stream, and approval panels.

Nothing here parses rich markup out of text it did not write: an exception
that says ``pip install "mainspring[anthropic]"`` prints with its brackets.
How a command fails (one line, an exit code) is :mod:`mainspring.cli.exit`.
"""

from __future__ import annotations

import json

from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from mainspring.events import (
    ErrorEvent,
    Event,
    GuardrailVerdict,
    PendingAction,
    TextDelta,
    ThinkingDelta,
    ThinkingDone,
    ToolProgress,
    ToolResult,
    ToolStart,
    TurnComplete,
    UsageEvent,
)

__all__ = ["Renderer", "approval_panel", "styled"]


def styled(*parts: str | tuple[str, str]) -> Text:
    """Text with styled parts; never parsed as markup (``[anthropic]`` stays as it is)."""
    return Text.assemble(*parts)


def approval_panel(action: PendingAction) -> Panel:
    """A pending action: the call, why it waits, what may be edited, its attempt id."""
    lines = [f"  {json.dumps(action.input)}", f"why: {action.reason}"]
    if action.modifiable_fields:
        lines.append("may edit: " + ", ".join(action.modifiable_fields))
    lines.extend(f"{key}: {json.dumps(value)}" for key, value in action.details.items())
    lines.append(f"attempt: {action.attempt_id}")
    lines.extend(  # e.g. a workspace write's diff preview
        f"{finding.source}:\n{finding.message}"
        for finding in action.findings
        if finding.message and finding.message != action.reason
    )
    body = Text.assemble((action.name, "bold"), "\n".join(lines))
    return Panel(body, title="approval needed", border_style="yellow")


class Renderer:
    """Prints events as they stream."""

    def __init__(self, console: Console, *, debug: bool = False) -> None:
        self.console = console
        self.debug = debug
        """With ``--debug`` the log shows an internal error's traceback: no hint then."""
        self.thinking = False
        self.at_line_start = True

    def _newline(self) -> None:
        if not self.at_line_start:
            self.console.print()
            self.at_line_start = True

    def _aside(self, event: UsageEvent | GuardrailVerdict) -> None:
        """Usage is not shown; a tripped guardrail is."""
        if isinstance(event, GuardrailVerdict) and event.tripwire:
            self._newline()
            reason = f": {event.reason}" if event.reason else ""
            self.console.print(
                Text(f"stopped by {event.stage} guardrail {event.name}{reason}", style="red")
            )

    def show(self, event: Event) -> None:
        """Print one event as the terminal shows it."""
        c = self.console
        if isinstance(event, ThinkingDelta):
            if not self.thinking:
                self._newline()
                c.print("thinking: ", style="dim italic", end="")
                self.thinking = True
            c.print(event.text, style="dim italic", end="", highlight=False)
            self.at_line_start = False
        elif isinstance(event, ThinkingDone):
            self.thinking = False
            self._newline()
        elif isinstance(event, TextDelta):
            c.print(event.text, end="", highlight=False, markup=False)
            self.at_line_start = event.text.endswith("\n")
        elif isinstance(event, ToolStart):
            self._newline()
            c.print(Text.assemble(("→ " + event.name, "cyan"), f"({json.dumps(event.input)})"))
        elif isinstance(event, ToolProgress):
            pct = f" {event.pct:.0f}%" if event.pct is not None else ""
            c.print(Text(f"  … {event.name}: {event.message}{pct}", style="dim"))
        elif isinstance(event, ToolResult):
            self._newline()
            style = "red" if event.is_error else "green"
            c.print(Text.assemble(("← " + event.name, style), ": " + event.content))
        elif isinstance(event, UsageEvent | GuardrailVerdict):
            self._aside(event)
        elif isinstance(event, PendingAction):
            self._newline()
        elif isinstance(event, TurnComplete) and event.stop_reason != "pending_action":
            self._newline()
            u = event.usage
            c.print(
                Text(
                    f"turn complete ({event.stop_reason}) · {u.requests} model calls · "
                    f"{u.total_input_tokens} in / {u.output_tokens} out tokens · "
                    f"${event.cost_usd:.4f}",
                    style="dim",
                )
            )
        elif isinstance(event, ErrorEvent):
            self._error(event)

    def _error(self, event: ErrorEvent) -> None:
        """One line: the code, the message, and for a bug where its traceback is."""
        self._newline()
        internal = event.code == "internal_error" and not self.debug
        hint = " (--debug shows the traceback)" if internal else ""
        line = Text.assemble(("error", "bold red"), f" ({event.code}): {event.message}{hint}")
        self.console.print(line, soft_wrap=True)
