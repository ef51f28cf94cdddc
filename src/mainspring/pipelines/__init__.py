"""Folder pipelines: a workspace of markdown stage contracts, run stage by stage.

See :mod:`mainspring.pipelines.workspace` for the folder format,
:mod:`mainspring.pipelines.runner` for how stages run (and
:func:`run_pipeline`, the SDK-style entry point), and
:mod:`mainspring.pipelines.query` for a single run (:func:`query`). Errors in
a workspace raise :class:`PipelineError` (a
:class:`~mainspring.errors.ConfigError`) with ``.path`` and ``.line``.

``Workspace``, the old name of :class:`PipelineWorkspace`, still imports from
here for one release, with a :class:`DeprecationWarning`.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

from mainspring.pipelines.events import (
    ContextLoaded,
    PipelineEvent,
    PipelineHalted,
    StageEvent,
    StageFinished,
    StageOutput,
    StageStart,
)
from mainspring.pipelines.query import QueryApproval, QueryResult, query
from mainspring.pipelines.runner import (
    ApprovalHandler,
    Gate,
    PipelineRunner,
    StageArtifact,
    run_pipeline,
    stage_task,
)
from mainspring.pipelines.scripted import scripted_pipeline_model
from mainspring.pipelines.workspace import (
    DEFAULT_MAX_INPUT_BYTES,
    InputRef,
    OutputRef,
    PipelineError,
    PipelineWorkspace,
    Stage,
    load_workspace,
    parse_contract,
)

__all__ = [
    "DEFAULT_MAX_INPUT_BYTES",
    "ApprovalHandler",
    "ContextLoaded",
    "Gate",
    "InputRef",
    "OutputRef",
    "PipelineError",
    "PipelineEvent",
    "PipelineHalted",
    "PipelineRunner",
    "PipelineWorkspace",
    "QueryApproval",
    "QueryResult",
    "Stage",
    "StageArtifact",
    "StageEvent",
    "StageFinished",
    "StageOutput",
    "StageStart",
    "load_workspace",
    "parse_contract",
    "query",
    "run_pipeline",
    "scripted_pipeline_model",
    "stage_task",
]

if TYPE_CHECKING:
    Workspace = PipelineWorkspace  # the deprecated name, as type checkers see it


def __getattr__(name: str) -> object:
    """``Workspace``: the deprecated name of :class:`PipelineWorkspace` (warns)."""
    if name == "Workspace":
        warnings.warn(
            "mainspring.pipelines.Workspace is deprecated: "
            "use mainspring.pipelines.PipelineWorkspace",
            DeprecationWarning,
            stacklevel=2,
        )
        return PipelineWorkspace
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
