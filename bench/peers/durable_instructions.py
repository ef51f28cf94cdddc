"""Instructions per S1 run (valgrind's count) for each durable variant of ``durability.py``.

    python durable_instructions.py [--variants none,memory-stores,sqlite,sqlite-sessions-only,
                                               rows-floor] [--src PATH] [--sql]

A variant may also name the stores (``memory`` or ``sqlite``) and the parts it
passes: ``sqlite:sc`` is a session store and a checkpoint store, no run lock
(``s`` sessions, ``c`` checkpoints, ``l`` the run lock).

The same variants as ``durability.py mainspring`` (the public API: ``Session(agent,
**stores.session_kwargs())``), each in a fresh process under ``valgrind
--tool=callgrind``: after a warm-up, a few runs, then many more, each part
between markers at which callgrind writes its count (as ``instructions.py``
does), so start-up, imports, opening the stores and the warm-up stay out.
``rows-floor`` is no turn at all: only the rows one ``sqlite`` run writes,
written by hand (``durable_floor.py``), the least any implementation pays to
put them on disk; ``sqlite`` minus ``none`` minus that is mainspring's own
cost of durability. ``--src`` puts another checkout's ``src`` first on the path: a baseline counted
in the same invocation. Also prints the SQL statements and write transactions
one recipe run executes (``sqlite3``'s trace callback, outside valgrind).
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
if {src!r}:
    sys.path.insert(0, {src!r})
sys.path.insert(0, {here!r})
import harness as h
from bench_mainspring import FakeModel, get_balance, run_turn
from mainspring import Agent, Session
from mainspring.stores.urls import open_stores

variant, runs, tmp = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ALIASES = {aliases!r}

async def main():
    agent = Agent(model=FakeModel(h.script_s1), name="s1", tools=[get_balance])
    name, _, parts = ALIASES.get(variant, variant).partition(":")
    kwargs = {{}}
    if name != "none":
        stores = await open_stores("memory://" if name == "memory" else f"sqlite:///{{tmp}}/ms.db")
        every = stores.session_kwargs()
        for letter, key in (("s", "session_store"), ("c", "checkpoint_store"), ("l", "run_lock")):
            if letter in parts:
                kwargs[key] = every[key]
    trace = []
    if name == "sqlite" and os.environ.get("TRACE_SQL"):
        conn = stores.sessions._db._conn
        conn.set_trace_callback(trace.append)

    if variant == "rows-floor":
        import durable_floor
        await (await open_stores(f"sqlite:///{{tmp}}/ms.db")).aclose()  # (the tables)
        conn, owner = durable_floor.connect(f"{{tmp}}/ms.db"), "floor-owner"

    async def many(n):
        if variant == "rows-floor":
            for _ in range(n):
                durable_floor.write_run(conn, owner)
            return
        for _ in range(n):
            assert await run_turn(Session(agent, **kwargs), h.USER_PROMPT) == h.FINAL_TEXT

    await many(20)
    if trace:
        trace.clear()
        await many(1)
        for sql in trace:
            print("SQL", " ".join(sql.split())[:160])
        return
    os.getppid()
    await many({few})
    os.getppid()
    await many(runs)
    os.getppid()

asyncio.run(main())
"""
FEW, MANY = 10, 110
VARIANTS = ("none", "memory-stores", "sqlite", "sqlite-sessions-only", "rows-floor")
ALIASES = {"memory-stores": "memory:scl", "sqlite": "sqlite:scl", "sqlite-sessions-only": "sqlite:s"}
"""``durability.py``'s names for ``<stores>:<parts>``: s sessions, c checkpoints, l the run lock."""


def script(tmp: str, src: str) -> Path:
    path = Path(tmp) / "runner.py"
    path.write_text(RUNNER.format(here=str(HERE), src=src, few=FEW, aliases=ALIASES))
    return path


def count(variant: str, src: str) -> tuple[int, int]:
    """Instructions of ``FEW`` and of ``MANY`` runs of ``variant``, in one process."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cg.out"
        proc = subprocess.run(
            ["valgrind", "--tool=callgrind", "--dump-before=os_getppid",
             f"--callgrind-out-file={out}", sys.executable, str(script(tmp, src)), variant,
             str(MANY), tmp],
            capture_output=True, text=True, timeout=3600, check=False,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
        parts = []
        for dump in (f"{out}.2", f"{out}.3"):
            text = Path(dump).read_text() if Path(dump).exists() else ""
            found = re.search(r"^summary: (\d+)", text, re.M)
            parts.append(int(found.group(1)) if found else -1)
    if proc.returncode != 0 or min(parts) < 0:
        raise SystemExit(f"{variant} failed:\n{proc.stderr[-2000:]}")
    return parts[0], parts[1]


def statements(src: str, variant: str) -> list[str]:
    """The SQL one run of a SQLite ``variant`` executes, after a warm-up."""
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            [sys.executable, str(script(tmp, src)), variant, str(MANY), tmp],
            capture_output=True, text=True, timeout=600, check=True,
            env={**os.environ, "TRACE_SQL": "1"},
        )
    return [line[4:] for line in proc.stdout.splitlines() if line.startswith("SQL ")]


def _inside(sql: list[str], i: int) -> bool:
    """Whether statement ``i`` runs inside an explicit transaction."""
    depth = False
    for s in sql[:i]:
        if s.startswith("BEGIN"):
            depth = True
        elif s.startswith(("COMMIT", "ROLLBACK")):
            depth = False
    return depth


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--src", default="", help="another checkout's src directory, first")
    parser.add_argument("--sql", default="", help="list the statements of this variant's run")
    args = parser.parse_args()
    if args.sql:
        sql = statements(args.src, args.sql)
        for line in sql:
            print(line)
        begins = sum(1 for s in sql if s.startswith("BEGIN IMMEDIATE"))
        alone = sum(
            1 for i, s in enumerate(sql)
            if s.startswith(("INSERT", "UPDATE", "DELETE")) and not _inside(sql, i)
        )
        print(f"{len(sql)} statements, {begins + alone} write transactions"
              f" ({alone} of them a statement on its own)")
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("needs valgrind (apt-get install valgrind)")
    table = {}
    for variant in args.variants.split(","):
        few, many = count(variant, args.src)
        table[variant] = (many - few) / (MANY - FEW)
        print(f"{variant:>22}: {table[variant]:>12,.0f} instructions/run", file=sys.stderr)
    base = table.get("none")
    for variant, value in table.items():
        ratio = "" if base is None else f"  ({value / base:.2f}x)"
        print(f"| {variant} | {value:,.0f}{ratio} |")


if __name__ == "__main__":
    main()
