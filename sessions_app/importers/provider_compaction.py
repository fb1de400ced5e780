"""Compactions the model provider made on its side, found inside a conversation.

- Anthropic server-side compaction (the `compact_20260112` context management edit): the
  response carries a `compaction` content block in an assistant message, with `content` (the
  summary text) and `encrypted_content`. The API drops everything before that block on the
  next request, so the block is a compaction point whose summary is its `content`.
- OpenAI Responses compaction: an item of type `compaction` (or `compaction_summary`) with
  only `encrypted_content`. The summary is opaque: the marker says so
  (`opaque_summary_text`).

`split_at_compactions` cuts an assistant message at its compaction blocks; the builder
(builder.py) marks a compaction point at each cut.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from compaction import Block

from .types import ImportedMessage

__all__ = [
    "COMPACTION_BLOCK_TYPES",
    "PROVIDER_TRIGGER",
    "ProviderCompaction",
    "opaque_summary_text",
    "provider_compaction",
    "split_at_compactions",
]

#: Block / item types of a provider-side compaction (Anthropic block, OpenAI item names).
COMPACTION_BLOCK_TYPES: Final = frozenset({"compaction", "compaction_summary"})
#: The trigger recorded on a compaction point the provider made.
PROVIDER_TRIGGER: Final = "provider"


@dataclass(frozen=True)
class ProviderCompaction:
    """What a provider's compaction block or item says: summary text and raw data."""

    summary: str
    opaque: bool
    raw: dict[str, Any] = field(default_factory=dict)


def opaque_summary_text(encrypted: Any) -> str:
    """The marker text of a compaction whose summary only the provider can read."""
    size = len(encrypted) if isinstance(encrypted, str) else 0
    return f"[opaque compaction by the provider: encrypted, {size} chars]"


def provider_compaction(block: Mapping[str, Any], provider: str) -> ProviderCompaction:
    """Read a compaction block or item tolerantly: any missing field is fine."""
    content = block.get("content")
    summary = content if isinstance(content, str) else ""
    if isinstance(content, list):  # tolerate a list of text parts
        summary = "\n".join(
            str(p.get("text") or "") for p in content if isinstance(p, Mapping)
        ).strip()
    encrypted = block.get("encrypted_content")
    raw: dict[str, Any] = {"provider": provider, "block": dict(block)}
    if isinstance(encrypted, str):
        raw["encrypted_chars"] = len(encrypted)
    if summary.strip():
        return ProviderCompaction(summary.strip(), opaque=False, raw=raw)
    raw["opaque"] = True
    return ProviderCompaction(opaque_summary_text(encrypted), opaque=True, raw=raw)


def is_compaction_block(block: Any) -> bool:
    """Whether `block` is a provider compaction block or item."""
    return isinstance(block, Mapping) and block.get("type") in COMPACTION_BLOCK_TYPES


def split_at_compactions(
    item: ImportedMessage,
) -> list[ImportedMessage | ProviderCompaction] | None:
    """An assistant message cut at its compaction blocks, or None when it has none.

    The pieces keep the message's time, id and import data; a piece with no block is
    dropped (a message made only of a compaction block becomes just the compaction point).
    """
    content = item.message.get("content")
    if item.role != "assistant" or not isinstance(content, list):
        return None
    if not any(is_compaction_block(b) for b in content):
        return None
    pieces: list[ImportedMessage | ProviderCompaction] = []
    current: list[Block] = []
    for block in content:
        if is_compaction_block(block):
            if current:
                pieces.append(_piece(item, current, len(pieces)))
            current = []
            pieces.append(provider_compaction(block, "anthropic"))
        else:
            current.append(block)
    if current:
        pieces.append(_piece(item, current, len(pieces)))
    messages = [p for p in pieces if isinstance(p, ImportedMessage)]
    for piece in messages[:-1]:
        piece.usage = None  # the response's usage is counted once, on its last piece
    return pieces


def _piece(item: ImportedMessage, blocks: list[Block], number: int) -> ImportedMessage:
    extra = dict(item.extra)
    extra["split_at_compaction"] = True
    return ImportedMessage(
        message=dict(item.message, content=blocks),
        created_at=item.created_at,
        original_id=item.original_id if number == 0 else f"{item.original_id}#{number}",
        usage=item.usage,
        extra=extra,
    )
