"""The one exception tree of mainspring.

```
MainspringError
├── ConfigError            misuse, raised at construction
│   └── PipelineError      (mainspring.pipelines) a workspace or stage contract is malformed
├── ModelError             .provider .retryable
│   ├── ModelHTTPError     .status .body
│   │   ├── AuthenticationError   401
│   │   ├── PermissionDenied      403
│   │   ├── ModelNotFound         404
│   │   ├── BadRequest            400, 422
│   │   │   └── ContextTooLong    the prompt does not fit the model
│   │   ├── RateLimited           429 (.retry_after)
│   │   ├── Overloaded            503, 529
│   │   └── ServerError           other 5xx
│   ├── ModelTimeout       no answer in time (also a TimeoutError)
│   ├── ModelUnreachable   no connection, or it broke before any of the answer arrived
│   └── ModelOutputError   malformed or cut-off stream
├── ToolError              .tool
│   ├── ToolTimeout        (also a TimeoutError)
│   └── ToolInputError     .field
├── ApprovalError          .attempt_id
│   ├── UnknownAttempt     (also a KeyError)
│   ├── DecisionConflict   a second decision for one attempt
│   ├── InputChanged       .expected .given: approved another input than the pending one
│   ├── FieldNotModifiable .fields
│   ├── InvalidEdits       .fields: a badly typed or invalid edit (also a ToolInputError)
│   ├── ApprovalExpired    .expires_at: decided after the pending action's expiry
│   ├── PolicyChanged      .expected .given: decided under another policy version
│   └── ApproverRefused    .principal: no approver, the requester, or one approving twice
├── SessionBusy            a second run while one is active
│   └── CallerBusy         (mainspring.engine) a second run of one caller, one run each
├── SessionClosed          a session used after aclose() (also a RuntimeError)
├── AccessDenied           .target: the caller may not see or call it (engine policy)
│   └── SignatureRejected  .reason: a cross-engine request failed verification
├── RemoteEngineError      .handle: a remote engine failed or answered badly
├── RunFailed              .event: a run (Session.run) ended in an error event
│   └── OutputInvalid      .reason .retries: no valid typed output within the retries
├── OutputRejected         .reason: raised by an output validator (the model tries again)
├── GuardrailTripwire      .verdict: a guardrail tripped (Session.run)
├── GuardrailFailed        .guardrail .stage: a guardrail raised (the run fails closed)
├── PrefixMutationError
├── ContextError           a context processor misconfigured or misbehaving
│   ├── ProcessorCycleError     before/after constraints form a cycle (.cycle)
│   └── ProcessorScopeError     a session-scoped processor changed structure
├── CompilerDestroyedError a context compiler used after destroy()
├── CompilerActiveError    a second context compiler for one session key
├── TelemetryError         a sink failed and telemetry is strict
├── WireFormatError        malformed SSE or JSON from outside (also a ValueError)
├── McpStartupError        .server: a required MCP server did not start
├── SkillNotFound          .name (also a KeyError)
├── SkillPathError         .name .path (also a ValueError)
└── StoreError            a store cannot be reached, read or written
    ├── CheckpointCorrupt  .stream_id .offset
    ├── LeaseLost          a run lost its session's lock: it stopped, recording nothing more
    ├── SchemaTooNew       the store was written by a newer mainspring
    ├── ArtifactNotFound   no artifact at that reference (also a KeyError)
    └── SessionNotFound    .session_id: the store holds no such session (also a KeyError)
```

A failure the model should see (bad arguments, a tool that raised) is not an
exception: it becomes a tool result with ``is_error=True``. These exceptions
are for the application: misuse, a decision that cannot be applied, a store
that cannot be read.
"""

from __future__ import annotations

