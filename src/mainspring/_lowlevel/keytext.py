"""Ed25519 public keys as text: base64url of their raw 32 bytes, no padding.

The one spelling the engine's signed calls and the audit log's signed head
share (a key written by one reads in the other). It needs ``cryptography``;
the modules that import it guard that import with the extra to install.
"""

from __future__ import annotations

import base64

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

__all__ = ["public_key_from_text", "public_key_text"]


def public_key_text(key: Ed25519PublicKey) -> str:
    """A public key as base64url text (its raw 32 bytes)."""
    raw = key.public_bytes(Encoding.Raw, PublicFormat.Raw)
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def public_key_from_text(text: str) -> Ed25519PublicKey:
    """The key :func:`public_key_text` wrote.

    Raises:
        ValueError: The text is not a base64url Ed25519 public key.
    """
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        return Ed25519PublicKey.from_public_bytes(raw)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"not an Ed25519 public key: {exc}") from None
