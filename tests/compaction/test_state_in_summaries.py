"""How summarizers meet the state block (docs/behaviour.md#what-a-summary-always-keeps): the
model is shown it and asked for the narrative, an earlier summary's block is not merged
again, the extractive summary leaves to it what it holds, and harness boilerplate never
reaches a summarizer as the person's words."""

from __future__ import annotations

from compaction.carried_state import CarriedState, FileTouch
from compaction.harness_text import request_text, without_harness
from compaction.messages import make_summary_message
from compaction.state_block import render_state
from compaction.summarizers import ExtractiveSummarizer, SummaryRequest
from compaction.summarizers.prompt import build_user_prompt, serialize_message
from compaction.summarizers.summary_merge import parse_summary
from tests.support.histories import exchange, user

STATE = CarriedState(
    first_request="Refactor the parser",
    files=(FileTouch("src/parser.py", "modified"), FileTouch("src/lexer.py", "read")),
    todos=("[pending] add tests",),
)
BLOCK = render_state(STATE, 1000)


def test_the_model_is_shown_the_block_and_asked_for_the_narrative() -> None:
    prompt = build_user_prompt(SummaryRequest([user("hi")], state_block=BLOCK))

    assert BLOCK in prompt
    assert "write the narrative around it" in prompt


def test_an_earlier_summarys_block_is_not_merged_again() -> None:
    earlier = make_summary_message(f"Goals and key decisions:\n- Refactor the parser\n\n{BLOCK}")

    assert "<session-state>" not in serialize_message(1, earlier)
    parsed = parse_summary(str(earlier["content"]))
    assert parsed.files == []
    assert parsed.todos == []


def test_the_extractive_summary_leaves_the_blocks_files_to_it() -> None:
    messages = [
        user("Refactor the parser"),
        *exchange("t1", "Edit", {"file_path": "src/parser.py"}, "ok"),
        *exchange("t2", "Read", {"file_path": "src/lexer.py"}, "ok"),
        user("and the docs"),
    ]
    summarizer = ExtractiveSummarizer()

    alone = summarizer.summarize(SummaryRequest(messages, max_tokens=800))
    beside = summarizer.summarize(SummaryRequest(messages, max_tokens=800, state_block=BLOCK))

    assert "- src/parser.py: modified" in alone
    assert "- src/parser.py" not in beside
    assert "- every file touched: in the session state below" in beside
    assert "- User asked: Refactor the parser" in beside  # the goal line stays
    assert "- User asked: and the docs" in beside  # not in the block


def test_harness_turns_reach_the_summarizer_as_bookkeeping() -> None:
    caveat = user(
        "<local-command-caveat>Caveat: The messages below were generated...</local-command-caveat>"
    )
    mixed = user("fix it\n<system-reminder>remember the todo list</system-reminder>")
    plain = user("plain request")
    blocks = {
        "role": "user",
        "content": [
            {"type": "text", "text": "<command-name>/clear</command-name>"},
            {"type": "text", "text": "and then this"},
        ],
    }

    cleaned = without_harness([caveat, mixed, plain, blocks])

    assert cleaned[0]["is_meta"] is True
    assert cleaned[1]["content"].strip() == "fix it"
    assert cleaned[2] is plain
    assert cleaned[3]["content"] == [{"type": "text", "text": "and then this"}]
    assert request_text(caveat["content"]) == ""


def test_an_earlier_summarys_pointer_to_the_block_is_not_repeated() -> None:
    summarizer = ExtractiveSummarizer()
    first_turns = [
        user("Refactor the parser"),
        *exchange("t1", "Edit", {"file_path": "src/parser.py"}, "ok"),
    ]
    first = summarizer.summarize(SummaryRequest(first_turns, max_tokens=800, state_block=BLOCK))
    earlier = make_summary_message(f"{first}\n\n{BLOCK}")
    later = [earlier, *exchange("t2", "Read", {"file_path": "src/lexer.py"}, "ok"), user("more")]

    second = summarizer.summarize(SummaryRequest(later, max_tokens=800, state_block=BLOCK))

    assert second.count("- every file touched: in the session state below") == 1
    assert "- src/lexer.py" not in second
