"""Offloading large tool results to files (docs/behaviour.md#offloading, hostile ids)."""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from compaction.blobstore import LocalBlobStore
from compaction.errors import BlobStoreError, InvalidMessagesError, PolicyError
from compaction.offload import offload_reference, offload_tool_results, tool_result_chars
from compaction.tokens import count_tokens
from compaction.validation import validate_messages
from tests.support.histories import histories


def call(*ids: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": "ls"}}
            for tool_id in ids
        ],
    }


def results(*pairs: tuple[str, Any]) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": tool_id, "content": content}
            for tool_id, content in pairs
        ],
    }


def blocks_of_json_length(length: int) -> list[dict[str, Any]]:
    """A text-block list whose compact JSON has exactly `length` characters (é counts 1)."""
    frame = len(json.dumps([{"type": "text", "text": ""}], separators=(",", ":")))
    blocks = [{"type": "text", "text": "é" * (length - frame)}]
    assert tool_result_chars(blocks) == length
    return blocks


# The character count and the 100 boundary (docs/behaviour.md#offloading) --------------------------


def test_string_content_counts_its_length() -> None:
    assert tool_result_chars("x" * 7) == 7
    assert tool_result_chars("") == 0
    assert tool_result_chars(None) == 0


def test_block_content_counts_compact_json_like_json_stringify() -> None:
    blocks = [{"type": "text", "text": "héllo"}]
    # JSON.stringify: no spaces, non-ASCII kept as is.
    assert tool_result_chars(blocks) == len('[{"type":"text","text":"héllo"}]') == 32


@pytest.mark.parametrize(("length", "offloaded"), [(100, True), (99, False), (101, True)])
def test_string_boundary_100_offloads_99_stays(
    tmp_path: Path, length: int, offloaded: bool
) -> None:
    messages = [call("t1"), results(("t1", "x" * length))]
    result = offload_tool_results(messages, tmp_path)
    assert result.offloaded_count == int(offloaded)
    assert (tmp_path / "tool-result-t1.md").exists() == offloaded
    if not offloaded:
        assert result.messages[1] is messages[1]


@pytest.mark.parametrize(("length", "offloaded"), [(100, True), (99, False)])
def test_block_list_boundary_uses_json_length(tmp_path: Path, length: int, offloaded: bool) -> None:
    messages = [call("t1"), results(("t1", blocks_of_json_length(length)))]
    result = offload_tool_results(messages, tmp_path)
    assert result.offloaded_count == int(offloaded)
    assert result.freed_chars == (length if offloaded else 0)


@pytest.mark.parametrize("min_chars", [0, 1, 100])
def test_empty_content_is_never_offloaded(tmp_path: Path, min_chars: int) -> None:
    messages = [call("t1"), results(("t1", ""))]
    result = offload_tool_results(messages, tmp_path, min_chars=min_chars)
    assert result.offloaded_count == 0
    assert result.messages[1] is messages[1]
    assert list(tmp_path.iterdir()) == []


def test_min_chars_is_configurable(tmp_path: Path) -> None:
    messages = [call("t1"), results(("t1", "x" * 10))]
    assert offload_tool_results(messages, tmp_path, min_chars=10).offloaded_count == 1
    assert offload_tool_results(messages, tmp_path, min_chars=11).offloaded_count == 0


def test_negative_min_chars_is_a_policy_error(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="min_chars"):
        offload_tool_results([], tmp_path, min_chars=-1)


# Files, references, stats (docs/behaviour.md#offloading) ------------------------------------------


def test_offloaded_string_is_written_and_referenced(tmp_path: Path) -> None:
    content = "line one\n" * 20
    messages = [call("toolu_01abc"), results(("toolu_01abc", content))]
    result = offload_tool_results(messages, tmp_path)
    file = tmp_path / "tool-result-toolu_01abc.md"
    assert file.read_text(encoding="utf-8") == content
    block = result.messages[1]["content"][0]
    assert block["content"] == "[Content offloaded to: ./tool-result-toolu_01abc.md]"
    assert block["content"] == offload_reference("tool-result-toolu_01abc.md")
    assert block["tool_use_id"] == "toolu_01abc"
    assert result.files == [str(file.resolve())]
    assert os.path.isabs(result.files[0])
    assert result.freed_chars == len(content)
    assert result.offloaded_count == 1


