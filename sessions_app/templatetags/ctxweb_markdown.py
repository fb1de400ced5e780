"""Summaries as safe HTML: Markdown rendered by markdown-it-py, then sanitized by nh3.

A summary is text a model (or an agent) wrote, so it is untrusted. Two layers keep it inert:
the Markdown renderer runs with raw HTML off (any `<tag>` in the text comes out escaped, as
text), and the nh3 sanitizer then keeps only the tags and attributes of plain Markdown
output, links with http(s)/mailto targets only, no `on*` handlers, no `style` and no
`class` (the CSP forbids inline scripts and styles anyway).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Final

import nh3
from django import template
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

register = template.Library()

__all__ = ["markdown_safe", "render_markdown"]

#: What the renderer's CommonMark output (plus tables and strikethrough) may hold.
ALLOWED_TAGS: Final = frozenset(
    {
        "a", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6",
        "hr", "li", "ol", "p", "pre", "s", "strong", "table", "tbody", "td", "th", "thead",
        "tr", "ul",
    }
)  # fmt: skip
ALLOWED_ATTRIBUTES: Final = {
    "a": {"href", "title"},
    "ol": {"start"},
    "td": {"align"},
    "th": {"align"},
}
URL_SCHEMES: Final = frozenset({"http", "https", "mailto"})


@lru_cache(maxsize=1)
def _renderer() -> MarkdownIt:
    # Raw HTML off: a `<script>` in a summary is shown as text, never parsed as a tag.
    return MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])


def render_markdown(text: str) -> str:
    """`text` (Markdown) as sanitized HTML: only plain Markdown tags, safe links."""
    html = _renderer().render(text)
    return nh3.clean(
        html,
        tags=set(ALLOWED_TAGS),
        attributes={tag: set(names) for tag, names in ALLOWED_ATTRIBUTES.items()},
        url_schemes=set(URL_SCHEMES),
        link_rel="noopener noreferrer nofollow",
    )


@register.filter
def markdown_safe(value: Any) -> SafeString:
    """A template's Markdown text (a summary) as sanitized HTML, safe to insert."""
    if value is None:
        return mark_safe("")
    # Sanitized just above: nh3 leaves only the allow-listed tags and attributes.
    return mark_safe(render_markdown(str(value)))
