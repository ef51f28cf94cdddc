"""Lazy module attributes (PEP 562), for packages whose names load on first use."""

from __future__ import annotations

import importlib
import importlib.util
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


def lazy_module(name: str) -> ModuleType:
    """Module ``name``, executed on its first attribute access (importlib's ``LazyLoader``).

    For a module only running code needs, so that importing ours does not load
    it; an already imported module is returned as it is.
    """
    module = sys.modules.get(name)
    if module is not None:
        return module
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ImportError(f"no module named {name!r}", name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module
