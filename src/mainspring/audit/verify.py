"""Checking an audit log: every entry in place, chained, and vouched for by a signed head.

:func:`verify_rows` walks a log's stored rows in ``seq`` order and names the
first that is not what its writer stored:

- a row whose line is not a canonical entry, or whose ``seq`` is not its place
  (an edit, a reorder, an insertion, a gap left by a deletion);
- an entry whose ``hash`` is not the hash of its fields (an edit);
- an entry whose ``prev`` is not the hash of the entry before it (an edit
  that recomputed the hash breaks the link to the next entry: the entry
  reported is then the one whose successor no longer vouches for it);
- against the head: a head that is missing, not signed by a trusted key, or
  naming another last entry than the log's (a truncation, or entries added
  after it).

What it cannot see from the store alone: a log rolled back whole to an earlier
state — an old head with the entries it named. An auditor who keeps a head
(``mainspring audit head``) catches that with ``--anchor`` (:func:`check_anchor`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from mainspring.audit.entry import GENESIS, decode_entry
from mainspring.audit.head import AuditHead, decode_head
from mainspring.audit.store import AuditStore

__all__ = ["Verification", "check_anchor", "read_rows", "verify_log", "verify_rows"]


@dataclass(frozen=True, slots=True)
class Verification:
    """The outcome of checking a log."""

    entries: int
    """Rows checked."""
    first_bad: int | None = None
    """The first ``seq`` that is not as written (``None``: the log is intact)."""
    reason: str = ""
    head: AuditHead | None = None
    """The stored head, when it could be read."""

    @property
    def ok(self) -> bool:
        """Whether the log is intact."""
        return self.first_bad is None


async def read_rows(
    store: AuditStore, log: str, *, after: int = 0, page: int = 1000
) -> list[tuple[int, str]]:
    """Every row of ``log`` after ``after``, read a page at a time."""
    rows: list[tuple[int, str]] = []
    while True:
        got = await store.audit_entries(log, after=after, limit=page)
        rows += got
        if len(got) < page:
            return rows
        after = got[-1][0]


async def verify_log(
    store: AuditStore, log: str, keys: Mapping[str, Ed25519PublicKey]
) -> Verification:
    """Check the log ``log`` as ``store`` holds it now (see :func:`verify_rows`).

    Safe while workers append: the head is read after the rows (an entry and
    its head are stored together, so the head names at least every row read),
    and rows appended meanwhile are read before they are compared.
    """
    rows = await read_rows(store, log)
    head = await store.audit_head(log)
    known = _readable(head)
    if known is not None and known.seq > len(rows):
        rows += await read_rows(store, log, after=rows[-1][0] if rows else 0)
    return verify_rows(log, rows, head, keys)


def verify_rows(
    log: str,
    rows: Iterable[tuple[int, str]],
    head_text: str | None,
    keys: Mapping[str, Ed25519PublicKey],
) -> Verification:
    """Check ``rows`` (``(seq, line)`` in store order) against the head, with trusted ``keys``.

    ``keys`` maps key ids to the public keys the head may be signed with.
    """
    count = 0
    prev = GENESIS
    last_hash = GENESIS

    def bad(seq: int, reason: str) -> Verification:
        return Verification(count, seq, reason, _readable(head_text))

    for place, (row_seq, line) in enumerate(rows, start=1):
        count = place
        try:
            entry = decode_entry(line)
        except ValueError as exc:
            return bad(place, f"entry {place} is not a well-formed entry: {exc}")
        if row_seq != place or entry.seq != place:
            return bad(place, f"entry {place} is missing or out of place (found seq {entry.seq})")
        if entry.computed_hash() != entry.hash:
            return bad(place, f"entry {place} was changed: its hash does not match its fields")
        if entry.prev != prev:
            return bad(max(place - 1, 1), f"entry {place} does not link to entry {place - 1}")
        prev = last_hash = entry.hash
    return _against_head(log, count, last_hash, head_text, keys)


def _against_head(
    log: str,
    count: int,
    last_hash: str,
    head_text: str | None,
    keys: Mapping[str, Ed25519PublicKey],
) -> Verification:
    if head_text is None:
        if count == 0:
            return Verification(0)
        return Verification(count, count, "the log's head is missing", None)
    try:
        head = decode_head(head_text)
    except ValueError as exc:
        return Verification(count, max(count, 1), f"the log's head is unreadable: {exc}", None)
    key = keys.get(head.key_id)
    if key is None:
        return Verification(count, max(count, 1), f"the head's key {head.key_id!r} is not trusted")
    if head.log != log or not head.verifies(key):
        return Verification(count, max(count, 1), "the head's signature does not verify", head)
    if head.seq > count:
        return Verification(
            count, count + 1, f"the log was truncated: the head names entry {head.seq}", head
        )
    if head.seq < count:
        return Verification(
            count, head.seq + 1, f"entries after the head's {head.seq} were added", head
        )
    if head.hash != last_hash:
        return Verification(count, count, f"entry {count} is not the one the head names", head)
    return Verification(count, None, "", head)


def check_anchor(
    result: Verification, rows: Mapping[int, str], seq: int, hash: str
) -> Verification:
    """``result``, failed unless entry ``seq`` (as kept by an auditor) is still ``hash``.

    ``rows`` maps ``seq`` to stored lines; a log shorter than the anchor, or
    whose entry there changed, was rolled back or rewritten.
    """
    if not result.ok:
        return result
    line = rows.get(seq)
    if line is None:
        return Verification(
            result.entries, result.entries + 1, f"the log ends before the anchor {seq}", result.head
        )
    if decode_entry(line).hash != hash:
        return Verification(
            result.entries, seq, f"entry {seq} is not the anchored one", result.head
        )
    return result


def _readable(head_text: str | None) -> AuditHead | None:
    if head_text is None:
        return None
    try:
        return decode_head(head_text)
    except ValueError:
        return None
