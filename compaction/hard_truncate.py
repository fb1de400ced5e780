"""`hard_truncate`: the last resort that always fits the hard limit (seed 001 REQ-3.4).

It keeps the leading system prompt(s) and the newest messages (`keep_recent_messages`,
fewer when they do not fit), never separating a tool_use from its tool_result. When even
the system prompt and the newest message (with its tool_use partner) are over the limit,
the largest contents are cut with a visible marker instead of failing. The output is
always a valid request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from .messages import Block, Message, is_safe_cut
from .partition import leading_system_count
from .policy import Policy
from .results import TruncateResult
from .tokens import (
    compact_json,
    count_text_tokens,
    get_encoding,
    message_token_counts,
    message_tokens,
)
from .validation import ensure_valid

__all__ = ["hard_limit_tokens", "hard_truncate", "truncation_notice"]

#: Blocks the API lets an earlier turn lose; dropped first when a message must shrink.
_DISPOSABLE: Final = frozenset({"thinking", "redacted_thinking", "image", "document"})
_MAX_SHRINK_ROUNDS: Final = 8


def truncation_notice(tokens: int) -> str:
    """The marker left where content was cut."""
    return f"[... truncated {tokens} tokens by ctxweb hard limit ...]"


def hard_limit_tokens(policy: Policy) -> int:
    """The most raw tokens whose count, scaled by the safety factor, is within the limit."""
    limit = policy.effective_hard_limit
    allowed = int(limit / policy.safety_factor)
    while policy.scaled(allowed + 1) <= limit:
        allowed += 1
    while allowed > 0 and policy.scaled(allowed) > limit:
        allowed -= 1
    return allowed


def hard_truncate(messages: Sequence[Message], policy: Policy | None = None) -> TruncateResult:
    """Fit `messages` under the hard limit: system prompt(s) plus the newest messages.

    A list already within the limit comes back unchanged (`truncated=False`).
    """
    policy = policy or Policy()
    ensure_valid(messages)
    counts = message_token_counts(messages, policy.encoding)
    before = sum(counts)
    allowed = hard_limit_tokens(policy)
    if before <= allowed:
        return TruncateResult(list(messages), False, before, before)
    head_end = leading_system_count(messages)
    head_tokens = sum(counts[:head_end])
    start = _tail_start(messages, counts, head_end, allowed - head_tokens, policy)
    head, tail = list(messages[:head_end]), list(messages[start:])
    if head_tokens + sum(counts[start:]) > allowed:
        head, tail = _shrink_to_fit(head, tail, allowed, policy.encoding)
    result = head + tail
    originals = {id(message) for message in messages}
    cut = sum(1 for message in result if id(message) not in originals)
    after = sum(message_token_counts(result, policy.encoding))
    return TruncateResult(
        messages=result,
        truncated=True,
        tokens_before=before,
        tokens_after=after,
        removed_message_count=len(messages) - len(result),
        detail={"kept_messages": len(tail), "cut_messages": cut, "limit_tokens": allowed},
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
) -> tuple[list[Message], list[Message]]:
    """Cut contents until head + tail fit `allowed`: the tail first, the system prompt only
    when it alone leaves the tail less than half of the limit."""
    head_tokens = sum(message_token_counts(head, encoding))
    tail_tokens = sum(message_token_counts(tail, encoding))
    tail_budget = max(allowed - head_tokens, min(tail_tokens, allowed // 2))
    head_budget = allowed - tail_budget
    for _ in range(_MAX_SHRINK_ROUNDS):
        tail = _shrink_messages(tail, tail_budget, encoding)
        head = _shrink_messages(head, head_budget, encoding)
        over = sum(message_token_counts(head + tail, encoding)) - allowed
        if over <= 0:
            break
        tail_budget, head_budget = max(0, tail_budget - over), max(0, head_budget - over)
    return head, tail


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
        return {**message, "content": _cut_text(content, budget, encoding)}
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
    kind = block.get("type")
    if kind == "text":
        return {**block, "text": _cut_text(str(block.get("text", "")), budget, encoding)}
    if kind == "tool_use":
        name_tokens = count_text_tokens(str(block.get("name", "")), encoding)
        keep = max(0, budget - name_tokens - 8)  # 8: the `{"_truncated":""}` wrapper
        text = _cut_text(compact_json(block.get("input", {})), keep, encoding)
        return {**block, "input": {"_truncated": text}}
    if kind == "tool_result":
        text = _cut_text(_result_text(block.get("content", "")), budget, encoding)
        return {**block, "content": text}
    return block


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            str(item.get("text", "")) if item.get("type") == "text" else f"[{item.get('type')}]"
            for item in content
            if isinstance(item, Mapping)
        ]
        return "\n".join(parts)
    return ""


def _cut_text(text: str, budget: int, encoding: str) -> str:
    """The first tokens of `text` that fit `budget` with the marker appended."""
    encoder = get_encoding(encoding)
    tokens = encoder.encode_ordinary(text)
    if len(tokens) <= budget:
        return text
    notice = truncation_notice(len(tokens))
    keep = max(0, budget - len(encoder.encode_ordinary(notice)) - 1)
    kept = encoder.decode(tokens[:keep]).rstrip()
    return f"{kept}\n{notice}" if kept else notice
