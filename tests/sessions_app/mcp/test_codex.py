"""The Codex CLI with ctxweb's MCP server in its config.toml (`[mcp_servers.ctxweb]`, the
README's entry: `url` and `bearer_token_env_var`): a scripted local model calls ctxweb's
search_history tool, and the fact only a compaction's originals hold reaches the model.

Codex runs offline (tests/support/codex.py) against a fake Responses API.
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
from tests.support.codex import CTXWEB_KEY_VARIABLE, require_cli, run_codex, write_config
from tests.support.fake_responses import (
    FakeResponses,
    ResponsesReply,
    ResponsesRequest,
    call_item,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

FACT = "The rollback runbook is filed under quokka-9"
CALL_ID = "call_ctxweb_search"
FINAL = "It is filed under quokka-9."


def _search_tool(body: dict[str, Any]) -> str | None:
    """The namespace Codex offers ctxweb's search_history tool in (one per MCP server:
    `{"type": "namespace", "name": "mcp__ctxweb", "tools": [...]}`), if it does."""
    for tool in body.get("tools") or []:
        inner = [str(t.get("name")) for t in tool.get("tools") or []]
        if tool.get("type") == "namespace" and "search_history" in inner:
            return str(tool["name"])
    return None


class RecallingModel(FakeResponses):
    """Codex's model: it searches ctxweb's history once, then answers."""

    def __init__(self) -> None:
        super().__init__()
        self.responder = self._next

    def _next(self, request: ResponsesRequest) -> ResponsesReply:
        namespace = _search_tool(request.body)
        if namespace is None:
            return ResponsesReply.text("No search tool offered.")
        if CALL_ID not in json.dumps(request.items):
            # A namespaced call names its tool and its namespace apart.
            call = call_item("search_history", {"query": "quokka"}, CALL_ID)
            return ResponsesReply.of({**call, "namespace": namespace})
        return ResponsesReply.text(FINAL)


def _output(requests: list[ResponsesRequest]) -> str:
    for request in reversed(requests):
        for item in request.items:
            if item.get("type") == "function_call_output" and item.get("call_id") == CALL_ID:
                return json.dumps(item.get("output"))
    return ""


def test_codex_reads_back_what_compaction_removed(tmp_path: Path) -> None:
    require_cli()
    owner = get_user_model().objects.create_user(username="codex", password="x-password-1")
    history = conversation_messages(8)
    history[1] = {"role": "user", "content": f"{FACT}. Keep it in mind."}
    session = create_session(owner, title="ops", messages=history)
    compact_session(session, summary="We worked on operations.", force=True)
    _, key = ApiKey.issue(owner, "codex")
    home = tmp_path / "home"
    with AsgiServer() as ctxweb, RecallingModel() as model:
        config = write_config(home, model.base_url)
        with config.open("a", encoding="utf-8") as out:
            out.write(
                f'\n[mcp_servers.ctxweb]\nurl = "{ctxweb.url}/mcp"\n'
                f'bearer_token_env_var = "{CTXWEB_KEY_VARIABLE}"\n'
            )
        done = run_codex(
            home,
            "Where is the rollback runbook? Search ctxweb's history.",
            "sk-test",
            timeout=90,
            environment={CTXWEB_KEY_VARIABLE: key},
        )
        requests = model.responses_requests()
    offered = [_search_tool(r.body) for r in requests]
    assert any(offered), done.stderr[-3000:]
    result = _output(requests)
    assert "quokka-9" in result, (result, done.stdout[-2000:], done.stderr[-3000:])
    assert str(session.pk) in result
    assert FINAL in done.stdout
    assert offered[0] == "mcp__ctxweb"
