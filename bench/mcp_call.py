"""Instructions of one MCP ``tools/call`` round trip through ``build_mcp_server``.

    python bench/mcp_call.py                          # this checkout
    python bench/mcp_call.py --baseline /path/to/src  # and another tree, same run

The official SDK's ``Client`` calls a read-only tool of a served agent
in-process (the SDK's memory transport: its client, its server runner, and the
engine's one dispatch path, ``DirectCaller.call``). Each tree runs in a fresh
process under ``valgrind --tool=callgrind``: after a warm-up, ``FEW`` calls
then ``MANY``, between markers (``os.getppid``) at which callgrind writes its
count; a call costs ``(many - few) / (MANY - FEW)``. Printed: instructions per
call for each tree, and the ratio to the baseline.
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

ROOT = Path(__file__).resolve().parents[1]
FEW, MANY = 5, 25

RUNNER = """
import sys
sys.path.insert(0, {src!r})
import os
import anyio
from mcp import Client
from mainspring import Agent, ScriptedModel, tool
from mainspring.mcp.server import build_mcp_server

@tool(read_only=True, description="Add two numbers.")
def add(a: int, b: int) -> int:
    return a + b

async def main(few, many):
    server = build_mcp_server(Agent(model=ScriptedModel([]), name="bench", tools=[add]))
    async with Client(server) as client:
        async def call():
            result = await client.call_tool("add", {{"a": 2, "b": 3}})
            assert not result.is_error, result
        for _ in range(3):
            await call()
        os.getppid()
        for _ in range(few):
            await call()
        os.getppid()
        for _ in range(many):
            await call()
        os.getppid()

anyio.run(main, int(sys.argv[1]), int(sys.argv[2]))
"""


def per_call(src: str) -> float:
    """Instructions of one ``tools/call`` round trip with the mainspring of ``src``."""
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "runner.py"
        script.write_text(RUNNER.format(src=src))
        out = Path(tmp) / "cg.out"
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--dump-before=os_getppid",
                f"--callgrind-out-file={out}",
                sys.executable,
                str(script),
                str(FEW),
                str(MANY),
            ],
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "PYTHONHASHSEED": "0"},
            timeout=3600,
        )
        if done.returncode != 0:
            raise SystemExit(f"{src} failed:\n{done.stderr[-2000:]}")
        counts = []
        for dump in (Path(f"{out}.2"), Path(f"{out}.3")):  # .1: before the first marker
            found = re.search(r"^summary: (\d+)", dump.read_text(), re.M)
            assert found is not None, dump
            counts.append(int(found.group(1)))
    few, many = counts
    return (many - few) / (MANY - FEW)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--src", default=str(ROOT / "src"), help="the checkout's src to measure")
    parser.add_argument(
        "--baseline", default="", help="another tree's src, measured in the same run"
    )
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("needs valgrind (apt-get install valgrind)")
    this = per_call(args.src)
    print(f"tools/call round trip: {this:,.0f} instructions ({args.src})")
    if args.baseline:
        base = per_call(args.baseline)
        print(f"baseline:              {base:,.0f} instructions ({args.baseline})")
        print(f"ratio: {this / base:.3f}")


if __name__ == "__main__":
    main()
