"""MemoryWriter: remembering in the background never blocks, raises or grows without bound."""

from __future__ import annotations

from collections.abc import Mapping

import anyio
import pytest
from pydantic import JsonValue

from mainspring.errors import ConfigError
from mainspring.memory import InMemoryMemoryStore, MemoryItem, MemoryWriter

pytestmark = pytest.mark.anyio


class Failing(InMemoryMemoryStore):
    async def remember(
        self, text: str, *, scope: str = "default", meta: Mapping[str, JsonValue] | None = None
    ) -> MemoryItem:
        raise ConnectionError("memory backend down")


class Hanging(InMemoryMemoryStore):
    async def remember(
        self, text: str, *, scope: str = "default", meta: Mapping[str, JsonValue] | None = None
    ) -> MemoryItem:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


async def test_writes_land_in_the_background() -> None:
    store = InMemoryMemoryStore()
    writer = MemoryWriter(store)
    assert writer.remember("the user prefers tea", scope="u1", meta={"src": "chat"}) is True
    assert writer.pending == 1  # returned before the store was touched
    await writer.drain()
    assert (writer.pending, writer.written, writer.failures) == (0, 1, 0)
    (item,) = await store.recall("tea", scope="u1")
    assert item.meta == {"src": "chat"}


async def test_a_failing_store_is_logged_and_counted_never_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    writer = MemoryWriter(Failing())
    for i in range(3):
        writer.remember(f"fact {i}")
    await writer.drain()
    assert (writer.written, writer.failures) == (0, 3)
    assert "memory write failed" in caplog.text


async def test_a_hanging_store_is_timed_out() -> None:
    writer = MemoryWriter(Hanging(), timeout=0.05)
    writer.remember("never lands")
    with anyio.fail_after(60):  # a bound for the test itself, not a timing assertion
        await writer.drain()
    assert writer.failures == 1


async def test_too_many_pending_writes_are_dropped_and_counted() -> None:
    writer = MemoryWriter(Hanging(), timeout=0.05, max_pending=2)
    assert [writer.remember(f"t{i}") for i in range(4)] == [True, True, False, False]
    assert writer.dropped == 2
    await writer.drain()
    assert writer.failures == 2


async def test_bad_input_is_rejected_at_once_and_nothing_runs() -> None:
    store = InMemoryMemoryStore()
    writer = MemoryWriter(store)
    with pytest.raises(ConfigError, match="must not be empty"):
        writer.remember("  ")
    with pytest.raises(ConfigError, match="meta must be JSON"):
        writer.remember("x", meta={"x": object()})  # type: ignore[dict-item]  # not JSON on purpose: the test checks the error
    assert writer.pending == 0
    with pytest.raises(ConfigError, match="timeout"):
        MemoryWriter(store, timeout=0)
    with pytest.raises(ConfigError, match="positive integer"):
        MemoryWriter(store, max_pending=0)
