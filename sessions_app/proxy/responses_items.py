"""OpenAI Responses items as stored engine messages (docs/architecture.md, "proxy").

A Responses request's `input` is a list of items, not of messages. The proxy reads it as
turns (`Turn`): a run of items of one side of the conversation. The model's side is
reasoning, assistant messages and calls (`function_call`, `custom_tool_call`,
`web_search_call`, ...); the client's side is user messages, call outputs and a provider
`compaction` item. Each turn is stored as one engine message: reasoning a `thinking` block
(its summary as text, its `encrypted_content` as the block's `signature`), a call a
`tool_use` block, an output a `tool_result` block, text and images as they are, and an item
of an unknown type a text block naming it. An answer is one turn too, so each stored
message is one turn the client sends back.

A turn's digest (what says "the same turn") is that of its items without `id`, `status` and
Codex's turn metadata, which a client may drop, change or add when it sends the model's items
back; the items
themselves are forwarded exactly as the client sent them (`Turn.sent`).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ..importers.blocks import image_block, parse_arguments, text_block
from ..importers.provider_compaction import COMPACTION_BLOCK_TYPES, provider_compaction

__all__ = ["ASSISTANT", "USER", "Turn", "item_blocks", "side_of", "turn_message", "turns_of"]

ASSISTANT: Final = "assistant"
USER: Final = "user"
#: Items the model produces (its side of the conversation).
_MODEL_ITEMS: Final = frozenset(
    {
        "reasoning",
        "function_call",
        "custom_tool_call",
        "local_shell_call",
        "tool_search_call",
        "web_search_call",
        "file_search_call",
        "image_generation_call",
        "code_interpreter_call",
        "computer_call",
        "mcp_call",
        "mcp_list_tools",
    }
)
#: Calls whose result the client sends back as a `*_output` item.
_CALLS: Final = frozenset(
    {"function_call", "custom_tool_call", "local_shell_call", "tool_search_call", "computer_call"}
)
#: Keys a client may drop, change or add on an item it sends back: not part of a turn's
#: digest (Codex's built-in provider adds its turn metadata to every item it sends back).
_VOLATILE: Final = frozenset({"id", "status", "internal_chat_message_metadata_passthrough"})
_TEXT_PARTS: Final = frozenset({"input_text", "output_text", "text", "summary_text"})


class Turn(dict[str, Any]):
    """One turn as the proxy's digests see it (`{"role", "items"}` without volatile keys),
    with the items as sent in `sent`."""

    sent: list[Any]

    @classmethod
    def of(cls, role: str, items: Sequence[Any]) -> Turn:
        """The turn of `items`, all of side `role`."""
        turn = cls(role=role, items=[_digest_form(item) for item in items])
        turn.sent = list(items)
        return turn


def _digest_form(item: Any) -> Any:
    if not isinstance(item, Mapping):
        return item
    with _FORMS_LOCK:
        kept = _FORMS.get(id(item))
    if kept is not None and kept[0] is item:
        return kept[1]
    form = {key: value for key, value in item.items() if key not in _VOLATILE}
    with _FORMS_LOCK:
        _FORMS[id(item)] = (item, form)
        while len(_FORMS) > _FORMS_KEPT:
            _FORMS.popitem(last=False)
    return form


#: The digest forms of the last items read, by the item object (kept alive here, so its id
#: stays its own): the proxy's body reader hands an agent's earlier items back as the same
#: objects on every request (sessions_app/proxy/digests.py), so each is copied once. Items
#: are read, never changed.
_FORMS: OrderedDict[int, tuple[Any, Any]] = OrderedDict()
_FORMS_LOCK: Final = threading.Lock()
_FORMS_KEPT: Final = 16_384
#: The turns of the last item lists read (one per recent conversation, about): few, as
#: they keep their items alive (the body reader's own copies are bounded by characters).
_TURNS: list[tuple[list[Any], list[Turn]]] = []
_TURNS_KEPT: Final = 8


def side_of(item: Any) -> str | None:
    """USER or ASSISTANT; None for an item of an unknown type (it joins the turn it is in)."""
    if not isinstance(item, Mapping):
        return None
    kind = item.get("type") or ("message" if "role" in item else None)
    if kind == "message":
        return ASSISTANT if item.get("role") == ASSISTANT else USER
    if kind in _MODEL_ITEMS:
        return ASSISTANT
    if isinstance(kind, str) and (kind.endswith("_output") or kind in COMPACTION_BLOCK_TYPES):
        return USER
    return None


def turns_of(items: Sequence[Any]) -> list[Turn]:
    """`items` as turns: each run of items of one side is one turn. The turns of a recent
    list whose items this one begins with (the same objects: module doc of `_FORMS`) are
    taken from it, but its last turn, which the new items may extend."""
    known, start = _known_turns(items)
    turns = [*known, *_grouped(items[start:])]
    _keep_turns(items, turns)
    return turns


def _known_turns(items: Sequence[Any]) -> tuple[list[Turn], int]:
    """The turns of the longest kept list `items` begins with, but its last one, and the
    index of the first item after them."""
    with _FORMS_LOCK:
        kept = list(_TURNS)
    best: tuple[list[Turn], int] = ([], 0)
    for earlier, turns in kept:
        if len(earlier) > len(items) or len(turns) < 2 or len(earlier) <= best[1]:
            continue
        if all(a is b for a, b in zip(earlier, items, strict=False)):
            reused = turns[:-1]
            best = (reused, sum(len(turn.sent) for turn in reused))
    return best


def _keep_turns(items: Sequence[Any], turns: list[Turn]) -> None:
    with _FORMS_LOCK:
        _TURNS.append((list(items), turns))
        del _TURNS[:-_TURNS_KEPT]


def _grouped(items: Sequence[Any]) -> list[Turn]:
    turns: list[Turn] = []
    run: list[Any] = []
    role = ""
    for item in items:
        side = side_of(item) or role or USER
        if run and side != role:
            turns.append(Turn.of(role, run))
            run = []
        role = side
        run.append(item)
    if run:
        turns.append(Turn.of(role, run))
    return turns


def turn_message(role: str, items: Sequence[Any]) -> dict[str, Any]:
    """The engine message of one turn's items (its content never empty)."""
    blocks = [block for item in items for block in item_blocks(item)]
    return {"role": role, "content": blocks or [text_block("(empty turn)")]}


