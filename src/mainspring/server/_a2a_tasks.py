"""Where A2A task records live: the deployment's shared store, or one worker's memory.

The sessions behind the tasks are durable already (the session store); the
task records — state, history, artifacts — are the SDK's. They go where
every worker of the deployment sees them, so a task started on one worker is
read, decided, listed and cancelled on any other (:func:`task_store_for`):

- Redis, when the server's checkpoints or locks are there
  (:class:`RedisTaskStore`). Keys (under ``mainspring:a2a:``):
  ``task:<owner digest>:<task id>``, the task as protobuf bytes, and
  ``owner:<owner digest>``, a set of the owner's task ids.
- Otherwise the session store, when it is a SQLite file or PostgreSQL
  (:class:`SharedTaskStore` over its ``TaskRecords``: table
  ``mainspring_tasks``, the task as protobuf bytes per owner digest and task
  id), bound to the store the app opens when it starts.
- This worker's memory (the SDK's ``InMemoryTaskStore``) for a ``memory://``
  store, which one process holds anyway.

The owner is the principal (a digest of the SDK's user scope): another
principal's task is simply not there. A record expires :data:`TASK_TTL`
seconds (a week) after the task's last change; expired rows are pruned lazily.
A stored task that cannot be decoded is a :class:`~mainspring.errors.StoreError`
naming it; nothing else is touched.
"""

from __future__ import annotations

import hashlib

from a2a.server.agent_execution import RequestContext, SimpleRequestContextBuilder
from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import resolve_user_scope
from a2a.server.tasks import InMemoryTaskStore, TaskStore
from a2a.types.a2a_pb2 import ListTasksRequest, ListTasksResponse, SendMessageRequest, Task
from google.protobuf.message import DecodeError

from mainspring.errors import ConfigError, StoreError
from mainspring.server._a2a_saves import SaveFilter
from mainspring.server._config import ServerConfig
from mainspring.stores.base import TaskRecords

__all__ = [
    "TASK_TTL",
    "RedisTaskStore",
    "SharedTaskStore",
    "TaskContextBuilder",
    "task_store_for",
]

TASK_TTL = 7 * 24 * 3600.0
"""Seconds a task record outlives its last change."""

_PREFIX = "mainspring:a2a:"
_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
_SQL_SCHEMES = ("sqlite://", "postgresql://", "postgres://")


def task_store_for(config: ServerConfig) -> TaskStore:
    """The task store every worker of ``config``'s deployment shares.

    Redis when the server's checkpoints or locks are there; else the session
    store when it is SQLite or PostgreSQL (a :class:`SharedTaskStore`, bound
    when the app starts); else (``memory://``) this worker's memory.
    """
    for url in (config.checkpoints, config.locks, config.store):
        if url and url.startswith(_REDIS_SCHEMES):
            return RedisTaskStore(url)
    sessions = config.sessions or config.store
    if sessions and sessions.startswith(_SQL_SCHEMES):
        return SharedTaskStore()
    return InMemoryTaskStore()


def _owner(context: ServerCallContext) -> str:
    return hashlib.sha256(resolve_user_scope(context).encode("utf-8")).hexdigest()[:32]


def _decoded(task_id: str, raw: bytes | str) -> Task:
    """The stored task ``task_id``; :class:`StoreError` if the bytes are not that task."""
    if not isinstance(raw, bytes):
        raise StoreError(f"stored A2A task {task_id!r} is damaged: it is text, not bytes")
    task = Task()
    try:
        task.ParseFromString(raw)
    except DecodeError as exc:
        raise StoreError(f"stored A2A task {task_id!r} is damaged: {exc}") from exc
    if task.id != task_id:
        raise StoreError(f"stored A2A task {task_id!r} is damaged: it holds task {task.id!r}")
    return task


async def _listed(
    tasks: list[Task], params: ListTasksRequest, context: ServerCallContext
) -> ListTasksResponse:
    """``tasks`` filtered, ordered and paged as the SDK's in-memory store does it."""
    scratch = InMemoryTaskStore()
    for task in tasks:
        await scratch.save(task, context)
    return await scratch.list(params, context)