__all__ = [
    "AccessDenied",
    "ApprovalError",
    "ApprovalExpired",
    "ApproverRefused",
    "ArtifactNotFound",
    "AuthenticationError",
    "BadRequest",
    "CallerBusy",
    "CheckpointCorrupt",
    "CompilerActiveError",
    "CompilerDestroyedError",
    "ConfigError",
    "ContextError",
    "ContextTooLong",
    "DecisionConflict",
    "FieldNotModifiable",
    "GuardrailFailed",
    "GuardrailTripwire",
    "InputChanged",
    "InvalidEdits",
    "LeaseLost",
    "MainspringError",
    "McpStartupError",
    "ModelError",
    "ModelHTTPError",
    "ModelNotFound",
    "ModelOutputError",
    "ModelTimeout",
    "ModelUnreachable",
    "OutputInvalid",
    "OutputRejected",
    "Overloaded",
    "PermissionDenied",
    "PolicyChanged",
    "PrefixMutationError",
    "ProcessorCycleError",
    "ProcessorScopeError",
    "RateLimited",
    "RemoteEngineError",
    "SchemaTooNew",
    "ServerError",
    "SessionBusy",
    "SessionClosed",
    "SessionNotFound",
    "SignatureRejected",
    "SkillNotFound",
    "SkillPathError",
    "StoreError",
    "TelemetryError",
    "ToolError",
    "ToolInputError",
    "ToolTimeout",
    "UnknownAttempt",
    "WireFormatError",
]


class MainspringError(Exception):
    """Root of every error mainspring raises on purpose."""


class ConfigError(MainspringError, ValueError):
    """Misuse of the API, detected when an object is built or a call is made."""


class ModelError(MainspringError):
    """A model call failed.

    Attributes:
        provider: Which provider (or ``"scripted"``) failed.
        retryable: Whether trying the same request again may succeed.
    """

    def __init__(self, message: str, *, provider: str, retryable: bool = False) -> None:
        super().__init__(message)
        self.provider = provider
        self.retryable = retryable


class ModelHTTPError(ModelError):
    """A provider answered with an HTTP error status."""

    def __init__(
        self, message: str, *, provider: str, status: int, body: str = "", retryable: bool = False
    ) -> None:
        super().__init__(message, provider=provider, retryable=retryable)
        self.status = status
        self.body = body


class AuthenticationError(ModelHTTPError):
    """The API key is missing, wrong or revoked (401)."""


class PermissionDenied(ModelHTTPError):
    """The key may not use this model or feature (403)."""


class ModelNotFound(ModelHTTPError):
    """No such model or endpoint (404)."""


class BadRequest(ModelHTTPError):
    """The provider rejected the request as malformed (400, 422)."""


class ContextTooLong(BadRequest):
    """The request does not fit the model's context window."""


class RateLimited(ModelHTTPError):
    """Too many requests (429); ``retry_after`` seconds when the provider said."""

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        status: int = 429,
        body: str = "",
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, provider=provider, status=status, body=body, retryable=True)
        self.retry_after = retry_after


class Overloaded(ModelHTTPError):
    """The provider is overloaded (503, 529); retryable."""


class ServerError(ModelHTTPError):
    """The provider failed (5xx); retryable."""


class ModelTimeout(ModelError, TimeoutError):
    """No answer in time; retryable."""


class ModelUnreachable(ModelError):
    """The provider could not be reached; retryable.

    No connection was made (refused, a name that does not resolve), or it broke
    before any of the answer arrived.
    """


class ModelOutputError(ModelError):
    """A model stream was malformed, cut off, or a script ran out of responses."""


class ToolError(MainspringError):
    """A tool could not be defined or run."""

    def __init__(self, message: str, *, tool: str) -> None:
        super().__init__(message)
        self.tool = tool


class ToolTimeout(ToolError, TimeoutError):
    """A tool ran past its timeout."""

    def __init__(self, message: str, *, tool: str, timeout: float) -> None:
        super().__init__(message, tool=tool)
        self.timeout = timeout


class ToolInputError(ToolError, ValueError):
    """Input for a tool failed validation.

    Attributes:
        field: The first offending field as a dotted path (``""`` for the whole input).
    """

    def __init__(self, message: str, *, tool: str, field: str = "") -> None:
        super().__init__(message, tool=tool)
        self.field = field


class ApprovalError(MainspringError):
    """A decision for a pending action could not be applied; nothing ran."""

    def __init__(self, message: str, *, attempt_id: str) -> None:
        super().__init__(message)
        self.attempt_id = attempt_id


class UnknownAttempt(ApprovalError, KeyError):
    """No pending action has this attempt id."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class DecisionConflict(ApprovalError):
    """The attempt was already decided; a decision is never applied twice."""


class InputChanged(ApprovalError):
    """A decision names an input hash that is not the pending input's (it changed)."""

    def __init__(self, message: str, *, attempt_id: str, expected: str, given: str) -> None:
        super().__init__(message, attempt_id=attempt_id)
        self.expected = expected
        self.given = given


