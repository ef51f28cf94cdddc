"""ArtifactStore: content-addressed blobs (large tool results, files, stage outputs) on obstore.

::

    artifacts = ArtifactStore.local("var/artifacts")          # the default: a directory
    artifacts = ArtifactStore.memory()                         # tests
    artifacts = ArtifactStore.s3("bucket", endpoint="http://127.0.0.1:9000", allow_http=True)

    ref = await artifacts.put("agent/helper", data, name="report.csv", content_type="text/csv")
    data = await artifacts.get(ref.uri)                        # checked against ref.sha256

An artifact lives under a namespace (for a tool's results the caller's own with
the agent, ``principal/<kind>/<id>/agent/<name>``) at ``<namespace>/<sha256>``, with a small JSON
description beside it (``<sha256>.json``: name, content type, size). The same
bytes put twice are stored once. Every read is checked against its hash, so a
damaged or swapped object is an error, never silently wrong data. ``max_bytes``
bounds what may be put and read.

Namespaces are one to eight ``/``-separated segments of letters, digits,
``_``, ``-`` and ``.`` (not ``.`` or ``..``): no input can name a path outside
the store. A reference's URI is ``artifact://<namespace>/<sha256>``.

Errors: bad namespaces, sizes and URIs are :class:`~mainspring.errors.ConfigError`;
a missing artifact is :class:`~mainspring.errors.ArtifactNotFound`; a damaged one,
or a backend failure, :class:`~mainspring.errors.StoreError`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, TypeVar

import anyio.to_thread

from mainspring.embeddings import check_count
from mainspring.errors import ArtifactNotFound, ConfigError, StoreError
from mainspring.stores._private import DIR_MODE, FILE_MODE, make_private_dirs

try:
    import obstore
    from obstore.exceptions import NotFoundError
    from obstore.store import LocalStore, MemoryStore, S3Store
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError('ArtifactStore needs: pip install "mainspring[artifacts]"') from exc

if TYPE_CHECKING:
    from obstore.store import ObjectStore

__all__ = ["DEFAULT_MAX_BYTES", "ArtifactRef", "ArtifactStore", "agent_namespace"]

T = TypeVar("T")

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
"""The largest artifact a store accepts unless told otherwise (64 MiB)."""

_SEGMENT = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
_SHA = re.compile(r"^[0-9a-f]{64}$")
_MAX_SEGMENTS = 8
_SCHEME = "artifact://"
_MISSING = (NotFoundError, FileNotFoundError)
"""What obstore raises for a missing object (its own class, or FileNotFoundError)."""


def check_namespace(namespace: object) -> str:
    """``namespace`` if it is safe to use as a key prefix, else :class:`ConfigError`."""
    if not isinstance(namespace, str):
        raise ConfigError(f"an artifact namespace must be a str, not {type(namespace).__name__}")
    parts = namespace.split("/")
    if not 1 <= len(parts) <= _MAX_SEGMENTS or any(
        not _SEGMENT.fullmatch(p) or p in (".", "..") for p in parts
    ):
        raise ConfigError(
            f"artifact namespace {namespace!r} must be 1-{_MAX_SEGMENTS} '/'-separated segments"
            " of letters, digits, '_', '-' and '.'"
        )
    return namespace


def agent_namespace(agent_name: str) -> str:
    """The namespace of an agent's artifacts: ``agent/<name>``, the name injectively encoded.

    Distinct names give distinct namespaces (``team x``, ``team/x`` and
    ``team_x`` are three; see :func:`~mainspring.principals.encode_segment`).
    The artifact tools file a caller's artifacts under its own data scope
    (``principal/<kind>/<id>/agent/<name>``) instead.
    """
    from mainspring.principals import encode_segment

    return f"agent/{encode_segment(agent_name)}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ArtifactRef:
    """A stored artifact: where it is and what it holds (what a tool result points to)."""

    namespace: str
    sha256: str
    """The hex SHA-256 of the bytes (also their key)."""
    size: int
    """Bytes."""
    content_type: str = "application/octet-stream"
    name: str = ""
    """A display name (a file name, a title); not part of the key."""

    @property
    def uri(self) -> str:
        """``artifact://<namespace>/<sha256>``."""
        return f"{_SCHEME}{self.namespace}/{self.sha256}"

    @property
    def key(self) -> str:
        """The object key of the bytes."""
        return f"{self.namespace}/{self.sha256}"

    @staticmethod
    def parse(uri: object) -> tuple[str, str]:
        """The namespace and hash an ``artifact://`` URI names.

        Raises:
            ConfigError: Not such a URI.
        """
        if not isinstance(uri, str) or not uri.startswith(_SCHEME):
            raise ConfigError(f"not an artifact URI (artifact://<namespace>/<sha256>): {uri!r}")
        namespace, _, sha = uri.removeprefix(_SCHEME).rpartition("/")
        if not _SHA.fullmatch(sha):
            raise ConfigError(f"artifact URI {uri!r} does not end in a SHA-256")
        return check_namespace(namespace), sha


