"""Text files as the model sees them, written back the way they were.

A file is decoded once into :class:`Text`: its content with LF line
ends, plus what it takes to give the bytes back — the encoding (UTF-8, UTF-8
with a byte-order mark, UTF-16 with one, or Latin-1 for bytes that are not
UTF-8, which round-trips every byte) and the line-end style (LF, CRLF, or
mixed, which is kept exactly as it was). Encoding new content with the same
:class:`Text` keeps both.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from typing import Literal

__all__ = ["BinaryFile", "Text", "decode_text", "diff_preview", "encode_text"]

Newline = Literal["lf", "crlf", "mixed"]

_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


class BinaryFile(ValueError):
    """The bytes are not text (a NUL byte without a UTF-16 byte-order mark)."""


@dataclass(frozen=True, slots=True)
class Text:
    """Decoded content and how to encode it back."""

    content: str
    """With LF line ends, unless :attr:`newline` is ``"mixed"`` (then as stored)."""
    encoding: str = "utf-8"
    newline: Newline = "lf"


def decode_text(data: bytes) -> Text:
    """Decode file bytes, remembering encoding and line ends.

    Raises:
        BinaryFile: the bytes hold a NUL and carry no UTF-16 byte-order mark.
    """
    encoding = next((name for bom, name in _BOMS if data.startswith(bom)), None)
    if encoding is None:
        if b"\x00" in data:
            raise BinaryFile("binary file (it contains NUL bytes)")
        try:
            raw = data.decode("utf-8")
            encoding = "utf-8"
        except UnicodeDecodeError:
            raw = data.decode("latin-1")
            encoding = "latin-1"
    else:
        raw = data.decode(encoding)
    crlf = raw.count("\r\n")
    if crlf == 0:
        return Text(raw, encoding, "lf")
    if crlf == raw.count("\n"):
        return Text(raw.replace("\r\n", "\n"), encoding, "crlf")
    return Text(raw, encoding, "mixed")


def encode_text(content: str, like: Text | None = None) -> bytes:
    """Encode ``content`` (LF line ends) the way ``like`` was stored (UTF-8/LF if new).

    Raises:
        UnicodeEncodeError: the content has characters the file's encoding cannot hold.
    """
    if like is None:
        return content.encode("utf-8")
    if like.newline == "crlf":
        content = content.replace("\r\n", "\n").replace("\n", "\r\n")
    return content.encode(like.encoding)


def diff_preview(
    old: str, new: str, *, path: str, max_lines: int = 200, max_chars: int = 20_000
) -> str:
    """A unified diff of ``old`` → ``new``, cut to ``max_lines`` / ``max_chars``.

    Very large inputs are summarized instead of diffed (difflib is quadratic
    in the worst case and a preview must stay cheap).
    """
    import difflib  # lazy: only previews need it

    if old == new:
        return f"{path}: no change"
    old_lines, new_lines = old.splitlines(keepends=True), new.splitlines(keepends=True)
    if len(old_lines) + len(new_lines) > 40_000:
        return (
            f"{path}: {len(old_lines)} → {len(new_lines)} lines "
            f"({len(old)} → {len(new)} characters); too large to preview as a diff"
        )
    lines = list(
        difflib.unified_diff(old_lines, new_lines, fromfile=f"a/{path}", tofile=f"b/{path}", n=3)
    )
    out: list[str] = []
    size = 0
    for index, line in enumerate(lines):
        text = line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
        if index >= max_lines or size + len(text) > max_chars:
            out.append(f"… {len(lines) - index} more diff lines\n")
            break
        out.append(text)
        size += len(text)
    return "".join(out).rstrip("\n")
