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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final

import regex

from .messages import (
    SUMMARY_KEY,
    SUMMARY_PREFIX,
    Message,
    is_summary_message,
    tool_result_ids,
    tool_use_ids,
)
from .preview import truncation_marker
from .summarizers.prompt import serialize_message, serialize_transcript
from .tokens import (
    DEFAULT_ENCODING,
    IMAGE_TOKENS,
    compact_json,
    count_text_tokens,
    get_encoding,
)

__all__ = [
    "Chunk",
    "chunk_messages",
    "cut_to_fit",
    "fits",
    "fits_costed",
    "message_costs",
    "tool_units",
]

#: Tokens added to each message's own count: the blank line between messages and the
#: few tokens a join can cost at a boundary.
_SEPARATOR: Final = 2
#: Strings of fewer tokens are never cut: a marker would save little.
_MIN_CUT: Final = 16
_CUT_ATTEMPTS: Final = 8
_NUMBER: Final = 999_999
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


def message_costs(
    messages: Sequence[Message],
    encoding: str | None = None,
    counts: Sequence[int] | None = None,
) -> list[int]:
    """The transcript tokens of each message (numbered with a six-digit number: a bound).

    `counts` (the messages' token counts, e.g. cached): a message is costed from its count
    without encoding its texts again (`_costed`: the same figure); only the transcript's
    own text (headers, the tool call and result labels) and the few chunks at each
    junction are encoded.
    """
    encode = get_encoding(encoding).encode_ordinary
    if counts is None:
        return [len(encode(serialize_message(_NUMBER, m))) + _SEPARATOR for m in messages]
    name = encoding or DEFAULT_ENCODING
    costs: list[int] = []
    for message, count in zip(messages, counts, strict=True):
        cost = _plain_cost(message, count, name)
        if cost is None:
            layout = _layout(message)
            if layout is None:
                cost = len(encode(serialize_message(_NUMBER, message)))
            else:
                cost = _costed(layout, count, name)
        costs.append(cost + _SEPARATOR)
    return costs


def _plain_cost(message: Message, count: int, name: str) -> int | None:
    """`_costed` for the commonest message, one text after its header, when a chunk starts
    at the text (`_opens`): the header's tokens and the count. None for any other."""
    content = message.get("content")
    if type(content) is list and len(content) == 1 and type(content[0]) is dict:
        block = content[0]
        content = block.get("text") if block.get("type") == "text" else None
    if type(content) is not str or not content or SUMMARY_KEY in message:
        return None
    first = content[0]
    if first.isspace() or first == "/" or content.startswith(SUMMARY_PREFIX):
        return None
    return _tokens(f"[{_NUMBER}] {message.get('role', '?')}:\n", name) + count


#: A piece of a message's transcript that its token count holds: `text[start:end]` is what
#: the transcript shows of `text`, whose own tokens are part of the count.
_Piece = tuple[str, int, int]
_Segment = str | _Piece


@dataclass
class _Layout:
    """A message's transcript as new text (str) and counted pieces, in order; `hidden`:
    tokens of the count the transcript does not show (an image's estimate)."""

    segments: list[_Segment]
    hidden: int = 0


#: Positions where tiktoken's pre-tokenizer (o200k_base and cl100k_base alike) starts a
#: chunk whatever comes before and after the two characters around them: after a letter
#: that no letter, mark or apostrophe follows (a word ends there), before a space that
#: follows a non-space, and after a newline that a non-space other than "/" follows.
_CUT: Final = r"(?<=\p{L})(?=[^\p{L}\p{M}'])|(?<=\S)(?= )|(?<=\n)(?=[^\s/])"
_FIRST_CUT: Final = regex.compile(_CUT)
_LAST_CUT: Final = regex.compile(f"(?r){_CUT}")
#: Strings this short are counted through a cache: the same words start and end messages.
_SHORT: Final = 48


def _costed(layout: _Layout, count: int, name: str) -> int:
    """Tokens of the transcript of `layout`, given `count` (the tokens of its pieces plus
    `hidden`): exact.

    tiktoken encodes each chunk of its pre-tokenizer on its own, so a text cut where a chunk
    starts whatever surrounds it (`_CUT`) has the tokens of its parts. Each piece is cut at
    the first and the last such position inside it: the part in between has the same tokens
    alone and in the transcript (the count less the piece's head and tail), and only the
    text from one piece's last cut to the next piece's first cut (new text included) is
    encoded, besides each head and tail alone.
    """
    total = count - layout.hidden
    window: list[str] = []
    owed: str | None = None  # a piece's tail, not yet taken off: all the window holds
    for segment in layout.segments:
        if owed is not None:
            total -= _tokens(owed, name)
            owed = None
        if isinstance(segment, str):
            window.append(segment)
            continue
        text, start, end = segment
        if not start and window and _opens(window[-1], text):
            total += _tokens("".join(window), name)  # a cut at the junction: see _opens
            window = []
        cut = _first_cut(text, start, end)
        if cut < 0:  # no cut inside: the whole piece is part of the window
            window.append(text[start:end])
            total -= _tokens(text, name)
            continue
        back = _last_cut(text, cut, end)
        if window or start:
            window.append(text[start:cut])
            total += _tokens("".join(window), name) - _tokens(text[:cut], name)
        window = [text[back:end]]
        if end == len(text):
            owed = window[0]
        else:
            total -= _tokens(text[back:], name)
    if owed is not None:  # the window is the last piece's tail alone: the two cancel out
        return total
    return total + _tokens("".join(window), name)


def _opens(before: str, text: str) -> bool:
    """Whether a chunk starts at `text` after `before` whatever precedes: after a newline,
    before a non-space other than "/" (`_CUT`)."""
    return before.endswith("\n") and bool(text) and not text[0].isspace() and text[0] != "/"


