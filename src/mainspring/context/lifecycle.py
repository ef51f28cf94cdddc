"""One active context engine per session key.

:class:`EngineRegistry` hands out engines by session key and refuses a
second live one for the same key (:class:`~mainspring.errors.EngineActiveError`),
so two compiles never race over one transcript. Destroying an engine through
the registry frees its key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from mainspring.context.compiler import ContextEngine
from mainspring.errors import EngineActiveError

__all__ = ["EngineRegistry"]

T = TypeVar("T")


class EngineRegistry(Generic[T]):
    """Session key → its one active :class:`ContextEngine`."""

    def __init__(self) -> None:
        """An empty registry."""
        self._engines: dict[str, ContextEngine[T]] = {}

    def create(
        self, key: str, factory: Callable[[], ContextEngine[T]] | None = None, **kwargs: Any
    ) -> ContextEngine[T]:
        """Make the engine for ``key`` (``factory()`` or ``ContextEngine(**kwargs)``).

        Raises EngineActiveError if ``key`` already has a live engine.
        """
        current = self._engines.get(key)
        if current is not None and not current.destroyed:
            raise EngineActiveError(
                f"session {key!r} already has an active context engine; destroy it first"
            )
        engine: ContextEngine[T] = (
            factory() if factory is not None else ContextEngine(session_id=key, **kwargs)
        )
        self._engines[key] = engine
        return engine

    def get(self, key: str) -> ContextEngine[T] | None:
        """The live engine for ``key``, if any."""
        engine = self._engines.get(key)
        if engine is not None and engine.destroyed:
            del self._engines[key]
            return None
        return engine

    async def destroy(self, key: str) -> bool:
        """Destroy ``key``'s engine and free the key; False if there was none."""
        engine = self._engines.pop(key, None)
        if engine is None:
            return False
        await engine.destroy()
        return True

    async def destroy_all(self) -> None:
        """Destroy every engine (e.g. at shutdown), in creation order."""
        keys = list(self._engines)
        for key in keys:
            await self.destroy(key)

    def __len__(self) -> int:
        return sum(1 for e in self._engines.values() if not e.destroyed)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None
