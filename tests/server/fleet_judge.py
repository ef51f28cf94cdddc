"""The judge of the fleet property test: the tools' own effect log, and what clients saw.

Every tool of :mod:`tests.server.fleet_agent` appends a line to the effect
log itself (``read``/``spend``/``sign`` and the ref); the test appends
``approve-sent <ref>`` before it sends an approval. From these lines alone:

- no confirm-tier write runs before its decision;
- every write runs at most once;
- the auto-approved spend of a session (or of a direct caller's account,
  across examples) never exceeds its cap;

and from what the clients saw: every stream read to its end ends with
exactly one terminal event, and no run lost its lease to a live worker.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from tests.server.fleet_agent import SESSION_CAP_USD
from tests.server.fleet_doors import Seen

ACCOUNTS = ("engine:", "mcp:")
"""Refs of writes whose auto spend one account keeps across examples (not a session's)."""
WRITES = ("sign", "spend")


def lines(effects: Path) -> list[str]:
    """The effect log's lines (none before the first write)."""
    return effects.read_text().splitlines() if effects.exists() else []


def runs_of(effects: Path, ref: str) -> int:
    """How many times a write of ``ref`` ran."""
    return sum(1 for line in lines(effects) if line.split()[:2] in ([w, ref] for w in WRITES))


def judge(effects: Path, seen: list[Seen], prefix: str) -> None:
    """The invariants, from the tools' own effect log and what the clients saw.

    The log holds every example's lines (an engine caller's and the MCP
    server's auto spend add up across them); what fails is said of this
    example's writes (refs starting with ``prefix``), so a failure is this
    example's, and hypothesis can shrink it.
    """
    approved: set[str] = set()
    runs: Counter[str] = Counter()
    auto: Counter[str] = Counter()
    for line in lines(effects):
        kind, ref, *rest = line.split()
        session = ref.split(":")[0] if ref.startswith(ACCOUNTS) else ref.rsplit("-", 1)[0]
        ours = ref.startswith(prefix)
        if kind == "approve-sent":
            approved.add(ref)
        elif kind in WRITES:
            runs[ref] += 1
            assert runs[ref] == 1 or not ours, f"the write {ref} ran twice"
            if kind == "sign":
                assert ref in approved or not ours, f"the write {ref} ran before its decision"
            elif ref not in approved:
                auto[session] += int(float(rest[0]))
                spent = auto[session]
                assert spent <= SESSION_CAP_USD or not ours, f"{session} spent ${spent} unasked"
    for one in seen:
        if one.streamed and one.status == 200 and one.ended:
            assert one.terminals == 1 and one.last_is_terminal, f"{one.url}: {one.kinds}"
        # No lease runs out here (they outlive the test) and only dead workers' are dropped:
        # a run that loses its lock was robbed by a live one.
        assert "lease_lost" not in one.last_data, f"{one.url}: {one.last_data}"