def _first_cut(text: str, start: int, end: int) -> int:
    """The first `_CUT` inside `text[start:end]` (a space after a non-space, as a rule), or
    -1 when there is none."""
    space = text.find(" ", start + 1, end)
    if space > 0 and not text[space - 1].isspace():
        return space
    found = _FIRST_CUT.search(text, start + 1, end) if end - start > 1 else None
    return found.start() if found is not None else -1


def _last_cut(text: str, cut: int, end: int) -> int:
    """The last `_CUT` inside `text[:end]` at or after `cut` (which is one)."""
    space = text.rfind(" ", cut, end)
    if space > cut and not text[space - 1].isspace():
        return space
    found = _LAST_CUT.search(text, cut, end)
    return found.start() if found is not None else cut


def _tokens(text: str, name: str) -> int:
    if not text:
        return 0
    if len(text) <= _SHORT:
        return _short_tokens(text, name)
    return len(get_encoding(name).encode_ordinary(text))


@lru_cache(maxsize=8192)
def _short_tokens(text: str, name: str) -> int:
    return len(get_encoding(name).encode_ordinary(text))


def _layout(message: Message) -> _Layout | None:
    """The transcript of `message` (`serialize_message`, numbered `_NUMBER`) as new text and
    the pieces its token count (`message_tokens`) holds; None for the shapes where the two
    differ in ways not mirrored here (then the transcript is encoded)."""
    content = message.get("content")
    if is_summary_message(message):
        if not isinstance(content, str):
            return None
        start = len(SUMMARY_PREFIX) if content.startswith(SUMMARY_PREFIX) else 0
        body = content[start:]
        start += len(body) - len(body.lstrip())
        end = max(start, len(content.rstrip()))
        header = f"[{_NUMBER}] earlier summary (merge it into yours):\n"
        return _Layout([header, (content, start, end)])
    layout = _Layout([f"[{_NUMBER}] {message.get('role', '?')}:\n"])
    if isinstance(content, str):
        layout.segments.append((content, 0, len(content)))
        return layout
    if not isinstance(content, list):
        return layout
    first = True
    for block in content:
        if type(block) is not dict:
            if isinstance(block, Mapping):
                return None  # counted, not shown
            continue
        line = _block_layout(block, layout)
        if line is None:
            return None
        if line:
            if not first:
                layout.segments.append("\n")
            layout.segments.extend(line)
            first = False
    return layout


def _block_layout(block: dict[str, Any], layout: _Layout) -> list[_Segment] | None:
    """The segments of one block's transcript line ([] when it has none); None when not
    mirrored. Adds the block's hidden tokens to `layout`."""
    kind = block.get("type")
    if kind == "text":
        return _text_line("", block.get("text", ""))
    if kind == "thinking":
        return _text_line("(thinking) ", block.get("thinking", ""))
    if kind == "tool_use":
        name = block.get("name")
        if name is not None and not isinstance(name, str):
            return None
        arguments = compact_json(block.get("input", {}))
        named: list[_Segment] = [(name, 0, len(name))] if name else [str(name)]
        return ["(tool call ", *named, f" id={block.get('id')}) ", (arguments, 0, len(arguments))]
    if kind == "tool_result":
        status = "error" if block.get("is_error") else "result"
        line: list[_Segment] = [f"(tool {status} for id={block.get('tool_use_id')}) "]
        result = block.get("content")
        if isinstance(result, str):
            return [*line, (result, 0, len(result))]
        if not isinstance(result, list):
            return line
        return _result_line(result, line, layout)
    if kind in {"image", "document"}:
        source = block.get("source")
        if kind == "document" and isinstance(source, Mapping) and source.get("type") == "text":
            return None  # counted, not shown
        layout.hidden += IMAGE_TOKENS
        return [f"({kind} omitted)"]
    if kind == "redacted_thinking" and block.get("data"):
        return None  # counted, not shown
    return []


def _text_line(label: str, text: Any) -> list[_Segment] | None:
    if not isinstance(text, str):
        return None  # shown as str(text); counted as it, or not at all when empty
    return [label, (text, 0, len(text))]


def _result_line(items: list[Any], line: list[_Segment], layout: _Layout) -> list[_Segment] | None:
    """A tool result of blocks: its text blocks are pieces, an image is omitted."""
    first = True
    for item in items:
        if type(item) is not dict:
            if isinstance(item, Mapping):
                return None
            continue
        kind = item.get("type")
        if kind == "text":
            text = item.get("text")
            if text is not None and not isinstance(text, str):
                return None
            part: list[_Segment] = [(text, 0, len(text))] if text else []
        elif kind == "image":
            layout.hidden += IMAGE_TOKENS
            part = ["(image omitted)"]
        else:
            return None
        if not first:
            line.append("\n")
        line.extend(part)
        first = False
    return line


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
    answered: dict[str, int] = {}
    for index, message in enumerate(messages):
        for tool_id in tool_result_ids(message):
            answered.setdefault(tool_id, index)
    units: list[range] = []
    start = end = 0
    for index, message in enumerate(messages):
        if index > end:
            units.append(range(start, end + 1))
            start = index
        results = (answered.get(tool_id, index) for tool_id in tool_use_ids(message))
        end = max(end, index, *results)
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
        members = [messages[i] for i in unit]
        cost = sum(costs[i] for i in unit)
        alone = summaries_alone and len(members) == 1 and is_summary_message(members[0])
        was_cut = cost > limit
        if was_cut:
            members = cut_to_fit(members, limit - _SEPARATOR, encoding)
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
