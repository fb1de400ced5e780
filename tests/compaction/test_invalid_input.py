"""Invalid input to any public engine function raises a named error, never a bare
AttributeError or TypeError, and never passes silently."""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import compaction
from compaction import (
    Compactor,
    InvalidFilesError,
    InvalidMessagesError,
    Policy,
    ScriptedSummarizer,
    alternates,
    compact_messages,
    count_tokens,
    ensure_valid,
    fold_file,
    fold_files,
    hard_truncate,
    merge_adjacent_roles,
    message_token_counts,
    message_tokens,
    offload_tool_results,
    partition,
    prune_tool_blocks,
    should_compact,
    smart_truncate,
)
from compaction.folding import SourceFile

#: A tool call answered by a tool_result that has no tool_use_id.
NO_ID_HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": "agent"},
    {"role": "user", "content": "list the files"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]},
    {"role": "user", "content": [{"type": "tool_result", "content": "a.py\nb.py " * 30}]},
]
NO_ID_PATH = "messages[3].content[0].tool_use_id"


def forced(messages: Any) -> object:
    return compact_messages(messages, summarizer=ScriptedSummarizer("s"), force=True)


def compactor(messages: Any) -> object:
    return Compactor(Policy(), ScriptedSummarizer("s")).compact(messages, force=True)


def offload(tmp_path: Path) -> Callable[[Any], object]:
    return lambda messages: offload_tool_results(messages, tmp_path)


HISTORY_FUNCTIONS: dict[str, Callable[[Path], Callable[[Any], object]]] = {
    "compact_messages": lambda _: forced,
    "Compactor.compact": lambda _: compactor,
    "partition": lambda _: partition,
    "should_compact": lambda _: should_compact,
    "prune_tool_blocks": lambda _: prune_tool_blocks,
    "smart_truncate": lambda _: smart_truncate,
    "hard_truncate": lambda _: hard_truncate,
    "offload_tool_results": offload,
    "ensure_valid": lambda _: ensure_valid,
    "merge_adjacent_roles": lambda _: merge_adjacent_roles,
    "alternates": lambda _: alternates,
}


@pytest.mark.parametrize("name", sorted(HISTORY_FUNCTIONS))
def test_a_tool_result_without_tool_use_id_is_refused(name: str, tmp_path: Path) -> None:
    function = HISTORY_FUNCTIONS[name](tmp_path)

    with pytest.raises(InvalidMessagesError) as caught:
        function(NO_ID_HISTORY)

    assert caught.value.problems[0].path == NO_ID_PATH
    assert list(tmp_path.iterdir()) == []  # nothing was written


@pytest.mark.parametrize("name", sorted(HISTORY_FUNCTIONS))
@pytest.mark.parametrize("messages", [None, "hello", [1], [{"role": "user", "content": 5}]])
def test_a_non_history_is_refused(name: str, messages: Any, tmp_path: Path) -> None:
    with pytest.raises(InvalidMessagesError):
        HISTORY_FUNCTIONS[name](tmp_path)(messages)


@pytest.mark.parametrize(
    "count",
    [
        lambda messages: count_tokens(messages),
        lambda messages: message_token_counts(messages),
    ],
)
def test_token_counts_refuse_a_message_that_is_not_an_object(count: Any) -> None:
    messages: Any = [{"role": "user", "content": "hi"}, 1]
    with pytest.raises(InvalidMessagesError) as caught:
        count(messages)
    assert caught.value.problems[0].path == "messages[1]"

    with pytest.raises(InvalidMessagesError) as caught:
        count("not a list")
    assert caught.value.problems[0].path == "messages"


def test_count_tokens_of_one_non_dict_message_names_its_path() -> None:
    with pytest.raises(InvalidMessagesError) as caught:
        count_tokens([1])  # type: ignore[list-item]
    assert caught.value.problems[0].path == "messages[0]"

    with pytest.raises(InvalidMessagesError) as caught:
        message_tokens(1)  # type: ignore[arg-type]
    assert caught.value.problems[0].path == "message"


def test_token_counts_stay_lenient_about_blocks(caplog: pytest.LogCaptureFixture) -> None:
    # Unknown block types are skipped with a warning, not refused; and the
    # tool_result with no id is counted (counting is not validating)
    # (docs/behaviour.md#token-counting).
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "mystery"}, {"type": "text", "text": "hi"}]}
    ]

    assert count_tokens(messages) == count_tokens([{"role": "user", "content": "hi"}])
    assert "unknown content block type 'mystery'" in caplog.text
    assert count_tokens(NO_ID_HISTORY) > 0


@pytest.mark.parametrize(
    ("call", "path"),
    [
        (lambda: fold_file("a.py", 1), "files[0].source"),  # type: ignore[arg-type]
        (lambda: fold_file(None, "x = 1"), "files[0].path"),  # type: ignore[arg-type]
        (lambda: fold_file("a.py", "x = 1", first_line=0), "files[0].first_line"),
        (lambda: fold_files([1]), "files[0]"),  # type: ignore[list-item]
        (lambda: fold_files([("a.py", "x = 1"), ("b.py", None)]), "files[1].source"),  # type: ignore[list-item]
        (lambda: fold_files({"a.py": b"x = 1"}), "files[0].source"),  # type: ignore[arg-type]
        (lambda: fold_files([SourceFile("", "x = 1")]), "files[0].path"),
        (lambda: fold_files(None), "files"),  # type: ignore[arg-type]
    ],
)
def test_fold_refuses_files_that_are_not_paths_with_source_text(call: Any, path: str) -> None:
    with pytest.raises(InvalidFilesError) as caught:
        call()

    assert caught.value.problems[0].path == path


def test_fold_accepts_path_objects() -> None:
    files: Any = [(Path("src/a.py"), "def f():\n    pass\n")]
    assert "Folded src/a.py" in fold_files(files)


#: Public functions that take no history or are not meant to refuse one.
NOT_HISTORY_FUNCTIONS = {
    "count_tokens",  # lenient counting, tested above
    "message_token_counts",
    "message_tokens",
    "fold_file",  # files, tested above
    "fold_files",
    "get_encoding",  # UnknownEncodingError, tests/compaction/test_tokens.py
    "configure",  # where vocabularies are unpacked, tests/compaction/test_tokens.py
    "validate_messages",  # reports problems rather than raising
    "is_summary_message",  # predicates and builders of one message
    "make_summary_message",
    "blocks_of",  # helpers over one message, exported for the web app
    "is_meta",
    "starts_round",
    "tool_use_ids",
    "tool_result_text",  # one content value, lenient: tests/compaction/test_tool_result_text.py
    "compact_json",  # a JSON value, not a history
    "archive_name",  # an archive file name
    "extract_identifiers",  # the retention check, lenient on any stored history (for the
    "measure_recall",  # history's "what was lost"): tests/compaction/test_retention.py
    "state_recall",  # the same, of the session state: tests/compaction/test_summary_grounding.py
    "expand_path_groups",  # a summary's text, not a history
}


def test_every_public_function_is_covered() -> None:
    functions = {
        name
        for name in compaction.__all__
        if callable(value := getattr(compaction, name))
        and not inspect.isclass(value)
        and not isinstance(value, types.GenericAlias)  # the Message alias
    }

    assert functions == (set(HISTORY_FUNCTIONS) - {"Compactor.compact"}) | NOT_HISTORY_FUNCTIONS
