"""Instructions per run (valgrind's count), for a figure a busy machine cannot move.

    python instructions.py [mainspring floor ...] [--scenarios s1,s2,s3_1000]

Wall-clock and CPU time swing by 2x on a machine shared with other work; the
number of machine instructions a run executes does not. Each framework's
`bench_<name>.py` adapter runs under `valgrind --tool=callgrind` in a fresh
process: after a warm-up, a few runs, then many more, each part between
markers at which callgrind writes its count; the difference divided by the
extra runs is the instructions one run costs (start-up, imports, warm-up and
the event loop's own set-up stay out). Ratios are to the floor
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
import asyncio, os, sys
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
os.getppid()            # marker: callgrind dumps its counts at each call (see count)
asyncio.run(many({few}))
os.getppid()
asyncio.run(many(runs))
os.getppid()
"""
FEW, MANY = 10, 110


def count(name: str, scenario: str) -> tuple[int, int]:
    """Instructions of ``FEW`` and of ``MANY`` runs of ``scenario``, in one process.

    The runner calls ``os.getppid()`` as a marker between its parts, and
    callgrind (``--dump-before=os_getppid``) writes the counts so far at each
    call: start-up, imports and warm-up stay outside both parts.
    """
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "runner.py"
        script.write_text(RUNNER.format(here=str(HERE), name=name, few=FEW))
        out = Path(tmp) / "cg.out"
        proc = subprocess.run(
            ["valgrind", "--tool=callgrind", "--dump-before=os_getppid",
             f"--callgrind-out-file={out}", sys.executable, str(script), scenario, str(MANY)],
            capture_output=True, text=True, timeout=1800, check=False,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
        parts = []
        for dump in (f"{out}.2", f"{out}.3"):  # .1 is everything before the first marker
            found = re.search(r"^summary: (\d+)", Path(dump).read_text() if Path(dump).exists()
                              else "", re.M)
            parts.append(int(found.group(1)) if found else -1)
    if proc.returncode != 0 or min(parts) < 0:
        raise SystemExit(f"{name} {scenario} failed:\n{proc.stderr[-2000:]}")
    return parts[0], parts[1]


def per_run(name: str, scenario: str) -> float:
    few, many = count(name, scenario)
    return (many - few) / (MANY - FEW)


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
