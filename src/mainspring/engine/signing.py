"""Signed cross-engine requests: Ed25519 over method, path, body, time and a nonce.

The sender signs ``mainspring-engine-v1``, the method, the path (with its
query), the SHA-256 of the body, a Unix timestamp and a random nonce, one per
line, and sends the signature with its key id in headers. The receiver
refuses, with :class:`~mainspring.errors.SignatureRejected` naming why:

- ``unknown_key``: the key id is not one it trusts;
- ``stale``: the timestamp is further than ``max_skew`` seconds from its clock;
- ``bad_signature``: the signature does not verify (anything signed was changed);
- ``replayed``: the nonce was already used (nonces are kept while their
  timestamp is fresh, so memory stays bounded). :meth:`Verifier.admit`
  claims the nonce in a shared store (``SharedRecords``: the server's session
  store), so a request captured once is admitted once by all the workers of a
  deployment together; :meth:`Verifier.verify` remembers nonces in this
  process only;
- ``malformed``: a header is missing or not well formed.

```python
key = SigningKey.generate("engine-a")
headers = key.sign("POST", "/tools/lookup/call", body)
verifier = Verifier({"engine-a": key.public_key})
key_id = await verifier.admit("POST", "/tools/lookup/call", body, headers)
```
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mainspring.errors import SignatureRejected

if TYPE_CHECKING:
    from mainspring.stores.base import SharedRecords

try:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

    from mainspring._lowlevel.keytext import public_key_from_text, public_key_text
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError('signed engine calls need: pip install "mainspring[remote]"') from exc

__all__ = [
    "KEY_HEADER",
    "NONCE_HEADER",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "SigningKey",
    "Verifier",
    "public_key_from_text",
    "public_key_text",
]

KEY_HEADER = "x-mainspring-key"
TIMESTAMP_HEADER = "x-mainspring-timestamp"
NONCE_HEADER = "x-mainspring-nonce"
SIGNATURE_HEADER = "x-mainspring-signature"
_KEY_ID = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_NONCE = re.compile(r"^[A-Za-z0-9_-]{16,64}$")
NONCE_KIND = "engine-nonce"
"""The kind of the shared records that hold used nonces (key: ``key id/nonce``)."""


def _message(method: str, path: str, body: bytes, timestamp: str, nonce: str) -> bytes:
    digest = hashlib.sha256(body).hexdigest()
    return "\n".join(
        ("mainspring-engine-v1", method.upper(), path, digest, timestamp, nonce)
    ).encode()


@dataclass(frozen=True, slots=True)
class SigningKey:
    """An engine's private key and the id receivers know its public key by."""

    key_id: str
    private_key: Ed25519PrivateKey

    def __post_init__(self) -> None:
        if not _KEY_ID.fullmatch(self.key_id):
            raise ValueError(f"a key id is 1-64 of A-Z a-z 0-9 _ . -, got {self.key_id!r}")

    @classmethod
    def generate(cls, key_id: str) -> SigningKey:
        """A new random key."""
        return cls(key_id, Ed25519PrivateKey.generate())

    @property
    def public_key(self) -> Ed25519PublicKey:
        """What a receiver verifies with."""
        return self.private_key.public_key()

    def sign(
        self, method: str, path: str, body: bytes, *, now: float | None = None
    ) -> dict[str, str]:
        """The headers that sign this request."""
        timestamp = str(int(time.time() if now is None else now))
        nonce = secrets.token_urlsafe(24)
        signature = self.private_key.sign(_message(method, path, body, timestamp, nonce))
        return {
            KEY_HEADER: self.key_id,
            TIMESTAMP_HEADER: timestamp,
            NONCE_HEADER: nonce,
            SIGNATURE_HEADER: base64.urlsafe_b64encode(signature).decode().rstrip("="),
        }


