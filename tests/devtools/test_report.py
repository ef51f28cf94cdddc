"""The telemetry report: session files read back, figures add up, the page is safe."""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from mainspring.cli.commands import app
from mainspring.context.snapshot import CallSnapshot, CostEstimate, Segment, TurnSnapshot
from mainspring.devtools import read_snapshots, render_html, report_data, write_report
from mainspring.errors import TelemetryError
from mainspring.usage import Usage
from tests.strategies import json_values

SOURCES = {
    "system": ("builtin", "system_prompt", "system"),
    "tools": ("builtin", "tool_schemas", "tools"),
    "memory": ("memory", "recall", "first-user"),
    "user": ("transcript", "transcript", "history"),
    "assistant": ("transcript", "transcript", "history"),
    "tool_result": ("transcript", "microcompact", "history"),
}


def _call(step: int, tokens: dict[str, int], *, prefix: int, read: int, usd: float) -> CallSnapshot:
    total = sum(tokens.values())
    segments = tuple(
        Segment(
            source=source,
            module=SOURCES[source][0],
            processor=SOURCES[source][1],
            slot=SOURCES[source][2],
            chars=n * 4,
            tokens=n,
            share=n / total,
        )
        for source, n in tokens.items()
    )
    return CallSnapshot(
        step=step,
        model="anthropic:claude-sonnet-4-5",
        tokenizer="anthropic",
        exact=True,
        segments=segments,
        chars=total * 4,
        tokens=total,
        prefix_tokens=prefix,
        stable_tokens=prefix,
        usage=Usage(
            input_tokens=total - read,
            cache_read_tokens=read,
            output_tokens=120 + step,
            reasoning_tokens=30,
            requests=1,
        ),
        cost=CostEstimate(usd=usd, priced=True, price_source="genai-prices 0.0.40"),
    )


def session() -> list[TurnSnapshot]:
    """Three turns of one session: growing history, a tool round trip, cache reads."""
    base = {"system": 1200, "tools": 800, "memory": 300}
    return [
        TurnSnapshot(
            session_id="sess-1",
            turn_index=0,
            started_at=1_700_000_000.0,
            calls=(_call(1, base | {"user": 40}, prefix=0, read=0, usd=0.0123),),
        ),
        TurnSnapshot(
            session_id="sess-1",
            turn_index=1,
            started_at=1_700_000_060.0,
            calls=(
                _call(1, base | {"user": 90, "assistant": 150}, prefix=2340, read=2000, usd=0.004),
                _call(
                    2,
                    base | {"user": 90, "assistant": 180, "tool_result": 2500},
                    prefix=2540,
                    read=2300,
                    usd=0.0161,
                ),
            ),
        ),
        TurnSnapshot(
            session_id="sess-1",
            turn_index=2,
            started_at=1_700_000_120.0,
            calls=(
                _call(
                    1,
                    base | {"user": 130, "assistant": 400, "tool_result": 2500},
                    prefix=5070,
                    read=5000,
                    usd=0.0052,
                ),
            ),
            meta={"agent": "wallet"},
        ),
    ]


def write_jsonl(path: Path, snapshots: list[TurnSnapshot]) -> Path:
    path.write_text("".join(json.dumps(s.to_dict()) + "\n" for s in snapshots))
    return path


@pytest.fixture
def session_file(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "session.jsonl", session())


def test_a_session_file_reads_back_equal(tmp_path: Path) -> None:
    snaps = session()
    path = tmp_path / "s.jsonl"
    path.write_text("\n" + "\n\n".join(json.dumps(s.to_dict()) for s in snaps) + "\n  \n")
    assert read_snapshots(path) == snaps
    assert read_snapshots(str(path)) == snaps


