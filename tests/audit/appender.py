"""A worker process appending to a shared audit log (for the two-process test).

``python -m tests.audit.appender BACKEND URL PREFIX KEY_HEX NAME COUNT``: opens the
store, prints ``ready``, waits for a line on stdin, appends COUNT entries whose
``session_id`` is NAME, prints ``done``.
"""

from __future__ import annotations

import sys

import anyio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from mainspring.audit import AuditLog, AuditStore
from mainspring.engine.signing import SigningKey


async def open_store(backend: str, url: str, prefix: str) -> AuditStore:
    if backend == "redis":
        from mainspring.stores.redis import RedisAuditStore

        return await RedisAuditStore.open(url, prefix=prefix)
    if backend == "postgres":
        from mainspring.stores.postgres_audit import PostgresAuditStore

        return await PostgresAuditStore.open(url)
    from mainspring.stores.urls import open_audit_store

    return await open_audit_store(url)


async def main(backend: str, url: str, prefix: str, key_hex: str, name: str, count: int) -> None:
    key = SigningKey("shared", Ed25519PrivateKey.from_private_bytes(bytes.fromhex(key_hex)))
    store = await open_store(backend, url, prefix)
    try:
        log = AuditLog(store, key)
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        await anyio.to_thread.run_sync(sys.stdin.readline)
        for i in range(count):
            await log.append("auto_executed", outcome="ok", session_id=name, tool=f"t{i}")
        sys.stdout.write("done\n")
    finally:
        await store.aclose()


if __name__ == "__main__":
    backend, url, prefix, key_hex, name, count = sys.argv[1:]
    anyio.run(main, backend, url, prefix, key_hex, name, int(count))
