"""Grounding a summarizer's text: a path it writes is a whole path of the messages it
summarized, never a fragment (docs/behaviour.md#what-a-summary-always-keeps).

A line cut at its length limit, a model that shortens a path, a text that was itself cut
(a pruning preview) can all leave a piece of a path (`nifest/CLAUDE.md` for
`/src/deep-manifest/CLAUDE.md`), which misleads more than it helps. `ground_paths` replaces
each path-like word of a summary that is not a whole path-like word (or a whole tool-input
string) of the span with `…`; the state block, built from whole paths, needs no check.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from .carried_state import expand_path_groups
from .marked_words import marked_words
from .messages import blocks_of, message_text
from .recall import input_strings
from .tool_operations import word_path

__all__ = ["ground_paths", "whole_paths"]

_ELLIPSIS: Final = "…"
_WORD: Final = re.compile(r"\S+")


def whole_paths(messages: Sequence[Mapping[str, Any]]) -> set[str]:
    """The path-like words of the messages' texts and tool inputs, and the inputs' strings."""
    whole: set[str] = set()
    for text in _texts(messages):
        if len(text) < 256:  # a path given as an input, spaces and all
            whole.add(text.strip())
        whole.update(path for word in marked_words(text) if (path := word_path(word)))
    return whole


def _texts(messages: Sequence[Mapping[str, Any]]) -> Iterator[str]:
    for message in messages:
        yield expand_path_groups(message_text(message))
        for block in blocks_of(message):
            if block.get("type") == "tool_use":
                yield from input_strings(block.get("input"))


def ground_paths(text: str, whole: set[str]) -> str:
    """`text` with each path-like word that is not in `whole` (`whole_paths` of the span)
    replaced by `…` (module doc); the same object when every path is whole."""
    fragments = {
        path for word in marked_words(text) if (path := word_path(word)) and path not in whole
    }
    if not fragments:
        return text

    def replaced(match: re.Match[str]) -> str:
        word = match.group()
        path = word_path(word) if ("/" in word or "." in word) else None
        return word.replace(path, _ELLIPSIS) if path in fragments and path else word

    return _WORD.sub(replaced, text)
