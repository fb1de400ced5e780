"""Recall: which identifiers still appear verbatim in a (compacted) history's text, tool
inputs included (the retention check, `retention.py` and docs/behaviour.md).

Recall first rules out identifiers whose whitespace-delimited words the text lacks before
searching for the rest: a word set, word triples (as hashes) and a sorted suffix index of
the words that hold a `/` or a `.`.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cached_property
from typing import Any, Final

from .messages import blocks_of, message_text

__all__ = ["input_strings", "measure_recall", "recall_of"]

#: The longest word of a compacted text whose suffixes recall lists (longer ones are searched).
_SHORT_WORD: Final = 64


def measure_recall(
    identifiers: Sequence[str], messages: Sequence[Mapping[str, Any]]
) -> tuple[float, list[str]]:
    """The share of `identifiers` present verbatim in `messages`, and the missing ones.

    An empty list of identifiers has a recall of 1.0.
    """
    return recall_of(identifiers)(messages)


def recall_of(
    identifiers: Sequence[str],
) -> Callable[[Sequence[Mapping[str, Any]]], tuple[float, list[str]]]:
    """`measure_recall` of `identifiers` for any `messages`: the identifiers are split into
    words once for every history measured (a run measures its compacted history twice
    when it asks again)."""
    prepared = _Prepared(identifiers)

    def measure(messages: Sequence[Mapping[str, Any]]) -> tuple[float, list[str]]:
        if not prepared.identifiers:
            return 1.0, []
        haystack = "\n".join(_searchable_texts(messages))
        missing = _Words(haystack).missing_prepared(prepared)
        total = len(prepared.identifiers)
        return (total - len(missing)) / total, missing

    return measure


def _triple(first: str, second: str, third: str) -> int:
    """The hash of three words in a row. Two triples may share one, so a triple whose hash
    the text lacks is not in the text, and one whose hash it has is searched for."""
    return hash((first, second, third))


def _triples(words: list[str]) -> set[int]:
    """The `_triple` of each three words in a row of `words`."""
    return set(map(hash, zip(words, words[1:], words[2:], strict=False)))


class _Prepared:
    """Identifiers with, for one of five words or more, the `_triple` of its 2nd to 4th
    words (`_Words.missing`), else None."""

    def __init__(self, identifiers: Sequence[str]) -> None:
        self.identifiers = list(identifiers)
        self.keys: list[int | None] = []
        for identifier in self.identifiers:
            parts = identifier.split(None, 4)
            five = len(parts) == 5
            self.keys.append(_triple(parts[1], parts[2], parts[3]) if five else None)


class _Words:
    """The whitespace-delimited words of a text, to rule out absent identifiers cheaply.

    Where an identifier occurs, each of its words with whitespace on both sides inside the
    identifier is a whole word of the text, and three such words in a row are three words
    in a row of the text; a word with whitespace only before it starts a word of the text,
    one with whitespace only after it ends one. An identifier of one word (a path, a URL)
    lies inside one word of the text, so it is looked up among the suffixes of the text's
    words that hold its `/` or `.` (searched in the long ones). An identifier that is a word
    of the text is there.
    """

    AFFIX: Final = 4

    def __init__(self, text: str) -> None:
        self.text = text
        self.words = text.split()
        self.whole = set(self.words)

    @cached_property
    def triples(self) -> set[int]:
        """The hashes of each three words in a row (`_triple`): a test that rules out."""
        return _triples(self.words)

    @cached_property
    def starts(self) -> set[str]:
        return {word[: self.AFFIX] for word in self.whole if len(word) >= self.AFFIX}

    @cached_property
    def ends(self) -> set[str]:
        return {word[-self.AFFIX :] for word in self.whole if len(word) >= self.AFFIX}

    def holds(self, identifier: str) -> bool:
        """True when `identifier` occurs verbatim in the text."""
        return not self.missing([identifier])

    def missing(self, identifiers: Sequence[str]) -> list[str]:
        """The `identifiers` that do not occur in the text, in order.

        A word of the text is there; an identifier whose 2nd to 4th words (whitespace on
        both sides) are not three words in a row of the text is not."""
        whole = self.whole
        missing = []
        for identifier in identifiers:
            if identifier in whole:
                continue
            parts = identifier.split(None, 4)
            if len(parts) == 5:
                if _triple(parts[1], parts[2], parts[3]) not in self.triples:
                    missing.append(identifier)
                    continue
                parts = identifier.split()
            if not self._holds(identifier, parts):
                missing.append(identifier)
        return missing

    def missing_prepared(self, prepared: _Prepared) -> list[str]:
        """`missing(prepared.identifiers)`, their words split beforehand."""
        whole = self.whole
        triples: set[int] | None = None
        missing = []
        for identifier, key in zip(prepared.identifiers, prepared.keys, strict=True):
            if key is None:  # fewer than five words: all of them
                if identifier not in whole and not self._holds(identifier, identifier.split()):
                    missing.append(identifier)
                continue
            # five words or more: not a word of the text (it holds whitespace)
            if triples is None:
                triples = self.triples
            if key not in triples or not self._holds(identifier, identifier.split()):
                missing.append(identifier)
        return missing

    def _holds(self, identifier: str, parts: list[str]) -> bool:
        """`holds`, given the words of `identifier`."""
        if len(parts) == 1 and len(parts[0]) == len(identifier):
            if "/" in identifier or "." in identifier:
                return self._inside_a_word(identifier)
            return identifier in self.text
        return self._may_hold(identifier, parts) and identifier in self.text

    @cached_property
    def suffixes(self) -> list[str]:
        """The suffixes of the short words that hold a `/` or a `.`, from the first up to
        one starting at the last of these marks, sorted."""
        return sorted(
            {
                word[start:]
                for word in self.whole
                if len(word) <= _SHORT_WORD and ("/" in word or "." in word)
                for start in range(max(word.rfind("/"), word.rfind(".")) + 1)
            }
        )

    @cached_property
    def long_words(self) -> str:
        """The words too long to list their suffixes (their number of characters is the
        square of the word's) that hold a `/` or a `.`, one a line."""
        return "\n".join(
            word for word in self.whole if len(word) > _SHORT_WORD and ("/" in word or "." in word)
        )

    def _inside_a_word(self, identifier: str) -> bool:
        """True when `identifier`, one word holding a `/` or a `.`, is inside a word of the
        text: it then starts one of `suffixes` (a bisection finds it), or is in a long word."""
        suffixes = self.suffixes
        index = bisect_left(suffixes, identifier)
        if index < len(suffixes) and suffixes[index].startswith(identifier):
            return True
        return identifier in self.long_words

    def _may_hold(self, identifier: str, parts: list[str]) -> bool:
        """False only when `identifier` (split into `parts`) cannot occur in the text."""
        if not parts:
            return True
        first = 0 if identifier[0].isspace() else 1
        last = len(parts) if identifier[-1].isspace() else len(parts) - 1
        bounded = parts[first:last]  # whitespace on both sides
        if len(bounded) >= 3:  # each word is in a triple: checking the triples is enough
            triples = self.triples
            for index in range(len(bounded) - 2):
                if _triple(bounded[index], bounded[index + 1], bounded[index + 2]) not in triples:
                    return False
        elif any(part not in self.whole for part in bounded):
            return False
        if first == 1 and len(parts) > 1 and not self._ends_a_word(parts[0]):
            return False
        return not (last < len(parts) and len(parts) > 1 and not self._starts_a_word(parts[-1]))

    def _ends_a_word(self, part: str) -> bool:
        return len(part) < self.AFFIX or part[-self.AFFIX :] in self.ends

    def _starts_a_word(self, part: str) -> bool:
        return len(part) < self.AFFIX or part[: self.AFFIX] in self.starts


def input_strings(value: Any) -> Iterator[str]:
    """Every string inside a JSON-like value (tool inputs), keys excluded."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from input_strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from input_strings(item)


def _searchable_texts(messages: Sequence[Mapping[str, Any]]) -> Iterator[str]:
    for message in messages:
        yield message_text(message)
        for block in blocks_of(message):
            if block.get("type") == "tool_use":
                yield str(block.get("name") or "")
                yield from input_strings(block.get("input"))
