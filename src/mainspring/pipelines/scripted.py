"""An offline model for pipelines: writes plausible artifacts with ``write_artifact``.

It reads the stage name and artifact names from the task message (see
:func:`~mainspring.pipelines.runner.stage_task`), writes each artifact
once, then ends the turn with a short summary. Deterministic, so examples
and tests run without a provider.
"""

from __future__ import annotations

from collections.abc import Sequence

from mainspring.messages import Message
from mainspring.models.base import ToolSpec
from mainspring.models.scripted import ScriptedCall, ScriptedModel, ScriptedResponse

__all__ = ["scripted_pipeline_model"]

_BODIES = {
    "research": "# Research notes\n\n- A finding, with its source.\n- Another, with its source.\n",
    "draft": "# Draft\n\nAn opening that states the point.\n\nA body that argues it.\n",
    "polish": "# Final post\n\nA tightened opening.\n\nA clear, edited body.\n",
}


def _task(messages: Sequence[Message]) -> tuple[str, list[str]]:
    text = next((m.text for m in messages if m.role == "user"), "")
    stage = text.removeprefix("Run stage ").partition(".")[0]
    names = text.rpartition("produce: ")[2].rstrip(".").split(", ")
    return stage, [n for n in names if n]


def _respond(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str | ScriptedResponse:
    stage, names = _task(messages)
    verb = stage.partition("_")[2]
    if any(m.role == "tool" for m in messages) or "write_artifact" not in {t.name for t in tools}:
        return f"Stage {stage} done: wrote {', '.join(names)}."
    body = _BODIES.get(verb, f"# {verb}\n\nOutput of stage {stage}.\n")
    calls = [
        ScriptedCall("write_artifact", {"name": name, "content": body}, id=f"{stage}-{i}")
        for i, name in enumerate(names)
    ]
    return ScriptedResponse(text=f"Writing {', '.join(names)}.", tool_calls=calls)


def scripted_pipeline_model() -> ScriptedModel:
    """A fresh deterministic model that completes any stage offline."""
    return ScriptedModel(_respond, name="scripted-pipeline")
