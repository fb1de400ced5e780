"""The chain of compact_messages: offload, selective + summary as one transaction
(docs/behaviour.md#transactions-and-rollback), the fallbacks
(docs/behaviour.md#hard-truncation, #compaction-flow) and the retention check."""

from __future__ import annotations

import copy
import importlib
import json
from pathlib import Path
from typing import Any

import pytest

from compaction import (
    CompactResult,
    Policy,
    ScriptedSummarizer,
    SummaryError,
    compact_messages,
    count_tokens,
    is_summary_message,
    prune_tool_blocks,
    should_compact,
    validate_messages,
)
from compaction.alternation import alternates
from compaction.carried_state import without_state_block
from compaction.folding import SourceFile, fold
from compaction.hard_truncate import hard_limit_tokens
from compaction.messages import (
    SUMMARY_KEY,
    blocks_of,
    message_text,
    tool_result_ids,
    tool_use_ids,
)
from compaction.summarizers.extractive import KEY_IDENTIFIERS
from tests.support.histories import assistant, exchange, system, user, words

SUMMARY = "Goals and key decisions:\n- carry on"


def tool_history(blocks: int = 8, result_words: int = 150) -> list[dict[str, object]]:
    """A system prompt, a request, `blocks` tool calls with results, a closing reply."""
    messages: list[dict[str, object]] = [system("agent"), user("Refactor src/app.py please")]
    for number in range(blocks):
        messages += exchange(
            f"toolu_{number}", "Read", {"file_path": f"src/m{number}.py"}, words(result_words)
        )
    messages += [assistant("All done " + words(20)), user("thanks " + words(20))]
    return messages


def text_history(turns: int = 8) -> list[dict[str, object]]:
    """Like `tool_history`, but its paths are only written in the assistant's text: no tool
    touches them, so the summary's state block does not hold them (the retention check's
    re-ask is what keeps them)."""
    messages: list[dict[str, object]] = [system("agent"), user("Refactor src/app.py please")]
    for number in range(turns):
        messages += [assistant(f"Notes go to src/m{number}.py " + words(150)), user("go on")]
    messages += [assistant("All done " + words(20)), user("thanks " + words(20))]
    return messages


def narrative(summary: str | None) -> str:
    """A summary without the state block the engine appends (docs/behaviour.md)."""
    return without_state_block(summary or "").rstrip()


def phases(result):
    return [event.phase for event in result.events]


def chain_policy(**changes):
    values: dict[str, Any] = {
        "context_limit": 2000,
        "trigger_ratio": 0.5,
        "tail_retention_ratio": 0.05,
        "keep_recent_messages": 2,
        "dialogue_rounds_keep_min": 0,
        "min_recall": 0,
    }
    values.update(changes)
    return Policy(**values)


# --- selective + summary: commit or roll back together --------------------------------------


def test_selective_then_summary_commit_together():
    messages = tool_history()
    policy = chain_policy(steps=("selective", "summary"))

    result = compact_messages(messages, policy, summarizer=ScriptedSummarizer(SUMMARY))

    assert result.compacted
    assert phases(result)[:3] == ["compaction_start", "selective_start", "selective_done"]
    selective = next(e for e in result.events if e.phase == "selective_done")
    assert selective.tool_blocks_dropped == 3
    assert selective.tool_blocks_kept == 5
    assert [s.step for s in result.steps] == ["selective", "summary"]
    assert all(s.ran and s.changed for s in result.steps)
    assert validate_messages(result.messages) == []


def test_a_failed_summary_rolls_the_pruning_back_too():
    messages = tool_history()
    snapshot = copy.deepcopy(messages)
    policy = chain_policy(steps=("selective", "summary"), max_retries=0)

    result = compact_messages(
        messages, policy, summarizer=ScriptedSummarizer(SummaryError("empty_summary"))
    )

    assert not result.compacted
    assert result.messages is messages
    assert messages == snapshot
    assert result.reason == "empty_summary"
    assert "selective_done" in phases(result)
    assert phases(result)[-2:] == ["rollback", "compaction_done"]


