"""Datasets from YAML: what loads, and a clear error naming case and field for each mistake."""

from __future__ import annotations

from pathlib import Path

import pytest

from mainspring.evals import (
    Approvals,
    Case,
    Contains,
    Dataset,
    DatasetError,
    LLMJudge,
    MaxCost,
    ToolCalls,
    load_dataset,
)
from mainspring.models import ScriptedResponse

GOOD = """
name: wallet
agent: my_app:agent
evaluators:
  - max_cost_usd: 0.5
cases:
  - name: pay alice
    input: Pay Alice $20
    approve: {pay: approve}
    budget_usd: 1.5
    metadata: {ticket: 42}
    steps:
      - text: Paying.
        calls: [balance, {pay: {to: alice, amount_usd: 20}}]
      - Paid.
    expect:
      - contains: Paid
      - contains: {texts: [paid], ignore_case: true}
      - not_contains: error
      - equals: Paid.
      - regex: "^Pa"
      - json_schema: {type: object}
      - tools: {calls: [balance, {pay: {to: alice}}], mode: in_order, of: ran}
      - approvals: {asked: [pay], blocked: []}
      - stop_reason: end_turn
      - judge: Says it paid.
      - judge: {rubric: Polite., threshold: 0.8}
  - name: two messages
    input: [Hi, Bye]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cases.yaml"
    path.write_text(text)
    return path


def test_a_dataset_loads_from_yaml(tmp_path: Path) -> None:
    dataset = load_dataset(write(tmp_path, GOOD))
    assert dataset.name == "wallet" and dataset.agent == "my_app:agent"
    assert [type(e) for e in dataset.evaluators] == [MaxCost]
    pay, two = dataset.cases
    assert pay.messages == ("Pay Alice $20",) and two.messages == ("Hi", "Bye")
    assert pay.approve == {"pay": "approve"} and two.approve == "none"
    assert pay.budget_usd == 1.5 and pay.metadata == {"ticket": 42}
    assert pay.steps is not None and pay.steps[1] == "Paid."
    first = pay.steps[0]
    assert isinstance(first, ScriptedResponse) and first.text == "Paying."
    assert [(c.name, c.args) for c in first.tool_calls] == [
        ("balance", {}),
        ("pay", {"to": "alice", "amount_usd": 20}),
    ]
    names = [e.name for e in pay.expect]
    assert names == [
        "contains",
        "contains",
        "not_contains",
        "equals",
        "regex",
        "json_schema",
        "tools",
        "approvals",
        "stop_reason",
        "judge",
        "judge",
    ]
    tools = pay.expect[6]
    assert isinstance(tools, ToolCalls) and tools.mode == "in_order" and tools.of == "ran"
    judge = pay.expect[10]
    assert isinstance(judge, LLMJudge) and judge.threshold == 0.8
    assert Dataset.from_yaml(write(tmp_path, GOOD)).name == "wallet"


def test_the_file_name_names_a_dataset_without_one(tmp_path: Path) -> None:
    path = write(tmp_path, "cases: [{name: a, input: hi}]")
    assert load_dataset(path).name == "cases"


CASE = "cases:\n  - name: pay\n    input: Pay Alice\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "a dataset is a mapping with 'cases', not empty"),
        ("- a\n- b\n", "a dataset is a mapping with 'cases', not list"),
        ("name: x\n", "cases: Field required"),
        ("cases: []\n", "cases: List should have at least 1 item"),
        ("cases: [{name: a, input: hi}]\ncolour: red\n", "colour: Extra inputs are not permitted"),
        ("cases:\n  - input: hi\n", "case '#0', name: Field required"),
        ("cases:\n  - name: ''\n    input: hi\n", "case '#0', name: String should have at least 1"),
        ("cases:\n  - name: a\n", "case 'a', input: Field required"),
        (
            "cases:\n  - name: a\n    input: [hi, 3]\n",
            "case 'a', input.1: Input should be a valid string",
        ),
        ("cases:\n  - name: a\n    input: '  '\n", "case 'a', inputs: give one or more non-empty"),
        (CASE + "    expcet: []\n", "case 'pay', expcet: Extra inputs are not permitted"),
        (CASE + "    approve: maybe\n", "case 'pay', approve: Input should be 'all' or 'none'"),
        (
            CASE + "    approve: {pay: yes}\n",
            "case 'pay', approve.pay: Input should be 'approve' or",
        ),
        (CASE + "    budget_usd: -1\n", "case 'pay', budget_usd: Input should be greater than or"),
        (
            CASE + "    expect: [{contains: a, regex: b}]\n",
            "case 'pay', expect.0: a check has exactly one key",
        ),
        (
            CASE + "    expect: [{smells: nice}]\n",
            "case 'pay', expect.0: unknown check 'smells': one of equals, contains",
        ),
        (
            CASE + "    expect: [{regex: '('}]\n",
            "case 'pay', expect.0.regex: regex '(' does not compile",
        ),
        (
            CASE + "    expect: [{json_schema: {type: nope}}]\n",
            "case 'pay', expect.0.json_schema: not a valid JSON schema",
        ),
        (
            CASE + "    expect: [{tools: {calls: [a], mode: sometimes}}]\n",
            "case 'pay', expect.0.tools.mode: Input should be 'exact', 'in_order' or 'subset'",
        ),
        (CASE + "    expect: [{tools: {calls: [{a: 1}]}}]\n", "case 'pay', expect.0.tools.calls.0"),
        (
            CASE + "    expect: [{approvals: {asked: pay}}]\n",
            "case 'pay', expect.0.approvals.asked: Input should be a valid list",
        ),
        (
            CASE + "    expect: [{approvals: {}}]\n",
            "case 'pay', expect.0.approvals: Approvals checks nothing",
        ),
        (
            CASE + "    expect: [{stop_reason: done}]\n",
            "case 'pay', expect.0.stop_reason: Input should be",
        ),
        (
            CASE + "    expect: [{max_cost_usd: -2}]\n",
            "case 'pay', expect.0.max_cost_usd: Input should be greater",
        ),
        (
            CASE + "    expect: [{judge: ''}]\n",
            "case 'pay', expect.0.judge: an LLM judge needs a rubric",
        ),
        (
            CASE + "    steps: [{calls: [{a: {}, b: {}}]}]\n",
            "case 'pay', steps: a call is {tool: {args}} with one tool",
        ),
        (
            CASE + "    steps: [{say: hi}]\n",
            "case 'pay', steps.0.say: Extra inputs are not permitted",
        ),
        (CASE + "  - name: pay\n    input: again\n", "case 'pay', name: two cases have this name"),
        (
            "evaluators: [{regex: '['}]\ncases: [{name: a, input: b}]\n",
            "evaluators.0.regex: regex '[' does not compile",
        ),
        ("cases: [{name: a, input: b}\n", "not valid YAML at line 2, column 1"),
    ],
)
def test_every_mistake_names_the_case_and_the_field(
    tmp_path: Path, text: str, message: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(DatasetError) as caught:
        load_dataset(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert message in str(caught.value)


def test_the_error_carries_its_parts(tmp_path: Path) -> None:
    with pytest.raises(DatasetError) as caught:
        load_dataset(write(tmp_path, CASE + "    approve: maybe\n"))
    error = caught.value
    assert (error.case, error.field) == ("pay", "approve")
    assert error.source == str(tmp_path / "cases.yaml")


def test_a_missing_or_unreadable_file_is_a_dataset_error(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="no such file"):
        load_dataset(tmp_path / "nope.yaml")
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(DatasetError, match="cannot read it"):
        load_dataset(binary)


def test_cases_built_in_python_are_checked_too() -> None:
    with pytest.raises(DatasetError, match="python: case 'a', inputs: give one or more"):
        Case(name="a", inputs=[])
    with pytest.raises(DatasetError, match="a case needs a name"):
        Case(name=" ", inputs="x")
    with pytest.raises(DatasetError, match=r"approve.pay: 'pay' must be 'approve' or 'reject'"):
        Case(name="a", inputs="x", approve={"pay": "sure"})  # type: ignore[dict-item]  # the bad input under test
    with pytest.raises(DatasetError, match="approve: is 'all', 'none'"):
        Case(name="a", inputs="x", approve="some")  # type: ignore[arg-type]  # the bad input under test
    with pytest.raises(DatasetError, match="budget_usd: must be a non-negative"):
        Case(name="a", inputs="x", budget_usd=-1)
    with pytest.raises(DatasetError, match="case 'a': two cases have this name"):
        Dataset(cases=[Case(name="a", inputs="x"), Case(name="a", inputs="y")])
    case = Case(name="a", inputs="x", expect=[Contains("x"), Approvals(asked=[])])
    assert Dataset(cases=[case]).cases == [case]
