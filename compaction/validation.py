"""Validation of message lists: every problem, with its path; nothing is ever "fixed" here.

Every public engine function validates its input, and one compaction hands the same
messages from step to step. Inside `validation_scope` (one compaction run) `ensure_valid`
remembers what it has checked, by identity: a message dict already found valid is not
checked again, nor the order of a list holding the very same dicts in the same order. The
engine never mutates a message, and the scope keeps each remembered dict alive, so an
identity cannot be reused by another object while it lasts.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidMessagesError, Problem
from .messages import tool_result_ids, tool_use_ids

__all__ = ["ensure_valid", "validate_messages"]

_ROLES = frozenset({"system", "user", "assistant"})
_BLOCK_TYPES = frozenset(
    {"text", "tool_use", "tool_result", "thinking", "redacted_thinking", "image", "document"}
)


def validate_messages(messages: Any, *, check_order: bool = True) -> list[Problem]:
    """Every problem that keeps `messages` from being a valid Anthropic request, in order.

    With `check_order=False` only each message and block is checked, not the order (every
    tool_use answered once in the next message, ids unique within a message). System
    messages may stand anywhere; role alternation is not required (`compaction.alternation`).
    """
    if not isinstance(messages, Sequence) or isinstance(messages, str | bytes | bytearray):
        return [Problem("messages", "must be a list of messages")]
    if _plainly_valid(messages, check_order=check_order):
        return []
    return _problems(messages, check_order=check_order)


def _problems(messages: Sequence[Any], *, check_order: bool) -> list[Problem]:
    """Every problem, each with its path (the full check behind `validate_messages`)."""
    problems: list[Problem] = []
    for index, message in enumerate(messages):
        problems.extend(_message_problems(index, message))
    if not problems and check_order:
        problems.extend(_order_problems(messages))
    return problems


def ensure_valid(messages: Any, *, check_order: bool = True) -> None:
    """Raise InvalidMessagesError when `validate_messages` finds anything."""
    scope = _scope.get()
    if scope is not None and scope.known_valid(messages, check_order=check_order):
        return
    problems = validate_messages(messages, check_order=check_order)
    if problems:
        raise InvalidMessagesError(problems)
    if scope is not None:
        scope.remember(messages, check_order=check_order)


@dataclass
class _Checked:
    """What `ensure_valid` found valid in one scope (module doc)."""

    messages: dict[int, Any] = field(default_factory=dict)  # id -> the dict, kept alive
    orders: set[bytes] = field(default_factory=set)  # the identities of a list, packed

    def known_valid(self, messages: Any, *, check_order: bool) -> bool:
        if not isinstance(messages, list | tuple):
            return False
        if check_order:
            # An order is remembered with its messages, kept alive: the same identities in
            # the same order are the very same dicts.
            return _identities(messages) in self.orders
        known = self.messages
        return all(known.get(id(message)) is message for message in messages)

    def remember(self, messages: Sequence[Any], *, check_order: bool) -> None:
        if not isinstance(messages, list | tuple):
            return
        self.messages.update((id(message), message) for message in messages)
        if check_order:
            self.orders.add(_identities(messages))


def _identities(messages: Sequence[Any]) -> bytes:
    """The identities of `messages` in order, 8 bytes each (a compact key)."""
    return array("Q", map(id, messages)).tobytes()


_scope: ContextVar[_Checked | None] = ContextVar("compaction_validation_scope", default=None)


@contextmanager
def validation_scope() -> Iterator[None]:
    """Within it, `ensure_valid` checks each message and each order only once (module doc)."""
    if _scope.get() is not None:  # nested: the outer scope goes on
        yield
        return
    token = _scope.set(_Checked())
    try:
        yield
    finally:
        _scope.reset(token)


_RESULT_ITEM_TYPES = frozenset({"text", "image", "document"})


def _plainly_valid(messages: Sequence[Any], *, check_order: bool) -> bool:
    """True when `messages` is valid, found in one pass over plain dicts, lists and strings.

    False says nothing: the full check (`_problems`) then runs and names every problem. So
    anything unusual (a Mapping that is not a dict, a str subclass) returns False, and each
    test here is at least as strict as the full check's.
    """
    before: list[str] = []  # tool_use ids of the previous message, when an assistant's
    for message in messages:
        if type(message) is not dict:
            return False
        role = message.get("role")
        content = message.get("content")
        if type(content) is str:  # no blocks: no tool ids, so no answer `before` wants
            if not content or content.isspace() or role not in _ROLES:  # (isspace: no copy)
                return False
            if check_order and before:
                return False
            continue
        uses: list[str] = []
        results: list[str] = []
        if (
            type(content) is not list
            or not content
            or not _plain_blocks(content, role, uses, results)
        ):
            return False
        if role not in _ROLES:
            return False
        if check_order:
            if (results or before) and not _answers(results, before):
                return False
            if len(uses) > 1 and len(set(uses)) != len(uses):
                return False
            before = uses if role == "assistant" else []
    return not before


def _answers(results: list[str], before: list[str]) -> bool:
    """Whether `results` answer each of `before` (the previous message's distinct tool_use
    ids) once and nothing else."""
    if results == before:  # the usual order
        return True
    return len(set(results)) == len(results) and set(results) == set(before)


def _plain_blocks(content: list[Any], role: Any, uses: list[str], results: list[str]) -> bool:
    """The blocks part of `_plainly_valid`; collects tool_use and tool_result ids."""
    for block in content:
        if type(block) is not dict:
            return False
        kind = block.get("type")
        if kind == "text":  # the commonest block: `_plain_text` without a call
            text = block.get("text")
            if type(text) is not str or not text or text.isspace():
                return False
            continue
        check = _PLAIN_CHECKS.get(kind)
        if check is None or not check(block, role):
            return False
        if kind == "tool_use":
            uses.append(block["id"])
        elif kind == "tool_result":
            results.append(block["tool_use_id"])
    return True


def _plain_text(block: dict[str, Any], _role: Any) -> bool:
    text = block.get("text")
    return type(text) is str and bool(text) and not text.isspace()


def _plain_tool_use(block: dict[str, Any], role: Any) -> bool:
    tool_id, name = block.get("id"), block.get("name")
    return (
        role == "assistant"
        and type(tool_id) is str
        and bool(tool_id)
        and type(name) is str
        and bool(name)
        and type(block.get("input")) is dict
    )


def _plain_tool_result(block: dict[str, Any], role: Any) -> bool:
    tool_id = block.get("tool_use_id")
    if role != "user" or type(tool_id) is not str or not tool_id:
        return False
    inner = block.get("content", "")
    if type(inner) is list:
        return all(type(item) is dict and item.get("type") in _RESULT_ITEM_TYPES for item in inner)
    return type(inner) is str


_PLAIN_CHECKS: dict[Any, Callable[[dict[str, Any], Any], bool]] = {
    "text": _plain_text,
    "tool_use": _plain_tool_use,
    "tool_result": _plain_tool_result,
    "thinking": lambda block, _role: type(block.get("thinking")) is str,
    "redacted_thinking": lambda block, _role: type(block.get("data")) is str,
    "image": lambda block, _role: type(block.get("source")) is dict,
    "document": lambda block, _role: type(block.get("source")) is dict,
}


def _is_mapping(value: Any) -> bool:
    """isinstance(value, Mapping), without the ABC check for the usual plain dict."""
    return type(value) is dict or isinstance(value, Mapping)


def _message_problems(index: int, message: Any) -> Iterator[Problem]:
    path = f"messages[{index}]"
    if not _is_mapping(message):
        yield Problem(path, "must be an object with role and content")
        return
    role = message.get("role")
    if role not in _ROLES:
        yield Problem(f"{path}.role", f"must be system, user or assistant, not {role!r}")
    content = message.get("content")
    if isinstance(content, str):
        if not content.strip():
            yield Problem(f"{path}.content", "must not be empty")
        return
    if not isinstance(content, list):
        yield Problem(f"{path}.content", "must be a string or a list of blocks")
        return
    if not content:
        yield Problem(f"{path}.content", "must not be empty")
    for block_index, block in enumerate(content):
        yield from _block_problems(f"{path}.content[{block_index}]", block, role)


def _block_problems(path: str, block: Any, role: Any) -> Iterator[Problem]:
    if not _is_mapping(block):
        yield Problem(path, "must be an object with a type")
        return
    kind = block.get("type")
    if kind not in _BLOCK_TYPES:
        yield Problem(f"{path}.type", f"unknown block type {kind!r}")
        return
    if kind == "text":
        text = block.get("text")
        if not isinstance(text, str):
            yield Problem(f"{path}.text", "text block needs a string text")
        elif not text.strip():
            yield Problem(f"{path}.text", "text block must not be empty")
    elif kind == "tool_use":
        yield from _tool_use_problems(path, block, role)
    elif kind == "tool_result":
        yield from _tool_result_problems(path, block, role)
    elif kind == "thinking" and not isinstance(block.get("thinking"), str):
        yield Problem(f"{path}.thinking", "thinking block needs a string thinking")
    elif kind == "redacted_thinking" and not isinstance(block.get("data"), str):
        yield Problem(f"{path}.data", "redacted_thinking block needs a string data")
    elif kind in {"image", "document"} and not isinstance(block.get("source"), Mapping):
        yield Problem(f"{path}.source", f"{kind} block needs a source object")


def _tool_use_problems(path: str, block: Mapping[str, Any], role: Any) -> Iterator[Problem]:
    if role != "assistant":
        yield Problem(path, "tool_use belongs in an assistant message")
    if not isinstance(block.get("id"), str) or not block.get("id"):
        yield Problem(f"{path}.id", "tool_use needs an id")
    if not isinstance(block.get("name"), str) or not block.get("name"):
        yield Problem(f"{path}.name", "tool_use needs a name")
    if not _is_mapping(block.get("input")):
        yield Problem(f"{path}.input", "tool_use needs an input object")


def _tool_result_problems(path: str, block: Mapping[str, Any], role: Any) -> Iterator[Problem]:
    if role != "user":
        yield Problem(path, "tool_result belongs in a user message")
    if not isinstance(block.get("tool_use_id"), str) or not block.get("tool_use_id"):
        yield Problem(f"{path}.tool_use_id", "tool_result needs tool_use_id")
    content = block.get("content", "")
    if isinstance(content, list):
        for index, inner in enumerate(content):
            if not _is_mapping(inner) or inner.get("type") not in {
                "text",
                "image",
                "document",
            }:
                yield Problem(
                    f"{path}.content[{index}]",
                    "tool_result content holds text, image or document blocks",
                )
    elif not isinstance(content, str):
        yield Problem(f"{path}.content", "tool_result content must be a string or a list of blocks")


def _order_problems(messages: Sequence[Mapping[str, Any]]) -> Iterator[Problem]:
    """Each tool_use is answered exactly once, in the very next message.

    Pairing is positional: a tool_result answers the tool_use with its id in the message
    right before it, so an id may come back in a later turn (agents that number their calls
    per turn reuse `call_0`), but not twice in one message. System messages may stand
    anywhere (Claude Code sends some mid-conversation), just not between a tool_use and its
    tool_result.
    """
    # Each message's ids once (a message is looked at as previous, current and next).
    uses = [tool_use_ids(message) for message in messages]
    results = [tool_result_ids(message) for message in messages]
    for index, answered in enumerate(results):
        ids = uses[index]
        if not answered and not ids:
            continue
        path = f"messages[{index}]"
        asked = uses[index - 1] if index and messages[index - 1]["role"] == "assistant" else []
        for tool_id in answered:
            if tool_id not in asked:
                yield Problem(
                    path, f"tool_result {tool_id!r} answers no tool_use in the previous message"
                )
        if len(set(answered)) != len(answered):
            yield Problem(path, "a tool_use is answered by more than one tool_result")
        for tool_id in [i for i, n in Counter(ids).items() if n > 1]:
            yield Problem(path, f"tool_use id {tool_id!r} is used more than once in this message")
        if ids:
            replied = set(results[index + 1]) if index + 1 < len(messages) else set()
            for tool_id in dict.fromkeys(ids):
                if tool_id not in replied:
                    yield Problem(
                        path, f"tool_use {tool_id!r} has no tool_result in the next user message"
                    )