def test_selective_alone_commits_when_summary_is_not_in_the_chain():
    messages = tool_history()

    result = compact_messages(messages, chain_policy(steps=("selective",)))

    assert result.compacted
    assert result.summary is None
    assert count_tokens(result.messages) < count_tokens(messages)
    removed = len(messages) - len(result.messages)
    assert removed > 0  # dropped tool blocks took their messages with them
    assert result.stats.compacted_message_count == removed
    assert result.stats.retained_message_count == len(result.messages)
    assert validate_messages(result.messages) == []


def test_the_partition_is_decided_before_pruning():
    # Pruned, the whole context would fit the tail budget and leave the summary nothing to
    # do; the partition of the unpruned context has a middle, which is summarized.
    messages = tool_history()
    policy = chain_policy(
        steps=("selective", "summary"),
        tail_retention_ratio=0.3,
        tool_result_threshold=100,
        preview_tokens=20,
    )
    pruned = prune_tool_blocks(messages, policy).messages
    assert count_tokens(pruned) < policy.tail_retention_tokens < count_tokens(messages)
    summarizer = ScriptedSummarizer(SUMMARY)

    result = compact_messages(messages, policy, summarizer=summarizer)

    assert result.compacted
    assert narrative(result.summary) == SUMMARY
    assert result.partition is not None
    middle = result.partition.middle
    # The summary reads the originals, tool blocks that pruning dropped included.
    assert list(summarizer.requests[0].messages) == middle == messages[1 : 1 + len(middle)]
    assert any("toolu_0" in tool_use_ids(m) for m in middle)
    # The tail is the pruned one: its kept tool results are cut to a preview.
    tail = result.messages[2:]
    assert tail == result.partition.tail
    cut = [b for m in tail for b in blocks_of(m) if b.get("type") == "tool_result"]
    assert cut
    assert all("[TRUNCATED original~" in b["content"] for b in cut)
    assert policy.scaled(count_tokens(result.messages)) < policy.threshold
    assert validate_messages(result.messages) == []


def test_pruning_is_rolled_back_when_nothing_is_left_to_summarize():
    # Fewer messages than keep_recent_messages: even a forced summary has nothing to do, and
    # the pruning does not commit alone
    # (docs/behaviour.md#transactions-and-rollback, #selective-pruning: only a successful summary
    # commits).
    messages = tool_history(blocks=3, result_words=40)
    policy = chain_policy(
        steps=("selective", "summary"),
        tail_retention_ratio=1.0,
        context_limit=1000,
        keep_recent_messages=len(messages),
        tool_blocks_keep_recent=1,
    )

    result = compact_messages(messages, policy, force=True)

    assert not result.compacted
    assert result.reason == "nothing_to_compact"
    assert result.messages is messages
    assert "selective_done" in phases(result)


def one_prompt_session(tool_calls: int) -> list[dict[str, object]]:
    """A typical agent session: one user prompt, then many tool calls (one round)."""
    messages: list[dict[str, object]] = [system("agent"), user("Migrate the build to Bazel")]
    for number in range(tool_calls):
        messages += exchange(
            f"toolu_{number}", "Bash", {"command": f"make step{number}"}, words(240, "beta")
        )
    messages.append(assistant("Migration done"))
    return messages


@pytest.mark.parametrize("preset", ["balanced", "selective"])
def test_one_prompt_and_many_tool_calls_is_summarized(preset):
    # Round protection must not pull the one round (everything) into the tail.
    messages = one_prompt_session(60)
    policy = Policy.preset(preset, context_limit=10_000)
    assert count_tokens(messages) > 1.3 * policy.context_limit

    result = compact_messages(messages, policy)

    assert result.compacted
    assert result.reason is None
    assert result.summary is not None
    assert [s.step for s in result.steps if s.changed] == ["selective", "summary"]
    assert result.partition is not None
    assert result.partition.middle[0] is messages[1]  # the prompt and older tool traffic
    assert "Migrate the build to Bazel" in message_text(result.messages[1])
    assert policy.scaled(count_tokens(result.messages)) < policy.threshold
    assert validate_messages(result.messages) == []


