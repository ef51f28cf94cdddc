"""``JsonValue`` without importing pydantic until a schema needs it.

Type checkers see pydantic's ``JsonValue``. At run time the name is a marker
that hands pydantic its own ``JsonValue`` the first time a schema is built
over an annotation naming it, so the dataclasses of messages and events can be
defined (and ``mainspring`` imported) without loading pydantic, while their
validation and JSON schema stay exactly pydantic's.
"""

from __future__ import annotations

import typing
from typing import TYPE_CHECKING, Any

__all__ = ["JsonValue"]

if TYPE_CHECKING:
    from pydantic import JsonValue
else:

    class _JsonValueMarker:
        """Stands for ``pydantic.JsonValue`` in run-time annotations."""

        __slots__ = ()

        def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
            from pydantic import JsonValue

            return handler(JsonValue)

        def __or__(self, other: Any) -> Any:
            return typing.Union[self, other]  # noqa: UP007  # an instance, not a type

        def __ror__(self, other: Any) -> Any:
            return typing.Union[other, self]  # noqa: UP007  # an instance, not a type

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            raise TypeError("JsonValue is a type annotation, not a constructor")

        def __repr__(self) -> str:
            return "JsonValue"

    JsonValue = _JsonValueMarker()
