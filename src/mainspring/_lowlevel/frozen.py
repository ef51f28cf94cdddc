"""Cheaper frozen, slotted dataclasses: faster to build, and faster to define.

:func:`dataclass` is ``dataclasses.dataclass`` for the package's own modules.
For a frozen, slotted class it gives the same class (``fields``,
``replace``, ``__match_args__``, immutability, equality, hashing, ``repr``,
copying and pickling as the dataclass's) without compiling six methods per
class: Python's dataclasses ``exec`` the source of each, which was most of
the cost of importing mainspring. Its equality, hash and ``repr`` are shared
functions over each class's fields; its ``__init__`` is generated as below.
Any other class goes to ``dataclasses.dataclass`` unchanged.

:func:`fast_init` speeds up construction:

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

import copy
import dataclasses
import inspect
import reprlib
from collections.abc import Callable
from operator import attrgetter
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

__all__ = ["ORIGINAL", "RECORDS", "dataclass", "fast_init", "generate"]

T = TypeVar("T")
P = ParamSpec("P")

ORIGINAL: dict[type, Any] = {}
"""Each class's own dataclass ``__init__`` (the tests check the two agree)."""

RECORDS: list[type] = []
"""The classes :func:`dataclass` made without compiling the dataclass's methods
(the tests check each against a class the standard decorator makes)."""

_OWN = ("__init__", "__repr__", "__eq__", "__setattr__", "__delattr__", "__getstate__")
"""Methods a class may write itself: such a class goes to the standard decorator."""


class _Factory:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<factory>"  # (as the dataclass's signature shows it)


_FACTORY = _Factory()
"""The default of a field with a default factory (as dataclasses does it)."""


def fast_init(cls: type[T]) -> type[T]:
    """Replace ``cls.__init__`` (a frozen, slotted dataclass) with a faster equivalent."""
    if cls in RECORDS:
        return cls  # (its __init__ is the fast one already)
    params = cls.__dataclass_params__  # type: ignore[attr-defined]  # set by @dataclass, untyped
    if not (dataclasses.is_dataclass(cls) and params.frozen and params.init):
        raise TypeError(f"{cls.__name__} is not a frozen dataclass with an __init__")
    if "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__name__} has no slots")
    init = _make_init(cls)
    init.__doc__ = cls.__init__.__doc__
    ORIGINAL[cls] = cls.__init__
    cls.__init__ = init  # type: ignore[method-assign]  # the point: a faster constructor
    return cls


def generate(
    source: str, namespace: dict[str, Any], name: str, *, qualname: str | None = None
) -> Callable[..., Any]:
    """The function ``name`` that ``source`` defines, compiled with ``namespace`` as globals.

    The one place the package generates code (as ``dataclasses`` does): a
    function made for one class, from identifiers the caller checked (a
    class's field names), never from outside input.
    """
    exec(source, namespace)
    made: Callable[..., Any] = namespace[name]
    made.__name__ = name
    made.__qualname__ = qualname or name
    return made


def _field_code(
    cls: type, i: int, f: dataclasses.Field[Any], namespace: dict[str, Any]
) -> tuple[str, str]:
    """A generated constructor's parameter for field ``f`` and the line that stores it."""
    namespace[f"_set{i}"] = cls.__dict__[f.name].__set__
    value = f.name
    if f.default is not dataclasses.MISSING:
        namespace[f"_default{i}"] = f.default
        param = f"{f.name}=_default{i}"
    elif f.default_factory is not dataclasses.MISSING:
        namespace[f"_factory{i}"] = f.default_factory
        param = f"{f.name}=_FACTORY"
        value = f"_factory{i}() if {f.name} is _FACTORY else {f.name}"
    else:
        param = f.name
    return param, f"    _set{i}(self, {value})"


