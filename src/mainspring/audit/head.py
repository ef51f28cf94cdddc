"""The head of an audit log: its last sequence number and hash, signed with Ed25519.

The head is stored apart from the entries (its own table or key) and rewritten
by every append, in the same transaction. Its signature binds the log's name,
the last ``seq`` and that entry's ``hash``: whoever removes entries from the
end cannot make a head that says the log is shorter without the private key,
and the hash chain ties every earlier entry to the one the head names.

The key is the engine's kind (:class:`mainspring.engine.signing.SigningKey`
fits :class:`AuditKey`: a key id and an Ed25519 private key); the public key
is written as :func:`mainspring.engine.signing.public_key_text` writes it
(base64url of its raw 32 bytes), so one text format serves both.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Protocol

try:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

    from mainspring._lowlevel.keytext import public_key_from_text, public_key_text
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError('a signed audit log needs: pip install "mainspring[audit]"') from exc

__all__ = [
    "AuditHead",
    "AuditKey",
    "decode_head",
    "head_message",
    "public_key_from_text",
    "public_key_text",
    "sign_head",
]


class AuditKey(Protocol):
    """What signs a log's head: a key id and an Ed25519 private key."""

    @property
    def key_id(self) -> str:
        """The name verifiers know the public key by."""
        ...

    @property
    def private_key(self) -> Ed25519PrivateKey:
        """The signing key."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditHead:
    """A log's last entry, as its signer vouched for it."""

    log: str
    seq: int
    """The last entry's sequence number (0: nothing appended yet)."""
    hash: str
    """The last entry's hash."""
    key_id: str
    sig: str
    """Ed25519 signature (base64url) of :func:`head_message`."""

    def to_json(self) -> str:
        """The head as stored: canonical JSON."""
        fields = {"hash": self.hash, "key_id": self.key_id, "log": self.log, "seq": self.seq}
        return json.dumps({**fields, "sig": self.sig}, separators=(",", ":"))

    def verifies(self, public_key: Ed25519PublicKey) -> bool:
        """Whether ``sig`` is ``public_key``'s signature of this head."""
        try:
            raw = base64.urlsafe_b64decode(self.sig + "=" * (-len(self.sig) % 4))
            public_key.verify(raw, head_message(self.log, self.seq, self.hash))
        except (InvalidSignature, ValueError):
            return False
        return True


def head_message(log: str, seq: int, hash: str) -> bytes:
    """What a head's signature signs."""
    return f"mainspring-audit-v1\n{log}\n{seq}\n{hash}".encode()


def sign_head(key: AuditKey, log: str, seq: int, hash: str) -> AuditHead:
    """The head naming entry ``seq`` (whose hash is ``hash``), signed with ``key``."""
    signature = key.private_key.sign(head_message(log, seq, hash))
    sig = base64.urlsafe_b64encode(signature).decode("ascii").rstrip("=")
    return AuditHead(log=log, seq=seq, hash=hash, key_id=key.key_id, sig=sig)


def decode_head(text: str) -> AuditHead:
    """The head a stored text holds.

    Raises:
        ValueError: Not a head.
    """
    data = json.loads(text)
    if not isinstance(data, dict) or set(data) != set(AuditHead.__dataclass_fields__):
        raise ValueError("not an audit head")
    if not isinstance(data["seq"], int) or isinstance(data["seq"], bool) or data["seq"] < 0:
        raise ValueError("an audit head's seq is a non-negative integer")
    if not all(isinstance(data[k], str) for k in ("log", "hash", "key_id", "sig")):
        raise ValueError("an audit head's log, hash, key_id and sig are strings")
    return AuditHead(**data)
