"""Context and export: one OpenAI converter, alternating roles, mid-conversation system messages.

docs/exports.md says how each format renders what is stored; these tests hold it to that.
"""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any

import pytest
from django.db import transaction
from hypothesis import given
from hypothesis import strategies as st

from compaction import merge_adjacent_roles, validate_messages
from sessions_app.exporters import to_anthropic, to_openai
from sessions_app.models import Session
from sessions_app.services.sessions.lifecycle import _append_validated, append_messages
from tests.sessions_app.conftest import JsonClient
from tests.support.histories import assistant, tool_call, tool_results, user

MID_SYSTEM = "The user switched to plan mode."
LATE_SYSTEM = "A hook says: tests must stay green."


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _roles(messages: list[dict[str, Any]]) -> list[str]:
    return [m["role"] for m in messages]


def _alternate(roles: list[str]) -> bool:
    return all(a != b for a, b in itertools.pairwise(roles))


# --- merge_adjacent_roles ---------------------------------------------------------------


def test_merging_keeps_block_order_and_puts_tool_results_first() -> None:
    messages: list[dict[str, Any]] = [
        user("first"),
        user("second", is_meta=True),
        tool_call("t1", text="reading"),
        assistant("still thinking aloud"),
        {"role": "user", "content": [_text("interrupting")]},
        tool_results(("t1", "file body")),
        assistant("done"),
    ]
    before = copy.deepcopy(messages)
    merged = merge_adjacent_roles(messages, tool_results_first=True)
    assert messages == before, "the input is never changed"
    assert _roles(merged) == ["user", "assistant", "user", "assistant"]
    assert merged[0] == {"role": "user", "content": [_text("first"), _text("second")]}
    assert [b["type"] for b in merged[1]["content"]] == ["text", "tool_use", "text"]
    assert merged[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": "file body"},
        _text("interrupting"),
    ]
    assert merged[3] is messages[6], "a message with no same-role neighbour is passed through"
    assert validate_messages(merged) == []


_ROLES = st.sampled_from(["user", "assistant", "system"])


@given(st.lists(st.tuples(_ROLES, st.booleans()), max_size=12))
def test_merged_roles_alternate_and_keep_every_text_in_order(
    shape: list[tuple[str, bool]],
) -> None:
    messages = [
        {"role": role, "content": f"m{i}" if as_string else [_text(f"m{i}")]}
        for i, (role, as_string) in enumerate(shape)
    ]
    merged = merge_adjacent_roles(messages, tool_results_first=True, merge_system=True)
    assert _alternate(_roles(merged))
    texts = [
        b["text"]
        for m in merged
        for b in ([_text(m["content"])] if isinstance(m["content"], str) else m["content"])
    ]
    assert texts == [f"m{i}" for i in range(len(shape))]


# --- stored sessions through the API ------------------------------------------------------


def _store_unchecked(session: Session, messages: list[dict[str, Any]]) -> None:
    """Store messages as a client may send them, mid-conversation system messages included."""
    with transaction.atomic():
        locked = Session.objects.select_for_update().get(pk=session.pk)
        _append_validated(locked, [dict(m) for m in messages])


def _both(client: JsonClient, session: Session, fmt: str) -> tuple[dict[str, Any], dict[str, Any]]:
    base = f"/api/sessions/{session.pk}"
    context = client.get(f"{base}/context?format={fmt}")
    export = client.get(f"{base}/export?format={fmt}")
    assert context.status_code == export.status_code == 200
    return context.json(), json.loads(export.content)


@pytest.mark.django_db
def test_context_and_export_give_the_same_messages(
    api_client: JsonClient, make_session: Any
) -> None:
    thinking = {"type": "thinking", "thinking": "Read the file first.", "signature": "sig"}
    call = tool_call("t1", "Read", {"file_path": "a.py"}, text="Reading a.py.")
    session = make_session(
        messages=[
            {"role": "system", "content": "sys"},
            user("What is in a.py?"),
            user("And be brief."),
            {**call, "content": [thinking, *call["content"]]},
            tool_results(("t1", "print(1)")),
            assistant("It prints 1."),
        ]
    )
    for fmt in ("openai", "anthropic"):
        context, export = _both(api_client, session, fmt)
        assert context["messages"] == export["messages"], fmt
    context, _ = _both(api_client, session, "openai")
    assert _roles(context["messages"]) == ["system", "user", "assistant", "tool", "assistant"]
    assert context["messages"][2]["reasoning_content"] == "Read the file first."
    assert context["messages"][1]["content"] == [_text("What is in a.py?"), _text("And be brief.")]


