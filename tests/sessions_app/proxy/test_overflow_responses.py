"""Overflow recovery on the Responses route (issue 26 item 2): OpenAI's
`context_length_exceeded`, answered as a 400 or streamed as `response.failed` before any
output, is compacted past and retried once, with the openai SDK through the proxy."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from sessions_app.models import Compaction, CompactionProfile, Session
from tests.sessions_app.proxy.responses_fake import Failure, FakeResponses, message

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def upstream(settings: Any) -> Iterator[FakeResponses]:
    with FakeResponses() as server:
        settings.CTXWEB_UPSTREAM_OPENAI_URL = server.base_url
        settings.CTXWEB_UPSTREAM_OPENAI_API_KEY = "sk-openai-server-key"
        yield server


@pytest.fixture
def believes_more(transactional_db: Any) -> CompactionProfile:
    CompactionProfile.objects.update(is_default=False)
    return CompactionProfile.objects.create(
        name="believes-more",
        is_default=True,
        summarizer="extractive",
        context_limit=100_000,
        keep_recent_messages=2,
        tail_retention_ratio=0.02,
        retry_backoff_seconds=0.0,
        cooldown_seconds=0.0,
    )


def _history() -> list[Any]:
    history: list[Any] = []
    for turn in range(10):
        words = " ".join(f"w{turn}x{i}" for i in range(60))
        history.append({"role": "user", "content": f"turn {turn}: {words}"})
        history.append({"role": "assistant", "content": f"answer {turn}"})
    history.append({"role": "user", "content": "and now?"})
    return history


@pytest.mark.parametrize("stream", [False, True])
def test_a_refusal_for_length_is_compacted_past_and_retried(
    gpt: openai.OpenAI, upstream: FakeResponses, believes_more: CompactionProfile, stream: bool
) -> None:
    upstream.script(Failure(), [message("recovered")])
    arguments: dict[str, Any] = {"model": "gpt-test", "input": _history(), "store": False}
    if stream:
        with gpt.responses.stream(**arguments) as events:
            kinds = [event.type for event in events]
            response = events.get_final_response()
        assert "response.failed" not in kinds  # the client never saw the refusal
    else:
        response = gpt.responses.create(**arguments)
    assert response.output_text == "recovered"
    assert len(upstream.requests) == 2
    first, retry = (json.dumps(r.body["input"]) for r in upstream.requests)
    assert len(retry) < len(first)
    assert retry.endswith(json.dumps(_history()[-1:])[1:])  # the newest message as sent
    session = Session.objects.get()
    assert session.upstream_window is not None
    assert Compaction.objects.filter(session=session, trigger="overflow").exists()
    assert session.message_count == len(_history()) + 1  # stored once, and the answer


def test_a_stream_that_answers_goes_through_as_it_came(
    gpt: openai.OpenAI, upstream: FakeResponses, believes_more: CompactionProfile
) -> None:
    upstream.script([message("partial")])
    with gpt.responses.stream(model="gpt-test", input=_history(), store=False) as events:
        response = events.get_final_response()
    assert response.output_text == "partial"
    assert len(upstream.requests) == 1
    assert Session.objects.get().upstream_window is None
