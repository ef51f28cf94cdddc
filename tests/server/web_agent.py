"""A scripted agent for the page tests: a client-executed tool, a canvas, a gated stream.

- "sign $N to NAME": the model calls ``sign_payment``, a client-executed tool
  the chat page carries out in the browser; then it repeats the result.
- "tell a story": the model streams part one, calls ``wait_for_gate`` (a read
  that draws a canvas, then waits until the test opens the gate), then
  streams part two. The test reloads the page while the gate is shut.
- "show markdown": a reply in Markdown (a table, a list, a code block) with
  hostile bits that must not run (a script, an ``onerror``, a ``javascript:`` link).
- "long story": many paragraphs, then the gate, then part two (the scroll test).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence

import anyio
from pydantic import BaseModel, JsonValue

from mainspring.agent import Agent
from mainspring.cost import ModelPrice
from mainspring.messages import Message
from mainspring.models.base import ToolSpec
from mainspring.models.scripted import ScriptedCall, ScriptedModel, ScriptedResponse
from mainspring.permissions import PermissionRules
from mainspring.tools.context import ToolContext
from mainspring.tools.define import client_tool, tool
from mainspring.usage import Usage

PART_ONE = "Once upon a time a careful agent kept a ledger. "
PART_TWO = "It never moved money unapproved, and the books always balanced."
CANVAS_HTML = "<h2>Ledger</h2><p>balanced</p>"
CODE = 'print("balanced")'
MARKDOWN = (
    "Here is the **ledger**:\n\n"
    "| account | balance |\n| --- | ---: |\n| alice | 120 |\n| bob | 30 |\n\n"
    "- first item\n- second item\n\n"
    f"```python\n{CODE}\n```\n\n"
    "<script>window.pwned = 'script'</script>\n\n"
    "<img src=x onerror=\"window.pwned = 'img'\">\n\n"
    "[click me](javascript:window.pwned='link') and [docs](https://example.org/docs)\n"
)
LONG = "".join(f"Paragraph {i} of a long story about a careful ledger.\n\n" for i in range(60))


class SignInput(BaseModel):
    to_account: str
    amount_usd: int


def _script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
    last = messages[-1]
    if last.role == "user":
        sign = re.search(r"sign \$(\d+) to (\w+)", last.text)
        if sign:
            args: dict[str, JsonValue] = {
                "to_account": f"acct_{sign.group(2).lower()}",
                "amount_usd": int(sign.group(1)),
            }
            return ScriptedResponse(
                text="Please sign this in your browser.",
                tool_calls=[ScriptedCall("sign_payment", args)],
            )
        if "show markdown" in last.text:
            return ScriptedResponse(text=MARKDOWN)
        if "long story" in last.text:
            return ScriptedResponse(text=LONG, tool_calls=[ScriptedCall("wait_for_gate", {})])
        if "story" in last.text:
            return ScriptedResponse(
                thinking="A short story, in two parts.",
                text=PART_ONE,
                tool_calls=[ScriptedCall("wait_for_gate", {})],
                usage=Usage(input_tokens=40, cache_read_tokens=60, output_tokens=12, requests=1),
            )
        return ScriptedResponse(text="Say 'sign $5 to bob' or 'tell a story'.")
    results = {p.name: p for p in last.tool_results_parts}
    if "sign_payment" in results:
        signed = results["sign_payment"]
        return ScriptedResponse(text=f"Signed in the browser: {signed.content}")
    return ScriptedResponse(
        text=PART_TWO,
        usage=Usage(
            input_tokens=10,
            cache_read_tokens=90,
            cache_write_tokens=5,
            output_tokens=15,
            requests=1,
        ),
    )


def web_agent(gate: threading.Event) -> Agent:
    """The agent; ``wait_for_gate`` returns once ``gate`` is set."""

    @tool(read_only=True)
    async def wait_for_gate(ctx: ToolContext) -> str:
        """Draw the ledger, then wait for the test to open the gate."""
        ctx.canvas("html", CANVAS_HTML, title="Ledger")
        while not gate.is_set():  # noqa: ASYNC110  # a threading.Event, set by the test's thread
            await anyio.sleep(0.05)
        return "the gate opened"

    sign_payment = client_tool(
        "sign_payment",
        description="Sign a payment in the user's browser wallet.",
        input_schema=SignInput,
        modifiable_fields=("amount_usd",),
    )
    return Agent(
        name="web",
        instructions="You are the page tests' agent.",
        model=ScriptedModel(_script, name="scripted-web", chunk_size=6),
        tools=[wait_for_gate, sign_payment],
        permissions=PermissionRules(allow=("*",)),
        prices={"scripted-web": ModelPrice(input=3.0, output=15.0, cache_read=0.3)},
    )
