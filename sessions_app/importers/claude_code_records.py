"""The metadata records of a Claude Code file: every record type counted, known ones read.

Part of the Claude Code importer (claude_code.py). Claude Code 2.1 writes many record types
beside the conversation. None of them is a message; each line is counted by type
(`metadata["record_types"]`, all lines, messages included) and the ones below give session
metadata. Their shapes are not documented, so every key is read only when present and of the
expected type; a record that says nothing known is still counted and kept raw, never an error.

- `cost-state` (a cumulative snapshot, the last one wins): `metadata["cost"]` with
  `totalCostUSD`, durations, lines added/removed and `modelUsage` per model;
- `api-request` (the exact API request of one model call): `metadata["api_requests"]`:
  how many, per model, and how many `role: "system"` messages their `messages` carried;
  its model is the session's model when no assistant line names one;
- `api-request-blob` / `api-request-shape` (deduplicated parts of those requests): counted;
- `last-prompt`: `metadata["last_prompt"]` (and `last_prompt_leaf`);
- `tools-used`: `metadata["tools_used"]`, the tool names it lists;
- `queue-operation`: `metadata["queue_operations"]`, counted per operation;
- `mode` / `permission-mode` / `agent-name` / `pr-link`: the latest value.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from .types import ImportedSession

__all__ = ["LATEST_KEYS", "RecordNotes", "latest_metadata"]

#: Session metadata read from simple records: (record type, key, metadata name).
_LATEST: Final = (
    ("mode", "mode", "mode"),
    ("permission-mode", "permissionMode", "permission_mode"),
    ("agent-name", "agentName", "agent_name"),
    ("pr-link", "prUrl", "pr_url"),
    ("last-prompt", "lastPrompt", "last_prompt"),
    ("last-prompt", "leafUuid", "last_prompt_leaf"),
)
_COST_SKIP: Final = frozenset({"type", "sessionId"})
#: Session metadata that a later read replaces (snapshots, latest values), as opposed to
#: counts, which only a whole read knows (a watcher reads from a cut, perhaps twice).
LATEST_KEYS: Final = ("cost", "tools_used", *(name for _, _, name in _LATEST))


def latest_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The snapshot values among a session's metadata, for a later read to update."""
    return {key: metadata[key] for key in LATEST_KEYS if key in metadata}


@dataclass
class RecordNotes:
    """Counts every record by type and reads the metadata records."""

    types: Counter[str] = field(default_factory=Counter)
    values: dict[str, Any] = field(default_factory=dict)
    cost: dict[str, Any] | None = None
    requests: Counter[str] = field(default_factory=Counter)
    request_models: Counter[str] = field(default_factory=Counter)
    tools: list[str] = field(default_factory=list)
    queue: Counter[str] = field(default_factory=Counter)

    def note(self, record: Mapping[str, Any]) -> None:
        """Count one record and read what it says when it is a known metadata record."""
        kind = str(record.get("type") or "unknown")
        self.types[kind] += 1
        for record_type, key, name in _LATEST:
            if kind == record_type and isinstance(record.get(key), str):
                self.values[name] = record[key]
        if kind == "cost-state":
            self.cost = {k: v for k, v in record.items() if k not in _COST_SKIP}
        elif kind == "api-request":
            self._request(record)
        elif kind == "tools-used":
            self._tools(record)
        elif kind == "queue-operation":
            self.queue[str(record.get("operation") or "unknown")] += 1

    def _request(self, record: Mapping[str, Any]) -> None:
        self.requests["count"] += 1
        params: Any = record.get("params")
        if not isinstance(params, Mapping):
            params = record.get("request")
        if not isinstance(params, Mapping):
            params = {}
        model = params.get("model")
        if isinstance(model, str) and model:
            self.request_models[model] += 1
        messages = params.get("messages")
        if isinstance(messages, list):
            self.requests["messages"] += len(messages)
            self.requests["system_messages"] += sum(
                1 for m in messages if isinstance(m, Mapping) and m.get("role") == "system"
            )

    def _tools(self, record: Mapping[str, Any]) -> None:
        for key in ("tools", "toolsUsed", "tools_used", "names"):
            value = record.get(key)
            names = list(value) if isinstance(value, list | Mapping) else []
            for name in names:
                if isinstance(name, Mapping):
                    name = name.get("name")
                if isinstance(name, str) and name not in self.tools:
                    self.tools.append(name)

    @property
    def request_model(self) -> str:
        """The model the API requests named most often, or ""."""
        common = self.request_models.most_common(1)
        return common[0][0] if common else ""

    def describe(self, session: ImportedSession) -> None:
        """Put what the records said into the session's metadata."""
        metadata = session.metadata
        metadata["record_types"] = dict(sorted(self.types.items()))
        metadata.update(self.values)
        if self.cost is not None:
            metadata["cost"] = self.cost
        if self.requests:
            metadata["api_requests"] = {
                "count": self.requests["count"],
                "messages": self.requests["messages"],
                "system_messages": self.requests["system_messages"],
                "models": dict(self.request_models),
            }
        if self.tools:
            metadata["tools_used"] = list(self.tools)
        if self.queue:
            metadata["queue_operations"] = dict(sorted(self.queue.items()))
        if not session.model and self.request_model:
            session.model = self.request_model
