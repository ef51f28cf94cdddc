"""Models: one streaming protocol, an offline scripted model, provider adapters."""

from mainspring.models.base import (
    Model,
    ModelEvent,
    ModelRequest,
    ModelSettings,
    ModelStop,
    ModelUsage,
    SystemBlock,
    ToolCallEnd,
    ToolSpec,
)
from mainspring.models.scripted import ScriptedCall, ScriptedModel, ScriptedResponse

__all__ = [
    "Model",
    "ModelEvent",
    "ModelRequest",
    "ModelSettings",
    "ModelStop",
    "ModelUsage",
    "ScriptedCall",
    "ScriptedModel",
    "ScriptedResponse",
    "SystemBlock",
    "ToolCallEnd",
    "ToolSpec",
]
