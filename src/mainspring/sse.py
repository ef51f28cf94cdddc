"""Server-sent events: the wire format for run events.

``serialize_sse`` writes one event as an SSE frame (``event:`` is the event
type, ``data:`` its compact JSON); ``parse_sse`` / ``aparse_sse`` read frames
back from text, bytes, or chunked iterables of either, following the SSE
line rules (LF, CR or CRLF endings, ``:`` comments, multi-line ``data``,
``id`` and ``retry`` fields, a UTF-8 character split across chunks).

The decoder is small and hand-written on purpose: it has to work on any
chunk iterable, not only an HTTP response, and it is fuzzed in the tests.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import AsyncGenerator, AsyncIterable, Iterable, Iterator
from dataclasses import dataclass, field

from pydantic import ValidationError

from mainspring.codec import event_from_dict, event_to_json
from mainspring.errors import WireFormatError
from mainspring.events import Event

__all__ = ["SSEDecoder", "SSEFrame", "aparse_sse", "frame_to_event", "parse_sse", "serialize_sse"]


def serialize_sse(event: Event, *, id: str | None = None) -> str:
    """One event as an SSE frame; ``id`` becomes the frame's ``id:`` (for resume)."""
    head = f"id: {id}\n" if id is not None else ""
    return f"{head}event: {event.type}\ndata: {event_to_json(event)}\n\n"


@dataclass(slots=True)
class SSEFrame:
    """One dispatched SSE frame before it is turned into an event."""

    event: str = "message"
    data: str = ""
    id: str | None = None
    retry: int | None = None


@dataclass(slots=True)
class SSEDecoder:
    """Incremental SSE frame decoder: ``feed`` chunks, get completed frames.

    Linear in its input however it is chunked: a line still open at the end
    of a chunk is kept as a list of pieces (joined once, when it ends), and a
    chunk is scanned for line ends once (the next CR and LF positions are
    remembered, not searched for again from every line).
    """

    _open: list[str] = field(default_factory=list)
    """Pieces of the line not yet ended."""
    _pending_cr: bool = False
    _event: str = ""
    _data: list[str] = field(default_factory=list)
    _id: str | None = None
    _retry: int | None = None
    _partial: bool = False
    _started: bool = False
    _utf8: codecs.IncrementalDecoder = field(
        default_factory=lambda: codecs.getincrementaldecoder("utf-8")(errors="strict")
    )

    def _text(self, chunk: str | bytes) -> str:
        """The chunk as text, less a leading BOM and the LF of a CRLF split across chunks."""
        if isinstance(chunk, bytes):
            try:
                chunk = self._utf8.decode(chunk)
            except UnicodeDecodeError as exc:
                raise WireFormatError(f"SSE stream is not valid UTF-8: {exc}") from exc
        if chunk and not self._started:
            self._started = True
            chunk = chunk.removeprefix("\ufeff")  # the spec strips one leading BOM
        if chunk and self._pending_cr:
            self._pending_cr = False
            if chunk[0] == "\n":
                chunk = chunk[1:]
        return chunk

    def feed(self, chunk: str | bytes) -> list[SSEFrame]:
        """Add a chunk; return the frames it completed."""
        text = self._text(chunk)
        frames: list[SSEFrame] = []
        n, start = len(text), 0
        cr, lf = text.find("\r"), text.find("\n")
        while cr >= 0 or lf >= 0:
            end = lf if cr < 0 else cr if lf < 0 else min(cr, lf)
            line = text[start:end]
            if self._open:
                self._open.append(line)
                line = "".join(self._open)
                self._open.clear()
            if end == cr:
                if end + 1 < n:
                    start = end + 2 if text[end + 1] == "\n" else end + 1
                else:
                    start = end + 1
                    self._pending_cr = True
            else:
                start = end + 1
            if cr >= 0 and cr < start:
                cr = text.find("\r", start)
            if lf >= 0 and lf < start:
                lf = text.find("\n", start)
            frame = self._line(line)
            if frame is not None:
                frames.append(frame)
        if start < n:
            self._open.append(text[start:] if start else text)
        return frames

    def close(self) -> None:
        """End of stream: a frame without its closing blank line is an error."""
        try:
            self._utf8.decode(b"", final=True)
        except UnicodeDecodeError as exc:
            raise WireFormatError(f"SSE stream ended inside a UTF-8 character: {exc}") from exc
        if self._open or self._partial:
            raise WireFormatError("SSE stream ended in the middle of a frame")

    def _line(self, line: str) -> SSEFrame | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        self._partial = True
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry":
            if value.isascii() and value.isdigit():
                self._retry = int(value)
        return None

    def _dispatch(self) -> SSEFrame | None:
        self._partial = False
        if not self._data:
            self._event = ""
            return None
        frame = SSEFrame(
            event=self._event or "message",
            data="\n".join(self._data),
            id=self._id,
            retry=self._retry,
        )
        self._event = ""
        self._data = []
        self._retry = None
        return frame


def frame_to_event(frame: SSEFrame) -> Event:
    """Turn a decoded frame into an event, checking ``event:`` against the payload.

    Raises:
        WireFormatError: The data is not JSON, not a known event, or disagrees
            with the frame's event name.
    """
    try:
        payload = json.loads(frame.data)
    except (ValueError, RecursionError) as exc:
        raise WireFormatError(f"SSE frame data is not JSON: {exc}") from exc
    try:
        event = event_from_dict(payload)
    except (ValidationError, RecursionError) as exc:
        raise WireFormatError(f"SSE frame is not a known event: {exc}") from exc
    if frame.event not in ("message", event.type):
        raise WireFormatError(f"SSE frame named {frame.event!r} carries a {event.type!r} event")
    return event


def parse_sse(stream: str | bytes | Iterable[str | bytes]) -> Iterator[Event]:
    """Events from SSE text, bytes, or an iterable of chunks.

    Raises:
        WireFormatError: Malformed input; events before it were already yielded.
    """
    decoder = SSEDecoder()
    chunks: Iterable[str | bytes] = (stream,) if isinstance(stream, str | bytes) else stream
    for chunk in chunks:
        for frame in decoder.feed(chunk):
            yield frame_to_event(frame)
    decoder.close()


async def aparse_sse(stream: AsyncIterable[str | bytes]) -> AsyncGenerator[Event, None]:
    """Events from an async iterable of SSE chunks (e.g. an HTTP body)."""
    decoder = SSEDecoder()
    async for chunk in stream:
        for frame in decoder.feed(chunk):
            yield frame_to_event(frame)
    decoder.close()
