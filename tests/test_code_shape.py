"""The code's shape: no module over 450 lines, no function over 50 (docs/architecture.md).

Walks compaction/, sessions_app/, ctxweb/ and bench/ (migrations excepted, being generated) with
`ast` and lists every offender, so a long module or function is split when it is written.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parent.parent
PACKAGES: Final = ("compaction", "sessions_app", "ctxweb", "bench")
MAX_MODULE_LINES: Final = 450
MAX_FUNCTION_LINES: Final = 50


def _modules() -> Iterator[Path]:
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" not in path.relative_to(ROOT).parts:
                yield path


def _functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def _function_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the `def` (decorators not counted) to the last line of the body."""
    end = node.end_lineno or node.lineno
    return end - node.lineno + 1


def test_the_walk_finds_the_packages() -> None:
    names = {path.relative_to(ROOT).as_posix() for path in _modules()}
    assert {
        "compaction/__init__.py",
        "sessions_app/models.py",
        "ctxweb/api.py",
        "bench/load.py",
    } <= names
    assert not any("/migrations/" in name for name in names)


def test_no_module_is_over_450_lines() -> None:
    long = [
        f"{path.relative_to(ROOT)}: {count} lines"
        for path in _modules()
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    ]
    assert not long, "modules over 450 lines:\n" + "\n".join(long)


def test_no_function_is_over_50_lines() -> None:
    long = []
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in _functions(tree):
            if (count := _function_lines(node)) > MAX_FUNCTION_LINES:
                long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {count} lines")
    assert not long, "functions over 50 lines:\n" + "\n".join(long)
