"""Summaries render their Markdown, and nothing a summary says becomes script or markup."""

from __future__ import annotations

from html.parser import HTMLParser

from django.template import Context, Template

from sessions_app.templatetags.ctxweb_markdown import markdown_safe, render_markdown


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, attrs))


def tags(html: str) -> list[tuple[str, list[tuple[str, str | None]]]]:
    """Every start tag of `html` with its attributes."""
    parser = _Tags()
    parser.feed(html)
    return parser.found


def hrefs(html: str) -> list[str | None]:
    return [value for _, attrs in tags(html) for name, value in attrs if name == "href"]


def test_headings_lists_and_code_blocks_are_rendered() -> None:
    html = render_markdown(
        "# Done\n\n- parser guard\n- tests\n\n1. one\n\n```python\nif a < b:\n    pass\n```\n"
        "\nUse `make test` and **keep** it."
    )

    assert "<h1>Done</h1>" in html
    assert "<ul>\n<li>parser guard</li>" in html
    assert "<ol>" in html
    assert "<pre><code>if a &lt; b:\n    pass\n</code></pre>" in html
    assert "<code>make test</code>" in html
    assert "<strong>keep</strong>" in html


def test_script_tags_and_raw_html_are_not_markup() -> None:
    html = render_markdown(
        '<script>alert(1)</script>\n\ntext <b onclick="x()">bold</b> <img src=x onerror=alert(2)>'
        "\n\n<div>\n<iframe src='https://e.com'></iframe>\n</div>"
    )

    for tag in ("<script", "<b ", "<b>", "<img", "<iframe", "<div"):
        assert tag not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # shown as text
    assert {tag for tag, _ in tags(html)} == {"p"}
    assert [attrs for _, attrs in tags(html) if attrs] == []


def test_javascript_links_lose_their_target() -> None:
    html = render_markdown(
        "[a](javascript:alert(1)) [b](JAVASCRIPT:alert(2)) [c](data:text/html,x) "
        "<javascript:alert(3)> [ok](https://example.com/x)"
    )

    assert hrefs(html) == ["https://example.com/x"]
    assert '<a href="https://example.com/x" rel="noopener noreferrer nofollow">ok</a>' in html


def test_no_event_handler_or_style_attribute_survives() -> None:
    html = render_markdown(
        '[x](https://e.com "t\\" onmouseover=\\"alert(1)")\n\n| a |\n|---|\n| 1 |'
    )

    assert all(
        name in {"href", "title", "rel", "align"} for _, attrs in tags(html) for name, _ in attrs
    )


def test_code_blocks_keep_their_text_exactly() -> None:
    code = "x = '<script>alert(1)</script>'\nprint(x)"
    html = render_markdown(f"```\n{code}\n```")

    assert html.startswith("<pre><code>")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_the_filter_marks_its_output_safe_and_takes_none() -> None:
    rendered = Template("{% load ctxweb_markdown %}{{ text|markdown_safe }}").render(
        Context({"text": "*hi* <script>x</script>"})
    )

    assert rendered == "<p><em>hi</em> &lt;script&gt;x&lt;/script&gt;</p>\n"
    assert markdown_safe(None) == ""