def _make_init(cls: type) -> Callable[..., None]:
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
        param, store = _field_code(cls, i, f, namespace)
        (keyword if f.kw_only else positional).append(param)
        body.append(store)
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    params_text = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    source = f"def __init__({params_text}):\n" + ("\n".join(body) or "    pass") + "\n"
    init = generate(source, namespace, "__init__", qualname=f"{cls.__qualname__}.__init__")
    init.__annotations__ = {**{f.name: f.type for f in fields}, "return": None}
    return init


if TYPE_CHECKING:
    from dataclasses import dataclass as dataclass
else:

    def dataclass(cls=None, /, **options):
        """``dataclasses.dataclass``; a frozen, slotted class is made without compiling."""

        def wrap(cls):
            if _plain_record(cls, options):
                return _record(cls, options)
            return dataclasses.dataclass(cls, **options)

        return wrap if cls is None else wrap(cls)


def _plain_record(cls: type, options: dict[str, Any]) -> bool:
    """Whether ``cls`` is frozen and slotted and asks nothing else of the decorator."""
    if not (options.get("frozen") and options.get("slots")):
        return False
    if not all(options.get(name, True) for name in ("init", "repr", "eq")):
        return False
    if any(options.get(name) for name in ("order", "unsafe_hash", "weakref_slot")):
        return False
    if any(name in cls.__dict__ for name in _OWN) or cls.__dict__.get("__hash__") is not None:
        return False
    if any(dataclasses.is_dataclass(base) for base in cls.__mro__[1:]):
        return False
    notes = inspect.get_annotations(cls)
    return not any("InitVar" in str(note) or "ClassVar" in str(note) for note in notes.values())


def _record(cls: type, options: dict[str, Any]) -> type:
    made: type = dataclasses.dataclass(  # fields, slots and __match_args__ only
        cls,
        init=False,
        repr=False,
        eq=False,
        frozen=False,
        slots=True,
        kw_only=options.get("kw_only", False),
        match_args=options.get("match_args", True),
    )
    params = copy.copy(made.__dataclass_params__)  # type: ignore[attr-defined]  # as above
    params.init = params.repr = params.eq = params.frozen = True  # what it is, as made here
    made.__dataclass_params__ = params  # type: ignore[attr-defined]  # as above
    for name, method in _methods(made).items():
        method.__qualname__ = f"{made.__qualname__}.{name}"
        setattr(made, name, method)
    RECORDS.append(made)
    return made


def _methods(made: type) -> dict[str, Callable[..., Any]]:
    """The dataclass's methods for ``made``, as shared functions over its fields."""
    fields = dataclasses.fields(made)
    names = frozenset(f.name for f in fields)
    compared = _key([f.name for f in fields if f.compare])
    hashed = _key([f.name for f in fields if (f.compare if f.hash is None else f.hash)])
    shown = [f.name for f in fields if f.repr]

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is made or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        object.__setattr__(self, name, value)  # (a name outside the fields, on a subclass)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is made or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        object.__delattr__(self, name)

    def __eq__(self: Any, other: object) -> bool:
        if other.__class__ is self.__class__:
            return bool(compared(self) == compared(other))
        return NotImplemented

    def __hash__(self: Any) -> int:
        return hash(hashed(self))

    @reprlib.recursive_repr()
    def __repr__(self: Any) -> str:
        shown_fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in shown)
        return f"{self.__class__.__qualname__}({shown_fields})"

    def __getstate__(self: Any) -> list[Any]:
        return [getattr(self, f.name) for f in fields]

    def __setstate__(self: Any, state: list[Any]) -> None:
        for f, value in zip(fields, state, strict=True):
            object.__setattr__(self, f.name, value)

    return {
        "__setattr__": __setattr__,
        "__delattr__": __delattr__,
        "__eq__": __eq__,
        "__hash__": __hash__,
        "__repr__": __repr__,
        "__getstate__": __getstate__,
        "__setstate__": __setstate__,
        "__init__": _make_init(made),
    }


def _key(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """The fields' values as a tuple (as the dataclass compares and hashes them)."""
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    if not names:
        return lambda obj: ()
    return attrgetter(*names)  # (a tuple for two names or more)
