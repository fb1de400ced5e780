"""Many clients of one conversation at once, through the production server (gunicorn, two
workers) on SQLite and on PostgreSQL: every turn a client sent and got an answer for is
stored exactly once, in a session holding exactly that client's conversation
(docs/behaviour.md, "Concurrent requests of one conversation").

The fake upstream answers each request from its last user message, so clients sending the
same request get the same answer, as a stored answer stands for a retried request's.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anthropic
import pytest

from tests.support.fake_anthropic import Reply
from tests.support.fake_server import RecordedRequest
from tests.support.fake_streaming import StreamingAnthropic

from .conftest import PROXIED, Gunicorn, Served, query

pytestmark = pytest.mark.slow

CLIENTS = 10
TURNS = 3

Conversation = list[tuple[str, str]]


class EchoingAnthropic(StreamingAnthropic):
    """Answers each request with a text made from its last user message."""

    def _take(self, request: RecordedRequest) -> Reply:
        self._record(request)
        return Reply.text(f"answer to {request.prompt}")


@pytest.fixture
def served(gunicorn: Gunicorn, any_database: str) -> Iterator[Served]:
    with EchoingAnthropic() as upstream:
        yield gunicorn(
            any_database,
            workers=2,
            seed_user="racer",
            CTXWEB_UPSTREAM_ANTHROPIC_URL=upstream.base_url,
            CTXWEB_UPSTREAM_ANTHROPIC_API_KEY="sk-ant-server",
            CTXWEB_LOG_LEVEL="WARNING",
        )


def _client(served: Served) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        api_key=served.key,
        base_url=f"http://127.0.0.1:{served.port}/proxy/anthropic",
        default_headers={"X-Forwarded-Proto": PROXIED["X-Forwarded-Proto"]},
        max_retries=0,  # a retry by the SDK would hide a failed request
        timeout=60,
    )


def _turn(client: anthropic.Anthropic, conversation: Conversation, text: str, stream: bool) -> None:
    """Send `conversation` + the user's `text`; the question and its answer join it."""
    messages: list[Any] = [{"role": role, "content": said} for role, said in conversation]
    messages.append({"role": "user", "content": text})
    answer: anthropic.types.Message
    if stream:
        with client.messages.stream(model="m", max_tokens=20, messages=messages) as events:
            answer = events.get_final_message()
    else:
        answer = client.messages.create(model="m", max_tokens=20, messages=messages)
    said = "".join(block.text for block in answer.content if block.type == "text")
    assert said == f"answer to {text}"
    conversation += [("user", text), ("assistant", said)]


def _at_once(clients: int, work: Callable[[int], Conversation]) -> list[Conversation]:
    """`work(n)` for each client, all started together; their conversations (an error of
    any, such as a refused request, fails the test)."""
    barrier = threading.Barrier(clients)

    def run(number: int) -> Conversation:
        barrier.wait(timeout=60)
        return work(number)

    with ThreadPoolExecutor(clients) as pool:
        return list(pool.map(run, range(clients)))


def _stored(database_url: str) -> dict[str, Conversation]:
    """Every session's messages, as (role, text), read from the database directly."""
    rows = query(
        database_url,
        "SELECT session_id, role, content FROM sessions_app_message ORDER BY session_id, seq",
    )
    sessions: dict[str, Conversation] = {}
    for session, role, content in rows:
        decoded = json.loads(content)  # a text column (sessions_app/jsontext.py)
        if isinstance(decoded, list):
            decoded = "".join(block.get("text", "") for block in decoded)
        sessions.setdefault(str(session), []).append((role, decoded))
    return sessions


def _assert_each_stored_once(database_url: str, conversations: list[Conversation]) -> None:
    """Each client's whole conversation is exactly one session's messages, and every
    session holds the start of some client's conversation (nothing else, nothing twice)."""
    stored = list(_stored(database_url).values())
    kept = [stored.count(conversation) for conversation in conversations]
    sizes = sorted(len(messages) for messages in stored)
    assert kept == [1] * len(conversations), f"each client's, stored {kept} times; {sizes}"
    strays = [m for m in stored if not any(c[: len(m)] == m for c in conversations)]
    assert not strays, strays


def test_clients_sending_the_same_first_request_at_once_each_keep_every_turn(
    served: Served, any_database: str
) -> None:
    def work(number: int) -> Conversation:
        client, conversation = _client(served), Conversation()
        _turn(client, conversation, "Start the work", stream=number % 2 == 0)
        for turn in range(TURNS):
            _turn(client, conversation, f"client {number} turn {turn}", stream=turn % 2 == 0)
        return conversation

    _assert_each_stored_once(any_database, _at_once(CLIENTS, work))


def test_clients_forking_one_conversation_at_once_each_keep_their_branch(
    served: Served, any_database: str
) -> None:
    client, trunk = _client(served), Conversation()
    _turn(client, trunk, "Start the work", stream=False)
    _turn(client, trunk, "Go on", stream=True)

    def work(number: int) -> Conversation:
        branch, client = list(trunk), _client(served)
        _turn(client, branch, f"branch {number}", stream=number % 2 == 1)
        _turn(client, branch, f"branch {number} again", stream=number % 2 == 0)
        return branch

    _assert_each_stored_once(any_database, _at_once(CLIENTS, work))