class SharedTaskStore(TaskStore):
    """The SDK's task store on the server's session store (its ``TaskRecords``).

    Every worker over one SQLite file or PostgreSQL database sees one set of
    tasks, each scoped by its owner. Each operation is one store round trip;
    a save of streamed text alone may wait for the next (see :mod:`._a2a_saves`).
    """

    def __init__(
        self,
        records: TaskRecords | None = None,
        *,
        ttl: float = TASK_TTL,
        saves: SaveFilter | None = None,
    ) -> None:
        """Keep tasks in ``records`` (or in the store given to :meth:`bind` later)."""
        self._records = records
        self._ttl = ttl
        self._saves = saves or SaveFilter()

    def bind(self, records: object) -> None:
        """Keep tasks in ``records``: the session store the app opened.

        Raises:
            ConfigError: ``records`` keeps no task records.
        """
        if not isinstance(records, TaskRecords):
            raise ConfigError(f"{type(records).__name__} keeps no A2A task records")
        self._records = records

    def _store(self) -> TaskRecords:
        if self._records is None:
            raise StoreError("the A2A task store is not open: the server has not started")
        return self._records

    async def save(self, task: Task, context: ServerCallContext) -> None:
        """Save (or replace) ``task`` for the caller."""
        owner = _owner(context)
        shape = self._saves.needed(owner, task)
        if shape is None:
            return
        data = task.SerializeToString()
        await self._store().save_task(owner, task.id, data, ttl=self._ttl)
        self._saves.wrote(owner, task.id, shape)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        """The caller's task ``task_id``, if there is one."""
        raw = await self._store().load_task(_owner(context), task_id)
        return None if raw is None else _decoded(task_id, raw)

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """The caller's tasks, filtered and paged as the SDK's in-memory store does."""
        rows = await self._store().owned_tasks(_owner(context))
        return await _listed([_decoded(i, raw) for i, raw in rows], params, context)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        """Forget the caller's task ``task_id``."""
        owner = _owner(context)
        await self._store().delete_task(owner, task_id)
        self._saves.forget(owner, task_id)


class RedisTaskStore(TaskStore):
    """The SDK's task store on Redis, scoped by owner (the principal).

    A save of streamed text alone may wait for the next (see :mod:`._a2a_saves`).
    """

    def __init__(self, url: str, *, ttl: float = TASK_TTL, prefix: str = _PREFIX) -> None:
        """Connect to ``url`` on first use (on the server's event loop)."""
        try:
            import redis.asyncio as aioredis
        except ImportError as exc:  # pragma: no cover - exercised only without the extra
            raise ImportError('RedisTaskStore needs: pip install "mainspring[redis]"') from exc
        self._client = aioredis.Redis.from_url(url)
        self._ttl = max(1, int(ttl))
        self._prefix = prefix
        self._saves = SaveFilter()

    def _task_key(self, owner: str, task_id: str) -> str:
        return f"{self._prefix}task:{owner}:{task_id}"

    def _owner_key(self, owner: str) -> str:
        return f"{self._prefix}owner:{owner}"

    async def save(self, task: Task, context: ServerCallContext) -> None:
        """Save (or replace) ``task`` for the caller."""
        owner = _owner(context)
        shape = self._saves.needed(owner, task)
        if shape is None:
            return
        try:
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.set(self._task_key(owner, task.id), task.SerializeToString(), ex=self._ttl)
                pipe.sadd(self._owner_key(owner), task.id)
                pipe.expire(self._owner_key(owner), self._ttl)
                await pipe.execute()
        except Exception as exc:
            raise StoreError(f"saving A2A task {task.id!r} failed: {exc}") from exc
        self._saves.wrote(owner, task.id, shape)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        """The caller's task ``task_id``, if there is one."""
        try:
            raw = await self._client.get(self._task_key(_owner(context), task_id))
        except Exception as exc:
            raise StoreError(f"reading A2A task {task_id!r} failed: {exc}") from exc
        return None if raw is None else _decoded(task_id, raw)

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """The caller's tasks, filtered and paged as the SDK's in-memory store does."""
        owner = _owner(context)
        try:
            members = await self._client.smembers(self._owner_key(owner))
            ids = sorted(m.decode() if isinstance(m, bytes) else m for m in members)
            raws = await self._client.mget([self._task_key(owner, i) for i in ids]) if ids else []
        except Exception as exc:
            raise StoreError(f"listing A2A tasks failed: {exc}") from exc
        # (a task whose key expired since the set was read is gone)
        tasks = [_decoded(i, raw) for i, raw in zip(ids, raws, strict=True) if raw is not None]
        return await _listed(tasks, params, context)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        """Forget the caller's task ``task_id``."""
        owner = _owner(context)
        try:
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.delete(self._task_key(owner, task_id))
                pipe.srem(self._owner_key(owner), task_id)
                await pipe.execute()
        except Exception as exc:
            raise StoreError(f"deleting A2A task {task_id!r} failed: {exc}") from exc
        self._saves.forget(owner, task_id)

    async def aclose(self) -> None:
        """Close the client's connections."""
        await self._client.aclose()


class TaskContextBuilder(SimpleRequestContextBuilder):
    """The SDK's request context, a follow-up's context id taken from its task.

    A message may name only its task. The SDK would then make up a context id,
    which the task's events contradict once the task is picked up from the
    store (on another worker, or after it was parked): the task's own context
    id is the one.
    """

    def __init__(self, store: TaskStore) -> None:
        """Read tasks from ``store``."""
        super().__init__(should_populate_referred_tasks=False, task_store=None)
        self._store = store

    async def build(
        self,
        context: ServerCallContext,
        params: SendMessageRequest | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        task: Task | None = None,
    ) -> RequestContext:
        """The context of a request, as the SDK builds it, with the task's context id."""
        if task_id and not context_id:
            stored = task or await self._store.get(task_id, context)
            if stored is not None:
                context_id = stored.context_id
        return await super().build(
            context, params=params, task_id=task_id, context_id=context_id, task=task
        )
