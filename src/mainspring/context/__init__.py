"""The context pipeline: the transcript every model call is compiled from.

``Transcript`` (append-only, prefix guard, generations) → ``ContextCompiler``
(phased processors contributing attributed text to slots, the model's history
view, compaction) → ``CompiledContext`` (system blocks with the cache
breakpoint, messages, segments) → per-turn ``TurnSnapshot`` s for sinks.
Names load lazily.
"""

from typing import TYPE_CHECKING

from mainspring._lowlevel.lazy import lazy_attributes

_EXPORTS = {
    "mainspring.context.transcript": (
        "MainspringAdapter",
        "MessageAdapter",
        "PrefixChange",
        "Transcript",
        "TranscriptView",
        "json_fingerprint",
    ),
    "mainspring.context.pipeline": (
        "PHASES",
        "SLOTS",
        "CacheScope",
        "Contribution",
        "FirstUserProcessor",
        "LastUserProcessor",
        "Module",
        "Phase",
        "Processor",
        "Slot",
        "SystemProcessor",
        "VirtualTailProcessor",
        "order_processors",
    ),
    "mainspring.context.compiler": (
        "Compilation",
        "CompiledContext",
        "CompiledMessages",
        "ContextCompiler",
    ),
    "mainspring.context.view": ("ModelView",),
    "mainspring.context.accounting": ("Accounting", "SegmentLookup", "message_segments"),
    "mainspring.context.snapshot": (
        "CallSnapshot",
        "CostEstimate",
        "Segment",
        "SessionSummary",
        "TurnSnapshot",
    ),
    "mainspring.context.sinks": (
        "InMemorySink",
        "JsonlSink",
        "OpenTelemetrySink",
        "SinkSet",
        "SnapshotSink",
        "SummarySink",
    ),
    "mainspring.context.layers": (
        "BaseSystemPrompt",
        "ContextBlock",
        "MemoryRecall",
        "SkillRecipe",
    ),
    "mainspring.context.history": ("Microcompact", "ToolResultBudget"),
    "mainspring.context.compaction": ("Compaction", "model_summarizer"),
    "mainspring.context.lifecycle": ("CompilerRegistry",),
    "mainspring.context.options": ("ContextOptions",),
    "mainspring.context.pydantic_ai": ("PydanticAIAdapter", "PydanticAIHistory"),
}

__all__ = [
    "PHASES",
    "SLOTS",
    "Accounting",
    "BaseSystemPrompt",
    "CacheScope",
    "CallSnapshot",
    "Compaction",
    "Compilation",
    "CompiledContext",
    "CompiledMessages",
    "CompilerRegistry",
    "ContextBlock",
    "ContextCompiler",
    "ContextOptions",
    "Contribution",
    "CostEstimate",
    "FirstUserProcessor",
    "InMemorySink",
    "JsonlSink",
    "LastUserProcessor",
    "MainspringAdapter",
    "MemoryRecall",
    "MessageAdapter",
    "Microcompact",
    "ModelView",
    "Module",
    "OpenTelemetrySink",
    "Phase",
    "PrefixChange",
    "Processor",
    "PydanticAIAdapter",
    "PydanticAIHistory",
    "Segment",
    "SegmentLookup",
    "SessionSummary",
    "SinkSet",
    "SkillRecipe",
    "Slot",
    "SnapshotSink",
    "SummarySink",
    "SystemProcessor",
    "ToolResultBudget",
    "Transcript",
    "TranscriptView",
    "TurnSnapshot",
    "VirtualTailProcessor",
    "json_fingerprint",
    "message_segments",
    "model_summarizer",
    "order_processors",
]
__getattr__, __dir__ = lazy_attributes(
    __name__, globals(), {name: module for module, names in _EXPORTS.items() for name in names}
)

if TYPE_CHECKING:
    from mainspring.context.accounting import Accounting, SegmentLookup, message_segments
    from mainspring.context.compaction import Compaction, model_summarizer
    from mainspring.context.compiler import (
        Compilation,
        CompiledContext,
        CompiledMessages,
        ContextCompiler,
    )
    from mainspring.context.history import Microcompact, ToolResultBudget
    from mainspring.context.layers import BaseSystemPrompt, ContextBlock, MemoryRecall, SkillRecipe
    from mainspring.context.lifecycle import CompilerRegistry
    from mainspring.context.options import ContextOptions
    from mainspring.context.pipeline import (
        PHASES,
        SLOTS,
        CacheScope,
        Contribution,
        FirstUserProcessor,
        LastUserProcessor,
        Module,
        Phase,
        Processor,
        Slot,
        SystemProcessor,
        VirtualTailProcessor,
        order_processors,
    )
    from mainspring.context.pydantic_ai import PydanticAIAdapter, PydanticAIHistory
    from mainspring.context.sinks import (
        InMemorySink,
        JsonlSink,
        OpenTelemetrySink,
        SinkSet,
        SnapshotSink,
        SummarySink,
    )
    from mainspring.context.snapshot import (
        CallSnapshot,
        CostEstimate,
        Segment,
        SessionSummary,
        TurnSnapshot,
    )
    from mainspring.context.transcript import (
        MainspringAdapter,
        MessageAdapter,
        PrefixChange,
        Transcript,
        TranscriptView,
        json_fingerprint,
    )
    from mainspring.context.view import ModelView
