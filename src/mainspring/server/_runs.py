"""Runs on this worker: a run outlives the request that started it.

A run's events are pumped from the session's stream by a task of the
server's own (not the request's), so a client that goes away mid-stream — a
reloaded tab, a dropped connection — does not stop the run. Every event is
kept in order while the run lives (and ``keep_finished`` seconds after), and
any number of followers read it from any position: the request that started
it, and reconnects that name a position with ``Last-Event-ID``. Reconnects to
another worker read the checkpoint store instead (see :mod:`._host`).

A run that ends leaves only a :class:`FinishedRun` behind: its events and
whose they are. The session, its messages, the model request and the pump's
machinery go at once — not 60 seconds later — so a busy server does not carry
every recent conversation's objects through each garbage collection (about a
hundred per conversation, measured by ``bench/server_load.py``).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing

import anyio

from mainspring.events import Event, StreamStarted
from mainspring.server._telemetry import RunSpans
from mainspring.session import Session

__all__ = ["FinishedRun", "LiveRun", "Runs"]

log = logging.getLogger("mainspring.server")


class LiveRun:
    """One run on this worker: its session, its events so far, and its followers."""

    def __init__(
        self,
        session: Session,
        stream: AsyncGenerator[Event, None],
        *,
        spans: RunSpans | None = None,
    ) -> None:
        """Pump ``stream`` (a stream of ``session``) once :meth:`pump` runs.

        ``spans`` records the run's OpenTelemetry spans as its events pass.
        """
        self.session = session
        self.session_id = session.session_id
        self.principal = session.state.principal
        self._spans = spans
        self.on_done: Callable[[LiveRun], None] | None = None
        """Called once when the run ends (:class:`Runs` keeps only what follows need)."""
        self.stream_id: str | None = None
        self.events: list[Event] = []
        self.done = False
        self.finished_at: float | None = None
        self.start_error: BaseException | None = None
        self._stream = stream
        self._changed = anyio.Event()
        self._started = anyio.Event()

    def _notify(self) -> None:
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    async def pump(self) -> None:
        """Drive the stream to its end, keeping each event for the followers."""
        try:
            async with aclosing(self._stream) as events:
                async for event in events:
                    if isinstance(event, StreamStarted):
                        self.stream_id = event.stream_id
                    self.events.append(event)
                    if self._spans is not None:
                        self._spans.observe(event)
                    self._started.set()
                    self._notify()
        except Exception as exc:
            if not self.events:
                self.start_error = exc  # refused before it began: the request says so
            else:  # a stream always ends with its terminal event; this is a bug
                log.exception("run of session %s failed mid-stream", self.session_id)
        finally:
            if self._spans is not None:
                self._spans.close()
            self.done = True
            self.finished_at = time.monotonic()
            self._started.set()
            self._notify()
            if self.on_done is not None:
                self.on_done(self)

    async def started(self) -> None:
        """Wait for the first event.

        Raises:
            Exception: Whatever refused the run before it began (busy session,
                decision conflict…), for the request to turn into a 4xx.
        """
        await self._started.wait()
        if self.start_error is not None:
            raise self.start_error

    async def follow(self, after: int = -1) -> AsyncIterator[tuple[int, Event]]:
        """``(position, event)`` for every event after position ``after``, live."""
        position = after + 1
        while True:
            while position < len(self.events):
                yield position, self.events[position]
                position += 1
            if self.done:
                return
            await self._changed.wait()

    async def batches(self, after: int = -1) -> AsyncIterator[list[Event]]:
        """The events after position ``after``, live, in lists of those already there.

        A follower that can send several events as one (streamed text) learns
        which ones came together: under load, more of them do.
        """
        position = after + 1
        while True:
            if position < len(self.events):
                batch = self.events[position:]
                position += len(batch)
                yield batch
                continue
            if self.done:
                return
            await self._changed.wait()

    async def wait_done(self) -> None:
        """Wait for the run to end."""
        while not self.done:
            await self._changed.wait()


class FinishedRun:
    """What a run that ended leaves for reconnects: its events, and whose they are."""

    __slots__ = ("events", "finished_at", "principal", "session_id", "stream_id")

    def __init__(self, run: LiveRun, finished_at: float) -> None:
        """The remains of ``run`` (it has ended), by the clock of :class:`Runs`."""
        self.session_id = run.session_id
        self.principal = run.principal
        self.stream_id = run.stream_id
        self.events = tuple(run.events)
        self.finished_at = finished_at

    async def follow(self, after: int = -1) -> AsyncIterator[tuple[int, Event]]:
        """``(position, event)`` for every event after position ``after``."""
        for position in range(after + 1, len(self.events)):
            yield position, self.events[position]


class Runs:
    """This worker's runs, by session (while active) and by stream (a while longer)."""

    def __init__(
        self, *, keep_finished: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        """Keep a finished run's events ``keep_finished`` seconds (of ``clock``) for reconnects."""
        self.keep_finished = keep_finished
        self._clock = clock
        self._by_session: dict[str, LiveRun] = {}
        self._by_stream: dict[str, LiveRun | FinishedRun] = {}
        self._finished: deque[FinishedRun] = deque()  # in the order they ended
        self._swept = clock()

    def __len__(self) -> int:
        return len(self._by_session)

    def active(self, session_id: str) -> LiveRun | None:
        """The run of ``session_id`` going on here, if any."""
        run = self._by_session.get(session_id)
        if run is not None and run.done:
            del self._by_session[session_id]
            return None
        return run

    def stream(self, stream_id: str) -> LiveRun | FinishedRun | None:
        """The run of ``stream_id`` on this worker (live, or finished recently)."""
        self._expire()
        return self._by_stream.get(stream_id)

    def add(self, run: LiveRun) -> None:
        """Track a run that has started (it may have ended already)."""
        self._expire()
        if run.done:
            self._end(run)
            return
        run.on_done = self._end
        self._by_session[run.session_id] = run
        if run.stream_id is not None:
            self._by_stream[run.stream_id] = run

    def _end(self, run: LiveRun) -> None:
        """Keep only what reconnects need of a run that ended."""
        run.on_done = None
        if self._by_session.get(run.session_id) is run:
            del self._by_session[run.session_id]
        if run.stream_id is None:
            return
        finished = FinishedRun(run, self._clock())
        self._by_stream[run.stream_id] = finished
        self._finished.append(finished)

    def live(self) -> list[LiveRun]:
        """Every run still going."""
        return [run for run in self._by_session.values() if not run.done]

    def _expire(self) -> None:
        """Forget the runs that ended more than ``keep_finished`` seconds ago (oldest first)."""
        now = self._clock()
        if now - self._swept < 1.0:
            return  # a sweep a second at most: lookups stay O(1) under load
        self._swept = now
        finished = self._finished
        while finished and now - finished[0].finished_at > self.keep_finished:
            gone = finished.popleft()
            if gone.stream_id is not None and self._by_stream.get(gone.stream_id) is gone:
                del self._by_stream[gone.stream_id]
