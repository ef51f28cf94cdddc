"""Token usage, normalized across providers.

``input_tokens`` counts only uncached input; cache reads and writes are kept
apart so that cache hits and tiered prices are never double counted.
``reasoning_tokens`` is the part of ``output_tokens`` spent thinking (a
subset, not an addition).
"""

from __future__ import annotations

from mainspring._lowlevel.frozen import dataclass, fast_init

__all__ = ["Usage"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Tokens used by one or more model calls."""

    input_tokens: int = 0
    """Uncached input tokens."""
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    """Included in ``output_tokens``."""
    requests: int = 0

    def __add__(self, other: Usage) -> Usage:
        # A sum starts from zero more often than not (a turn's, a step's), and
        # adding zero is the same value: a frozen one, safe to return as it is.
        if not (
            other.input_tokens
            or other.output_tokens
            or other.requests
            or other.cache_read_tokens
            or other.cache_write_tokens
            or other.reasoning_tokens
        ):
            return self
        if not (
            self.input_tokens
            or self.output_tokens
            or self.requests
            or self.cache_read_tokens
            or self.cache_write_tokens
            or self.reasoning_tokens
        ):
            return other
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            requests=self.requests + other.requests,
        )

    @property
    def total_input_tokens(self) -> int:
        """Every input token, cached or not."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    @property
    def total_tokens(self) -> int:
        """Input (all kinds) plus output."""
        return self.total_input_tokens + self.output_tokens


# Built on every step: a faster constructor (the same instances).
fast_init(Usage)
