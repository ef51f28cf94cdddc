"""Benchmark stage-contract parsing against the contract's size: it should be linear.

Run by hand from the repository root (it is not a pytest test)::

    python bench/pipelines.py            # full run, a few seconds
    python bench/pipelines.py --quick    # fewer repeats

Each size is a workspace whose one stage contract lists ``n`` outputs in the
torus form (``- outN.md -> output/ — note``) and ``n`` lines of process text.
The figure is the median over repeats of ``load_workspace`` (the whole
load: confined reads, markdown-it parse, item scan, checks), in ms. Sizes
double; a linear parser shows a time ratio near 2.0 between neighbours and
near the size ratio against the smallest. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mainspring.pipelines import load_workspace

SIZES = (2_000, 4_000, 8_000, 16_000, 32_000)


def build(root: Path, n: int) -> None:
    stage = root / "stages" / "01_big"
    stage.mkdir(parents=True)
    (root / "_config").mkdir()
    (root / "_config" / "voice.md").write_text("Plain words.\n")
    (root / "AGENT.md").write_text("# Agent\n")
    (root / "CONTEXT.md").write_text("# Routing\n")
    outputs = "\n".join(f"- out{i}.md -> output/ \u2014 artifact number {i}" for i in range(n))
    process = "\n".join(f"Step {i}: do the *next* thing, `carefully`." for i in range(n))
    (stage / "CONTEXT.md").write_text(
        "# Big stage\n\n## Inputs\n- Layer 3 (reference): ../../_config/voice.md\n\n"
        f"## Process\n{process}\n\n## Outputs\n{outputs}\n"
    )


def measure(root: Path, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        load_workspace(root, max_input_bytes=1 << 30)
        times.append((time.perf_counter_ns() - start) / 1e6)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    args = parser.parse_args()
    repeats = 3 if args.quick else 7
    with tempfile.TemporaryDirectory() as tmp:
        roots = {}
        for n in SIZES:
            roots[n] = Path(tmp) / f"ws{n}"
            build(roots[n], n)
        figures = {n: measure(roots[n], repeats) for n in SIZES}
    base = figures[SIZES[0]]
    print(f"{'items':>8} {'ms':>9} {'vs previous':>12} {'vs smallest':>12} {'size ratio':>11}")
    previous = None
    for n in SIZES:
        step = f"{figures[n] / figures[previous]:.2f}x" if previous else "-"
        print(
            f"{n:>8} {figures[n]:>9.1f} {step:>12} {figures[n] / base:>11.2f}x "
            f"{n / SIZES[0]:>10.0f}x"
        )
        previous = n
    sys.stdout.flush()


if __name__ == "__main__":
    main()
