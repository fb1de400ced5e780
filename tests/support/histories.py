"""Message builders and generated histories for tests and benchmarks.

Builders (`user`, `assistant`, `tool_call`, `tool_results`, `exchange`) make valid
Anthropic-style messages; `coding_history` and `qa_conversation` are small fixed histories
the engine's tests share; `synthetic_history` makes a deterministic agent session of a given
size; `histories()` is a hypothesis strategy of VALID histories with tool calls, thinking,
meta messages and earlier summaries, for property tests of any engine step.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from typing import Any

from hypothesis import strategies as st

from compaction.messages import Message, make_summary_message

__all__ = [
    "WORDS",
    "assistant",
    "coding_history",
    "exchange",
    "histories",
    "qa_conversation",
    "synthetic_history",
    "system",
    "tool_call",
    "tool_results",
    "user",
    "words",
]

_VOCABULARY = (
    "the parser fails on empty input so we add a guard and rerun tests "
    "src/app/models.py tests/test_models.py README.md https://example.com/docs "
    "ValueError TypeError fixed pending TODO refactor config database migration "
    "function class method import return value error warning build deploy"
)
WORDS = tuple(_VOCABULARY.split())


def words(count: int, word: str = "alpha") -> str:
    """`word` repeated `count` times, space-separated (about one token per word)."""
    return " ".join([word] * count)


def system(text: str = "You are a careful coding agent.") -> Message:
    return {"role": "system", "content": text}


def user(text: str, **extra: Any) -> Message:
    return {"role": "user", "content": text, **extra}


def assistant(text: str, **extra: Any) -> Message:
    return {"role": "assistant", "content": [{"type": "text", "text": text}], **extra}


def tool_call(
    tool_id: str, name: str = "Read", tool_input: dict[str, Any] | None = None, text: str = ""
) -> Message:
    """An assistant message that calls one tool (optionally after some text)."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    blocks.append(
        {
            "type": "tool_use",
            "id": tool_id,
            "name": name,
            "input": tool_input if tool_input is not None else {"file_path": "src/app.py"},
        }
    )
    return {"role": "assistant", "content": blocks}


def tool_results(*results: tuple[str, str] | tuple[str, str, bool]) -> Message:
    """A user message answering tool calls: `(tool_use_id, content[, is_error])` each."""
    blocks = []
    for result in results:
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": result[0]}
        block["content"] = result[1]
        if len(result) > 2 and result[2]:
            block["is_error"] = True
        blocks.append(block)
    return {"role": "user", "content": blocks}


def exchange(
    tool_id: str,
    name: str = "Read",
    tool_input: dict[str, Any] | None = None,
    result: str = "ok",
    *,
    is_error: bool = False,
) -> list[Message]:
    """A tool call and its result: two messages."""
    return [tool_call(tool_id, name, tool_input), tool_results((tool_id, result, is_error))]


def coding_history() -> list[Message]:
    """A system prompt and 12 messages of ~100 tokens each (1,102 tokens): two tool calls,
    then a few plain rounds."""
    return [
        system("You are a coding agent."),
        user("Fix the parser bug in src/parser.py " + words(90)),
        *exchange("toolu_1", "Read", {"file_path": "src/parser.py"}, words(100, "beta")),
        assistant(words(100, "gamma")),
        user("Now run the tests " + words(90)),
        *exchange("toolu_2", "Bash", {"command": "pytest"}, words(100, "delta")),
        assistant(words(100, "epsilon")),
        user("Thanks, one more thing " + words(90)),
        assistant(words(100, "zeta")),
        user("And the docs " + words(90)),
        assistant(words(100, "eta")),
    ]


def qa_conversation(pairs: int, size: int = 50) -> list[Message]:
    """A system prompt and `pairs` question/answer rounds of `size` words each."""
    messages: list[Message] = [system("You are an agent.")]
    for number in range(pairs):
        messages += [user(f"q{number} " + words(size)), assistant(f"a{number} " + words(size))]
    return messages


def _words(rng: random.Random, count: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(count))


