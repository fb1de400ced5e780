"""The Claude Code CLI itself through the proxy (uvicorn in this process, the test
database): the real client, offline (tests/support/claude_code.py), against the fake
Anthropic API. tests/deploy/test_claude_code_served.py runs it against gunicorn."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sessions_app.importers.blocks import content_text
from sessions_app.models import Compaction, CompactionProfile, Message, Session
from sessions_app.services.importing.files import import_file
from tests.support.asgi_server import AsgiServer
from tests.support.claude_code import require_cli, run_claude
from tests.support.fake_anthropic import Reply
from tests.support.fake_streaming import StreamingAnthropic

pytestmark = pytest.mark.django_db(transaction=True)

Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def claude_code(proxy_server: AsgiServer, ctx_key: str, tmp_path: Path) -> Run:
    """Runs `claude -p PROMPT [ARGS]` in a throwaway HOME, pointed at the proxy with a
    ctxweb key as its API key (keyword arguments add or replace environment variables);
    returns the finished process."""
    require_cli()
    base_url = f"{proxy_server.url}/proxy/anthropic"

    def run(prompt: str, *args: str, **variables: str) -> subprocess.CompletedProcess[str]:
        return run_claude(base_url, ctx_key, tmp_path, prompt, *args, environment=variables)

    return run


def _texts(session: Session, role: str) -> list[str]:
    rows = Message.objects.filter(session=session, role=role).order_by("seq")
    return [content_text(row.content) for row in rows]


def test_claude_code_sessions_are_stored_continued_and_passed_through(
    claude_code: Run, upstream_anthropic: StreamingAnthropic, ctx_key: str
) -> None:
    upstream_anthropic.script(Reply.text("First answer."), Reply.text("Second answer."))

    first = claude_code("Say hello")
    second = claude_code("And again", "--continue")

    assert (first.returncode, first.stdout.strip()) == (0, "First answer."), first.stderr
    assert (second.returncode, second.stdout.strip()) == (0, "Second answer."), second.stderr
    session = Session.objects.get()  # --continue went on with the same session
    assert session.title == "Say hello"  # not the <system-reminder> Claude Code puts first
    assert _texts(session, "assistant") == ["First answer.", "Second answer."]
    assert _texts(session, "user")[-1] == "And again"
    calls = upstream_anthropic.requests
    assert len(calls) == 2
    for call in calls:
        assert call.path.endswith("?beta=true")  # the query string passes through
        assert call.api_key == "sk-ant-server-key"
        assert ctx_key not in json.dumps(call.body)
        assert call.body["stream"] is True
        names = {tool["name"] for tool in call.body["tools"]}
        assert {"Bash", "Read", "Edit"} <= names  # Claude Code's own tools, forwarded
        assert session.external_id in call.body["metadata"]["user_id"]
    # Nothing to compact yet: the history goes up as the client sent it, system-role message,
    # cache breakpoint on the last block and all.
    first_call, second_call = (call.body["messages"] for call in calls)
    assert [m["role"] for m in second_call] == ["user", "system", "assistant", "user"]
    assert second_call[0] == first_call[0]
    assert second_call[-1]["content"] == [
        {"type": "text", "text": "And again", "cache_control": {"type": "ephemeral"}}
    ]


def test_its_own_transcript_imports_to_the_same_conversation(
    claude_code: Run, upstream_anthropic: StreamingAnthropic, user: Any, tmp_path: Path
) -> None:
    upstream_anthropic.script(Reply.text("First answer."), Reply.text("Second answer."))
    assert claude_code("Say hello").returncode == 0
    assert claude_code("And again", "--continue").returncode == 0
    proxied = Session.objects.get()
    [transcript] = (tmp_path / ".claude" / "projects").glob("*/*.jsonl")

    report = import_file(user, transcript)

    imported = report.session
    assert imported.pk != proxied.pk
    assert report.skipped == []  # every line of the newest format is understood
    assert imported.title == "Say hello"
    assert transcript.stem == proxied.external_id  # both name Claude Code's session id
    assert _texts(imported, "assistant") == _texts(proxied, "assistant")
    assert [t for t in _texts(imported, "user") if t] == ["Say hello", "And again"]


def test_claude_code_keeps_its_own_key_with_the_ctxweb_key_in_a_header(
    claude_code: Run, upstream_anthropic: StreamingAnthropic, ctx_key: str
) -> None:
    upstream_anthropic.script(Reply.text("Own key answer."))

    done = claude_code(
        "Use my key",
        ANTHROPIC_API_KEY="sk-ant-own-key",
        ANTHROPIC_CUSTOM_HEADERS=f"X-Ctxweb-Key: {ctx_key}",
    )

    assert (done.returncode, done.stdout.strip()) == (0, "Own key answer."), done.stderr
    [call] = upstream_anthropic.requests
    assert call.api_key == "sk-ant-own-key"  # untouched, and never ctxweb's key
    assert "x-ctxweb-key" not in call.headers
    session = Session.objects.get()
    assert session.title == "Use my key"
    assert _texts(session, "assistant") == ["Own key answer."]


def _read(tool_id: str, path: Path) -> Reply:
    call = {"type": "tool_use", "id": tool_id, "name": "Read", "input": {"file_path": str(path)}}
    return Reply.blocks([call], stop_reason="tool_use")


def test_a_long_claude_code_run_is_compacted_under_it(
    claude_code: Run, upstream_anthropic: StreamingAnthropic, tmp_path: Path
) -> None:
    CompactionProfile.objects.update(is_default=False)
    CompactionProfile.objects.create(
        name="claude-code-small",
        is_default=True,
        summarizer="extractive",
        context_limit=30_000,
        trigger_ratio=0.5,
        keep_recent_messages=2,
        tail_retention_ratio=0.1,
        cooldown_seconds=0.0,
        prepare_at=None,  # compacted inside the request: no background worker runs here
    )
    files = []
    (tmp_path / "project").mkdir()
    for n in range(6):
        path = tmp_path / "project" / f"notes{n}.txt"
        path.write_text(
            "\n".join(f"note {n}.{line}: " + "lorem ipsum dolor " * 8 for line in range(60))
        )
        files.append(path)
    upstream_anthropic.script(
        *(_read(f"toolu_{n:02d}", f) for n, f in enumerate(files)), Reply.text("Done.")
    )

    done = claude_code("Read my notes", "--allowedTools", "Read")

    assert (done.returncode, done.stdout.strip()) == (0, "Done."), done.stderr
    session = Session.objects.get()
    stored = list(Message.objects.filter(session=session).order_by("seq"))
    assert "note 5.59: lorem" in json.dumps([m.content for m in stored])  # Claude Code read it
    compactions = Compaction.objects.filter(session=session, status="succeeded")
    assert compactions.exists()
    assert {c.trigger for c in compactions} == {"auto"}  # the pre-call check, before a call
    # Claude Code sent its whole history each time; upstream got the compacted context.
    sent_by_client = len(stored) - 1  # all but the last answer
    last = upstream_anthropic.requests[-1].body["messages"]
    assert len(last) < sent_by_client
    assert "summary" in json.dumps(last[0]).lower()
    # The system prompt and tools counted with the messages kept the context under the window.
    assert session.context_tokens + 9_000 < 30_000


def test_claude_code_retries_a_rate_limit_through_the_proxy_and_stores_once(
    claude_code: Run, upstream_anthropic: StreamingAnthropic
) -> None:
    upstream_anthropic.script(
        Reply.rate_limited(retry_after="0"), Reply.server_error(), Reply.text("After retries.")
    )

    done = claude_code("Try until it works")

    assert (done.returncode, done.stdout.strip()) == (0, "After retries."), done.stderr
    assert len(upstream_anthropic.requests) == 3  # the 429 and the 500 reached Claude Code
    session = Session.objects.get()
    assert _texts(session, "assistant") == ["After retries."]
    assert [t for t in _texts(session, "user") if "Try until it works" in t]
    assert session.message_count == 3  # the prompt, Claude Code's system message, the answer


def test_after_claude_code_compacts_itself_a_continued_session_starts(
    claude_code: Run, upstream_anthropic: StreamingAnthropic
) -> None:
    upstream_anthropic.script(
        Reply.text("First answer."),
        Reply.text("<summary>We said hello.</summary>"),  # Claude Code's /compact request
        Reply.text("After compacting."),
    )
    assert claude_code("Say hello").returncode == 0
    first = Session.objects.get()
    stored = [m.content for m in Message.objects.filter(session=first).order_by("seq")]

    assert claude_code("/compact", "--continue").returncode == 0
    done = claude_code("Go on", "--continue")

    assert (done.returncode, done.stdout.strip()) == (0, "After compacting."), done.stderr
    earlier, continued = Session.objects.order_by("created_at")
    assert earlier.pk == first.pk
    kept = [m.content for m in Message.objects.filter(session=first).order_by("seq")]
    assert kept[: len(stored)] == stored  # the old history is never rewritten
    assert continued.title == "Say hello (continued)"
    assert continued.parent is None
    assert continued.external_id == first.external_id  # the same Claude Code session
    assert _texts(continued, "assistant") == ["After compacting."]
