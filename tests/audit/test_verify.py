"""`verify` finds every single-entry edit, reorder, insertion, deletion and truncation."""

from __future__ import annotations

import random

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mainspring.audit import AuditLog, InMemoryAuditStore, verify_rows
from mainspring.audit.head import sign_head
from mainspring.audit.verify import check_anchor
from mainspring.engine.signing import SigningKey
from tests.audit.mutations import MUTATIONS, Rows, applicable

KEY = SigningKey.generate("audit-1")
KEYS = {KEY.key_id: KEY.public_key}
OTHER = SigningKey.generate("audit-1")  # the same id, another key: a forger's


def made_log(n: int) -> tuple[Rows, str | None]:
    """A log of ``n`` varied entries, as a store holds them."""
    store = InMemoryAuditStore()
    log = AuditLog(store, KEY, policy_version="p1")

    async def fill() -> None:
        for i in range(n):
            await log.append(
                ["approved", "rejected", "auto_executed", "guard_finding"][i % 4],
                outcome="ok",
                session_id=f"s{i % 3}",
                principal="user:ann" if i % 2 else None,
                tool="pay",
                args_hash=f"{i:064x}",
                amount_usd=[None, 1.5, 250.0][i % 3],
                detail="naïve détail" if i % 5 == 0 else None,
            )

    anyio.run(fill)
    return sorted(store.entries["audit"].items()), store.heads.get("audit")


LOGS = {n: made_log(n) for n in (1, 2, 3, 5, 8, 13)}


def test_an_intact_log_verifies() -> None:
    for n, (rows, head) in LOGS.items():
        result = verify_rows("audit", rows, head, KEYS)
        assert result.ok and result.entries == n and result.first_bad is None


def test_an_empty_log_without_a_head_is_intact_but_a_head_without_rows_is_not() -> None:
    assert verify_rows("audit", [], None, KEYS).ok
    _, head = LOGS[3]
    result = verify_rows("audit", [], head, KEYS)
    assert not result.ok and result.first_bad == 1 and "truncated" in result.reason


def test_an_edited_amount_is_found_at_its_seq() -> None:
    rows, head = LOGS[5]
    seq, line = rows[1]
    edited = line.replace('"amount_usd":1.5', '"amount_usd":9.5')
    assert edited != line
    result = verify_rows("audit", [rows[0], (seq, edited), *rows[2:]], head, KEYS)
    assert not result.ok and result.first_bad == 2 and "changed" in result.reason


def test_a_truncated_log_names_the_first_missing_seq() -> None:
    rows, head = LOGS[8]
    result = verify_rows("audit", rows[:5], head, KEYS)
    assert (result.ok, result.first_bad) == (False, 6)


def test_a_head_signed_by_another_key_or_for_another_log_is_refused() -> None:
    rows, _ = LOGS[3]
    last_hash = rows[-1][1].split('"hash":"')[1][:64]
    forged = sign_head(OTHER, "audit", 3, last_hash).to_json()
    assert not verify_rows("audit", rows, forged, KEYS).ok
    elsewhere = sign_head(KEY, "other-log", 3, last_hash).to_json()
    assert not verify_rows("audit", rows, elsewhere, KEYS).ok
    genuine = sign_head(KEY, "audit", 3, last_hash).to_json()
    assert verify_rows("audit", rows, genuine, KEYS).ok
    result = verify_rows("audit", rows, genuine, {"someone-else": KEY.public_key})
    assert not result.ok and "not trusted" in result.reason


def test_a_rollback_is_caught_only_by_an_anchor() -> None:
    store = InMemoryAuditStore()
    log = AuditLog(store, KEY)

    async def grow() -> tuple[Rows, str, Rows]:
        for i in range(4):
            await log.append("approved", outcome="approved", tool=f"t{i}")
        then = sorted(store.entries["audit"].items()), store.heads["audit"]
        for i in range(2):
            await log.append("rejected", outcome="rejected", tool=f"t{4 + i}")
        return *then, sorted(store.entries["audit"].items())

    old_rows, old_head, full = anyio.run(grow)
    kept = full[5][1].split('"hash":"')[1][:64]  # an auditor kept entry 6's hash
    rolled_back = verify_rows("audit", old_rows, old_head, KEYS)
    assert rolled_back.ok  # the store alone cannot show it: an older, consistent state
    anchored = check_anchor(rolled_back, dict(old_rows), 6, kept)
    assert not anchored.ok and anchored.first_bad == 5
    now = verify_rows("audit", full, store.heads["audit"], KEYS)
    assert check_anchor(now, dict(full), 6, kept).ok


@pytest.mark.parametrize("name", sorted(MUTATIONS))
@settings(max_examples=60, deadline=None)
@given(size=st.sampled_from(sorted(LOGS)), seed=st.integers(0, 2**32 - 1))
def test_every_single_entry_mutation_is_caught(name: str, size: int, seed: int) -> None:
    rows, head = LOGS[size]
    if not applicable(name, rows):
        return
    mutated, new_head = MUTATIONS[name](random.Random(seed), rows, head)
    if (mutated, new_head) == (rows, head):
        return  # (a mutation that happened to change nothing)
    result = verify_rows("audit", mutated, new_head, KEYS)
    assert not result.ok, f"{name} not caught"
    assert result.first_bad is not None and result.first_bad >= 1


@pytest.mark.slow
def test_ten_thousand_random_mutations_are_all_caught() -> None:
    rng = random.Random(40)
    names = sorted(MUTATIONS)
    tried = caught = 0
    while tried < 10_000:
        rows, head = LOGS[rng.choice(sorted(LOGS))]
        name = rng.choice(names)
        if not applicable(name, rows):
            continue
        mutated, new_head = MUTATIONS[name](rng, rows, head)
        if (mutated, new_head) == (rows, head):
            continue
        tried += 1
        caught += not verify_rows("audit", mutated, new_head, KEYS).ok
    assert caught == tried == 10_000
