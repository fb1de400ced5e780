"""The one registry of import formats: each importer declares itself here, everything else reads it.

An importer module declares an `ImportFormat` (its name, labels, aliases, how its content is
recognised and its reader) and `importers/builtin.py` registers the built-in ones in the order
every list shows them; code outside the package may `register` a format of its own. `parse`,
`detect`, the upload form, the API and `Session.SourceFormat` read the registry, so a new format
is one new module (docs/architecture.md, "How to add...").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from .source import Source
from .types import ImportedSession

__all__ = [
    "DocumentReader",
    "ImportFormat",
    "LineReader",
    "format_names",
    "get_format",
    "import_formats",
    "register",
    "unregister",
]


class LineReader(Protocol):
    """Reads a JSON-lines transcript as it streams from an opened source."""

    def __call__(self, source: Source, *, subagents: bool) -> ImportedSession: ...


#: Reads a whole JSON document (already parsed) named `name`.
DocumentReader = Callable[[Any, str], ImportedSession]


@dataclass(frozen=True)
class ImportFormat:
    """One import format, as its importer module declares it.

    Exactly one of `read_lines` (a JSON-lines format, recognised line by line by `detect`
    on each parsed line) and `read_document` (a JSON document, recognised by `detect` on the
    parsed document) is given. `guess_head` scores the beginning of a document too long to
    parse (0: not this format; the highest score wins, as Pygments' `analyse_text`). Formats
    are asked in `rank` order (lower first, then registration order): the more specific first.
    """

    name: str
    label: str  # how a stored session names its source (Session.SourceFormat)
    file_label: str  # how the upload form offers it
    detect: Callable[[Any], bool]
    read_lines: LineReader | None = None
    read_document: DocumentReader | None = None
    guess_head: Callable[[str], int] | None = None
    aliases: tuple[str, ...] = ()
    rank: int = 50

    def __post_init__(self) -> None:
        if (self.read_lines is None) == (self.read_document is None):
            raise ValueError(f"{self.name}: give exactly one of read_lines and read_document")

    @property
    def is_lines(self) -> bool:
        """Whether the format is JSON lines (streamed) rather than one JSON document."""
        return self.read_lines is not None


_formats: dict[str, ImportFormat] = {}
_aliases: dict[str, str] = {}


def _spelling(name: str) -> str:
    return name.strip().lower().replace(" ", "_")


def register(fmt: ImportFormat) -> ImportFormat:
    """Add `fmt` to the registry (after the ones registered before); returns it.

    Raises ValueError when its name or one of its aliases already names a format.
    """
    spellings = {_spelling(fmt.name), *(_spelling(alias) for alias in fmt.aliases)}
    taken = sorted(spelling for spelling in spellings if spelling in _aliases)
    if taken:
        raise ValueError(f"import format {fmt.name!r}: already registered: {', '.join(taken)}")
    _formats[fmt.name] = fmt
    _aliases.update(dict.fromkeys(spellings, fmt.name))
    return fmt


def unregister(name: str) -> None:
    """Remove the format named `name` and its aliases (a test's own format, say)."""
    _formats.pop(name, None)
    for spelling in [key for key, value in _aliases.items() if value == name]:
        del _aliases[spelling]


def import_formats() -> tuple[ImportFormat, ...]:
    """Every registered format, in registration order."""
    return tuple(_formats.values())


def format_names() -> tuple[str, ...]:
    """The canonical names of every registered format, in registration order."""
    return tuple(_formats)


def get_format(name: str) -> ImportFormat | None:
    """The format `name` (its name or an alias, any case, spaces as `_`), None when unknown."""
    canonical = _aliases.get(_spelling(name))
    return None if canonical is None else _formats[canonical]


def ranked(*, lines: bool) -> list[ImportFormat]:
    """The JSON-lines (or the document) formats in the order detection asks them."""
    chosen = [fmt for fmt in _formats.values() if fmt.is_lines == lines]
    return sorted(chosen, key=lambda fmt: fmt.rank)  # stable: registration order among equals
