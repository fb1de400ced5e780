"""Fixtures for the page tests: a logged-in client and a session with nested compactions.

Loaded by the page test modules through `pytest_plugins`; the data is built through the
services (create_session, append_messages, compact_session with a ScriptedSummarizer), so
the pages see exactly what the app stores.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from html.parser import HTMLParser
from types import ModuleType
from typing import Any

import pytest
from django.test import Client

from compaction import ScriptedSummarizer
from sessions_app.models import Compaction, CompactionProfile, Session
from sessions_app.services.compacting.session_compaction import compact_session
from sessions_app.services.sessions.lifecycle import append_messages, create_session
from tests.support.histories import assistant, exchange, synthetic_history, user

#: Content that must stay inert in every page that shows it.
HOSTILE_SCRIPT = "<script>window.__pwned = 1; alert('xss')</script>"
HOSTILE_IMG = '<img src=x onerror="window.__pwned = 2; alert(1)">'
HOSTILE_HTMX = '<div hx-get="/hx-attack/" hx-trigger="load">hx</div>'
HOSTILE = f"{HOSTILE_SCRIPT} {HOSTILE_IMG} {HOSTILE_HTMX}"
FIRST_SUMMARY = "First summary: the parser guard was added; tests in tests/test_models.py pass."
SECOND_SUMMARY = f"Second summary keeps the first one. {HOSTILE}"


@dataclass
class UiSession:
    """A stored session with two nested compactions (#2 re-summarized #1)."""

    session: Session
    inner: Compaction
    outer: Compaction


def ui_profile() -> CompactionProfile:
    """A small-window profile so a handful of messages is enough to compact."""
    profile, _ = CompactionProfile.objects.update_or_create(
        name="ui-test",
        defaults={
            "context_limit": 6000,
            "trigger_ratio": 0.9,
            "tail_retention_ratio": 0.05,
            "keep_recent_messages": 4,
            "steps": ["summary"],
            "summarizer": "extractive",
            "retry_backoff_seconds": 0.0,
            "dialogue_rounds_keep_min": 1,
        },
    )
    return profile


def rich_messages() -> list[dict[str, Any]]:
    """A history with hostile text, thinking, a failing tool call and a long result."""
    return [
        *synthetic_history(13, words_per_message=30),
        user(f"Please look at this: {HOSTILE}"),
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "I should read the file first.", "signature": "s"},
                {"type": "text", "text": "Reading the file."},
                {
                    "type": "tool_use",
                    "id": "toolu_ui_1",
                    "name": "Bash",
                    "input": {"command": "cat src/app.py"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_ui_1",
                    "content": f"Traceback: boom {HOSTILE}",
                    "is_error": True,
                }
            ],
        },
        assistant("The command failed; I will fix the path."),
    ]


def build_ui_session(owner: Any, *, title: str = "Parser refactor") -> UiSession:
    """Create the session, compact it, append, compact again (so #1 nests in #2)."""
    profile = ui_profile()
    session = create_session(owner, title=title, messages=rich_messages(), profile=profile)
    first = compact_session(
        session, profile=profile, summarizer=ScriptedSummarizer(default=FIRST_SUMMARY)
    )
    assert first.compaction is not None, first.reason
    more: list[dict[str, Any]] = [user("Next task: wire the new parser into the CLI.")]
    for index in range(4):
        more += exchange(
            f"toolu_more_{index}", "Read", {"file_path": f"src/cli_{index}.py"}, "x " * 80
        )
    more.append(assistant("Wired the parser into the CLI; all tests pass."))
    append_messages(session, more)
    second = compact_session(
        session, profile=profile, summarizer=ScriptedSummarizer(default=SECOND_SUMMARY)
    )
    assert second.compaction is not None, second.reason
    append_messages(session, [user("Thanks! One more thing."), assistant("Sure.")])
    session.refresh_from_db()
    inner = Compaction.objects.get(pk=first.compaction.pk)
    outer = Compaction.objects.get(pk=second.compaction.pk)
    return UiSession(session, inner, outer)


@pytest.fixture
def ui_session(user: Any) -> UiSession:
    """`user`'s session with nested compactions and hostile content."""
    return build_ui_session(user)


@pytest.fixture
def logged_in(user: Any) -> Client:
    """A browser-like client logged in as `user`."""
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def htmx_get(logged_in: Client) -> Callable[..., Any]:
    """GET as htmx does (HX-Request header)."""

    def get(path: str, **extra: Any) -> Any:
        return logged_in.get(path, HTTP_HX_REQUEST="true", **extra)

    return get


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, {name: value or "" for name, value in attrs}))


def elements(html: str | bytes) -> list[tuple[str, dict[str, str]]]:
    """Every start tag of `html` with its attributes, in document order."""
    collector = _Collector()
    collector.feed(html.decode() if isinstance(html, bytes) else html)
    return collector.elements


def expanders(html: str | bytes) -> list[dict[str, str]]:
    """Attributes of every expander button."""
    return [
        attrs
        for tag, attrs in elements(html)
        if tag == "button" and "expander" in attrs.get("class", "").split()
    ]


def compaction_numbers(html: str | bytes) -> list[int]:
    """The data-compaction numbers of the markers in `html`, in order."""
    return [
        int(attrs["data-compaction"]) for _, attrs in elements(html) if "data-compaction" in attrs
    ]


@pytest.fixture
def ui() -> ModuleType:
    """This module, for its helpers and constants (importing it directly would load it
    before pytest can register it as a plugin)."""
    return sys.modules[__name__]
