"""ScriptedSummarizer: the fake summarizer for tests."""

from __future__ import annotations

import pytest

from compaction.errors import SummaryError
from compaction.summarizers import (
    AnthropicSummarizer,
    ExtractiveSummarizer,
    ScriptedSummarizer,
    Summarizer,
    SummaryRequest,
)
from tests.support.histories import user

REQUEST = SummaryRequest([user("hello")])


def test_answers_in_order_and_records_requests():
    fake = ScriptedSummarizer("one", "two")

    assert fake.summarize(REQUEST) == "one"
    assert fake.summarize(REQUEST) == "two"
    assert fake.requests == [REQUEST, REQUEST]
    assert fake.remaining == 0


def test_raises_scripted_errors():
    fake = ScriptedSummarizer(SummaryError("timeout"), "after")

    with pytest.raises(SummaryError) as caught:
        fake.summarize(REQUEST)

    assert caught.value.reason == "timeout"
    assert fake.summarize(REQUEST) == "after"


def test_callables_get_the_request():
    fake = ScriptedSummarizer(lambda request: f"{len(request.messages)} message(s)")

    assert fake.summarize(REQUEST) == "1 message(s)"


def test_default_answers_when_the_script_is_used_up():
    fake = ScriptedSummarizer(default="again")

    assert [fake.summarize(REQUEST) for _ in range(3)] == ["again"] * 3


def test_a_used_up_script_without_default_says_so():
    fake = ScriptedSummarizer("only")
    fake.summarize(REQUEST)

    with pytest.raises(RuntimeError, match="used up after 1 request"):
        fake.summarize(REQUEST)


def test_enqueue_and_name():
    fake = ScriptedSummarizer(name="mock")
    fake.enqueue("later")

    assert fake.name == "mock"
    assert fake.summarize(REQUEST) == "later"


def test_satisfies_the_protocol():
    summarizer: Summarizer = ScriptedSummarizer("x")

    assert summarizer.name == "scripted"


@pytest.mark.parametrize(
    "summarizer",
    [
        ScriptedSummarizer("x"),
        ExtractiveSummarizer(),
        AnthropicSummarizer("claude-test", api_key="sk-ant-dummy", base_url="http://127.0.0.1:9"),
    ],
    ids=["scripted", "extractive", "anthropic"],
)
def test_every_summarizer_is_a_runtime_summarizer(summarizer):
    assert isinstance(summarizer, Summarizer)


def test_an_object_without_summarize_is_not_a_summarizer():
    class NameOnly:
        name = "name-only"

    assert not isinstance(NameOnly(), Summarizer)
