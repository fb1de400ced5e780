"""Exporters: Anthropic and OpenAI JSON round-trip through the importers; Markdown reads well."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction import make_summary_message, validate_messages
from sessions_app.exporters import export_messages, to_anthropic, to_markdown, to_openai
from sessions_app.importers import parse, parse_text
from tests.sessions_app import samples
from tests.sessions_app.samples import EXPECTED

MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You are careful."},
    {"role": "user", "content": "What is in the folder?"},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "List it."},
            {"type": "text", "text": "Let me look."},
            {
                "type": "tool_use",
                "id": "t1",
                "name": "bash",
                "input": {"command": "ls", "n": [1, 2]},
            },
            {"type": "tool_use", "id": "t2", "name": "read", "input": {}},
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "a.txt\nb.txt"},
            {
                "type": "tool_result",
                "tool_use_id": "t2",
                "content": [{"type": "text", "text": "hello"}],
            },
            {"type": "text", "text": "Also check c."},
        ],
    },
    {"role": "assistant", "content": [{"type": "text", "text": "Two files."}]},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "And this?"},
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"},
            },
        ],
    },
    {"role": "assistant", "content": "An image."},
]


@pytest.fixture
def samples_dir() -> Path:
    return samples.samples_dir()


def test_anthropic_round_trip_gives_the_same_messages() -> None:
    body = to_anthropic(MESSAGES)
    assert body["system"] == "You are careful."
    assert body["messages"][0]["role"] == "user"
    imported = parse_text(json.dumps(body), "anthropic")
    assert [{"role": m["role"], "content": m["content"]} for m in imported.history()] == MESSAGES


def test_openai_round_trip_gives_the_same_messages() -> None:
    body = to_openai(MESSAGES)
    roles = [m["role"] for m in body["messages"]]
    assert roles == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    call = body["messages"][2]["tool_calls"][0]
    assert call == {
        "id": "t1",
        "type": "function",
        "function": {"name": "bash", "arguments": '{"command":"ls","n":[1,2]}'},
    }
    assert body["messages"][2]["reasoning_content"] == "List it."
    imported = parse_text(json.dumps(body), "openai")
    assert [{"role": m["role"], "content": m["content"]} for m in imported.history()] == MESSAGES


_WORDS = st.text(alphabet="abc xyz.\n", min_size=1, max_size=12).filter(str.strip)


@st.composite
def _histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Alternating histories: a prompt, calls answered in the next message, an answer."""
    messages: list[dict[str, Any]] = []
    for round_number in range(draw(st.integers(1, 3))):
        messages.append({"role": "user", "content": draw(_WORDS)})
        calls = [
            {"type": "tool_use", "id": f"r{round_number}c{n}", "name": "bash", "input": {"n": n}}
            for n in range(draw(st.integers(0, 2)))
        ]
        if calls:
            messages.append({"role": "assistant", "content": [_text(draw(_WORDS)), *calls]})
            results = [
                {"type": "tool_result", "tool_use_id": c["id"], "content": draw(_WORDS)}
                for c in calls
            ]
            messages.append({"role": "user", "content": results})
        messages.append({"role": "assistant", "content": [_text(draw(_WORDS))]})
    return messages


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


@settings(max_examples=30, deadline=None)
@given(_histories())
def test_the_openai_export_and_import_are_inverse(messages: list[dict[str, Any]]) -> None:
    """One converter each way (`to_openai`, the `openai` importer): they undo each other."""
    body = to_openai(messages)
    imported = parse_text(json.dumps(body), "openai")
    assert [{"role": m["role"], "content": m["content"]} for m in imported.history()] == messages


def test_anthropic_export_keeps_only_api_keys() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "go", "is_meta": False},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "t",
                    "name": "x",
                    "input": {},
                    "caller": {"type": "direct"},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t",
                    "content": "none",
                    "is_error": True,
                    "ctxweb_synthetic": True,
                }
            ],
        },
    ]
    body = to_anthropic(messages)
    assert body == {
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t", "name": "x", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t", "content": "none", "is_error": True}
                ],
            },
        ]
    }


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_exports_of_every_sample(samples_dir: Path, name: str) -> None:
    session = parse(samples_dir / name, subagents=False)
    context = session.context_messages()
    anthropic = to_anthropic(context)
    assert validate_messages(anthropic["messages"]) == []
    # Export, import, export again: the OpenAI and Anthropic exports are fixed points.
    for fmt, exporter in (("anthropic", to_anthropic), ("openai", to_openai)):
        once = exporter(context)
        again = exporter(list(parse_text(json.dumps(once), fmt).history()))
        assert again == once
    markdown = to_markdown(list(session.history()), title=session.title)
    assert markdown.startswith(f"# {session.title}")


def test_markdown_transcript() -> None:
    tricky = {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "t1",
                "content": "```\ncode\n```",
                "is_error": True,
            }
        ],
    }
    summary = make_summary_message("Earlier we listed files.")
    text = to_markdown(
        [summary, *MESSAGES[1:3], tricky, {"role": "user", "content": "hm", "is_meta": True}],
        title="Demo",
    )
    assert text.startswith("# Demo\n\n_5 messages_")
    assert "## 1. Summary of earlier conversation" in text
    assert "## 2. User\n\nWhat is in the folder?" in text
    assert "> **Thinking**\n>\n> List it." in text
    assert '**Tool call** `bash` (`t1`)\n\n```json\n{\n  "command": "ls"' in text
    assert "**Tool result** for `t1` (error)\n\n````\n```\ncode\n```\n````" in text
    assert "## 5. User (meta)" in text


def test_export_messages_names_its_media_type() -> None:
    result = export_messages(MESSAGES, "openai")
    assert result.media_type == "application/json"
    assert result.extension == "json"
    assert json.loads(result.body)["messages"][0]["role"] == "system"
    assert export_messages(MESSAGES, "markdown").media_type.startswith("text/markdown")
    with pytest.raises(ValueError, match="unknown export format"):
        export_messages(MESSAGES, "yaml")
