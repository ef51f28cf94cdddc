"""Single-entry tampering with a stored log: edits, reorders, insertions, deletions, truncations.

Each mutation takes a log's rows (``(seq, line)`` in store order) and head and
returns them changed the way someone with write access to the store could:
the attacker may recompute an entry's hash and renumber rows, but holds no
signing key. Two changes are left out because no store-only check can see
them (``mainspring.audit.verify`` says so): deleting every row with the head,
and putting back an older signed head with the rows it named (a rollback; an
auditor's anchor catches it).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable

from mainspring.audit.entry import canonical

Rows = list[tuple[int, str]]
Mutation = Callable[[random.Random, Rows, str | None], tuple[Rows, str | None]]


def _rehashed(data: dict[str, object]) -> str:
    body = {k: v for k, v in data.items() if k != "hash"}
    data["hash"] = hashlib.sha256(canonical(body)).hexdigest()
    return canonical(data).decode()


def _changed(rng: random.Random, value: object) -> object:
    if isinstance(value, bool) or value is None:
        return rng.choice(["x", 0, 1.5])
    if isinstance(value, int):
        return value + rng.choice([-2, -1, 1, 2, 1000])
    if isinstance(value, float):
        return value + rng.choice([-0.01, 0.01, 1.0, 1e6])
    assert isinstance(value, str)
    if value and rng.random() < 0.5:
        i = rng.randrange(len(value))
        ch = chr(ord(value[i]) ^ 1)
        return value[:i] + ch + value[i + 1 :]
    return value + rng.choice(["x", "0", " ", "é"])


def edit_field(rng: random.Random, rows: Rows, head: str | None) -> tuple[Rows, str | None]:
    """One field of one entry changed; half the time its hash recomputed too."""
    rows = list(rows)
    i = rng.randrange(len(rows))
    seq, line = rows[i]
    data = json.loads(line)
    field = rng.choice(sorted(data))
    data[field] = _changed(rng, data[field])
    text = _rehashed(data) if rng.random() < 0.5 and field != "hash" else canonical(data).decode()
    rows[i] = (seq, text)
    return rows, head


def edit_byte(rng: random.Random, rows: Rows, head: str | None) -> tuple[Rows, str | None]:
    """One character of one stored line changed (it may no longer be JSON)."""
    rows = list(rows)
    i = rng.randrange(len(rows))
    seq, line = rows[i]
    j = rng.randrange(len(line))
    replacement = rng.choice([c for c in ' "{}:,0123456789abcdefxyz' if c != line[j]])
    rows[i] = (seq, line[:j] + replacement + line[j + 1 :])
    return rows, head


def reorder(rng: random.Random, rows: Rows, head: str | None) -> tuple[Rows, str | None]:
    """Two entries swapped: their lines (under the same seqs), or whole rows renumbered."""
    rows = list(rows)
    i, j = rng.sample(range(len(rows)), 2)
    if rng.random() < 0.5:
        rows[i], rows[j] = (rows[i][0], rows[j][1]), (rows[j][0], rows[i][1])
    else:
        rows[i], rows[j] = rows[j], rows[i]
    return rows, head


def insert(rng: random.Random, rows: Rows, head: str | None) -> tuple[Rows, str | None]:
    """An entry added: a copy or a forged one, chained and hashed; later rows renumbered or not."""
    rows = list(rows)
    at = rng.randrange(len(rows) + 1)
    data = json.loads(rows[rng.randrange(len(rows))][1])
    data["seq"] = at + 1
    data["prev"] = json.loads(rows[at - 1][1])["hash"] if at else "0" * 64
    if rng.random() < 0.5:
        data["amount_usd"] = 1_000_000.0
    line = _rehashed(data)
    later = rows[at:]
    if rng.random() < 0.5:
        later = [(seq + 1, text) for seq, text in later]
    return [*rows[:at], (at + 1, line), *later], head


def delete(rng: random.Random, rows: Rows, head: str | None) -> tuple[Rows, str | None]:
    """One entry removed from the middle; later rows renumbered or not."""
    rows = list(rows)
    at = rng.randrange(len(rows) - 1)
    later = rows[at + 1 :]
    if rng.random() < 0.5:
        later = [(seq - 1, text) for seq, text in later]
    return [*rows[:at], *later], head


def truncate(rng: random.Random, rows: Rows, head: str | None) -> tuple[Rows, str | None]:
    """The last entries removed; the head kept, or deleted while some rows remain."""
    keep = rng.randrange(len(rows))
    if keep and rng.random() < 0.3:
        return rows[:keep], None
    return rows[:keep], head


MUTATIONS: dict[str, Mutation] = {
    "edit_field": edit_field,
    "edit_byte": edit_byte,
    "reorder": reorder,
    "insert": insert,
    "delete": delete,
    "truncate": truncate,
}


def applicable(name: str, rows: Rows) -> bool:
    """Whether mutation ``name`` can change a log of ``len(rows)`` entries."""
    return len(rows) >= (2 if name in ("reorder", "delete") else 1)
