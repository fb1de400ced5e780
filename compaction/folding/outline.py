"""Outlines: the class, interface and function names of a file, as sections and lines.

`outline_entries` walks a tree-sitter tree (or, for unknown languages, matches definition
lines with a regex) and returns the entries in source order. Outlines are cached by content
(a hash of the source, per language), so a file folded again, in the same compaction or a
later one, is not parsed again. `outline_lines` renders them in
minimal mode (docs/behaviour.md#file-outlines): a class or interface is one line with its line
range, its body never shown; runs of function names are merged onto one line with the run's line
range, and a run is broken by a class or interface and when it would span more than
`max_line_span` lines.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

from .languages import LanguageSpec, language_for_path, parser_for

if TYPE_CHECKING:
    import tree_sitter

__all__ = ["Entry", "clear_outline_cache", "outline_entries", "outline_lines"]

EntryKind = Literal["container", "function", "excerpt"]


@dataclass(frozen=True)
class Entry:
    """One outline entry: a class-like container, a function, or (when a file has no
    definitions at all) an excerpt line; line numbers are 1-based."""

    kind: EntryKind
    label: str
    name: str
    start: int
    end: int


def outline_entries(path: str, source: str, *, first_line: int = 1) -> list[Entry]:
    """The entries of `source` in source order; line numbers start at `first_line`."""
    spec = language_for_path(path)
    markdown = path.lower().endswith((".md", ".markdown"))
    entries = _cache.entries(spec, markdown, source)
    offset = first_line - 1
    if offset:
        return [Entry(e.kind, e.label, e.name, e.start + offset, e.end + offset) for e in entries]
    return list(entries)


def clear_outline_cache() -> None:
    """Forget every cached outline of this process (benchmarks measure cold folds)."""
    _cache.clear()


def _parse(spec: LanguageSpec, data: bytes) -> tree_sitter.Tree:
    return parser_for(spec).parse(data)


#: Code that defines something holds one of these (a call or signature, a body, an
#: assignment, a statement end). Text with none of them is prose, a log or a word list,
#: whatever its extension: its outline is the regex one, without a tree-sitter parse (on
#: such text mostly slow error recovery); the few definitions such a file can hold (a Ruby
#: `def name`, a Python `class Name:` with a docstring) the regex finds as well.
_CODE_MARKS: Final = "(){}[];="


def _may_be_code(source: str) -> bool:
    """Whether `source` holds one of `_CODE_MARKS` (one fast scan per mark: several times
    faster than a character-class search)."""
    return any(mark in source for mark in _CODE_MARKS)


def _outline(spec: LanguageSpec | None, markdown: bool, source: str, data: bytes) -> list[Entry]:
    """The offset-free entries: tree-sitter's (unless the text cannot be code, see
    `_CODE_MARKS`), else the regex fallback's."""
    entries: list[Entry] = []
    if spec is not None and _may_be_code(source):
        try:
            tree = _parse(spec, data)
        except ImportError:  # without the `folding` extra: the regex outline below
            tree = None
        if tree is not None:
            entries = list(_walk(tree.root_node, spec))
    if not entries:
        entries = _regex_entries(source, markdown=markdown)
    return entries


