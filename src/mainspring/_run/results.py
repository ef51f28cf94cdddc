"""What a tool call's result becomes: bounded, previewed, summarized, or an error.

The dispatcher's text-shaping helpers: every result and error the model sees
is cut to its budget here (``truncate_result``), a paused call's preview and
details are gathered here (in a worker thread for synchronous ones), a
tool's failure (or its :class:`~mainspring.errors.ToolTimeout`) becomes the
error result the model reads, and an approver's edits become a note before it.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping
from dataclasses import replace

import anyio.to_thread

from mainspring._lowlevel.json_value import JsonValue
from mainspring._run.arguments import clip
from mainspring.errors import ToolTimeout
from mainspring.tools.define import Tool, ToolOutput
from mainspring.tools.policy import Details, Preview, Summarize

__all__ = [
    "EDITED_NOTE_START",
    "ERROR_LIMIT",
    "PREVIEW_LIMIT",
    "details_of",
    "edited_note",
    "failed",
    "noted",
    "preview_of",
    "shortened",
    "summarized",
    "timed_out",
    "timeout_error",
    "truncate_result",
]

ERROR_LIMIT = 4_000
"""Characters of an error result the engine writes (a bad call's input is not echoed)."""
PREVIEW_LIMIT = 20_000
"""Characters of a preview a pending action carries."""


async def preview_of(preview: Preview, args: dict[str, JsonValue]) -> str:
    """A tool's preview of a paused call, in a worker thread (it may read files)."""
    try:
        text = await anyio.to_thread.run_sync(preview, args)
    except Exception as exc:  # the approver learns why, the call is still judged as is
        return f"preview unavailable: {clip(str(exc), 500)}"
    return truncate_result(str(text), PREVIEW_LIMIT)


async def details_of(details: Details, args: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """A tool's extension fields for a paused call (sync ones in a worker thread)."""
    try:
        if inspect.iscoroutinefunction(details):
            found = await details(args)
        else:
            found = await anyio.to_thread.run_sync(details, args)
            if inspect.isawaitable(found):
                found = await found
        if not isinstance(found, Mapping):
            raise TypeError(f"details must return a mapping, not {type(found).__name__}")
        return {str(k): v for k, v in found.items()}
    except Exception as exc:  # the approver learns why; the call is still judged as is
        return {"details_error": clip(f"{type(exc).__name__}: {exc}", 500)}


async def summarized(summarize: Summarize, content: str, limit: int) -> str:
    """A result over its budget, shortened by the tool's summarizer (else cut)."""
    try:
        text = summarize(content, limit)
        if inspect.isawaitable(text):
            text = await text
    except Exception:  # a summarizer's failure costs the summary, not the result
        return truncate_result(content, limit)
    return truncate_result(str(text), limit)


def truncate_result(content: str, limit: int) -> str:
    """Cut ``content`` to ``limit`` characters with a hint to narrow the call."""
    if len(content) <= limit:
        return content
    return (
        content[:limit]
        + f"\n\n[truncated: the result has {len(content):,} characters; only the first "
        f"{limit:,} are shown. Narrow the call (filter, paginate or ask for less) to see the rest.]"
    )


def failed(tool: Tool, exc: Exception) -> ToolOutput:
    """The error result of a tool that raised ``exc``."""
    kind = type(exc).__name__
    return ToolOutput(
        content=f"tool {tool.name!r} failed: {kind}: {exc}", is_error=True, error_type=kind
    )


def timed_out(exc: ToolTimeout) -> ToolOutput:
    """The error result of a tool that ran past its deadline (``exc`` says which and how long)."""
    return ToolOutput(content=str(exc), is_error=True, error_type=type(exc).__name__)


def noted(output: ToolOutput, note: str) -> ToolOutput:
    """``output`` with ``note`` before its content (itself when there is no note)."""
    return replace(output, content=note + output.content) if note else output


EDITED_NOTE_START = "[the approver edited the arguments: "
"""How the note of :func:`edited_note` starts (it ends with ``]`` and a blank line)."""


def edited_note(asked: dict[str, JsonValue], ran: dict[str, JsonValue]) -> str:
    """What the model is told before an approved call's result when edits changed its input.

    The model's own call still shows the arguments it asked for; this line
    records the values that ran instead (``""`` when nothing changed), so the
    transcript never claims the call ran as asked.
    """
    changed = {k: v for k, v in ran.items() if k not in asked or asked[k] != v}
    if not changed:
        return ""
    was = {k: asked[k] for k in changed if k in asked}
    text = json.dumps(changed, ensure_ascii=False, sort_keys=True)
    before = json.dumps(was, ensure_ascii=False, sort_keys=True)
    return (
        f"{EDITED_NOTE_START}the call ran with {_clipped(text)} instead of {_clipped(before)}]\n\n"
    )


def _clipped(text: str, limit: int = 2_000) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


async def shortened(tool: Tool, output: ToolOutput) -> ToolOutput:
    """A result over the tool's budget, summarized when the tool says how."""
    limit, summarize = tool.policy.max_result_chars, tool.policy.summarize_on_truncate
    if len(output.content) <= limit:
        return output
    if summarize is None:
        return replace(output, content=truncate_result(output.content, limit))
    return replace(output, content=await summarized(summarize, output.content, limit))


def timeout_error(tool: Tool, timeout: float) -> ToolTimeout:
    """The error of ``tool`` running past its deadline of ``timeout`` seconds."""
    return ToolTimeout(
        f"tool {tool.name!r} timed out after {timeout}s", tool=tool.name, timeout=timeout
    )
