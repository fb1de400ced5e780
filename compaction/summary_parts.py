"""Summaries of middles larger than one summarizer request (`Policy.summary_input_limit`).

A middle whose request fits is summarized in one request. A larger one is summarized in
parts (map) whose summaries are then merged (reduce), as many levels as needed, so no
request carries more than the limit: `chunking` cuts the middle into chunks that respect
tool pairs; each chunk's summary becomes a summary message; earlier summaries in the
middle are not summarized again but merged with the part summaries; while the summaries
together are still too large for one request, groups of them are merged first. The last
request merges everything into the one summary; it is returned with the text, so the
retention check can ask it again. A `summary_chunk` event reports each request of a parted
run (`chunk` of `chunks` at `level`), so a background job can show its progress.

Every request counts against `Policy.max_summary_calls` (`SummaryCalls`, shared by a run's
requests): a middle whose parts alone, with the final merge, need more is refused with
`too_many_summary_calls` before any request is sent; a merge level that would pass the
bound stops the run with the same reason (docs/behaviour.md#summary-call-limit).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from .chunking import Chunk, chunk_messages, cut_to_fit, fits, fits_costed, message_costs
from .errors import SummaryError
from .messages import Message, make_summary_message
from .policy import Policy
from .report import RunReport
from .summarizers.base import SummaryRequest
from .summarizers.prompt import prompt_overhead_tokens
from .tokens import text_counter

__all__ = ["PartedSummary", "SummaryCalls", "transcript_budget"]

#: Tokens kept free under the limit besides the prompt: 1% for joins and rounding.
_MARGIN_SHARE: Final = 0.01
_MARGIN_MIN: Final = 16


def transcript_budget(request: SummaryRequest, limit: int, encoding: str | None) -> int:
    """The transcript tokens one request built from `request` may carry under `limit`."""
    margin = max(_MARGIN_MIN, int(limit * _MARGIN_SHARE))
    return max(1, limit - prompt_overhead_tokens(request, encoding) - margin)


@dataclass
class SummaryCalls:
    """The summary requests of one run, at most `limit` (`Policy.max_summary_calls`); an
    attempt's retries are one request."""

    limit: int
    made: int = field(default=0, init=False)

    @property
    def left(self) -> int:
        """Requests the run may still make."""
        return self.limit - self.made

    def reserve(self, needed: int) -> None:
        """Raise SummaryError `too_many_summary_calls` (not retryable) when `needed` more
        requests would pass the limit."""
        if needed > self.left:
            raise SummaryError(
                "too_many_summary_calls",
                f"the middle needs {needed} more summary requests ({self.made} made), "
                f"more than max_summary_calls = {self.limit} allows",
                retryable=False,
            )

    def take(self) -> None:
        """Count one request (`reserve` first)."""
        self.reserve(1)
        self.made += 1


