"""A response cache for a server's read-only tools: TTL, bounded, dropped on list changes.

Keyed by the tool's name and the SHA-256 of its canonical arguments
(:func:`mainspring.decisions.canonical_input_hash`: keys sorted, so two
argument objects equal as JSON share an entry). Only successful results are
kept; the least recently used entry goes first once ``max_entries`` is
reached. Time is the event loop's clock (``anyio.current_time``).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import anyio
from pydantic_core import to_jsonable_python

from mainspring.decisions import canonical_input_hash
from mainspring.tools.define import ToolOutput

__all__ = ["ResponseCache"]


class ResponseCache:
    """Results of read-only tool calls, for ``ttl`` seconds, at most ``max_entries``."""

    def __init__(self, *, ttl: float, max_entries: int) -> None:
        """A cache keeping results ``ttl`` seconds (``0``: keep nothing)."""
        self.ttl = ttl
        self.max_entries = max_entries
        self._entries: OrderedDict[tuple[str, str], tuple[float, ToolOutput]] = OrderedDict()
        self.hits = 0
        """Calls answered from the cache."""

    @property
    def enabled(self) -> bool:
        """Whether anything is ever kept."""
        return self.ttl > 0 and self.max_entries > 0

    def __len__(self) -> int:
        return len(self._entries)

    @staticmethod
    def key(tool: str, arguments: dict[str, Any]) -> tuple[str, str]:
        """The entry's key: the tool and the hash of its canonical arguments."""
        return tool, canonical_input_hash(to_jsonable_python(arguments))

    def get(self, tool: str, arguments: dict[str, Any]) -> ToolOutput | None:
        """A fresh cached result of this call, if any."""
        if not self.enabled:
            return None
        key = self.key(tool, arguments)
        found = self._entries.get(key)
        if found is None:
            return None
        stored, output = found
        if anyio.current_time() - stored >= self.ttl:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return output

    def put(self, tool: str, arguments: dict[str, Any], output: ToolOutput) -> None:
        """Keep a successful result (error results are never cached)."""
        if not self.enabled or output.is_error:
            return
        key = self.key(tool, arguments)
        self._entries[key] = (anyio.current_time(), output)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        """Forget everything (the server's tool list changed)."""
        self._entries.clear()
