"""The SharedRecords contract, run against every backend with two clients (two workers).

What the doors build on it: a nonce or a used approval is claimed once across
workers; a paused call is parked once, bounded per owner, and taken once.
"""

from __future__ import annotations

import anyio
import pytest

from mainspring.errors import ConfigError
from mainspring.stores import SharedRecords

pytestmark = pytest.mark.anyio

Pair = tuple[SharedRecords, SharedRecords]


async def test_a_key_is_claimed_once_across_workers(shared_records: Pair) -> None:
    one, two = shared_records
    assert await one.put_record("nonce", "k1/n1", "", owner="k1", ttl=30) == "added"
    assert await two.put_record("nonce", "k1/n1", "", owner="k1", ttl=30) == "exists"
    assert await one.put_record("nonce", "k1/n1", "", owner="other", ttl=30) == "exists"
    assert await two.put_record("approval", "k1/n1", "", owner="k1", ttl=30) == "added"  # kinds
    assert await two.put_record("nonce", "k1/n2", "", owner="k1", ttl=30) == "added"


async def test_racing_claims_have_one_winner(shared_records: Pair) -> None:
    one, two = shared_records
    outcomes: list[str] = []

    async def claim(store: SharedRecords) -> None:
        outcomes.append(await store.put_record("nonce", "race", "", owner="k", ttl=30))

    async with anyio.create_task_group() as tg:
        for i in range(12):
            tg.start_soon(claim, one if i % 2 else two)
    assert sorted(outcomes) == ["added"] + ["exists"] * 11


async def test_a_record_is_taken_once_with_its_owner_and_value(shared_records: Pair) -> None:
    one, two = shared_records
    value = '{"text": "ünïcödé ✓ 日本", "n": 1}'
    assert await one.put_record("paused", "a1", value, owner="user:alice", ttl=30) == "added"
    taken: list[tuple[str, str] | None] = []

    async def take(store: SharedRecords) -> None:
        taken.append(await store.take_record("paused", "a1"))

    async with anyio.create_task_group() as tg:
        for i in range(8):
            tg.start_soon(take, one if i % 2 else two)
    assert [t for t in taken if t is not None] == [("user:alice", value)]
    assert await two.take_record("paused", "a1") is None
    assert await two.take_record("paused", "never") is None
    assert await one.put_record("paused", "a1", "again", owner="user:bob", ttl=30) == "added"
    assert await two.take_record("paused", "a1") == ("user:bob", "again")


async def test_an_owner_holds_at_most_limit_records(shared_records: Pair) -> None:
    one, two = shared_records
    for n in range(3):
        assert (
            await one.put_record("paused", f"a{n}", "v", owner="alice", ttl=30, limit=3) == "added"
        )
    assert await two.put_record("paused", "a9", "v", owner="alice", ttl=30, limit=3) == "full"
    assert await two.put_record("paused", "a0", "v", owner="alice", ttl=30, limit=3) == "exists"
    assert await two.put_record("paused", "b0", "v", owner="bob", ttl=30, limit=3) == "added"
    assert await two.take_record("paused", "a1") == ("alice", "v")
    assert await one.put_record("paused", "a9", "v", owner="alice", ttl=30, limit=3) == "added"
    assert sorted(k for k, _ in await two.owned_records("paused", "alice")) == ["a0", "a2", "a9"]


async def test_racing_bounded_puts_never_pass_the_limit(shared_records: Pair) -> None:
    one, two = shared_records
    outcomes: list[str] = []

    async def put(store: SharedRecords, n: int) -> None:
        outcomes.append(await store.put_record("paused", f"r{n}", "", owner="o", ttl=30, limit=4))

    async with anyio.create_task_group() as tg:
        for n in range(10):
            tg.start_soon(put, one if n % 2 else two, n)
    assert sorted(outcomes) == ["added"] * 4 + ["full"] * 6
    assert len(await one.owned_records("paused", "o")) == 4


async def test_owned_records_lists_one_owners_live_records_sorted(shared_records: Pair) -> None:
    one, two = shared_records
    for key in ("b", "a", "é", "c"):
        await one.put_record("paused", key, f"v-{key}", owner="alice", ttl=30)
    await one.put_record("paused", "z", "bob's", owner="bob", ttl=30)
    await one.put_record("other", "x", "other kind", owner="alice", ttl=30)
    mine = await two.owned_records("paused", "alice")
    assert mine == [("a", "v-a"), ("b", "v-b"), ("c", "v-c"), ("é", "v-é")]
    assert await two.owned_records("paused", "alice", limit=2) == [("a", "v-a"), ("b", "v-b")]
    assert await two.owned_records("paused", "nobody") == []


async def test_an_expired_record_is_gone_and_its_key_free(shared_records: Pair) -> None:
    one, two = shared_records
    assert await one.put_record("nonce", "n", "", owner="k", ttl=0.2) == "added"
    assert await one.put_record("paused", "p", "v", owner="k", ttl=0.2, limit=1) == "added"
    with anyio.fail_after(60):
        while await two.put_record("nonce", "n", "", owner="k", ttl=30) != "added":  # noqa: ASYNC110  # polling an expiry
            await anyio.sleep(0.05)
        while await two.owned_records("paused", "k"):  # noqa: ASYNC110  # polling an expiry
            await anyio.sleep(0.05)
    assert await two.take_record("paused", "p") is None  # expired: not listed, not taken
    assert await two.owned_records("paused", "k") == []
    assert await two.put_record("paused", "q", "v", owner="k", ttl=30, limit=1) == "added"


@pytest.mark.parametrize(
    ("kind", "ttl", "limit"),
    [
        ("", 1, None),
        ("a:b", 1, None),
        ("x" * 41, 1, None),
        ("ok", 0, None),
        ("ok", -1, None),
        ("ok", 1, 0),
        ("ok", 1, True),
    ],
)
async def test_bad_arguments_are_refused_and_store_nothing(
    shared_records: Pair, kind: str, ttl: float, limit: int | None
) -> None:
    one, two = shared_records
    with pytest.raises(ConfigError):
        await one.put_record(kind, "k", "v", owner="o", ttl=ttl, limit=limit)
    assert await two.owned_records("ok", "o") == []


async def test_the_in_memory_table_refuses_rather_than_forgets_when_full() -> None:
    from mainspring.stores.records import InMemoryRecords

    now = [0.0]
    table = InMemoryRecords(clock=lambda: now[0], max_records=3)
    for n in range(3):
        assert await table.put_record("nonce", f"n{n}", "", owner="", ttl=10) == "added"
    assert await table.put_record("nonce", "n9", "", owner="", ttl=10) == "full"
    assert await table.put_record("nonce", "n0", "", owner="", ttl=10) == "exists"  # still used
    now[0] = 11.0  # every record expired: room again
    assert await table.put_record("nonce", "n9", "", owner="", ttl=10) == "added"