def test_offloaded_block_list_becomes_a_string_and_the_file_holds_its_json(
    tmp_path: Path,
) -> None:
    blocks = [
        {"type": "text", "text": "a" * 80},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA"}},
    ]
    messages = [call("t1"), results(("t1", blocks))]
    result = offload_tool_results(messages, tmp_path)
    assert isinstance(result.messages[1]["content"][0]["content"], str)
    written = (tmp_path / "tool-result-t1.md").read_text(encoding="utf-8")
    assert json.loads(written) == blocks
    assert len(written) == result.freed_chars == tool_result_chars(blocks)


def test_other_block_keys_are_kept(tmp_path: Path) -> None:
    messages = [
        call("t1"),
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "e" * 120, "is_error": True}
            ],
            "id": "msg-7",
        },
    ]
    result = offload_tool_results(messages, tmp_path)
    assert result.messages[1]["id"] == "msg-7"
    assert result.messages[1]["content"][0]["is_error"] is True


def test_mixed_results_offload_only_the_large_ones_oldest_first(tmp_path: Path) -> None:
    messages = [
        {"role": "user", "content": "start"},
        call("a", "b"),
        results(("a", "A" * 150), ("b", "small")),
        call("c"),
        results(("c", "C" * 300)),
    ]
    result = offload_tool_results(messages, tmp_path)
    assert result.offloaded_count == 2
    assert result.freed_chars == 450
    assert [Path(f).name for f in result.files] == ["tool-result-a.md", "tool-result-c.md"]
    assert result.messages[2]["content"][1]["content"] == "small"


def test_messages_without_tool_results_come_back_unchanged(tmp_path: Path) -> None:
    messages = [{"role": "user", "content": "x" * 500}, {"role": "assistant", "content": "ok"}]
    result = offload_tool_results(messages, tmp_path)
    assert result.offloaded_count == 0
    assert all(a is b for a, b in zip(result.messages, messages, strict=True))
    assert list(tmp_path.iterdir()) == []


def test_empty_list(tmp_path: Path) -> None:
    result = offload_tool_results([], tmp_path)
    assert result.messages == []
    assert (result.offloaded_count, result.freed_chars, result.files) == (0, 0, [])


# State behaviour: new list, identity, no mutation ------------------------------------------


def test_input_is_not_mutated_and_untouched_messages_keep_identity(tmp_path: Path) -> None:
    messages = [
        {"role": "user", "content": "hi", "meta": {"k": [1]}},
        call("t1"),
        results(("t1", "x" * 200)),
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
    ]
    snapshot = copy.deepcopy(messages)
    result = offload_tool_results(messages, tmp_path)
    assert messages == snapshot
    assert result.messages is not messages
    assert result.messages[0] is messages[0]
    assert result.messages[1] is messages[1]
    assert result.messages[3] is messages[3]
    assert result.messages[2] is not messages[2]


def test_changed_messages_are_deep_copies(tmp_path: Path) -> None:
    messages = [
        call("t1", "t2"),
        {**results(("t1", "x" * 200), ("t2", [{"type": "text", "text": "s"}])), "x": {"a": 1}},
    ]
    snapshot = copy.deepcopy(messages)
    result = offload_tool_results(messages, tmp_path)
    result.messages[1]["content"][1]["content"][0]["text"] = "changed"
    result.messages[1]["x"]["a"] = 2
    assert messages == snapshot


# The output directory (docs/behaviour.md#offloading) ----------------------------------------------


