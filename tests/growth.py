"""How a parser's cost grows with its input: the shared measure of the growth checks.

A parser of outside input must take time linear in its input; a quadratic
step hides at 10 KB and costs minutes at 1 MB. :func:`assert_linear` parses
an input of each size and compares the CPU time per call: a ratio, never an
absolute time. It is made robust on a loaded machine by measuring the
calling thread's CPU time (``time.thread_time``: other processes and threads
do not count), taking the best of several rounds, running the small input
enough times per round that each round is long enough to measure, and
pausing the cyclic garbage collector while it measures (its passes over a
heap the large input grew are the collector's cost, not the parser's). The
bound is generous (300x for 100x the input, where a quadratic step gives
10,000x), so only a super-linear step fails it.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["assert_linear", "cpu_seconds_per_call"]

T = TypeVar("T")

_MIN_ROUND = 0.02
"""Seconds of CPU time one round of the small input lasts at least."""


def cpu_seconds_per_call(fn: Callable[[T], object], value: T, *, rounds: int = 3) -> float:
    """The best (lowest) thread CPU seconds one ``fn(value)`` took, over ``rounds`` rounds.

    A call shorter than a measurable round is repeated within each round. The
    first call counts as a round only when it is long (a large input, measured
    after the small one warmed imports and caches up).
    """
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        return _best(fn, value, rounds)
    finally:
        if enabled:
            gc.enable()


def _best(fn: Callable[[T], object], value: T, rounds: int) -> float:
    start = time.thread_time()
    fn(value)
    once = time.thread_time() - start
    if once >= _MIN_ROUND:
        best, left, calls = once, rounds - 1, 1
    else:
        best, left = float("inf"), rounds
        calls = max(1, min(10_000, math.ceil(_MIN_ROUND / max(once, 1e-6))))
    for _ in range(left):
        start = time.thread_time()
        for _ in range(calls):
            fn(value)
        best = min(best, (time.thread_time() - start) / calls)
    return max(best, 1e-7)


def assert_linear(
    fn: Callable[[T], object],
    make: Callable[[int], T],
    *,
    small: int = 10_000,
    large: int = 1_000_000,
    bound: float = 300.0,
    rounds: int = 2,
) -> float:
    """Fail unless ``fn(make(large))`` costs at most ``bound`` times ``fn(make(small))``.

    ``make(n)`` builds an input of about ``n`` bytes (the same shape at both
    sizes). Returns the measured ratio.
    """
    little, big = make(small), make(large)
    base = cpu_seconds_per_call(fn, little, rounds=max(rounds, 5))  # (cheap: rounds are short)
    cost = cpu_seconds_per_call(fn, big, rounds=rounds)
    ratio = cost / base
    scale = large / small
    assert ratio < bound, (
        f"{getattr(fn, '__name__', fn)!s}: {scale:.0f}x the input cost {ratio:.0f}x the CPU time "
        f"({base * 1e3:.2f} ms -> {cost * 1e3:.0f} ms); linear is about {scale:.0f}x, "
        f"the bound {bound:.0f}x"
    )
    return ratio
