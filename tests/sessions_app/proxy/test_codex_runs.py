"""The Codex CLI (`codex exec`, offline) through ctxweb's Responses route (issue 25), both ways
Codex is pointed at a server: a custom provider (`base_url`, `env_key`, `wire_api =
"responses"`, its own key and ctxweb's in `X-Ctxweb-Key`) and the built-in provider
redirected by `openai_base_url` with ctxweb's key as `CODEX_API_KEY`.

The fake upstream (tests/support/fake_responses.py) is the model: it decides each reply from
the request it gets (the next shell call the history does not hold yet, else the final text),
with a reasoning item before each call, so Codex's order of requests cannot put it out of
step. A run is one session keyed by Codex's session id, each function call and its output is
stored once, and the reasoning items reach the upstream as the fake wrote them. With a small
auto-compact limit Codex compacts itself (a custom provider: a checkpoint request with no
tools; the built-in one: a trailing `compaction_trigger` item): forwarded, recorded as a
compaction point of the same session, and the run goes on in it (window `<session>:1`).
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sessions_app.models import Compaction, CompactionProfile, Message, Session
from sessions_app.services.importing.watching import Watcher
from tests.support.asgi_server import AsgiServer
from tests.support.codex import (
    CTXWEB_KEY_VARIABLE,
    Provider,
    require_cli,
    rollouts,
    run_codex,
    session_id,
    write_config,
)
from tests.support.fake_responses import (
    CHECKPOINT_PROMPT,
    LOCAL_SUMMARY,
    FakeResponses,
    ResponsesReply,
    ResponsesRequest,
    is_local_compaction,
    is_remote_compaction,
)
from tests.support.replay import count, describe, import_once, watch_in_chunks

pytestmark = pytest.mark.django_db(transaction=True)

PROMPT = "Write hello.txt with the shell, then read it back."
FINAL = "All done: hello.txt says hello-from-codex."
OWN_KEY = "sk-own-openai-key"
SERVER_KEY = "sk-openai-server-key"
#: The shell calls of a run, in order: (call id, command).
STEPS = (
    ("call_codex_write", "echo hello-from-codex > hello.txt"),
    ("call_codex_read", "cat hello.txt"),
)
#: Codex compacts once a reply's usage passes this (write_config's compact_at).
COMPACT_AT = 5000
Item = dict[str, Any]


class CodexModel(FakeResponses):
    """The fake Responses API as Codex's model: the next step of `STEPS` the request does
    not hold yet, else `FINAL`; after a compaction (its summary or item in the request) the
    final text. `big_step`: the reply to this step reports usage past `COMPACT_AT`."""

    def __init__(self, big_step: int | None = None) -> None:
        super().__init__()
        self.big_step = big_step
        self.responder = self._next

    def _next(self, request: ResponsesRequest) -> ResponsesReply:
        if is_remote_compaction(request.body):
            return ResponsesReply.compaction()
        if is_local_compaction(request.body):
            return ResponsesReply.text(LOCAL_SUMMARY)
        held = json.dumps(request.items)
        if LOCAL_SUMMARY in held or any(i.get("type") == "compaction" for i in request.items):
            return ResponsesReply.text(FINAL)
        for number, (call_id, command) in enumerate(STEPS):
            if f'"{call_id}"' not in held:
                usage = COMPACT_AT + 3000 if number == self.big_step else 1000
                return ResponsesReply.shell(command, call_id).with_usage(usage)
        return ResponsesReply.text(FINAL, reasoning=True).with_usage(1000)

    def turns(self) -> list[ResponsesRequest]:
        """The requests Codex sent as turns (not its compaction requests), in order."""
        return [r for r in self.responses_requests() if r.kind == "turn"]


def _model(settings: Any, big_step: int | None = None) -> Iterator[CodexModel]:
    with CodexModel(big_step) as server:
        settings.CTXWEB_UPSTREAM_OPENAI_URL = server.base_url.removesuffix("/v1")
        settings.CTXWEB_UPSTREAM_OPENAI_API_KEY = SERVER_KEY
        yield server


@pytest.fixture
def model(settings: Any) -> Iterator[CodexModel]:
    """Codex's model behind ctxweb."""
    yield from _model(settings)


@pytest.fixture
def compacting_model(settings: Any) -> Iterator[CodexModel]:
    """Codex's model, its reply to the first shell call past the auto-compact limit."""
    yield from _model(settings, big_step=0)


