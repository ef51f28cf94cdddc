"""Redis stores: stream checkpoints and run locks shared by many workers.

Import them from this module (``mainspring.stores`` does not, so that it
stays light without the extra)::

    from mainspring.stores.redis import RedisCheckpointStore, RedisRunLock

    checkpoints = await RedisCheckpointStore.open("redis://localhost:6379/0")
    locks = await RedisRunLock.open("redis://localhost:6379/0")

Keys live under a prefix (``"mainspring:"`` by default):

- ``<prefix>schema``: the layout version, set by the first open.
- ``<prefix>stream:<stream id>``: a list of events as JSON text; it expires
  ``ttl`` seconds after its last append.
- ``<prefix>lock:<key>``: the owner of a lease; the key's TTL is the lease's.
- ``<prefix>rec:<kind>:<key>``: a shared record (``SharedRecords``, held by
  :class:`RedisRunLock`): a hash of its owner and value, with the record's TTL;
  ``<prefix>recown:<kind>:<owner>``: a sorted set of the owner's record keys,
  scored by their expiry (milliseconds of the server's clock).
- ``<prefix>audit:<log>``: an audit log's entries (:class:`RedisAuditStore`), a
  sorted set of entry lines scored by ``seq``; ``<prefix>audithead:<log>``: its head.

redis-py's asyncio client runs on asyncio only (not trio).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Self, cast

import anyio
import anyio.lowlevel

try:
    import redis.asyncio as aioredis
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import RedisError
    from redis.exceptions import TimeoutError as RedisTimeoutError
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError('mainspring.stores.redis needs: pip install "mainspring[redis]"') from exc

from mainspring.audit.store import Seal, Sealed
from mainspring.codec import event_to_json
from mainspring.errors import ConfigError, SchemaTooNew, StoreError
from mainspring.events import Event
from mainspring.stores._log import check_cursor, decode_log
from mainspring.stores.base import SCHEMA_VERSION, RecordAdded
from mainspring.stores.records import check_kind, check_record_ttl

__all__ = ["DEFAULT_PREFIX", "RedisAuditStore", "RedisCheckpointStore", "RedisRunLock"]

DEFAULT_PREFIX = "mainspring:"
"""Prefix of every key mainspring writes."""

# A lease is taken when free, expired, or already ours (re-entrant for its owner).
_ACQUIRE = """
local current = redis.call('GET', KEYS[1])
if current and current ~= ARGV[1] then
    return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""

_REFRESH = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return 1
end
return 0
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('DEL', KEYS[1])
end
return 0
"""


# Shared records: one script each, so a put, a take or a count is one atomic step.
# KEYS: the record, its owner's set; ARGV: owner, value, ttl ms, limit (0: none), key.
_PUT_RECORD = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('EXISTS', KEYS[1]) == 1 then
    return 'exists'
end
local limit = tonumber(ARGV[4])
if limit > 0 and redis.call('ZCARD', KEYS[2]) >= limit then
    return 'full'
end
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'value', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[3]), ARGV[5])
local longest = redis.call('PTTL', KEYS[2])
if longest < tonumber(ARGV[3]) then
    redis.call('PEXPIRE', KEYS[2], ARGV[3])
end
return 'added'
"""
# KEYS: the record; ARGV: the owners' set prefix, the record's key. A record
# past its score (which the key's own expiry trails by under a millisecond) is
# expired here too, as it is to _OWNED_RECORDS.
_TAKE_RECORD = """
local found = redis.call('HMGET', KEYS[1], 'owner', 'value')
if not found[1] then
    return false
end
redis.call('DEL', KEYS[1])
local owners = ARGV[1] .. found[1]
local expires = redis.call('ZSCORE', owners, ARGV[2])
redis.call('ZREM', owners, ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if expires and tonumber(expires) <= now then
    return false
end
return found
"""
# KEYS: the owner's set; ARGV: the record prefix, limit.
_OWNED_RECORDS = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local keys = redis.call('ZRANGE', KEYS[1], 0, -1)
table.sort(keys)
local out = {}
for _, key in ipairs(keys) do
    if #out >= tonumber(ARGV[2]) * 2 then
        break
    end
    local value = redis.call('HGET', ARGV[1] .. key, 'value')
    if value then
        table.insert(out, key)
        table.insert(out, value)
    end
end
return out
"""

# An audit append is a check-and-set: the entry goes in only if the head is still
# the one it was sealed against (else the caller seals again on the new head).
# KEYS: the entries, the head; ARGV: the head sealed against ('' for none), seq,
# entry, new head.
_APPEND_AUDIT = """
local head = redis.call('GET', KEYS[2])
if (head or '') ~= ARGV[1] then
    return 0
