"""Cold start: process CPU of the minimal program (import, one tool, one turn).

Run by hand from the repository root (it is not a pytest test)::

    python bench/cold_start.py                     # 10 fresh processes per program
    python bench/cold_start.py --runs 20 --baseline ../old/src   # also an older src/
    python bench/cold_start.py --instructions      # also valgrind's instruction counts

Each program runs in a fresh interpreter, in turn with the others (so a load
swing hits them all); the figure is the child's CPU time, user + system, from
``wait4`` (interpreter start-up included: a ``mainspring run`` or a serverless
cold start pays it too). Programs:

- **floor**: the same shape in plain Python: an ``async def`` tool, its JSON
  schema written by hand, a scripted model as an async generator that calls
  the tool once and then answers, arguments parsed with ``json`` and checked
  by hand, run with ``asyncio.run``.
- **floor+pydantic**: the floor with the tool's input model built by
  ``pydantic.create_model`` from the signature, its JSON schema generated and
  the arguments validated by it (what any typed tool decorator pays).
- **mainspring**: ``@tool``, ``ScriptedModel``, ``Session(Agent(...)).send``.
- **pydantic-ai** (when installed): ``@agent.tool_plain`` and a
  ``FunctionModel`` doing the same.

Ratios are to the floor measured in the same run. ``--instructions`` counts
each program's instructions once under ``valgrind --tool=callgrind`` (exact,
so a change of a few percent shows on a busy machine).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

FLOOR = '''
import asyncio
import json


async def get_balance(account: str) -> float:
    """Current balance of an account."""
    return 42.0


TOOLS = {
    "get_balance": {
        "fn": get_balance,
        "schema": {
            "type": "object",
            "properties": {"account": {"type": "string"}},
            "required": ["account"],
            "additionalProperties": False,
        },
    }
}


async def model(messages, tools):
    if messages[-1]["role"] == "user":
        yield {"tool_call": {"id": "c1", "name": "get_balance", "arguments": '{"account": "a1"}'}}
    else:
        yield {"text": "You have $42."}


async def main():
    messages = [{"role": "user", "content": "Balance?"}]
    specs = [{"name": n, "input_schema": t["schema"]} for n, t in TOOLS.items()]
    while True:
        calls = []
        async for event in model(messages, specs):
            if "tool_call" in event:
                calls.append(event["tool_call"])
            else:
                messages.append({"role": "assistant", "content": event["text"]})
        if not calls:
            return
        for call in calls:
            args = json.loads(call["arguments"])
            if not isinstance(args.get("account"), str):
                raise TypeError("account must be a string")
            result = await TOOLS[call["name"]]["fn"](**args)
            messages.append({"role": "tool", "id": call["id"], "content": json.dumps(result)})


asyncio.run(main())
'''

FLOOR_PYDANTIC = FLOOR.replace(
    "asyncio.run(main())",
    """
import inspect
from pydantic import ConfigDict, create_model

params = inspect.signature(get_balance).parameters
Input = create_model(
    "get_balance_input",
    __config__=ConfigDict(extra="forbid"),
    **{n: (p.annotation, ...) for n, p in params.items()},
)
TOOLS["get_balance"]["schema"] = Input.model_json_schema()
_plain = get_balance


async def get_balance(**kwargs):
    return await _plain(**dict(Input.model_validate(kwargs)))


