"""Model prices from ``genai-prices`` (an optional extra; no hand-written table).

Model names may carry their provider (``"anthropic:claude-sonnet-4-5"``); the
provider part is mapped to genai-prices' provider ids. A model it does not
know has no price (``None``), never a guessed one.

genai-prices is loaded only for a name it may price: loading it costs a
process about 75 ms of CPU (its price data is a large module), which a
program on an offline or self-hosted model (``"scripted"``,
``"openai-compatible:llama3.2"``) would pay on its first turn for nothing.
"""

from __future__ import annotations

import re
from functools import lru_cache

from mainspring.usage import Usage

__all__ = ["genai_price", "may_have_price", "price_data_version"]

_PROVIDERS = {
    "anthropic": "anthropic",
    "openai": "openai",
    "openai-chat": "openai",
    "openai-responses": "openai",
    "gemini": "google",
    "google": "google",
}


_BARE_NAMES = re.compile(
    "|".join(
        (
            # genai-prices' providers' ``model_match`` rules (its data as of 0.2.5):
            # without a provider part, a name no rule matches has no price there.
            # tests/test_cost.py checks them against the installed genai-prices.
            r".*(?:claude|cerebras|gemini|grok)",  # anthropic, cerebras, google, x-ai
            r"@cf/|accounts/fireworks/|command-|composer-|eleven_|jev-|voyage-",
            r"databricks-|system\.ai\.|deepseek|kimi|moonshot|glm-",
            r"muse-wonder-1\.0$|muse-spark-|minimax-m|minimax-01$|m2-her$",  # meta, minimax
            r"gpt-|whisper-1$|tts-1|o[134]",  # openai
            r"(?![^/]+/)(?:labs-)?(?:(?:mi|code|dev|magi|mini)stral|mixtral|pixtral|voxtral"
            r"|open-(?:mistral|mixtral))",  # mistral
        )
    )
)


def may_have_price(model: str) -> bool:
    """Whether genai-prices may know ``model`` (``False``: it surely does not).

    Decided without loading genai-prices: a name with a provider part needs one
    genai-prices knows; a bare name needs to match one of its providers' rules.
    """
    provider, sep, _ = model.partition(":")
    if sep:
        return provider in _PROVIDERS
    return _BARE_NAMES.match(model.lower()) is not None


@lru_cache(maxsize=1)
def _available() -> bool:
    try:
        import genai_prices  # noqa: F401
    except ImportError:
        return False
    return True


_UNKNOWN: set[str] = set()
"""Models genai-prices does not know: not looked up again in this process."""


def genai_price(model: str, usage: Usage) -> float | None:
    """USD for ``usage`` on ``model`` from genai-prices, or ``None`` when unknown."""
    if model in _UNKNOWN or not may_have_price(model) or not _available():
        return None
    import genai_prices

    provider, sep, ref = model.partition(":")
    provider_id = _PROVIDERS.get(provider) if sep else None
    if not sep:
        ref = model
    elif provider_id is None:
        _UNKNOWN.add(model)  # openai-compatible servers and others: unknown prices
        return None
    priced = genai_prices.Usage(
        # genai-prices counts input tokens with the cached ones included.
        input_tokens=usage.total_input_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        output_tokens=usage.output_tokens,
    )
    try:
        calc = genai_prices.calc_price(priced, model_ref=ref, provider_id=provider_id)
    except LookupError:
        _UNKNOWN.add(model)
        return None
    return float(calc.total_price)


@lru_cache(maxsize=1)
def price_data_version() -> str:
    """The installed genai-prices version (its price data), or ``"unavailable"``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("genai-prices")
    except PackageNotFoundError:
        return "unavailable"