def test_missing_output_directory_is_created_with_parents(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "c"
    result = offload_tool_results([call("t1"), results(("t1", "x" * 100))], target)
    assert (target / "tool-result-t1.md").exists()
    assert result.files == [str((target / "tool-result-t1.md").resolve())]


def test_output_directory_is_created_even_when_nothing_is_offloaded(tmp_path: Path) -> None:
    offload_tool_results([], tmp_path / "new")
    assert (tmp_path / "new").is_dir()


def test_existing_output_directory_is_fine(tmp_path: Path) -> None:
    offload_tool_results([call("t1"), results(("t1", "x" * 100))], tmp_path)
    again = offload_tool_results([call("t2"), results(("t2", "y" * 100))], tmp_path)
    assert again.offloaded_count == 1
    assert (tmp_path / "tool-result-t2.md").read_text() == "y" * 100


# A file is never replaced (issue 10) ---------------------------------------------------------


def reference_of(result: Any, message: int = 1) -> str:
    match = re.fullmatch(
        r"\[Content offloaded to: \./(.+)\]", result.messages[message]["content"][0]["content"]
    )
    assert match is not None
    return match.group(1)


def test_a_second_call_with_the_same_id_writes_a_new_file(tmp_path: Path) -> None:
    # Agents reuse ids such as call_0 every turn: each turn's result keeps its own file.
    first = offload_tool_results([call("call_0"), results(("call_0", "x" * 100))], tmp_path)
    second = offload_tool_results([call("call_0"), results(("call_0", "y" * 100))], tmp_path)

    assert reference_of(first) == "tool-result-call_0.md"
    assert reference_of(second) == "tool-result-call_0-1.md"
    assert (tmp_path / reference_of(first)).read_text() == "x" * 100
    assert (tmp_path / reference_of(second)).read_text() == "y" * 100
    assert second.files == [str((tmp_path / "tool-result-call_0-1.md").resolve())]


def test_numbers_continue_after_files_of_earlier_calls(tmp_path: Path) -> None:
    for turn in range(12):
        offload_tool_results([call("c"), results(("c", f"{turn:03}" * 40))], tmp_path)
    messages = [call("c"), results(("c", "a" * 100)), call("c"), results(("c", "b" * 100))]

    result = offload_tool_results(messages, tmp_path)

    assert reference_of(result, 1) == "tool-result-c-12.md"
    assert reference_of(result, 3) == "tool-result-c-13.md"
    assert (tmp_path / "tool-result-c-11.md").read_text() == "011" * 40
    assert (tmp_path / "tool-result-c-13.md").read_text() == "b" * 100
    assert len(list(tmp_path.iterdir())) == 14


def test_a_file_created_between_check_and_write_is_not_replaced(tmp_path: Path) -> None:
    class RacingStore(LocalBlobStore):
        """Another writer creates each name right after this store saw it free."""

        def exists(self, name: str) -> bool:
            free = not super().exists(name)
            if free and name == "tool-result-t1.md":
                self.path(name).write_text("other writer")
            return not free

    result = offload_tool_results(
        [call("t1"), results(("t1", "x" * 100))], None, store=RacingStore(tmp_path)
    )

    assert (tmp_path / "tool-result-t1.md").read_text() == "other writer"
    assert reference_of(result) == "tool-result-t1-1.md"
    assert (tmp_path / "tool-result-t1-1.md").read_text() == "x" * 100


def test_a_store_without_create_is_checked_before_each_write() -> None:
    store = MemoryStore()
    store.blobs["tool-result-t1.md"] = b"earlier"

    result = offload_tool_results([call("t1"), results(("t1", "x" * 100))], None, store=store)

    assert store.blobs["tool-result-t1.md"] == b"earlier"
    assert store.blobs["tool-result-t1-1.md"] == b"x" * 100
    assert result.files == ["memory://tool-result-t1-1.md"]


# Repeated ids ------------------------------------------------------------------------------


def test_repeated_ids_get_numbered_names_after_the_first(tmp_path: Path) -> None:
    messages = [
        call("dup"),
        results(("dup", "1" * 100)),
        call("dup"),
        results(("dup", "2" * 100)),
        call("dup"),
        results(("dup", "3" * 100)),
    ]
    result = offload_tool_results(messages, tmp_path)
    names = [Path(f).name for f in result.files]
    assert names == ["tool-result-dup.md", "tool-result-dup-1.md", "tool-result-dup-2.md"]
    assert [(tmp_path / n).read_text() for n in names] == ["1" * 100, "2" * 100, "3" * 100]
    assert result.messages[3]["content"][0]["content"] == (
        "[Content offloaded to: ./tool-result-dup-1.md]"
    )


def test_a_small_repeat_does_not_use_up_a_number(tmp_path: Path) -> None:
    messages = [call("d"), results(("d", "small")), call("d"), results(("d", "x" * 100))]
    result = offload_tool_results(messages, tmp_path)
    assert [Path(f).name for f in result.files] == ["tool-result-d.md"]


def test_numbered_names_never_overwrite_another_ids_file(tmp_path: Path) -> None:
    messages = [
        call("a"),
        results(("a", "first" * 20)),
        call("a"),
        results(("a", "second" * 20)),
        call("a-1"),
        results(("a-1", "third" * 20)),
        call("A"),
        results(("A", "upper" * 20)),
    ]
    result = offload_tool_results(messages, tmp_path)
    names = [Path(f).name for f in result.files]
    assert names == [
        "tool-result-a.md",
        "tool-result-a-1.md",
        "tool-result-a-1-1.md",
        # `A` would clash with `a` (and `A-1` with `a-1`) on a case-insensitive file system.
        "tool-result-A-2.md",
    ]
    assert len({n.casefold() for n in names}) == 4
    assert (tmp_path / "tool-result-a-1.md").read_text() == "second" * 20


# Hostile ids -------------------------------------------------------------------------------

HOSTILE_IDS = [
    "../../escape",
    "../../../../../../tmp/ctxweb-escape",
    "/etc/passwd",
    "a/b/c",
    "a\\b",
    "nul\x00byte",
    "..",
    ".",
    "x" * 300,
    "tab\tand\nnewline",
    "ид-юникод",
    "C:\\Windows\\system32",
]


@pytest.mark.parametrize("tool_id", HOSTILE_IDS)
def test_hostile_ids_never_write_outside_output_dir(tmp_path: Path, tool_id: str) -> None:
    outside_before = set((tmp_path).iterdir())
    output = tmp_path / "out"
    messages = [call(tool_id or "t"), results((tool_id, "secret" * 20))]
    result = offload_tool_results(messages, output)
    assert set(tmp_path.iterdir()) - outside_before == {output}
    written = list(output.iterdir())
    assert len(written) == 1
    file = written[0]
    assert file.parent.resolve() == output.resolve()
    assert re.fullmatch(r"tool-result-[A-Za-z0-9_-]+\.md", file.name)
    assert len(file.name) < 100
    assert file.read_text() == "secret" * 20
    assert result.renamed_ids == {tool_id: file.name}
    assert result.messages[1]["content"][0]["content"] == f"[Content offloaded to: ./{file.name}]"
    assert result.files == [str(file.resolve())]


@pytest.mark.parametrize(
    "block",
    [
        {"type": "tool_result", "content": "x" * 200},  # no tool_use_id
        {"type": "tool_result", "tool_use_id": "", "content": "x" * 200},
        {"type": "tool_result", "tool_use_id": 7, "content": "x" * 200},
    ],
)
def test_a_tool_result_without_an_id_is_invalid_input(tmp_path: Path, block: Any) -> None:
    messages = [call("t"), {"role": "user", "content": [block]}]

    with pytest.raises(InvalidMessagesError) as caught:
        offload_tool_results(messages, tmp_path / "out")

    assert caught.value.problems[0].path == "messages[1].content[0].tool_use_id"
    assert not (tmp_path / "out").exists()  # nothing written


def test_repeated_ids_are_valid_input_the_pairing_is_not_checked(tmp_path: Path) -> None:
    # docs/behaviour.md#offloading names repeated tool_use_ids as input to handle, not to refuse.
    messages = [call("t"), results(("other", "x" * 100), ("other", "y" * 100))]

    result = offload_tool_results(messages, tmp_path)

    assert result.offloaded_count == 2


def test_distinct_hostile_ids_get_distinct_files(tmp_path: Path) -> None:
    ids = ["a/b", "a\\b", "a:b", "a b"]  # all sanitize to `a_b`
    messages = [call("t"), results(*[(i, f"{i} " * 50) for i in ids])]
    result = offload_tool_results(messages, tmp_path)
    assert len(set(result.files)) == 4
    assert len(result.renamed_ids) == 4


def test_safe_ids_are_not_renamed(tmp_path: Path) -> None:
    result = offload_tool_results(
        [call("toolu_01-AB"), results(("toolu_01-AB", "x" * 100))], tmp_path
    )
    assert result.renamed_ids == {}


# Write failures and stores -----------------------------------------------------------------


class FailingStore:
    def write(self, name: str, data: bytes) -> str:
        raise OSError(28, "No space left on device")

    def exists(self, name: str) -> bool:
        return False


class MemoryStore:
    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}

    def write(self, name: str, data: bytes) -> str:
        self.blobs[name] = data
        return f"memory://{name}"

    def exists(self, name: str) -> bool:
        return name in self.blobs


