"""The model's history view: committed messages as the model will see them.

Each committed message enters the view once, after the sanitize and history
processors mapped it (:meth:`Processor.map_message`). Compaction edits the
view in place (:meth:`ModelView.replace`, :meth:`ModelView.splice`); the
transcript itself never changes. The view keeps, per entry, who last wrote
it, and over the whole view its token and character totals, so a compile
reads them in O(1) whatever the history length.

The finer facts — each entry's counted pieces, the running totals per
source / module / processor and the prefix sums of tokens — are worked out
when first read (accounting reads them; a compile without accounting never
does), each entry once, in order: adding N messages costs their sizes and a
list extend, not N attributed records.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Generic, TypeVar, overload

from mainspring.context.accounting import Piece

__all__ = ["AttributionKey", "ModelView"]

T = TypeVar("T")

AttributionKey = tuple[str, str, str]
"""(source, module, processor)."""

_TRANSCRIPT = ("transcript", "transcript")
_NO_SUMS = (0,)
_NO_TOTALS: Mapping[AttributionKey, list[int]] = MappingProxyType({})
_COUNTING = threading.RLock()
"""Held while entries are counted on read: a deferred request may be read from any thread."""
_NO_OWNERS: Mapping[int, tuple[str, str]] = {}
_USERS_IN_A_TUPLE = 64
"""A view with fewer user messages keeps their indexes in a tuple (see ``_users``)."""


def _more_users(
    users: tuple[int, ...] | list[int], more: Iterable[int]
) -> tuple[int, ...] | list[int]:
    """``users`` extended with ``more``: a new tuple while short, else the list extended."""
    if isinstance(users, list):
        users.extend(more)
        return users
    grown = (*users, *more)
    return grown if len(grown) < _USERS_IN_A_TUPLE else list(grown)


class ModelView(Sequence[T], Generic[T]):
    """An editable list of view messages with attribution and token sums."""

    def __init__(
        self,
        measure: Callable[[T, str, str], tuple[Piece, ...]] | None,
        role: Callable[[T], str],
        scan: Callable[[Sequence[T], int], tuple[int, int, list[int]]] | None = None,
        count: Callable[[Sequence[T]], int] | None = None,
    ) -> None:
        """Count entries with ``measure``; ``role`` names an entry's role.

        ``measure(message, module, processor)`` counts an entry into pieces.
        ``scan(messages, start)`` gives, for a run of entries that starts at
        index ``start``, the (chars, tokens) its pieces add up to, without
        building them, and the indexes of its user messages (default:
        measuring the entries and asking ``role``). With ``count`` (the exact
        tokens of a run of entries), ``scan`` gives an upper bound of the
        tokens instead, and entries are counted exactly only when the total is
        read (:attr:`tokens`), or compared with a limit it may pass
        (:meth:`tokens_within`).
        """
        self._measure = measure
        self._role = role
        self._scan = scan or self._measured_scan
        self._users: tuple[int, ...] | list[int] = ()
        """Indexes of user messages, ascending: a tuple while short (a live session
        with few turns holds no list for them), a list from ``_USERS_IN_A_TUPLE`` on
        (appends stay O(1))."""
        self._items: list[T] = []
        self._owners: list[tuple[str, str]] | None = None
        """(module, processor) that last wrote each entry; ``None`` while every entry is
        the transcript's (``("transcript", "transcript")``): no list kept until then."""
        self._pieces: list[tuple[Piece, ...]] | tuple[()] = ()
        """The counted pieces of the entries ``[0, len(_pieces))``; later ones are not
        counted yet (see :meth:`_catch_up`). The shared empty tuple until the first
        entry is counted (only accounting counts them)."""
        self._cum: list[int] | tuple[int] = _NO_SUMS
        """_cum[i] = tokens in entries [0, i), valid up to ``_valid`` (a list from the
        first read past entry 0: only accounting and compaction read them)."""
        self._valid = 0
        """Prefix sums are right for indexes ≤ this; edits lower it, reads rebuild lazily."""
        self._count = count
        self._tokens = 0
        """Exact tokens of the entries ``[0, _sized)`` (every entry without ``count``)."""
        self._sized = 0
        """With ``count``: the entries before this index are counted exactly."""
        self._bound = 0
        """With ``count``: at least the tokens of the entries from ``_sized`` on."""
        self._chars = 0
        """Tokens and characters of every entry, counted or not yet."""
        self._totals: Mapping[AttributionKey, list[int]] = _NO_TOTALS
        """(source, module, processor) → [chars, tokens] over the counted entries (a
        shared empty read-only mapping until an entry is counted)."""
        self.min_changed: int | None = None
        """The lowest index edited (not appended) since :meth:`mark_compiled`."""
        self._lent = False
        """Whether :meth:`lend` handed ``_items`` out since the last edit (or they are
        their source's, see :meth:`extend_shared`)."""
        self._shared = False
        """Whether ``_items`` is the source's own list (see :meth:`extend_shared`)."""
        self._settle: Callable[[], None] | None = None
        """Called before an edit (see :meth:`before_edit`)."""

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
        owners = self._owners
        if owners is None:
            self._items[index]  # IndexError as a list's
            return _TRANSCRIPT
        return owners[index]

    def pieces(self, index: int) -> tuple[Piece, ...]:
        """The counted pieces of entry ``index`` (empty without accounting)."""
        index = range(len(self._items))[index]  # IndexError / negative indexes as a list
        if index >= len(self._pieces):
            self._catch_up(index + 1)
        return self._pieces[index]

    @property
    def totals(self) -> Mapping[AttributionKey, list[int]]:
        """(source, module, processor) → [chars, tokens], over the whole view.

        Read it, never change it. The first read after N appends counts those
        N entries; later reads are O(1) plus what was added since.
        """
        self._catch_up(len(self._items))
        return self._totals

    @property
    def first_user(self) -> int | None:
        """Index of the first user message in the view."""
        return self._users[0] if self._users else None

    @property
    def user_indices(self) -> Sequence[int]:
        """Indexes of the user messages in the view, ascending (read-only)."""
        users = self._users
        return users if isinstance(users, tuple) else _ReadOnly(users)

    @property
    def last_user(self) -> int | None:
        """Index of the last user message in the view."""
        return self._users[-1] if self._users else None

    def totals_upto(self, n: int) -> dict[AttributionKey, tuple[int, int]]:
        """(source, module, processor) → (chars, tokens) over entries ``[0, n)``: a new dict.

        O(keys) plus the entries counted for the first time, plus those
        between ``n`` and the last entry counted so far.
        """
        if not 0 <= n <= len(self._items):
            raise IndexError(f"view length {n} out of range 0..{len(self._items)}")
        with _COUNTING:
            if len(self._pieces) < n:
                self._catch_up(n)
            totals = {key: (entry[0], entry[1]) for key, entry in self._totals.items()}
            for pieces in self._pieces[n:]:  # counted past n already: take them off again
                for p in pieces:
                    key = (p.source, p.module, p.processor)
                    chars, tokens = totals[key]
                    chars, tokens = chars - p.chars, tokens - p.tokens
                    if chars or tokens:
                        totals[key] = (chars, tokens)
                    else:
                        del totals[key]
            return totals

    def tokens_before(self, index: int) -> int:
        """Tokens in entries ``[0, index)``: O(1) unless entries are left to count."""
        with _COUNTING:
            if index > self._valid:
                self._recount(index)
            return self._cum[index]

    @property
    def tokens(self) -> int:
        """Tokens in the whole view: O(1), but for entries not counted yet."""
        if self._count is not None and self._sized < len(self._items):
            self._size()
        return self._tokens

    def tokens_within(self, limit: float) -> bool:
        """Whether :attr:`tokens` ``<= limit``: counts entries only if their bound may pass it."""
        return self._tokens + self._bound <= limit or self.tokens <= limit

    @property
    def chars(self) -> int:
        """Counted characters in the whole view: O(1)."""
        return self._chars

    def items(self) -> list[T]:
        """A copy of the entries."""
        return list(self._items)

    # -- writing -----------------------------------------------------------

    def lend(self) -> list[T]:
        """The list of entries, for a compiled request to read: never changed after.

        Copy-on-write on the view's side: the next edit (not an append: a
        reader keeps its own length) works on a copy and leaves this list to
        whoever still reads it, so a request needs no registration (no weak
        reference per request kept in a live session) and one no longer read
        is simply dropped.
        """
        self._lent = True
        return self._items

    def before_edit(self, settle: Callable[[], None]) -> None:
        """Call ``settle`` before every edit or clear (deferred accounting settles then)."""
        self._settle = settle

    def _before_edit(self, *, size: bool = True) -> None:
        if self._settle is not None:
            self._settle()
        if size and self._count is not None and self._sized < len(self._items):
            self._size()  # an edit keeps the totals exact
        if self._lent:
            self._lent = self._shared = False
            self._items = self._items.copy()

    def append(self, message: T, module: str = "transcript", processor: str = "transcript") -> None:
        """Add an entry at the end: O(message)."""
        self.extend((message,), {0: (module, processor)})

    def extend(
        self, messages: Sequence[T], owners: Mapping[int, tuple[str, str]] = _NO_OWNERS
    ) -> None:
        """Add entries at the end: O(len(messages)), one scan of their sizes and roles.

        ``owners`` names the (module, processor) of the entries (by position
        in ``messages``) that a processor wrote; the others belong to the
        transcript.
        """
        if self._shared:  # appending to the source's list is the source's business
            self.unshare(len(self._items))
        start = len(self._items)
        n = len(messages)
        if not n:
            return
        self._items.extend(messages)
        if owners:
            kept = self._owners
            if kept is None:
                kept = self._owners = [_TRANSCRIPT] * start
            kept.extend([owners.get(i, _TRANSCRIPT) for i in range(n)])
        elif self._owners is not None:
            self._owners.extend([_TRANSCRIPT] * n)
        self._count_added(messages, start)

    def extend_shared(self, source: list[T], start: int, messages: Sequence[T]) -> bool:
        """Add ``messages``, just appended to ``source`` at ``start``, holding ``source``.

        A view whose entries are its source's as they are (the transcript's,
        no processor rewrote one) holds the source's own list instead of a
        copy: the source only appends to it, and replaces it rather than edit
        it. That works while the view is empty or holds ``source`` already,
        and ``source[start:]`` is ``messages``; it returns whether it did (if
        not, :meth:`extend` as usual). The view's first edit takes a copy (as
        after a :meth:`lend`).
        """
        items = self._items
        if items is not source:
            if items or start:
                return False
            self._items = source
            self._shared = self._lent = True
        n = len(messages)
        if self._owners is not None:
            self._owners.extend([_TRANSCRIPT] * n)
        self._count_added(messages, start)
        return True

    def _count_added(self, messages: Sequence[T], start: int) -> None:
        """Add the sizes and user positions of ``messages``, now entries ``start`` on."""
        chars, tokens, users = self._scan(messages, start)
        if users:
            self._users = _more_users(self._users, users)
        self._chars += chars
        if self._count is None:
            self._tokens += tokens
        else:
            self._bound += tokens

    def unshare(self, length: int) -> None:
        """Hold a copy of the source's first ``length`` entries instead of its list."""
        if self._shared:
            self._items = self._items[:length]
            self._shared = self._lent = False

    def replace(self, index: int, message: T, module: str, processor: str) -> None:
        """Rewrite entry ``index`` (attributed to ``processor``): O(message)."""
        if not 0 <= index < len(self._items):
            raise IndexError(f"view index {index} out of range 0..{len(self._items)}")
        self._before_edit()
        old = self._items[index]
        was_user = self._role(old) == "user"
        self._items[index] = message
        self._owned()[index] = (module, processor)
        counted = self._pieces
        if isinstance(counted, list) and index < len(counted):
            old_pieces = counted[index]
            self._add(old_pieces, -1)
            pieces = self._measure(message, module, processor) if self._measure else ()
            counted[index] = pieces
            self._add(pieces, 1)
            self._chars += _chars(pieces) - _chars(old_pieces)
            self._tokens += _tokens(pieces) - _tokens(old_pieces)
        else:  # not counted yet: it will be, as it is now, when read
            old_chars, old_tokens = self._sizes((old,))
            new_chars, new_tokens = self._sizes((message,))
            self._chars += new_chars - old_chars
            self._tokens += new_tokens - old_tokens
        if was_user != (self._role(message) == "user"):
            self._users = _more_users((), self._user_indexes())
        self._invalidate(index)

    def splice(
        self, start: int, stop: int, messages: Iterable[T], module: str, processor: str
    ) -> None:
        """Replace entries ``[start, stop)`` with ``messages``: O(len - start)."""
        if not 0 <= start <= stop <= len(self._items):
            raise IndexError(f"view slice [{start}, {stop}) out of range 0..{len(self._items)}")
        self._before_edit()
        new = list(messages)
        counted = len(self._pieces)
        old_chars = old_tokens = 0
        for pieces in self._pieces[start : min(stop, counted)]:
            old_chars += _chars(pieces)
            old_tokens += _tokens(pieces)
        if stop > counted:
            chars, tokens = self._sizes(self._items[max(start, counted) : stop])
            old_chars += chars
            old_tokens += tokens
        if start < counted and isinstance(self._pieces, list):  # counted again when read
            for pieces in self._pieces[start:]:
                self._add(pieces, -1)
            del self._pieces[start:]
        owned = self._owned()
        self._items[start:stop] = new
        owned[start:stop] = [(module, processor)] * len(new)
        new_chars, new_tokens = self._sizes(new)
        self._chars += new_chars - old_chars
        self._tokens += new_tokens - old_tokens
        self._sized = len(self._items)
        self._users = _more_users((), self._user_indexes())
        self._invalidate(start)

    def clear(self) -> None:
        """Empty the view (a new transcript generation rebuilds it)."""
        if self._settle is not None:
            self._settle()
        self._lent = self._shared = False
        self._items = []  # (a lent list stays as it was)
        self._users = ()
        self._owners = None
        self._pieces = ()
        self._cum = _NO_SUMS
        self._valid = 0
        self._tokens = self._chars = self._sized = self._bound = 0
        self._totals = _NO_TOTALS
        self.min_changed = 0

    def mark_compiled(self) -> None:
        """A compile read the view: later edits count as changes from here."""
        self.min_changed = None

    # -- internals ---------------------------------------------------------

    def _sizes(self, messages: Sequence[T]) -> tuple[int, int]:
        chars, tokens, _ = self._scan(messages, 0)
        return chars, tokens if self._count is None else self._count(messages)

    def _size(self) -> None:
        """Count the entries not counted exactly yet."""
        assert self._count is not None
        end = len(self._items)
        self._tokens += self._count(self._items[self._sized : end])
        self._sized = end
        self._bound = 0

    def _user_indexes(self) -> Iterator[int]:
        role = self._role
        return (i for i, m in enumerate(self._items) if role(m) == "user")

    def _measured_scan(self, messages: Sequence[T], start: int) -> tuple[int, int, list[int]]:
        chars = tokens = 0
        if self._measure is not None:
            for message in messages:
                pieces = self._measure(message, *_TRANSCRIPT)
                chars += _chars(pieces)
                tokens += _tokens(pieces)
        role = self._role
        return chars, tokens, [start + i for i, m in enumerate(messages) if role(m) == "user"]

    def _catch_up(self, upto: int) -> None:
        """Count the entries ``[len(_pieces), upto)``: each entry is counted once."""
        measure = self._measure
        items, owners, counted = self._items, self._owners, self._pieces
        if len(counted) >= upto:
            return
        with _COUNTING:
            if isinstance(counted, tuple):
                counted = self._pieces = []
            cum = self._cum  # the prefix sums, extended as we go when they reach this far
            sums = cum if isinstance(cum, list) and self._valid == len(counted) else None
            totals = self._totals
            for i in range(len(counted), upto):
                module, processor = _TRANSCRIPT if owners is None else owners[i]
                pieces = measure(items[i], module, processor) if measure else ()
                counted.append(pieces)
                tokens = 0
                for p in pieces:  # (the totals' additions inline: one message after another)
                    if not isinstance(totals, dict):
                        totals = self._totals = {}
                    key = (p.source, p.module, p.processor)
                    entry = totals.get(key)
                    if entry is None:
                        totals[key] = [p.chars, p.tokens]
                    else:
                        entry[0] += p.chars
                        entry[1] += p.tokens
                    tokens += p.tokens
                if sums is not None:
                    sums.append(sums[-1] + tokens)
            if sums is not None:
                self._valid = upto

    def _owned(self) -> list[tuple[str, str]]:
        """The owners of every entry, as a list to edit (made at the first owned entry)."""
        owners = self._owners
        if owners is None:
            owners = self._owners = [_TRANSCRIPT] * len(self._items)
        return owners

    def _invalidate(self, index: int) -> None:
        self._valid = min(self._valid, index)
        cum = self._cum
        if isinstance(cum, list):  # (the shared tuple holds entry 0 only)
            del cum[self._valid + 1 :]
        self.min_changed = index if self.min_changed is None else min(self.min_changed, index)

    def _add(self, pieces: tuple[Piece, ...], sign: int) -> None:
        totals = self._totals
        if not isinstance(totals, dict):
            if not pieces:
                return
            totals = self._totals = {}
        for p in pieces:
            key = (p.source, p.module, p.processor)
            entry = totals.get(key)
            if entry is None:
                entry = totals[key] = [0, 0]
            entry[0] += sign * p.chars
            entry[1] += sign * p.tokens
            if entry[0] == 0 and entry[1] == 0 and sign < 0:
                del totals[key]

    def _recount(self, index: int) -> None:
        if index > len(self._pieces):
            self._catch_up(index)
        cum = self._cum
        if isinstance(cum, tuple):
            cum = self._cum = [0]
        del cum[self._valid + 1 :]
        for pieces in self._pieces[self._valid : index]:
            cum.append(cum[-1] + _tokens(pieces))
        self._valid = index


def _tokens(pieces: tuple[Piece, ...]) -> int:
    return sum(p.tokens for p in pieces)


def _chars(pieces: tuple[Piece, ...]) -> int:
    return sum(p.chars for p in pieces)


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
