"""The ``mainspring`` command line: ``mainspring = mainspring.cli:main``.

The typer application lives in :mod:`mainspring.cli.commands`; each subcommand family has
its own module here. ``app`` and ``main`` load on first use, so importing the package costs
nothing until a command runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mainspring.cli.commands import app, main

__all__ = ["app", "main"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from mainspring.cli import commands

        return getattr(commands, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