class _OutlineCache:
    """Offset-free outlines by (language, Markdown or not, content hash), least recently used
    out first. Thread-safe; a miss parses outside the lock."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._items: OrderedDict[tuple[str, bool, bytes], tuple[Entry, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def entries(self, spec: LanguageSpec | None, markdown: bool, source: str) -> tuple[Entry, ...]:
        data = source.encode("utf-8", errors="surrogatepass")
        key = (spec.name if spec else "", markdown, hashlib.blake2b(data, digest_size=20).digest())
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
                return found
        entries = tuple(_outline(spec, markdown, source, data))
        with self._lock:
            self._items[key] = entries
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)
        return entries

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


#: A few thousand files: more than one compaction's middle views in practice, at a few KB
#: of names each.
_cache: Final = _OutlineCache(capacity=4096)


def outline_lines(
    entries: Sequence[Entry], *, merge_functions: bool = True, max_line_span: int = 100
) -> list[str]:
    """Minimal-mode lines: `class Foo L1-40` and merged runs `fn a, b, c L42-90`."""
    lines: list[str] = []
    run: list[Entry] = []
    for entry in entries:
        if entry.kind == "container":
            lines.extend(_flush(run))
            lines.append(f"{entry.label} {entry.name} L{entry.start}-{entry.end}")
            continue
        if entry.kind == "excerpt":
            lines.extend(_flush(run))
            lines.append(f"L{entry.start}: {entry.name}")
            continue
        span = entry.end - run[0].start + 1 if run else 0
        if run and (not merge_functions or span > max_line_span):
            lines.extend(_flush(run))
        run.append(entry)
    lines.extend(_flush(run))
    return lines


def _flush(run: list[Entry]) -> list[str]:
    if not run:
        return []
    names = ", ".join(entry.name for entry in run)
    line = f"fn {names} L{run[0].start}-{max(entry.end for entry in run)}"
    run.clear()
    return [line]


# Tree-sitter walk --------------------------------------------------------------------------

_JS_VALUE_FUNCTIONS: Final = frozenset(
    {"arrow_function", "function_expression", "function", "generator_function"}
)
_JS_LANGUAGES: Final = frozenset({"javascript", "typescript", "tsx"})
_JS_VARIABLES: Final = frozenset({"lexical_declaration", "variable_declaration"})
_BODY_FIELDS: Final = ("body", "declaration_list")


def _walk(node: tree_sitter.Node, spec: LanguageSpec) -> Iterator[Entry]:
    for child in node.named_children:
        if child.type in spec.containers:
            entry = _container(child, spec)
            if entry is not None:
                yield entry
        elif child.type in spec.functions:
            name = _function_name(child, spec)
            if name:
                yield _entry("function", "fn", name, child)
        elif spec.name in _JS_LANGUAGES and child.type in _JS_VARIABLES:
            yield from _js_variables(child)
        elif spec.name == "go" and child.type == "type_declaration":
            yield from _go_types(child)
        elif child.type in spec.transparent:
            yield from _walk(child, spec)


def _entry(kind: EntryKind, label: str, name: str, node: tree_sitter.Node) -> Entry:
    return Entry(kind, label, name, node.start_point.row + 1, node.end_point.row + 1)


def _text(node: tree_sitter.Node | None) -> str:
    if node is None or node.text is None:
        return ""
    return " ".join(node.text.decode("utf-8", errors="replace").split())


def _container(node: tree_sitter.Node, spec: LanguageSpec) -> Entry | None:
    label = spec.containers[node.type]
    if node.type.endswith("_specifier") and node.child_by_field_name("body") is None:
        return None  # `struct S s;` names a type, it does not define one
    if node.type == "impl_item":
        trait = _text(node.child_by_field_name("trait"))
        target = _text(node.child_by_field_name("type"))
        name = f"{trait} for {target}" if trait else target
    else:
        name = _text(node.child_by_field_name("name"))
    if not name and node.parent is not None and node.parent.type == "type_definition":
        name = _text(node.parent.child_by_field_name("declarator"))  # typedef struct {..} T;
    return _entry("container", label, name, node) if name else None


def _function_name(node: tree_sitter.Node, spec: LanguageSpec) -> str:
    if spec.name in {"c", "cpp"}:
        return _declarator_name(node.child_by_field_name("declarator"))
    name = _text(node.child_by_field_name("name"))
    if node.type == "singleton_method" and name:
        return f"{_text(node.child_by_field_name('object'))}.{name}"
    if node.type == "method_declaration" and spec.name == "go" and name:
        receiver = _first_of_type(node.child_by_field_name("receiver"), "type_identifier")
        return f"{_text(receiver)}.{name}" if receiver is not None else name
    return name


def _declarator_name(node: tree_sitter.Node | None) -> str:
    """The name inside a C/C++ declarator chain (pointer, reference, function declarators)."""
    while node is not None:
        inner = node.child_by_field_name("declarator")
        if inner is None:
            return _text(node)
        node = inner
    return ""


def _first_of_type(node: tree_sitter.Node | None, node_type: str) -> tree_sitter.Node | None:
    if node is None:
        return None
    if node.type == node_type:
        return node
    for child in node.named_children:
        found = _first_of_type(child, node_type)
        if found is not None:
            return found
    return None


def _js_variables(node: tree_sitter.Node) -> Iterator[Entry]:
    """`const f = () => ...` is a function named f; `const A = class {...}` a class A."""
    for declarator in node.named_children:
        if declarator.type != "variable_declarator":
            continue
        value = declarator.child_by_field_name("value")
        name = _text(declarator.child_by_field_name("name"))
        if value is None or not name:
            continue
        if value.type in _JS_VALUE_FUNCTIONS:
            yield _entry("function", "fn", name, declarator)
        elif value.type == "class":
            yield _entry("container", "class", name, declarator)


def _go_types(node: tree_sitter.Node) -> Iterator[Entry]:
    """Go `type X struct {...}` and `type Y interface {...}`; other type specs are skipped."""
    for spec in node.named_children:
        kind = spec.child_by_field_name("type") if spec.type == "type_spec" else None
        if kind is None or kind.type not in {"struct_type", "interface_type"}:
            continue
        label = "struct" if kind.type == "struct_type" else "interface"
        yield _entry("container", label, _text(spec.child_by_field_name("name")), spec)


# Regex fallback for languages without a grammar --------------------------------------------

_DEFINITION: Final = re.compile(
    r"^(?P<indent>[ \t]*)(?:(?:export|public|private|protected|static|async|abstract|final"
    r"|pub|default|local)\s+)*(?P<keyword>class|interface|struct|trait|module|def|function"
    r"|func|fn|sub|proc|procedure)\s+(?P<name>[A-Za-z_$][\w$.:]*)",
    re.MULTILINE,
)
#: `_DEFINITION` after a line's newline: searched for, it skips from newline to newline at C
#: speed, where a search for `_DEFINITION` tries its `^` at every position.
_DEFINITION_AFTER_BREAK: Final = re.compile("\n" + _DEFINITION.pattern.removeprefix("^"))
_HEADING: Final = re.compile(r"^(?P<indent>)(?P<keyword>#{1,6})\s+(?P<name>\S.*?)\s*$", re.M)
_CONTAINER_KEYWORDS: Final = frozenset({"class", "interface", "struct", "trait", "module"})


def _regex_entries(source: str, *, markdown: bool) -> list[Entry]:
    """Definition lines (or Markdown headings), each ending where the next one at the same
    or a lower level starts, or at the end of the file. Definitions inside a container are
    its content and left out, as in the tree-sitter outlines. With no match at all, the first
    non-blank lines stand in as excerpts, so the outline still says what the file is."""
    line_count = source.count("\n") + (0 if source.endswith("\n") else 1)
    found: list[tuple[int, int, str, str]] = []  # (line, level, keyword, name)
    line, position = 1, 0
    for match in _HEADING.finditer(source) if markdown else _definitions(source):
        line += source.count("\n", position, match.start("indent"))
        position = match.start("indent")
        level = len(match["keyword"]) if markdown else len(match["indent"].expandtabs(4))
        found.append((line, level, match["keyword"], match["name"].rstrip(":")[:80]))
    if not found:
        return _excerpts(source)
    entries: list[Entry] = []
    inside_until = 0  # last line of the container being skipped, for non-Markdown files
    for index, (start, level, keyword, name) in enumerate(found):
        end = line_count
        for later_start, later_level, _, _ in found[index + 1 :]:
            if later_level <= level:
                end = later_start - 1
                break
        if markdown:
            entries.append(Entry("container", keyword, name, start, end))
            continue
        if start <= inside_until:
            continue
        if keyword in _CONTAINER_KEYWORDS:
            entries.append(Entry("container", keyword, name, start, end))
            inside_until = end
        else:
            entries.append(Entry("function", "fn", name, start, end))
    return entries


def _definitions(source: str) -> Iterator[re.Match[str]]:
    """`_DEFINITION.finditer(source)`, each match's line start at `match.start("indent")`.

    A definition never ends with a newline (it ends with its name), so the next one starts
    after a newline at or after its end: the first line is matched on its own, the others
    found by `_DEFINITION_AFTER_BREAK`."""
    first = _DEFINITION.match(source)
    if first is not None:
        yield first
    yield from _DEFINITION_AFTER_BREAK.finditer(source, first.end() if first is not None else 0)


_EXCERPT_LINES: Final = 3
_EXCERPT_CHARS: Final = 100


def _excerpts(source: str) -> list[Entry]:
    entries: list[Entry] = []
    for number, text in enumerate(_first_lines(source), start=1):
        if text.strip():
            entries.append(Entry("excerpt", "", text.strip()[:_EXCERPT_CHARS], number, number))
            if len(entries) == _EXCERPT_LINES:
                break
    return entries


#: Characters split at first when looking for a text's first lines (doubled until enough).
_HEAD_CHARS: Final = 1024


def _first_lines(source: str, size: int = _HEAD_CHARS) -> Iterator[str]:
    """`iter(source.splitlines())`, without splitting a long text whole: its head is split
    (all but the head's last line, perhaps cut, are lines of the whole), then a head twice
    as long, from where the first left off (`size`: the first head's characters)."""
    done = 0
    while size < len(source):
        lines = source[:size].splitlines()[:-1]
        yield from lines[done:]
        done = max(done, len(lines))
        size *= 2
    yield from source.splitlines()[done:]
