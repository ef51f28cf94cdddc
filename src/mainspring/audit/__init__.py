"""The tamper-evident audit log: hash-chained entries, a signed head, verification.

- :mod:`~mainspring.audit.entry`: :class:`AuditEntry`, its kinds, its canonical bytes.
- :mod:`~mainspring.audit.head`: the signed head (Ed25519), kept apart from the entries.
- :mod:`~mainspring.audit.store`: the :class:`AuditStore` protocol, :class:`InMemoryAuditStore`.
- :mod:`~mainspring.audit.log`: :class:`AuditLog` (the writer) and :class:`AuditTrail`.
- :mod:`~mainspring.audit.verify`: :func:`verify_rows`, what ``mainspring audit verify`` runs.
- ``schema.json``: the JSON schema of an exported entry (``mainspring audit export``).

Signing needs ``cryptography``: ``pip install "mainspring[audit]"``.
"""

from typing import TYPE_CHECKING

from mainspring._lowlevel.lazy import lazy_attributes

if TYPE_CHECKING:
    from mainspring.audit.entry import KINDS, AuditEntry
    from mainspring.audit.head import AuditHead, AuditKey, public_key_from_text, public_key_text
    from mainspring.audit.log import AuditLog, AuditTrail
    from mainspring.audit.store import AuditStore, InMemoryAuditStore
    from mainspring.audit.verify import Verification, verify_log, verify_rows

_LAZY: dict[str, str] = {
    "KINDS": "mainspring.audit.entry",
    "AuditEntry": "mainspring.audit.entry",
    "AuditHead": "mainspring.audit.head",
    "AuditKey": "mainspring.audit.head",
    "AuditLog": "mainspring.audit.log",
    "AuditStore": "mainspring.audit.store",
    "AuditTrail": "mainspring.audit.log",
    "InMemoryAuditStore": "mainspring.audit.store",
    "Verification": "mainspring.audit.verify",
    "public_key_from_text": "mainspring.audit.head",
    "public_key_text": "mainspring.audit.head",
    "verify_log": "mainspring.audit.verify",
    "verify_rows": "mainspring.audit.verify",
}

__getattr__, __dir__ = lazy_attributes("mainspring.audit", globals(), _LAZY)

__all__ = [
    "KINDS",
    "AuditEntry",
    "AuditHead",
    "AuditKey",
    "AuditLog",
    "AuditStore",
    "AuditTrail",
    "InMemoryAuditStore",
    "Verification",
    "public_key_from_text",
    "public_key_text",
    "verify_log",
    "verify_rows",
]