def rounds_session(count: int) -> list[dict[str, object]]:
    """`count` short rounds: request, one tool call, reply."""
    messages: list[dict[str, object]] = [system("agent")]
    for number in range(count):
        messages += [
            user(f"request {number}: " + words(20)),
            *exchange(f"toolu_{number}", "Bash", {"command": f"make step{number}"}, words(30)),
            assistant(f"reply {number}: " + words(20, "gamma")),
        ]
    return messages


def test_selective_keeps_the_newest_twelve_rounds_verbatim():
    messages = rounds_session(20)
    policy = Policy.preset("selective", context_limit=1800, summary_max_tokens=200)
    assert should_compact(messages, policy)

    result = compact_messages(messages, policy)

    assert result.compacted
    assert result.summary is not None
    kept = {id(m) for m in result.messages}
    texts = [m for m in messages[1:] if not tool_use_ids(m) and not tool_result_ids(m)]
    newest = texts[-24:]  # the requests and replies of rounds 8 to 19
    assert message_text(newest[0]).startswith("request 8:")
    # The first is merged into the summary (both user messages: the roles alternate).
    assert result.messages[1]["content"][1]["text"] == newest[0]["content"]
    assert all(id(m) in kept for m in newest[1:])
    assert alternates(result.messages)
    assert not any(id(m) in kept for m in texts[:-24])  # older rounds are summarized
    # Their tool blocks are still pruned to the newest 5 (docs/behaviour.md#selective-pruning).
    assert sum(1 for m in result.messages if tool_use_ids(m)) == 5
    assert policy.scaled(count_tokens(result.messages)) < policy.threshold
    assert validate_messages(result.messages) == []


def test_auto_compression_keeps_system_summary_and_the_newest_ten_messages():
    messages = [system("agent")]
    for number in range(30):
        messages += [user(f"question {number} " + words(40)), assistant(words(40, "gamma"))]
    assert len(messages[1:]) == 60
    policy = Policy.preset("auto-compression", context_limit=3000)
    assert should_compact(messages, policy)

    result = compact_messages(messages, policy)

    assert result.compacted
    assert result.messages[0] is messages[0]
    assert is_summary_message(result.messages[1])
    # The newest ten: the first, a user message, is merged into the summary (alternation).
    assert len(result.messages) == 11
    assert result.messages[1]["content"][1]["text"] == messages[-10]["content"]
    assert all(a is b for a, b in zip(result.messages[2:], messages[-9:], strict=True))
    assert result.stats.retained_message_count == 10  # the merged one counts as compacted


# --- the summary holds the folded files of the middle (docs/behaviour.md#file-outlines) -----------

SOURCE = """\
import os


class Parser:
    def parse(self, text):
        return [line.split() for line in text.splitlines() if line.strip()]

    def guard(self, text):
        if not text:
            raise ValueError("empty input")
        return text


def load_config(path):
    with open(path) as handle:
        return handle.read()


def main():
    print(Parser().parse(load_config(os.environ["CONFIG"])))
"""


def summary_text(result: CompactResult) -> str:
    """The summary message's own text (a user message after it is merged in)."""
    return str(result.messages[1]["content"][0]["text"])


def numbered(source: str) -> str:
    """The source as the Read tool shows it: `     1→code`."""
    return "\n".join(f"{n:6}\u2192{line}" for n, line in enumerate(source.splitlines(), 1))


def test_the_summary_message_holds_the_outline_of_a_file_read_in_the_middle():
    messages = [
        system("agent"),
        user("Fix the parser in src/parser.py"),
        *exchange("toolu_1", "Read", {"file_path": "src/parser.py"}, numbered(SOURCE * 3)),
        assistant("The guard is missing " + words(200)),
        user("Thanks " + words(200)),
    ]
    policy = chain_policy(steps=("summary",), keep_recent_messages=1)

    result = compact_messages(messages, policy, summarizer=ScriptedSummarizer(SUMMARY), force=True)

    assert result.compacted
    summary = summary_text(result)
    assert f"{SUMMARY}\n\n<session-state>" in summary
    assert "</session-state>\n\n<system-reminder>\nFolded src/parser.py" in summary
    outline = summary[summary.index("<system-reminder>") :]
    assert outline.rstrip().endswith("</system-reminder>")
    assert "class Parser" in outline
    assert "load_config" in outline
    assert "main" in outline
    assert "handle.read()" not in outline  # names only, no bodies
    assert narrative(result.summary) == SUMMARY  # the summarizer's own text
    assert result.messages[1][SUMMARY_KEY]["message_count"] == 4
    [report] = [s for s in result.steps if s.step == "summary"]
    assert report.detail["folded_files"] == 1


