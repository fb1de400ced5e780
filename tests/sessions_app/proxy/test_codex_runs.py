"""The Codex CLI (`codex exec`, offline) through ctxweb's Responses route (issue 25), with
both provider setups (tests/sessions_app/proxy/codex_harness.py).

A run is one session keyed by Codex's session id, each function call and its output is
stored once, and the reasoning items reach the upstream as the model wrote them. With a small
auto-compact limit Codex compacts itself (a custom provider: a checkpoint request with no
tools; the built-in one: a trailing `compaction_trigger` item): forwarded, recorded as a
compaction point of the same session, and the run goes on in it (window `<session>:1`).
Upstream failures reach Codex as sent; a long run is compacted by ctxweb before it is
forwarded in compact mode, and forwarded as sent in observe mode.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sessions_app.models import Compaction, CompactionProfile, Message, Session
from tests.sessions_app.proxy.codex_harness import (  # noqa: F401 (fixtures)
    COMPACT_AT,
    FINAL,
    OWN_KEY,
    PROMPT,
    SERVER_KEY,
    STEPS,
    CodexModel,
    blocks,
    compacting_model_fixture,
    model_fixture,
    run_through_ctxweb,
    stored_text,
    the_session,
)
from tests.support.asgi_server import AsgiServer
from tests.support.codex import Provider, require_cli, session_id
from tests.support.fake_responses import (
    CHECKPOINT_PROMPT,
    LOCAL_SUMMARY,
    ResponsesReply,
    ResponsesRequest,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("provider", ["custom", "builtin"])
def test_a_codex_run_is_one_session_with_each_call_once(
    provider: Provider,
    proxy_server: AsgiServer,
    model: CodexModel,
    ctx_key: str,
    tmp_path: Path,
) -> None:
    require_cli()

    done = run_through_ctxweb(provider, proxy_server, ctx_key, tmp_path)

    assert (done.returncode, done.stdout.strip()) == (0, FINAL), done.stderr
    assert (tmp_path / "project" / "hello.txt").read_text() == "hello-from-codex\n"
    turns = model.turns()
    assert len(turns) == len(STEPS) + 1, [r.kind for r in model.responses_requests()]
    # the caller's own key upstream (custom), else the server's; never ctxweb's
    assert {r.api_key for r in turns} == {OWN_KEY if provider == "custom" else SERVER_KEY}
    assert not [r for r in model.requests if r.method == "GET"]  # ctxweb answered the upgrade
    codex_id = session_id(done)
    assert {r.headers.get("session-id") for r in turns} == {codex_id}
    _assert_reasoning_reached_upstream_unchanged(model)
    session = the_session(codex_id)
    calls = Counter(call_id for call_id, _ in STEPS)
    assert blocks(session, "tool_use", "id") == calls
    assert blocks(session, "tool_result", "tool_use_id") == calls
    assert FINAL in stored_text(session)


def _assert_reasoning_reached_upstream_unchanged(model: CodexModel) -> None:
    """Every reasoning item the model answered came back upstream with each of its fields as
    the model wrote them (id, summary, encrypted content); Codex may add fields of its own
    (the built-in provider: `content: null` and its turn metadata)."""
    written = [item for item in model.answered if item["type"] == "reasoning"]
    sent = {
        str(item.get("id")): item
        for request in model.turns()
        for item in request.items
        if item.get("type") == "reasoning"
    }
    assert len(written) == len(STEPS) + 1  # one before each call and the final answer
    for item in written[: len(STEPS)]:  # the final answer's is never sent back
        back = sent[item["id"]]
        assert {key: back.get(key) for key in item} == item


@pytest.mark.parametrize("provider", ["custom", "builtin"])
def test_codex_compacting_itself_is_a_compaction_point_of_the_same_session(
    provider: Provider,
    proxy_server: AsgiServer,
    compacting_model: CodexModel,
    ctx_key: str,
    tmp_path: Path,
) -> None:
    require_cli()

    done = run_through_ctxweb(provider, proxy_server, ctx_key, tmp_path, compact_at=COMPACT_AT)

    assert (done.returncode, done.stdout.strip()) == (0, FINAL), done.stderr
    requests = compacting_model.responses_requests()
    kinds = [r.kind for r in requests]
    assert kinds == ["turn", "compaction", "turn"], kinds
    compacting = requests[1]
    if provider == "custom":
        assert compacting.body["tools"] == []
        assert CHECKPOINT_PROMPT in json.dumps(compacting.items[-1])
    else:
        assert compacting.items[-1] == {"type": "compaction_trigger"}
    codex_id = session_id(done)
    windows = [r.headers.get("x-codex-window-id") for r in requests]
    assert windows == [f"{codex_id}:0", f"{codex_id}:0", f"{codex_id}:1"]
    session = the_session(codex_id)
    [point] = Compaction.objects.filter(session=session)
    assert point.trigger == Compaction.Trigger.IMPORTED
    if provider == "custom":
        assert LOCAL_SUMMARY in point.summary
    else:
        assert "encrypted" in point.summary.lower() or "opaque" in point.summary.lower()
    stored = stored_text(session)
    assert CHECKPOINT_PROMPT not in stored  # the compaction request is not a turn
    after = Message.objects.filter(session=session, seq__gt=point.last_seq or 0)
    assert FINAL in json.dumps([row.as_dict() for row in after])
    assert blocks(session, "tool_use", "id") == Counter([STEPS[0][0]])


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        (ResponsesReply.context_exceeded(), "ran out of room in the model's context window"),
        (ResponsesReply.rate_limited("1"), "429 Too Many Requests"),
        (ResponsesReply.error_in_stream(), "stream closed before response.completed"),
    ],
    ids=["response.failed", "429", "error-event"],
)
def test_an_upstream_failure_reaches_codex_as_sent(
    reply: ResponsesReply,
    said: str,
    proxy_server: AsgiServer,
    model: CodexModel,
    ctx_key: str,
    tmp_path: Path,
) -> None:
    """A `response.failed` (context_length_exceeded), a 429 and an `error` event come to
    Codex as the upstream sent them: it reports each as it does talking to OpenAI, and
    ctxweb neither retries nor loses the turn's request (its prompt is stored)."""
    require_cli()
    model.script(reply)

    done = run_through_ctxweb("custom", proxy_server, ctx_key, tmp_path)

    assert done.returncode == 1
    assert said in done.stderr, done.stderr
    assert [r.kind for r in model.responses_requests()] == ["turn"]
    [session] = Session.objects.all()
    assert PROMPT in stored_text(session)


