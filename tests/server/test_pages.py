"""The chat page and the trace inspector in a real browser (Playwright driving chromium).

A real uvicorn serves the app on loopback; Debian's chromium loads the pages
from it. Screenshots of each page at desktop and phone width go to
``tests/artifacts/`` (not committed).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mainspring.demo import demo_agent
from mainspring.server import ServerConfig, create_app
from tests.server.servers import serving
from tests.server.web_agent import CANVAS_HTML, CODE, PART_ONE, PART_TWO, web_agent

pytestmark = pytest.mark.slow

try:
    from playwright import sync_api
except ImportError:  # pragma: no cover - it is in the test extra
    pytest.skip('needs playwright: pip install -e ".[test]"', allow_module_level=True)

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
KEY = "page-test-key-0123456789"
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
WAIT = 20_000  # ms: a bound on each wait, not a timed assertion
AXE = Path(__file__).resolve().parent / "vendor" / "axe.min.js"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.skip("needs chromium (apt-get install chromium)")
    # Playwright gives each launch a fresh temporary profile of its own.
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS, timeout=WAIT)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="module")
def demo_url() -> Iterator[str]:
    app = create_app(demo_agent(), ServerConfig(api_keys={KEY: "alice"}))
    with serving(app) as url:
        yield url


@pytest.fixture(scope="module")
def gate() -> threading.Event:
    return threading.Event()


@pytest.fixture(scope="module")
def web_url(gate: threading.Event) -> Iterator[str]:
    app = create_app(web_agent(gate), ServerConfig(api_keys={KEY: "alice"}))
    with serving(app) as url:
        yield url


class Page:
    """A browser tab that records console errors and page errors."""

    def __init__(
        self, browser: Any, *, viewport: dict[str, int] = DESKTOP, bypass_csp: bool = False
    ) -> None:
        # bypass_csp: only for the accessibility check, which injects axe-core.
        self.context = browser.new_context(viewport=viewport, bypass_csp=bypass_csp)
        self.page = self.context.new_page()
        self.page.set_default_timeout(WAIT)
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def tab(browser: Any) -> Iterator[Page]:
    tab = Page(browser)
    yield tab
    errors = list(tab.errors)
    tab.close()
    assert errors == [], f"console errors: {errors}"


def client(url: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}, timeout=20)


def send(page: Any, text: str) -> None:
    page.get_by_label("Message").fill(text)
    page.get_by_label("Message").press("Enter")


def screenshot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def fits_the_width(page: Any) -> bool:
    """Nothing sticks out sideways (wide tables scroll in their own region)."""
    fits: bool = page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    return fits


def stored_log(page: Any) -> dict[str, Any]:
    state: dict[str, Any] = json.loads(page.evaluate("sessionStorage.getItem('mainspring.chat')"))
    return state


def server_events(url: str, session_id: str, stream_id: str) -> list[dict[str, Any]]:
    with (
        client(url) as http,
        http.stream(
            "GET", f"/v1/sessions/{session_id}/stream", params={"stream_id": stream_id}
        ) as response,
    ):
        assert response.status_code == 200
        return [json.loads(line[5:]) for line in response.iter_lines() if line.startswith("data:")]


# ---------------------------------------------------------------- the chat page


def test_the_page_asks_for_a_key_and_the_api_refuses_without_one(tab: Page, demo_url: str) -> None:
    page = tab.page
    response = page.goto(demo_url + "/")
    assert response is not None and response.status == 200
    assert "script-src 'self'" in response.headers["content-security-policy"]
    key_box = page.get_by_label("API key for this server")
    assert key_box.is_visible()
    assert httpx.post(demo_url + "/v1/sessions", json={}).status_code == 401
    assert httpx.get(demo_url + "/v1/trace/runs").status_code == 401
    key_box.fill(KEY)
    key_box.press("Enter")
    key_box.wait_for(state="hidden")
    assert page.evaluate("sessionStorage.getItem('mainspring.key')") == KEY


def test_a_message_streams_its_answer(tab: Page, demo_url: str) -> None:
    page = tab.page
    page.goto(f"{demo_url}/?key={KEY}")
    assert "key=" not in page.url  # the key left the address bar for the tab's storage
    hostile = "<img src=x onerror=alert(1)> hello"
    send(page, hostile)
    page.locator(".turn-end[data-stop='end_turn']").wait_for()
    answer = page.locator(".msg.assistant .text").last.inner_text()
    assert answer == "I can check your balance or pay a contact, e.g. 'pay Bob $5'."
    assert page.locator(".msg.user").last.inner_text().endswith(hostile)  # text, not markup
    assert page.locator("img").count() == 0
    screenshot(page, "chat-desktop")
    page.set_viewport_size(PHONE)
    assert fits_the_width(page)
    screenshot(page, "chat-phone")
    page.get_by_label("Theme").select_option("dark")
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    screenshot(page, "chat-phone-dark")
    page.reload()
    assert page.get_by_label("Theme").input_value() == "dark"  # remembered
    page.get_by_label("Theme").select_option("system")  # back to the system's
    assert page.evaluate("document.documentElement.dataset.theme") is None
    assert page.evaluate("localStorage.getItem('mainspring.theme')") is None


def test_approve_with_an_edit_runs_the_tool_with_the_edited_value(tab: Page, demo_url: str) -> None:
    page = tab.page
    page.goto(f"{demo_url}/?key={KEY}")
    send(page, "Please pay Alice $120 for the concert tickets.")
    card = page.locator("section.card[data-tool='send_payment']")
    card.wait_for()
    # the reason, and inputs for exactly the modifiable fields
    assert "auto-approve limit" in card.locator(".reason").inner_text()
    assert "financial · confirm" in card.get_by_role("list", name="Guard findings").inner_text()
    assert card.get_by_label("amount_usd").input_value() == "120"
    assert card.get_by_label("memo").input_value() == "concert tickets"
    assert card.locator("input[name='to_account']").count() == 0
    assert card.locator("dd[data-field='to_account']").inner_text() == "acct_alice_01"
    assert page.locator(".tool[data-tool='get_balance'] .result").inner_text().startswith("→")
    # the balance read reported 50%; done, its bar shows the end, not where it stopped
    bar = page.locator(".tool[data-tool='get_balance'] progress")
    assert bar.evaluate("(p) => [p.value, p.max]") == [100, 100]
    screenshot(page, "card-desktop")
    page.set_viewport_size(PHONE)
    assert fits_the_width(page)
    screenshot(page, "card-phone")
    page.set_viewport_size(DESKTOP)
    card.get_by_label("amount_usd").fill("45")
    card.get_by_role("button", name="Approve").click()
    page.locator(".turn-end[data-stop='end_turn']").wait_for()
    result = page.locator(".tool[data-tool='send_payment'] .result").inner_text()
    note, _, output = result.removeprefix("→ ").partition("]\n\n")  # what ran, then the output
    assert note.startswith("[the approver edited the arguments")
    assert json.loads(output)["amount_usd"] == 45
    assert "Done: $45.00 is on its way." in page.locator(".msg.assistant").last.inner_text()


def test_reject_and_a_card_left_open_survives_a_reload(tab: Page, demo_url: str) -> None:
    page = tab.page
    page.goto(f"{demo_url}/?key={KEY}")
    send(page, "pay Bob $30")
    page.locator("section.card[data-tool='send_payment']").wait_for()
    page.reload()
    card = page.locator("section.card[data-tool='send_payment']:not(.decided)")
    card.wait_for()
    assert card.get_by_label("amount_usd").input_value() == "30"
    card.get_by_label("Reason").fill("not today")
    page.keyboard.press("Tab")  # from the reason to Reject, by keyboard
    assert page.evaluate("document.activeElement.textContent") == "Reject"
    page.keyboard.press("Enter")
    page.locator(".turn-end[data-stop='end_turn']").wait_for()
    text = page.locator(".msg.assistant").last.inner_text()
    assert "The payment did not go through" in text and "not today" in text
    assert page.locator(".tool[data-tool='send_payment'].error").count() == 1


# ------------------------------------------------------- client tool, canvas, resume


def test_a_client_executed_tool_runs_in_the_browser(tab: Page, web_url: str) -> None:
    page = tab.page
    page.goto(f"{web_url}/?key={KEY}")
    send(page, "sign $5 to bob")
    card = page.locator("section.card[data-tool='sign_payment']")
    card.wait_for()
    # what the browser signs is what the model asked: a client result carries no edits
    assert card.locator("dd[data-field='amount_usd']").inner_text() == "5"
    assert card.locator("input[name='amount_usd']").count() == 0
    card.get_by_role("button", name="Run sign_payment here").click()
    page.locator(".turn-end[data-stop='end_turn']").wait_for()
    signed = json.dumps({"amount_usd": 5, "to_account": "acct_bob"}, separators=(",", ":"))
    digest = hashlib.sha256(signed.encode()).hexdigest()
    reported = json.loads(page.locator(".tool[data-tool='sign_payment'] .result").inner_text()[2:])
    assert reported == {"signed": True, "by": "browser", "signature": digest}
    assert digest in page.locator(".msg.assistant").last.inner_text()


def test_a_reload_mid_stream_loses_and_doubles_nothing(
    tab: Page, web_url: str, gate: threading.Event
) -> None:
    page = tab.page
    gate.clear()
    page.goto(f"{web_url}/?key={KEY}")
    send(page, "tell a story")
    page.locator(".tool[data-tool='wait_for_gate']").wait_for()  # the run waits on the gate
    frame = page.locator(".canvas iframe")
    assert frame.get_attribute("sandbox") == ""  # no scripts, no same origin
    assert page.frame_locator(".canvas iframe").locator("h2").inner_text() == "Ledger"
    before = stored_log(page)
    assert before["last"]["done"] is False
    page.reload()
    page.locator(".tool[data-tool='wait_for_gate']").wait_for()
    # As if the tab had reloaded before the stream's first event reached it: the
    # page finds the session's running stream and follows it from its start.
    page.evaluate(
        """() => {
        const s = JSON.parse(sessionStorage.getItem('mainspring.chat'));
        s.log = s.log.filter((e) => !e.id);
        s.last = null;
        sessionStorage.setItem('mainspring.chat', JSON.stringify(s));
    }"""
    )
    page.reload()
    page.locator(".tool[data-tool='wait_for_gate']").wait_for()
    assert page.locator(".msg.assistant .text").all_inner_texts() == [PART_ONE.strip()]
    gate.set()
    page.locator(".turn-end[data-stop='end_turn']").wait_for()
    texts = page.locator(".msg.assistant .text").all_inner_texts()
    assert " ".join(texts) == PART_ONE + PART_TWO  # two paragraphs, either side of the tool
    thinking = page.locator("details.thinking").all_text_contents()
    assert thinking == ["ThinkingA short story, in two parts."]  # its summary, then the text
    assert page.locator(".canvas iframe").count() == 1
    assert CANVAS_HTML in (page.locator(".canvas iframe").get_attribute("srcdoc") or "")
    state = stored_log(page)
    stream = state["last"]["stream"]
    positions = [int(e["id"].rpartition(":")[2]) for e in state["log"] if e.get("id")]
    assert positions == list(range(len(positions)))  # none lost, none twice
    served = server_events(web_url, state["session"], stream)
    assert [e["ev"] for e in state["log"] if e.get("id")] == served


# ------------------------------------------- markdown, stop, queue, scroll, a11y


def test_a_markdown_reply_renders_a_table_list_and_code_and_runs_no_script(
    browser: Any, web_url: str
) -> None:
    tab = Page(browser)
    tab.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page = tab.page
    try:
        page.goto(f"{web_url}/?key={KEY}")
        send(page, "show markdown")
        page.locator(".turn-end[data-stop='end_turn']").wait_for()
        reply = page.locator(".msg.assistant").last
        # a GFM table, rendered from a streamed reply (chunks of 6 characters)
        rows = reply.locator("table tr").all_inner_texts()
        assert [r.split("\t") for r in rows] == [
            ["account", "balance"],
            ["alice", "120"],
            ["bob", "30"],
        ]
        assert reply.locator("strong").inner_text() == "ledger"
        assert reply.locator("ul li").all_inner_texts() == ["first item", "second item"]
        assert reply.locator("pre code").inner_text().rstrip("\n") == CODE
        # nothing hostile ran or survived as markup
        assert page.evaluate("window.pwned") is None
        assert reply.locator("script, img, [onerror]").count() == 0
        assert "<script>" in reply.inner_text()  # shown as text, harmless
        assert reply.get_by_role("link", name="click me").count() == 0  # no javascript: link
        docs = reply.get_by_role("link", name="docs")
        assert docs.get_attribute("href") == "https://example.org/docs"
        assert docs.get_attribute("rel") == "noopener noreferrer"
        # the copy button copies the code exactly
        reply.get_by_role("button", name="Copy code").click()
        reply.get_by_role("button", name="Copy code").filter(has_text="Copied").wait_for()
        assert page.evaluate("navigator.clipboard.readText()") == CODE + "\n"
        screenshot(page, "chat-markdown-desktop")
        page.set_viewport_size(PHONE)
        assert fits_the_width(page)  # the table scrolls in its own region
        screenshot(page, "chat-markdown-phone")
        # a reload draws the same rendering from the tab's log
        page.reload()
        page.locator(".msg.assistant table").wait_for()
        assert page.locator(".msg.assistant pre code").inner_text().rstrip("\n") == CODE
        assert tab.errors == []
    finally:
        tab.close()


def test_stop_cancels_the_running_turn(tab: Page, web_url: str, gate: threading.Event) -> None:
    page = tab.page
    gate.clear()
    page.goto(f"{web_url}/?key={KEY}")
    send(page, "tell a story")
    page.locator(".tool[data-tool='wait_for_gate']").wait_for()  # the turn waits on the gate
    page.get_by_role("button", name="Stop").click()
    page.locator(".turn-end[data-stop='cancelled']").wait_for()
    assert page.get_by_role("button", name="Stop").is_hidden()
    # the page is free again: the next message goes through
    send(page, "hello")
    page.locator(".turn-end[data-stop='end_turn']").wait_for()
    assert "Say 'sign $5 to bob'" in page.locator(".msg.assistant .text").last.inner_text()


def test_a_message_typed_while_busy_is_queued_and_sent_when_the_turn_ends(
    tab: Page, web_url: str, gate: threading.Event
) -> None:
    page = tab.page
    gate.clear()
    page.goto(f"{web_url}/?key={KEY}")
    send(page, "tell a story")
    page.locator(".tool[data-tool='wait_for_gate']").wait_for()
    send(page, "sign $7 to carol")
    queued = page.locator("#queue .msg.queued")
    assert queued.inner_text() == "Queued sign $7 to carol"
    assert page.get_by_label("Message").input_value() == ""
    assert "sent when this turn ends" in page.locator("#composer-note").inner_text()
    assert stored_log(page)["queue"] == ["sign $7 to carol"]  # survives a reload
    screenshot(page, "chat-queued")
    gate.set()
    # the story ends, then the queued message goes: its card comes up
    page.locator("section.card[data-tool='sign_payment']").wait_for()
    assert queued.count() == 0
    users = page.locator("#transcript .msg.user").all_inner_texts()
    assert [u.removeprefix("You:").strip() for u in users] == ["tell a story", "sign $7 to carol"]
    assert page.locator(".turn-end[data-stop='end_turn']").count() == 1  # the story's
    assert stored_log(page)["queue"] == []


def test_a_message_while_an_approval_waits_explains_in_plain_words(
    tab: Page, demo_url: str
) -> None:
    page = tab.page
    page.goto(f"{demo_url}/?key={KEY}")
    send(page, "pay Bob $30")
    page.locator("section.card[data-tool='send_payment']").wait_for()
    users = page.locator("#transcript .msg.user").count()
    send(page, "what is my balance?")
    note = page.locator("#composer-note")
    assert note.inner_text() == (
        "An action above is waiting for your decision. Approve or reject it first,"
        " then send your message."
    )
    assert page.get_by_label("Message").input_value() == "what is my balance?"  # kept
    assert page.locator("#transcript .msg.user").count() == users  # nothing sent
    screenshot(page, "chat-approval-waiting")
    # And when the page did not know (the card hidden from it), the server's
    # refusal reads the same: no raw engine error, no bubble left as if sent.
    page.evaluate("document.querySelector('section.card').classList.add('decided')")
    page.get_by_label("Message").press("Enter")
    page.locator("#transcript .msg.user").nth(users).wait_for(state="detached")
    assert "resume()" not in page.locator("body").inner_text()
    assert note.inner_text().startswith("An action above is waiting for your decision.")
    assert page.get_by_label("Message").input_value() == "what is my balance?"
    assert page.locator("#status").inner_text() == ""
    # the browser logs the refused request itself; that refusal is what this tests
    tab.errors[:] = [e for e in tab.errors if "409 (Conflict)" not in e]


def test_scrolling_up_while_a_reply_streams_is_not_yanked_back(
    tab: Page, web_url: str, gate: threading.Event
) -> None:
    page = tab.page
    gate.clear()
    page.goto(f"{web_url}/?key={KEY}")
    send(page, "long story")
    page.locator(".tool[data-tool='wait_for_gate']").wait_for()
    page.wait_for_function(
        "() => window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 48"
    )
    page.mouse.wheel(0, -2000)  # the reader scrolls up to read
    page.wait_for_function(
        "() => window.scrollY < document.documentElement.scrollHeight - 2 * window.innerHeight"
    )
    where = page.evaluate("window.scrollY")
    gate.set()
    page.locator(".turn-end[data-stop='end_turn']").wait_for()
    jump = page.get_by_role("button", name="Jump to latest")
    jump.wait_for()  # new text came below: offered, not forced
    screenshot(page, "chat-jump-to-latest")
    assert page.evaluate("window.scrollY") == where
    jump.click()
    page.wait_for_function(
        "() => window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 48"
    )
    assert jump.is_hidden()


def test_the_live_region_announces_a_finished_reply_once(tab: Page, web_url: str) -> None:
    page = tab.page
    page.goto(f"{web_url}/?key={KEY}")
    page.evaluate(
        """() => {
        window.heard = [];
        const region = document.getElementById('announce');
        new MutationObserver(() => window.heard.push(region.textContent))
            .observe(region, { childList: true, characterData: true, subtree: true });
    }"""
    )
    send(page, "hello")
    page.locator(".turn-end[data-stop='end_turn']").wait_for()
    heard = page.evaluate("window.heard")
    assert heard == ["Assistant replied: Say 'sign $5 to bob' or 'tell a story'."]
    assert page.locator("#transcript").get_attribute("aria-live") is None


def axe_violations(page: Any) -> list[tuple[str, str, list[Any]]]:
    """What axe-core (vendored for the tests) finds on the page, of any impact."""
    page.add_script_tag(path=str(AXE))
    result = page.evaluate("axe.run(document, { resultTypes: ['violations'] })")
    return [(v["id"], v["impact"], [n["target"] for n in v["nodes"]]) for v in result["violations"]]


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_axe_finds_no_violation_on_the_chat_page(
    browser: Any, demo_url: str, web_url: str, theme: str
) -> None:
    tab = Page(browser, bypass_csp=True)  # to inject axe-core; the app's CSP is tested above
    page = tab.page
    try:
        page.goto(f"{demo_url}/?key={KEY}")
        page.get_by_label("Theme").select_option(theme)
        send(page, "Please pay Alice $120 for the concert tickets.")
        page.locator("section.card[data-tool='send_payment']").wait_for()
        send(page, "hello")  # the plain explanation by the composer
        page.locator("#composer-note").filter(has_text="waiting for your decision").wait_for()
        assert axe_violations(page) == []
        # a Markdown reply: its table region, code block and copy button
        page.goto(f"{web_url}/?key={KEY}")
        send(page, "show markdown")
        page.locator(".turn-end[data-stop='end_turn']").wait_for()
        assert axe_violations(page) == []
    finally:
        tab.close()


# ---------------------------------------------------------------- the trace page


def test_the_trace_page_shows_the_figures_of_the_run_just_made(
    tab: Page, browser: Any, web_url: str, gate: threading.Event
) -> None:
    gate.set()
    page = tab.page
    page.goto(f"{web_url}/?key={KEY}")
    send(page, "tell a story")
    page.locator(".turn-end[data-stop='end_turn']").wait_for()
    with client(web_url) as http:
        newest = http.get("/v1/trace/runs").json()["runs"][0]
        detail = http.get(f"/v1/trace/runs/{newest['run_id']}").json()
    page.get_by_role("link", name="Trace").click()  # this conversation's runs
    page.wait_for_url(f"**/trace?q={newest['session_id']}")
    page.locator(f"button[data-run='{newest['run_id']}'][aria-current='true']").wait_for()
    page.locator("section.call").first.wait_for()
    calls = detail["calls"]
    assert len(calls) == 2 and page.locator("section.call").count() == 2
    for call in calls:
        section = page.locator(f"section.call[data-call='{call['index']}']")

        def figure(name: str, section: Any = section) -> str:
            text: str = section.locator(f"dd[data-field='{name}']").inner_text()
            return text

        assert figure("tokens") == f"{call['tokens']:,}"
        assert figure("stable_tokens") == f"{call['stable_tokens']:,}"
        assert figure("cache_read_tokens") == f"{call['cache_read_tokens']:,}"
        assert figure("cache_write_tokens") == f"{call['cache_write_tokens']:,}"
        assert figure("cache_hit_rate") == f"{100 * call['cache_hit_rate']:.1f}%"
        assert figure("prefix_reuse") == f"{100 * call['prefix_reuse']:.1f}%"
        assert figure("cost_usd") == f"${call['cost_usd']:.6f}"
    assert calls[0]["cache_read_tokens"] == 60 and calls[1]["cache_hit_rate"] == pytest.approx(
        90 / 105
    )
    assert calls[1]["prefix_reuse"] > 0  # the second call re-sent the first one's prefix
    assert page.locator("td", has_text="wait_for_gate").count() >= 2  # start and result
    screenshot(page, "trace-desktop")
    page.set_viewport_size(PHONE)
    assert fits_the_width(page)
    screenshot(page, "trace-phone")
    page.get_by_label("Theme").select_option("dark")
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    screenshot(page, "trace-phone-dark")
    page.get_by_label("Theme").select_option("system")  # back to the system's, as on the chat page
    assert page.evaluate("document.documentElement.dataset.theme") is None
    assert page.evaluate("localStorage.getItem('mainspring.theme')") is None
    # the search narrows the rail; the exports download
    page.get_by_label("Search runs").fill("no-such-run-anywhere")
    page.locator("#rail-status", has_text="0 runs").wait_for()
    page.get_by_label("Search runs").fill(newest["session_id"][:8])
    page.locator(f"button[data-run='{newest['run_id']}']").wait_for()
    with page.expect_download() as download:
        page.get_by_role("button", name="Export JSON").click()
    exported = json.loads(Path(download.value.path()).read_text())
    assert exported["calls"] == calls
    with page.expect_download() as download:
        page.get_by_role("button", name="Export HTML report").click()
    assert "<svg" in Path(download.value.path()).read_text()
