"""A griffe extension: Sphinx roles in docstrings rendered as Markdown code.

The docstrings are Google style but name objects with Sphinx roles
(``:class:`~mainspring.Session```). mkdocstrings shows those literally, so this
rewrites each role to a code span of the name a reader would see: the last
component for ``~path``, else the path as written.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:attr|class|data|exc|func|meth|mod|obj):`(~?)([^`]+)`")


def plain(text: str) -> str:
    """``text`` with every Sphinx role replaced by a code span."""

    def span(match: re.Match[str]) -> str:
        short, target = match.group(1), match.group(2)
        return f"`{target.rsplit('.', 1)[-1] if short else target}`"

    return ROLE.sub(span, text)


class SphinxRoles(griffe.Extension):
    """Rewrite Sphinx roles in every docstring griffe loads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Called for every module, class, function and attribute."""
        if obj.docstring is not None:
            obj.docstring.value = plain(obj.docstring.value)
