"""Instructions per run (valgrind's count), for a figure a busy machine cannot move.

    python instructions.py [mainspring floor ...] [--scenarios s1,s2,s3_1000]

Wall-clock and CPU time swing by 2x on a machine shared with other work; the
number of machine instructions a run executes does not. Each framework's
`bench_<name>.py` adapter runs under `valgrind --tool=callgrind` twice, in
fresh processes, once with a few runs and once with many more (after the same
warm-up), and the difference divided by the extra runs is the instructions one
run costs: start-up, imports and warm-up cancel out. Ratios are to the floor
(`bench_floor.py`), counted the same way in the same invocation.

Instructions are not time: a cache miss costs more than an add. They track
CPU time closely for code like this (interpreted Python, no I/O), and they
are exact, so a change of a few percent shows. Needs `valgrind` on PATH; it
runs about 50x slower than native, so a scenario takes a minute or two.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUNNER = """
import asyncio, sys
sys.path.insert(0, {here!r})
import harness as h
import bench_{name} as mod
adapter = next(v for v in vars(mod).values()
               if isinstance(v, type) and issubclass(v, h.Adapter) and v is not h.Adapter)()
adapter.setup()
scenario, runs = sys.argv[1], int(sys.argv[2])
if scenario.startswith("s3_"):
    history = adapter.s3_history(int(scenario[3:]))
    fn = lambda: adapter.s3(history)
else:
    fn = getattr(adapter, scenario)
async def many(n):
    for _ in range(n):
        assert await fn() == h.FINAL_TEXT
asyncio.run(many(20))   # warm-up: caches, first-call imports
asyncio.run(many(runs))
"""
FEW, MANY = 10, 110


def count(name: str, scenario: str, runs: int) -> int:
    """Instructions of one process running ``runs`` runs of ``scenario`` (after the warm-up)."""
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(RUNNER.format(here=str(HERE), name=name))
        script = f.name
    try:
        proc = subprocess.run(
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
             sys.executable, script, scenario, str(runs)],
            capture_output=True, text=True, timeout=1800, check=False,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
    finally:
        os.unlink(script)
    found = re.search(r"Collected : (\d+)", proc.stderr)
    if proc.returncode != 0 or found is None:
        raise SystemExit(f"{name} {scenario} failed:\n{proc.stderr[-2000:]}")
    return int(found.group(1))


def per_run(name: str, scenario: str) -> float:
    return (count(name, scenario, MANY) - count(name, scenario, FEW)) / (MANY - FEW)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", default=["mainspring"])
    parser.add_argument("--scenarios", default="s1,s2,s3_1000")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("needs valgrind (apt-get install valgrind)")
    scenarios = args.scenarios.split(",")
    names = ["floor", *[n for n in args.names if n != "floor"]]
    table: dict[str, dict[str, float]] = {}
    for name in names:
        for scenario in scenarios:
            table.setdefault(name, {})[scenario] = per_run(name, scenario)
            print(f"{name:>12} {scenario:>8}: {table[name][scenario]:>12,.0f} instructions/run",
                  file=sys.stderr)
    print(f"| instructions per run | {' | '.join(scenarios)} |")
    print(f"|---|{'---:|' * len(scenarios)}")
    for name in names:
        cells = []
        for scenario in scenarios:
            value, floor = table[name][scenario], table["floor"][scenario]
            cells.append(f"{value:,.0f}" + ("" if name == "floor" else f" ({value / floor:.1f}x)"))
        print(f"| {name} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
