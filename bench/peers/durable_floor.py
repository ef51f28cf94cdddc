"""The rows of one durable S1 run, written by hand: the floor of the SQLite recipe.

``durable_instructions.py --variants rows-floor`` counts this alone (no turn,
no mainspring in the loop): the statements the recipe's run executes (see
``durable_instructions.py --sql sqlite``), with the same parameters, on a
connection set up as the stores set theirs up (WAL, ``synchronous=NORMAL``),
into the same tables, each JSON text encoded per run with pydantic-core's
``to_json`` (the stores' encoder) from dicts of the same shape. What it leaves
out is everything but the bytes: building those dicts from the session's
objects, checking inputs, the lease and recovery logic. So ``rows-floor`` is a
lower bound on what any implementation pays to write these rows; the recipe's
cost over the in-memory run, minus this, is mainspring's own.
"""

from __future__ import annotations

import sqlite3
import time
import uuid

from pydantic_core import to_json

_LOCK = (
    "INSERT INTO mainspring_locks (key, owner, expires_at) VALUES (?, ?, ?)"
    " ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at"
    " WHERE mainspring_locks.expires_at <= ? OR mainspring_locks.owner = excluded.owner"
)
_START = "INSERT INTO mainspring_sessions (session_id, header, revision) VALUES (?, ?, ?)" \
    " ON CONFLICT (session_id) DO NOTHING"
_MESSAGE = "INSERT INTO mainspring_messages (session_id, seq, data) VALUES (?, ?, ?)"
_EVENTS = "INSERT INTO mainspring_checkpoints (stream_id, seq, data, updated_at)" \
    " VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING"
_HEADER = "UPDATE mainspring_sessions SET header = ?, revision = ?" \
    " WHERE session_id = ? AND revision = ?"
_UNLOCK = "DELETE FROM mainspring_locks WHERE key = ? AND owner = ?"


def connect(path: str) -> sqlite3.Connection:
    """A connection as the stores make theirs (the tables exist: a store made them)."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def _usage(inp: int, out: int, requests: int) -> dict:
    return {"input_tokens": inp, "cache_read_tokens": 0, "cache_write_tokens": 0,
            "output_tokens": out, "reasoning_tokens": 0, "requests": requests}


def _header(sid: str, turn: dict | None, active: str | None, last: str | None,
            terminal: dict | None, usage: dict) -> dict:
    return {"session_id": sid, "agent_name": "s1", "turn_index": 1, "usage": usage,
            "cost_usd": 0.0, "auto_spent_usd": 0.0, "turn": turn, "active_stream": active,
            "last_stream": last, "last_terminal": terminal, "principal": None, "version": 2}


def write_run(conn: sqlite3.Connection, owner: str) -> None:
    """One run's rows: the lease, the start transaction, the final transaction."""
    sid, stream, call = str(uuid.uuid4()), str(uuid.uuid4()), f"call_{uuid.uuid4().hex}"
    now = time.time()
    conn.execute(_LOCK, (sid, owner, now + 30.0, now))
    turn = {"index": 1, "status": "streaming", "steps": 0, "calls": [], "position": 0,
            "pending": None, "usage": _usage(0, 0, 0), "cost_usd": 0.0}
    revision = uuid.uuid4().hex
    conn.execute("BEGIN IMMEDIATE")
    conn.execute(_START, (sid, to_json(_header(sid, turn, stream, None, None,
                                                 _usage(0, 0, 0))).decode(), revision))
    user = {"role": "user", "parts": [{"text": "hi", "type": "text"}], "meta": {}}
    conn.execute(_MESSAGE, (sid, 0, to_json(user).decode()))
    started = {"stream_id": stream, "session_id": sid, "type": "stream_started"}
    conn.execute(_EVENTS, (stream, 0, to_json(started).decode(), now))
    conn.execute("COMMIT")

    content = '{"account": "acc-1", "balance": 1234.5, "currency": "EUR"}'
    step = {"model": "fake-script_s1", "usage": _usage(10, 5, 1), "cost_usd": 0.0,
            "total_cost_usd": 0.0, "type": "usage"}
    terminal = {"stop_reason": "end_turn", "turn_index": 1, "usage": _usage(20, 10, 2),
                "cost_usd": 0.0, "type": "turn_complete"}
    messages = (
        {"role": "assistant", "parts": [{"id": call, "name": "get_balance", "arguments": {},
                                          "provider_id": "call_0", "type": "tool_call"}],
         "meta": {}},
        {"role": "tool", "parts": [{"tool_use_id": call, "name": "get_balance",
                                     "content": content, "is_error": False, "images": [],
                                     "type": "tool_result"}], "meta": {}},
        {"role": "assistant", "parts": [{"text": "done", "type": "text"}], "meta": {}},
    )
    events = [
        step,
        {"tool_use_id": call, "name": "get_balance", "input": {}, "type": "tool_start"},
        {"tool_use_id": call, "name": "get_balance", "content": content, "is_error": False,
         "type": "tool_result"},
        {"text": "done", "type": "text_delta"},
        step,
        terminal,
    ]
    head = _header(sid, None, None, stream, terminal, _usage(20, 10, 2))
    conn.execute("BEGIN IMMEDIATE")
    conn.execute(_HEADER, (to_json(head).decode(), uuid.uuid4().hex, sid, revision))
    for seq, message in enumerate(messages, 1):
        conn.execute(_MESSAGE, (sid, seq, to_json(message).decode()))
    conn.execute(_EVENTS, (stream, 1, to_json(events).decode(), time.time()))
    conn.execute(_UNLOCK, (sid, owner))
    conn.execute("COMMIT")
