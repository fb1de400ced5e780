"""The MCP server at /mcp (issue 28), driven by the `mcp` SDK's own client against the live
ASGI app under uvicorn: handshake, tools, bearer auth, owner isolation, paging, bad
arguments as tool errors."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
import httpx2
import pytest
from django.contrib.auth import get_user_model
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from sessions_app.models import ApiKey, Compaction, Session
from sessions_app.services.compacting.session_compaction import compact_session
from sessions_app.services.sessions.lifecycle import create_session
from tests.sessions_app.conftest import conversation_messages
from tests.support.asgi_server import AsgiServer

pytestmark = pytest.mark.django_db(transaction=True)

FACT = "The staging database password is kept in the vault under quokka-7"
T = TypeVar("T")


@dataclass(frozen=True)
class Live:
    url: str
    key: str
    other_key: str
    session: Session


@pytest.fixture
def live() -> Iterator[Live]:
    users = get_user_model().objects
    alice = users.create_user(username="alice", password="x-password-1")
    bob = users.create_user(username="bob", password="x-password-2")
    history = conversation_messages(8)
    history[1] = {"role": "user", "content": f"{FACT}. Remember it."}
    session = create_session(alice, title="deploy work", messages=history)
    compact_session(session, summary="We worked on the deploy.", force=True)
    with AsgiServer() as server:
        yield Live(
            f"{server.url}/mcp",
            ApiKey.issue(alice, "mcp")[1],
            ApiKey.issue(bob, "mcp")[1],
            session,
        )


def _with_client(url: str, key: str, use: Callable[[Client], Awaitable[T]]) -> T:
    async def run() -> T:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30)
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            return await use(client)

    return asyncio.run(run())


def _call(live: Live, name: str, arguments: dict[str, Any], key: str = "") -> CallToolResult:
    async def use(client: Client) -> CallToolResult:
        return await client.call_tool(name, arguments)

    return _with_client(live.url, key or live.key, use)


def _text(result: CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def _data(result: CallToolResult) -> Any:
    assert not result.is_error, _text(result)
    return result.structured_content or json.loads(_text(result))


def test_handshake_and_the_four_tools_with_their_schemas(live: Live) -> None:
    async def use(client: Client) -> Any:
        return client.server_info, client.instructions, (await client.list_tools()).tools

    info, instructions, tools = _with_client(live.url, live.key, use)
    assert info is not None
    assert info.name == "ctxweb"
    assert "read_messages" in (instructions or "")
    schemas = {tool.name: tool.input_schema for tool in tools}
    assert set(schemas) == {"search_history", "read_messages", "context_status", "compact_now"}
    assert schemas["search_history"]["required"] == ["query"]
    assert set(schemas["search_history"]["properties"]) == {"query", "session", "limit"}
    assert set(schemas["read_messages"]["properties"]) == {"session", "start", "end", "compaction"}
    assert schemas["context_status"]["required"] == ["session"]
    assert set(schemas["compact_now"]["properties"]) == {"session", "instructions", "summary"}
    assert all(tool.description for tool in tools)


@pytest.mark.parametrize("header", [None, "Bearer ctx_not_a_key", "Basic abc"])
def test_refused_without_a_valid_key(live: Live, header: str | None) -> None:
    headers = {"Authorization": header} if header else {}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    response = httpx.post(live.url, json=body, headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")


def test_search_finds_what_only_the_compaction_holds(live: Live) -> None:
    hits = _data(_call(live, "search_history", {"query": "quokka vault"}))["hits"]
    assert [(h["session"], h["index"], h["compaction"]) for h in hits] == [
        (str(live.session.pk), 1, 1)
    ]
    assert hits[0]["title"] == "deploy work"
    assert "quokka" in hits[0]["snippet"]


def test_read_messages_of_a_compaction_and_pages(live: Live) -> None:
    text = _text(_call(live, "read_messages", {"session": str(live.session.pk), "compaction": 1}))
    assert "compacted as #1" in text
    assert "[1] user" in text
    assert FACT in text
    one = _text(
        _call(live, "read_messages", {"session": str(live.session.pk), "start": 1, "end": 1})
    )
    assert FACT in one
    assert "[2]" not in one


def test_long_histories_are_paged_and_long_texts_cut(live: Live) -> None:
    owner = live.session.owner
    big = [{"role": "user", "content": f"part {n} " + "x" * 6_000} for n in range(20)]
    big = [m for n, m in enumerate(big) for m in (m, {"role": "assistant", "content": f"ok {n}"})]
    session = create_session(owner, title="big", messages=big)
    arguments = {"session": str(session.pk)}
    first = _text(_call(live, "read_messages", arguments))
    assert "characters cut" in first
    assert "[more: call read_messages" in first
    start = int(first.rsplit("start=", 1)[1].split(",")[0])
    second = _text(_call(live, "read_messages", {**arguments, "start": start}))
    assert f"[{start}] " in second
    assert f"[{start - 1}] " not in second
    whole = _text(_call(live, "read_messages", {**arguments, "start": 0, "end": 0}))
    assert "characters cut" not in whole


def test_context_status_reports_tokens_threshold_and_compactions(live: Live) -> None:
    status = _data(_call(live, "context_status", {"session": str(live.session.pk)}))
    live.session.refresh_from_db()
    assert status["tokens"] >= live.session.context_tokens
    assert 0 < status["threshold"] < status["limit"]
    [compaction] = status["compactions"]
    assert compaction["number"] == 1
    assert compaction["first_index"] <= 1 <= compaction["last_index"]
    assert compaction["tokens_after"] < compaction["tokens_before"]


def test_compact_now_with_the_agents_own_summary(live: Live) -> None:
    session = create_session(live.session.owner, messages=conversation_messages(8))
    answer = _data(
        _call(live, "compact_now", {"session": str(session.pk), "summary": "My own summary."})
    )
    assert answer["compacted"] is True
    assert answer["number"] == 1
    row = Compaction.objects.get(session=session, number=1)
    assert row.summary.startswith("My own summary.")


def test_another_owner_sees_nothing_of_it(live: Live) -> None:
    assert _data(_call(live, "search_history", {"query": "quokka"}, key=live.other_key)) == {
        "hits": [],
        "more": False,
    }
    for name in ("read_messages", "context_status", "compact_now"):
        result = _call(live, name, {"session": str(live.session.pk)}, key=live.other_key)
        assert result.is_error
        assert "no such session" in _text(result)
    assert Compaction.objects.filter(session=live.session).count() == 1


@pytest.mark.parametrize(
    ("name", "arguments", "says"),
    [
        ("search_history", {}, "query"),
        ("search_history", {"query": "x", "limit": 0}, "limit"),
        ("search_history", {"query": "x", "limit": 101}, "limit"),
        ("search_history", {"query": "!!"}, "query"),
        ("read_messages", {"session": "not-a-uuid"}, "no such session"),
        ("read_messages", {"session": "{session}", "start": -1}, "start"),
        ("read_messages", {"session": "{session}", "start": 5, "end": 2}, "end"),
        ("read_messages", {"session": "{session}", "compaction": 9}, "no compaction #9"),
        ("context_status", {"session": 12}, "session"),
        ("compact_now", {"session": "{session}", "summary": ""}, "summary"),
    ],
)
def test_bad_arguments_are_tool_errors(
    live: Live, name: str, arguments: dict[str, Any], says: str
) -> None:
    filled = {k: str(live.session.pk) if v == "{session}" else v for k, v in arguments.items()}
    result = _call(live, name, filled)
    assert result.is_error
    assert says in _text(result)


def test_off_answers_404_and_a_foreign_host_400(live: Live, settings: Any) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Authorization": f"Bearer {live.key}", "Host": "evil.example"}
    assert httpx.post(live.url, json=body, headers=headers).status_code == 400
    settings.CTXWEB_MCP_ENABLED = False
    assert httpx.post(live.url, json=body, headers={"Authorization": "x"}).status_code == 404


def test_repeated_bad_keys_are_throttled(live: Live, settings: Any) -> None:
    settings.CTXWEB_AUTH_FAILURE_LIMIT = 3
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    codes = [
        httpx.post(live.url, json=body, headers={"Authorization": "Bearer ctx_bad"}).status_code
        for _ in range(5)
    ]
    assert codes == [401, 401, 401, 429, 429]


def test_make_runs_devserver_serves_it(tmp_path: Any) -> None:
    """`make run` (manage.py devserver) serves /mcp: the SDK's client lists the tools."""
    from tests.sessions_app.proxy.test_devserver import devserver

    with devserver(tmp_path, "http://127.0.0.1:9") as (base, key):
        assert httpx.post(f"{base}/mcp", json={}).status_code == 401

        async def use(client: Client) -> list[str]:
            return [tool.name for tool in (await client.list_tools()).tools]

        assert "search_history" in _with_client(f"{base}/mcp", key, use)
