"""AuditLog: the writer of a tamper-evident log, and AuditTrail, one session's view of it.

An :class:`AuditLog` appends entries to an :class:`~mainspring.audit.store.AuditStore`:
each append reads the stored head, chains the new entry to it (``prev`` = the
head's hash, ``seq`` = the head's + 1), hashes it, signs the new head with the
log's Ed25519 key and stores both at once (see :mod:`mainspring.audit.store`).
An agent given one (``Agent(audit=…)``) records, through the one dispatch path:

- every decision on a pending action (``approved``, ``edited``, ``rejected``,
  ``client_result``), by the approving principal, once the decision is consumed
  and before the write it allows runs;
- every write that ran (``auto_executed`` without a human decision, ``executed``
  after one), with its outcome, before its result is reported to the model or
  the host;
- every call refused (``denied`` by the permission rules, ``blocked`` by a
  guard) and every finding of a guard's check (``guard_finding``), as the call
  is judged.

Entries are appended beside the session's own commits, not inside them: an
entry is on record before the result of the act it records is reported, and a
store failure while appending fails the run as a failed session save does
(the write's ledger then says its outcome is unknown, never "not run").

```python
from mainspring.audit import AuditLog, InMemoryAuditStore
from mainspring.engine.signing import SigningKey

audit = AuditLog(InMemoryAuditStore(), SigningKey.generate("audit-1"), policy_version="2026-12")
agent = Agent(model=..., tools=[pay], audit=audit)
```
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

import anyio

from mainspring._lowlevel.json_value import JsonValue
from mainspring.audit.entry import (
    APPROVED,
    AUTO_EXECUTED,
    BLOCKED,
    CLIENT_RESULT,
    DENIED,
    EDITED,
    EXECUTED,
    EXPIRED,
    FORMAT,
    GENESIS,
    GUARD_FINDING,
    REJECTED,
    AuditEntry,
    canonical,
    decode_entry,
    timestamp,
)
from mainspring.audit.head import AuditKey, decode_head, sign_head
from mainspring.audit.store import AuditStore, Sealed
from mainspring.decisions import Approve, ClientResult, Decision, Reject, canonical_input_hash
from mainspring.errors import ConfigError, StoreError
from mainspring.events import Finding, PendingAction
from mainspring.tools.context import current_scope

if TYPE_CHECKING:
    from mainspring.tools.define import ToolOutput

__all__ = ["DEFAULT_LOG", "UNVERSIONED", "AuditLog", "AuditTrail"]

DEFAULT_LOG = "audit"
"""The log's name when none is given."""
UNVERSIONED = "unversioned"
"""The policy version of entries made under no named policy."""
_DETAIL_LIMIT = 500
"""Characters of a reason or finding kept in an entry."""


