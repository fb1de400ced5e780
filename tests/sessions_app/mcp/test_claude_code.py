"""The real Claude Code CLI with ctxweb as an `http` MCP server (issue 28): a scripted local
model calls mcp__ctxweb__search_history, and the fact only a compaction's archived
originals hold reaches the model in the tool's result.

The CLI runs offline (tests/support/claude_code.py) against a fake Messages API; its MCP
client talks to the live ASGI app's /mcp with a ctxweb key as bearer token, from an
`--mcp-config` file. ENABLE_TOOL_SEARCH=false: MCP tools are offered directly, not deferred
behind ToolSearch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from sessions_app.models import ApiKey
from sessions_app.services.compacting.session_compaction import compact_session
from sessions_app.services.sessions.lifecycle import create_session
from tests.sessions_app.conftest import conversation_messages
from tests.support.asgi_server import AsgiServer
from tests.support.claude_code import require_cli, run_claude
from tests.support.fake_anthropic import Reply
from tests.support.fake_server import RecordedRequest
from tests.support.fake_streaming import StreamingAnthropic

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

FACT = "The release signing key lives in the vault under quokka-7"
TOOL = "mcp__ctxweb__search_history"
CALL_ID = "toolu_01ctxweb_search"
ANSWER = "The key is under quokka-7."


def _held(body: dict[str, Any]) -> str:
    return json.dumps(body.get("messages", []))


class RecallingModel(StreamingAnthropic):
    """The agent's model: it searches ctxweb's history once, then answers."""

    def _take(self, request: RecordedRequest) -> Any:
        with self._lock:
            self.requests.append(request)
        names = {tool.get("name") for tool in request.body.get("tools") or []}
        if TOOL not in names:
            return Reply.text("Side answer.")
        if CALL_ID not in _held(request.body):
            call = {"type": "tool_use", "id": CALL_ID, "name": TOOL, "input": {"query": "quokka"}}
            return Reply.blocks([call], stop_reason="tool_use")
        return Reply.text(ANSWER)


def _tool_result(requests: list[RecordedRequest]) -> str:
    """The text of the search tool's result in the last request that carries it."""
    for request in reversed(requests):
        for message in request.body.get("messages", []):
            for block in message.get("content") if isinstance(message.get("content"), list) else []:
                if block.get("type") == "tool_result" and block.get("tool_use_id") == CALL_ID:
                    return json.dumps(block.get("content"))
    return ""


def test_claude_code_reads_back_what_compaction_removed(tmp_path: Path) -> None:
    require_cli()
    owner = get_user_model().objects.create_user(username="agent", password="x-password-1")
    history = conversation_messages(8)
    history[1] = {"role": "user", "content": f"{FACT}. Keep it in mind."}
    session = create_session(owner, title="release prep", messages=history)
    compact_session(session, summary="We prepared the release.", force=True)
    _, key = ApiKey.issue(owner, "claude code")
    home = tmp_path / "home"
    home.mkdir()
    with AsgiServer() as ctxweb, RecallingModel() as model:
        config = {
            "mcpServers": {
                "ctxweb": {
                    "type": "http",
                    "url": f"{ctxweb.url}/mcp",
                    "headers": {"Authorization": f"Bearer {key}"},
                }
            }
        }
        config_path = tmp_path / "mcp.json"
        config_path.write_text(json.dumps(config))
        run = run_claude(
            model.base_url,
            "sk-ant-test",
            home,
            "Where is the release signing key? Search ctxweb's history.",
            "--mcp-config",
            str(config_path),
            "--strict-mcp-config",
            "--allowedTools",
            TOOL,
            timeout=90,
            ENABLE_TOOL_SEARCH="false",
        )
        requests = list(model.requests)
    assert run.returncode == 0, run.stderr[-2000:]
    result = _tool_result(requests)
    assert "quokka-7" in result, (result, run.stdout[-2000:], run.stderr[-2000:])
    assert str(session.pk) in result
    assert ANSWER in run.stdout
