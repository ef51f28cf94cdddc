"""What the CLI takes on its command line: agent and model strings.

``package.module:agent`` names an agent like uvicorn's app strings name an
app; ``provider:model`` names a model (see :mod:`mainspring.models.registry`).
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import TypeVar

from mainspring.agent import Agent
from mainspring.errors import ConfigError, MainspringError
from mainspring.models.base import Model
from mainspring.models.registry import missing_credentials, model_from_string

__all__ = ["load_agent", "load_attribute", "load_model", "load_named"]

T = TypeVar("T")


def load_agent(spec: str) -> Agent:
    """The :class:`Agent` named by ``"package.module:attribute"``.

    The attribute may be an agent or a function of no arguments returning one.
    The current directory is importable, so ``my_agent:agent`` finds
    ``./my_agent.py``.

    Raises:
        ConfigError: The string is malformed, the module or attribute is missing,
            or it does not give an Agent.
    """
    return load_named(spec, Agent, "an Agent")


def load_named(spec: str, kind: type[T], what: str) -> T:
    """The ``kind`` named by ``"package.module:attribute"`` (or made by calling it).

    Raises:
        ConfigError: The string is malformed, the module or attribute is missing,
            or it does not give a ``kind``.
    """
    value = load_attribute(spec, what)
    if not isinstance(value, kind) and callable(value):
        try:
            value = value()
        except MainspringError:
            raise
        except Exception as exc:
            raise ConfigError(
                f"calling {spec} to make {what} failed: {type(exc).__name__}: {exc}"
            ) from exc
    if not isinstance(value, kind):
        raise ConfigError(f"{spec!r} is of type {type(value).__name__}, not {what}")
    return value


def load_attribute(spec: str, what: str) -> object:
    """The object ``"package.module:attribute"`` names, as it is (not called).

    Raises:
        ConfigError: The string is malformed, or the module or attribute is missing.
    """
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigError(f"{what} is named 'package.module:attribute', not {spec!r}")
    if module_name.endswith(".py") or "/" in module_name or "\\" in module_name:
        module, where = _module_of(module_name)
        raise ConfigError(
            f"{spec!r} names a file; name its module instead: {module}:{attribute}{where}"
        )
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    value: object = _import(module_name, spec)
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise ConfigError(f"{module_name!r} has no attribute {attribute!r}") from None
    return value


def _module_of(file: str) -> tuple[str, str]:
    """The module a file path names, and where to run from to import it so."""
    path = Path(file).with_suffix("")
    parts = [part for part in path.parts if part != "."]
    if path.is_absolute() or ".." in parts:
        return path.name, f" (run from {path.parent})"
    return ".".join(parts), ""


def _import(module_name: str, spec: str) -> ModuleType:
    """The module, or a :class:`ConfigError` that says why it cannot be imported."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            where = f"no module {module_name!r} here ({os.getcwd()}) or on the Python path"
            raise ConfigError(f"cannot import {spec!r}: {where}") from exc
        raise ConfigError(f"cannot import {module_name!r} for {spec!r}: {exc}") from exc
    except ImportError as exc:
        raise ConfigError(f"cannot import {module_name!r} for {spec!r}: {exc}") from exc
    except SyntaxError as exc:
        where = f"{exc.filename}:{exc.lineno}" if exc.filename else module_name
        raise ConfigError(f"{where}: syntax error in {module_name!r}: {exc.msg}") from exc
    except Exception as exc:
        raise ConfigError(
            f"importing {module_name!r} failed: {type(exc).__name__}: {exc} "
            "(--debug shows the traceback)"
        ) from exc


def load_model(spec: str) -> Model:
    """The model a model string names, such as ``"anthropic:claude-sonnet-4-5"``.

    Raises:
        ConfigError: The provider is unknown, its credentials are missing, or its
            extra is not installed (the message names the ``pip install``).
    """
    try:
        problem = missing_credentials(spec)
        if problem is None:
            return model_from_string(spec)
    except ImportError as exc:
        problem = str(exc)
    raise ConfigError(problem)
