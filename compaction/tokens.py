"""Token counting with tiktoken, the engine's single source of counts
(docs/behaviour.md#token-counting).

The vocabularies come from the `bpe-openai` wheel (gzipped official files), are unpacked
once into a cache folder and loaded through `tiktoken.load.load_tiktoken_bpe` with
tiktoken's own expected hashes, so no network is needed and integrity is still checked.
The folder is the system temp dir's `ctxweb-tiktoken` unless `configure(tiktoken_dir=...)`
names another one: the engine reads no environment variable or application setting.

Counting goes one piece at a time, never through a thread pool (tiktoken holds the GIL; on a
small shared machine a pool's start-up and hand-offs cost more than they save, bench/tokens.py
measures both), and through `text_counter`: bpe-openai's Rust counter, which gives tiktoken's
`encode_ordinary` figure without building the token list (faster; tests compare the two on
generated text). tiktoken stays the encoder: it cuts and decodes, and counts what bpe-openai
cannot take (lone surrogates) or everything when `configure(fast_counting=False)` says so.
"""

from __future__ import annotations

import gzip
import logging
import os
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Final, cast

import regex
import tiktoken
import tiktoken.load

from .errors import InvalidMessagesError, Problem, UnknownEncodingError
from .json_text import compact_json

__all__ = [
    "DEFAULT_ENCODING",
    "ENCODINGS",
    "IMAGE_TOKENS",
    "compact_json",
    "configure",
    "count_prefixed",
    "count_text_tokens",
    "count_text_tokens_each",
    "count_tokens",
    "get_encoding",
    "message_token_counts",
    "message_tokens",
    "text_counter",
]

logger = logging.getLogger(__name__)

DEFAULT_ENCODING: Final = "o200k_base"


@dataclass(frozen=True)
class _EncodingSource:
    """What tiktoken_ext/openai_public.py builds an encoding from, minus the download."""

    file_name: str
    expected_hash: str
    pat_str: str
    special_tokens: Mapping[str, int]


# Copied from tiktoken_ext/openai_public.py (tests check they still match): calling its
# constructors would need their module-global loader patched, which other threads see.
_O200K_PATTERN: Final = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_CL100K_PATTERN: Final = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""  # noqa: E501

