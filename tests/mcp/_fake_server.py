"""A tiny line-delimited JSON-RPC MCP server for fault tests; run as a script.

Usage: ``python _fake_server.py MODE PIDFILE`` where MODE is one of
``ok``, ``silent`` (never answers initialize), ``die`` (exits during the first
``crash`` call), ``bad_schema``, ``fail`` (writes 100 KB and then a last
line to stderr, exits 3 before reading anything), ``modern`` (answers
``server/discover`` for 2026-07-28, and its ``hostile_*`` tools answer with
``input_required`` results no client should follow). Tools: ``echo``, ``big`` (5 MB), ``hang``,
``crash``, ``env``, ``picture``, ``add_tool`` (then announces list_changed).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

MODE = sys.argv[1]
Path(sys.argv[2]).open("a").write(f"{os.getpid()}\n")
if MODE == "fail":
    sys.stderr.write("noise " * 20_000 + "\nboom: MAINSPRING_FAKE_KEY is not set\n")
    sys.stderr.flush()
    os._exit(3)
OBJ = {"type": "object", "properties": {"text": {"type": "string"}}}
TOOLS = [
    {"name": "echo", "description": "Echo text.", "inputSchema": OBJ},
    {"name": "big", "description": "5 MB.", "inputSchema": {"type": "object"}},
    {"name": "hang", "description": "Never answers.", "inputSchema": {"type": "object"}},
    {"name": "crash", "description": "Exits.", "inputSchema": {"type": "object"}},
    {"name": "env", "description": "Env names.", "inputSchema": {"type": "object"}},
    {"name": "picture", "description": "An image.", "inputSchema": {"type": "object"}},
    {"name": "add_tool", "description": "Adds a tool.", "inputSchema": {"type": "object"}},
    {
        "name": "count",
        "description": "Counts its calls (read-only).",
        "inputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "as_task",
        "description": "Only as an MCP task.",
        "inputSchema": {"type": "object"},
        "execution": {"taskSupport": "required"},
    },
    {
        "name": "maybe_task",
        "description": "A task if the client wants.",
        "inputSchema": {"type": "object"},
        "execution": {"taskSupport": "optional"},
    },
    {
        "name": "flagged",
        "description": "Annotated.",
        "inputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": True, "title": "Flagged"},
    },
]
if MODE == "dup":
    TOOLS.append(TOOLS[0])
if MODE == "bad_schema":
    TOOLS.append(
        {
            "name": "broken",
            "description": "Bad.",
            "inputSchema": {"type": "object", "properties": {"x": {"type": 12}}},
        }
    )
if MODE == "modern":
    TOOLS.extend(
        {"name": f"hostile_{kind}", "description": "Asks badly.", "inputSchema": {"type": "object"}}
        for kind in ("int_state", "big_state", "endless", "many", "roots", "deep_schema", "sample")
    )
    TOOLS.append({"name": "calls", "description": "Hostile calls so far.", "inputSchema": OBJ})
LOCK = threading.Lock()
COUNTS: list[int] = []
died = Path(sys.argv[2] + ".died")


def send(obj: dict[str, object]) -> None:
    with LOCK:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def text(rid: object, value: str) -> None:
    result: dict[str, object] = {"content": [{"type": "text", "text": value}]}
    if MODE == "modern":
        result["resultType"] = "complete"
    send({"jsonrpc": "2.0", "id": rid, "result": result})


def form(message: str, schema: object) -> dict[str, object]:
    return {
        "method": "elicitation/create",
        "params": {"message": message, "requestedSchema": schema},
    }


def hostile(rid: object, kind: str, params: dict[str, object]) -> None:
    if kind == "calls":
        text(rid, str(len(COUNTS)))
        return
    flat = {"type": "object", "properties": {"name": {"type": "string"}}}
    result: dict[str, object] = {"resultType": "input_required"}
    if kind == "int_state":
        result["requestState"] = 123
    elif kind == "big_state":
        result["requestState"] = "s" * 100_000
    elif kind == "endless":
        result["requestState"] = f"round {len(str(params.get('requestState')))}"
    elif kind == "many":
        result["inputRequests"] = {f"q{i}": form(f"q{i}?", flat) for i in range(9)}
    elif kind == "roots":
        result["inputRequests"] = {"r": {"method": "roots/list"}}
    elif kind == "sample":
        ask = {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}]}
        result["inputRequests"] = {
            "s": {"method": "sampling/createMessage", "params": ask | {"maxTokens": 9}}
        }
    elif kind == "deep_schema":
        props = {f"f{i}": {"type": "string", "description": "d" * 100} for i in range(400)}
        result["inputRequests"] = {"x": form("big form", {"type": "object", "properties": props})}
    COUNTS.append(1)
    send({"jsonrpc": "2.0", "id": rid, "result": result})


def call(rid: object, name: str, args: dict[str, object], params: dict[str, object]) -> None:
    if name.startswith("hostile_") or name == "calls":
        hostile(rid, name.removeprefix("hostile_"), params)
    elif name == "echo":
        text(rid, str(args.get("text", "")))
    elif name == "big":
        text(rid, "x" * 5_000_000)
    elif name == "hang":
        return
    elif name == "crash":
        if MODE == "die" and not died.exists():
            died.write_text("1")
            os._exit(3)
        text(rid, "survived")
    elif name == "count":
        COUNTS.append(1)
        text(rid, f"{len(COUNTS)} {json.dumps(args, sort_keys=True)}")
    elif name == "maybe_task":
        text(rid, "ran plainly")
    elif name == "env":
        text(rid, " ".join(sorted(os.environ)))
    elif name == "picture":
        img = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
        send(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "result": {"content": [{"type": "text", "text": "see"}, img]},
            }
        )
    elif name == "add_tool":
        TOOLS.append({"name": "added", "description": "New.", "inputSchema": {"type": "object"}})
        text(rid, "added")
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})


def main() -> None:
    for line in sys.stdin:
        msg = json.loads(line)
        rid, method = msg.get("id"), msg.get("method")
        if rid is None:
            continue
        if method == "server/discover" and MODE == "modern":
            result = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}
            send({"jsonrpc": "2.0", "id": rid, "result": result})
        elif method == "initialize":
            if MODE == "silent":
                continue
            send(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "result": {
                        "protocolVersion": msg["params"]["protocolVersion"],
                        "capabilities": {"tools": {"listChanged": True}, "prompts": {}},
                        "serverInfo": {"name": "fake", "version": "0"},
                    },
                }
            )
        elif method == "tools/list":
            listed: dict[str, object] = {"tools": TOOLS}
            if MODE == "modern":
                listed |= {"resultType": "complete", "ttlMs": 0, "cacheScope": "public"}
            send({"jsonrpc": "2.0", "id": rid, "result": listed})
        elif method == "prompts/list":
            prompt = {
                "name": "greet",
                "description": "Say hi.",
                "arguments": [{"name": "who", "required": True}],
            }
            send({"jsonrpc": "2.0", "id": rid, "result": {"prompts": [prompt]}})
        elif method == "prompts/get":
            who = msg["params"].get("arguments", {}).get("who", "?")
            message = {"role": "user", "content": {"type": "text", "text": f"Greet {who} warmly."}}
            send({"jsonrpc": "2.0", "id": rid, "result": {"messages": [message]}})
        elif method == "tools/call":
            params = msg["params"]
            threading.Thread(
                target=call,
                args=(rid, params["name"], params.get("arguments") or {}, params),
                daemon=True,
            ).start()
        else:
            send({"jsonrpc": "2.0", "id": rid, "result": {}})
    os._exit(0)


main()
