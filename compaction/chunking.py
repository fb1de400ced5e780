"""Parts of a middle too large for one summarizer request (`Policy.summary_input_limit`).

A message's cost is the tokens of its transcript text, as the summary prompt shows it
(`summarizers.prompt.serialize_message`). `chunk_messages` packs the middle, in order, into
chunks whose transcript fits a token budget. A chunk never splits a tool pair: an assistant
message's tool calls and the messages up to their last result form one unit. A unit larger
than the budget is cut for the request (`cut_to_fit`): its longest strings (texts, tool
results, tool inputs) are shortened to their head and tail around a `[TRUNCATED ...]`
marker, so no request is ever built larger than the limit. The cut copies go only to the
summarizer; the originals are what the archive holds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from .messages import Message, is_summary_message
from .preview import truncation_marker
from .summarizers.prompt import serialize_message, serialize_transcript
from .tokens import count_text_tokens, get_encoding
from .transcript_costs import SEPARATOR, message_costs

__all__ = [
    "Chunk",
    "chunk_messages",
    "cut_to_fit",
    "fits",
    "fits_costed",
    "message_costs",
    "tool_units",
]

#: Strings of fewer tokens are never cut: a marker would save little.
_MIN_CUT: Final = 16
_CUT_ATTEMPTS: Final = 8
#: Tokens a message's cost may exceed its share of the whole transcript's tokens: the
#: six-digit number bound (two tokens), the separator, and a join at either boundary. A
#: generous bound: it only decides when the exact count can be skipped.
_COST_SLACK: Final = 8


@dataclass(frozen=True)
class Chunk:
    """Consecutive messages for one request; `tokens` bounds their transcript's tokens.

    `cut`: some of its messages are cut copies. `summary`: an earlier summary on its own
    (the summary step merges it without summarizing it again).
    """

    messages: list[Message]
    tokens: int
    cut: bool = False
    summary: bool = False


def fits(messages: Sequence[Message], budget: int, encoding: str | None = None) -> bool:
    """Whether the transcript of `messages` takes at most `budget` tokens.

    A token covers at least one byte, so a transcript of at most `budget` bytes fits
    without being encoded (the usual case, and the cheap one).
    """
    if _bytes_within(messages, budget):
        return True
    return count_text_tokens(serialize_transcript(messages), encoding) <= budget


def _bytes_within(messages: Sequence[Message], budget: int) -> bool:
    """Whether the UTF-8 transcript of `messages` takes at most `budget` bytes.

    Message by message, stopping at the first that crosses `budget`: a large middle is
    decided after about `budget` bytes, and its whole transcript (several times the
    history's JSON size as a string) is never built.
    """
    total = -2  # no separator before the first message
    for number, message in enumerate(messages, 1):
        text = serialize_message(number, message)
        total += 2 + (len(text) if text.isascii() else _utf8_length(text))
        if total > budget:
            return False
    return True


def _utf8_length(text: str) -> int:
    return len(text.encode("utf-8", errors="surrogatepass"))


def fits_costed(
    messages: Sequence[Message],
    budget: int,
    encoding: str | None = None,
    counts: Sequence[int] | None = None,
) -> tuple[bool, list[int] | None]:
    """`fits(messages, budget)`, and the messages' `message_costs` when they were needed.

    A transcript too large for its bytes to decide is costed per message (what chunking
    needs anyway): a total within the budget fits, a total over it by more than the costs'
    slack does not, and only in between is the whole transcript counted once more.
    `counts`: the messages' token counts, when known (see `message_costs`).
    """
    if _bytes_within(messages, budget):
        return True, None
    costs = message_costs(messages, encoding, counts)
    total = sum(costs)
    if total <= budget:
        return True, costs
    if total - _COST_SLACK * len(costs) > budget:
        return False, costs
    return fits(messages, budget, encoding), costs


def tool_units(messages: Sequence[Message]) -> list[range]:
    """The spans a chunk must not split: each tool call with the messages up to its result."""
    answered: dict[str, int] = {}  # each tool id's first result
    calls: dict[int, list[str]] = {}  # the tool_use ids of each message that has some
    for index, message in enumerate(messages):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if isinstance(block, dict):
                kind = block.get("type")
                if kind == "tool_use":
                    calls.setdefault(index, []).append(str(block.get("id")))
                elif kind == "tool_result":
                    answered.setdefault(str(block.get("tool_use_id")), index)
    units: list[range] = []
    start = end = 0
    for index in range(len(messages)):
        if index > end:
            units.append(range(start, end + 1))
            start = end = index
        for tool_id in calls.get(index, ()):
            end = max(end, answered.get(tool_id, index))
    if messages:
        units.append(range(start, end + 1))
    return units


def chunk_messages(
    messages: Sequence[Message],
    budget: int,
    encoding: str | None = None,
    *,
    unit_limit: int | None = None,
    summaries_alone: bool = True,
    costs: Sequence[int] | None = None,
) -> list[Chunk]:
    """`messages` in order, packed into chunks of at most `budget` transcript tokens.

    A unit (`tool_units`) over `unit_limit` (default: the budget) is cut to it. With
    `summaries_alone`, each earlier summary is a chunk of its own, marked `summary`.
    `costs`: the messages' `message_costs` when they are known already.
    """
    limit = min(budget, unit_limit or budget)
    if costs is None:
        costs = message_costs(messages, encoding)
    chunks: list[Chunk] = []
    current: list[Message] = []
    tokens = 0
    cut = False
    for unit in tool_units(messages):
        members = list(messages[unit.start : unit.stop])
        cost = costs[unit.start] if len(unit) == 1 else sum(costs[unit.start : unit.stop])
        alone = summaries_alone and len(members) == 1 and is_summary_message(members[0])
        was_cut = cost > limit
        if was_cut:
            members = cut_to_fit(members, limit - SEPARATOR, encoding)
            cost = sum(message_costs(members, encoding))
        if current and (alone or tokens + cost > budget):
            chunks.append(Chunk(current, tokens, cut))
            current, tokens, cut = [], 0, False
        if alone:
            chunks.append(Chunk(members, cost, was_cut, summary=True))
            continue
        current.extend(members)
        tokens += cost
        cut = cut or was_cut
    if current:
        chunks.append(Chunk(current, tokens, cut))
    return chunks


def cut_to_fit(
    messages: Sequence[Message], budget: int, encoding: str | None = None
) -> list[Message]:
    """Copies of `messages` whose transcript takes at most `budget` tokens.

    Every string longer than a common cap keeps its head and tail around a truncation
    marker; the cap is the largest that fits (water-filling, checked by counting). When
    even the markers alone do not fit, the messages become one text message: the head of
    their transcript and a marker.
    """
    encode = get_encoding(encoding).encode_ordinary
    tokens: dict[str, list[int]] = {}

    def measure(text: str) -> list[int]:
        if text not in tokens:
            tokens[text] = encode(text)
        return tokens[text]

    def cost(copy: Sequence[Message]) -> int:
        return sum(message_costs(copy, encoding))

    def cut_all(cap: int) -> list[Message]:
        return [_map_strings(m, lambda s: _cut(s, cap, measure, encoding)) for m in messages]

    floor = cut_all(0)
    fixed = cost(floor)
    if fixed <= budget:
        sizes = sorted(
            n for m in messages for s in _strings(m) if (n := len(measure(s))) > _MIN_CUT
        )
        cap = _water_level(sizes, budget - fixed)
        for _ in range(_CUT_ATTEMPTS):
            copy = cut_all(cap)
            if cost(copy) <= budget:
                return copy
            cap = cap * 4 // 5
        return floor
    return _flattened(messages, budget, encoding)


def _water_level(sizes: Sequence[int], room: int) -> int:
    """The largest cap with sum(min(size, cap)) <= room (sizes sorted ascending)."""
    spent = 0
    for index, size in enumerate(sizes):
        left = len(sizes) - index
        if spent + size * left > room:
            return max(0, (room - spent) // left)
        spent += size
    return sizes[-1] if sizes else 0


def _cut(text: str, cap: int, measure: Callable[[str], list[int]], encoding: str | None) -> str:
    """`text` whole when it has at most `cap` tokens (or too few to cut), else its first
    two thirds of `cap` tokens, a marker and its last third."""
    ids = measure(text)
    if len(ids) <= max(cap, _MIN_CUT):
        return text
    enc = get_encoding(encoding)
    head_ids = ids[: cap * 2 // 3]
    tail_ids = ids[len(ids) - (cap - len(head_ids)) :] if cap > len(head_ids) else []
    head = enc.decode_bytes(head_ids).decode("utf-8", errors="ignore")
    tail = enc.decode_bytes(tail_ids).decode("utf-8", errors="ignore")
    return "\n".join(part for part in (head, truncation_marker(len(ids)), tail) if part)


def _flattened(messages: Sequence[Message], budget: int, encoding: str | None) -> list[Message]:
    enc = get_encoding(encoding)
    text = serialize_transcript(messages)
    ids = enc.encode_ordinary(text)
    keep = max(0, budget - 64)
    while True:
        head = enc.decode_bytes(ids[:keep]).decode("utf-8", errors="ignore")
        message: Message = {"role": "user", "content": f"{head}\n{truncation_marker(len(ids))}"}
        if keep == 0 or sum(message_costs([message], encoding)) <= budget:
            return [message]
        keep = keep * 4 // 5


def _strings(value: Any) -> list[str]:
    found: list[str] = []

    def collect(text: str) -> str:
        found.append(text)
        return text

    _map_strings(value, collect)
    return found


#: Keys whose string values are what a message says; ids, names and types stay whole.
_CUTTABLE: Final = frozenset({"content", "text", "thinking", "input"})


def _map_strings(value: Any, change: Callable[[str], str], key: str = "content") -> Any:
    """`value` with `change` applied to the strings a transcript shows as message text;
    containers are copied only when something in them changed."""
    if isinstance(value, str):
        return change(value) if key in _CUTTABLE else value
    if isinstance(value, dict):
        inside = key == "input"  # every string of a tool's input is its content
        items = {k: _map_strings(v, change, key if inside else k) for k, v in value.items()}
        return value if all(items[k] is value[k] for k in value) else items
    if isinstance(value, list):
        mapped = [_map_strings(v, change, key) for v in value]
        return value if all(a is b for a, b in zip(mapped, value, strict=True)) else mapped
    return value