TOOLS["get_balance"]["fn"] = get_balance
asyncio.run(main())
""",
)

MAINSPRING = '''
import anyio
from mainspring import Agent, ScriptedCall, ScriptedModel, ScriptedResponse, Session, tool


@tool(read_only=True)
async def get_balance(account: str) -> float:
    """Current balance of an account."""
    return 42.0


model = ScriptedModel(
    [ScriptedResponse(tool_calls=[ScriptedCall("get_balance", {"account": "a1"})]), "You have $42."]
)


async def main() -> None:
    async for _event in Session(Agent(model=model, tools=[get_balance])).send("Balance?"):
        pass


anyio.run(main)
'''

PYDANTIC_AI = '''
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel


def answer(messages, info):
    if any(isinstance(p, ToolReturnPart) for m in messages for p in m.parts):
        return ModelResponse(parts=[TextPart("You have $42.")])
    return ModelResponse(parts=[ToolCallPart("get_balance", {"account": "a1"})])


agent = Agent(FunctionModel(answer))


@agent.tool_plain
async def get_balance(account: str) -> float:
    """Current balance of an account."""
    return 42.0


agent.run_sync("Balance?")
'''


VALGRIND = ("valgrind", "--tool=callgrind")


def _env(src: str | None) -> dict[str, str]:
    env = dict(os.environ)
    if src is not None:  # that checkout's package first on the path
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    return env


def cpu_ms(script: Path, src: str | None = None) -> float:
    """One fresh process running ``script``: its CPU time (user + system) in ms."""
    proc = subprocess.Popen([sys.executable, str(script)], env=_env(src), stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{script.name} failed (exit {proc.returncode})")
    return (usage.ru_utime + usage.ru_stime) * 1000


def instructions(script: Path, src: str | None = None) -> int:
    """The instructions one run of ``script`` executes (valgrind's count)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        subprocess.run(
            [*VALGRIND, f"--callgrind-out-file={out}", sys.executable, str(script)],
            env=_env(src),
            check=True,
            capture_output=True,
            timeout=1800,  # valgrind runs a program about 50x slower than native
        )
        found = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.MULTILINE)
        if found is None:
            raise SystemExit(f"no count in callgrind's output for {script.name}")
        return int(found.group(1))


def main() -> None:
    """Measure each program and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10, help="fresh processes per program")
    ap.add_argument("--baseline", help="an older checkout's src/ directory, measured too")
    ap.add_argument("--instructions", action="store_true", help="valgrind's counts too")
    a = ap.parse_args()
    programs: list[tuple[str, str, str | None]] = [
        ("floor", FLOOR, None),
        ("floor+pydantic", FLOOR_PYDANTIC, None),
        ("mainspring", MAINSPRING, None),
    ]
    if a.baseline:
        programs.insert(2, ("mainspring (baseline)", MAINSPRING, a.baseline))
    if importlib.util.find_spec("pydantic_ai") is not None:
        programs.append(("pydantic-ai", PYDANTIC_AI, None))
    if a.instructions and shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (apt-get install valgrind)")
    with tempfile.TemporaryDirectory() as tmp:
        scripts = []
        for label, text, src in programs:
            path = Path(tmp) / ("cold_" + re.sub(r"\W+", "_", label) + ".py")
            path.write_text(text)
            cpu_ms(path, src)  # warm the file cache and the bytecode
            scripts.append((label, path, src))
        print(f"load average at start: {os.getloadavg()}")
        times: dict[str, list[float]] = {label: [] for label, _, _ in scripts}
        for _ in range(a.runs):
            for label, path, src in scripts:
                times[label].append(cpu_ms(path, src))
        print(f"load average at end: {os.getloadavg()}")
        counts = (
            {label: instructions(path, src) for label, path, src in scripts}
            if (a.instructions)
            else {}
        )
    floor = statistics.median(times["floor"])
    head = f"{'program':24s}{'CPU ms (median, min-max)':>28s}{'vs floor':>10s}"
    print(head + (f"{'instructions':>16s}{'vs floor':>10s}" if counts else ""))
    for label, values in times.items():
        mid = statistics.median(values)
        spread = f"{mid:.0f} ({min(values):.0f}-{max(values):.0f})"
        row = f"{label:24s}{spread:>28s}{mid / floor:>9.2f}x"
        if counts:
            row += f"{counts[label]:>16,}{counts[label] / counts['floor']:>9.2f}x"
        print(row)


if __name__ == "__main__":
    main()
