"""The `codex` import format's declaration: how a Codex CLI rollout is recognised and read.

Codex rollouts wrap every record in `{timestamp, type, payload}`; early ones hold bare
response items after a `{id, timestamp, instructions}` header. The reader is `codex.py`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .codex import FORMAT, parse_codex
from .registry import ImportFormat
from .source import Source
from .types import ImportedSession

__all__ = ["IMPORT_FORMAT"]

_CODEX_TYPES: Final = frozenset(
    {"session_meta", "response_item", "event_msg", "turn_context", "compacted", "world_state"}
)
_CODEX_ITEMS: Final = frozenset(
    {"message", "function_call", "function_call_output", "reasoning", "custom_tool_call"}
)


def _is_codex_line(value: Mapping[str, Any]) -> bool:
    kind = value.get("type")
    if "payload" in value and (kind in _CODEX_TYPES or "timestamp" in value):
        return True
    if kind in _CODEX_ITEMS and "payload" not in value and "uuid" not in value:
        return True  # an early rollout: bare response items
    return "instructions" in value and "id" in value and "timestamp" in value  # its header


def _read(source: Source, *, subagents: bool) -> ImportedSession:  # noqa: ARG001 (LineReader)
    return parse_codex(source)  # a rollout has no subagent files


IMPORT_FORMAT: Final = ImportFormat(
    name=FORMAT,
    label="Codex CLI",
    file_label="Codex CLI rollout",
    aliases=("codex_cli",),
    detect=_is_codex_line,
    read_lines=_read,
    rank=10,  # asked before Claude Code on each line: the order detection always had
)
