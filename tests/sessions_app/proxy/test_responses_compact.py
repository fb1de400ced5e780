"""Compact and observe modes on the Responses route (issue 25): a growing conversation is
compacted before it is forwarded; in observe mode it is only recorded."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from sessions_app.models import Compaction, CompactionProfile, Session
from tests.sessions_app.proxy.conftest import small_default_profile
from tests.sessions_app.proxy.responses_fake import Failure, FakeResponses, message, reasoning

pytestmark = pytest.mark.django_db(transaction=True)

DEVELOPER: Any = {"type": "message", "role": "developer", "content": "Answer in one line."}


@pytest.fixture
def upstream(settings: Any) -> Iterator[FakeResponses]:
    with FakeResponses() as server:
        settings.CTXWEB_UPSTREAM_OPENAI_URL = server.base_url
        settings.CTXWEB_UPSTREAM_OPENAI_API_KEY = "sk-openai-server-key"
        yield server


@pytest.fixture
def small_profile(transactional_db: Any) -> CompactionProfile:
    """A 3000-token window compacting at half, extractive summaries."""
    return small_default_profile()


def _words(turn: int) -> str:
    return " ".join(f"word{turn}x{i}" for i in range(120))


def _conversation(
    gpt: openai.OpenAI, upstream: FakeResponses, turns: int, **extra: Any
) -> list[Any]:
    """`turns` turns, each answered with a reasoning item and a message; the history sent."""
    history: list[Any] = [DEVELOPER]
    for turn in range(turns):
        upstream.script(
            [
                reasoning(f"think {turn}", f"ENC{turn}" * 8, item_id=f"rs_{turn}"),
                message(f"answer {turn}", item_id=f"msg_{turn}"),
            ]
        )
        history.append({"role": "user", "content": f"turn {turn}: {_words(turn)}"})
        with gpt.responses.stream(model="gpt-test", input=history, store=False, **extra) as events:
            response = events.get_final_response()
        history.extend(item.model_dump(exclude_none=True) for item in response.output)
    return history


def test_a_long_conversation_is_compacted_before_it_is_forwarded(
    gpt: openai.OpenAI, upstream: FakeResponses, small_profile: CompactionProfile
) -> None:
    history = _conversation(gpt, upstream, 12)
    session = Session.objects.get()
    assert Compaction.objects.filter(session=session, status="succeeded").exists()
    last = upstream.bodies()[-1]["input"]
    client_sent = history[:-2]
    assert len(json.dumps(last)) < len(json.dumps(client_sent)) / 2
    assert last[0] == DEVELOPER  # the system part stays at the head, as sent
    # the untouched tail is the client's own items, reasoning included, as sent
    assert last[-1] == client_sent[-1]
    assert last[-3:] == client_sent[-3:]
    assert last[-3]["type"] == "reasoning"
    assert last[-3]["encrypted_content"] == "ENC10" * 8
    # the reasoning of summarized turns goes with them
    assert not any(item.get("encrypted_content") == "ENC0" * 8 for item in last)
    # a summary message stands for the compacted middle
    assert any("summary" in json.dumps(item).lower() for item in last[1:-3])
    assert session.message_count == 24


def test_observe_mode_records_and_forwards_as_sent(
    gpt: openai.OpenAI, upstream: FakeResponses, small_profile: CompactionProfile
) -> None:
    history = _conversation(gpt, upstream, 12, extra_headers={"X-Ctxweb-Mode": "observe"})
    assert upstream.bodies()[-1]["input"] == history[:-2]
    session = Session.objects.get()
    assert session.message_count == 24
    assert not Compaction.objects.filter(session=session).exists()


def test_a_refusal_for_length_is_compacted_past_and_retried(
    gpt: openai.OpenAI, upstream: FakeResponses, small_profile: CompactionProfile
) -> None:
    history = _conversation(gpt, upstream, 4)
    upstream.script(Failure(), [message("after the retry")])
    history.append({"role": "user", "content": f"turn 4: {_words(4)}"})
    response = gpt.responses.create(model="gpt-test", input=history, store=False)
    assert response.output_text == "after the retry"
    refused, retried = upstream.bodies()[-2:]
    assert refused["input"] == history
    assert len(json.dumps(retried["input"])) < len(json.dumps(refused["input"]))
    assert retried["input"][-1] == history[-1]
    session = Session.objects.get()
    assert session.message_count == 10  # the request once, its one answer once
