"""File folding (docs/behaviour.md#file-outlines): outlines of class, interface and function names.

Each file becomes one `<system-reminder>` block::

    <system-reminder>
    Folded src/app.py (240 lines, names only)
    fn load, save L1-38
    class Store L40-180
    interface Reader L182-200
    fn main L202-240
    </system-reminder>

Classes and interfaces (and the other class-like kinds a language has: struct, enum, trait,
impl, record) are one line each with their line range; their bodies are never shown, so a
class's methods are not listed. Runs of function names share a line (see
`outline.outline_lines`). Files are parsed with tree-sitter, chosen by extension (Python,
JavaScript, TypeScript/TSX, Go, Rust, Java, C, C++, C#, Ruby, PHP); other files get a regex
outline of definition lines (Markdown: its headings) or, failing that, their first lines.

The whole output is held to `policy.fold_max_tokens` (see `budget`): counted once; when over,
a seeded random batch of outline lines is dropped in one go and the result counted once more.
`fold_views` folds the files a summary shows (docs/behaviour.md#file-outlines), each on its own
first.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidFilesError, Problem
from ..policy import Policy
from ..tokens import count_text_tokens_each
from .budget import TokenMeter, plan_drops
from .languages import LANGUAGES, LanguageSpec, language_for_path
from .outline import Entry, outline_entries, outline_lines

__all__ = [
    "LANGUAGES",
    "FoldResult",
    "LanguageSpec",
    "SourceFile",
    "fold",
    "fold_file",
    "fold_files",
    "fold_views",
    "language_for_path",
]


_REMINDER_TAG = re.compile(r"<(/?\s*system-reminder)", re.IGNORECASE)


@dataclass(frozen=True)
class SourceFile:
    """A file to fold; `first_line` is the file line number of `source`'s first line."""

    path: str
    source: str
    first_line: int = 1


FileInput = Mapping[str, str] | Iterable[tuple[str, str] | SourceFile]


@dataclass(frozen=True)
class FoldResult:
    """The folded text and how it was made to fit the budget.

    `tokens` is exact after a drop; otherwise it is the sum of the output's lines counted
    separately, which is never below the exact count and almost always equal to it.
    """

    text: str
    tokens: int
    budget: int
    drop_ratio: float
    batch_size: int
    lines: int
    dropped_lines: int
    files: int
    tiktoken_passes: int


def fold_file(path: str, source: str, *, policy: Policy | None = None, first_line: int = 1) -> str:
    """The folded outline of one file, in its `<system-reminder>` block.

    Raises InvalidFilesError when `path` or `source` is not a string.
    """
    return fold([SourceFile(path, source, first_line)], policy=policy).text


def fold_files(files: FileInput, *, policy: Policy | None = None) -> str:
    """The folded outlines of several files (a mapping or (path, source) pairs).

    Raises InvalidFilesError naming every item that is not a path with source text.
    """
    return fold(files, policy=policy).text


def fold(files: FileInput, *, policy: Policy | None = None) -> FoldResult:
    """Fold `files` within `policy.fold_max_tokens`, with at most two tiktoken passes."""
    policy = policy or Policy()
    folded = [_FoldedFile.of(item, policy) for item in _source_files(files)]
    meter = TokenMeter(policy.encoding)
    fixed_pieces = [piece for file in folded for piece in file.fixed_pieces()]
    line_pieces = [f"{line}\n" for file in folded for line in file.lines]
    counts = meter.count(fixed_pieces + line_pieces)
    fixed_tokens = sum(counts[: len(fixed_pieces)])
    line_tokens = counts[len(fixed_pieces) :]
    plan = plan_drops(line_tokens, fixed_tokens, policy.fold_max_tokens, policy.fold_seed)
    text = _render(folded, plan.drop)
    tokens = fixed_tokens + sum(line_tokens)
    if plan.drop:
        tokens = meter.count([text])[0]
    return FoldResult(
        text=text,
        tokens=tokens,
        budget=policy.fold_max_tokens,
        drop_ratio=plan.drop_ratio,
        batch_size=plan.batch_size,
        lines=len(line_pieces),
        dropped_lines=len(plan.drop),
        files=len(folded),
        tiktoken_passes=meter.passes,
    )


def _source_files(files: Any) -> list[SourceFile]:
    """`files` as SourceFiles; InvalidFilesError names every item that is not one."""
    if isinstance(files, Mapping):
        items: list[Any] = list(files.items())
    elif isinstance(files, Iterable) and not isinstance(files, str | bytes):
        items = list(files)
    else:
        raise InvalidFilesError([Problem("files", "must be a mapping or a list of files")])
    result: list[SourceFile] = []
    problems: list[Problem] = []
    for index, item in enumerate(items):
        if not isinstance(item, SourceFile):
            if not isinstance(item, tuple | list) or len(item) != 2:
                problems.append(Problem(f"files[{index}]", "must be a (path, source) pair"))
                continue
            path, source = item
            item = SourceFile(os.fspath(path) if isinstance(path, os.PathLike) else path, source)
        problems.extend(_file_problems(f"files[{index}]", item))
        result.append(item)
    if problems:
        raise InvalidFilesError(problems)
    return result


def _file_problems(path: str, file: SourceFile) -> Iterator[Problem]:
    fields: dict[str, Any] = vars(file)  # the annotations are not checked at run time
    if not isinstance(fields["path"], str) or not fields["path"]:
        yield Problem(f"{path}.path", "must be a non-empty string")
    if not isinstance(fields["source"], str):
        yield Problem(f"{path}.source", "must be a string")
    first_line = fields["first_line"]
    if not isinstance(first_line, int) or isinstance(first_line, bool) or first_line < 1:
        yield Problem(f"{path}.first_line", "must be a positive integer")


