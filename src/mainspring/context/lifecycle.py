"""One active context compiler per session key.

:class:`CompilerRegistry` hands out engines by session key and refuses a
second live one for the same key (:class:`~mainspring.errors.CompilerActiveError`),
so two compiles never race over one transcript. Destroying an engine through
the registry frees its key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from mainspring.context.compiler import ContextCompiler
from mainspring.errors import CompilerActiveError

__all__ = ["CompilerRegistry"]

T = TypeVar("T")


class CompilerRegistry(Generic[T]):
    """Session key → its one active :class:`ContextCompiler`."""

    def __init__(self) -> None:
        """An empty registry."""
        self._engines: dict[str, ContextCompiler[T]] = {}

    def create(
        self, key: str, factory: Callable[[], ContextCompiler[T]] | None = None, **kwargs: Any
    ) -> ContextCompiler[T]:
        """Make the engine for ``key`` (``factory()`` or ``ContextCompiler(**kwargs)``).

        Raises CompilerActiveError if ``key`` already has a live engine.
        """
        current = self._engines.get(key)
        if current is not None and not current.destroyed:
            raise CompilerActiveError(
                f"session {key!r} already has an active context compiler; destroy it first"
            )
        engine: ContextCompiler[T] = (
            factory() if factory is not None else ContextCompiler(session_id=key, **kwargs)
        )
        self._engines[key] = engine
        return engine

    def get(self, key: str) -> ContextCompiler[T] | None:
        """The live engine for ``key``, if any."""
        engine = self._engines.get(key)
        if engine is not None and engine.destroyed:
            del self._engines[key]
            return None
        return engine

    async def replace(
        self, key: str, factory: Callable[[], ContextCompiler[T]]
    ) -> ContextCompiler[T]:
        """Swap ``key``'s engine for ``factory()``: the same session, a fresh pipeline.

        The old engine is destroyed without ending the session (no summary,
        sinks left open) and the new one adopts its telemetry, so the
        session's totals run on. With no live engine this is :meth:`create`.
        """
        old = self._engines.pop(key, None)
        if old is not None and not old.destroyed:
            await old.destroy(final=False)
        engine = factory()
        if old is not None:
            engine.adopt_telemetry(old)
        self._engines[key] = engine
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
