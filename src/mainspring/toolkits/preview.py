"""Previews of workspace writes: the path and a diff, in every pending action.

The write tools of this package give their policy a ``preview``
(:attr:`~mainspring.tools.policy.ToolPolicy.preview`): when a call pauses for
a decision, the engine computes it in a worker thread and puts it in the
``pending_action`` as a finding with ``source=PREVIEW_SOURCE``. A call that
runs without pausing (an auto tier, an allow-list match) computes none.
"""

from __future__ import annotations

from mainspring.tools.define import Tool
from mainspring.tools.policy import PREVIEW_SOURCE, ToolInput

__all__ = ["PREVIEW_SOURCE", "preview_of"]


def preview_of(tool: Tool, args: ToolInput) -> str | None:
    """The preview of a call, ``None`` when the tool has none.

    A call that would not apply gets a preview saying why (the call itself then
    fails its preflight check and is not asked about).
    """
    preview = tool.policy.preview
    if preview is None:
        return None
    try:
        return preview(args)
    except Exception as exc:
        return f"preview unavailable: {exc}"