def synthetic_history(
    message_count: int,
    *,
    words_per_message: int = 40,
    tool_every: int = 2,
    seed: int = 0,
) -> list[Message]:
    """A deterministic valid agent session of about `message_count` messages.

    Rounds of: a user request, then tool calls (Read/Edit/Bash, some failing) with results,
    then an assistant reply. `words_per_message` sets the size (about 1.3 tokens a word).
    """
    rng = random.Random(seed)
    ids = itertools.count(1)
    messages: list[Message] = [system()]
    while len(messages) < message_count:
        messages.append(user(f"Please handle task {len(messages)}: {_words(rng, 12)}"))
        for _ in range(tool_every):
            if len(messages) + 3 > message_count:
                break
            number = next(ids)
            name = rng.choice(("Read", "Edit", "Bash"))
            path = f"src/module_{number % 50}.py"
            tool_input = {"file_path": path} if name != "Bash" else {"command": f"pytest {path}"}
            failed = number % 7 == 0
            body = _words(rng, words_per_message)
            result = f"ValueError: bad input in {path}\n{body}" if failed else body
            messages.extend(
                exchange(f"toolu_{number:06d}", name, tool_input, result, is_error=failed)
            )
        messages.append(assistant(f"Done with this step. {_words(rng, words_per_message)}"))
    return messages


# --- hypothesis strategy of valid histories ---------------------------------------------


def _seeded_words(size: int, seed: int) -> str:
    # Cheap to generate, and still shrinkable: hypothesis draws only a size and a seed.
    return _words(random.Random(seed), size)


_text = st.builds(_seeded_words, st.integers(1, 30), st.integers(0, 1 << 16))
_big_text = st.builds(_seeded_words, st.integers(1, 400), st.integers(0, 1 << 16))


@st.composite
def _tool_step(draw: st.DrawFn, ids: Iterator[int]) -> list[Message]:
    """An assistant turn with 1-3 tool calls (and maybe text/thinking) and their results."""
    count = draw(st.integers(1, 3))
    call_ids = [f"toolu_{next(ids)}" for _ in range(count)]
    blocks: list[dict[str, Any]] = []
    if draw(st.booleans()):
        blocks.append({"type": "thinking", "thinking": draw(_text), "signature": "sig"})
    if draw(st.booleans()):
        blocks.append({"type": "text", "text": draw(_text)})
    for call_id in call_ids:
        name = draw(st.sampled_from(("Read", "Edit", "Bash", "Grep")))
        arg = draw(st.sampled_from(("src/app.py", "tests/test_app.py", "README.md")))
        blocks.append({"type": "tool_use", "id": call_id, "name": name, "input": {"path": arg}})
    results: list[dict[str, Any]] = []
    for call_id in call_ids:
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id}
        if draw(st.booleans()):
            result["content"] = draw(_big_text)
        else:
            result["content"] = [{"type": "text", "text": draw(_big_text)}]
        if draw(st.integers(0, 5)) == 0:
            result["is_error"] = True
        results.append(result)
    if draw(st.integers(0, 4)) == 0:
        results.append({"type": "text", "text": draw(_text)})
    return [{"role": "assistant", "content": blocks}, {"role": "user", "content": results}]


@st.composite
def _round(draw: st.DrawFn, ids: Iterator[int]) -> list[Message]:
    """A user request, tool steps, then an optional closing assistant text."""
    first: Message = user(draw(_text))
    if draw(st.integers(0, 6)) == 0:
        first = user(draw(_text), is_meta=True)
    messages = [first]
    for _ in range(draw(st.integers(0, 4))):
        messages.extend(draw(_tool_step(ids)))
    if draw(st.booleans()) or len(messages) == 1:
        messages.append(assistant(draw(_big_text)))
    return messages


@st.composite
def histories(draw: st.DrawFn, *, min_rounds: int = 1, max_rounds: int = 12) -> list[Message]:
    """A valid history: 0-2 system messages, maybe an earlier summary, then rounds."""
    ids = itertools.count(1)
    messages: list[Message] = [system(draw(_text)) for _ in range(draw(st.integers(0, 2)))]
    if draw(st.integers(0, 3)) == 0:
        messages.append(
            make_summary_message(
                "Goals and key decisions:\n- " + draw(_text), level=1, message_count=4
            )
        )
        messages.append(assistant(draw(_text)))
    for _ in range(draw(st.integers(min_rounds, max_rounds))):
        messages.extend(draw(_round(ids)))
    return messages
