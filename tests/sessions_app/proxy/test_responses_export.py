"""Export and context in `format=responses` (issue 25), and the item <-> message mapping."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessions_app.exporters import export_messages, to_responses
from sessions_app.proxy.responses_items import turn_message, turns_of
from tests.sessions_app.conftest import JsonClient
from tests.support.histories import assistant, user
from tests.support.histories import user as user_message

ITEMS: list[Any] = [
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix it"}]},
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Plan"}],
        "encrypted_content": "ENC",
    },
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "c1",
        "name": "shell",
        "arguments": '{"cmd":"ls"}',
    },
    {
        "type": "custom_tool_call",
        "id": "ct_1",
        "call_id": "c2",
        "name": "apply_patch",
        "input": "*** Begin Patch",
    },
    {"type": "function_call_output", "call_id": "c1", "output": "a.py"},
    {"type": "custom_tool_call_output", "call_id": "c2", "output": "Done"},
    {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Fixed."}],
    },
]


def _engine(items: list[Any]) -> list[dict[str, Any]]:
    return [turn_message(str(turn["role"]), turn.sent) for turn in turns_of(items)]


def test_items_are_turns_of_one_side_each() -> None:
    turns = turns_of(ITEMS)
    assert [t["role"] for t in turns] == ["user", "assistant", "user", "assistant"]
    assert [len(t.sent) for t in turns] == [1, 3, 2, 1]
    # the digest form leaves out what a client may drop (ids, status), never the content
    assert "id" not in turns[1]["items"][0]
    assert turns[1]["items"][0]["encrypted_content"] == "ENC"


def test_the_engine_messages_convert_back_to_the_same_items() -> None:
    back = to_responses(_engine(ITEMS))["input"]
    assert [item["type"] for item in back] == [
        "message",
        "reasoning",
        "function_call",
        "custom_tool_call",
        "function_call_output",
        "custom_tool_call_output",
        "message",
    ]
    assert back[1]["encrypted_content"] == "ENC"
    assert back[1]["summary"] == [{"type": "summary_text", "text": "Plan"}]
    assert json.loads(back[2]["arguments"]) == {"cmd": "ls"}
    assert back[3]["input"] == "*** Begin Patch"
    assert back[4] == {"type": "function_call_output", "call_id": "c1", "output": "a.py"}
    assert back[5] == {"type": "custom_tool_call_output", "call_id": "c2", "output": "Done"}
    assert back[6]["content"] == [{"type": "output_text", "text": "Fixed."}]


@given(st.lists(st.tuples(st.sampled_from(["user", "assistant"]), st.text(min_size=1)), max_size=8))
def test_texts_survive_items_to_messages_and_back(turns: list[tuple[str, str]]) -> None:
    items = [
        {
            "type": "message",
            "role": role,
            "content": [{"type": "input_text" if role == "user" else "output_text", "text": text}],
        }
        for role, text in turns
    ]
    back = to_responses(_engine(items))["input"]
    # neighbours of one side are one turn: one message of several parts
    assert [(i["role"], p["text"]) for i in back for p in i["content"]] == turns
    assert all(a["role"] != b["role"] for a, b in itertools.pairwise(back))


def test_export_in_responses_format_is_a_request_body() -> None:
    exported = export_messages(
        [{"role": "system", "content": "sys"}, user("hi"), assistant("yo")], "responses"
    )
    body = json.loads(exported.body)
    assert body["input"][0] == {
        "type": "message",
        "role": "developer",
        "content": [{"type": "input_text", "text": "sys"}],
    }
    assert [i["role"] for i in body["input"]] == ["developer", "user", "assistant"]


@pytest.mark.django_db
def test_context_and_export_in_responses_format_over_http(
    api_client: JsonClient, make_session: Any
) -> None:
    session = make_session(
        messages=[{"role": "system", "content": "sys"}, user("hi"), assistant("yo")]
    )
    body = api_client.get(f"/api/sessions/{session.pk}/context?format=responses").json()
    assert set(body) == {"system", "messages", "tokens", "limit", "usage"}
    assert body["system"] == "sys"
    assert [i["role"] for i in body["messages"]] == ["developer", "user", "assistant"]
    assert body["messages"][2]["content"] == [{"type": "output_text", "text": "yo"}]
    again = api_client.get(f"/api/sessions/{session.pk}/context?format=responses").json()
    assert again == body
    exported = api_client.get(f"/api/sessions/{session.pk}/export?format=responses")
    assert exported.status_code == 200
    assert [i["role"] for i in json.loads(exported.content)["input"]] == [
        "developer",
        "user",
        "assistant",
    ]


def test_what_codex_adds_to_an_item_it_sends_back_is_the_same_turn() -> None:
    from sessions_app.proxy.digests import digest

    answered = [ITEMS[1], ITEMS[2]]
    sent_back = [
        {**item, "internal_chat_message_metadata_passthrough": {"turn_id": "t1"}}
        for item in answered
    ]
    sent_back[0].pop("id")
    [first], [second] = turns_of(answered), turns_of(sent_back)
    assert digest(first) == digest(second)
    changed = [{**answered[0], "encrypted_content": "OTHER"}, answered[1]]
    assert digest(turns_of(changed)[0]) != digest(first)


def test_images_are_stored_as_image_blocks_and_come_back_as_input_images() -> None:
    data = "data:image/png;base64,iVBORw0KGgo="
    items: list[Any] = [
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "What is this?"},
                {"type": "input_image", "image_url": data},
                {"type": "input_image", "image_url": "https://example.com/a.png"},
            ],
        }
    ]
    [stored] = _engine(items)
    assert stored["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
    }
    assert stored["content"][2]["source"] == {"type": "url", "url": "https://example.com/a.png"}
    [back] = to_responses([stored])["input"]
    assert [part.get("image_url") for part in back["content"]] == [
        None,
        data,
        "https://example.com/a.png",
    ]


@pytest.mark.django_db
def test_the_context_tab_offers_and_shows_the_responses_form(
    client: Any, user: Any, make_session: Any
) -> None:
    from django.urls import reverse

    session = make_session(messages=[user_message("hi"), assistant("yo")], owner=user)
    client.force_login(user)
    url = reverse("ui:tab", args=[session.pk, "context"])
    page = client.get(f"{url}?format=responses", headers={"HX-Request": "true"}).content.decode()
    assert ">Responses</button>" in page
    assert "output_text" in page  # the items, not the Anthropic form
    download = client.get(reverse("ui:context_download", args=[session.pk]) + "?format=responses")
    assert json.loads(download.content)["messages"][1]["role"] == "assistant"