def test_report_figures_are_the_sums_of_the_segments() -> None:
    snaps = session()
    data = report_data(snaps)
    segments = [g for s in snaps for c in s.calls for g in c.segments]
    calls = [c for s in snaps for c in s.calls]
    tokens = sum(g.tokens for g in segments)
    totals = data["totals"]
    assert data["session_ids"] == ["sess-1"]
    assert (totals["turns"], totals["calls"]) == (3, 4)
    assert totals["tokens"] == tokens == 15_280
    assert totals["chars"] == sum(g.chars for g in segments)
    reads = sum(c.usage.cache_read_tokens for c in calls)
    assert totals["usage"]["cache_read_tokens"] == reads
    assert totals["usage"]["input_tokens"] == tokens - reads
    assert totals["usage"]["output_tokens"] == sum(120 + c.step for c in calls)
    assert totals["usage"]["reasoning_tokens"] == 30 * 4
    assert totals["cache_hit_rate"] == pytest.approx(reads / tokens)
    assert totals["prefix_reuse"] == pytest.approx(sum(c.prefix_tokens for c in calls) / tokens)
    assert totals["cost_usd"] == pytest.approx(0.0123 + 0.004 + 0.0161 + 0.0052)
    assert totals["priced"] and totals["unpriced_calls"] == 0
    assert totals["price_sources"] == ["genai-prices 0.0.40"]

    by_source = {r["source"]: r for r in data["sources"]}
    for name in SOURCES:
        expected = sum(g.tokens for g in segments if g.source == name)
        assert by_source[name]["tokens"] == expected
        assert by_source[name]["share"] == pytest.approx(expected / tokens)
    assert data["sources"][0]["source"] == "tool_result"  # most tokens first
    assert math.fsum(r["share"] for r in data["sources"]) == pytest.approx(1.0)

    turns = data["turns"]
    assert [t["turn_index"] for t in turns] == [0, 1, 2]
    assert [t["calls"] for t in turns] == [1, 2, 1]
    assert turns[1]["tokens"] == sum(c.tokens for c in snaps[1].calls)
    assert turns[1]["by_source"]["tool_result"] == 2500
    assert turns[0]["cache_hit_rate"] == 0.0
    assert turns[2]["prefix_reuse"] == pytest.approx(5070 / snaps[2].tokens)

    modules = {(r["module"], r["processor"]): r for r in data["modules"]}
    assert modules["transcript", "transcript"]["tokens"] == sum(
        g.tokens for g in segments if g.source in ("user", "assistant")
    )
    assert modules["builtin", "system_prompt"]["segments"] == 4
    (model,) = data["models"]
    assert model["calls"] == 4 and model["cost_usd"] == pytest.approx(totals["cost_usd"])
    json.dumps(data, allow_nan=False)  # JSON-ready


def test_unpriced_calls_and_several_sessions_show() -> None:
    snaps = session()
    unpriced = CallSnapshot(
        step=1,
        model="local:llama",
        tokenizer="estimate",
        exact=False,
        segments=(Segment(source="user", module="t", processor="t", slot="h", chars=9, tokens=3),),
        chars=9,
        tokens=3,
        prefix_tokens=0,
        stable_tokens=0,
    )
    snaps.append(TurnSnapshot(session_id="sess-2", turn_index=0, calls=(unpriced,), started_at=1.0))
    data = report_data(snaps)
    assert data["session_ids"] == ["sess-1", "sess-2"]
    assert not data["totals"]["priced"] and data["totals"]["unpriced_calls"] == 1
    assert data["totals"]["price_sources"] == ["genai-prices 0.0.40", "none"]
    assert data["turns"][-1]["cache_hit_rate"] is None
    page = render_html(snaps)
    assert "sess-2" in page and "1 calls unpriced" in page and "local:llama" in page


def test_the_page_shows_the_figures_and_embeds_the_data() -> None:
    snaps = session()
    data = report_data(snaps)
    page = render_html(snaps, title="Wallet run")
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "<title>Wallet run</title>" in page
    assert "15,280" in page  # tokens sent
    assert "$0.0376" in page  # cost, 0.0123 + 0.004 + 0.0161 + 0.0052
    rate = data["totals"]["cache_hit_rate"]
    assert rate is not None and f"{rate * 100:.1f}%" in page
    assert page.count("<svg") == 3 and "<table>" in page
    for name in SOURCES:
        assert name in page
    start = page.index('<script type="application/json" id="report-data">')
    block = page[start:].split(">", 1)[1].split("</script>", 1)[0]
    assert json.loads(block) == json.loads(json.dumps(data))


def test_the_page_fetches_nothing_and_runs_no_script() -> None:
    page = render_html(session())
    assert "http://" not in page and "https://" not in page
    assert "<script" in page and page.count("<script") == 1  # the JSON data block only
    assert "src=" not in page and "@import" not in page and "url(" not in page


