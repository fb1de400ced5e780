"""What a proxied request carries besides its messages: the system prompt and tool definitions.

The proxy keeps the latest system prompt and tool definitions of each proxied session in
`Session.proxy_overhead` and their token counts in `Session.proxy_state` under
`system_tokens` and `tools_tokens` (services/proxying/turns.py). Upstream receives them with every
request
(docs/behaviour.md#token-counting), so `check`, the context's `tokens` and the gauge count them too.
They are counted once when they change (a digest of both is kept beside the counts), never per
request.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from compaction import count_tokens
from sessions_app.importers.blocks import content_text
from sessions_app.services.context.sized_cache import SizedCache

__all__ = [
    "OVERHEAD_VALUES",
    "Overhead",
    "count_overhead",
    "overhead_counts",
    "overhead_digest",
    "overhead_of",
    "overhead_values",
    "remembered_overhead_digest",
    "session_overhead",
]

#: `Session.objects.values(*OVERHEAD_VALUES)` reads the two counts without the whole state.
OVERHEAD_VALUES: Final = ("proxy_state__system_tokens", "proxy_state__tools_tokens")


@dataclass(frozen=True, slots=True)
class Overhead:
    """Tokens of the stored system prompt and of the stored tool definitions."""

    system: int = 0
    tools: int = 0

    @property
    def total(self) -> int:
        """Both together."""
        return self.system + self.tools


def _int(value: Any) -> int:
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):
        return 0


def overhead_of(state: Mapping[str, Any] | None) -> Overhead:
    """The counts kept in a `proxy_state` (zero for a session the proxy never saw)."""
    if not isinstance(state, Mapping):
        return Overhead()
    return Overhead(_int(state.get("system_tokens")), _int(state.get("tools_tokens")))


def session_overhead(session: Any) -> Overhead:
    """The counts of a loaded session (no query)."""
    return overhead_of(getattr(session, "proxy_state", None))


def overhead_values(row: Mapping[str, Any]) -> int:
    """The total from a `values(*OVERHEAD_VALUES)` row."""
    return sum(_int(row.get(name)) for name in OVERHEAD_VALUES)


def _system_text(system: Any) -> str:
    """An Anthropic `system` (string or text blocks) or OpenAI's leading system messages."""
    if isinstance(system, list) and all(isinstance(m, Mapping) and "role" in m for m in system):
        return "\n".join(content_text(m.get("content")) for m in system)
    return content_text(system)


def overhead_digest(system: Any, tools: Any) -> str:
    """A short digest of a system prompt and tool definitions together."""
    text = json.dumps([system, tools], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def remembered_overhead_digest(system: Any, tools: Any) -> str:
    """`overhead_digest`, remembered for these very objects: reading a proxied body hands
    out the same objects again for the same text of its system prompt and tools
    (sessions_app/proxy/digests.py), which nobody changes. For such values only."""
    key = (id(system), id(tools))
    known = _remembered.get(key)
    if known is not None and known[0] is system and known[1] is tools:
        return known[2]
    digest = overhead_digest(system, tools)
    _remembered.put(key, (system, tools, digest))  # kept alive: their ids stay theirs
    return digest


#: Digests remembered (`remembered_overhead_digest`), the least recently used going first.
_REMEMBERED: Final = 16
_remembered: SizedCache[tuple[Any, Any, str]] = SizedCache(lambda: _REMEMBERED, lambda _: 1)


def count_overhead(state: dict[str, Any], encoding: str | None = None) -> None:
    """Recount `state`'s system and tools when they changed since the last count."""
    system, tools = state.get("system"), state.get("tools")
    digest = overhead_digest(system, tools)
    if state.get("overhead_digest") == digest:
        return
    state.update(overhead_counts(system, tools, encoding))
    state["overhead_digest"] = digest


def overhead_counts(system: Any, tools: Any, encoding: str | None = None) -> dict[str, int]:
    """`system_tokens` and `tools_tokens` of a system prompt and tool definitions."""
    tool_text = json.dumps(tools, ensure_ascii=False, separators=(",", ":")) if tools else ""
    return {
        "system_tokens": _tokens(_system_text(system), encoding),
        "tools_tokens": _tokens(tool_text, encoding),
    }


def _tokens(text: str, encoding: str | None) -> int:
    if not text:
        return 0
    return count_tokens([{"role": "user", "content": text}], encoding=encoding)
