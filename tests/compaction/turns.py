"""Hypothesis strategy of agent histories as agents send them today (issue 10).

`agent_histories()` makes VALID histories whose user and assistant messages alternate, whose
tool_use ids repeat across turns (`call_0`, `call_1`, ... numbered per turn, as many agents
do) and which may hold system messages mid-conversation (Claude Code 2.1), never between a
tool call and its result.
"""

from __future__ import annotations

import random
from typing import Any

from hypothesis import strategies as st

from compaction.messages import Message, make_summary_message
from tests.support.histories import WORDS

__all__ = ["agent_histories"]


def _seeded_words(size: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(size))


_text = st.builds(_seeded_words, st.integers(1, 25), st.integers(0, 1 << 16))
_big_text = st.builds(_seeded_words, st.integers(1, 300), st.integers(0, 1 << 16))
_tools = st.sampled_from(("Read", "Edit", "Bash", "Grep"))
_paths = st.sampled_from(("src/app.py", "tests/test_app.py", "README.md"))


@st.composite
def _tool_step(draw: st.DrawFn) -> list[Message]:
    """An assistant turn calling 1-3 tools (ids numbered per turn) and the results."""
    count = draw(st.integers(1, 3))
    ids = [f"call_{number}" for number in range(count)]
    blocks: list[dict[str, Any]] = []
    if draw(st.integers(0, 3)) == 0:
        blocks.append({"type": "thinking", "thinking": draw(_text), "signature": "sig"})
    if draw(st.booleans()):
        blocks.append({"type": "text", "text": draw(_text)})
    for tool_id in ids:
        blocks.append(
            {
                "type": "tool_use",
                "id": tool_id,
                "name": draw(_tools),
                "input": {"file_path": draw(_paths)},
            }
        )
    results: list[dict[str, Any]] = []
    for tool_id in draw(st.permutations(ids)):
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_id}
        text = draw(_big_text)
        result["content"] = text if draw(st.booleans()) else [{"type": "text", "text": text}]
        if draw(st.integers(0, 5)) == 0:
            result["is_error"] = True
        results.append(result)
    if draw(st.integers(0, 4)) == 0:
        results.append({"type": "text", "text": draw(_text)})
    return [{"role": "assistant", "content": blocks}, {"role": "user", "content": results}]


@st.composite
def _round(draw: st.DrawFn, *, last: bool) -> list[Message]:
    """A user request, tool steps, a closing reply (optional only in the last round)."""
    request: Message = {"role": "user", "content": draw(_text)}
    if draw(st.integers(0, 6)) == 0:
        request["is_meta"] = True
    messages = [request]
    for _ in range(draw(st.integers(0, 4))):
        messages.extend(draw(_tool_step()))
    if not last or draw(st.booleans()) or len(messages) == 1:
        messages.append(
            {"role": "assistant", "content": [{"type": "text", "text": draw(_big_text)}]}
        )
    return messages


@st.composite
def _with_system_notes(draw: st.DrawFn, messages: list[Message]) -> list[Message]:
    """`messages` with system notes inserted before some messages (never before a result)."""
    result: list[Message] = []
    for message in messages:
        answers = isinstance(message["content"], list) and any(
            block.get("type") == "tool_result" for block in message["content"]
        )
        if result and not answers and draw(st.integers(0, 7)) == 0:
            result.append({"role": "system", "content": "Note: " + draw(_text)})
        result.append(message)
    return result


@st.composite
def agent_histories(
    draw: st.DrawFn, *, min_rounds: int = 1, max_rounds: int = 10, system_notes: bool = True
) -> list[Message]:
    """A valid, alternating history with per-turn tool ids (module doc)."""
    head: list[Message] = [
        {"role": "system", "content": draw(_text)} for _ in range(draw(st.integers(0, 2)))
    ]
    body: list[Message] = []
    if draw(st.integers(0, 3)) == 0:
        summary = make_summary_message("Goals and key decisions:\n- " + draw(_text), level=1)
        body += [summary, {"role": "assistant", "content": [{"type": "text", "text": draw(_text)}]}]
    rounds = draw(st.integers(min_rounds, max_rounds))
    for number in range(rounds):
        body.extend(draw(_round(last=number == rounds - 1)))
    if system_notes:
        body = draw(_with_system_notes(body))
    return head + body
