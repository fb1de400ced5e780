"""The token count of a message rewritten from another whose count is known.

Selective pruning drops tool calls from messages and cuts long results to previews; the
message it rewrites keeps most of its blocks as the same objects. A message's tokens are
the sum of its blocks' (`tokens.message_tokens`), so the rewrite is counted from the
original's count and the blocks that changed, not by encoding what it kept again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from .tokens import message_tokens

__all__ = ["rewritten_message_tokens"]


def rewritten_message_tokens(
    old: Mapping[str, Any], old_tokens: int, new: Mapping[str, Any], encoding: str | None = None
) -> int:
    """`message_tokens(new)`, for `new` made from `old` (of `old_tokens` tokens) by dropping,
    adding or replacing content blocks, the others kept as the same objects.

    A message's tokens are the sum of its blocks', so only the blocks dropped and added are
    encoded, or the blocks of `new` when they are fewer characters than those dropped (a
    tool call dropped from a long text, a long tool result cut to a preview).
    """
    before, after = old.get("content"), new.get("content")
    if not isinstance(before, list) or not isinstance(after, list):
        return message_tokens(new, encoding)
    dropped = _left_out(before, after)
    added: list[Any] = []
    if dropped is None:  # blocks replaced or moved: compared by identity
        kept, had = {id(block) for block in after}, {id(block) for block in before}
        if len(kept) != len(after) or len(had) != len(before):
            # A block listed twice: the sets do not say how many times each one goes
            # ([A, A, R] → [A, R, R] drops and adds nothing by identity).
            return _blocks_tokens(after, encoding)
        dropped = [block for block in before if id(block) not in kept]
        added = [block for block in after if id(block) not in had]
    changed = _rough_size(dropped) + (_rough_size(added) if added else 0)
    if changed > _SMALL_CHANGE and changed >= _rough_size(after):
        return _blocks_tokens(after, encoding)
    tokens = old_tokens - _blocks_tokens(dropped, encoding)
    return tokens + _blocks_tokens(added, encoding) if added else tokens


def _left_out(before: list[Any], after: list[Any]) -> list[Any] | None:
    """The blocks of `before` that `after` left out, when `after` is `before` with some
    blocks dropped (the same objects in the same order: pruning's usual change), else None.
    Then the tokens of `after` are those of `before` less those of the blocks left out."""
    dropped: list[Any] = []
    index, size = 0, len(after)
    for block in before:
        if index < size and after[index] is block:
            index += 1
        else:
            dropped.append(block)
    return dropped if index == size else None


#: A change of blocks this small (in characters) is counted whatever the rest holds.
_SMALL_CHANGE: Final = 256


def _rough_size(blocks: Iterable[Any]) -> int:
    """About how many characters counting `blocks` encodes (to choose what to count)."""
    size = 0
    for block in blocks:
        if type(block) is dict or isinstance(block, Mapping):
            for value in block.values():
                if type(value) is str:
                    size += len(value)
                else:
                    size += _rough_size(value) if type(value) is list else 16
    return size


def _blocks_tokens(blocks: list[Any], encoding: str | None) -> int:
    """Tokens of content blocks, as a message's count takes them."""
    return message_tokens({"content": blocks}, encoding) if blocks else 0