def test_the_outlines_are_held_to_the_fold_budget():
    messages = [system("agent"), user("Read every module")]
    files = []
    for number in range(6):
        source = SOURCE.replace("Parser", f"Parser{number}").replace("main", f"main{number}")
        files.append(SourceFile(f"src/m{number}.py", source * 2))
        messages += exchange(
            f"toolu_{number}", "Read", {"file_path": f"src/m{number}.py"}, numbered(source * 2)
        )
    messages += [assistant("Read them all " + words(300)), user("Go on " + words(300))]
    policy = chain_policy(steps=("summary",), keep_recent_messages=1, fold_max_tokens=200)
    kept: list[SourceFile] = []  # the newest outlines, up to the one that crosses the budget
    for file in reversed(files):
        if sum(fold([k], policy=policy).tokens for k in kept) > policy.fold_max_tokens:
            break
        kept.insert(0, file)
    assert len(kept) < len(files)  # older views are left out once the budget is spent
    budgeted = fold(kept, policy=policy)
    assert budgeted.dropped_lines > 0  # the kept outlines are over the budget together

    result = compact_messages(messages, policy, summarizer=ScriptedSummarizer(SUMMARY), force=True)

    assert result.compacted
    assert summary_text(result).endswith(f"</session-state>\n\n{budgeted.text}")
    assert f"{SUMMARY}\n\n<session-state>" in summary_text(result)


def test_a_file_whose_outline_is_not_smaller_is_left_out():
    messages = [
        system("agent"),
        user("Check the version"),
        *exchange("toolu_1", "Read", {"file_path": "src/version.py"}, 'VERSION = "1.2"'),
        assistant("It is 1.2 " + words(200)),
        user("Thanks " + words(200)),
    ]
    policy = chain_policy(steps=("summary",), keep_recent_messages=1)

    result = compact_messages(messages, policy, summarizer=ScriptedSummarizer(SUMMARY), force=True)

    assert result.compacted
    assert narrative(summary_text(result)).endswith(SUMMARY)


# --- fallbacks ------------------------------------------------------------------------------


def test_failed_summary_under_the_hard_limit_runs_no_fallback():
    messages = tool_history()
    policy = chain_policy(
        steps=("summary", "smart_truncate", "hard_truncate"), max_retries=0, hard_limit=100_000
    )

    result = compact_messages(
        messages, policy, summarizer=ScriptedSummarizer(SummaryError("timeout"))
    )

    assert not result.compacted
    assert result.reason == "timeout"
    reports = {s.step: s for s in result.steps}
    assert not reports["smart_truncate"].ran
    assert not reports["hard_truncate"].ran


def test_failed_summary_over_the_hard_limit_falls_back_to_hard_truncation():
    messages = tool_history()
    policy = chain_policy(steps=("summary", "hard_truncate"), max_retries=0, hard_limit=1000)

    result = compact_messages(
        messages, policy, summarizer=ScriptedSummarizer(SummaryError("api_error"))
    )

    assert result.compacted
    assert result.reason == "api_error"  # the summary failure is still reported
    assert count_tokens(result.messages) <= hard_limit_tokens(policy)
    assert result.messages[0] is messages[0]
    assert "hard_truncate_done" in phases(result)
    assert result.summary is None
    assert validate_messages(result.messages) == []


def test_failed_summary_over_the_hard_limit_tries_smart_truncation_first():
    messages = tool_history()
    policy = chain_policy(
        steps=("summary", "smart_truncate", "hard_truncate"),
        max_retries=0,
        hard_limit=1000,
        smart_truncate_max_tokens=800,
    )

    result = compact_messages(
        messages, policy, summarizer=ScriptedSummarizer(SummaryError("api_error"))
    )

    assert result.compacted
    ran = [s.step for s in result.steps if s.ran]
    assert ran[:2] == ["summary", "smart_truncate"]
    assert "smart_truncate_done" in phases(result)
    assert policy.scaled(count_tokens(result.messages)) <= policy.effective_hard_limit


