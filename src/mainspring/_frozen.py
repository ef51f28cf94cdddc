"""A faster ``__init__`` for the engine's hot frozen, slotted dataclasses.

A frozen dataclass sets each field through ``object.__setattr__`` (frozen
classes refuse their own ``__setattr__``), a lookup and a call per field that
costs about a third of the object's construction. A slotted class has a
descriptor per field whose ``__set__`` does the same store directly; this
module generates the same ``__init__`` the dataclass would — keyword-only or
positional fields, defaults, default factories, ``__post_init__`` — storing
through those descriptors. The instances are the same: equality, hashing,
``repr``, ``replace`` and immutability are the dataclass's own.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

__all__ = ["ORIGINAL", "fast_init"]

T = TypeVar("T")

ORIGINAL: dict[type, Any] = {}
"""Each class's own dataclass ``__init__`` (the tests check the two agree)."""

_FACTORY = object()
"""The default of a field with a default factory (as dataclasses does it)."""


def fast_init(cls: type[T]) -> type[T]:
    """Replace ``cls.__init__`` (a frozen, slotted dataclass) with a faster equivalent."""
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    if not (dataclasses.is_dataclass(cls) and params.frozen and params.init):
        raise TypeError(f"{cls.__name__} is not a frozen dataclass with an __init__")
    if "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__name__} has no slots")
    fields = [f for f in dataclasses.fields(cls) if f.init]
    if len(fields) != len(dataclasses.fields(cls)) or any(
        isinstance(f.type, dataclasses.InitVar) for f in fields
    ):
        raise TypeError(f"{cls.__name__} has fields this generator does not handle")
    namespace: dict[str, Any] = {"_FACTORY": _FACTORY}
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    for i, f in enumerate(fields):
        namespace[f"_set{i}"] = cls.__dict__[f.name].__set__
        if f.default is not dataclasses.MISSING:
            namespace[f"_default{i}"] = f.default
            param = f"{f.name}=_default{i}"
            value = f.name
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"_factory{i}"] = f.default_factory
            param = f"{f.name}=_FACTORY"
            value = f"_factory{i}() if {f.name} is _FACTORY else {f.name}"
        else:
            param = f.name
            value = f.name
        (keyword if f.kw_only else positional).append(param)
        body.append(f"    _set{i}(self, {value})")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    params_text = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    source = f"def __init__({params_text}):\n" + ("\n".join(body) or "    pass") + "\n"
    exec(source, namespace)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__init__.__doc__
    ORIGINAL[cls] = cls.__init__
    cls.__init__ = init  # type: ignore[method-assign]
    return cls
