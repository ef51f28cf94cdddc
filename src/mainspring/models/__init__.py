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
from mainspring.models.effort import AdaptiveEffort, EffortStats, classify_effort
from mainspring.models.registry import FallbackModel, ModelRegistry, model_from_string
from mainspring.models.routing import RoutedModel, RoutingStats
from mainspring.models.scripted import ScriptedCall, ScriptedModel, ScriptedResponse

__all__ = [
    "AdaptiveEffort",
    "EffortStats",
    "FallbackModel",
    "Model",
    "ModelEvent",
    "ModelRegistry",
    "ModelRequest",
    "ModelSettings",
    "ModelStop",
    "ModelUsage",
    "RoutedModel",
    "RoutingStats",
    "ScriptedCall",
    "ScriptedModel",
    "ScriptedResponse",
    "SystemBlock",
    "ToolCallEnd",
    "ToolSpec",
    "classify_effort",
    "model_from_string",
]
