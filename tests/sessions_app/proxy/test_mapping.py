"""Which session a request lands in (retries, Claude Code side requests), modes per profile,
and the stored system prompt and tool definitions counted with the session."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import pytest

from sessions_app.models import CompactionProfile, Message, Session
from sessions_app.services.context.runtime import check, context_body, context_payload
from sessions_app.services.sessions.threshold import shown_standing
from sessions_app.viewmodels.gauge import context_gauge
from sessions_app.viewmodels.limits import Limits
from tests.support.fake_anthropic import Reply
from tests.support.fake_streaming import StreamingAnthropic

pytestmark = pytest.mark.django_db(transaction=True)

CLAUDE_CODE: Any = {"user_id": "user_abc_account__session_0b1e6a52-7c55-4f0e-9a55-6c1f2b3d4e5f"}
TOOLS: Any = [
    {
        "name": "Read",
        "description": "Read a file from the local filesystem. " * 20,
        "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}},
    }
]


def _claude_code(
    claude: anthropic.Anthropic,
    messages: Any,
    *,
    system: str = "You are Claude Code.",
    tools: Any = TOOLS,
) -> Any:
    """One request as Claude Code sends it (its session id in `metadata`)."""
    return claude.messages.create(
        model="m",
        max_tokens=20,
        system=system,
        tools=tools,
        messages=messages,
        metadata=CLAUDE_CODE,
    )


def _agent_call(tool_id: str, prompt: str) -> Reply:
    """An answer calling Claude Code's Agent tool with `prompt`."""
    call = {
        "type": "tool_use",
        "id": tool_id,
        "name": "Agent",
        "input": {"description": "Find it", "prompt": prompt},
    }
    return Reply.blocks([call], stop_reason="tool_use")


def test_retry_after_the_answer_was_stored_continues_the_session(
    claude: anthropic.Anthropic, upstream_anthropic: StreamingAnthropic
) -> None:
    upstream_anthropic.script(Reply.text("first try"), Reply.text("second try"), Reply.text("ok"))
    question: Any = [{"role": "user", "content": "Hello there"}]
    claude.messages.create(model="m", max_tokens=20, messages=question)
    retried = claude.messages.create(model="m", max_tokens=20, messages=question)  # same again
    assert Session.objects.count() == 1
    assert Message.objects.count() == 2  # the retry's answer is not stored a second time
    # The client goes on with the answer of its retry: still the same session.
    history: Any = [
        *question,
        {"role": "assistant", "content": [b.model_dump() for b in retried.content]},
        {"role": "user", "content": "And then?"},
    ]
    claude.messages.create(model="m", max_tokens=20, messages=history)
    session = Session.objects.get()
    assert session.message_count == 4
    roles = list(
        Message.objects.filter(session=session).order_by("seq").values_list("role", flat=True)
    )
    assert roles == ["user", "assistant", "user", "assistant"]


def test_claude_code_side_requests_do_not_make_sessions(
    claude: anthropic.Anthropic, upstream_anthropic: StreamingAnthropic
) -> None:
    main: Any = [{"role": "user", "content": "Fix the failing test"}]
    _claude_code(claude, main)
    for _ in range(3):  # title generation: another system prompt, no tools, same session id
        answer = claude.messages.create(
            model="m",
            max_tokens=20,
            system="Write a 5-10 word title for the conversation.",
            messages=main,
            metadata=CLAUDE_CODE,
        )
        assert answer.content
    assert Session.objects.count() == 1
    assert Session.objects.get().message_count == 2
    assert len(upstream_anthropic.requests) == 4


def test_a_claude_code_subagent_is_linked_and_a_compacted_conversation_continues(
    claude: anthropic.Anthropic, upstream_anthropic: StreamingAnthropic
) -> None:
    upstream_anthropic.script(_agent_call("toolu_agent", "Find the failing test"))
    _claude_code(claude, [{"role": "user", "content": "Fix the failing test"}])
    # The subagent: the same Claude Code session id, its own system prompt and tools.
    grep = {"name": "Grep", "description": "Search.", "input_schema": {"type": "object"}}
    _claude_code(
        claude,
        [{"role": "user", "content": "Find the failing test"}],
        system="You are a search agent.",
        tools=[*TOOLS, grep],
    )
    # The client compacting its own history: same system prompt and tools, a new history.
    _claude_code(claude, [{"role": "user", "content": "Summary of the work so far; go on"}])
    parent, subagent, restarted = Session.objects.order_by("created_at")
    assert (subagent.parent, subagent.parent_tool_use_id) == (parent, "toolu_agent")
    assert subagent.title == "Find the failing test"
    assert parent.parent is None
    assert restarted.parent is None
    assert restarted.title == "Fix the failing test (continued)"  # the same work, going on


def test_a_subagent_started_before_its_call_was_stored_gets_the_call_later(
    claude: anthropic.Anthropic, upstream_anthropic: StreamingAnthropic
) -> None:
    main: Any = [{"role": "user", "content": "Fix the failing test"}]
    first = _claude_code(claude, main)
    # Claude Code's mark says subagent; no stored call asks for it yet.
    _claude_code(
        claude,
        [{"role": "user", "content": "Find the failing test"}],
        system="x-anthropic-billing-header: cc_version=2.1.332; cc_is_subagent=true;",
    )
    subagent = Session.objects.get(title="Find the failing test")
    assert (subagent.parent_id, subagent.parent_tool_use_id) == (
        Session.objects.get(title="Fix the failing test").pk,
        "",
    )
    upstream_anthropic.script(_agent_call("toolu_late", "Find the failing test"))
    history: Any = [
        *main,
        {"role": "assistant", "content": [b.model_dump() for b in first.content]},
        {"role": "user", "content": "Use an agent"},
    ]
    _claude_code(claude, history)
    subagent.refresh_from_db()
    assert subagent.parent_tool_use_id == "toolu_late"


