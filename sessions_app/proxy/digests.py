"""Conversation identity: message digests that survive a client re-serializing its history.

A client sends the whole history again on every request. The digests of the messages the
proxy stored are compared with those of the incoming ones: stored digests that are a prefix
of the incoming ones mean "the same conversation, continued". The digest is that of the
message's canonical form (sessions_app/canonical.py, docs/behaviour.md#canonical-form): it
ignores what a client changes without changing the conversation.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, overload

from sessions_app.services.proxying.prefix_map import ROOT, chain

from ..canonical import canonical_digest, legacy_digest

__all__ = [
    "Digests",
    "RawDigests",
    "claude_code_session",
    "clear_cache",
    "conversation_key",
    "decode_body",
    "digest",
    "digests",
    "grouped",
    "is_prefix",
    "legacy_conversation_key",
    "raw_digest",
]

_CLAUDE_SESSION: Final = re.compile(r"session_([0-9a-fA-F-]{36})")
_DECODER: Final = json.JSONDecoder()
#: The C string scanner json.loads uses (typeshed does not declare it).
_SCANSTRING: Final[Callable[[str, int], tuple[str, int]]] = json.decoder.scanstring  # type: ignore[attr-defined]
_SPACE: Final = re.compile(r"[ \t\n\r]*")
#: The top-level arrays of a conversation's messages: `messages` (Messages, Chat) and
#: `input` (Responses: items, which proxy/responses.py groups into turns).
_ARRAYS: Final = ("messages", "input")


def digest(message: Any) -> str:
    """A short, stable digest of one message (16 hex characters): its canonical digest."""
    return canonical_digest(message)


def digests(messages: Sequence[Any]) -> list[str]:
    """`digest` of each message."""
    return [digest(message) for message in messages]


def raw_digest(message: Any) -> str:
    """A digest of the message exactly as sent (one C-encoded dump, no normalizing): equal
    raw digests mean equal messages; different ones say nothing (see `Digests`)."""
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _span_hash(data: bytes | memoryview) -> str:
    """SHA-256 (hardware-accelerated on current CPUs: about twice as fast as BLAKE2 over a
    megabyte of messages), cut to 16 hex characters."""
    return hashlib.sha256(data).hexdigest()[:16]


class RawDigests(list[str]):
    """The raw digest of each message of a body, with `chains`: the running fingerprints
    of the first 0, 1, ... n of them (services/proxying/prefix_map.py `chain`, ROOT first), which
    the map compares; kept with the body's array, so a later body extending it chains only
    its new messages."""

    chains: tuple[str, ...] = ()


def decode_body(raw: bytes) -> tuple[Any, list[str] | None]:
    """The decoded JSON body, and the raw digest of each element of its top-level `messages`
    (or Responses `input`) array hashed from the bytes the client sent (None when there is
    no such array).

    One pass, as costly as `json.loads`: the top-level object is walked key by key and the
    `messages` array element by element with the C scanner, so each message's text is known
    without encoding it again. Anything unusual falls back to `json.loads` (ValueError when
    the body is not JSON)."""
    try:
        text = raw.decode("utf-8")
        # ASCII (json.dumps' default): a character is a byte, spans are hashed in place
        return _walk(text, memoryview(raw) if raw.isascii() else None)
    except (UnicodeDecodeError, ValueError, IndexError):
        return json.loads(raw), None


def _skip(text: str, index: int) -> int:
    match = _SPACE.match(text, index)
    return match.end() if match else index


def _walk(text: str, ascii: memoryview | None) -> tuple[Any, list[str] | None]:
    index = _skip(text, 0)
    if text[index] != "{":
        return json.loads(text), None
    body: dict[str, Any] = {}
    spans: list[str] | None = None
    index = _skip(text, index + 1)
    closed = text[index] == "}"
    index += closed
    while not closed:
        if text[index] != '"':
            raise ValueError("a key must be a string")
        key, index = _SCANSTRING(text, index + 1)
        index = _skip(text, index)
        if text[index] != ":":
            raise ValueError("expected ':'")
        index = _skip(text, index + 1)
        if key in _ARRAYS and text[index] == "[":
            body[key], spans, index = _array(text, index, ascii)
        elif key in _OVERHEAD:
            body[key], index = _OVERHEAD[key].value(text, index)
        else:
            body[key], index = _DECODER.raw_decode(text, index)
            spans = None if key in _ARRAYS else spans
        index = _skip(text, index)
        if text[index] not in ",}":
            raise ValueError("expected ',' or '}'")
        closed = text[index] == "}"
        index = _skip(text, index + 1)
    if index != len(text):
        raise ValueError("extra data after the body")
    return body, spans


def _array(text: str, index: int, ascii: memoryview | None) -> tuple[list[Any], RawDigests, int]:
    """The array starting at `index` ('['), each element's raw digest, the index after it.
    `ascii`: the same text as bytes, when each character is one byte.

    Elements a recent body's array began with, in the same characters (`_RECENT`), are
    taken from it, decoded and hashed then: an agent sends its history again with every
    request, so only the elements after the ones it sent last time are decoded and hashed."""
    start = index
    seen = _RECENT.longest(text, start)
    if seen is None:
        items: list[Any] = []
        hashes = RawDigests()
        hashes.chains = (ROOT,)
        index = _skip(text, index + 1)
        if text[index] == "]":
            return items, hashes, index + 1
    else:
        items, hashes = list(seen.items), RawDigests(seen.hashes)
        hashes.chains = seen.chains
        index = _skip(text, start + len(seen.text))
        if text[index] == "]":
            return items, hashes, index + 1
        if text[index] != ",":
            raise ValueError("expected ',' or ']'")
        index = _skip(text, index + 1)
    added = len(hashes)
    while True:
        item, end = _DECODER.raw_decode(text, index)
        items.append(item)
        span = ascii[index:end] if ascii is not None else text[index:end].encode("utf-8")
        hashes.append(_span_hash(span))
        index = _skip(text, end)
        if text[index] == "]":
            break
        if text[index] != ",":
            raise ValueError("expected ',' or ']'")
        index = _skip(text, index + 1)
    chains = list(hashes.chains)
    for one in hashes[added:]:
        chains.append(chain(chains[-1], [one]))
    hashes.chains = tuple(chains)
    _RECENT.keep(text, start, end, items, hashes, replacing=seen)
    return items, hashes, index + 1


@dataclass(frozen=True, slots=True)
class _Prefix:
    """A message array as a body sent it, up to the end of its last element (no ']'),
    with its elements decoded and hashed."""

    text: str
    items: tuple[Any, ...]
    hashes: tuple[str, ...]
    chains: tuple[str, ...]


class _Recent:
    """The message arrays of the last bodies read, one per conversation (a body that
    continues a kept array replaces it), within a budget of characters.

    The kept elements are handed to every later request that begins with the same
    characters: they are read, never changed (the proxy builds new messages from them)."""

    def __init__(self, entries: int, chars: int) -> None:
        self._entries = entries
        self._chars = chars
        self._kept: list[_Prefix] = []  # least recently used first
        self._lock = threading.Lock()

    def longest(self, text: str, start: int) -> _Prefix | None:
        """The longest kept array that `text` begins with at `start`."""
        with self._lock:
            kept = list(self._kept)
        best = None
        for prefix in kept:
            if (best is None or len(prefix.text) > len(best.text)) and text.startswith(
                prefix.text, start
            ):
                best = prefix
        return best

    def keep(
        self,
        text: str,
        start: int,
        end: int,
        items: list[Any],
        hashes: RawDigests,
        *,
        replacing: _Prefix | None,
    ) -> None:
        """Keep `text[start:end]` (an array of objects, up to its last element's end)."""
        if end - start > self._chars or not all(type(item) is dict for item in items):
            return  # objects only: the end of the kept text is the end of one
        prefix = _Prefix(text[start:end], tuple(items), tuple(hashes), hashes.chains)
        with self._lock:
            kept = [p for p in self._kept if p is not replacing]
            kept.append(prefix)
            total = sum(len(p.text) for p in kept)
            while len(kept) > self._entries or total > self._chars:
                total -= len(kept.pop(0).text)
            self._kept = kept

    def clear(self) -> None:
        """Forget every kept array."""
        with self._lock:
            self._kept = []


#: 16M characters: about 14 conversations of 200K tokens, 3 of 1M (their decoded
#: messages take more memory again).
_RECENT: Final = _Recent(entries=32, chars=16 * 2**20)


class _Values:
    """The last values of one top-level key a body sent (`system`, `tools`), as text and
    decoded: an agent sends the same 50-100 KB of them with every request. The same text
    again is the same object again (read, never changed): not decoded again, and what is
    computed from it can be remembered for it (services/sessions/overhead.py)."""

    #: Smaller values are decoded again.
    SMALLEST: Final = 1024

    def __init__(self, entries: int) -> None:
        self._entries = entries
        self._kept: list[tuple[str, Any]] = []  # least recently used first
        self._lock = threading.Lock()

    def value(self, text: str, index: int) -> tuple[Any, int]:
        """The value starting at `index` and the index after it."""
        with self._lock:
            kept = list(self._kept)
        for known, value in reversed(kept):
            if text.startswith(known, index):  # an object, array or string: self-delimited
                return value, index + len(known)
        value, end = _DECODER.raw_decode(text, index)
        if end - index >= self.SMALLEST and isinstance(value, dict | list | str):
            with self._lock:
                self._kept = [*self._kept, (text[index:end], value)][-self._entries :]
        return value, end

    def clear(self) -> None:
        """Forget every kept value."""
        with self._lock:
            self._kept = []


_OVERHEAD: Final = {"system": _Values(entries=8), "tools": _Values(entries=8)}


def clear_cache() -> None:
    """Forget the message arrays and values of the bodies read so far (tests)."""
    _RECENT.clear()
    for values in _OVERHEAD.values():
        values.clear()


class Digests(Sequence[str]):
    """The `digest` of each message, computed only when read (then kept), beside the cheap
    `raw` digest of each. A request whose messages were stored before is matched on the raw
    digests; only the few messages a client re-serialized differently (a moved cache
    breakpoint) are normalized and digested.

    `raw`: the raw digests `decode_body` took from the request's bytes; else each message
    is dumped once more (`raw_digest`)."""

    def __init__(
        self,
        messages: Sequence[Any],
        raw: Sequence[str] | None = None,
        *,
        function: Callable[[Any], str] = digest,
    ) -> None:
        self._messages = messages
        self._function = function
        self._known: dict[int, str] = {}
        self._legacy: Digests | None = None
        chains = getattr(raw, "chains", ())
        if raw is None or len(raw) != len(messages):
            raw, chains = [raw_digest(message) for message in messages], ()
        self.raw = list(raw)
        #: The running fingerprints of the raw digests, when the body's reading made them.
        self.chains: tuple[str, ...] = chains if len(chains) == len(self.raw) + 1 else ()

    def __len__(self) -> int:
        return len(self._messages)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if index not in self._known:
            self._known[index] = self._function(self._messages[index])
        return self._known[index]

    @property
    def legacy(self) -> Digests:
        """The same messages' digests of form 1, which proxied sessions stored before the
        canonical form (services/proxying/prefix_map.py compares a map of that form with them)."""
        if self._legacy is None:
            self._legacy = Digests(self._messages, self.raw, function=legacy_digest)
        return self._legacy


def grouped(raw: Sequence[str], sizes: Sequence[int]) -> RawDigests:
    """Raw digests of groups of consecutive elements (`sizes` of them each: a Responses turn
    of items), each the hash of its elements' raw digests."""
    found, start = RawDigests(), 0
    for size in sizes:
        found.append(_span_hash("".join(raw[start : start + size]).encode()))
        start += size
    return found


def is_prefix(stored: Sequence[str], incoming: Sequence[str]) -> bool:
    """True when `stored` is a prefix of `incoming`."""
    return len(stored) <= len(incoming) and list(incoming[: len(stored)]) == list(stored)


def conversation_key(provider: str, system: Any, first: Any) -> str:
    """The key of a conversation without a name: its provider, system prompt, first message."""
    return f"fp:{provider}:{digest({'system': system, 'first': first})}"


def legacy_conversation_key(provider: str, system: Any, first: Any) -> str:
    """The key `conversation_key` gave before the canonical form (sessions stored then)."""
    return f"fp:{provider}:{legacy_digest({'system': system, 'first': first})}"


def claude_code_session(metadata: Any) -> str | None:
    """Claude Code's session id, carried in `metadata.user_id` (`..._session_<uuid>`)."""
    if not isinstance(metadata, Mapping):
        return None
    user_id = metadata.get("user_id")
    if not isinstance(user_id, str):
        return None
    match = _CLAUDE_SESSION.search(user_id)
    if match:
        return match.group(1).lower()
    try:  # newer Claude Code versions send a JSON object as the user id
        decoded = json.loads(user_id)
    except ValueError:
        return None
    value = decoded.get("session_id") if isinstance(decoded, dict) else None
    return str(value) if isinstance(value, str) and value else None