class FieldNotModifiable(ApprovalError):
    """An approval tried to edit fields the tool does not declare modifiable."""

    def __init__(self, message: str, *, attempt_id: str, fields: tuple[str, ...]) -> None:
        super().__init__(message, attempt_id=attempt_id)
        self.fields = fields


class InvalidEdits(ApprovalError, ToolInputError):
    """An approval's edits are not valid for the tool; nothing ran and the attempt stays open.

    Edits are typed strictly: a boolean or a string where a number goes, a
    number where a string goes, ``NaN`` or ``Infinity`` anywhere, are refused
    (the model's arguments are coerced leniently; a person's edit is not).

    Attributes:
        fields: The edited fields at fault (all edited fields when it is not known which).
    """

    def __init__(
        self, message: str, *, attempt_id: str, tool: str, fields: tuple[str, ...]
    ) -> None:
        MainspringError.__init__(self, message)
        self.attempt_id = attempt_id
        self.tool = tool
        self.field = fields[0] if fields else ""
        self.fields = fields


class ApprovalExpired(ApprovalError):
    """The pending action expired before this decision came; nothing ran.

    Expiry fails closed: settle the call with ``Session.resume(attempt_id, Expire())``
    (the model is told it expired), or ask the model again.

    Attributes:
        expires_at: When it expired (Unix seconds).
    """

    def __init__(self, message: str, *, attempt_id: str, expires_at: float) -> None:
        super().__init__(message, attempt_id=attempt_id)
        self.expires_at = expires_at


class PolicyChanged(ApprovalError):
    """A decision names another policy version than the one in force; nothing ran.

    Attributes:
        expected: The policy version in force (``PermissionRules.version``).
        given: The version the decision (or the pending action) was made under.
    """

    def __init__(self, message: str, *, attempt_id: str, expected: str, given: str) -> None:
        super().__init__(message, attempt_id=attempt_id)
        self.expected = expected
        self.given = given


class ApproverRefused(ApprovalError):
    """This principal may not add this approval; nothing ran and the attempt stays open.

    The approval names no principal where the rule needs one, the principal
    is the requester and the rule forbids self-approval, or it approved
    this attempt already (a quorum counts distinct principals).

    Attributes:
        principal: The approving principal (``""`` when none was named).
    """

    def __init__(self, message: str, *, attempt_id: str, principal: str) -> None:
        super().__init__(message, attempt_id=attempt_id)
        self.principal = principal


class SessionBusy(MainspringError, RuntimeError):
    """A session already has an active run."""


class SessionClosed(MainspringError, RuntimeError):
    """A session was used after ``aclose()``: its context pipeline is torn down."""


class CallerBusy(SessionBusy):
    """The caller already has a run in an engine that allows one run per caller."""


class AccessDenied(MainspringError, PermissionError):
    """The caller may not see or call the target (private, or not exported)."""

    def __init__(self, message: str, *, target: str = "") -> None:
        super().__init__(message)
        self.target = target


class SignatureRejected(AccessDenied):
    """A cross-engine request failed verification (unknown key, bad signature, replay, stale)."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class RemoteEngineError(MainspringError):
    """A remote engine could not be reached, or answered with an error."""

    def __init__(self, message: str, *, handle: str, status: int | None = None) -> None:
        super().__init__(message)
        self.handle = handle
        self.status = status


class PrefixMutationError(MainspringError):
    """A committed transcript prefix was changed in strict mode."""


class ContextError(MainspringError):
    """A context processor is misconfigured or broke the pipeline's rules."""


class ProcessorCycleError(ContextError, ValueError):
    """Processors' before/after constraints form a cycle."""

    def __init__(self, message: str, *, cycle: tuple[str, ...]) -> None:
        super().__init__(message)
        self.cycle = cycle


class ProcessorScopeError(ContextError):
    """A session-scoped processor tried a structural change (it may only contribute)."""


class CompilerDestroyedError(MainspringError, RuntimeError):
    """A context compiler was used after ``destroy()``."""


class CompilerActiveError(MainspringError, RuntimeError):
    """A session key already has an active context compiler."""


