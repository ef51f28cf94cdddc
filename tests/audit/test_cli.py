"""`mainspring audit verify|export|head`: CI exit codes, and exports valid against the schema."""

from __future__ import annotations

import json
import sqlite3
from importlib import resources
from pathlib import Path

import anyio
import jsonschema
import pytest
from typer.testing import CliRunner

from mainspring.audit import AuditLog, public_key_text
from mainspring.cli import app
from mainspring.engine.signing import SigningKey
from mainspring.stores.sqlite_audit import SQLiteAuditStore

runner = CliRunner()
KEY = SigningKey.generate("audit-1")
PUBLIC = public_key_text(KEY.public_key)


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "agent.db"

    async def fill() -> None:
        store = await SQLiteAuditStore.open(path)
        try:
            log = AuditLog(store, KEY, policy_version="2026-12")
            for i in range(6):
                await log.append(
                    "auto_executed" if i % 2 else "approved",
                    outcome="ok",
                    session_id="s1",
                    principal="user:ann",
                    tool="pay",
                    args_hash=f"{i:064x}",
                    amount_usd=12.5 * i,
                    detail="ünïcode" if i == 3 else None,
                )
        finally:
            await store.aclose()

    anyio.run(fill)
    return path


def verify(path: Path, *extra: str) -> tuple[int, str]:
    result = runner.invoke(
        app, ["audit", "verify", "--store", f"sqlite:///{path}", "--public-key", PUBLIC, *extra]
    )
    return result.exit_code, result.output


def sql(path: Path, statement: str) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(statement)


def test_an_intact_log_exits_0(database: Path) -> None:
    code, out = verify(database)
    assert code == 0 and out.startswith("ok: 6 entries")
    code, _ = verify(database, "--public-key", f"other={PUBLIC}")  # extra trusted keys are fine
    assert code == 0


@pytest.mark.parametrize(
    ("statement", "first_bad"),
    [
        ("UPDATE mainspring_audit SET entry = replace(entry, '37.5', '3.75') WHERE seq = 4", 4),
        ("DELETE FROM mainspring_audit WHERE seq = 3", 3),
        ("DELETE FROM mainspring_audit WHERE seq >= 5", 5),
        ("DELETE FROM mainspring_audit_head", 6),
        ("UPDATE mainspring_audit SET seq = seq + 100 WHERE seq = 2", 2),
        (
            "UPDATE mainspring_audit SET entry = (SELECT entry FROM mainspring_audit WHERE seq = 1)"
            " WHERE seq = 2",
            2,
        ),
    ],
)
def test_tampering_exits_1_with_the_first_bad_seq(
    database: Path, statement: str, first_bad: int
) -> None:
    sql(database, statement)
    code, out = verify(database)
    assert code == 1
    assert out.startswith(f"tampered: first bad seq {first_bad}:"), out


def test_a_head_trusted_under_another_key_id_is_tampered(database: Path) -> None:
    other = public_key_text(SigningKey.generate("x").public_key)
    code, out = verify_only(database, f"audit-1={other}")
    assert code == 1 and "signature" in out


def verify_only(path: Path, key: str) -> tuple[int, str]:
    result = runner.invoke(
        app, ["audit", "verify", "--store", f"sqlite:///{path}", "--public-key", key]
    )
    return result.exit_code, result.output


def test_usage_errors_exit_2(database: Path, tmp_path: Path) -> None:
    assert verify_only(database, "not-a-key")[0] == 2
    no_key = runner.invoke(app, ["audit", "verify", "--store", f"sqlite:///{database}"])
    assert no_key.exit_code == 2
    assert verify(database, "--anchor", "six:abc")[0] == 2
    missing = runner.invoke(
        app, ["audit", "verify", "--store", f"sqlite:///{tmp_path}/none.db", "--public-key", PUBLIC]
    )
    assert missing.exit_code == 2 and not (tmp_path / "none.db").exists()
    unknown = runner.invoke(app, ["audit", "export", "--store", "ftp://x"])
    assert unknown.exit_code == 2


def test_a_rolled_back_log_passes_alone_and_fails_against_an_anchor(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    url = f"sqlite:///{path}"

    async def append(n: int) -> None:
        store = await SQLiteAuditStore.open(path)
        try:
            log = AuditLog(store, KEY)
            for _ in range(n):
                await log.append("approved", outcome="approved")
        finally:
            await store.aclose()

    anyio.run(append, 4)
    with sqlite3.connect(path) as conn:
        (old_head,) = conn.execute("SELECT head FROM mainspring_audit_head").fetchone()
    anyio.run(append, 2)
    head = json.loads(runner.invoke(app, ["audit", "head", "--store", url]).output)
    anchor = f"{head['seq']}:{head['hash']}"
    assert verify(path, "--anchor", anchor)[0] == 0
    with sqlite3.connect(path) as conn:  # rolled back: the last entries and the old head
        conn.execute("DELETE FROM mainspring_audit WHERE seq > 4")
        conn.execute("UPDATE mainspring_audit_head SET head = ?", (old_head,))
    assert verify(path)[0] == 0  # consistent, as it was before: only an anchor shows it
    code, out = verify(path, "--anchor", anchor)
    assert code == 1 and out.startswith("tampered: first bad seq 5: the log ends before")


def test_export_writes_every_entry_valid_against_the_published_schema(database: Path) -> None:
    schema = json.loads(resources.files("mainspring.audit").joinpath("schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    result = runner.invoke(app, ["audit", "export", "--store", f"sqlite:///{database}"])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert len(lines) == 6
    for line in lines:
        jsonschema.validate(json.loads(line), schema, cls=jsonschema.Draft202012Validator)
    assert [json.loads(line)["seq"] for line in lines] == [1, 2, 3, 4, 5, 6]
    later = runner.invoke(
        app, ["audit", "export", "--store", f"sqlite:///{database}", "--after", "4"]
    )
    assert [json.loads(line)["seq"] for line in later.output.splitlines()] == [5, 6]


def test_the_schema_refuses_what_is_not_an_entry(database: Path) -> None:
    schema = json.loads(resources.files("mainspring.audit").joinpath("schema.json").read_text())
    line = runner.invoke(app, ["audit", "export", "--store", f"sqlite:///{database}"]).output
    entry = json.loads(line.splitlines()[0])
    for bad in ({**entry, "seq": 0}, {**entry, "hash": "x"}, {**entry, "extra": 1}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema, cls=jsonschema.Draft202012Validator)
    assert "kind" in schema["required"]
    jsonschema.validate({**entry, "kind": "expired"}, schema)  # an open set of kinds
