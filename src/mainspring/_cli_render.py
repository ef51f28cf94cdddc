"""How the CLI shows a run: events as they stream, one-line messages, and failures.

Nothing here parses rich markup out of text it did not write: an exception
that says ``pip install "mainspring[anthropic]"`` prints with its brackets.

Every command fails the same way (:func:`failing_cleanly`): one line on
stderr and an exit code — 2 for a usage or configuration error (a bad agent
or model string, a store URL, a missing extra), 1 for a failure or an internal
error, 130 for Ctrl-C. ``--debug`` adds the traceback.
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer
from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from mainspring.errors import ConfigError, MainspringError
from mainspring.events import (
    ErrorEvent,
    Event,
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

__all__ = [
    "Debug",
    "Renderer",
    "approval_panel",
    "error_line",
    "exit_code_of",
    "failing_cleanly",
    "show_failure",
    "styled",
]


Debug = Annotated[
    bool, typer.Option("--debug", help="Show the traceback of an error, not only its line.")
]
"""The ``--debug`` option every command that can fail takes."""


def styled(*parts: str | tuple[str, str]) -> Text:
    """Text with styled parts; never parsed as markup (``[anthropic]`` stays as it is)."""
    return Text.assemble(*parts)


def error_line(console: Console, problem: object) -> None:
    """One line, ``error: …``, the message exactly as written."""
    console.print(styled(("error:", "red"), f" {problem}"), highlight=False, soft_wrap=True)


def exit_code_of(exc: BaseException) -> int:
    """2 for a usage or configuration error (a missing extra too), 130 for Ctrl-C, else 1."""
    if isinstance(exc, KeyboardInterrupt):
        return 130
    return 2 if isinstance(exc, ConfigError | ImportError) else 1


def show_failure(console: Console, exc: BaseException, *, debug: bool) -> None:
    """One line for ``exc`` (after its traceback with ``debug``); internal errors say so."""
    if debug:
        console.print(
            "".join(traceback.format_exception(exc)).rstrip(),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    if isinstance(exc, MainspringError | ImportError):
        error_line(console, exc)
    else:
        hint = "" if debug else " (--debug shows the traceback)"
        error_line(console, f"internal error: {type(exc).__name__}: {exc}{hint}")


@contextmanager
def failing_cleanly(*, debug: bool) -> Iterator[None]:
    """A command's body: any failure becomes one line on stderr and its exit code.

    Typer's own exits (``typer.Exit``, ``typer.Abort``) pass through untouched.
    """
    err = Console(stderr=True)
    try:
        yield
    except (typer.Exit, typer.Abort):
        raise
    except KeyboardInterrupt:
        err.print("interrupted", style="yellow", highlight=False)
        raise typer.Exit(130) from None
    except Exception as exc:
        show_failure(err, exc, debug=debug)
        raise typer.Exit(exit_code_of(exc)) from None


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

    def __init__(self, console: Console) -> None:
        self.console = console
        self.thinking = False
        self.at_line_start = True

    def _newline(self) -> None:
        if not self.at_line_start:
            self.console.print()
            self.at_line_start = True

    def show(self, event: Event) -> None:
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
        elif isinstance(event, UsageEvent):
            pass
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
            self._newline()
            c.print(Text.assemble(("error", "bold red"), f" ({event.code}): {event.message}"))