def test_outside_text_is_escaped_on_the_page_and_in_the_data() -> None:
    evil = "<script>alert(1)</script>"
    seg = Segment(source=evil, module="m&m", processor='p"q', slot="s", chars=4, tokens=1)
    call = CallSnapshot(
        step=1,
        model="<b>model</b>",
        tokenizer="x",
        exact=False,
        segments=(seg,),
        chars=4,
        tokens=1,
        prefix_tokens=0,
        stable_tokens=0,
    )
    snap = TurnSnapshot(
        session_id="</script><img src=x>", turn_index=0, calls=(call,), started_at=0
    )
    page = render_html([snap], title="<i>t</i>")
    assert evil not in page and "<img" not in page and "<b>" not in page and "<i>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "m&amp;m" in page and "p&quot;q" in page
    assert page.count("</script>") == 1
    block = page.split('id="report-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in block and ">" not in block and "&" not in block
    assert json.loads(block)["sources"][0]["source"] == evil


def test_no_snapshots_renders_a_page_saying_so() -> None:
    page = render_html([])
    assert "No data" in page and page.rstrip().endswith("</html>")
    assert report_data([])["totals"]["tokens"] == 0


def test_write_report_from_a_path_or_snapshots(session_file: Path, tmp_path: Path) -> None:
    out = write_report(session_file, tmp_path / "a.html")
    assert out.read_text(encoding="utf-8") == render_html(session())
    assert write_report(session(), tmp_path / "b.html").read_text(encoding="utf-8") == (
        out.read_text(encoding="utf-8")
    )


def _line_error(tmp_path: Path, lines: list[str]) -> str:
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(TelemetryError) as info:
        read_snapshots(path)
    assert "bad.jsonl" in str(info.value)
    return str(info.value)


def test_malformed_lines_name_the_file_and_line(tmp_path: Path) -> None:
    good = json.dumps(session()[0].to_dict())
    assert "line 3" in _line_error(tmp_path, [good, "", "{not json"])
    assert "line 2" in _line_error(tmp_path, [good, "[1, 2]"])
    newer = session()[0].to_dict() | {"version": 99}
    message = _line_error(tmp_path, [good, good, json.dumps(newer)])
    assert "line 3" in message and "version 99" in message
    missing = session()[0].to_dict()
    del missing["calls"]
    message = _line_error(tmp_path, [json.dumps(missing)])
    assert "line 1" in message and "calls" in message
    wrong = session()[0].to_dict() | {"turn_index": "first"}
    assert "line 1" in _line_error(tmp_path, [json.dumps(wrong)])
    assert "line 1" in _line_error(tmp_path, ['{"version": NaN}'])
    path = tmp_path / "bytes.jsonl"
    path.write_bytes(b"\xff\xfe{}\n")
    with pytest.raises(TelemetryError, match="line 1"):
        read_snapshots(path)


def _mutations(draw: st.DrawFn) -> str:
    data = session()[1].to_dict()
    target: dict[str, object] = draw(
        st.sampled_from([data, data["calls"][0], data["calls"][0]["segments"][0]])
    )
    key = draw(st.sampled_from(sorted(target)))
    if draw(st.booleans()):
        del target[key]
    else:
        target[key] = draw(json_values)
    return json.dumps(data)


lines = st.one_of(
    st.text(max_size=80),
    st.binary(max_size=80),
    json_values.map(json.dumps),
    st.composite(_mutations)(),
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(lines, max_size=4))
def test_reading_arbitrary_lines_only_succeeds_or_raises_telemetry_error(
    tmp_path: Path, chunks: list[str | bytes]
) -> None:
    path = tmp_path / "fuzz.jsonl"
    path.write_bytes(
        b"\n".join(c if isinstance(c, bytes) else c.encode("utf-8", "replace") for c in chunks)
    )
    try:
        snaps = read_snapshots(path)
    except TelemetryError:
        return
    json.dumps(report_data(snaps))
    assert render_html(snaps).rstrip().endswith("</html>")


runner = CliRunner()


def test_cli_writes_the_report(session_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "out" / "r.html"
    out.parent.mkdir()
    result = runner.invoke(app, ["report", str(session_file), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert str(out) in result.output.replace("\n", "")
    page = out.read_text(encoding="utf-8")
    assert "15,280" in page and "$0.0376" in page and "tool_result" in page


def test_cli_defaults_to_report_html_in_the_working_directory(
    session_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["report", str(session_file)])
    assert result.exit_code == 0, result.output
    assert "15,280" in (tmp_path / "report.html").read_text(encoding="utf-8")


def test_cli_fails_cleanly_on_a_missing_or_malformed_file(tmp_path: Path) -> None:
    result = runner.invoke(app, ["report", str(tmp_path / "nope.jsonl")])
    assert result.exit_code == 2
    assert "no such file" in result.output and "Traceback" not in result.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{oops\n")
    result = runner.invoke(app, ["report", str(bad), "-o", str(tmp_path / "r.html")])
    assert result.exit_code == 2  # a file that is not what it should be: a usage error
    assert "line 1" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "r.html").exists()


CHROMIUM = shutil.which("chromium") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None
)
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
]


@pytest.fixture
def chromium() -> Iterator[str]:
    if CHROMIUM is None:
        pytest.skip("needs chromium (apt-get install chromium)")
    yield CHROMIUM


def test_the_page_opens_in_a_browser_without_errors_or_requests(
    chromium: str, session_file: Path, tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright

    out = write_report(session_file, tmp_path / "report.html")
    problems: list[str] = []
    requests: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(out.as_uri())
            page.wait_for_load_state("load")
            text = page.inner_text("body")
            svgs = page.locator("svg").count()
        finally:
            browser.close()
    assert problems == []
    assert [u for u in requests if not u.startswith(("file:", "data:"))] == []
    assert "15,280" in text and "$0.0376" in text and "tool_result" in text
    assert svgs == 3
