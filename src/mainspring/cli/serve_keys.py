"""Where ``mainspring serve`` gets its approval-signing key, and what it says about it.

An approval id is signed (HMAC) with the server's key; a server that starts
with another key refuses every earlier id (403). So the key must outlive a
restart wherever the sessions do:

1. ``$MAINSPRING_SIGNING_KEY`` (hex, 64+ digits) when set: every worker and
   every machine of a deployment shares it.
2. Else, with sessions in a SQLite file, a key kept beside it in
   ``<file>.signing-key``: made once (32 random bytes, hex, permissions 0600)
   and read at every start. Whoever can read it can forge approvals: it is
   refused when others may read it.
3. Else (sessions in memory, or in PostgreSQL without the variable) a random
   key for this run, with a warning that approvals do not survive a restart.
"""

from __future__ import annotations

import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from mainspring.errors import ConfigError

__all__ = ["KEY_SUFFIX", "SIGNING_KEY_ENV", "SigningKey", "signing_key"]

SIGNING_KEY_ENV = "MAINSPRING_SIGNING_KEY"
"""The approval-signing key, hex (64+ digits); every worker of a deployment shares it."""
KEY_SUFFIX = ".signing-key"
"""The file beside a SQLite database that keeps its server's signing key."""


@dataclass(frozen=True, slots=True)
class SigningKey:
    """The key (hex), and the line ``serve`` prints about it at start-up."""

    hex: str | None
    """``None``: each worker draws its own (one worker only)."""
    note: str
    lasting: bool
    """Whether approvals survive a restart."""


def _parse(raw: str, source: str) -> str:
    try:
        key = bytes.fromhex(raw)
    except ValueError:
        raise ConfigError(f"{source} must be hex (64+ digits)") from None
    if len(key) < 32:
        raise ConfigError(f"{source} must hold at least 32 bytes (64 hex digits)")
    return raw


def _kept_beside(database: str) -> tuple[str, Path, bool]:
    """The key in ``<database>.signing-key`` (made if missing) and whether it is new.

    Raises:
        ConfigError: The file is readable by others, unreadable, or not a key.
    """
    path = Path(database + KEY_SUFFIX).resolve()
    made = secrets.token_hex(32)
    draft = path.with_name(f"{path.name}.{secrets.token_hex(8)}")
    try:  # written whole beside it, then linked in: a racing start reads a whole key
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as file:
            file.write(made + "\n")
        try:
            os.link(draft, path)
        finally:
            draft.unlink()
    except FileExistsError:
        pass
    except OSError as exc:
        raise ConfigError(
            f"cannot keep the signing key in {path}: {exc.strerror}; set ${SIGNING_KEY_ENV} instead"
        ) from None
    else:
        return made, path, True
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as exc:
        problem = exc.strerror if isinstance(exc, OSError) else "not a hex key"
        raise ConfigError(f"cannot read the signing key {path}: {problem}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(
            f"the signing key {path} may be read by others (mode {stat.S_IMODE(mode):o}): "
            f"chmod 600 {path}"
        )
    return _parse(text, f"the signing key in {path}"), path, False


def signing_key(sessions_file: str | None, *, in_memory: bool, workers: int) -> SigningKey:
    """The key a server signs approvals with, and what to say about it.

    Args:
        sessions_file: The SQLite file that holds the sessions, if one does.
        in_memory: The sessions live in this process only.
        workers: Worker processes (several need one key between them).

    Raises:
        ConfigError: ``$MAINSPRING_SIGNING_KEY`` or the kept key is malformed, or
            the kept key's file is readable by others.
    """
    raw = os.environ.get(SIGNING_KEY_ENV, "").strip()
    if raw:
        return SigningKey(
            _parse(raw, f"${SIGNING_KEY_ENV}"), f"approvals signed with ${SIGNING_KEY_ENV}", True
        )
    if sessions_file is not None and sessions_file != ":memory:":
        key, path, made = _kept_beside(sessions_file)
        verb = "made and kept" if made else "kept"
        return SigningKey(key, f"approval signing key: {verb} in {path} (mode 600)", True)
    drawn = secrets.token_hex(32) if workers > 1 else None
    if in_memory:
        why = "sessions and approvals live in memory: a restart forgets them"
        fix = "use --store sqlite:///mainspring.db to keep them"
    else:
        why = "approval ids will not survive a restart (a new key is drawn at each start)"
        fix = f"set ${SIGNING_KEY_ENV} to 64 hex digits, the same for every worker"
    return SigningKey(drawn, f"warning: {why}; {fix}", False)
