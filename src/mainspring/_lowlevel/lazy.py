"""Lazy module attributes (PEP 562), for packages whose names load on first use."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

__all__ = ["lazy_attributes", "lazy_module"]


def lazy_attributes(
    package: str, namespace: dict[str, Any], names: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: ``names`` maps a name to its module."""

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # the next lookup is a plain global
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__


class _LazyModule(ModuleType):
    """Stands for a module until an attribute is first read from it."""

    def __getattr__(self, name: str) -> Any:  # only for names not fetched yet
        value = getattr(importlib.import_module(self.__name__), name)
        setattr(self, name, value)  # the next lookup is a plain attribute
        return value


def lazy_module(name: str) -> ModuleType:
    """Module ``name``, imported when an attribute is first read from what this returns.

    For a module only running code needs, so that importing ours does not load
    it. The import is an ordinary one (thread-safe, under the import lock), the
    first time any thread needs it; ``sys.modules`` is not touched before.
    """
    module = sys.modules.get(name)
    return module if module is not None else _LazyModule(name)