LONG_STEPS = 6


class LongCodexModel(CodexModel):
    """Codex's model for a long run: `LONG_STEPS` shell calls, each printing its marker and
    a thousand lines, then `FINAL`. The next step follows the newest marker the request
    holds, so a compacted history (the older outputs summarized) keeps it in step."""

    def _next(self, request: ResponsesRequest) -> ResponsesReply:
        held = json.dumps(request.items)
        done = [step for step in range(LONG_STEPS) if f"STEP-{step}-DONE" in held]
        step = max(done) + 1 if done else 0
        if step >= LONG_STEPS:
            return ResponsesReply.text(FINAL, reasoning=True)
        command = f"printf 'STEP-{step}-DONE\\n'; seq 1 1000"
        return ResponsesReply.shell(command, f"call_step_{step}")


@pytest.fixture
def long_model(settings: Any) -> Iterator[LongCodexModel]:
    with LongCodexModel() as server:
        settings.CTXWEB_UPSTREAM_OPENAI_URL = server.base_url.removesuffix("/v1")
        settings.CTXWEB_UPSTREAM_OPENAI_API_KEY = SERVER_KEY
        yield server


def _compacting_profile() -> None:
    """The default profile: compact mode at half of a 32k window (Codex's developer prompt
    and tools, about 8k tokens, count), extractive summaries, the newest two messages kept,
    compacting in the request that reaches the threshold."""
    CompactionProfile.objects.update(is_default=False)
    CompactionProfile.objects.create(
        name="codex-long",
        is_default=True,
        summarizer="extractive",
        context_limit=32_000,
        trigger_ratio=0.5,
        keep_recent_messages=2,
        tail_retention_ratio=0.1,
        retry_backoff_seconds=0.0,
        cooldown_seconds=0.0,
        proxy_mode="compact",
        prepare_at=None,  # compact in the request that reaches the threshold (no worker here)
    )


def test_a_long_codex_run_is_compacted_before_it_is_forwarded(
    proxy_server: AsgiServer, long_model: LongCodexModel, ctx_key: str, tmp_path: Path
) -> None:
    """Codex sends its whole history every turn; in compact mode ctxweb forwards the runtime
    context instead once the session passes its threshold: the developer messages at the head
    as sent, the older calls summarized, the newest items (a reasoning item and its call
    included) as Codex sent them. Codex still finishes, in one session."""
    require_cli()
    _compacting_profile()

    done = run_through_ctxweb("custom", proxy_server, ctx_key, tmp_path)

    assert (done.returncode, done.stdout.strip()) == (0, FINAL), done.stderr
    turns = long_model.turns()
    assert len(turns) == LONG_STEPS + 1
    session = the_session(session_id(done))
    assert Compaction.objects.filter(session=session).exclude(trigger="imported").exists()
    first, last = turns[0].items, turns[-1].items
    assert last[0] == first[0]  # the developer prompt, as sent
    forwarded = json.dumps(last)
    assert '"call_step_0"' not in forwarded  # summarized before it was forwarded
    assert f'"call_step_{LONG_STEPS - 1}"' in forwarded  # the newest call, kept
    newest = [item for item in last if item.get("type") == "reasoning"][-1]
    [written] = [item for item in long_model.answered if item["id"] == newest["id"]]
    assert {key: newest.get(key) for key in written} == written


def test_a_long_codex_run_in_observe_mode_is_forwarded_as_sent(
    proxy_server: AsgiServer, long_model: LongCodexModel, ctx_key: str, tmp_path: Path
) -> None:
    """The same run with `X-Ctxweb-Mode: observe` (Codex's `http_headers`): recorded, never
    compacted, every request forwarded with the whole history Codex sent."""
    require_cli()
    _compacting_profile()

    done = run_through_ctxweb(
        "custom", proxy_server, ctx_key, tmp_path, headers={"X-Ctxweb-Mode": "observe"}
    )

    assert (done.returncode, done.stdout.strip()) == (0, FINAL), done.stderr
    turns = long_model.turns()
    assert {r.headers.get("x-ctxweb-mode") for r in turns} == {None}  # ctxweb's, not upstream's
    session = the_session(session_id(done))
    assert not Compaction.objects.filter(session=session).exists()
    forwarded = json.dumps(turns[-1].items)
    assert all(f'"call_step_{step}"' in forwarded for step in range(LONG_STEPS))
    calls = Counter(f"call_step_{step}" for step in range(LONG_STEPS))
    assert blocks(session, "tool_use", "id") == calls
