"""Reports: JSON that reads back, HTML whose model-written values cannot run, the diff."""

from __future__ import annotations

import io
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from rich.console import Console

from mainspring.errors import ConfigError
from mainspring.evals import (
    Case,
    CaseResult,
    Contains,
    Dataset,
    EvalReport,
    ScoreResult,
    diff_reports,
    evaluate,
    print_report,
    render_html,
)
from tests.evals.agents import Wallet, pay_steps

SCRIPT = "<script>alert('pwned')</script>"


def result(case: str, passed: bool, score: float = 1.0, **kw: object) -> CaseResult:
    scores = [ScoreResult(evaluator="contains", passed=passed, score=score)]
    return CaseResult(case=case, passed=passed, scores=scores, **kw)  # type: ignore[arg-type]  # the test passes fields of every shape


def report(*results: CaseResult, **kw: object) -> EvalReport:
    return EvalReport(dataset="d", results=list(results), **kw)  # type: ignore[arg-type]  # the test passes fields of every shape


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs.extend(attrs)


@pytest.mark.anyio
async def test_a_script_in_an_output_is_inert_in_the_html(tmp_path: Path) -> None:
    hostile = f'{SCRIPT}<img src=x onerror="alert(1)">'
    case = Case(
        name=f"case {SCRIPT}",
        inputs="Pay Alice",
        steps=pay_steps(to=SCRIPT, final=hostile),
        approve="all",
        expect=[Contains(SCRIPT + "missing")],
    )
    run = await evaluate(Dataset(name=SCRIPT, cases=[case]), Wallet().agent())
    page = render_html(run)
    parser = Tags()
    parser.feed(page)
    assert "script" not in parser.tags and "img" not in parser.tags
    assert not any(name.startswith("on") for name, _ in parser.attrs)
    assert "&lt;script&gt;alert(&#x27;pwned&#x27;)&lt;/script&gt;" in page  # shown, as text
    assert "default-src 'none'" in page  # and no script could run anyway
    assert not re.search(r"<(link|iframe|object)\b|src=['\"]?http", page)  # loads nothing


@pytest.mark.anyio
async def test_the_json_reads_back_the_same(tmp_path: Path) -> None:
    run = await evaluate(
        Dataset(
            name="d",
            cases=[
                Case(
                    name="pay",
                    inputs="Pay",
                    steps=pay_steps(),
                    approve="all",
                    metadata={"tag": "x"},
                    expect=[Contains("Paid")],
                )
            ],
        ),
        Wallet().agent(),
        repeat=2,
    )
    path = tmp_path / "r.json"
    run.write(path)
    again = EvalReport.read(path)
    assert again == run
    assert again.results[0].calls[1] == {"name": "pay", "args": {"to": "alice", "amount_usd": 20}}
    assert again.results[0].metadata == {"tag": "x"} and again.total == 2 and again.ok


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not JSON"),
        ('{"results": []}', "dataset: Field required"),
        ('{"dataset": "d", "results": [{"case": "a"}]}', "results.0.passed: Field required"),
        ('{"dataset": "d", "version": 9}', "results version 9"),
    ],
)
def test_a_file_that_is_not_results_says_what_is_wrong(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "r.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(message)) as caught:
        EvalReport.read(path)
    assert str(caught.value).startswith(str(path))


def test_a_missing_results_file() -> None:
    with pytest.raises(ConfigError, match="no such file"):
        EvalReport.read("/nonexistent/r.json")


def test_the_terminal_table_prints_values_as_text_and_the_reasons() -> None:
    out = io.StringIO()
    failing = CaseResult(
        case="[bold]x[/bold]",
        passed=False,
        scores=[ScoreResult(evaluator="contains", passed=False, score=0.0, reason="missing [red]")],
        cost_usd=0.5,
    )
    errored = CaseResult(case="e", passed=False, error="ConfigError: no ledger")
    judged = CaseResult(
        case="j",
        passed=True,
        scores=[ScoreResult(evaluator="judge", passed=True, score=1, cost_usd=0.25, tokens=100)],
    )
    print_report(report(failing, errored, judged), Console(file=out, width=120))
    text = out.getvalue()
    assert "[bold]x[/bold]" in text  # markup in a value is shown, not applied
    assert "FAIL [bold]x[/bold] [rep 0]: contains: missing [red]" in text
    assert "ERROR e [rep 0]: ConfigError: no ledger" in text
    assert "1/3 passed; cases $0.5000; judges $0.2500, 100 tokens" in text


def test_the_diff_finds_flips_score_moves_and_cost() -> None:
    before = report(
        result("kept", True, cost_usd=0.1),
        result("broke", True),
        result("fixed", False, 0.0),
        result("gone", True),
        result("slipped", True, 0.9),
    )
    after = report(
        result("kept", True, cost_usd=0.3),
        result("broke", False, 0.0),
        result("fixed", True),
        result("slipped", True, 0.5),
        result("new", False, 0.0),
    )
    diff = diff_reports(before, after)
    status = {d.case: d.status for d in diff.cases}
    assert status == {
        "kept": "passing",
        "broke": "regressed",
        "fixed": "fixed",
        "gone": "removed",
        "slipped": "passing",
        "new": "new",
    }
    assert [d.case for d in diff.regressions()] == ["broke", "gone"]
    assert [d.case for d in diff.regressions(max_score_drop=0.3)] == ["broke", "gone", "slipped"]
    slipped = next(d for d in diff.cases if d.case == "slipped")
    assert slipped.score_delta == pytest.approx(-0.4)
    assert diff.cost_delta == pytest.approx(0.2)
    assert diff_reports(before, before).regressions() == []


def test_a_case_passes_in_a_diff_only_when_every_repetition_passed() -> None:
    before = report(result("a", True, repetition=0), result("a", True, repetition=1), repeat=2)
    after = report(result("a", True, repetition=0), result("a", False, 0.0, repetition=1), repeat=2)
    [delta] = diff_reports(before, after).cases
    assert delta.status == "regressed" and delta.after_score == 0.5
    assert diff_reports(before, report(result("a", True))).notes == (
        "different repetitions: 2 and 1",
    )