class AuditLog:
    """Appends hash-chained entries, the head signed with an Ed25519 key."""

    def __init__(
        self,
        store: AuditStore,
        key: AuditKey,
        *,
        log: str = DEFAULT_LOG,
        policy_version: str = UNVERSIONED,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """Append to ``log`` in ``store``, signing heads with ``key``.

        Args:
            store: Where the entries and the head live (the session store's database).
            key: The signer (``mainspring.engine.signing.SigningKey`` fits).
            log: The log's name in the store; several logs may share one store.
            policy_version: Stamped on every entry that names no other version.
            clock: Wall-clock seconds, for the entries' ``time``.
        """
        if not log or not policy_version:
            raise ConfigError("an audit log needs a name and a policy version")
        self.store = store
        self.key = key
        self.log = log
        self.policy_version = policy_version
        self._clock = clock
        self._sealed: tuple[str | None, int, str] = (None, 0, GENESIS)
        """The last head this object sealed, its seq and hash: a stored head equal to
        it (byte for byte) is read without parsing. The store's head is still what
        every append is sealed against; this only skips decoding it."""

    def trail(self, session_id: str | None, principal: str | None) -> AuditTrail:
        """What one run of a session records through, its id and principal filled in.

        The principal is the caller the run is for (``kind:id``), when an engine
        or a server entered a run scope for it; else ``principal`` (the session's
        owner, if it has one).
        """
        scope = current_scope()
        return AuditTrail(self, session_id, principal if scope is None else scope.caller.key)

    async def append(
        self,
        kind: str,
        *,
        outcome: str,
        session_id: str | None = None,
        principal: str | None = None,
        tool: str | None = None,
        args_hash: str | None = None,
        amount_usd: float | None = None,
        attempt_id: str | None = None,
        detail: str | None = None,
        policy_version: str | None = None,
    ) -> AuditEntry:
        """Append one entry; returns it as stored.

        Shielded: once started, a cancellation waits for the append to finish,
        so an act on record is never half-recorded.

        Raises:
            StoreError: The store failed, or its head is unreadable (nothing was appended).
        """
        body: dict[str, object] = {
            "v": FORMAT,
            "seq": 0,
            "prev": GENESIS,
            "time": timestamp(self._clock()),
            "kind": kind,
            "session_id": session_id,
            "principal": principal,
            "tool": tool,
            "args_hash": args_hash,
            "amount_usd": amount_usd,
            "outcome": outcome,
            "policy_version": policy_version or self.policy_version,
            "attempt_id": attempt_id,
            "detail": None if detail is None else detail[:_DETAIL_LIMIT],
        }
        sealed: list[str] = []  # the hash of the entry the store took (a seal may run again)

        def seal(head: str | None) -> Sealed:
            done = self._seal(body, head)
            sealed.append(done.hash)
            return done.sealed

        with anyio.CancelScope(shield=True):
            await self.store.append_audit(self.log, seal)
        return AuditEntry(**body, hash=sealed[-1])  # type: ignore[arg-type]  # body holds the fields

    def _seal(self, body: dict[str, object], head: str | None) -> _Seal:
        """The entry ``body`` chained after ``head``, and the new head signed."""
        if head is None:
            seq, prev = 1, GENESIS
        elif head == self._sealed[0]:  # the head this log wrote last: known without parsing
            seq, prev = self._sealed[1] + 1, self._sealed[2]
        else:
            try:
                last = decode_head(head)
            except ValueError as exc:
                raise StoreError(f"audit log {self.log!r}: its head is unreadable: {exc}") from None
            seq, prev = last.seq + 1, last.hash
        body["seq"], body["prev"] = seq, prev
        digest = hashlib.sha256(canonical(body)).hexdigest()
        entry = canonical({**body, "hash": digest}).decode("utf-8")
        new_head = sign_head(self.key, self.log, seq, digest).to_json()
        self._sealed = (new_head, seq, digest)
        return _Seal(Sealed(seq, entry, new_head), digest)

    async def entries(self, *, after: int = 0, limit: int = 1000) -> list[AuditEntry]:
        """The entries after ``after``, in order (decoded; a tampered line raises ValueError)."""
        rows = await self.store.audit_entries(self.log, after=after, limit=limit)
        return [decode_entry(text) for _, text in rows]


class _Seal(NamedTuple):
    sealed: Sealed
    hash: str


class AuditTrail:
    """One session's records through its :class:`AuditLog` (made per run by the dispatcher)."""

    __slots__ = ("log", "principal", "session_id")

    def __init__(self, log: AuditLog, session_id: str | None, principal: str | None) -> None:
        self.log = log
        self.session_id = session_id
        self.principal = principal
        """Who the run acts for: its caller (``kind:id``), else the session's owner."""

    async def decided(
        self,
        pending: PendingAction,
        decision: Decision,
        final_input: Mapping[str, JsonValue] | None,
        *,
        principal: str | None = None,
        policy_version: str | None = None,
    ) -> AuditEntry:
        """A decision on ``pending`` was consumed (``final_input``: the approved input)."""
        input = pending.input if final_input is None else dict(final_input)
        detail = None
        if isinstance(decision, Approve):
            kind = EDITED if decision.edits else APPROVED
        elif isinstance(decision, Reject):
            kind, detail = REJECTED, decision.reason
        else:
            assert isinstance(decision, ClientResult)
            kind = CLIENT_RESULT
            detail = "error" if decision.is_error else None
        return await self.log.append(
            kind,
            outcome=REJECTED if kind == REJECTED else APPROVED,
            session_id=self.session_id,
            principal=principal or self.principal,
            tool=pending.name,
            args_hash=canonical_input_hash(input),
            amount_usd=pending.amount_usd,
            attempt_id=pending.attempt_id,
            detail=detail,
            policy_version=policy_version,
        )

    async def expired(
        self, pending: PendingAction, *, policy_version: str | None = None
    ) -> AuditEntry:
        """``pending`` expired undecided: fail-closed, its write never runs."""
        return await self.log.append(
            EXPIRED,
            outcome=EXPIRED,
            session_id=self.session_id,
            principal=self.principal,
            tool=pending.name,
            args_hash=canonical_input_hash(pending.input),
            amount_usd=pending.amount_usd,
            attempt_id=pending.attempt_id,
            policy_version=policy_version,
        )

    async def executed(
        self,
        tool: str,
        args: dict[str, JsonValue],
        output: ToolOutput,
        status: str,
        auto: bool,
        amount_usd: float | None,
        attempt_id: str | None,
    ) -> AuditEntry:
        """A write ran (``auto``: without a human decision), with the ledger's ``status``.

        Its outcome is ``ok``, ``error`` (the tool's result is an error) or
        ``unknown`` (it timed out or was cancelled while running).
        """
        outcome = "unknown" if status == "unknown" else "error" if output.is_error else "ok"
        return await self.log.append(
            AUTO_EXECUTED if auto else EXECUTED,
            outcome=outcome,
            session_id=self.session_id,
            principal=self.principal,
            tool=tool,
            args_hash=canonical_input_hash(args),
            amount_usd=amount_usd,
            attempt_id=attempt_id,
        )

    async def denied(
        self, tool: str, args: dict[str, JsonValue], amount_usd: float | None, reason: str
    ) -> AuditEntry:
        """The permission rules refused a call."""
        return await self._refused(DENIED, tool, args, amount_usd, reason)

    async def blocked(
        self, tool: str, args: dict[str, JsonValue], amount_usd: float | None, finding: Finding
    ) -> AuditEntry:
        """A guard refused a call (``finding`` is its block)."""
        return await self._refused(BLOCKED, tool, args, amount_usd, _described(finding))

    async def _refused(
        self,
        kind: str,
        tool: str,
        args: dict[str, JsonValue],
        amount_usd: float | None,
        reason: str,
    ) -> AuditEntry:
        return await self.log.append(
            kind,
            outcome=kind,
            session_id=self.session_id,
            principal=self.principal,
            tool=tool,
            args_hash=canonical_input_hash(args),
            amount_usd=amount_usd,
            detail=reason,
        )

    async def findings(
        self, tool: str, args: dict[str, JsonValue], findings: Sequence[Finding]
    ) -> None:
        """Each finding of a guard's check on a call (its action is the outcome)."""
        if not findings:
            return
        args_hash = canonical_input_hash(args)
        for finding in findings:
            await self.log.append(
                GUARD_FINDING,
                outcome=finding.action,
                session_id=self.session_id,
                principal=self.principal,
                tool=tool,
                args_hash=args_hash,
                detail=_described(finding),
            )


def _described(finding: Finding) -> str:
    return f"{finding.source} ({finding.tier}, {finding.action}): {finding.message}"
