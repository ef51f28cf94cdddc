"""Benchmark MCP tool calls' argument validation, and what huge results leave in memory.

Run by hand from the repository root (it is not a pytest test)::

    python bench/schemas.py            # about half a minute
    python bench/schemas.py --quick    # a few seconds, noisier

Two sections, each "before" and "after" in the same run:

- **validation**: the argument check of an MCP tool call, on the real input
  schemas ``mcp-server-git`` lists (and a ``$defs``/``$ref`` one). *Before*
  is the old path, reproduced here: a ``Draft202012Validator`` built per
  call over the schema, its default registry (which fetched remote
  references with ``urllib``), ``best_match`` over every error. *After* is
  ``Tool.parse`` of the tool the client offers: the schema compiled once at
  listing (dialect from ``$schema``, references resolved offline).
- **results**: 40 calls answered with ``--mb`` MB of text each (4 by
  default: the SDK's stdio reader takes seconds per call past a few MB) by a
  real MCP server (the attack corpus's, on the official SDK), process RSS
  before and after, each case in a fresh process; *before* keeps every result
  whole (``audit_chars`` unbounded: the old behaviour), *after* the default
  ``audit_chars``.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import jsonschema

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the attack corpus's server and its config helper

from tests.attacks._mcp_fixtures import hostile, tool  # noqa: E402

from mainspring.mcp import McpClientManager, McpServerConfig  # noqa: E402
from mainspring.mcp._results import result_size  # noqa: E402
from mainspring.tools import Tool, _schemas  # noqa: E402
from mainspring.tools.define import client_tool  # noqa: E402

DEFS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "$defs": {
        "Money": {
            "type": "object",
            "properties": {"amount": {"type": "number"}, "currency": {"type": "string"}},
            "required": ["amount", "currency"],
        }
    },
    "properties": {"to": {"type": "string"}, "total": {"$ref": "#/$defs/Money"}},
    "required": ["to", "total"],
}


def old_check(schema: dict[str, Any], args: object) -> None:
    """The argument check as it was: a validator per call, default (remote) registry."""
    validator = jsonschema.Draft202012Validator(schema)
    jsonschema.exceptions.best_match(validator.iter_errors(args))


def offer(schema: dict[str, Any]) -> Tool:
    """The tool a client offers for ``schema`` (its schema compiled, as at listing)."""
    return client_tool("t", description="t", input_schema=schema)


def per_call_us(fn: Callable[[], object], calls: int, repeats: int) -> float:
    """Median microseconds per call over ``repeats`` batches of ``calls``."""
    times: list[float] = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter_ns() - start) / calls / 1000)
    return statistics.median(times)


async def git_schemas() -> dict[str, dict[str, Any]]:
    """The input schemas ``mcp-server-git`` lists, as a client receives them."""
    with tempfile.TemporaryDirectory() as repo:
        await anyio.run_process(["git", "init", "-q", repo])
        config = McpServerConfig(
            name="git", command=sys.executable, args=("-m", "mcp_server_git", "--repository", repo)
        )
        async with McpClientManager([config]) as manager:
            return {
                str(t.meta["mcp_tool"]): t.input_schema
                for t in manager.tools()
                if "mcp_tool" in t.meta
            }


def valid_args(schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments that pass: each required property given a value of its type."""
    sample = {"string": "main", "integer": 3, "number": 1.5, "boolean": True, "array": ["a"]}
    args: dict[str, Any] = {}
    props = schema.get("properties", {})
    for name in schema.get("required", []):
        prop = props.get(name, {})
        if "$ref" in prop:
            args[name] = {"amount": 9.5, "currency": "EUR"}
        else:
            args[name] = sample.get(prop.get("type", "string"), "x")
    return args


def validation(quick: bool) -> None:
    schemas = anyio.run(git_schemas)
    schemas["pay (with $defs)"] = DEFS_SCHEMA
    calls, repeats = (200, 3) if quick else (2000, 7)
    print(f"validation: microseconds per call (median of {repeats} x {calls} calls)")
    print(f"  {'tool':<22} {'listing':>9} {'relist':>9} {'before':>9} {'after':>9} {'ratio':>7}")
    ratios: list[float] = []
    for name, schema in sorted(schemas.items()):
        args = valid_args(schema)
        _schemas._COMPILED.clear()  # the first listing of this schema: the meta-schema check
        first_us = per_call_us(partial(offer, schema), 1, 1)
        compile_us = per_call_us(partial(offer, schema), 20, 3)  # listed again
        offered = offer(schema)
        offered.parse(args)  # (fails loudly if the arguments do not fit)
        before = per_call_us(partial(old_check, schema, args), calls, repeats)
        after = per_call_us(partial(offered.parse, args), calls, repeats)
        ratios.append(before / after)
        print(
            f"  {name:<22} {first_us:>9.0f} {compile_us:>9.1f} {before:>9.1f} {after:>9.1f}"
            f" {before / after:>6.1f}x"
        )
    print(f"  geometric mean: after is {statistics.geometric_mean(ratios):.1f}x faster")


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def results_rss(audit_chars: int, mb: int, calls: int) -> tuple[float, float, int]:
    """RSS before and after ``calls`` calls, and the characters ``raw_results`` holds."""
    with tempfile.TemporaryDirectory() as tmp:
        config = hostile(
            Path(tmp),
            "s",
            [tool("big", {"type": "object"})],
            big_chars=mb * 1_000_000,
            call_timeout=600,
        )
        async with McpClientManager([config], audit_chars=audit_chars) as manager:
            gc.collect()
            before = rss_mb()
            for _ in range(calls):
                await manager.call_tool("s", "big", {})
            gc.collect()
            kept = sum(result_size(raw.result) for raw in manager.raw_results)
            return before, rss_mb(), kept


def results(quick: bool, mb: int) -> None:
    calls = 10 if quick else 40
    print(f"results: process RSS around {calls} calls of {mb} MB each (a fresh process each)")
    for label, chars in (("before (kept whole)", 10**12), ("after (audit_chars)", 200_000)):
        child = subprocess.run(
            [sys.executable, __file__, "--results-child", str(chars), str(mb), str(calls)],
            capture_output=True,
            text=True,
            check=True,
            timeout=3600,
        )
        start, end, kept = json.loads(child.stdout.splitlines()[-1])
        print(
            f"  {label:<22} {start:>5.0f} -> {end:>5.0f} MB (+{end - start:.0f} MB);"
            f" raw_results hold {kept / 1e6:.1f} M characters"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--mb", type=int, default=4, help="MB of text per result")
    parser.add_argument("--skip-results", action="store_true")
    parser.add_argument("--skip-validation", action="store_true")
    parser.add_argument("--results-child", nargs=3, type=int, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.results_child:
        print(json.dumps(anyio.run(results_rss, *opts.results_child)))
        return
    if not opts.skip_validation:
        validation(opts.quick)
    if not opts.skip_results:
        results(opts.quick, opts.mb)


if __name__ == "__main__":
    main()