@dataclass(frozen=True)
class PartedSummary:
    """Summarizes a middle within the policy's `summary_input_limit` and its
    `max_summary_calls` (module doc)."""

    policy: Policy
    report: RunReport
    summarize_request: Callable[[SummaryRequest], str]  # one request, with the retries
    summarizer: str
    calls: SummaryCalls

    def summarize(self, request: SummaryRequest) -> str:
        """One request, counted against the run's `calls`."""
        self.calls.take()
        return self.summarize_request(request)

    @property
    def encoding(self) -> str:
        return self.policy.encoding

    def run(
        self, request: SummaryRequest, counts: Sequence[int] | None = None
    ) -> tuple[str, SummaryRequest]:
        """The summary of `request.messages`, and the last request that made it.

        `counts`: the messages' token counts, when known (they spare encoding them again).
        """
        budget = transcript_budget(request, self.policy.summary_input_limit, self.encoding)
        fitting, costs = fits_costed(request.messages, budget, self.encoding, counts)
        if fitting:
            return self.summarize(request), request
        chunks = chunk_messages(request.messages, budget, self.encoding, costs=costs)
        if len(chunks) == 1 and not chunks[0].summary:  # one unit, cut to fit
            final = replace(request, messages=chunks[0].messages)
            return self.summarize(final), final
        # Each part, then at least the final merge: refused before the first request.
        self.calls.reserve(sum(1 for chunk in chunks if not chunk.summary) + 1)
        items = self._map(request, chunks)
        level = 2
        items = self._shrunk(items, budget // 2)
        while not fits(items, budget, self.encoding):
            items = self._reduce(request, items, budget, level)
            level += 1
        final = replace(request, messages=items, part=None)
        self._progress(1, 1, level, len(items), merge=True)
        return self.summarize(final), final

    def _map(self, request: SummaryRequest, chunks: Sequence[Chunk]) -> list[Message]:
        """Each chunk's summary as a summary message; earlier summaries pass through."""
        count = sum(1 for chunk in chunks if not chunk.summary)
        items: list[Message] = []
        index = 0
        for chunk in chunks:
            if chunk.summary:
                items.extend(chunk.messages)
                continue
            index += 1
            self._progress(index, count, 1, len(chunk.messages), cut=chunk.cut)
            part = replace(request, messages=chunk.messages, part=(index, count))
            items.append(self._summary_message(self.summarize(part), 1, len(chunk.messages)))
        return items

    def _reduce(
        self, request: SummaryRequest, items: list[Message], budget: int, level: int
    ) -> list[Message]:
        """Merge groups of summaries that fit one request; a group of one stays as it is.

        Every item is at most half the budget, so each group but the last holds two or more
        and every level has fewer items than the one before.
        """
        groups = chunk_messages(items, budget, self.encoding, summaries_alone=False)
        merged = [group for group in groups if len(group.messages) > 1]
        out: list[Message] = []
        index = 0
        for group in groups:
            if len(group.messages) == 1:
                out.extend(group.messages)
                continue
            index += 1
            self._progress(index, len(merged), level, len(group.messages))
            part = replace(request, messages=group.messages, part=None)
            out.append(self._summary_message(self.summarize(part), level, len(group.messages)))
        return self._shrunk(out, budget // 2)

    def _shrunk(self, items: list[Message], limit: int) -> list[Message]:
        """`items` with each one over `limit` transcript tokens cut to it."""
        costs = message_costs(items, self.encoding)
        return [
            cut_to_fit([item], limit, self.encoding)[0] if cost > limit else item
            for item, cost in zip(items, costs, strict=True)
        ]

    def _summary_message(self, text: str, level: int, messages: int) -> Message:
        return make_summary_message(
            text, summarizer=self.summarizer, part_level=level, message_count=messages
        )

    def _progress(self, chunk: int, chunks: int, level: int, messages: int, **flags: bool) -> None:
        detail = {"chunk": chunk, "chunks": chunks, "level": level, "messages": messages}
        detail.update({name: True for name, value in flags.items() if value})
        self.report.emit("summary_chunk", detail=detail)

    def identifiers_that_fit(
        self,
        final: SummaryRequest,
        identifiers: Sequence[str],
        counts: Sequence[int] | None = None,
    ) -> tuple[str, ...]:
        """The first of `identifiers` that a re-ask of `final` can list under the limit
        (`counts`: the token counts of its messages, when known)."""
        listed = replace(final, required_identifiers=("x",))
        budget = transcript_budget(listed, self.policy.summary_input_limit, self.encoding)
        room = budget - sum(message_costs(final.messages, self.encoding, counts))
        return tuple(identifiers[: _lines_within(identifiers, room, self.encoding)])


#: Identifier lines counted together: their tokens add up (`_lines_within`).
_LINES_AT_ONCE: Final = 64


def _lines_within(identifiers: Sequence[str], room: int, encoding: str | None) -> int:
    """How many of `identifiers` a list of `- identifier` lines holds within `room` tokens,
    each line costing its tokens plus one, in order until the first that does not fit.

    A chunk of tiktoken's pre-tokenizer starts after each line's newline (a "-" follows),
    so the lines' tokens add up: they are counted a group at a time, one by one only in
    the group where the room runs out. Lines whose UTF-8 bytes fit are not counted at all
    (a token covers a byte at least).
    """
    lines = [f"- {identifier}\n" for identifier in identifiers]
    # A character is a byte at least: when the characters do not fit, the bytes do not.
    if sum(map(len, lines)) + len(lines) <= room and (
        sum(len(line.encode("utf-8", "surrogatepass")) for line in lines) + len(lines) <= room
    ):
        return len(lines)
    count = text_counter(encoding)
    index = 0
    while index < len(lines):
        group = lines[index : index + _LINES_AT_ONCE]
        cost = count("".join(group)) + len(group)
        if cost <= room:
            room -= cost
            index += len(group)
            continue
        for line in group:
            cost = count(line) + 1
            if cost > room:
                return index
            room -= cost
            index += 1
    return index