@pytest.mark.django_db
def test_appending_to_a_cached_context_keeps_roles_alternating(
    api_client: JsonClient, make_session: Any
) -> None:
    session = make_session(messages=[user("one"), assistant("two"), user("three")])
    url = f"/api/sessions/{session.pk}/context"
    assert _roles(api_client.get(url).json()["messages"]) == ["user", "assistant", "user"]
    append_messages(session, [user("four")])
    messages = api_client.get(url).json()["messages"]
    assert _roles(messages) == ["user", "assistant", "user"]
    assert messages[-1]["content"] == [_text("three"), _text("four")]
    append_messages(session, [assistant("five")])
    assert _roles(api_client.get(url).json()["messages"])[-1] == "assistant"


def _with_system_messages(make_session: Any) -> Session:
    session: Session = make_session(messages=[{"role": "system", "content": "sys"}, user("go")])
    _store_unchecked(
        session,
        [
            assistant("Planning."),
            {"role": "system", "content": MID_SYSTEM},
            user("Now do it."),
            tool_call("t1", "Bash", {"command": "pytest"}),
            {"role": "system", "content": [_text(LATE_SYSTEM)]},
            tool_results(("t1", "3 passed")),
            assistant("All green."),
        ],
    )
    return session


@pytest.mark.django_db
def test_mid_conversation_system_messages_in_anthropic_form(
    api_client: JsonClient, make_session: Any
) -> None:
    session = _with_system_messages(make_session)
    context, export = _both(api_client, session, "anthropic")
    assert context["messages"] == export["messages"]
    assert context["system"] == export["system"] == "sys"
    messages = context["messages"]
    assert _roles(messages) == ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert messages[2]["content"] == [
        _text(f"<system>\n{MID_SYSTEM}\n</system>"),
        _text("Now do it."),
    ]
    assert messages[4]["content"][0]["type"] == "tool_result", "the call is answered first"
    assert messages[4]["content"][1] == _text(f"<system>\n{LATE_SYSTEM}\n</system>")
    assert validate_messages(messages) == []


@pytest.mark.django_db
def test_mid_conversation_system_messages_in_openai_form(
    api_client: JsonClient, make_session: Any
) -> None:
    session = _with_system_messages(make_session)
    context, export = _both(api_client, session, "openai")
    assert context["messages"] == export["messages"]
    assert _roles(context["messages"]) == [
        "system",
        "user",
        "assistant",
        "system",
        "user",
        "assistant",
        "tool",  # the result follows its call; the system message after it
        "system",
        "assistant",
    ]
    assert context["messages"][3] == {"role": "system", "content": MID_SYSTEM}
    assert context["messages"][7] == {"role": "system", "content": LATE_SYSTEM}


@pytest.mark.django_db
def test_mid_conversation_system_messages_in_markdown(
    api_client: JsonClient, make_session: Any
) -> None:
    session = _with_system_messages(make_session)
    text = api_client.get(f"/api/sessions/{session.pk}/export?format=markdown").content.decode()
    assert f"## 4. System\n\n{MID_SYSTEM}" in text
    assert f"## 7. System\n\n{LATE_SYSTEM}" in text


def test_the_exporters_alone_render_system_messages_the_same_way() -> None:
    messages = [
        {"role": "system", "content": "sys"},
        user("a"),
        {"role": "system", "content": MID_SYSTEM},
        assistant("b"),
    ]
    anthropic = to_anthropic(messages)
    assert anthropic["system"] == "sys"
    assert anthropic["messages"][0]["content"] == [
        _text("a"),
        _text(f"<system>\n{MID_SYSTEM}\n</system>"),
    ]
    assert _roles(to_openai(messages)["messages"]) == ["system", "user", "system", "assistant"]
