"""The Claude Code CLI through the proxy as deployed (gunicorn, ASGI, a SQLite file), where
its concurrent requests wait for each other as in production: a subagent it starts is stored
as a session of its own, linked to the conversation that started it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.claude_code import require_cli, run_claude
from tests.support.fake_anthropic import Reply
from tests.support.fake_server import RecordedRequest, ScriptedReply
from tests.support.fake_streaming import StreamingAnthropic

from .conftest import Gunicorn, shell_call

pytestmark = pytest.mark.slow


class AgentUpstream(StreamingAnthropic):
    """Answers by what is asked, whatever the order Claude Code asks in: the main
    conversation calls its Agent tool (Claude Code starts the subagent in the background),
    waits, and ends once it is told the subagent finished; the subagent answers."""

    def _take(self, request: RecordedRequest) -> ScriptedReply:
        with self._lock:
            self.requests.append(request)
        last = json.dumps(request.body["messages"][-1])
        if "cc_is_subagent=true" in json.dumps(request.body.get("system")):
            return Reply.text("Subagent: three notes.")
        if "task-notification" in last:  # the subagent finished
            return Reply.text("Main: done.")
        if "toolu_agent_1" in last:  # the subagent started
            return Reply.text("Waiting for the agent.")
        call = {
            "type": "tool_use",
            "id": "toolu_agent_1",
            "name": "Agent",
            "input": {
                "description": "Find notes",
                "prompt": "List the notes files",
                "subagent_type": "Explore",
            },
        }
        return Reply.blocks([call], stop_reason="tool_use")


@pytest.fixture
def upstream() -> Iterator[StreamingAnthropic]:
    with AgentUpstream() as fake:
        yield fake


def test_a_subagent_is_stored_under_the_session_that_started_it(
    tmp_path: Path, gunicorn: Gunicorn, upstream: StreamingAnthropic
) -> None:
    require_cli()
    served = gunicorn(
        f"sqlite:///{tmp_path / 'db.sqlite3'}",
        seed_user="claude",
        CTXWEB_UPSTREAM_ANTHROPIC_URL=upstream.base_url,
        CTXWEB_UPSTREAM_ANTHROPIC_API_KEY="sk-ant-server",
    )
    base = f"http://127.0.0.1:{served.port}"
    home = tmp_path / "home"
    home.mkdir()

    done = run_claude(
        f"{base}/proxy/anthropic", served.key, home, "Use an agent", "--allowedTools", "Agent"
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("Main: done.")
    assert shell_call(served.env, "session_family") == [
        {"title": "Use an agent", "parent": None, "tool_use_id": ""},
        {"title": "List the notes files", "parent": "Use an agent", "tool_use_id": "toolu_agent_1"},
    ]
    assert list(shell_call(served.env, "sessions_report").values()) == [[], []]  # both whole