@pytest.fixture
def observing_profile(transactional_db: Any) -> CompactionProfile:
    """The default profile, in observe mode, with a window small enough to be over."""
    CompactionProfile.objects.update(is_default=False)
    return CompactionProfile.objects.create(
        name="observer",
        is_default=True,
        summarizer="extractive",
        context_limit=400,
        trigger_ratio=0.5,
        keep_recent_messages=1,
        tail_retention_ratio=0.1,
        cooldown_seconds=0.0,
        proxy_mode="observe",
    )


def _long_history(turns: int) -> list[Any]:
    history: list[Any] = []
    for turn in range(turns):
        words = " ".join(f"w{turn}x{i}" for i in range(60))
        history += [
            {"role": "user", "content": f"turn {turn}: {words}"},
            {"role": "assistant", "content": [{"type": "text", "text": f"answer {turn}"}]},
        ]
    return [*history, {"role": "user", "content": "last"}]


def test_profile_mode_observe_forwards_unchanged_and_the_header_overrides(
    claude: anthropic.Anthropic,
    upstream_anthropic: StreamingAnthropic,
    observing_profile: CompactionProfile,
) -> None:
    history = _long_history(6)
    claude.messages.create(model="m", max_tokens=20, messages=history)
    assert upstream_anthropic.requests[-1].body["messages"] == history
    session = Session.objects.get()
    assert session.message_count == len(history) + 1
    assert not session.compactions.exists()
    reply = upstream_anthropic.requests  # one request so far
    assert len(reply) == 1
    follow = [
        *history,
        {"role": "assistant", "content": [{"type": "text", "text": "fake summary"}]},
    ]
    follow.append({"role": "user", "content": "now compact"})
    claude.messages.create(
        model="m", max_tokens=20, messages=follow, extra_headers={"X-Ctxweb-Mode": "compact"}
    )
    assert session.compactions.exists()
    sent = upstream_anthropic.requests[-1].body["messages"]
    assert len(json.dumps(sent)) < len(json.dumps(follow))


def test_system_and_tools_are_counted_in_check_context_and_gauge(
    claude: anthropic.Anthropic, upstream_anthropic: StreamingAnthropic
) -> None:
    system = "You are a careful coding agent. " * 40
    claude.messages.create(
        model="m",
        max_tokens=20,
        system=system,
        tools=TOOLS,
        messages=[{"role": "user", "content": "hi"}],
        extra_headers={"X-Ctxweb-Session": "counted"},
    )
    session = Session.objects.get()
    state = session.proxy_state or {}
    assert session.proxy_overhead == {"system": system, "tools": TOOLS}
    assert "system" not in state
    assert "tools" not in state
    system_tokens, tools_tokens = state["system_tokens"], state["tools_tokens"]
    assert system_tokens > 200
    assert tools_tokens > 100
    overhead = system_tokens + tools_tokens
    status = check(session)
    assert status.tokens == session.context_tokens + overhead
    assert context_payload(session).tokens == session.context_tokens + overhead
    assert json.loads(context_body(session))["tokens"] == session.context_tokens + overhead
    gauge = context_gauge(session, Limits.of(shown_standing(session)))
    by_key = {segment.key: segment.tokens for segment in gauge.segments}
    assert by_key["tool_definitions"] == tools_tokens
    assert by_key["system"] == system_tokens
    assert gauge.total == session.context_tokens + overhead
    # Unchanged system and tools are not counted again; changed ones are.
    claude.messages.create(
        model="m",
        max_tokens=20,
        system="short",
        tools=TOOLS,
        messages=[
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "text", "text": "fake summary"}]},
            {"role": "user", "content": "again"},
        ],
        extra_headers={"X-Ctxweb-Session": "counted"},
    )
    session.refresh_from_db()
    assert session.message_count == 4
    assert (session.proxy_state or {})["system_tokens"] == 1
    assert (session.proxy_state or {})["tools_tokens"] == tools_tokens


def test_moving_cache_breakpoints_stay_in_one_session(
    claude: anthropic.Anthropic, upstream_anthropic: StreamingAnthropic
) -> None:
    """Claude Code puts `cache_control` on its last messages and moves it every turn: the
    re-serialized messages still continue the stored ones."""
    breakpoint_: Any = {"type": "ephemeral"}
    history: list[Any] = []
    for turn in range(4):
        for message in history:  # the old breakpoints go
            if isinstance(message["content"], list):
                for block in message["content"]:
                    block.pop("cache_control", None)
        text = {"type": "text", "text": f"step {turn}", "cache_control": breakpoint_}
        history.append({"role": "user", "content": [text]})
        reply = claude.messages.create(model="m", max_tokens=20, messages=history)
        assert upstream_anthropic.requests[-1].body["messages"] == history
        history.append({"role": "assistant", "content": [b.model_dump() for b in reply.content]})
    session = Session.objects.get()
    assert session.message_count == 8


def test_lifespan_closes_the_pooled_client() -> None:
    import asyncio

    from sessions_app.proxy import pool

    async def scenario() -> tuple[list[str], bool]:
        client = pool.upstream_client(pooled=True)
        assert pool.upstream_client(pooled=True) is client
        inbox = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
        sent: list[str] = []

        async def receive() -> dict[str, str]:
            return inbox.pop(0)

        async def send(message: Any) -> None:
            sent.append(message["type"])

        async def http_only(scope: Any, receive: Any, send: Any) -> None:
            raise AssertionError("lifespan must not reach Django")

        await pool.with_upstream_lifespan(http_only)({"type": "lifespan"}, receive, send)
        return sent, client.is_closed

    sent, closed = asyncio.run(scenario())
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert closed
