"""Offloading large tool_result contents to files (docs/behaviour.md#offloading).

Every tool_result whose content has at least `min_chars` characters is written to
`tool-result-{tool_use_id}.md` and replaced by `[Content offloaded to: ./tool-result-....md]`.

Decisions where the seed is silent:
- Characters are Python characters (code points): `len(content)` for a string, and for a
  block list `len()` of its compact JSON (`JSON.stringify` spacing, non-ASCII kept).
- The file holds exactly the characters that were counted: the string itself, or that
  compact JSON for a block list (so `json.loads` of the file gives the blocks back, images
  included). `freed_chars` is therefore the total length of the files' text.
- Repeated ids: the first result of an id gets the plain name, later ones `-1`, `-2`, ... in
  message order. A name already taken in this call (for example a real id `a-1` next to a
  second `a`, or ids differing only in letter case) moves on to the next free number.
- A file is never replaced (issue 10): a name already in the output directory or store,
  from an earlier call (agents reuse ids such as `call_0` every turn), moves on to a free
  number too. The files are created exclusively (`ExclusiveBlobStore.create`, `O_EXCL` on a
  local directory), so even a concurrent offload cannot overwrite one; a store without
  `create` is checked with `exists` before `write`. Free numbers are found by doubling then
  bisecting, so a session with n files of one id costs O(log n) checks, not O(n).
- Ids are untrusted. An id that is not 1-128 characters of `[A-Za-z0-9_-]` is renamed to
  its sanitized first 40 characters plus 12 hex digits of its SHA-256; `renamed_ids` maps
  each such id to the name of its first file. The store refuses any name that would leave
  its root, so nothing is ever written outside `output_dir`.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from .blobstore import BlobStore, ExclusiveBlobStore, LocalBlobStore
from .errors import BlobStoreError, PolicyError
from .messages import Block, Message
from .results import OffloadResult
from .validation import ensure_valid

__all__ = ["offload_reference", "offload_tool_results", "tool_result_chars"]

_SAFE_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,128}")
_UNSAFE_RUN: Final = re.compile(r"[^A-Za-z0-9_-]+")
#: Bounds that turn a broken or hostile store into an error instead of an endless loop.
_MAX_RACES: Final = 100
_MAX_NUMBER: Final = 2**32


def tool_result_chars(content: Any) -> int:
    """The character count of a tool_result content (docs/behaviour.md#offloading); other types
    count 0."""
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return len(_stringify(content))
    return 0


def offload_reference(file_name: str) -> str:
    """The string that replaces an offloaded content (docs/behaviour.md#offloading)."""
    return f"[Content offloaded to: ./{file_name}]"


def offload_tool_results(
    messages: Sequence[Message],
    output_dir: str | os.PathLike[str] | None,
    *,
    min_chars: int = 100,
    store: BlobStore | None = None,
) -> OffloadResult:
    """Write every tool_result content of `min_chars`+ characters to a file; reference it.

    Messages are visited oldest first. The result holds a new list: changed messages are
    deep copies, untouched ones are the input objects; the input is never modified.
    Files go to `store` when given, else to a LocalBlobStore on `output_dir` (created with
    its parents). A failed write raises BlobStoreError.

    Raises InvalidMessagesError when a message or block is malformed (a tool_result needs
    its tool_use_id). The order is not checked: repeated ids are offloaded too
    (docs/behaviour.md#offloading).
    """
    ensure_valid(messages, check_order=False)
    if min_chars < 0:
        raise PolicyError("min_chars", "must not be negative")
    blobs = store if store is not None else _local_store(output_dir)
    namer = _FileNamer(blobs)
    stats = _Stats()
    result: list[Message] = []
    for message in messages:
        result.append(_offload_message(message, min_chars, namer, stats))
    return OffloadResult(
        messages=result,
        offloaded_count=stats.count,
        freed_chars=stats.chars,
        files=stats.files,
        renamed_ids=dict(namer.renamed),
    )


@dataclass
class _Stats:
    count: int = 0
    chars: int = 0
    files: list[str] = field(default_factory=list)


def _local_store(output_dir: str | os.PathLike[str] | None) -> LocalBlobStore:
    if output_dir is None:
        raise BlobStoreError("offload needs an output_dir or a store")
    store = LocalBlobStore(output_dir)
    try:
        # mkdir -p, fine if it exists (docs/behaviour.md#offloading)
        store.root.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise BlobStoreError(f"could not create {store.root}: {error}") from error
    return store


def _offload_message(message: Message, min_chars: int, namer: _FileNamer, stats: _Stats) -> Message:
    content = message.get("content")
    if not isinstance(content, list):
        return message
    replaced: dict[int, str] = {}
    for index, block in enumerate(content):
        if not _is_tool_result(block):
            continue
        text = _file_text(block.get("content"))
        if text is None or not text or len(text) < min_chars:
            continue
        name, location = namer.write(str(block.get("tool_use_id", "")), text)
        stats.files.append(location)
        stats.count += 1
        stats.chars += len(text)
        replaced[index] = offload_reference(name)
    if not replaced:
        return message
    return _copy_with_references(message, content, replaced)


def _is_tool_result(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "tool_result"


def _file_text(content: Any) -> str | None:
    """What is counted and written for a content: the string, or a block list's JSON."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return _stringify(content)
    return None


def _stringify(value: Any) -> str:
    """`JSON.stringify(value)`: no spaces, non-ASCII characters kept."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _file_name(stem: str, number: int) -> str:
    return f"tool-result-{stem}{f'-{number}' if number else ''}.md"


def _exists(store: BlobStore, name: str) -> bool:
    try:
        return store.exists(name)
    except BlobStoreError:
        raise
    except OSError as error:
        raise BlobStoreError(f"could not check {name}: {error}") from error


def _copy_with_references(
    message: Message, content: list[Any], replaced: dict[int, str]
) -> Message:
    """A deep copy of `message` whose replaced tool_results hold their reference string."""
    new = {key: copy.deepcopy(value) for key, value in message.items() if key != "content"}
    blocks: list[Any] = []
    for index, block in enumerate(content):
        if index in replaced:
            new_block: Block = {k: copy.deepcopy(v) for k, v in block.items() if k != "content"}
            new_block["content"] = replaced[index]
            blocks.append(new_block)
        else:
            blocks.append(copy.deepcopy(block))
    new["content"] = blocks
    return new


class _FileNamer:
    """Writes the files of one offload call: safe names, numbered for repeats, never reused
    and never replacing a file already in the store."""

    def __init__(self, store: BlobStore) -> None:
        self.store = store
        self.renamed: dict[str, str] = {}
        self._next: dict[str, int] = {}
        self._taken: set[str] = set()

    def write(self, tool_use_id: str, text: str) -> tuple[str, str]:
        """Write `text` to a free name for `tool_use_id`; (the name, its location)."""
        stem = self._stem(tool_use_id)
        data = text.encode("utf-8", errors="surrogatepass")
        number = self._next.get(tool_use_id, 0)
        for _ in range(_MAX_RACES):
            number = self._free_number(stem, number)
            name = _file_name(stem, number)
            self._taken.add(name.casefold())
            location = self._create(name, data)
            if location is not None:
                break
            number += 1  # created by someone else since the check: the next one
        else:
            raise BlobStoreError(f"no free file name for tool_use_id {tool_use_id!r}")
        self._next[tool_use_id] = number + 1
        if stem != tool_use_id:
            self.renamed.setdefault(tool_use_id, name)
        return name, location

    def _free_number(self, stem: str, start: int) -> int:
        """A number from `start` on whose name is free: the first one when the taken
        numbers are contiguous (doubling, then bisecting between taken and free)."""
        if self._is_free(_file_name(stem, start)):
            return start
        taken, step = start, 1
        while not self._is_free(_file_name(stem, start + step)):
            if step > _MAX_NUMBER:  # a store that says every name exists
                raise BlobStoreError(f"no free file name for tool-result-{stem}")
            taken, step = start + step, step * 2
        free = start + step
        while free - taken > 1:
            middle = (taken + free) // 2
            if self._is_free(_file_name(stem, middle)):
                free = middle
            else:
                taken = middle
        return free

    def _is_free(self, name: str) -> bool:
        return name.casefold() not in self._taken and not _exists(self.store, name)

    def _create(self, name: str, data: bytes) -> str | None:
        try:
            if isinstance(self.store, ExclusiveBlobStore):
                return self.store.create(name, data)
            return None if _exists(self.store, name) else self.store.write(name, data)
        except BlobStoreError:
            raise
        except OSError as error:
            raise BlobStoreError(f"could not write {name}: {error}") from error

    @staticmethod
    def _stem(tool_use_id: str) -> str:
        if _SAFE_ID.fullmatch(tool_use_id):
            return tool_use_id
        digest = hashlib.sha256(tool_use_id.encode("utf-8", errors="surrogatepass")).hexdigest()
        readable = _UNSAFE_RUN.sub("_", tool_use_id)[:40].strip("_")
        return f"{readable}-{digest[:12]}" if readable else digest[:12]
