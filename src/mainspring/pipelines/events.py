"""What a pipeline run yields: stage boundaries, context, artifacts, engine events.

One stage's events come in this order::

    stage_start → context_loaded → stage_event* (with stage_output as each
    artifact is written) → stage_complete | pipeline_halted

Each class carries its wire name in ``type``, as the engine's events do.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeAlias

from mainspring.events import Event

__all__ = [
    "ContextLoaded",
    "PipelineEvent",
    "PipelineHalted",
    "StageEvent",
    "StageFinished",
    "StageOutput",
    "StageStart",
]


@dataclass(frozen=True, slots=True)
class StageStart:
    """A stage begins (``index`` counts from 1 among the stages this run covers)."""

    stage: str
    number: int
    index: int
    total: int
    type: Literal["stage_start"] = "stage_start"


@dataclass(frozen=True, slots=True)
class ContextLoaded:
    """A stage's context was built from these files (about ``token_estimate`` tokens)."""

    stage: str
    files: tuple[str, ...]
    token_estimate: int
    type: Literal["context_loaded"] = "context_loaded"


@dataclass(frozen=True, slots=True)
class StageEvent:
    """An engine event from one stage's run."""

    stage: str
    event: Event
    type: Literal["stage_event"] = "stage_event"


@dataclass(frozen=True, slots=True)
class StageOutput:
    """A stage wrote one of its artifacts (``path`` is workspace-relative)."""

    stage: str
    name: str
    path: str
    chars: int
    type: Literal["stage_output"] = "stage_output"


@dataclass(frozen=True, slots=True)
class StageFinished:
    """A stage wrote all its artifacts."""

    stage: str
    artifacts: tuple[Path, ...]
    type: Literal["stage_complete"] = "stage_complete"


@dataclass(frozen=True, slots=True)
class PipelineHalted:
    """The pipeline stopped before ``stage`` finished or after its gate said no."""

    stage: str
    reason: str
    type: Literal["pipeline_halted"] = "pipeline_halted"


PipelineEvent: TypeAlias = (
    StageStart | ContextLoaded | StageEvent | StageOutput | StageFinished | PipelineHalted
)
"""Any event a pipeline run yields."""
