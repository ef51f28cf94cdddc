"""Namespaces: storage and a cache a component (a tool, an agent) owns alone.

An engine gives every component a namespace derived from its kind and name
(``("tool", "search")``, ``("agent", "writer")``). Keys live under the whole
namespace tuple, never under a joined string, so no choice of names lets one
component read or overwrite another's entries.

```python
store = InMemoryKeyValueStore()
notes = store.namespace(("tool", "notes"))
notes.put("last", {"text": "hi"})
assert store.namespace(("tool", "other")).get("last") is None
```

Values are JSON: they are copied in and out (a caller never holds a live
reference into the store) and a value that is not JSON is refused with a
``TypeError`` before anything is stored. The methods are synchronous and
thread-safe, so sync tools (which run in worker threads) use them too.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Protocol

__all__ = ["InMemoryKeyValueStore", "KeyValueStore", "Namespace", "NamespaceKey"]

NamespaceKey = tuple[str, ...]
"""A namespace: ``(kind, name)``, optionally with more parts (a caller, a scope)."""


def _copy(value: object) -> Any:
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"a stored value must be JSON: {exc}") from exc


class KeyValueStore(Protocol):
    """Where namespaces keep their entries."""

    def get(self, namespace: NamespaceKey, key: str) -> Any:
        """The value under ``key``, or ``None``."""
        ...

    def put(self, namespace: NamespaceKey, key: str, value: object) -> None:
        """Store a JSON value under ``key``."""
        ...

    def delete(self, namespace: NamespaceKey, key: str) -> bool:
        """Remove ``key``; whether it was there."""
        ...

    def keys(self, namespace: NamespaceKey) -> list[str]:
        """The namespace's keys, sorted."""
        ...


class InMemoryKeyValueStore:
    """A :class:`KeyValueStore` in this process's memory."""

    def __init__(self) -> None:
        self._data: dict[NamespaceKey, dict[str, str]] = {}
        self._lock = threading.Lock()

    def namespace(self, namespace: NamespaceKey) -> Namespace:
        """A view bound to one namespace."""
        return Namespace(self, namespace)

    def get(self, namespace: NamespaceKey, key: str) -> Any:
        """The value under ``key``, or ``None``."""
        with self._lock:
            text = self._data.get(namespace, {}).get(key)
        return None if text is None else json.loads(text)

    def put(self, namespace: NamespaceKey, key: str, value: object) -> None:
        """Store a JSON value under ``key``."""
        text = json.dumps(_copy(value))
        with self._lock:
            self._data.setdefault(namespace, {})[key] = text

    def delete(self, namespace: NamespaceKey, key: str) -> bool:
        """Remove ``key``; whether it was there."""
        with self._lock:
            return self._data.get(namespace, {}).pop(key, None) is not None

    def keys(self, namespace: NamespaceKey) -> list[str]:
        """The namespace's keys, sorted."""
        with self._lock:
            return sorted(self._data.get(namespace, {}))


class Namespace:
    """One component's storage: the store's methods with the namespace bound."""

    __slots__ = ("_store", "key")

    def __init__(self, store: KeyValueStore, key: NamespaceKey) -> None:
        if not key or not all(key):
            raise ValueError(f"a namespace is a tuple of non-empty strings, got {key!r}")
        self._store = store
        self.key = key

    def get(self, key: str) -> Any:
        """The value under ``key``, or ``None``."""
        return self._store.get(self.key, key)

    def put(self, key: str, value: object) -> None:
        """Store a JSON value under ``key`` (copied: later changes to it are not stored)."""
        self._store.put(self.key, key, value)

    def delete(self, key: str) -> bool:
        """Remove ``key``; whether it was there."""
        return self._store.delete(self.key, key)

    def keys(self) -> list[str]:
        """This namespace's keys, sorted."""
        return self._store.keys(self.key)