class TelemetryError(MainspringError):
    """A telemetry sink failed while telemetry is strict."""


class RunFailed(MainspringError):
    """A run driven by ``Session.run`` ended with an ``error`` event.

    ``code``, ``retryable`` and ``attempt_id`` are the event's; ``event`` is the
    event itself.
    """

    def __init__(
        self,
        message: str,
        *,
        code: str,
        retryable: bool = False,
        attempt_id: str | None = None,
        event: object = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.retryable = retryable
        self.attempt_id = attempt_id
        self.event = event


class OutputInvalid(RunFailed):
    """The model gave no valid typed output within ``Agent.output_retries``.

    Each answer that did not validate against the agent's ``output_type`` (or
    that an output validator rejected) went back to the model with the
    reason; the last reason is :attr:`reason`. The run's stream ended with
    ``error(code="output_invalid")``; ``Session.run`` raises this.

    Attributes:
        reason: Why the last answer was refused.
        retries: How many answers were sent back before giving up.
    """

    def __init__(
        self, reason: str, *, retries: int = 0, event: object = None, message: str = ""
    ) -> None:
        super().__init__(message or reason, code="output_invalid", event=event)
        self.reason = reason
        self.retries = retries


class OutputRejected(MainspringError):
    """Raised by an output validator: the output is refused and the model tries again.

    ``reason`` is what the model is told. The retries are bounded by
    ``Agent.output_retries``; past them the run fails with
    :class:`OutputInvalid`.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class GuardrailTripwire(MainspringError):
    """A guardrail tripped: ``Session.run`` ended with ``stop_reason="guardrail_tripped"``.

    ``verdict`` is the tripped guardrail's ``guardrail_verdict`` event
    (:class:`~mainspring.events.GuardrailVerdict`); ``result`` the run's
    :class:`~mainspring.result.RunResult` (its usage and cost, its events).
    """

    def __init__(self, message: str, *, verdict: object, result: object = None) -> None:
        super().__init__(message)
        self.verdict = verdict
        self.result = result


class GuardrailFailed(MainspringError):
    """A guardrail raised: the run fails closed (``error`` event, ``code="guardrail_failed"``).

    ``guardrail`` names it, ``stage`` is ``"input"`` or ``"output"``; the
    exception it raised is the ``__cause__``.
    """

    def __init__(self, message: str, *, guardrail: str, stage: str) -> None:
        super().__init__(message)
        self.guardrail = guardrail
        self.stage = stage


class StoreError(MainspringError):
    """A store could not be read or written."""


class LeaseLost(StoreError):
    """A run lost its session's lock (the lease expired and another worker may own it).

    The run stops: its writes do not start and nothing more of it goes on
    record, so it cannot overwrite what the session's new owner records. A
    stream ends with ``error(code="lease_lost", retryable=True)``.
    """


class WireFormatError(MainspringError, ValueError):
    """Input from outside (an SSE stream, a JSON record) is malformed."""


class CheckpointCorrupt(StoreError):
    """A checkpoint record cannot be decoded; nothing after it is replayed."""

    def __init__(self, message: str, *, stream_id: str, offset: int) -> None:
        super().__init__(message)
        self.stream_id = stream_id
        self.offset = offset


class ArtifactNotFound(StoreError, KeyError):
    """No artifact at the reference given."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class SessionNotFound(StoreError, KeyError):
    """The store holds no session with this id (``Session.load``)."""

    def __init__(self, message: str, *, session_id: str) -> None:
        super().__init__(message)
        self.session_id = session_id

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class SchemaTooNew(StoreError):
    """The store's schema version is newer than this mainspring understands."""


class SkillNotFound(MainspringError, KeyError):
    """No skill has this name."""

    def __init__(self, message: str, *, name: str) -> None:
        super().__init__(message)
        self.name = name

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class SkillPathError(MainspringError, ValueError):
    """A skill resource path is absolute, escapes the folder, is a symlink, or is unreadable."""

    def __init__(self, message: str, *, name: str, path: str) -> None:
        super().__init__(message)
        self.name = name
        self.path = path


class McpStartupError(MainspringError):
    """A required MCP server did not start (``.server`` names it)."""

    def __init__(self, message: str, *, server: str) -> None:
        super().__init__(message)
        self.server = server
