"""SSE decoding: time per MB as the input grows, in one chunk and in 1 KB chunks.

    python bench/sse.py

The floor is the plainest linear line split of the same text
(``str.splitlines``, which cannot parse SSE but reads every character once).
A linear decoder keeps both its ratio to the floor and its time per MB flat
from 1 MB to 10 MB, whatever the chunking; a quadratic one grows with size.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from mainspring.sse import SSEDecoder

MB = 1024 * 1024


def one_big_frame(size: int) -> str:
    return "event: message\ndata: " + "x" * size + "\n\n"


def many_small_frames(size: int) -> str:
    line = "data: " + "y" * 58 + "\n\n"  # 66 characters a frame
    return line * (size // len(line))


def chunked(text: str, size: int | None) -> list[str]:
    if size is None:
        return [text]
    return [text[i : i + size] for i in range(0, len(text), size)]


def decode(chunks: list[str]) -> int:
    decoder = SSEDecoder()
    frames = 0
    for chunk in chunks:
        frames += len(decoder.feed(chunk))
    decoder.close()
    return frames


def floor(chunks: list[str]) -> int:
    return sum(len(c.splitlines()) for c in chunks)


def best(fn: Callable[[list[str]], int], chunks: list[str], repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn(chunks)
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    print(
        f"{'input':<22}{'chunks':>8}{'MB':>5}{'decoder ms/MB':>15}{'floor ms/MB':>13}{'ratio':>8}"
    )
    for name, make in (
        ("one 10 MB data line", one_big_frame),
        ("66-byte frames", many_small_frames),
    ):
        for label, chunk in (("1", None), ("1 KB", 1024)):
            per_mb = []
            for size_mb in (1, 10):
                chunks = chunked(make(size_mb * MB), chunk)
                ms = best(decode, chunks) * 1e3 / size_mb
                base = best(floor, chunks) * 1e3 / size_mb
                per_mb.append(ms)
                print(f"{name:<22}{label:>8}{size_mb:>5}{ms:>15.2f}{base:>13.2f}{ms / base:>8.1f}x")
            print(f"{'':<22}{'':>8}  growth of ms/MB from 1 to 10 MB: {per_mb[1] / per_mb[0]:.2f}x")


if __name__ == "__main__":
    main()