end
if #redis.call('ZRANGE', KEYS[1], ARGV[2], ARGV[2], 'BYSCORE') > 0 then
    return -1
end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
redis.call('SET', KEYS[2], ARGV[4])
return 1
"""


def _milliseconds(seconds: float) -> int:
    # Redis refuses an expiry of 0; a lease never lasts less than a millisecond.
    return max(1, math.ceil(seconds * 1000))


def _check_ttl(ttl: float) -> None:
    if not ttl > 0:
        raise ConfigError(f"ttl must be positive, got {ttl}")


class _RedisStore:
    """A client, the prefix its keys live under, and errors turned into StoreError."""

    def __init__(self, client: aioredis.Redis, *, prefix: str = DEFAULT_PREFIX) -> None:
        self._client = client
        self._prefix = prefix
        self._where = _where(client)

    @classmethod
    async def _connect(
        cls, url: str, *, prefix: str, connect_timeout: float, retry: bool
    ) -> aioredis.Redis:
        """A client on ``url``, pinged, with the schema version checked (or set)."""
        options: dict[str, Any] = {"socket_connect_timeout": connect_timeout}
        if not retry:
            options["retry"] = Retry(NoBackoff(), retries=0)
        try:
            client = aioredis.Redis.from_url(url, **options)
        except ValueError:
            # from None: the URL may hold a password.
            raise ConfigError("not a Redis URL: use redis://, rediss:// or unix://") from None
        where = _where(client)
        try:
            await client.ping()
            await _check_schema(client, prefix=prefix, where=where)
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            await _close(client)
            raise StoreError(f"cannot reach Redis at {where}: {exc}") from exc
        except RedisError as exc:
            await _close(client)
            raise StoreError(f"Redis at {where} refused to open the store: {exc}") from exc
        except BaseException:
            await _close(client)
            raise
        return client

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        try:
            yield
        except RedisError as exc:
            raise StoreError(f"Redis at {self._where}: {action} failed: {exc}") from exc

    async def aclose(self) -> None:
        """Close the client and its connections."""
        await _close(self._client)


class RedisCheckpointStore(_RedisStore):
    """Event logs as Redis lists, each expiring ``ttl`` seconds after its last append.

    Calls are not retried: an append retried after a timeout may have run the
    first time too, and would store the event twice. A failed call raises
    :class:`~mainspring.errors.StoreError`.
    """

    def __init__(
        self, client: aioredis.Redis, *, prefix: str = DEFAULT_PREFIX, ttl: float = 300.0
    ) -> None:
        """Wrap a client (prefer :meth:`open`, which also checks the schema version).

        Raises:
            ConfigError: ``ttl`` is not positive.
        """
        _check_ttl(ttl)
        super().__init__(client, prefix=prefix)
        self._ttl_ms = _milliseconds(ttl)

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        prefix: str = DEFAULT_PREFIX,
        ttl: float = 300.0,
        connect_timeout: float = 5.0,
    ) -> Self:
        """Connect to ``url`` (``redis://[[user]:password@]host:port/db``).

        Raises:
            ConfigError: ``ttl`` is not positive.
            StoreError: The server cannot be reached.
            SchemaTooNew: The keys were written by a newer mainspring.
        """
        _check_ttl(ttl)
        client = await cls._connect(
            url, prefix=prefix, connect_timeout=connect_timeout, retry=False
        )
        return cls(client, prefix=prefix, ttl=ttl)

    def _key(self, stream_id: str) -> str:
        return f"{self._prefix}stream:{stream_id}"

    async def append(self, stream_id: str, event: Event) -> None:
        """Append one event and refresh the stream's TTL, in one round trip."""
        await self.append_many(stream_id, (event,))

    async def append_many(self, stream_id: str, events: Sequence[Event]) -> None:
        """Append events and refresh the stream's TTL, in one round trip."""
        if not events:
            return
        records = [event_to_json(event) for event in events]
        key = self._key(stream_id)
        with self._errors(f"append to stream {stream_id!r}"):
            # MULTI/RPUSH/PEXPIRE/EXEC go out in one write: one round trip, applied atomically.
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.rpush(key, *records)
                pipe.pexpire(key, self._ttl_ms)
                await pipe.execute()

    async def load(self, stream_id: str) -> list[Event]:
        """Every event of the stream, in order (empty if unknown or expired).

        Raises:
            CheckpointCorrupt: A record cannot be decoded (names stream and offset).
        """
        with self._errors(f"load of stream {stream_id!r}"):
            records = await self._client.lrange(self._key(stream_id), 0, -1)
        return decode_log(stream_id, records)

    async def load_after(self, stream_id: str, cursor: int) -> list[Event]:
        """The stream's events from position ``cursor`` on, in one ``LRANGE``.

        Each list element is one event, so position ``cursor`` is element
        ``cursor`` (see :class:`~mainspring.stores.base.TailLoad`).

        Raises:
            ValueError: ``cursor`` is negative.
            CheckpointCorrupt: A record cannot be decoded (names stream and offset).
        """
        check_cursor(cursor)
        with self._errors(f"load of stream {stream_id!r}"):
            records = await self._client.lrange(self._key(stream_id), cursor, -1)
        return decode_log(stream_id, records, start=cursor)

    async def clear(self, stream_id: str) -> None:
        """Drop the stream's log."""
        with self._errors(f"clear of stream {stream_id!r}"):
            await self._client.delete(self._key(stream_id))


class RedisRunLock(_RedisStore):
    """Leases as Redis keys holding their owner, with compare-and-set scripts.

    Every call is idempotent for its owner, so redis-py retries it on a lost
    connection (its default policy).
    """

    def __init__(self, client: aioredis.Redis, *, prefix: str = DEFAULT_PREFIX) -> None:
        """Wrap a client (prefer :meth:`open`, which also checks the schema version)."""
        super().__init__(client, prefix=prefix)
        self._acquire = client.register_script(_ACQUIRE)
        self._refresh = client.register_script(_REFRESH)
        self._release = client.register_script(_RELEASE)
        self._put_record = client.register_script(_PUT_RECORD)
        self._take_record = client.register_script(_TAKE_RECORD)
        self._owned_records = client.register_script(_OWNED_RECORDS)

    @classmethod
    async def open(
        cls, url: str, *, prefix: str = DEFAULT_PREFIX, connect_timeout: float = 5.0
    ) -> Self:
        """Connect to ``url`` (``redis://[[user]:password@]host:port/db``).

        Raises:
            StoreError: The server cannot be reached.
            SchemaTooNew: The keys were written by a newer mainspring.
        """
        client = await cls._connect(url, prefix=prefix, connect_timeout=connect_timeout, retry=True)
        return cls(client, prefix=prefix)

    def _key(self, key: str) -> str:
        return f"{self._prefix}lock:{key}"

    async def acquire(self, key: str, owner: str, *, ttl: float) -> bool:
        """Take the lease for ``ttl`` seconds unless another owner holds a live one."""
        with self._errors(f"acquire of lock {key!r}"):
            taken = await self._acquire(keys=[self._key(key)], args=[owner, _milliseconds(ttl)])
        return bool(taken)

    async def refresh(self, key: str, owner: str, *, ttl: float) -> bool:
        """Extend this owner's live lease; ``False`` if it lost it."""
        with self._errors(f"refresh of lock {key!r}"):
            kept = await self._refresh(keys=[self._key(key)], args=[owner, _milliseconds(ttl)])
        return bool(kept)

    async def release(self, key: str, owner: str) -> None:
        """Drop this owner's lease (a no-op unless it holds it)."""
        with self._errors(f"release of lock {key!r}"):
            await self._release(keys=[self._key(key)], args=[owner])

    async def holder(self, key: str) -> str | None:
        """The owner of the live lease, if any."""
        with self._errors(f"read of lock {key!r}"):
            owner = await self._client.get(self._key(key))
        return owner.decode() if isinstance(owner, bytes) else owner

    async def put_record(
        self,
        kind: str,
        key: str,
        value: str,
        *,
        owner: str,
        ttl: float,
        limit: int | None = None,
    ) -> RecordAdded:
        """Add a shared record unless a live one has the key (``SharedRecords``).

        Not idempotent: a put retried after a lost connection may answer
        ``exists`` for the record it added (a claim refuses: the safe side).
        """
        ms = _milliseconds(check_record_ttl(ttl, limit))
        kind = check_kind(kind)
        keys = [self._record(kind, key), f"{self._prefix}recown:{kind}:{owner}"]
        with self._errors(f"put of record {kind}/{key!r}"):
            done = await self._put_record(keys=keys, args=[owner, value, ms, limit or 0, key])
        text = done.decode() if isinstance(done, bytes) else str(done)
        assert text in ("added", "exists", "full"), text
        return cast(RecordAdded, text)

    async def take_record(self, kind: str, key: str) -> tuple[str, str] | None:
        """Remove and return a live shared record, ``(owner, value)``."""
        kind = check_kind(kind)
        owners = f"{self._prefix}recown:{kind}:"
        with self._errors(f"take of record {kind}/{key!r}"):
            found = await self._take_record(keys=[self._record(kind, key)], args=[owners, key])
        if not found:
            return None
        owner, value = (v.decode() if isinstance(v, bytes) else str(v) for v in found)
        return owner, value

    async def owned_records(
        self, kind: str, owner: str, *, limit: int = 1000
    ) -> list[tuple[str, str]]:
        """``(key, value)`` of ``owner``'s live records of ``kind``, sorted by key."""
        kind = check_kind(kind)
        if limit <= 0:
            return []
        with self._errors(f"list of records {kind}"):
            flat = await self._owned_records(
                keys=[f"{self._prefix}recown:{kind}:{owner}"],
                args=[f"{self._prefix}rec:{kind}:", limit],
            )
        text = [v.decode() if isinstance(v, bytes) else str(v) for v in flat]
        return list(zip(text[::2], text[1::2], strict=True))

    def _record(self, kind: str, key: str) -> str:
        return f"{self._prefix}rec:{kind}:{key}"


class RedisAuditStore(_RedisStore):
    """Audit logs in Redis (``AuditStore``): entries in a sorted set, the head apart.

    An append reads the head, seals the entry against it, and stores entry and
    head with one script that checks the head is unchanged (else it reads the
    new head and seals again): workers on any number of machines make one chain.
    Keys never expire; persistence is the server's (AOF or snapshots).
    """

    def __init__(self, client: aioredis.Redis, *, prefix: str = DEFAULT_PREFIX) -> None:
        """Wrap a client (prefer :meth:`open`, which also checks the schema version)."""
        super().__init__(client, prefix=prefix)
        self._append = client.register_script(_APPEND_AUDIT)

    @classmethod
    async def open(
        cls, url: str, *, prefix: str = DEFAULT_PREFIX, connect_timeout: float = 5.0
    ) -> Self:
        """Connect to ``url`` (see :meth:`RedisRunLock.open`)."""
        client = await cls._connect(url, prefix=prefix, connect_timeout=connect_timeout, retry=True)
        return cls(client, prefix=prefix)

    async def append_audit(self, log: str, seal: Seal) -> Sealed:
        """See :meth:`~mainspring.audit.store.AuditStore.append_audit`."""
        keys = [f"{self._prefix}audit:{log}", f"{self._prefix}audithead:{log}"]
        with self._errors(f"append to audit log {log!r}"):
            while True:
                head = await self._client.get(keys[1])
                seen = head.decode() if isinstance(head, bytes) else head
                sealed = seal(seen)
                done = await self._append(
                    keys=keys, args=[seen or "", sealed.seq, sealed.entry, sealed.head]
                )
                if done == 1:
                    return sealed
                if done == -1:
                    raise StoreError(f"audit log {log!r} already holds entry {sealed.seq}")
                await anyio.lowlevel.checkpoint()  # another append came between: seal again

    async def audit_entries(
        self, log: str, *, after: int = 0, limit: int = 1000
    ) -> list[tuple[int, str]]:
        """See :meth:`~mainspring.audit.store.AuditStore.audit_entries`."""
        if limit <= 0:
            return []
        with self._errors(f"read of audit log {log!r}"):
            found = await self._client.zrange(
                f"{self._prefix}audit:{log}",
                f"({after}",
                "+inf",
                byscore=True,
                offset=0,
                num=limit,
                withscores=True,
            )
        return [(int(score), _text(line)) for line, score in cast(list[tuple[bytes, float]], found)]

    async def audit_head(self, log: str) -> str | None:
        """See :meth:`~mainspring.audit.store.AuditStore.audit_head`."""
        with self._errors(f"read of audit head {log!r}"):
            head = await self._client.get(f"{self._prefix}audithead:{log}")
        return None if head is None else _text(head)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _where(client: aioredis.Redis) -> str:
    """``host:port`` (or the socket path) of a client, never its password."""
    kwargs = client.connection_pool.connection_kwargs
    if "path" in kwargs:
        return str(kwargs["path"])
    return f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"


async def _check_schema(client: aioredis.Redis, *, prefix: str, where: str) -> None:
    key = f"{prefix}schema"
    async with client.pipeline(transaction=True) as pipe:
        pipe.set(key, SCHEMA_VERSION, nx=True)
        pipe.get(key)
        _, stored = await pipe.execute()
    try:
        version = int(stored)
    except (TypeError, ValueError):
        raise StoreError(
            f"Redis at {where}: key {key!r} holds {stored!r}, not a schema version"
        ) from None
    if version > SCHEMA_VERSION:
        raise SchemaTooNew(
            f"Redis at {where} (prefix {prefix!r}) holds schema version {version}, written by"
            f" a newer mainspring; this one reads up to version {SCHEMA_VERSION}"
        )


async def _close(client: aioredis.Redis) -> None:
    # Shielded: a cancelled caller must not leave sockets open.
    with anyio.CancelScope(shield=True):
        await client.aclose()