#: Encodings shipped by bpe-openai, with what tiktoken builds each from.
ENCODINGS: Final[Mapping[str, _EncodingSource]] = {
    "o200k_base": _EncodingSource(
        file_name="o200k_base.tiktoken",
        expected_hash="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        pat_str=_O200K_PATTERN,
        special_tokens={"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    ),
    "cl100k_base": _EncodingSource(
        file_name="cl100k_base.tiktoken",
        expected_hash="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        pat_str=_CL100K_PATTERN,
        special_tokens={
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    ),
}
#: Images and binary documents are counted at this fixed estimate: their pixels are not
#: known here, and ~1,600 tokens is what Anthropic bills for a full-size image.
IMAGE_TOKENS: Final = 1600


_configured_dir: Path | None = None
_fast_counting = True


def configure(
    *, tiktoken_dir: str | os.PathLike[str] | None = None, fast_counting: bool = True
) -> None:
    """Set where the vocabularies are unpacked (None or "": the default folder) and whether
    counts come from bpe-openai's counter (`text_counter`; False: from tiktoken alone, slower,
    and without the counter's tables in memory: bench/tokens.py prints what they take).

    An application calls this once at start-up, before the first count; encodings already
    loaded in this process stay loaded.
    """
    global _configured_dir, _fast_counting
    _configured_dir = Path(tiktoken_dir) if tiktoken_dir else None
    if fast_counting != _fast_counting:
        _fast_counting = fast_counting
        _counter.cache_clear()


def _vocabulary_cache_dir() -> Path:
    if _configured_dir is not None:
        return _configured_dir
    return Path(tempfile.gettempdir()) / "ctxweb-tiktoken"


def _unpacked_vocabulary(file_name: str) -> str:
    """The path of `file_name` unpacked from the bpe-openai wheel, unpacking it once."""
    target = _vocabulary_cache_dir() / file_name
    if not target.exists():
        packed = resources.files("bpe_openai.data").joinpath(f"{file_name}.gz")
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        partial.write_bytes(gzip.decompress(packed.read_bytes()))
        os.replace(partial, target)  # atomic: concurrent processes never see half a file
    return str(target)


def _offline_load(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
    file_name = url.rsplit("/", 1)[-1]
    return tiktoken.load.load_tiktoken_bpe(_unpacked_vocabulary(file_name), expected_hash)


@cache
def get_encoding(name: str | None = None) -> tiktoken.Encoding:
    """The tiktoken encoding `name` (default o200k_base), loaded offline and hash-checked."""
    name = name or DEFAULT_ENCODING
    source = ENCODINGS.get(name)
    if source is None:
        known = ", ".join(sorted(ENCODINGS))
        raise UnknownEncodingError(f"unknown encoding {name!r}; known: {known}")
    return tiktoken.Encoding(
        name=name,
        pat_str=source.pat_str,
        mergeable_ranks=_offline_load(source.file_name, source.expected_hash),
        special_tokens=dict(source.special_tokens),
    )


_Count = Callable[[str], int]


def text_counter(encoding: str | None = None) -> _Count:
    """A function giving the tokens of one string, the figure `len(encode_ordinary(text))`
    gives (special-token text counted as ordinary text), without building the token list."""
    return _counter(encoding or DEFAULT_ENCODING)


@cache
def _counter(name: str) -> _Count:
    encode = get_encoding(name).encode_ordinary  # also rejects an unknown name
    fast = _fast_count(name) if _fast_counting else None
    if fast is None:
        return lambda text: len(encode(text))

    def count(text: str) -> int:
        try:
            return fast(text)
        except UnicodeEncodeError:  # lone surrogates: tiktoken replaces them, then encodes
            return len(encode(text))

    return count


def _fast_count(name: str) -> _Count | None:
    """bpe-openai's counter for `name`, or None when this bpe-openai has none."""
    try:
        from bpe_openai._bindings import tokenizer_for_encoding
    except ImportError:  # pragma: no cover - a bpe-openai without its Rust bindings
        return None
    try:
        return cast(_Count, tokenizer_for_encoding(name).count)
    except (ValueError, AttributeError):  # pragma: no cover - an encoding it does not ship
        logger.warning("bpe-openai cannot count %s; tiktoken counts it", name)
        return None


def count_text_tokens(text: str, encoding: str | None = None) -> int:
    """Tokens of one string (special-token text is counted as ordinary text)."""
    if not text:
        return 0
    return text_counter(encoding)(text)


def count_text_tokens_each(texts: Iterable[str], encoding: str | None = None) -> list[int]:
    """Tokens of each string, in order: one plain loop, no thread pool (module doc)."""
    count = text_counter(encoding)
    return [count(text) if text else 0 for text in texts]


#: Chunks of a text searched for a boundary its own split shares with the joined split.
_JOIN_CHUNKS: Final = 24


@cache
def _splitter(name: str) -> regex.Pattern[str]:
    """The encoding's pre-tokenizer: the regex that splits text into chunks before BPE."""
    return regex.compile(ENCODINGS[name].pat_str)


def count_prefixed(
    prefix: str, text: str, text_tokens: int, encoding: str | None = None, *, settled: int = 0
) -> int:
    """Tokens of `prefix + text`, given `text_tokens` (the tokens of `text`): exact.

    tiktoken splits a text into chunks left to right (its pattern looks ahead, never
    behind) and encodes each chunk on its own. From the first position of `text` where its
    own split and the split of `prefix + text` both start a chunk, the two splits are the
    same, so only the chunks before it are encoded. `settled`: a position of `prefix`, after
    a letter, where a chunk starts whatever follows (the split before it is then counted
    once per distinct head). When no shared position comes within a few chunks, the whole
    joined text is encoded.
    """
    name = encoding or DEFAULT_ENCODING
    count = text_counter(name)
    if not prefix:
        return text_tokens
    joined = prefix + text
    if not text:
        return count(prefix)
    split = _splitter(name)
    offset = len(prefix)
    tokens = _head_tokens(prefix[:settled], name) if settled else 0
    own = split.finditer(text)
    own_start = own_before = 0  # where the text's next own chunk starts, tokens before it
    end = settled
    for index, match in enumerate(split.finditer(joined, settled)):
        start = match.start()
        if start != end or index > _JOIN_CHUNKS:
            break  # a gap (never seen), or too far
        if start >= offset:
            while own_start < start - offset:
                chunk = next(own, None)
                if chunk is None or chunk.start() != own_start:
                    return count(joined)
                own_before += count(chunk.group())
                own_start = chunk.end()
            if own_start == start - offset:
                return tokens + text_tokens - own_before
        tokens += count(match.group())
        end = match.end()
    return count(joined)


@lru_cache(maxsize=256)
def _head_tokens(head: str, name: str) -> int:
    return text_counter(name)(head)


def message_tokens(message: Mapping[str, Any], encoding: str | None = None) -> int:
    """Tokens of one message's content: the count the web app caches per message.

    Raises InvalidMessagesError when `message` is not a mapping. Counting is otherwise
    lenient: unknown block types are skipped with a warning (docs/behaviour.md#token-counting).
    """
    return _message_count(message, text_counter(encoding), "message")


def message_token_counts(
    messages: Sequence[Mapping[str, Any]], encoding: str | None = None
) -> list[int]:
    """Tokens of each message, in order.

    One count per piece (module doc). Raises InvalidMessagesError when `messages` is not a
    list of mappings.
    """
    _check_list(messages)
    count = _remembering(text_counter(encoding))
    return [
        _message_count(message, count, "messages", index) for index, message in enumerate(messages)
    ]


def count_tokens(messages: Sequence[Mapping[str, Any]], *, encoding: str | None = None) -> int:
    """Total tokens of all messages' blocks (docs/behaviour.md#token-counting); an empty list is 0.

    Raises InvalidMessagesError when `messages` is not a list of mappings.
    """
    _check_list(messages)
    if not messages:
        return 0
    return sum(message_token_counts(messages, encoding))


def _check_list(messages: Any) -> None:
    if not isinstance(messages, Sequence) or isinstance(messages, str | bytes):
        raise InvalidMessagesError([Problem("messages", "must be a list of messages")])


#: Texts this long are counted once per call of `message_token_counts`: a file read again,
#: a tool result repeated, come back as the same text.
_REPEAT_MIN: Final = 1024


def _remembering(count: _Count) -> _Count:
    """`count`, each long text counted once (`_REPEAT_MIN`)."""
    seen: dict[str, int] = {}

    def remembered(text: str) -> int:
        if len(text) < _REPEAT_MIN:
            return count(text)
        tokens = seen.get(text)
        if tokens is None:
            tokens = seen[text] = count(text)
        return tokens

    return remembered


def _message_count(message: Any, count: _Count, path: str, index: int | None = None) -> int:
    """Tokens of one message; the common shapes (string content, plain dict blocks) take the
    shortest path, since this runs for every message of every history counted."""
    if type(message) is not dict and not isinstance(message, Mapping):
        where = path if index is None else f"{path}[{index}]"
        raise InvalidMessagesError([Problem(where, "must be an object with role and content")])
    content = message.get("content")
    if isinstance(content, str):
        return count(content) if content else 0
    if not isinstance(content, list):
        return 0
    return _blocks_count(content, count)


def _blocks_count(blocks: Iterable[Any], count: _Count) -> int:
    total = 0
    for block in blocks:
        is_mapping = type(block) is dict or isinstance(block, Mapping)
        kind = block.get("type") if is_mapping else None
        if kind == "text":
            text = block.get("text")
            total += count(text if isinstance(text, str) else str(text)) if text else 0
        elif kind == "tool_result":
            content = block.get("content")
            if isinstance(content, str):
                total += count(content) if content else 0
            elif isinstance(content, list):
                total += _blocks_count(content, count)
        elif kind == "tool_use":  # `_block_pieces`' two, without the generator
            name = str(block.get("name") or "")
            arguments = compact_json(block.get("input", {}))
            total += (count(name) if name else 0) + count(arguments)
        else:
            for piece in _block_pieces((block,)):
                total += piece if isinstance(piece, int) else (count(piece) if piece else 0)
    return total


def _message_pieces(message: Any, path: str) -> tuple[list[str], int]:
    """The texts to encode for a message, and the fixed-estimate tokens it also carries
    (what `_message_count` counts; bench/tokens.py encodes these pieces as the baseline)."""
    if not isinstance(message, Mapping):
        raise InvalidMessagesError([Problem(path, "must be an object with role and content")])
    content = message.get("content")
    if isinstance(content, str):
        return ([content] if content else []), 0
    pieces: list[str] = []
    fixed = 0
    if isinstance(content, list):
        for piece in _block_pieces(content):
            if isinstance(piece, int):
                fixed += piece
            else:
                pieces.append(piece)
    return pieces, fixed


def _block_pieces(blocks: Iterable[Any]) -> Iterator[str | int]:
    for block in blocks:
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind == "text":
            yield str(block.get("text") or "")
        elif kind == "tool_use":
            yield str(block.get("name") or "")
            yield compact_json(block.get("input", {}))
        elif kind == "tool_result":
            content = block.get("content")
            if isinstance(content, str):
                yield content
            elif isinstance(content, list):
                yield from _block_pieces(content)
        elif kind == "thinking":
            yield str(block.get("thinking") or "")
        elif kind == "redacted_thinking":
            yield str(block.get("data") or "")
        elif kind == "document" and _is_text_source(block):
            yield str(block["source"].get("data") or "")
        elif kind in {"image", "document"}:
            yield IMAGE_TOKENS
        else:
            logger.warning("skipping unknown content block type %r in token count", kind)


def _is_text_source(block: Mapping[str, Any]) -> bool:
    source = block.get("source")
    return isinstance(source, Mapping) and source.get("type") == "text"