def _run(
    provider: Provider,
    proxy: AsgiServer,
    ctx_key: str,
    home: Path,
    compact_at: int | None = None,
    headers: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`codex exec PROMPT` through ctxweb: the custom provider with its own key and ctxweb's
    in `X-Ctxweb-Key` (and `headers`), the built-in one with ctxweb's key as its key."""
    base_url = f"{proxy.url}/proxy/openai/v1"
    custom = provider == "custom"
    write_config(
        home, base_url, provider, compact_at=compact_at, ctxweb_header=custom, headers=headers
    )
    key = OWN_KEY if custom else ctx_key
    return run_codex(home, PROMPT, key, timeout=50, environment={CTXWEB_KEY_VARIABLE: ctx_key})


def _blocks(session: Session, kind: str, key: str) -> Counter[str]:
    found: Counter[str] = Counter()
    for row in Message.objects.filter(session=session):
        for block in row.content if isinstance(row.content, list) else []:
            if isinstance(block, dict) and block.get("type") == kind:
                found[str(block.get(key))] += 1
    return found


def _stored_text(session: Session) -> str:
    rows = Message.objects.filter(session=session).order_by("seq")
    return json.dumps([row.as_dict() for row in rows])


def _outline(session: Session) -> tuple[str, list[tuple[str, list[str]]]]:
    """A session's key and each message's role and block types (a failure's message)."""
    rows = Message.objects.filter(session=session).order_by("seq")
    shapes = [(row.role, [str(b.get("type")) for b in row.content]) for row in rows]
    return session.proxy_key, shapes


def _the_session(codex_id: str) -> Session:
    sessions = list(Session.objects.all())
    assert len(sessions) == 1, [_outline(session) for session in sessions]
    [session] = sessions
    assert session.external_id == codex_id
    return session


@pytest.mark.parametrize("provider", ["custom", "builtin"])
def test_a_codex_run_is_one_session_with_each_call_once(
    provider: Provider,
    proxy_server: AsgiServer,
    model: CodexModel,
    ctx_key: str,
    tmp_path: Path,
) -> None:
    require_cli()

    done = _run(provider, proxy_server, ctx_key, tmp_path)

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
    session = _the_session(codex_id)
    calls = Counter(call_id for call_id, _ in STEPS)
    assert _blocks(session, "tool_use", "id") == calls
    assert _blocks(session, "tool_result", "tool_use_id") == calls
    assert FINAL in _stored_text(session)


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

    done = _run(provider, proxy_server, ctx_key, tmp_path, compact_at=COMPACT_AT)

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
    session = _the_session(codex_id)
    [point] = Compaction.objects.filter(session=session)
    assert point.trigger == Compaction.Trigger.IMPORTED
    if provider == "custom":
        assert LOCAL_SUMMARY in point.summary
    else:
        assert "encrypted" in point.summary.lower() or "opaque" in point.summary.lower()
    stored = _stored_text(session)
    assert CHECKPOINT_PROMPT not in stored  # the compaction request is not a turn
    after = Message.objects.filter(session=session, seq__gt=point.last_seq or 0)
    assert FINAL in json.dumps([row.as_dict() for row in after])
    assert _blocks(session, "tool_use", "id") == Counter([STEPS[0][0]])


@pytest.mark.parametrize("how", ["import", "watch"])
def test_a_proxied_run_imported_or_watched_too_stays_one_session(
    how: str,
    proxy_server: AsgiServer,
    model: CodexModel,
    ctx_key: str,
    tmp_path: Path,
    user: Any,
) -> None:
    """Codex's rollout of a proxied run, imported (twice) or watched in pieces cut mid-line
    by the same user, finds the proxied session by Codex's session id and adds nothing: the
    proxy holds every message of it (the developer messages as its overhead)."""
    require_cli()
    done = _run("custom", proxy_server, ctx_key, tmp_path / "home")
    assert done.returncode == 0, done.stderr
    [rollout] = rollouts(tmp_path / "home")
    proxied = describe(user)
    assert count(proxied) == 1

    if how == "import":
        import_once(rollout, user)
        after = import_once(rollout, user)
    else:
        size = rollout.stat().st_size
        cuts = [size // 4, size // 2 + 3, size - size // 7]
        after = watch_in_chunks(rollout, cuts, tmp_path / "watched", user)

    assert after == proxied
    session = _the_session(session_id(done))
    assert session.source_path.endswith(rollout.name)


def test_what_the_proxy_missed_is_taken_from_the_rollout_once(
    proxy_server: AsgiServer, model: CodexModel, ctx_key: str, tmp_path: Path, user: Any
) -> None:
    """The final answer the proxy did not store (a client gone before the stream ended, say)
    is appended from the rollout, once however often it is read."""
    require_cli()
    done = _run("custom", proxy_server, ctx_key, tmp_path / "home")
    assert done.returncode == 0, done.stderr
    [rollout] = rollouts(tmp_path / "home")
    session = _the_session(session_id(done))
    last = Message.objects.filter(session=session).order_by("seq").last()
    assert last is not None
    assert FINAL in json.dumps(last.content)
    last.delete()

    import_once(rollout, user)
    import_once(rollout, user)

    rows = list(Message.objects.filter(session=session).order_by("seq"))
    assert [FINAL in json.dumps(row.content) for row in rows].count(True) == 1
    assert (rows[-1].role, FINAL in json.dumps(rows[-1].content)) == ("assistant", True)
    assert Session.objects.count() == 1


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

    done = _run("custom", proxy_server, ctx_key, tmp_path)

    assert done.returncode == 1
    assert said in done.stderr, done.stderr
    assert [r.kind for r in model.responses_requests()] == ["turn"]
    [session] = Session.objects.all()
    assert PROMPT in _stored_text(session)


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

    done = _run("custom", proxy_server, ctx_key, tmp_path)

    assert (done.returncode, done.stdout.strip()) == (0, FINAL), done.stderr
    turns = long_model.turns()
    assert len(turns) == LONG_STEPS + 1
    session = _the_session(session_id(done))
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

    done = _run("custom", proxy_server, ctx_key, tmp_path, headers={"X-Ctxweb-Mode": "observe"})

    assert (done.returncode, done.stdout.strip()) == (0, FINAL), done.stderr
    turns = long_model.turns()
    assert {r.headers.get("x-ctxweb-mode") for r in turns} == {None}  # ctxweb's, not upstream's
    session = _the_session(session_id(done))
    assert not Compaction.objects.filter(session=session).exists()
    forwarded = json.dumps(turns[-1].items)
    assert all(f'"call_step_{step}"' in forwarded for step in range(LONG_STEPS))
    calls = Counter(f"call_step_{step}" for step in range(LONG_STEPS))
    assert _blocks(session, "tool_use", "id") == calls


@pytest.mark.parametrize("provider", ["custom", "builtin"])
def test_the_rollout_of_a_run_codex_compacted_adds_nothing_to_its_session(
    provider: Provider,
    proxy_server: AsgiServer,
    compacting_model: CodexModel,
    ctx_key: str,
    tmp_path: Path,
    user: Any,
) -> None:
    """Codex's rollout records its compaction too (a `compacted` line, the built-in
    provider's `compaction` item): imported after the proxied run, it adds no second
    compaction point and no message."""
    require_cli()
    done = _run(provider, proxy_server, ctx_key, tmp_path / "home", compact_at=COMPACT_AT)
    assert done.returncode == 0, done.stderr
    [rollout] = rollouts(tmp_path / "home")
    proxied = describe(user)

    assert import_once(rollout, user) == proxied

    session = _the_session(session_id(done))
    assert Compaction.objects.filter(session=session).count() == 1


def test_a_rollout_watched_before_the_proxy_stored_the_run_goes_to_the_proxied_session(
    proxy_server: AsgiServer, model: CodexModel, ctx_key: str, tmp_path: Path, user: Any
) -> None:
    """The watcher can read a rollout's first lines while the proxy still waits for the
    first answer (it stores a turn with its answer) and make a session of its own. Once
    the proxied session exists, the next scan hands the file over to it and the watcher's
    session goes: one session, the proxy's, holding nothing twice."""
    require_cli()
    done = _run("custom", proxy_server, ctx_key, tmp_path / "home")
    assert done.returncode == 0, done.stderr
    [rollout] = rollouts(tmp_path / "home")
    proxied = describe(user)
    session = _the_session(session_id(done))
    lines = rollout.read_bytes().splitlines(keepends=True)
    prompt = next(n for n, line in enumerate(lines) if PROMPT.encode() in line)
    copy = tmp_path / "watched" / rollout.name
    copy.parent.mkdir()
    copy.write_bytes(b"".join(lines[: prompt + 1]))
    # as in the race: the proxy has not stored the conversation yet when the watcher scans
    hidden = {"proxy_key": "", "external_id": ""}
    shown = {key: getattr(session, key) for key in hidden}
    Session.objects.filter(pk=session.pk).update(**hidden)
    Watcher(user, [copy.parent]).scan()
    Session.objects.filter(pk=session.pk).update(**shown)
    assert Session.objects.count() == 2

    copy.write_bytes(b"".join(lines))
    Watcher(user, [copy.parent]).scan()
    Watcher(user, [copy.parent]).scan()

    assert describe(user) == proxied
    session.refresh_from_db()
    assert session.source_path == str(copy)
