"""Grounding a summarizer's text: a path it writes is a whole path of the messages it
summarized, never a fragment (docs/behaviour.md#what-a-summary-always-keeps).

A line cut at its length limit, a model that shortens a path, a text that was itself cut
(a pruning preview) can all leave a piece of a path (`nifest/CLAUDE.md` for
`/src/deep-manifest/CLAUDE.md`), which misleads more than it helps. `Grounding.ground`
replaces each path-like word of a summary that is not a whole path-like word (or a whole
tool-input string) of the span with `…`; the state block, built from whole paths, needs no
check. The paths of the span's texts and tool inputs are gathered first (their words are
split once per summary step, `marked_words`); the tool results, the bulk of a span, are
read only when the summary names a path those do not hold.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from functools import cached_property
from typing import Any, Final

from .carried_state import expand_path_groups
from .marked_words import marked_words
from .messages import blocks_of, first_nonblank_line, tool_result_text
from .recall import input_strings
from .tool_operations import word_path

__all__ = ["Grounding"]

_ELLIPSIS: Final = "…"
_WORD: Final = re.compile(r"\S+")
_INPUT_PATH_CHARS: Final = 256


class Grounding:
    """The whole paths of a span, gathered when first needed, and the grounding of a text."""

    def __init__(self, messages: Sequence[Mapping[str, Any]]) -> None:
        self.messages = messages

    @cached_property
    def texts(self) -> set[str]:
        """The paths of the texts, tool inputs and the first lines of tool results."""
        return _paths(self._texts(results=False))

    @cached_property
    def results(self) -> set[str]:
        """The paths of the tool results."""
        return _paths(self._texts(results=True))

    def _texts(self, *, results: bool) -> Iterator[str]:
        for message in self.messages:
            for block in blocks_of(message):
                kind = block.get("type")
                if kind == "tool_result":
                    text = tool_result_text(block.get("content"))
                    yield text if results else first_nonblank_line(text)
                elif results:
                    continue
                elif kind == "text":
                    yield expand_path_groups(str(block.get("text") or ""))
                elif kind == "tool_use":
                    yield from input_strings(block.get("input"))

    def is_whole(self, path: str) -> bool:
        return path in self.texts or path in self.results

    def ground(self, text: str) -> str:
        """`text` with each path-like word that is no whole path of the span replaced by `…`
        (module doc); the same object when every path is whole."""
        fragments = {
            path
            for word in marked_words(text)
            if (path := word_path(word)) and not self.is_whole(path)
        }
        if not fragments:
            return text

        def replaced(match: re.Match[str]) -> str:
            word = match.group()
            path = word_path(word) if ("/" in word or "." in word) else None
            return word.replace(path, _ELLIPSIS) if path and path in fragments else word

        return _WORD.sub(replaced, text)


def _paths(texts: Iterator[str]) -> set[str]:
    whole: set[str] = set()
    for text in texts:
        if len(text) < _INPUT_PATH_CHARS:  # a path given as an input, spaces and all
            whole.add(text.strip())
        whole.update(path for word in marked_words(text) if (path := word_path(word)))
    return whole