class ArtifactStore:
    """Artifacts in an obstore ``ObjectStore``: put, get, read a range, list, delete."""

    def __init__(self, store: ObjectStore, *, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        """Artifacts in ``store`` (any obstore store), at most ``max_bytes`` each.

        Raises:
            ConfigError: ``max_bytes`` is not a positive integer.
        """
        self._store = store
        self.max_bytes = check_count("max_bytes", max_bytes)
        self._local_root: Path | None = None
        """The folder of a :meth:`local` store: what it writes there is made private."""

    @classmethod
    def local(cls, directory: str | Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Self:
        """Artifacts as files under ``directory`` (created if missing): the default.

        Folders it creates have mode ``0700`` and the files it writes ``0600``:
        artifacts are private to the user running the store.
        """
        path = Path(directory).resolve()
        try:
            make_private_dirs(path)
        except OSError as exc:
            raise StoreError(f"cannot create the artifact folder {str(path)!r}: {exc}") from exc
        store = cls(LocalStore(path), max_bytes=max_bytes)
        store._local_root = path
        return store

    @classmethod
    def memory(cls, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Self:
        """Artifacts in process memory (tests, demos)."""
        return cls(MemoryStore(), max_bytes=max_bytes)

    @classmethod
    def s3(
        cls,
        bucket: str,
        *,
        endpoint: str | None = None,
        region: str = "us-east-1",
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        prefix: str | None = None,
        allow_http: bool = False,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> Self:
        """Artifacts in an S3 bucket, or any S3-compatible server at ``endpoint``.

        Credentials not given are taken from the environment (``AWS_*``).
        ``allow_http`` permits a plain-HTTP endpoint (a server on loopback).
        """
        config: dict[str, Any] = {"region": region}
        if endpoint is not None:
            config["endpoint"] = endpoint
            config["virtual_hosted_style_request"] = False
        if access_key_id is not None:
            config["access_key_id"] = access_key_id
        if secret_access_key is not None:
            config["secret_access_key"] = secret_access_key
        store = S3Store(
            bucket,
            prefix=prefix,
            config=config,  # type: ignore[arg-type]  # S3Config is a TypedDict of these keys
            client_options={"allow_http": allow_http},
        )
        return cls(store, max_bytes=max_bytes)

    async def put(
        self,
        namespace: str,
        data: bytes,
        *,
        name: str = "",
        content_type: str = "application/octet-stream",
    ) -> ArtifactRef:
        """Store ``data`` in ``namespace``; its reference. Putting the same bytes again is cheap.

        Safe to cancel: an interrupted put leaves at most the bytes without
        their description, which the next put of them completes.

        Raises:
            ConfigError: A bad namespace, ``data`` not bytes, or larger than ``max_bytes``.
            StoreError: The backend failed.
        """
        namespace = check_namespace(namespace)
        if not isinstance(data, bytes | bytearray | memoryview):
            raise ConfigError(f"artifact data must be bytes, not {type(data).__name__}")
        blob = bytes(data)
        if len(blob) > self.max_bytes:
            raise ConfigError(
                f"artifact of {len(blob)} bytes is larger than this store's limit"
                f" of {self.max_bytes} bytes"
            )
        ref = ArtifactRef(
            namespace=namespace,
            sha256=hashlib.sha256(blob).hexdigest(),
            size=len(blob),
            content_type=str(content_type)[:200],
            name=str(name)[:500],
        )
        description = json.dumps(
            {"size": ref.size, "content_type": ref.content_type, "name": ref.name}
        ).encode()
        try:
            await _run(obstore.put, self._store, ref.key, blob)
            await _run(obstore.put, self._store, ref.key + ".json", description)
            if self._local_root is not None:
                await _run(_make_private, self._local_root, ref.key)
        except Exception as exc:
            raise StoreError(f"storing artifact {ref.uri} failed: {exc}") from exc
        return ref

    async def get(self, ref: ArtifactRef | str) -> bytes:
        """The artifact's bytes, checked against its hash.

        Raises:
            ConfigError: ``ref`` is not a reference or artifact URI.
            ArtifactNotFound: No such artifact.
            StoreError: Its bytes do not match the hash, it is larger than
                ``max_bytes``, or the backend failed.
        """
        namespace, sha = _target(ref)
        key = f"{namespace}/{sha}"
        try:
            meta = await _run(obstore.head, self._store, key)
            if meta["size"] > self.max_bytes:
                raise StoreError(
                    f"artifact {_SCHEME}{key} has {meta['size']} bytes, more than"
                    f" this store's limit of {self.max_bytes}"
                )
            data = await _run(_get_bytes, self._store, key)
        except _MISSING:
            raise ArtifactNotFound(f"no artifact {_SCHEME}{key}") from None
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"reading artifact {_SCHEME}{key} failed: {exc}") from exc
        if hashlib.sha256(data).hexdigest() != sha:
            raise StoreError(f"artifact {_SCHEME}{key} is damaged: its bytes do not match its hash")
        return data

    async def read(self, ref: ArtifactRef | str, *, offset: int = 0, length: int = 4096) -> bytes:
        """Up to ``length`` bytes from ``offset`` (for paging through a large artifact).

        A range is not hash-checked (only :meth:`get` of the whole is).

        Raises:
            ConfigError: A bad reference, offset or length.
            ArtifactNotFound: No such artifact.
            StoreError: The backend failed.
        """
        namespace, sha = _target(ref)
        check_count("offset", offset, minimum=0)
        check_count("length", length)
        key = f"{namespace}/{sha}"
        try:
            size = (await _run(obstore.head, self._store, key))["size"]
            if offset >= size:
                return b""
            end = min(size, offset + length)
            return bytes(await _run(_get_range, self._store, key, offset, end))
        except _MISSING:
            raise ArtifactNotFound(f"no artifact {_SCHEME}{key}") from None
        except Exception as exc:
            raise StoreError(f"reading artifact {_SCHEME}{key} failed: {exc}") from exc

    async def describe(self, ref: ArtifactRef | str) -> ArtifactRef:
        """The full reference (size, content type, name) for a URI.

        Raises:
            ArtifactNotFound: No such artifact.
        """
        namespace, sha = _target(ref)
        key = f"{namespace}/{sha}"
        try:
            raw = json.loads(await _run(_get_bytes, self._store, key + ".json"))
            return ArtifactRef(
                namespace=namespace,
                sha256=sha,
                size=int(raw["size"]),
                content_type=str(raw.get("content_type", "application/octet-stream")),
                name=str(raw.get("name", "")),
            )
        except _MISSING:
            raise ArtifactNotFound(f"no artifact {_SCHEME}{key}") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise StoreError(f"artifact {_SCHEME}{key} has a damaged description: {exc}") from exc
        except Exception as exc:
            raise StoreError(f"reading artifact {_SCHEME}{key} failed: {exc}") from exc

    async def list(self, namespace: str, *, limit: int = 100) -> list[ArtifactRef]:
        """The artifacts directly in ``namespace``, by hash, at most ``limit``.

        Raises:
            ConfigError: A bad namespace.
            StoreError: The backend failed.
        """
        namespace = check_namespace(namespace)
        found: list[ArtifactRef] = []
        try:
            for path, size in await _run(_list, self._store, namespace + "/"):
                rest = path.removeprefix(namespace + "/")
                if _SHA.fullmatch(rest):
                    found.append(ArtifactRef(namespace=namespace, sha256=rest, size=size))
        except Exception as exc:
            raise StoreError(f"listing artifacts in {namespace!r} failed: {exc}") from exc
        found.sort(key=lambda r: r.sha256)
        described: list[ArtifactRef] = []
        for ref in found[: max(limit, 0)]:
            try:
                described.append(await self.describe(ref))
            except (ArtifactNotFound, StoreError):
                described.append(ref)  # the bytes without their description: still listed
        return described

    async def delete(self, ref: ArtifactRef | str) -> bool:
        """Delete the artifact; ``False`` if there was none.

        Raises:
            ConfigError: A bad reference.
            StoreError: The backend failed.
        """
        namespace, sha = _target(ref)
        key = f"{namespace}/{sha}"
        try:
            try:
                await _run(obstore.head, self._store, key)
            except _MISSING:
                return False
            for path in (key + ".json", key):  # the description first: bytes are never orphaned
                try:
                    await _run(obstore.delete, self._store, path)
                except _MISSING:
                    pass
        except Exception as exc:
            raise StoreError(f"deleting artifact {_SCHEME}{key} failed: {exc}") from exc
        return True


async def _run(fn: Callable[..., T], *args: Any) -> T:
    return await anyio.to_thread.run_sync(functools.partial(fn, *args))


def _make_private(root: Path, key: str) -> None:
    """The folders of ``key`` under ``root`` ``0700``, its file and description ``0600``.

    (The object store writes with the process umask; the root itself is
    ``0700`` when the store made it, so nothing was reachable meanwhile.)
    """
    parts = key.split("/")
    folder = root
    for part in parts[:-1]:
        folder = folder / part
        os.chmod(folder, DIR_MODE)
    for name in (parts[-1], parts[-1] + ".json"):
        os.chmod(folder / name, FILE_MODE)


def _get_bytes(store: ObjectStore, key: str) -> bytes:
    return bytes(obstore.get(store, key).bytes())


def _get_range(store: ObjectStore, key: str, start: int, end: int) -> bytes:
    return bytes(obstore.get_range(store, key, start=start, end=end))


def _list(store: ObjectStore, prefix: str) -> list[tuple[str, int]]:
    return [(m["path"], m["size"]) for batch in obstore.list(store, prefix) for m in batch]


def _target(ref: object) -> tuple[str, str]:
    if isinstance(ref, ArtifactRef):
        return check_namespace(ref.namespace), ref.sha256
    return ArtifactRef.parse(ref)
