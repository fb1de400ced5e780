"""sessions_app.importers.blocks: what a person wrote, apart from what an agent added."""

from __future__ import annotations

import pytest

from sessions_app.importers.blocks import prompt_text

REMINDER = "<system-reminder>\nAttribution for git commits...\n</system-reminder>\n"


@pytest.mark.parametrize(
    ("content", "text"),
    [
        ([{"type": "text", "text": REMINDER}, {"type": "text", "text": "Say hello"}], "Say hello"),
        (f"{REMINDER}Fix the parser", "Fix the parser"),
        (f"before {REMINDER}after", "before \nafter"),
        ([{"type": "text", "text": REMINDER}], ""),
        ("a <system-reminder> tag in prose stays", "a <system-reminder> tag in prose stays"),
        ("plain words", "plain words"),
    ],
)
def test_prompt_text_drops_system_reminders(content: object, text: str) -> None:
    assert prompt_text(content) == text
