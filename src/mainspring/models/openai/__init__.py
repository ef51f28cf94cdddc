"""OpenAI Chat Completions, and every server that speaks its dialect.

:class:`OpenAIChatModel` streams ``/chat/completions`` through the official
``openai`` SDK (its own retries off: :class:`~mainspring.models.retry.RetryPolicy`
owns retrying). Point ``base_url`` at Ollama, vLLM, llama.cpp, OpenRouter,
DeepSeek or Groq and name the server in ``provider``; the dialect quirks are
handled here:

- ``reasoning_content`` (DeepSeek, vLLM) and ``reasoning`` (OpenRouter, Ollama)
  deltas stream as thinking; OpenRouter's ``reasoning_details`` signature is kept.
- Thinking is never sent back to OpenAI itself (chat has no field for it). A
  compatible server gets its *own* thinking back as ``reasoning_content`` on the
  assistant message (DeepSeek requires that within a tool-calling turn); thinking
  from any other provider is dropped.
- Servers that omit tool-call ids (or send ``""``) get stable ``call_<n>`` ids.
- On OpenRouter, a system block with ``cache_breakpoint`` becomes a content part
  carrying ``cache_control: {"type": "ephemeral"}`` (its prompt-caching syntax).

The Responses API lives in :mod:`mainspring.models.openai_responses`.
Layout: ``convert`` builds request bodies, ``stream`` reads chunks, ``errors``
maps SDK exceptions, ``model`` ties them together with retries.
"""

from __future__ import annotations

try:
    import httpx2  # noqa: F401
    import openai  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError('OpenAIChatModel needs: pip install "mainspring[openai]"') from exc

from mainspring.models.openai.convert import build_chat_request, chat_messages
from mainspring.models.openai.errors import map_openai_error
from mainspring.models.openai.model import OpenAIChatModel
from mainspring.models.openai.stream import stop_reason, usage_from_openai

__all__ = [
    "OpenAIChatModel",
    "build_chat_request",
    "chat_messages",
    "map_openai_error",
    "stop_reason",
    "usage_from_openai",
]
