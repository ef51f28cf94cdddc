"""Models: one streaming protocol, an offline scripted model, provider adapters."""

from typing import TYPE_CHECKING

from mainspring._lowlevel.lazy import lazy_attributes
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

if TYPE_CHECKING:
    from mainspring.models.effort import AdaptiveEffort, EffortStats, classify_effort
    from mainspring.models.mock import MockModel
    from mainspring.models.registry import (
        FallbackModel,
        ModelRegistry,  # noqa: F401  # importable, not in __all__ (as before)
        model_from_string,
    )
    from mainspring.models.routing import RoutedModel, RoutingStats
    from mainspring.models.scripted import ScriptedCall, ScriptedModel, ScriptedResponse

# The protocol loads with the package; the rest on first use (PEP 562), so that
# `from mainspring.models.base import Model` does not load routing or the scripted model.
_LAZY: dict[str, str] = {
    "AdaptiveEffort": "mainspring.models.effort",
    "EffortStats": "mainspring.models.effort",
    "FallbackModel": "mainspring.models.registry",
    "MockModel": "mainspring.models.mock",
    "ModelRegistry": "mainspring.models.registry",
    "RoutedModel": "mainspring.models.routing",
    "RoutingStats": "mainspring.models.routing",
    "ScriptedCall": "mainspring.models.scripted",
    "ScriptedModel": "mainspring.models.scripted",
    "ScriptedResponse": "mainspring.models.scripted",
    "classify_effort": "mainspring.models.effort",
    "model_from_string": "mainspring.models.registry",
}

__getattr__, __dir__ = lazy_attributes("mainspring.models", globals(), _LAZY)

__all__ = [
    "AdaptiveEffort",
    "EffortStats",
    "FallbackModel",
    "MockModel",
    "Model",
    "ModelEvent",
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