def item_blocks(item: Any) -> list[dict[str, Any]]:
    """The engine blocks of one item."""
    if not isinstance(item, Mapping):
        return [text_block(json.dumps(item, ensure_ascii=False))]
    kind = item.get("type") or ("message" if "role" in item else None)
    if kind == "message":
        return _parts(item.get("content"))
    if kind == "reasoning":
        return [_reasoning(item)]
    if kind in _CALLS:
        return [_call(item)]
    if isinstance(kind, str) and kind.endswith("_output"):
        return [_output(item)]
    if kind in COMPACTION_BLOCK_TYPES:
        return [text_block(provider_compaction(item, "openai").summary)]
    # a server-side call (web search, ...) has no output item: shown as text, not as a
    # tool_use block that would wait for a result
    shown = {k: v for k, v in item.items() if k not in _VOLATILE}
    return [text_block(f"[{kind or 'unknown'} item]\n{json.dumps(shown, ensure_ascii=False)}")]


def _parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [text_block(content)] if content else []
    blocks: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind in _TEXT_PARTS and isinstance(part.get("text"), str) and part["text"]:
            blocks.append(text_block(part["text"]))
        elif kind == "input_image":
            blocks.append(image_block(part.get("image_url")))
        elif kind == "refusal":
            blocks.append(text_block(str(part.get("refusal") or "")))
        else:
            blocks.append(text_block(f"[{kind or 'unknown'} part]"))
    return blocks


def _reasoning(item: Mapping[str, Any]) -> dict[str, Any]:
    texts: list[str] = []
    for key in ("summary", "content"):
        texts.extend(
            str(part.get("text") or "")
            for part in item.get(key) or []
            if isinstance(part, Mapping) and part.get("text")
        )
    block: dict[str, Any] = {"type": "thinking", "thinking": "\n\n".join(texts)}
    if isinstance(item.get("encrypted_content"), str):
        block["signature"] = item["encrypted_content"]
    return block


def _call(item: Mapping[str, Any]) -> dict[str, Any]:
    kind = str(item.get("type"))
    if kind == "custom_tool_call":
        arguments: Any = {"input": item.get("input")}
    elif kind == "function_call":
        arguments = parse_arguments(item.get("arguments"))
    else:
        arguments = {k: v for k, v in item.items() if k not in {"type", "id", "status", "call_id"}}
    name = item.get("name") if isinstance(item.get("name"), str) and item.get("name") else None
    return {
        "type": "tool_use",
        "id": str(item.get("call_id") or item.get("id") or f"{kind}_call"),
        "name": name or kind.removesuffix("_call"),
        "input": arguments if isinstance(arguments, dict) else {"raw": arguments},
        "item_type": kind,
    }


def _output(item: Mapping[str, Any]) -> dict[str, Any]:
    output = item.get("output")
    content: Any
    if isinstance(output, str):
        content = output
    elif isinstance(output, list):
        content = _parts(output) or json.dumps(output, ensure_ascii=False)
    else:
        content = json.dumps(output, ensure_ascii=False) if output is not None else ""
    return {
        "type": "tool_result",
        "tool_use_id": str(item.get("call_id") or ""),
        "content": content,
    }
