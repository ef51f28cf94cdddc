"""The real ``mainspring`` entry point under a pseudo-terminal: prompts and Ctrl-C."""

from __future__ import annotations

import json

import pytest

from tests.terminal import Start

pytestmark = [pytest.mark.timeout(120)]


def test_ctrl_c_at_the_approval_prompt_exits_at_once_without_paying(terminal: Start) -> None:
    term = terminal("demo")
    term.wait_for("Approve?")
    term.child.sendintr()
    assert term.exit_code() == 130
    assert "interrupted" in term.screen
    assert "→ send_payment" not in term.screen


def test_answering_yes_at_the_prompt_pays(terminal: Start) -> None:
    term = terminal("demo")
    term.wait_for("Approve?")
    term.type("y")
    term.wait_for("turn complete (end_turn)")
    assert term.exit_code() == 0
    assert "→ send_payment" in term.screen


@pytest.mark.slow
def test_ctrl_c_on_mcp_serve_over_stdio_exits_at_once(terminal: Start) -> None:
    pytest.importorskip("mcp", reason='needs mcp (pip install -e ".[test]")')
    term = terminal("mcp", "serve")
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "pty-test", "version": "1"},
        },
    }
    term.type(json.dumps(hello))
    term.wait_for('"serverInfo"')  # serving, and now waiting for the next message
    term.child.sendintr()
    assert term.exit_code() == 130
