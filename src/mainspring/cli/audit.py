"""``mainspring audit verify|export|head --store URL``: check and read an audit log.

``verify`` exits 0 when the log is intact, 1 when it was tampered with (the
first bad ``seq`` and why on stdout), 2 on a usage error (a bad option, key or
URL) and 4 when the store cannot be reached: fit for CI. ``export`` writes the
entries as JSON lines, each valid against the schema shipped in the package
(``mainspring/audit/schema.json``); ``head`` prints the signed head, for an
auditor to keep and check later with ``verify --anchor SEQ:HASH``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Annotated, TypeVar

import anyio
import typer

from mainspring.cli.exit import Debug, ExitCode, failing_cleanly, require_database
from mainspring.errors import ConfigError
from mainspring.stores.urls import open_audit_store

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from mainspring.audit.store import AuditStore

__all__ = ["audit_app"]

T = TypeVar("T")

audit_app = typer.Typer(
    name="audit", help="Check and read a tamper-evident audit log.", no_args_is_help=True
)

Store = Annotated[
    str, typer.Option("--store", help="The store holding the log, e.g. sqlite:///agent.db.")
]
Log = Annotated[str, typer.Option("--log", help="The log's name in the store.")]
_ANCHOR = re.compile(r"^([1-9][0-9]{0,17}):([0-9a-f]{64})$")


def _with_store(url: str, action: Callable[[AuditStore], Awaitable[T]], *, debug: bool) -> T:
    """Run ``action`` on the audit store at ``url`` (errors: one line, exit 2 or 4)."""

    async def go() -> T:
        store = await open_audit_store(url)
        try:
            return await action(store)
        finally:
            await store.aclose()

    with failing_cleanly(debug=debug):
        if url.startswith("memory:"):
            raise ConfigError(f"{url} lives inside one process: nothing is there to read")
        require_database(url)
        result = anyio.run(go)
    return result


def _keys(given: list[str], head_key: str | None) -> Mapping[str, Ed25519PublicKey]:
    """``--public-key`` values (``ID=KEY`` or a bare ``KEY`` for the head's key id)."""
    from mainspring.audit.head import public_key_from_text

    keys: dict[str, Ed25519PublicKey] = {}
    for value in given:
        key_id, sep, text = value.rpartition("=")
        if not sep:
            key_id = head_key or ""
        try:
            keys[key_id] = public_key_from_text(text)
        except ValueError as exc:
            raise ConfigError(f"--public-key {value!r}: {exc}") from None
    return keys


@audit_app.command()
def verify(
    store: Store,
    public_key: Annotated[
        list[str],
        typer.Option(
            "--public-key",
            help="A trusted Ed25519 public key (base64url), as KEY_ID=KEY or KEY; repeatable.",
        ),
    ],
    log: Log = "audit",
    anchor: Annotated[
        str | None,
        typer.Option(help="SEQ:HASH of an entry kept earlier (catches a rollback of the log)."),
    ] = None,
    debug: Debug = False,
) -> None:
    """Check every entry, the chain and the signed head: exit 0 intact, 1 tampered."""
    from mainspring.audit.head import decode_head
    from mainspring.audit.verify import Verification, check_anchor, read_rows, verify_rows

    pinned = None
    if anchor is not None:
        match = _ANCHOR.match(anchor)
        if match is None:
            with failing_cleanly(debug=debug):
                raise ConfigError("--anchor is SEQ:HASH (a sequence number and 64 hex digits)")
        else:
            pinned = int(match[1]), match[2]

    async def check(audit: AuditStore) -> Verification:
        rows = await read_rows(audit, log)
        head = await audit.audit_head(log)
        try:
            head_key = decode_head(head).key_id if head is not None else None
        except ValueError:
            head_key = None
        result = verify_rows(log, rows, head, _keys(public_key, head_key))
        if pinned is not None:
            result = check_anchor(result, dict(rows), *pinned)
        return result

    result = _with_store(store, check, debug=debug)
    if result.ok:
        typer.echo(f"ok: {result.entries} entries, head signed by {_signer(result)}")
        return
    typer.echo(f"tampered: first bad seq {result.first_bad}: {result.reason}")
    raise typer.Exit(ExitCode.FAILURE)


def _signer(result: object) -> str:
    head = getattr(result, "head", None)
    return "nobody (empty log)" if head is None else repr(head.key_id)


@audit_app.command()
def export(
    store: Store,
    log: Log = "audit",
    after: Annotated[int, typer.Option(min=0, help="Only entries after this seq.")] = 0,
    debug: Debug = False,
) -> None:
    """The entries as JSON lines (the schema: mainspring/audit/schema.json)."""
    from mainspring.audit.verify import read_rows

    rows = _with_store(store, lambda audit: read_rows(audit, log, after=after), debug=debug)
    for _, line in rows:
        typer.echo(line)


@audit_app.command()
def head(store: Store, log: Log = "audit", debug: Debug = False) -> None:
    """The log's signed head as JSON (keep it to check the log later with --anchor)."""
    text = _with_store(store, lambda audit: audit.audit_head(log), debug=debug)
    if text is None:
        typer.echo(json.dumps(None))
        return
    typer.echo(text)
