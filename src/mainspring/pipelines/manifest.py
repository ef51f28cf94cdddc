"""Stage manifests: what a stage's outputs were made from, for ``--resume``.

When a stage finishes, ``output/.mainspring-stage.json`` records a SHA-256 of
every file its context was built from: ``AGENT.md``, ``CONTEXT.md``, the
stage's contract and each input. A stage is stale when an artifact is
missing, the manifest is missing or unreadable, or any of those files now
hashes differently (edited, removed, or refused). Content hashes, not
modification times: a copy or checkout that touches times changes nothing,
an edit that keeps the time still counts.
"""

from __future__ import annotations

import hashlib
import json

from mainspring.pipelines._files import PipelineError, WorkspaceFiles
from mainspring.pipelines.workspace import Stage

__all__ = ["MANIFEST_NAME", "is_stale", "sources", "write_manifest"]

MANIFEST_NAME = ".mainspring-stage.json"
_FORMAT = 1


def sources(stage: Stage) -> tuple[str, ...]:
    """The workspace-relative files a stage's outputs depend on, in context order."""
    return ("AGENT.md", "CONTEXT.md", stage.contract_rel, *(ref.path for ref in stage.inputs))


def _digest(files: WorkspaceFiles, rel: str) -> str | None:
    try:
        data = files.read_bytes(rel)
    except PipelineError:
        return None
    return None if data is None else hashlib.sha256(data).hexdigest()


def _manifest_rel(stage: Stage) -> str:
    return stage.artifact_rel(MANIFEST_NAME)


def write_manifest(files: WorkspaceFiles, stage: Stage) -> None:
    """Record the hashes of the stage's sources next to its artifacts."""
    hashes = {rel: _digest(files, rel) for rel in sources(stage)}
    body = {"format": _FORMAT, "stage": stage.name, "sources": hashes}
    files.write_text(_manifest_rel(stage), json.dumps(body, indent=1, sort_keys=True) + "\n")


def is_stale(files: WorkspaceFiles, stage: Stage) -> bool:
    """Whether ``stage`` must run again (see the module docstring)."""
    if not all(files.is_file(stage.artifact_rel(o.name)) for o in stage.outputs):
        return True
    try:
        raw = files.read_bytes(_manifest_rel(stage))
        recorded = json.loads(raw) if raw is not None else None
    except (PipelineError, ValueError):
        return True
    if not isinstance(recorded, dict) or recorded.get("format") != _FORMAT:
        return True
    hashes = recorded.get("sources")
    if not isinstance(hashes, dict) or set(hashes) != set(sources(stage)):
        return True
    return any(hashes[rel] is None or hashes[rel] != _digest(files, rel) for rel in hashes)
