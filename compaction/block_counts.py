"""Token counts by content block, for steps that rebuild messages (smart truncation).

A message's count is the sum of its blocks' counts (`tokens.message_tokens` counts each
block on its own), so a message rebuilt from counted blocks is counted without encoding
them again: only new blocks are. The count of a text block, of a tool_result with string
content and of a string content is the count of that string alone
(`tokens.count_text_tokens`); each distinct such string is encoded once per `BlockCounts`
(an agent reads the same file and gets the same tool output again and again).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .messages import Block, Message
from .tokens import count_text_tokens, message_token_counts

__all__ = ["BlockCounts"]


class BlockCounts:
    """The counts of the blocks (by identity, each kept alive here) and texts seen so far."""

    def __init__(self, encoding: str | None) -> None:
        self.encoding = encoding
        self.by_text: dict[str, int] = {}
        self.by_block: dict[int, int] = {}  # id(block) -> tokens; the block kept alive below
        self.blocks: list[Block] = []

    def text(self, text: str) -> int:
        """Tokens of `text`, encoded the first time only."""
        tokens = self.by_text.get(text)
        if tokens is None:
            tokens = self.by_text[text] = count_text_tokens(text, self.encoding)
        return tokens

    def count_messages(self, messages: Sequence[Message]) -> list[int]:
        """Each message's tokens, as `tokens.message_token_counts` gives them."""
        counts: list[int] = []
        others: list[Block] = []  # blocks counted through message_token_counts, in one call
        owners: list[int] = []  # the message of each of `others`
        for message in messages:
            content = message.get("content")
            if isinstance(content, str):
                counts.append(self.text(content))
            elif isinstance(content, list):
                counts.append(self._known(content, others, owners, len(counts)))
            else:
                counts.append(0)
        if others:
            wrapped = [{"role": "user", "content": [block]} for block in others]
            found = message_token_counts(wrapped, self.encoding)
            for block, owner, tokens in zip(others, owners, found, strict=True):
                self.by_block[id(block)] = tokens
                counts[owner] += tokens
            self.blocks += others
        return counts

    def _known(self, content: list[Any], others: list[Block], owners: list[int], owner: int) -> int:
        """Tokens of the blocks countable as one string; the others go to `others`."""
        total = 0
        by_block, by_text = self.by_block, self.by_text
        for block in content:
            kind = block.get("type")
            if kind == "text" or kind == "tool_result":
                text = block.get("text" if kind == "text" else "content")
                if type(text) is str:
                    tokens = by_text.get(text)
                    if tokens is None:
                        tokens = self.text(text)
                    by_block[id(block)] = tokens
                    self.blocks.append(block)
                    total += tokens
                    continue
            others.append(block)
            owners.append(owner)
        return total

    def message(self, message: Message) -> int:
        """Tokens of a message made of counted blocks and new ones (counted here)."""
        content = message.get("content")
        if isinstance(content, str):
            return self.text(content)
        if not isinstance(content, list):
            return 0
        fresh = [block for block in content if id(block) not in self.by_block]
        if fresh:
            self.count_messages([{"role": "user", "content": fresh}])
        return sum(self.by_block[id(block)] for block in content)

    def block(self, block: Block) -> int:
        """Tokens of one content block."""
        if id(block) not in self.by_block:
            self.count_messages([{"role": "user", "content": [block]}])
        return self.by_block[id(block)]
