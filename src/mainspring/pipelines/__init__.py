"""Folder pipelines: a workspace of markdown stage contracts, run stage by stage.

See :mod:`mainspring.pipelines.workspace` for the folder format and
:mod:`mainspring.pipelines.runner` for how stages run. Errors in a workspace
raise :class:`PipelineError` (a :class:`~mainspring.errors.ConfigError`)
with ``.path`` and ``.line``.
"""

from __future__ import annotations

from mainspring.pipelines.runner import (
    ContextLoaded,
    Gate,
    PipelineEvent,
    PipelineHalted,
    PipelineRunner,
    StageEvent,
    StageFinished,
    stage_task,
)
from mainspring.pipelines.scripted import scripted_pipeline_model
from mainspring.pipelines.workspace import (
    InputRef,
    OutputRef,
    PipelineError,
    Stage,
    Workspace,
    load_workspace,
    parse_contract,
)

__all__ = [
    "ContextLoaded",
    "Gate",
    "InputRef",
    "OutputRef",
    "PipelineError",
    "PipelineEvent",
    "PipelineHalted",
    "PipelineRunner",
    "Stage",
    "StageEvent",
    "StageFinished",
    "Workspace",
    "load_workspace",
    "parse_contract",
    "scripted_pipeline_model",
    "stage_task",
]
