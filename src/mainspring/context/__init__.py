"""The context pipeline: the transcript every model call is compiled from."""

from mainspring.context.transcript import (
    MainspringAdapter,
    MessageAdapter,
    PrefixChange,
    ToolCallLookup,
    ToolLink,
    Transcript,
    TranscriptView,
    json_fingerprint,
)

__all__ = [
    "MainspringAdapter",
    "MessageAdapter",
    "PrefixChange",
    "ToolCallLookup",
    "ToolLink",
    "Transcript",
    "TranscriptView",
    "json_fingerprint",
]