def test_a_write_failure_raises_blob_store_error(tmp_path: Path) -> None:
    messages = [call("t1"), results(("t1", "x" * 100))]
    snapshot = copy.deepcopy(messages)
    with pytest.raises(BlobStoreError, match="No space left"):
        offload_tool_results(messages, None, store=FailingStore())
    assert messages == snapshot


def test_an_output_dir_that_is_a_file_raises(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(BlobStoreError):
        offload_tool_results([call("t1"), results(("t1", "x" * 100))], blocker / "sub")


def test_no_output_dir_and_no_store_is_an_error() -> None:
    with pytest.raises(BlobStoreError, match="output_dir"):
        offload_tool_results([], None)


def test_a_given_store_receives_the_files_and_names_their_locations() -> None:
    store = MemoryStore()
    result = offload_tool_results([call("t1"), results(("t1", "é" * 100))], None, store=store)
    assert store.blobs == {"tool-result-t1.md": ("é" * 100).encode()}
    assert result.files == ["memory://tool-result-t1.md"]


def test_local_store_on_output_dir_refuses_escaping_names(tmp_path: Path) -> None:
    with pytest.raises(BlobStoreError):
        LocalBlobStore(tmp_path).write("../x.md", b"")


# Properties --------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories())
def test_offload_properties(tmp_path_factory: pytest.TempPathFactory, history: list[Any]) -> None:
    output = tmp_path_factory.mktemp("offload")
    snapshot = copy.deepcopy(history)
    result = offload_tool_results(history, output, min_chars=200)
    assert history == snapshot
    assert validate_messages(result.messages) == []
    # 200+ characters of text always cost more tokens than a reference of ~16 tokens.
    assert count_tokens(result.messages) <= count_tokens(history)
    # Every offloaded content is recoverable from its file.
    recovered = 0
    for before, after in zip(history, result.messages, strict=True):
        if before is after or not isinstance(before["content"], list):
            continue
        for old, new in zip(before["content"], after["content"], strict=True):
            if old.get("type") != "tool_result" or old == new:
                continue
            name = re.fullmatch(r"\[Content offloaded to: \./(.+)\]", new["content"])
            assert name is not None
            text = (output / name.group(1)).read_text(encoding="utf-8")
            original = old["content"]
            assert (json.loads(text) if isinstance(original, list) else text) == original
            recovered += 1
    assert recovered == result.offloaded_count == len(result.files)


def test_a_store_that_says_every_name_exists_is_an_error_not_a_loop() -> None:
    class FullStore(MemoryStore):
        def exists(self, name: str) -> bool:
            return True

    with pytest.raises(BlobStoreError, match="no free file name"):
        offload_tool_results([call("t1"), results(("t1", "x" * 100))], None, store=FullStore())
