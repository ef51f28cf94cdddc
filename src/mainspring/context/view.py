"""The model's history view: committed messages as the model will see them.

Each committed message enters the view once, after the sanitize and history
processors mapped it (:meth:`Processor.map_message`). Compaction edits the
view in place (:meth:`ModelView.replace`, :meth:`ModelView.splice`); the
transcript itself never changes. The view keeps, per entry, who last wrote
it and — with accounting on — its counted pieces, a running prefix sum of
tokens and running totals per source / module / processor, so a compile
reads them in O(1) whatever the history length.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Generic, Protocol, TypeVar, overload

from mainspring.context.accounting import Piece

__all__ = ["AttributionKey", "ModelView"]

T = TypeVar("T")

AttributionKey = tuple[str, str, str]
"""(source, module, processor)."""


class _Reader(Protocol):
    """A compiled request reading the view's entries (``CompiledMessages``)."""

    def _detach(self) -> None: ...


class ModelView(Sequence[T], Generic[T]):
    """An editable list of view messages with attribution and token sums."""

    def __init__(
        self,
        measure: Callable[[T, str, str], tuple[Piece, ...]] | None,
        role: Callable[[T], str],
    ) -> None:
        """``measure(message, module, processor)`` counts an entry; ``role`` names its role."""
        self._measure = measure
        self._role = role
        self._users: list[int] = []
        """Indexes of user messages, ascending."""
        self._items: list[T] = []
        self._owners: list[tuple[str, str]] = []
        """(module, processor) that last wrote each entry; ("transcript", "transcript")."""
        self._pieces: list[tuple[Piece, ...]] = []
        self._cum: list[int] = [0]
        """_cum[i] = tokens in entries [0, i), valid up to ``_valid``."""
        self._cum_chars: list[int] = [0]
        self._valid = 0
        """Prefix sums are right for indexes ≤ this; edits lower it, reads rebuild lazily."""
        self._tokens = 0
        self._chars = 0
        self.totals: dict[AttributionKey, list[int]] = {}
        """(source, module, processor) → [chars, tokens], over the whole view."""
        self.min_changed: int | None = None
        """The lowest index edited (not appended) since :meth:`mark_compiled`."""
        self._readers: list[weakref.ref[_Reader]] = []
        """Compiled requests reading entries of this view (detached before an edit)."""

    # -- reading -----------------------------------------------------------

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[T]: ...
    def __getitem__(self, index: int | slice) -> T | Sequence[T]:
        return self._items[index]

    def __iter__(self) -> Iterator[T]:
        return iter(self._items)

    def owner(self, index: int) -> tuple[str, str]:
        """(module, processor) that last wrote entry ``index``."""
        return self._owners[index]

    def pieces(self, index: int) -> tuple[Piece, ...]:
        """The counted pieces of entry ``index`` (empty without accounting)."""
        return self._pieces[index]

    @property
    def first_user(self) -> int | None:
        """Index of the first user message in the view."""
        return self._users[0] if self._users else None

    @property
    def user_indices(self) -> Sequence[int]:
        """Indexes of the user messages in the view, ascending (read-only)."""
        return tuple(self._users) if len(self._users) < 64 else _ReadOnly(self._users)

    @property
    def last_user(self) -> int | None:
        """Index of the last user message in the view."""
        return self._users[-1] if self._users else None

    def tokens_before(self, index: int) -> int:
        """Tokens in entries ``[0, index)``: O(1) unless an edit left sums to rebuild."""
        if index > self._valid:
            self._recount()
        return self._cum[index]

    @property
    def tokens(self) -> int:
        """Tokens in the whole view: O(1)."""
        return self._tokens

    @property
    def chars(self) -> int:
        """Counted characters in the whole view: O(1)."""
        return self._chars

    def items(self) -> list[T]:
        """A copy of the entries."""
        return list(self._items)

    # -- writing -----------------------------------------------------------

    def track(self, reader: _Reader) -> None:
        """Have ``reader`` copy its entries before the next edit (copy-on-write)."""
        readers = self._readers
        if len(readers) >= 32:  # drop the requests nobody keeps any more
            readers[:] = [r for r in readers if r() is not None]
        readers.append(weakref.ref(reader))

    def _before_edit(self) -> None:
        readers, self._readers = self._readers, []
        for ref in readers:
            reader = ref()
            if reader is not None:
                reader._detach()

    def append(self, message: T, module: str = "transcript", processor: str = "transcript") -> None:
        """Add an entry at the end: O(message)."""
        pieces = self._measure(message, module, processor) if self._measure else ()
        if self._role(message) == "user":
            self._users.append(len(self._items))
        self._items.append(message)
        self._owners.append((module, processor))
        self._pieces.append(pieces)
        self._add(pieces, 1)
        if self._valid == len(self._items) - 1:  # sums are current: extend them
            self._cum.append(self._cum[-1] + sum(p.tokens for p in pieces))
            self._cum_chars.append(self._cum_chars[-1] + sum(p.chars for p in pieces))
            self._valid += 1

    def replace(self, index: int, message: T, module: str, processor: str) -> None:
        """Rewrite entry ``index`` (attributed to ``processor``): O(message)."""
        if not 0 <= index < len(self._items):
            raise IndexError(f"view index {index} out of range 0..{len(self._items)}")
        self._before_edit()
        pieces = self._measure(message, module, processor) if self._measure else ()
        was_user = self._role(self._items[index]) == "user"
        self._add(self._pieces[index], -1)
        self._add(pieces, 1)
        self._items[index] = message
        self._owners[index] = (module, processor)
        self._pieces[index] = pieces
        if was_user != (self._role(message) == "user"):
            self._users = [i for i, m in enumerate(self._items) if self._role(m) == "user"]
        self._invalidate(index)

    def splice(
        self, start: int, stop: int, messages: Iterable[T], module: str, processor: str
    ) -> None:
        """Replace entries ``[start, stop)`` with ``messages``: O(len - start)."""
        if not 0 <= start <= stop <= len(self._items):
            raise IndexError(f"view slice [{start}, {stop}) out of range 0..{len(self._items)}")
        self._before_edit()
        new = list(messages)
        new_pieces = [self._measure(m, module, processor) if self._measure else () for m in new]
        for pieces in self._pieces[start:stop]:
            self._add(pieces, -1)
        for pieces in new_pieces:
            self._add(pieces, 1)
        self._items[start:stop] = new
        self._owners[start:stop] = [(module, processor)] * len(new)
        self._pieces[start:stop] = new_pieces
        self._users = [i for i, m in enumerate(self._items) if self._role(m) == "user"]
        self._invalidate(start)

    def clear(self) -> None:
        """Empty the view (a new transcript generation rebuilds it)."""
        self._before_edit()
        self._items.clear()
        self._users.clear()
        self._owners.clear()
        self._pieces.clear()
        self._cum = [0]
        self._cum_chars = [0]
        self._valid = 0
        self._tokens = self._chars = 0
        self.totals.clear()
        self.min_changed = 0

    def mark_compiled(self) -> None:
        """A compile read the view: later edits count as changes from here."""
        self.min_changed = None

    # -- internals ---------------------------------------------------------

    def _invalidate(self, index: int) -> None:
        self._valid = min(self._valid, index)
        del self._cum[self._valid + 1 :]
        del self._cum_chars[self._valid + 1 :]
        self.min_changed = index if self.min_changed is None else min(self.min_changed, index)

    def _add(self, pieces: tuple[Piece, ...], sign: int) -> None:
        totals = self.totals
        for p in pieces:
            self._tokens += sign * p.tokens
            self._chars += sign * p.chars
            key = (p.source, p.module, p.processor)
            entry = totals.get(key)
            if entry is None:
                entry = totals[key] = [0, 0]
            entry[0] += sign * p.chars
            entry[1] += sign * p.tokens
            if entry[0] == 0 and entry[1] == 0 and sign < 0:
                del totals[key]

    def _recount(self) -> None:
        del self._cum[self._valid + 1 :]
        del self._cum_chars[self._valid + 1 :]
        for pieces in self._pieces[self._valid :]:
            self._cum.append(self._cum[-1] + sum(p.tokens for p in pieces))
            self._cum_chars.append(self._cum_chars[-1] + sum(p.chars for p in pieces))
        self._valid = len(self._items)


class _ReadOnly(Sequence[int]):
    """An O(1) read-only window on a list of ints."""

    __slots__ = ("_items",)

    def __init__(self, items: list[int]) -> None:
        self._items = items

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[int]: ...
    def __getitem__(self, index: int | slice) -> int | Sequence[int]:
        return self._items[index]
