"""Runs on this worker: a run outlives the request that started it.

A run's events are pumped from the session's stream by a task of the
server's own (not the request's), so a client that goes away mid-stream — a
reloaded tab, a dropped connection — does not stop the run. Every event is
kept in order while the run lives (and ``keep_finished`` seconds after), and
any number of followers read it from any position: the request that started
it, and reconnects that name a position with ``Last-Event-ID``. Reconnects to
another worker read the checkpoint store instead (see :mod:`._host`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing

import anyio

from mainspring.events import Event, StreamStarted
from mainspring.server._telemetry import RunSpans
from mainspring.session import Session

__all__ = ["LiveRun", "Runs"]

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
        self._spans = spans
        self.stream_id: str | None = None
        self.events: list[Event] = []
        self.done = False
        self.finished_at: float | None = None
        self.start_error: BaseException | None = None
        self._stream = stream
        self._changed = anyio.Event()
        self._started = anyio.Event()

    @property
    def session_id(self) -> str:
        """The session it runs."""
        return self.session.session_id

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

    async def wait_done(self) -> None:
        """Wait for the run to end."""
        while not self.done:
            await self._changed.wait()


class Runs:
    """This worker's runs, by session (while active) and by stream (a while longer)."""

    def __init__(self, *, keep_finished: float) -> None:
        """Keep a finished run's events ``keep_finished`` seconds for reconnects."""
        self.keep_finished = keep_finished
        self._by_session: dict[str, LiveRun] = {}
        self._by_stream: dict[str, LiveRun] = {}
        self._swept = time.monotonic()

    def __len__(self) -> int:
        return len(self._by_session)

    def active(self, session_id: str) -> LiveRun | None:
        """The run of ``session_id`` going on here, if any."""
        run = self._by_session.get(session_id)
        if run is not None and run.done:
            del self._by_session[session_id]
            return None
        return run

    def stream(self, stream_id: str) -> LiveRun | None:
        """The run of ``stream_id`` on this worker (live, or finished recently)."""
        self._expire()
        return self._by_stream.get(stream_id)

    def add(self, run: LiveRun) -> None:
        """Track a run that has started."""
        self._by_session[run.session_id] = run
        if run.stream_id is not None:
            self._by_stream[run.stream_id] = run

    def live(self) -> list[LiveRun]:
        """Every run still going."""
        return [run for run in self._by_session.values() if not run.done]

    def _expire(self) -> None:
        now = time.monotonic()
        if now - self._swept < 1.0:
            return  # a sweep a second at most: lookups stay O(1) under load
        self._swept = now
        for stream_id, run in list(self._by_stream.items()):
            if run.finished_at is not None and now - run.finished_at > self.keep_finished:
                del self._by_stream[stream_id]
        for session_id, run in list(self._by_session.items()):
            if run.done:
                del self._by_session[session_id]
