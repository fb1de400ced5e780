"""`hard_truncate`: the last resort that always fits the hard limit
(docs/behaviour.md#hard-truncation).

It keeps the leading system prompt(s) and the newest messages (`keep_recent_messages`,
fewer when they do not fit), never separating a tool_use from its tool_result. When even
the system prompt and the newest message (with its tool_use partner) are over the limit,
the largest contents are cut with a visible marker instead of failing. Every cut is
re-counted (tokens merge differently where text is cut and a marker joined), and when even
the smallest form of the system prompt plus the newest messages is over, the system prompt
goes, then the newest messages give way to one marker message. The output is always a valid
request within the limit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import tiktoken

from .errors import PolicyError
from .messages import Block, Message, is_safe_cut, tool_result_text
from .partition import leading_system_count
from .policy import Policy
from .results import TruncateResult
from .tokens import (
    compact_json,
    count_text_tokens,
    get_encoding,
    message_token_counts,
    message_tokens,
    text_counter,
)
from .validation import ensure_valid

__all__ = ["hard_limit_tokens", "hard_truncate", "truncation_notice"]

#: Blocks the API lets an earlier turn lose; dropped first when a message must shrink.
_DISPOSABLE: Final = frozenset({"thinking", "redacted_thinking", "image", "document"})
#: The smallest visible marker, used where the full notice does not fit.
_SHORT_MARKER: Final = "[...]"
_MAX_SHRINK_ROUNDS: Final = 8
_MAX_FIT_ATTEMPTS: Final = 8


def truncation_notice(tokens: int) -> str:
    """The marker left where content was cut."""
    return f"[... truncated {tokens} tokens by ctxweb hard limit ...]"


def hard_limit_tokens(policy: Policy) -> int:
    """The most raw tokens of messages whose count, with the policy's reserved tokens and
    scaled by the safety factor, is within the limit (0 when the reserved ones alone are not)."""
    limit = policy.effective_hard_limit
    allowed = int(limit / policy.safety_factor)
    while policy.scaled(allowed + 1) <= limit:
        allowed += 1
    while allowed > 0 and policy.scaled(allowed) > limit:
        allowed -= 1
    return max(0, allowed - policy.reserved_tokens)


def hard_truncate(
    messages: Sequence[Message],
    policy: Policy | None = None,
    *,
    token_counts: Sequence[int] | None = None,
) -> TruncateResult:
    """Fit `messages` under the hard limit: system prompt(s) plus the newest messages.

    A list already within the limit comes back unchanged (`truncated=False`).
    `token_counts` (one per message, e.g. cached with a stored session) spares encoding the
    messages again; only cut contents are counted. Raises ValueError when it does not hold
    one count per message.
    """
    policy = policy or Policy()
    ensure_valid(messages)
    if token_counts is None:
        counts = message_token_counts(messages, policy.encoding)
    else:
        counts = list(token_counts)
        if len(counts) != len(messages):
            raise ValueError("token_counts must hold one count per message")
    before = sum(counts)
    allowed = hard_limit_tokens(policy)
    if before <= allowed:
        return TruncateResult(list(messages), False, before, before)
    head_end = leading_system_count(messages)
    head_tokens = sum(counts[:head_end])
    start = _tail_start(messages, counts, head_end, allowed - head_tokens, policy)
    head, tail = list(messages[:head_end]), list(messages[start:])
    result = head + tail
    if head_tokens + sum(counts[start:]) > allowed:
        result = _shrink_to_fit(head, tail, allowed, policy.encoding)
    known = {id(message): count for message, count in zip(messages, counts, strict=True)}
    fresh = [message for message in result if id(message) not in known]
    cut = len(fresh)
    kept = len(result) - leading_system_count(result)
    after = sum(known.get(id(m), 0) for m in result) + _tokens(fresh, policy.encoding)
    return TruncateResult(
        messages=result,
        truncated=True,
        tokens_before=before,
        tokens_after=after,
        removed_message_count=len(messages) - len(result),
        detail={"kept_messages": kept, "cut_messages": cut, "limit_tokens": allowed},
    )


def _tail_start(
    messages: Sequence[Message],
    counts: Sequence[int],
    head_end: int,
    budget: int,
    policy: Policy,
) -> int:
    """Where the kept tail begins: the newest keep_recent_messages, fewer if over `budget`.

    Only safe cuts are used (a kept tool_result keeps its tool_use); when nothing fits, the
    newest safe cut is returned and the caller cuts contents.
    """
    safe = [i for i in range(head_end, len(messages)) if is_safe_cut(messages, i)]
    if not safe:  # only possible for an empty body
        return len(messages)
    suffix = [0] * (len(messages) + 1)
    for index in range(len(messages) - 1, -1, -1):
        suffix[index] = suffix[index + 1] + counts[index]
    wanted = max(head_end, len(messages) - max(policy.keep_recent_messages, 1))
    first = max((n for n, i in enumerate(safe) if i <= wanted), default=0)
    for index in safe[first:]:
        if suffix[index] <= budget:
            return index
    return safe[-1]


def _shrink_to_fit(
    head: list[Message], tail: list[Message], allowed: int, encoding: str
) -> list[Message]:
    """Cut contents until head + tail fit `allowed`: the tail first, the system prompt only
    when it alone leaves the tail less than half of the limit.

    Each round cuts the original messages again with new budgets, so a marker is never cut
    again. When even their smallest forms are over, the system prompt is dropped, and then the
    tail gives way to one marker message; a limit too small for that is a PolicyError.
    """
    tail_budget = max(allowed - _tokens(head, encoding), min(_tokens(tail, encoding), allowed // 2))
    for _ in range(_MAX_SHRINK_ROUNDS):
        cut_tail = _shrink_messages(tail, tail_budget, encoding)
        cut_head = _shrink_messages(head, allowed - _tokens(cut_tail, encoding), encoding)
        head_tokens = _tokens(cut_head, encoding)
        if head_tokens + _tokens(cut_tail, encoding) <= allowed:
            return cut_head + cut_tail
        if allowed - head_tokens >= tail_budget:
            break  # the tail is as small as it gets
        tail_budget = allowed - head_tokens  # the head is as small as it gets
    cut_tail = _shrink_messages(tail, allowed, encoding)
    if cut_tail and _tokens(cut_tail, encoding) <= allowed:
        return cut_tail
    marker: Message = {"role": "user", "content": _SHORT_MARKER}
    if _tokens([marker], encoding) <= allowed:
        return [marker]
    raise PolicyError("hard_limit", f"a limit of {allowed} tokens leaves no room for a message")


def _tokens(messages: Sequence[Message], encoding: str) -> int:
    return sum(message_token_counts(messages, encoding))


def _shrink_messages(messages: list[Message], budget: int, encoding: str) -> list[Message]:
    """Cut the largest messages until the list is within `budget` tokens (best effort)."""
    result = list(messages)
    counts = message_token_counts(result, encoding)
    exhausted: set[int] = set()
    while sum(counts) > budget:
        open_ = [i for i in range(len(result)) if i not in exhausted]
        if not open_:
            break
        largest = max(open_, key=counts.__getitem__)
        target = max(0, counts[largest] - (sum(counts) - budget))
        shrunk = _shrink_message(result[largest], target, encoding)
        size = message_tokens(shrunk, encoding)
        exhausted.add(largest)
        if size < counts[largest]:
            result[largest], counts[largest] = shrunk, size
    return result


def _shrink_message(message: Message, budget: int, encoding: str) -> Message:
    """A copy of `message` within about `budget` tokens: its contents cut with markers."""
    content = message.get("content")
    if isinstance(content, str):
        text = _cut_text(content, budget, encoding)
        return {**message, "content": _SHORT_MARKER if text is None else text}
    blocks: list[Block] = [dict(b) for b in content] if isinstance(content, list) else []
    blocks = _without_disposable(blocks)
    sizes = [message_tokens({"content": [block]}, encoding) for block in blocks]
    exhausted: set[int] = set()
    while sum(sizes) > budget:
        open_ = [i for i in range(len(blocks)) if i not in exhausted]
        if not open_:
            break
        largest = max(open_, key=sizes.__getitem__)
        target = max(0, sizes[largest] - (sum(sizes) - budget))
        smaller = _cut_block(blocks[largest], target, encoding)
        size = message_tokens({"content": [smaller]}, encoding)
        exhausted.add(largest)
        if size < sizes[largest]:
            blocks[largest], sizes[largest] = smaller, size
    return {**message, "content": blocks}


def _without_disposable(blocks: list[Block]) -> list[Block]:
    """Drop thinking, images and documents, keeping the message non-empty."""
    kept = [b for b in blocks if b.get("type") not in _DISPOSABLE]
    if len(kept) == len(blocks):
        return blocks
    removed = len(blocks) - len(kept)
    if not kept or all(b.get("type") == "tool_result" for b in kept):
        note = f"[{removed} thinking, image or document block(s) removed by ctxweb hard limit]"
        kept.append({"type": "text", "text": note})
    return kept


def _cut_block(block: Block, budget: int, encoding: str) -> Block:
    """A copy of `block` within `budget` tokens if possible, else at its smallest valid form."""
    kind = block.get("type")
    if kind == "text":
        text = _cut_text(str(block.get("text", "")), budget, encoding)
        return {**block, "text": _SHORT_MARKER if text is None else text}
    if kind == "tool_use":
        room = budget - count_text_tokens(str(block.get("name", "")), encoding)
        text = _marked_cut(compact_json(block.get("input", {})), room, encoding, _truncated_input)
        return {**block, "input": {} if text is None else {"_truncated": text}}
    if kind == "tool_result":
        text = _cut_text(tool_result_text(block.get("content"), _placeholder), budget, encoding)
        return {**block, "content": "" if text is None else text}
    return block


def _truncated_input(text: str) -> str:
    """How a cut tool input is sent (and counted): an object holding the cut JSON text."""
    return compact_json({"_truncated": text})


def _placeholder(block: Mapping[str, Any]) -> str:
    """A non-text block of a cut tool result: `[image]`, `[document]`."""
    return f"[{block.get('type')}]"


def _cut_text(text: str, budget: int, encoding: str) -> str | None:
    """`text` when it fits `budget` tokens, else its start with a marker (see `_marked_cut`)."""
    if count_text_tokens(text, encoding) <= budget:
        return text
    return _marked_cut(text, budget, encoding)


def _marked_cut(
    text: str, budget: int, encoding: str, render: Callable[[str], str] = str
) -> str | None:
    """The start of `text` with a truncation marker appended, whose `render` fits `budget`.

    The full notice is used when it fits, else the short marker; None when neither does.
    Candidates are re-counted, because tokens merge differently around the cut and the
    marker (and JSON escaping changes counts), and the kept start shrinks by the excess.
    """
    encoder = get_encoding(encoding)
    tokens = encoder.encode_ordinary(text)
    count = text_counter(encoding)

    def size(candidate: str) -> int:
        return count(render(candidate))

    for marker in (truncation_notice(len(tokens)), _SHORT_MARKER):
        room = budget - size(marker)
        if room < 0:
            continue
        keep = min(room - 1, len(tokens) - 1)  # 1: the newline before the marker
        for _ in range(_MAX_FIT_ATTEMPTS):
            kept = _decoded_start(encoder, tokens, keep)
            if not kept:
                break
            excess = size(f"{kept}\n{marker}") - budget
            if excess <= 0:
                return f"{kept}\n{marker}"
            keep -= excess
        return marker
    return None


def _decoded_start(encoder: tiktoken.Encoding, tokens: Sequence[int], keep: int) -> str:
    """The text of the first `keep` tokens, without a split character or trailing space."""
    if keep <= 0:
        return ""
    return encoder.decode_bytes(tokens[:keep]).decode("utf-8", errors="ignore").rstrip()