@dataclass(frozen=True)
class _FoldedFile:
    header: str
    lines: list[str]

    @classmethod
    def of(cls, file: SourceFile, policy: Policy) -> _FoldedFile:
        entries = outline_entries(file.path, file.source, first_line=file.first_line)
        lines = outline_lines(
            entries,
            merge_functions=policy.fold_merge_functions,
            max_line_span=policy.fold_max_line_span,
        )
        header = _header(file, _describe(file.path, entries))
        return cls(_neutralize(header), [_neutralize(line) for line in lines])

    def fixed_pieces(self) -> list[str]:
        return [f"<system-reminder>\n{self.header}\n", "</system-reminder>\n"]


def _describe(path: str, entries: list[Entry]) -> str:
    if entries and all(entry.kind == "excerpt" for entry in entries):
        return "first lines only"
    if path.lower().endswith((".md", ".markdown")):
        return "headings only"
    return "names only"


def _header(file: SourceFile, description: str) -> str:
    path = " ".join(file.path.split())  # one line, whatever the path holds
    count = file.source.count("\n") + (0 if file.source.endswith("\n") else 1)
    if not file.source:
        count = 0
    if file.first_line == 1:
        extent = f"{count} lines"
    else:
        extent = f"lines {file.first_line}-{file.first_line + max(count, 1) - 1}"
    return f"Folded {path} ({extent}, {description})"


def _neutralize(text: str) -> str:
    """Paths, headings and excerpts are untrusted: they must not open or close a block."""
    return _REMINDER_TAG.sub(r"&lt;\1", text) if "<" in text else text


def _render(files: list[_FoldedFile], drop: frozenset[int]) -> str:
    blocks: list[str] = []
    index = 0
    for file in files:
        kept: list[str] = []
        for line in file.lines:
            if index not in drop:
                kept.append(line)
            index += 1
        omitted = len(file.lines) - len(kept)
        if omitted:
            kept.append(f"({omitted} of {len(file.lines)} lines omitted to fit the fold budget)")
        body = "\n".join([file.header, *kept])
        blocks.append(f"<system-reminder>\n{body}\n</system-reminder>")
    return "\n".join(blocks)


# The files of a summary ---------------------------------------------------------------------


@dataclass
class _Counted:
    """One file's outline, the tokens of its pieces, and its own fold's text and tokens."""

    folded: _FoldedFile
    fixed: int
    lines: list[int]
    text: str = ""
    tokens: int = 0


def fold_views(
    files: Sequence[SourceFile], policy: Policy, source_tokens: Sequence[int | None] | None = None
) -> str:
    """The folded outlines of a summary's files; "" when none is kept.

    Files are taken newest first (`files` is in viewing order), each folded on its own, as
    `fold([file])` would; an outline no smaller than its source is left out. Files are taken
    until the kept outlines exceed `policy.fold_max_tokens` (the file that crosses it
    included), so a long history's older views are never parsed once the budget is spent;
    the kept ones, in viewing order, are joined when within the budget, else folded
    together, as `fold(kept)` would. Each outline is made once and each piece counted once:
    the joint fold reuses the per-file counts, and only a text that lost lines to the
    budget is counted again. `source_tokens` gives each file's source tokens when they are
    known already (None: count that source).
    """
    known = list(source_tokens) if source_tokens is not None else [None] * len(files)
    chosen = [(f, k) for f, k in zip(files, known, strict=True) if f.source.strip()]
    meter = TokenMeter(policy.encoding)
    kept: list[_Counted] = []
    total = 0
    for file, source_total in reversed(chosen):
        if total > policy.fold_max_tokens:
            break
        item = _count_pieces([_FoldedFile.of(file, policy)], meter)[0]
        _fold_each([item], policy, meter)
        if source_total is None:
            source_total = count_text_tokens_each([file.source], policy.encoding)[0]
        if item.tokens < source_total:
            kept.append(item)
            total += item.tokens
    kept.reverse()
    if total <= policy.fold_max_tokens:
        return "\n".join(c.text for c in kept)
    lines = [tokens for c in kept for tokens in c.lines]
    fixed = sum(c.fixed for c in kept)
    plan = plan_drops(lines, fixed, policy.fold_max_tokens, policy.fold_seed)
    return _render([c.folded for c in kept], plan.drop)


def _count_pieces(folded: list[_FoldedFile], meter: TokenMeter) -> list[_Counted]:
    """Every header, closing tag and outline line of every file, counted in one pass."""
    pieces: list[str] = []
    spans: list[tuple[int, int, int]] = []  # (first piece, fixed pieces, line pieces)
    for file in folded:
        fixed = file.fixed_pieces()
        spans.append((len(pieces), len(fixed), len(file.lines)))
        pieces += fixed + [f"{line}\n" for line in file.lines]
    counts = meter.count(pieces)
    counted = []
    for file, (start, fixed_count, line_count) in zip(folded, spans, strict=True):
        middle = start + fixed_count
        lines = counts[middle : middle + line_count]
        counted.append(_Counted(file, sum(counts[start:middle]), lines))
    return counted


def _fold_each(counted: list[_Counted], policy: Policy, meter: TokenMeter) -> None:
    """Each file's own fold; the ones that lost lines to the budget are counted again."""
    over: list[_Counted] = []
    for item in counted:
        plan = plan_drops(item.lines, item.fixed, policy.fold_max_tokens, policy.fold_seed)
        item.text = _render([item.folded], plan.drop)
        item.tokens = item.fixed + sum(item.lines)
        if plan.drop:
            over.append(item)
    if over:
        for item, tokens in zip(over, meter.count([i.text for i in over]), strict=True):
            item.tokens = tokens
