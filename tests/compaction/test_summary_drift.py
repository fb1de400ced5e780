"""Summaries of summaries do not drift (docs/behaviour.md#summaries-of-summaries): a growing history
compacted again and again keeps its goal and the paths the agent touched, and says what it left
out."""

from __future__ import annotations

import json
import random

from compaction import Message, Policy, SummaryRequest, compact_messages
from compaction.messages import make_summary_message
from compaction.summarizers import ExtractiveSummarizer
from compaction.summarizers.prompt import SYSTEM_PROMPT, build_user_prompt
from compaction.summarizers.summary_merge import parse_summary
from compaction.tokens import count_text_tokens
from tests.support.histories import assistant, exchange, system, user

GOAL = "Build the CSV invoice exporter for the billing service and keep the API stable"
TOPICS = ("tax", "refund", "currency", "discount")
FILLER = ("def", "class", "return", "value", "invoice", "total", "row", "tax", "amount")
POLICY = Policy(steps=("summary",), keep_recent_messages=6, min_recall=0)


def segment(step: int, rng: random.Random) -> tuple[list[Message], list[str]]:
    """One stretch of agent work: a request, four files read or changed, a test run."""
    request = GOAL if step == 0 else f"Next: step {step}, handle the {rng.choice(TOPICS)} rules"
    messages = [user(request)]
    paths = []
    for number, tool in enumerate(("Read", "Edit", "Write", "Read")):
        path = f"src/billing/{TOPICS[number]}_{step}.py"
        paths.append(path)
        body = " ".join(rng.choice(FILLER) for _ in range(150))
        failed = number == 3 and step % 3 == 0
        messages += exchange(f"t{step}_{number}", tool, {"file_path": path}, body, is_error=failed)
    messages += exchange(f"b{step}", "Bash", {"command": f"pytest tests/test_step_{step}.py"}, "ok")
    paths.append(f"tests/test_step_{step}.py")
    messages.append(assistant(f"Step {step} done. TODO: review the rounding of step {step}."))
    return messages, paths


def grow_and_compact(times: int) -> tuple[list[Message], list[str], list[str]]:
    rng = random.Random(7)
    context: list[Message] = [system()]
    touched: list[str] = []
    summaries: list[str] = []
    for step in range(times):
        messages, paths = segment(step, rng)
        touched += paths
        result = compact_messages([*context, *messages], POLICY, force=True)
        assert result.compacted, result.reason
        summaries.append(result.summary or "")
        context = result.messages
    return context, touched, summaries


def test_ten_compactions_keep_the_goal_and_the_touched_paths():
    context, touched, summaries = grow_and_compact(10)

    text = json.dumps(context)
    assert f"User asked: {GOAL}" in summaries[-1]
    kept = [path for path in touched if path in text]
    assert len(kept) / len(touched) >= 0.9, sorted(set(touched) - set(kept))
    assert all(count_text_tokens(s) <= POLICY.summary_max_tokens for s in summaries)


def test_the_summary_says_what_it_left_out():
    _, _, summaries = grow_and_compact(10)

    assert "older entries left out for space)" in summaries[-1]


def test_an_earlier_summary_is_merged_by_section_not_resummarized():
    earlier = make_summary_message(
        "Goals and key decisions:\n- User asked: Port the exporter to Rust\n"
        "- Decided: keep the CSV header order\n\n"
        "File operations:\n- src/export.rs: written\n"
        "- Older files, details left out: src/a.rs, src/b.rs\n\n"
        "Tool calls and results:\n- 7 tool calls: Bash x4 (1 failed), Read x3\n\n"
        "Current state and pending items:\n- [pending] Add the header test\n"
        "- Latest assistant update: header written\n\n"
        "Errors and fixes:\n- cargo build failed: E0308\n- (3 older entries left out for space)"
        "\n\n<system-reminder>\nFolded src/export.rs (9 lines)\nfn main L1-9\n</system-reminder>"
    )
    newer = [
        user("Now add the footer"),
        *exchange("t1", "Bash", {"command": "cargo test"}, "ok"),
        *exchange("t2", "Edit", {"file_path": "src/export.rs"}, "ok"),
    ]

    text = ExtractiveSummarizer().summarize(SummaryRequest([earlier, *newer]))

    assert text.startswith("Goals and key decisions:\n- User asked: Port the exporter to Rust")
    assert "- Decided: keep the CSV header order" in text
    assert "- src/export.rs: written, modified" in text  # one line, operations merged
    assert "src/a.rs" in text
    assert "src/b.rs" in text
    assert "- 9 tool calls: Bash x5 (1 failed), Read x3, Edit x1" in text  # counts added up
    assert "- [pending] Add the header test" in text
    assert "- Latest assistant update: header written" in text
    assert "- cargo build failed: E0308" in text
    assert "(3 older entries left out for space)" in text  # carried, not lost
    assert "Folded" not in text  # outlines are not summary lines
    assert "fn main" not in text
    assert text.count("Goals and key decisions:") == 1


def test_newer_facts_replace_older_ones():
    earlier = make_summary_message(
        "Current state and pending items:\n- [pending] Old task\n"
        "- Latest assistant update: old update"
    )
    todo = {"todos": [{"content": "New task", "status": "in_progress"}]}
    newer = [
        user("go on"),
        *exchange("t1", "TodoWrite", todo, "ok"),
        assistant("new update"),
    ]

    text = ExtractiveSummarizer().summarize(SummaryRequest([earlier, *newer]))

    assert "- [in_progress] New task" in text
    assert "Old task" not in text
    assert "- Latest assistant update: new update" in text
    assert "old update" not in text


def test_parsing_reads_back_what_the_extractive_summarizer_writes():
    written = ExtractiveSummarizer().summarize(
        SummaryRequest(
            [user(GOAL), *exchange("t1", "Read", {"file_path": "src/a.py"}, "x")], max_tokens=400
        )
    )

    parsed = parse_summary(written)

    assert parsed.lines["Goals and key decisions"] == [f"- User asked: {GOAL}"]
    assert parsed.files == [("src/a.py", ["read"])]
    assert parsed.tool_counts == {"Read": [1, 0]}


def test_the_llm_prompt_shows_the_earlier_summary_verbatim_and_asks_to_merge_it():
    earlier = make_summary_message("Goals and key decisions:\n- User asked: Port it to Rust")

    prompt = build_user_prompt(SummaryRequest([earlier, user("go on")]))

    assert "earlier summary (merge it into yours):\nGoals and key decisions:\n- User asked" in (
        prompt
    )
    assert "1 earlier summary" in prompt
    assert "do not summarise their prose again" in prompt
    assert "carry forward every goal, file path, decision, error and open item" in SYSTEM_PROMPT
    assert "saying what was left out" in SYSTEM_PROMPT
