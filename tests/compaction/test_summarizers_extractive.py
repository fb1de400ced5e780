"""ExtractiveSummarizer: deterministic, structured, within max_tokens, identifiers verbatim."""

from __future__ import annotations

import pytest

from compaction.messages import make_summary_message
from compaction.summarizers import ExtractiveSummarizer, SummaryRequest
from compaction.summarizers.extractive import KEY_IDENTIFIERS
from compaction.summarizers.prompt import SECTIONS
from compaction.tokens import count_text_tokens
from tests.support.histories import (
    assistant,
    exchange,
    synthetic_history,
    tool_call,
    tool_results,
    user,
)

SESSION = [
    user("Fix the crash in src/app/parser.py when the input is empty"),
    *exchange("t1", "Read", {"file_path": "src/app/parser.py"}, "def parse(text):\n    ..."),
    *exchange(
        "t2",
        "Bash",
        {"command": "pytest tests/test_parser.py"},
        "Traceback (most recent call last):\n  File x\nValueError: empty input not allowed",
        is_error=True,
    ),
    *exchange("t3", "Edit", {"file_path": "src/app/parser.py", "old": "a", "new": "b"}, "ok"),
    *exchange("t4", "Bash", {"command": "pytest tests/test_parser.py"}, "3 passed in 0.1s"),
    tool_call(
        "t5",
        "TodoWrite",
        {
            "todos": [
                {"content": "Add a changelog entry", "status": "pending"},
                {"content": "Fix parser", "status": "completed"},
            ]
        },
    ),
    tool_results(("t5", "Todos updated")),
    *exchange("t6", "Write", {"file_path": "docs/parser.md"}, "File created"),
    assistant("The parser now rejects empty input. TODO: update the README"),
]


def summarize(messages, **kwargs) -> str:
    return ExtractiveSummarizer().summarize(SummaryRequest(messages, **kwargs))


def section(text: str, title: str) -> str:
    start = text.index(f"{title}:\n") + len(title) + 2
    end = text.find("\n\n", start)
    return text[start : end if end != -1 else None]


def test_has_every_section_in_order():
    text = summarize(SESSION)

    positions = [text.index(f"{title}:\n") for title in SECTIONS]
    assert positions == sorted(positions)
    assert KEY_IDENTIFIERS not in text


def test_is_deterministic():
    assert summarize(SESSION) == summarize(SESSION)


def test_user_requests_are_goals():
    goals = section(summarize(SESSION), "Goals and key decisions")

    assert "- User asked: Fix the crash in src/app/parser.py when the input is empty" in goals


def test_file_operations_come_from_tool_inputs_and_text():
    files = section(summarize(SESSION), "File operations")

    assert "- src/app/parser.py: read, modified" in files
    assert "- docs/parser.md: written" in files
    assert "tests/test_parser.py" in files  # from the Bash command


def test_tool_calls_with_outcomes():
    tools = section(summarize(SESSION), "Tool calls and results")

    assert "- 6 tool calls: Bash x2 (1 failed), Edit x1, Read x1, TodoWrite x1, Write x1" in tools
    assert "- Bash(pytest tests/test_parser.py) → ok: 3 passed in 0.1s" in tools
    assert "→ failed: ValueError: empty input not allowed" in tools


def test_errors_and_their_fixes():
    errors = section(summarize(SESSION), "Errors and fixes")

    assert errors == (
        "- Bash(pytest tests/test_parser.py) failed: ValueError: empty input not allowed; "
        "then Bash(pytest tests/test_parser.py) succeeded"
    )


def test_open_items_from_todo_lists_and_text():
    state = section(summarize(SESSION), "Current state and pending items")

    assert "- [pending] Add a changelog entry" in state
    assert "Fix parser" not in state  # completed
    assert "TODO: update the README" in state
    assert "- Latest assistant update: The parser now rejects empty input." in state


def test_empty_sections_say_none():
    text = summarize([user("just a question"), assistant("just an answer")])

    assert section(text, "Errors and fixes") == "- none"
    assert section(text, "File operations") == "- none"


def test_error_result_without_flag_is_detected_by_its_first_line():
    messages = [user("go"), *exchange("t1", "Bash", {"command": "make"}, "error: no rule")]

    assert "make) failed: error: no rule" in section(summarize(messages), "Errors and fixes")


@pytest.mark.parametrize("max_tokens", [120, 300, 1000])
def test_fits_max_tokens(max_tokens):
    history = synthetic_history(800, words_per_message=60)

    text = summarize(history, max_tokens=max_tokens)

    assert count_text_tokens(text) <= max_tokens
    for title in SECTIONS:
        assert f"{title}:" in text


def test_trimming_keeps_the_newest_and_the_first_request():
    history = synthetic_history(800, words_per_message=60)

    text = summarize(history, max_tokens=400)

    assert "Please handle task 1:" in text  # the original goal
    last_request = max(
        i for i, m in enumerate(history) if isinstance(m["content"], str) and m["role"] == "user"
    )
    assert f"task {last_request}:" in text


def test_counts_with_the_requested_encoding():
    history = synthetic_history(300)

    text = summarize(history, max_tokens=200, encoding="cl100k_base")

    assert count_text_tokens(text, "cl100k_base") <= 200


def test_identifiers_are_kept_verbatim():
    odd = "src/weird-Name_v2.0/ünïcode.py"
    text = summarize([user("look"), *exchange("t1", "Read", {"file_path": odd}, "x")])

    assert f"- {odd}: read" in text


def test_required_identifiers_get_their_own_section_first():
    history = synthetic_history(800, words_per_message=60)
    required = ("src/needle/one.py", "https://example.com/needle", "NeedleError: boom")

    text = summarize(history, max_tokens=300, required_identifiers=required)

    kept = section(text, KEY_IDENTIFIERS)
    assert kept.splitlines() == [f"- {item}" for item in required]
    assert count_text_tokens(text) <= 300


def test_an_earlier_summary_is_merged_into_the_sections():
    earlier = make_summary_message(
        "Goals and key decisions:\n- Migrate the database to PostgreSQL\n\n"
        "File operations:\n- db/schema.sql: modified\n\n"
        "Errors and fixes:\n- none"
    )
    text = summarize([earlier, *SESSION])

    assert "- Migrate the database to PostgreSQL" in section(text, "Goals and key decisions")
    assert "- db/schema.sql: modified" in section(text, "File operations")
    assert "[ctxweb summary" not in text
    assert text.count("Goals and key decisions:") == 1
