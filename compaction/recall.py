"""Recall: which identifiers still appear verbatim in a (compacted) history's text, tool
inputs included (the retention check, `retention.py` and docs/behaviour.md).

Recall first rules out identifiers whose whitespace-delimited words the text lacks before
searching for the rest: a word set, word triples (as hashes) and a sorted suffix index of
the words that hold a `/` or a `.`.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping, Sequence, Set
from functools import cached_property
from typing import Any, Final

from .messages import blocks_of, message_text

__all__ = ["input_strings", "measure_recall", "recall_around"]

#: The longest word of a compacted text whose suffixes recall lists (longer ones are searched).
_SHORT_WORD: Final = 64


def measure_recall(
    identifiers: Sequence[str], messages: Sequence[Mapping[str, Any]]
) -> tuple[float, list[str]]:
    """The share of `identifiers` present verbatim in `messages`, and the missing ones.

    An empty list of identifiers has a recall of 1.0.
    """
    prepared = _Prepared(identifiers)
    if not prepared.identifiers:
        return 1.0, []
    haystack = "\n".join(_searchable_texts(messages))
    return prepared.recall(_Words(haystack).present(prepared))


def recall_around(
    identifiers: Sequence[str],
    head: Sequence[Mapping[str, Any]],
    tail: Sequence[Mapping[str, Any]],
    fixed: str = "",
) -> Callable[[Mapping[str, Any]], tuple[float, list[str]]]:
    """`measure_recall` of `identifiers` in `[*head, summary, *tail]` for any `summary`
    message: head and tail are measured once for every summary (a run measures its first
    summary and, when it asks again, its second).

    `fixed`: a text that each summary's text is expected to end with after a line break
    (the file outlines), measured once with head and tail; a summary that does not end so
    is measured with head and tail again."""
    return _Around(identifiers, head, tail, fixed)


class _Around:
    """`recall_around`. The history's text is its texts joined by line breaks, so an
    identifier without one is in it when it is inside one text: in head's and tail's, or in
    the summary's; and a text `X + "\\n" + fixed` holds it when X or `fixed` does. One with
    a line break is searched in the whole text."""

    def __init__(
        self,
        identifiers: Sequence[str],
        head: Sequence[Mapping[str, Any]],
        tail: Sequence[Mapping[str, Any]],
        fixed: str,
    ) -> None:
        self.prepared = _Prepared(identifiers)
        self.head = list(_searchable_texts(head))
        self.tail = list(_searchable_texts(tail))
        self.fixed = fixed
        self.spanning = {
            identifier for identifier in self.prepared.identifiers if "\n" in identifier
        }
        # The order of the texts changes nothing for an identifier without a line break;
        # the outlines first, as the middle's lines they hold are found sooner there.
        outer = [fixed, *self.head, *self.tail] if fixed else [*self.head, *self.tail]
        #: The identifiers without a line break that head, tail and `fixed` hold.
        self.outer: set[str] = set()
        if self.prepared.identifiers:
            self.outer = _Words("\n".join(outer)).present(self.prepared) - self.spanning

    def __call__(self, summary: Mapping[str, Any]) -> tuple[float, list[str]]:
        if not self.prepared.identifiers:
            return 1.0, []
        texts = list(_searchable_texts([summary]))
        cut = texts
        if self.fixed:
            end = "\n" + self.fixed
            cut = [text[: -len(end)] if text.endswith(end) else text for text in texts]
            if all(a is b for a, b in zip(cut, texts, strict=True)):  # `fixed` is not there
                return self.prepared.recall(_Words(self._whole(texts)).present(self.prepared))
        present = _Words("\n".join(cut)).present(self.prepared, self.outer)
        present -= self.spanning
        present |= self.outer
        if self.spanning:
            whole = self._whole(texts)
            present.update(identifier for identifier in self.spanning if identifier in whole)
        return self.prepared.recall(present)

    def _whole(self, texts: list[str]) -> str:
        """The history's text, given the summary's `texts`."""
        return "\n".join([*self.head, *texts, *self.tail])


def _triple(first: str, second: str, third: str) -> int:
    """The hash of three words in a row. Two triples may share one, so a triple whose hash
    the text lacks is not in the text, and one whose hash it has is searched for."""
    return hash((first, second, third))


def _triples(words: list[str]) -> set[int]:
    """The `_triple` of each three words in a row of `words`."""
    return set(map(hash, zip(words, words[1:], words[2:], strict=False)))


class _Prepared:
    """Identifiers (`identifiers`, in order): those of five words or more by the `_triple`
    of their 2nd to 4th words (`by_key`, and `more` when two share one; `_Words.present`),
    the others with their words (`others`)."""

    def __init__(self, identifiers: Sequence[str]) -> None:
        self.identifiers = list(identifiers)
        self.by_key: dict[int, str] = {}
        self.more: dict[int, list[str]] = {}
        self.others: list[tuple[str, list[str]]] = []
        for identifier in self.identifiers:  # a repeated one is only tested twice
            parts = identifier.split(None, 4)
            if len(parts) < 5:
                self.others.append((identifier, parts))
            elif (key := _triple(parts[1], parts[2], parts[3])) in self.by_key:
                self.more.setdefault(key, []).append(identifier)
            else:
                self.by_key[key] = identifier
        self.keys = frozenset(self.by_key)

    def keyed(self, key: int) -> list[str]:
        """The identifiers of five words or more whose `_triple` is `key`."""
        return [self.by_key[key], *self.more.get(key, ())]

    def recall(self, present: set[str]) -> tuple[float, list[str]]:
        """The share of the identifiers in `present` (1.0 of none), and the others, in order."""
        if not self.identifiers:
            return 1.0, []
        missing = [identifier for identifier in self.identifiers if identifier not in present]
        total = len(self.identifiers)
        return (total - len(missing)) / total, missing


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
        return bool(self.present(_Prepared([identifier])))

    def present(self, prepared: _Prepared, known: Set[str] = frozenset()) -> set[str]:
        """The identifiers of `prepared` that occur verbatim in the text, those in `known`
        (known to be present) aside.

        A word of the text is there; one of five words or more whose 2nd to 4th words
        (whitespace on both sides) are not three words in a row of the text is not: only
        those whose hash of them the text has are searched for."""
        found: set[str] = set()
        if prepared.by_key:
            for key in self.triples & prepared.keys:  # over the smaller of the two
                for identifier in prepared.keyed(key):
                    if identifier not in known and self._holds(identifier, identifier.split()):
                        found.add(identifier)
        whole = self.whole
        for identifier, parts in prepared.others:
            if identifier in known:
                continue
            if identifier in whole or self._holds(identifier, parts):
                found.add(identifier)
        return found

    def _holds(self, identifier: str, parts: list[str]) -> bool:
        """True when `identifier`, split into `parts`, occurs verbatim in the text."""
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