class Verifier:
    """Checks signed requests against the public keys it trusts, refusing replays."""

    def __init__(
        self,
        keys: Mapping[str, Ed25519PublicKey],
        *,
        max_skew: float = 300.0,
        clock: Callable[[], float] = time.time,
        records: SharedRecords | None = None,
    ) -> None:
        """Trust ``keys`` by key id; a timestamp may be ``max_skew`` seconds off.

        ``records`` is where :meth:`admit` claims nonces: a store every worker
        shares (without one, this process's memory).
        """
        if max_skew <= 0:
            raise ValueError("max_skew must be positive")
        self.keys = dict(keys)
        self.max_skew = max_skew
        self.records = records
        """Where :meth:`admit` claims nonces (a server sets its shared store here)."""
        self._clock = clock
        self._seen: dict[str, float] = {}
        self._lock = threading.Lock()

    @property
    def remembered(self) -> int:
        """Nonces held against replay now (those whose timestamp is still fresh)."""
        return len(self._seen)

    def verify(self, method: str, path: str, body: bytes, headers: Mapping[str, str]) -> str:
        """The key id that signed this request; its nonce is remembered in this process.

        Raises:
            SignatureRejected: With ``reason`` unknown_key, stale, bad_signature,
                replayed or malformed.
        """
        key_id, nonce, sent, now = self._checked(method, path, body, headers)
        with self._lock:
            self._forget(now)
            seen = f"{key_id}/{nonce}"
            if seen in self._seen:
                raise SignatureRejected("the request was already received", reason="replayed")
            self._seen[seen] = sent + self.max_skew
        return key_id

    async def admit(self, method: str, path: str, body: bytes, headers: Mapping[str, str]) -> str:
        """The key id that signed this request, once: its nonce is claimed in :attr:`records`.

        The claim is the admission: of any number of copies of one request,
        sent to any workers sharing the store, exactly one is admitted. The
        nonce is kept twice ``max_skew`` (past its timestamp's freshness on
        any worker whose clock is within ``max_skew``).

        Raises:
            SignatureRejected: With ``reason`` unknown_key, stale, bad_signature,
                replayed or malformed.
            StoreError: The store cannot be reached (nothing is admitted).
        """
        if self.records is None:
            return self.verify(method, path, body, headers)
        key_id, nonce, _, _ = self._checked(method, path, body, headers)
        added = await self.records.put_record(
            NONCE_KIND, f"{key_id}/{nonce}", "", owner=key_id, ttl=2 * self.max_skew
        )
        if added != "added":
            raise SignatureRejected("the request was already received", reason="replayed")
        return key_id

    def _checked(
        self, method: str, path: str, body: bytes, headers: Mapping[str, str]
    ) -> tuple[str, str, int, float]:
        """``(key id, nonce, timestamp, now)`` of a well-signed, fresh request."""
        key_id = headers.get(KEY_HEADER, "")
        timestamp = headers.get(TIMESTAMP_HEADER, "")
        nonce = headers.get(NONCE_HEADER, "")
        signature = headers.get(SIGNATURE_HEADER, "")
        if not (
            _KEY_ID.fullmatch(key_id)
            and re.fullmatch(r"[0-9]{1,12}", timestamp)
            and _NONCE.fullmatch(nonce)
            and re.fullmatch(r"[A-Za-z0-9_-]{86}", signature)
        ):
            raise SignatureRejected("the request is not signed properly", reason="malformed")
        public = self.keys.get(key_id)
        if public is None:
            raise SignatureRejected(f"key {key_id!r} is not trusted", reason="unknown_key")
        now = self._clock()
        sent = int(timestamp)
        if abs(now - sent) > self.max_skew:
            raise SignatureRejected(
                f"the request's timestamp is {abs(now - sent):.0f}s off (at most "
                f"{self.max_skew:.0f}s)",
                reason="stale",
            )
        raw = base64.urlsafe_b64decode(signature + "==")
        try:
            public.verify(raw, _message(method, path, body, timestamp, nonce))
        except InvalidSignature:
            raise SignatureRejected(
                "the signature does not verify", reason="bad_signature"
            ) from None
        return key_id, nonce, sent, now

    def _forget(self, now: float) -> None:
        stale = [n for n, until in self._seen.items() if until < now]
        for n in stale:
            del self._seen[n]
