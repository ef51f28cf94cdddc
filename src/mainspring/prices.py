"""Model prices from ``genai-prices`` (an optional extra; no hand-written table).

Model names may carry their provider (``"anthropic:claude-sonnet-4-5"``); the
provider part is mapped to genai-prices' provider ids. A model it does not
know has no price (``None``), never a guessed one.
"""

from __future__ import annotations

from functools import lru_cache

from mainspring.usage import Usage

__all__ = ["genai_price", "price_data_version"]

_PROVIDERS = {
    "anthropic": "anthropic",
    "openai": "openai",
    "openai-chat": "openai",
    "openai-responses": "openai",
    "gemini": "google",
    "google": "google",
}


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
    if model in _UNKNOWN or not _available():
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