def test_smart_truncation_alone_runs_when_over_the_threshold():
    messages = tool_history()
    policy = chain_policy(steps=("smart_truncate",), smart_truncate_max_tokens=600)

    result = compact_messages(messages, policy)

    assert result.compacted
    assert count_tokens(result.messages) < count_tokens(messages)
    assert validate_messages(result.messages) == []


def test_fallback_after_a_successful_summary_still_over_the_threshold():
    # The tail alone is over the threshold: the summary succeeds, hard truncation finishes.
    messages = [system("s"), user(words(300)), assistant(words(300)), user(words(1500))]
    policy = chain_policy(
        steps=("summary", "hard_truncate"), hard_limit=1200, keep_recent_messages=1
    )

    result = compact_messages(messages, policy, summarizer=ScriptedSummarizer(SUMMARY))

    assert result.compacted
    assert [s.step for s in result.steps if s.ran] == ["summary", "hard_truncate"]
    assert count_tokens(result.messages) <= hard_limit_tokens(policy)
    assert validate_messages(result.messages) == []


# --- offload ---------------------------------------------------------------------------------


def test_offload_without_a_target_is_skipped():
    result = compact_messages(tool_history(), chain_policy(steps=("offload", "summary")))

    offload = next(s for s in result.steps if s.step == "offload")
    assert not offload.ran
    assert result.compacted  # the summary still ran


def test_offload_that_brings_the_context_under_the_threshold_ends_the_chain(tmp_path):
    messages = tool_history(result_words=300)
    summarizer = ScriptedSummarizer(SUMMARY)

    result = compact_messages(
        messages,
        chain_policy(steps=("offload", "summary"), context_limit=2000, trigger_ratio=0.5),
        summarizer=summarizer,
        offload_dir=tmp_path,
    )

    assert result.compacted
    assert summarizer.requests == []
    assert "offload_done" in phases(result)
    assert len(list(tmp_path.iterdir())) == 8
    summary_report = next(s for s in result.steps if s.step == "summary")
    assert not summary_report.ran


def test_offload_then_summary_when_still_over(tmp_path):
    messages = tool_history(result_words=300)

    result = compact_messages(
        messages,
        chain_policy(steps=("offload", "summary"), context_limit=400),
        summarizer=ScriptedSummarizer(SUMMARY),
        offload_dir=tmp_path,
    )

    assert [s.step for s in result.steps if s.ran] == ["offload", "summary"]
    assert narrative(result.summary) == SUMMARY


# --- the archive holds every replaced original ------------------------------------------------


def test_archive_holds_pruned_and_summarised_originals(tmp_path):
    messages = tool_history()
    policy = chain_policy(steps=("selective", "summary"))

    result = compact_messages(
        messages,
        policy,
        summarizer=ScriptedSummarizer(SUMMARY),
        archive_dir=tmp_path,
        session_id="s",
    )

    archived = json.loads(Path(result.archive_path or "").read_text(encoding="utf-8"))
    kept = [m for m in messages if any(m is out for out in result.messages)]
    assert len(archived) + len(kept) == len(messages)
    assert all(m in archived for m in messages if m not in kept)


# --- retention check ------------------------------------------------------------------------


def test_recall_is_reported():
    result = compact_messages(tool_history(), chain_policy(steps=("summary",)))

    assert result.stats.recall is not None
    assert 0.0 <= result.stats.recall <= 1.0


def test_low_recall_asks_again_with_the_missing_identifiers():
    messages = text_history()
    summarizer = ScriptedSummarizer(
        "Goals and key decisions:\n- something vague",
        lambda request: "Key identifiers:\n" + "\n".join(request.required_identifiers),
    )

    # No file views: their folded outlines would carry the paths into the summary message.
    policy = chain_policy(steps=("summary",), min_recall=0.8, file_view_tools=())

    result = compact_messages(messages, policy, summarizer=summarizer)

    assert len(summarizer.requests) == 2
    second = summarizer.requests[1]
    assert "src/m0.py" in second.required_identifiers
    assert result.stats.recall == 1.0
    assert "src/m0.py" in (result.summary or "")
    check = next(e for e in result.events if e.phase == "retention_check")
    assert check.reason == "low_recall"


