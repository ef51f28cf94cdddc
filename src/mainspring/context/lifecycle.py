"""One active context compiler per session key.

:class:`CompilerRegistry` hands out compilers by session key and refuses a
second live one for the same key (:class:`~mainspring.errors.CompilerActiveError`),
so two compiles never race over one transcript. Destroying a compiler through
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
        self._compilers: dict[str, ContextCompiler[T]] = {}

    def create(
        self, key: str, factory: Callable[[], ContextCompiler[T]] | None = None, **kwargs: Any
    ) -> ContextCompiler[T]:
        """Make the compiler for ``key`` (``factory()`` or ``ContextCompiler(**kwargs)``).

        Raises CompilerActiveError if ``key`` already has a live compiler.
        """
        current = self._compilers.get(key)
        if current is not None and not current.destroyed:
            raise CompilerActiveError(
                f"session {key!r} already has an active context compiler; destroy it first"
            )
        compiler: ContextCompiler[T] = (
            factory() if factory is not None else ContextCompiler(session_id=key, **kwargs)
        )
        self._compilers[key] = compiler
        return compiler

    def get(self, key: str) -> ContextCompiler[T] | None:
        """The live compiler for ``key``, if any."""
        compiler = self._compilers.get(key)
        if compiler is not None and compiler.destroyed:
            del self._compilers[key]
            return None
        return compiler

    async def replace(
        self, key: str, factory: Callable[[], ContextCompiler[T]]
    ) -> ContextCompiler[T]:
        """Swap ``key``'s compiler for ``factory()``: the same session, a fresh pipeline.

        The old compiler is destroyed without ending the session (no summary,
        sinks left open) and the new one adopts its telemetry, so the
        session's totals run on. With no live compiler this is :meth:`create`.
        """
        old = self._compilers.pop(key, None)
        if old is not None and not old.destroyed:
            await old.destroy(final=False)
        compiler = factory()
        if old is not None:
            compiler.adopt_telemetry(old)
        self._compilers[key] = compiler
        return compiler

    async def destroy(self, key: str) -> bool:
        """Destroy ``key``'s compiler and free the key; False if there was none."""
        compiler = self._compilers.pop(key, None)
        if compiler is None:
            return False
        await compiler.destroy()
        return True

    async def destroy_all(self) -> None:
        """Destroy every compiler (e.g. at shutdown), in creation order."""
        keys = list(self._compilers)
        for key in keys:
            await self.destroy(key)

    def __len__(self) -> int:
        return sum(1 for e in self._compilers.values() if not e.destroyed)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None
