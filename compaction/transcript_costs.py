"""What each message of a summary request's transcript costs, in tokens
(`summarizers.prompt.serialize_message`), from its cached token count when there is one.

`message_costs` numbers each message with a six-digit number (a bound). Given the messages'
counts it costs each one exactly without encoding its texts again: tiktoken encodes each
chunk of its pre-tokenizer on its own, so a text cut where a chunk starts whatever
surrounds the cut has the tokens of its parts. Each text the count holds is cut at the first
and the last such position inside it; the part in between has the same tokens alone and in
the transcript, and only the rest (the transcript's own text and a word or so at each
junction) is encoded.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final

import regex

from .messages import SUMMARY_KEY, SUMMARY_PREFIX, Message, is_summary_message
from .summarizers.prompt import serialize_message
from .tokens import DEFAULT_ENCODING, IMAGE_TOKENS, compact_json, text_counter

__all__ = ["SEPARATOR", "message_costs"]

#: Tokens added to each message's own count: the blank line between messages and the
#: few tokens a join can cost at a boundary.
SEPARATOR: Final = 2
_NUMBER: Final = 999_999


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
    count_text = text_counter(encoding)
    if counts is None:
        return [count_text(serialize_message(_NUMBER, m)) + SEPARATOR for m in messages]
    name = encoding or DEFAULT_ENCODING
    headers: dict[str, int] = {}  # the tokens of each role's header, once per call
    costs: list[int] = []
    for message, count in zip(messages, counts, strict=True):
        cost = _plain_cost(message, count, name, headers)
        if cost is None:
            layout = _layout(message)
            if layout is None:
                cost = count_text(serialize_message(_NUMBER, message))
            else:
                cost = _costed(layout, count, name)
        costs.append(cost + SEPARATOR)
    return costs


def _header_tokens(message: Message, name: str, headers: dict[str, int]) -> int:
    """The tokens of `message`'s transcript header (`[number] role:` and a newline)."""
    role = message.get("role", "?")
    if type(role) is not str:
        return _tokens(f"[{_NUMBER}] {role}:\n", name)
    found = headers.get(role)
    if found is None:
        found = headers[role] = _tokens(f"[{_NUMBER}] {role}:\n", name)
    return found


def _plain_cost(message: Message, count: int, name: str, headers: dict[str, int]) -> int | None:
    """`_costed` for the commonest messages, one text or one tool result of text after the
    header (the same figure, without building the layout); None for any other."""
    content = message.get("content")
    if type(content) is list:
        if len(content) == 2:
            return _call_cost(message, content, count, name, headers)
        block = content[0] if len(content) == 1 else None
        if type(block) is not dict:
            return None
        kind = block.get("type")
        if kind == "tool_result":
            return _result_cost(message, block, count, name, headers)
        content = block.get("text") if kind == "text" else None
    if type(content) is not str or not content or SUMMARY_KEY in message:
        return None
    first = content[0]
    if first.isspace() or first == "/" or content.startswith(SUMMARY_PREFIX):
        return None
    # A chunk starts at the text (`_opens`): its tokens are its own.
    return _header_tokens(message, name, headers) + count


def _result_cost(
    message: Message, block: dict[str, Any], count: int, name: str, headers: dict[str, int]
) -> int | None:
    """`_plain_cost` of one tool result of text."""
    content = block.get("content")
    if type(content) is not str or len(content) <= _SHORT or SUMMARY_KEY in message:
        return None
    cut = _first_cut(content, 0, len(content))
    if cut < 0:
        return None
    status = "error" if block.get("is_error") else "result"
    label = f"(tool {status} for id={block.get('tool_use_id')}) "
    head = content[:cut]
    # The header ends with a newline and the label starts with "(": a chunk starts there.
    header = _header_tokens(message, name, headers)
    # The text's head joins the label; from its first cut on, its tokens are its own.
    return count + header + _tokens(label + head, name) - _tokens(head, name)


def _call_cost(
    message: Message,
    content: list[Any],
    count: int,
    name: str,
    headers: dict[str, int],
) -> int | None:
    """`_costed` for an assistant's text then one tool call (the same figure, without
    building the layout); None for any other pair of blocks."""
    said, call = content
    if type(said) is not dict or type(call) is not dict or SUMMARY_KEY in message:
        return None
    text, tool = said.get("text"), call.get("name")
    if said.get("type") != "text" or call.get("type") != "tool_use" or type(tool) is not str:
        return None
    if type(text) is not str or len(text) <= _SHORT or text.startswith(SUMMARY_PREFIX):
        return None
    if text[0].isspace() or text[0] == "/":
        return None  # no chunk need start at the text: the layout's way
    back = _last_cut(text, 0, len(text))
    if back <= 0:
        return None
    head = _arguments_head(call.get("input", {}))
    if not head:
        return None  # the layout's way
    # From a cut in the input on, its tokens are its own: the input ends the transcript.
    tail = text[back:]
    line = f"{tail}\n(tool call {tool} id={call.get('id')}) {head}"
    header = _header_tokens(message, name, headers)
    own = _tokens(tail, name) + _tokens(tool, name) + _tokens(head, name)
    return header + count - own + _tokens(line, name)


def _arguments_head(arguments: Any) -> str:
    """The compact JSON of a tool input up to a `_CUT` in it ("" when it has none).

    Any cut gives the same cost, so the input is not encoded whole when its first key is
    plain (printable ASCII without quote or backslash: the JSON shows it as it is) and
    holds a cut, as `{"file_path":` does.
    """
    if type(arguments) is dict and arguments:
        key = next(iter(arguments))
        if type(key) is str and _shown_as_is(key):
            start = f'{{"{key}":'
            letters = len(key) - len(key.lstrip(_ASCII_LETTERS))
            if letters and key[letters : letters + 1] != "'":
                return start[: 2 + letters]  # after a letter, before a non-letter: a cut
            cut = _first_cut(start, 0, len(start))
            if cut > 0:  # before the start's end: the same characters around it
                return start[:cut]
    encoded = compact_json(arguments)
    cut = _first_cut(encoded, 0, len(encoded))
    return encoded[:cut] if cut > 0 else ""


_ASCII_LETTERS: Final = string.ascii_letters


def _shown_as_is(key: str) -> bool:
    """Whether the JSON of `key` is `key` in quotes (nothing escaped)."""
    return key.isascii() and key.isprintable() and '"' not in key and "\\" not in key


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
        if cut < 0:  # no cut inside: the whole piece joins the window
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
    return text_counter(name)(text)


@lru_cache(maxsize=8192)
def _short_tokens(text: str, name: str) -> int:
    return text_counter(name)(text)


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