def test_a_worse_second_answer_is_not_kept():
    summarizer = ScriptedSummarizer("Goals and key decisions:\n- src/m0.py", "nothing useful")

    policy = chain_policy(steps=("summary",), min_recall=1.0, file_view_tools=())

    result = compact_messages(text_history(), policy, summarizer=summarizer)

    assert len(summarizer.requests) == 2
    assert narrative(result.summary) == "Goals and key decisions:\n- src/m0.py"


def test_a_failed_second_answer_keeps_the_first():
    summarizer = ScriptedSummarizer("Goals and key decisions:\n- vague", SummaryError("timeout"))

    policy = chain_policy(steps=("summary",), min_recall=1.0, file_view_tools=())

    result = compact_messages(tool_history(), policy, summarizer=summarizer)

    assert result.compacted
    assert narrative(result.summary) == "Goals and key decisions:\n- vague"


def test_extractive_retention_retry_adds_key_identifiers():
    messages = tool_history(blocks=8)
    policy = chain_policy(steps=("summary",), min_recall=1.0, summary_max_tokens=200)

    result = compact_messages(messages, policy)

    assert result.stats.recall is not None
    assert result.stats.recall >= 0.8
    assert f"{KEY_IDENTIFIERS}:" in (result.summary or "") or result.stats.recall == 1.0


# The steps are patched where compact_messages looks them up.
COMPACT_MODULE = importlib.import_module("compaction.chain_steps")


# --- any failure rolls back ----------------------------------------------------------------


def test_a_crashing_pruner_rolls_back_and_is_named(monkeypatch):
    def crash(messages, policy=None, **options):
        raise RuntimeError("pruner bug")

    monkeypatch.setattr(COMPACT_MODULE, "prune_tool_blocks", crash)
    messages = tool_history()

    result = compact_messages(messages, chain_policy(steps=("selective", "summary")))

    assert not result.compacted
    assert result.reason == "selective_error"
    assert result.messages is messages


def test_an_invalid_result_is_never_returned(monkeypatch):
    from compaction.results import PruneResult

    def orphaning(messages, policy=None, **options):  # drops a tool_use but keeps its result
        broken = [m for m in messages if m is not messages[2]]
        return PruneResult(messages=broken)

    monkeypatch.setattr(COMPACT_MODULE, "prune_tool_blocks", orphaning)
    messages = tool_history()

    result = compact_messages(messages, chain_policy(steps=("selective",)))

    assert not result.compacted
    assert result.reason == "invalid_output"
    assert result.messages is messages


def test_a_crashing_fallback_keeps_the_previous_state(monkeypatch):
    def crash(messages, policy=None, **options):
        raise RuntimeError("truncate bug")

    monkeypatch.setattr(COMPACT_MODULE, "smart_truncate", crash)
    messages = tool_history()
    policy = chain_policy(steps=("smart_truncate", "hard_truncate"), hard_limit=1000)

    result = compact_messages(messages, policy)

    assert result.compacted  # hard truncation still ran
    assert result.reason == "smart_truncate_error"
    assert [s.step for s in result.steps if s.changed] == ["hard_truncate"]


def test_a_failed_summary_keeps_the_offload_it_followed(tmp_path):
    messages = tool_history(result_words=300)

    result = compact_messages(
        messages,
        chain_policy(steps=("offload", "selective", "summary"), context_limit=400, max_retries=0),
        summarizer=ScriptedSummarizer(SummaryError("timeout")),
        offload_dir=tmp_path,
    )

    assert result.compacted  # the offload stays committed
    assert result.reason == "timeout"
    reports = {s.step: s for s in result.steps}
    assert reports["offload"].changed
    assert not reports["selective"].changed
    assert reports["selective"].detail["rolled_back"] is True
    assert count_tokens(result.messages) < count_tokens(messages)
