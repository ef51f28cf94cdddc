"""Approval ids bound to what the client was shown.

Every approval id the server hands a client is a token carrying the attempt
id, the hash of the exact arguments shown (:func:`canonical_input_hash`) and
an HMAC-SHA256 over both, the session id, the principal it was handed to and
the policy version in force, under the server's key. A decision is accepted
only for a token this server signed, for this session, for the attempt still
pending, with arguments that still hash the same, posted by the principal it
was handed to, under the policy version it was signed under: a token replayed
by another principal or after the policy changed is refused (AISVS 9.2.3).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass, replace

from mainspring.decisions import canonical_input_hash
from mainspring.errors import ConfigError
from mainspring.events import PendingAction

__all__ = ["ApprovalSigner", "BadApproval", "SignedApproval"]

_TOKEN = re.compile(r"^([A-Za-z0-9_-]{1,64})\.([0-9a-f]{64})\.([A-Za-z0-9_-]{43})$")


class BadApproval(ValueError):
    """An approval id this server did not sign, or signed for something else."""


@dataclass(frozen=True, slots=True)
class SignedApproval:
    """What a verified approval id binds: the attempt and the argument hash."""

    attempt_id: str
    input_hash: str


class ApprovalSigner:
    """Signs and verifies approval ids with one server key (shared by all workers)."""

    def __init__(self, key: bytes | None = None) -> None:
        """Sign with ``key`` (at least 32 bytes); ``None`` draws a random one.

        A random key is right for one process only: with several workers, give
        them all the same key, or a decision posted to another worker is refused.

        Raises:
            ConfigError: A key shorter than 32 bytes.
        """
        if key is None:
            key = secrets.token_bytes(32)
        if len(key) < 32:
            raise ConfigError("the server's signing key must be at least 32 bytes")
        self._key = key

    def _mac(
        self, session_id: str, attempt_id: str, input_hash: str, principal: str, policy: str
    ) -> str:
        message = f"{session_id}\n{attempt_id}\n{input_hash}\n{principal}\n{policy}".encode()
        mac = hmac.new(self._key, message, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac).rstrip(b"=").decode("ascii")

    def sign(
        self, session_id: str, pending: PendingAction, *, principal: str = "", policy: str = ""
    ) -> str:
        """The approval id for ``pending`` in ``session_id``, handed to ``principal``.

        ``policy`` is the policy version in force (``PermissionRules.version``).
        """
        input_hash = canonical_input_hash(pending.input)
        mac = self._mac(session_id, pending.attempt_id, input_hash, principal, policy)
        return f"{pending.attempt_id}.{input_hash}.{mac}"

    def verify(
        self, session_id: str, token: str, *, principal: str = "", policy: str = ""
    ) -> SignedApproval:
        """What ``token`` binds, if signed for ``session_id``, ``principal`` and ``policy``.

        Raises:
            BadApproval: Malformed, or signed for another session, another
                principal, another policy version, or by another key.
        """
        match = _TOKEN.match(token)
        if match is None:
            raise BadApproval("not an approval id this server handed out")
        attempt_id, input_hash, mac = match.groups()
        expected = self._mac(session_id, attempt_id, input_hash, principal, policy)
        if not hmac.compare_digest(mac, expected):
            raise BadApproval(
                "the approval id's signature does not match (it was handed out for another "
                "session, principal or policy version)"
            )
        return SignedApproval(attempt_id=attempt_id, input_hash=input_hash)

    def bind(
        self, session_id: str, pending: PendingAction, *, principal: str = "", policy: str = ""
    ) -> PendingAction:
        """``pending`` as ``principal`` sees it: its ``approval_id`` signed for them."""
        token = self.sign(session_id, pending, principal=principal, policy=policy)
        return replace(pending, approval_id=token)
