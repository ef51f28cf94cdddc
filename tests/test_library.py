"""Which async library runs the caller: the stream machinery's cheaper sniffio."""

from __future__ import annotations

import asyncio

import pytest
import sniffio

from mainspring._lowlevel.library import on_asyncio

pytestmark = pytest.mark.anyio


async def test_it_agrees_with_sniffio_on_each_backend(anyio_backend: str) -> None:
    assert on_asyncio() == (sniffio.current_async_library() == "asyncio")
    assert on_asyncio() == (anyio_backend == "asyncio")


def test_outside_any_event_loop_it_is_not_asyncio() -> None:
    assert not on_asyncio()


def test_a_library_named_by_sniffio_wins_over_a_running_asyncio_loop() -> None:
    # What trio-asyncio and trio's guest mode do: the name says which one runs.
    async def inside() -> bool:
        token = sniffio.current_async_library_cvar.set("trio")
        try:
            return on_asyncio()
        finally:
            sniffio.current_async_library_cvar.reset(token)

    assert asyncio.run(inside()) is False
