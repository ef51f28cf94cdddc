"""The pages' files: shipped in the package, nothing from elsewhere, colours with contrast."""

from __future__ import annotations

import hashlib
import re
from importlib import resources

import pytest

WEB = resources.files("mainspring.server").joinpath("web")
NAMES = sorted(p.name for p in WEB.iterdir() if p.is_file())
VENDOR = WEB.joinpath("vendor")


def read(name: str) -> str:
    return WEB.joinpath(name).read_text(encoding="utf-8")


def test_the_pages_reference_only_their_own_shipped_files() -> None:
    from mainspring.server._pages import _ASSETS

    ours = {name for name in _ASSETS if not name.startswith("vendor/")}
    assert ours | {"chat.html", "trace.html"} == set(NAMES)
    for page in ("chat.html", "trace.html"):
        for ref in re.findall(r'(?:src|href)="([^"#]+)"', read(page)):
            if ref in ("/", "/trace"):
                continue
            assert ref.startswith("/ui/") and ref.removeprefix("/ui/") in _ASSETS, ref


@pytest.mark.parametrize("name", NAMES)
def test_no_file_loads_anything_from_another_origin(name: str) -> None:
    text = read(name)
    external = re.findall(r"(?:https?:)?//[\w.-]+\.[a-z]{2,}[/\w.-]*", text)
    assert [u for u in external if "www.w3.org/2000/svg" not in u] == []
    assert "@import" not in text and "eval(" not in text and "innerHTML" not in text


def _block(css: str, selector: str) -> dict[str, str]:
    start = css.index(selector)
    body = css[css.index("{", start) + 1 : css.index("}", start)]
    return dict(re.findall(r"--([\w-]+):\s*(#[0-9a-fA-F]{6})", body))


def _luminance(color: str) -> float:
    def channel(c: int) -> float:
        s = c / 255
        return s / 12.92 if s <= 0.03928 else ((s + 0.055) / 1.055) ** 2.4

    r, g, b = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def _contrast(a: str, b: str) -> float:
    hi, lo = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_both_themes_have_text_contrast_of_at_least_wcag_aa() -> None:
    css = read("app.css")
    light = _block(css, ":root {")
    dark = _block(css, ':root[data-theme="dark"]')
    assert dark == _block(
        css, ':root:not([data-theme="light"])'
    )  # the system's dark = the toggle's
    for theme in (light, dark):
        for fg in ("text", "muted", "accent", "ok", "warn", "bad"):
            for bg in ("bg", "panel"):
                ratio = _contrast(theme[fg], theme[bg])
                assert ratio >= 4.5, (fg, bg, theme[fg], theme[bg], round(ratio, 2))
        assert _contrast(theme["text"], theme["panel-2"]) >= 4.5
        assert _contrast(theme["text"], theme["stable"]) >= 4.5
        assert _contrast(theme["accent-text"], theme["accent"]) >= 4.5


def test_the_vendored_libraries_are_the_pinned_files_with_their_licenses() -> None:
    from mainspring.server._pages import _ASSETS

    table = VENDOR.joinpath("README.md").read_text(encoding="utf-8")
    pinned = dict(re.findall(r"^\| ([\w.-]+\.js) \|.*\| ([0-9a-f]{64}) \|$", table, re.M))
    shipped = {p.name for p in VENDOR.iterdir() if p.name.endswith(".js")}
    assert set(pinned) == shipped == {n.removeprefix("vendor/") for n in _ASSETS if "/" in n}
    for name, digest in pinned.items():
        assert hashlib.sha256(VENDOR.joinpath(name).read_bytes()).hexdigest() == digest, name
    for license_file in ("markdown-it.LICENSE.txt", "dompurify.LICENSE.txt"):
        assert "Permission" in VENDOR.joinpath(license_file).read_text(encoding="utf-8") or (
            "Apache License" in VENDOR.joinpath(license_file).read_text(encoding="utf-8")
        )


def test_the_chat_loads_markdown_through_the_sanitizer_only() -> None:
    """The rendered Markdown reaches the page as DOMPurify's nodes, raw HTML off."""
    script = read("markdown.js")
    assert "html: false" in script
    assert "purify.sanitize(md.render(source), OPTIONS)" in script
    assert "RETURN_DOM_FRAGMENT: true" in script
