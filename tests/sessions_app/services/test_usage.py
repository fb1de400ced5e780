"""sessions_app.services.sessions.usage: the usage a session keeps from its model's last call."""

from __future__ import annotations

from sessions_app.services.sessions.usage import reported_usage, same_usage
from tests.support.histories import assistant, user


def test_the_last_assistant_usage_is_reported_with_its_total() -> None:
    messages = [
        assistant("a", usage={"input_tokens": 1, "output_tokens": 2}),
        user("u"),
        assistant("b", usage={"prompt_tokens": 10, "completion_tokens": 5}),
        assistant("c"),
    ]
    usage = reported_usage(messages)
    assert usage is not None
    assert usage["prompt_tokens"] == 10
    assert usage["total_tokens"] == 15
    assert "at" in usage


def test_no_usage_is_reported_without_an_assistant_usage() -> None:
    assert reported_usage([user("u", usage={"input_tokens": 5}), assistant("a")]) is None


def test_the_same_report_recorded_at_another_time_is_the_same_usage() -> None:
    usage = reported_usage([assistant("a", usage={"input_tokens": 3})])
    assert usage is not None
    assert same_usage({**usage, "at": "earlier"}, usage)
    assert not same_usage({**usage, "input_tokens": 4}, usage)
    assert not same_usage(None, usage)
