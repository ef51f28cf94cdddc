"""Usage a Chat Completions server did not report, estimated offline.

Some OpenAI-compatible servers (local ones above all) ignore
``stream_options.include_usage``: their stream carries no ``usage`` at all.
The call still happened, so it counts as one request, and its tokens are
counted here with :func:`mainspring.tokens.tokenizer_for` (an exact tiktoken
encoding for OpenAI's models, when the ``tokens`` extra is installed; a labelled
character estimate otherwise), never left at zero. The input side counts what
the server's chat template wraps: each message's text, its tool calls and the
tool schemas, plus OpenAI's documented framing (3 tokens a message, 3 to
prime the reply). Images are not counted. The result is marked estimated by
the adapter (``ModelUsage.estimated``), and so are the usage events and cost
the engine derives from it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from mainspring.tokens import EstimateTokenizer, Tokenizer, tokenizer_for
from mainspring.usage import Usage

__all__ = ["estimate_usage"]

_PER_MESSAGE = 3
"""Tokens of role framing around each message (OpenAI's chat format)."""
_REPLY_PRIMING = 3
"""Tokens that open the assistant's reply."""


def _texts(message: Mapping[str, Any]) -> list[str]:
    """The texts of one request message a template puts before the model."""
    out: list[str] = []
    content = message.get("content")
    if isinstance(content, str):
        out.append(content)
    elif isinstance(content, list):
        out.extend(
            part["text"]
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str):
        out.append(reasoning)
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        out.append(str(function.get("name") or ""))
        out.append(str(function.get("arguments") or ""))
    return out


def _count(tokenizer: Tokenizer, text: str) -> int:
    try:
        return tokenizer.count(text)
    except ImportError:  # tiktoken's extra is not installed: a character estimate
        return EstimateTokenizer("openai").count(text)


def estimate_usage(
    body: Mapping[str, Any], output: Sequence[str], *, model: str, provider: str
) -> Usage:
    """One request's usage, counted offline from what was sent and what came back.

    Blocking on first use of a tiktoken encoding (it loads its BPE file): call
    it from a worker thread.

    Args:
        body: The Chat Completions request body that was sent.
        output: The texts the stream returned: text, reasoning, tool call names
            and arguments.
        model: The model id sent in the request.
        provider: The adapter's provider name (chooses the tokenizer with ``model``).

    Returns:
        ``requests=1``, uncached input and output tokens; no cache or reasoning split.
    """
    tokenizer = tokenizer_for(f"{provider}:{model}")
    messages = body.get("messages") or ()
    prompt = [text for message in messages for text in _texts(message)]
    tools = body.get("tools")
    if tools:
        prompt.append(json.dumps(tools, separators=(",", ":")))
    framing = _PER_MESSAGE * len(messages) + _REPLY_PRIMING
    input_tokens = sum(_count(tokenizer, text) for text in prompt if text) + framing
    output_tokens = _count(tokenizer, "".join(output))
    return Usage(input_tokens=input_tokens, output_tokens=output_tokens, requests=1)
