"""Overflow recovery with the Claude Code CLI through the proxy (issue 26 item 2).

The model behind the proxy has a window only a little larger than Claude Code's system
prompt and tools: it refuses (400 "prompt is too long", as Anthropic's API does) any request
whose body is longer than that. The run's tool outputs outgrow it after a few steps; the
proxy compacts the session under the window it learns and retries, so the agent never sees
the refusal and finishes its run, every step stored once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sessions_app.models import Compaction, CompactionProfile, Message, Session
from tests.support.asgi_server import AsgiServer
from tests.support.claude_code import require_cli, run_claude
from tests.support.fake_anthropic import Reply
from tests.support.fake_server import RecordedRequest, ScriptedReply
from tests.support.fake_streaming import StreamingAnthropic

pytestmark = pytest.mark.django_db(transaction=True)

STEPS = 8
FINAL = "Counted eight times."
#: Characters of conversation the model takes beyond Claude Code's first request.
ROOM = 9000


def _step_of(body: dict[str, Any]) -> int:
    """The newest step whose result the request holds (0: none yet); Claude Code may end a
    request with a system reminder after the results."""
    ids = [
        str(block.get("tool_use_id") or "")
        for message in body["messages"]
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    return max((int(i.rsplit("_", 1)[1]) for i in ids if i.startswith("toolu_seq_")), default=0)


class NarrowAgentModel(StreamingAnthropic):
    """Claude Code's model: one Bash step after another, then the final text; any request
    longer than the first one plus ROOM characters is refused as too long."""

    def __init__(self) -> None:
        super().__init__()
        self.window = 0

    def _take(self, request: RecordedRequest) -> ScriptedReply:
        with self._lock:
            self.requests.append(request)
        body = request.body
        if not body.get("tools"):
            return Reply.text("Side answer.")
        size = len(json.dumps(body))
        self.window = self.window or size + ROOM
        if size > self.window:
            message = f"prompt is too long: {size // 4} tokens > {self.window // 4} maximum"
            return Reply.error(400, "invalid_request_error", message)
        step = _step_of(body)
        if step >= STEPS:
            return Reply.text(FINAL)
        call = {
            "type": "tool_use",
            "id": f"toolu_seq_{step + 1}",
            "name": "Bash",
            "input": {"command": "seq 1 700", "description": f"Count, step {step + 1}"},
        }
        return Reply.blocks([call], stop_reason="tool_use")

    def refused(self) -> int:
        return sum(
            1 for r in self.requests if self.window and len(json.dumps(r.body)) > self.window
        )


@pytest.fixture
def agent_model(settings: Any) -> Iterator[NarrowAgentModel]:
    with NarrowAgentModel() as server:
        settings.CTXWEB_UPSTREAM_ANTHROPIC_URL = server.base_url
        settings.CTXWEB_UPSTREAM_ANTHROPIC_API_KEY = "sk-ant-server-key"
        yield server


@pytest.fixture
def believes_more(transactional_db: Any) -> CompactionProfile:
    CompactionProfile.objects.update(is_default=False)
    return CompactionProfile.objects.create(
        name="believes-more",
        is_default=True,
        summarizer="extractive",
        context_limit=200_000,
        keep_recent_messages=2,
        tail_retention_ratio=0.02,
        retry_backoff_seconds=0.0,
        cooldown_seconds=0.0,
    )


def test_claude_code_never_sees_the_refusal_and_finishes_its_run(
    proxy_server: AsgiServer,
    ctx_key: str,
    agent_model: NarrowAgentModel,
    believes_more: CompactionProfile,
    tmp_path: Path,
) -> None:
    require_cli()
    (tmp_path / "tmp").mkdir()
    done = run_claude(
        f"{proxy_server.url}/proxy/anthropic",
        "sk-ant-own-key",
        tmp_path,
        "Count to 700 eight times with seq, then say so.",
        "--allowedTools",
        "Bash",
        timeout=90,
        ANTHROPIC_CUSTOM_HEADERS=f"X-Ctxweb-Key: {ctx_key}",
        TMPDIR=str(tmp_path / "tmp"),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert FINAL in done.stdout
    assert agent_model.refused() >= 1  # the window was outgrown, and recovered
    session = Session.objects.get(proxy_overhead__has_key="tools")
    assert session.upstream_window is not None
    assert Compaction.objects.filter(session=session, trigger="overflow").exists()
    calls = [
        block["id"]
        for row in Message.objects.filter(session=session, role="assistant")
        for block in (row.content if isinstance(row.content, list) else [])
        if isinstance(block, dict) and block.get("type") == "tool_use"
    ]
    assert sorted(calls) == sorted(f"toolu_seq_{n}" for n in range(1, STEPS + 1))
