"""The engine's public surface is `compaction.__all__`, and the web app uses nothing else.

As httpx's test_exported_members: every exported name exists; and every import of the
engine in sessions_app/ and ctxweb/ names only exported, top-level members (no
`compaction.<module>` import), so the modules behind `compaction/__init__.py` stay private
and free to move (docs/architecture.md, "Engine").
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import compaction

ROOT = Path(__file__).resolve().parents[2]
WEB_APP = ("sessions_app", "ctxweb")
#: Test doubles: exported for tests and library users, never used by the web app.
TEST_DOUBLES = frozenset({"ScriptedSummarizer"})


def engine_imports(path: Path) -> list[tuple[int, str, str]]:
    """(line, module, name) of every import of the engine in a source file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[int, str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend(
                (node.lineno, alias.name, "")
                for alias in node.names
                if alias.name.split(".")[0] == "compaction"
            )
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] == "compaction":
                found.extend((node.lineno, node.module, alias.name) for alias in node.names)
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and str(node.args[0].value).split(".")[0] == "compaction"
        ):
            found.append((node.lineno, str(node.args[0].value), ""))
    return found


def violations(path: Path) -> list[str]:
    """The imports of `path` that reach past `compaction.__all__`, or use a test double."""
    bad = []
    for line, module, name in engine_imports(path):
        where = f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{line}"
        if module != "compaction":
            bad.append(f"{where} imports {module} (import from `compaction` itself)")
        elif name and name not in compaction.__all__:
            bad.append(f"{where} imports {name}, which is not in compaction.__all__")
        elif name in TEST_DOUBLES:
            bad.append(f"{where} imports the test double {name}")
    return bad


def web_app_files() -> list[Path]:
    return sorted(path for package in WEB_APP for path in (ROOT / package).rglob("*.py"))


def test_every_exported_name_exists() -> None:
    missing = [name for name in compaction.__all__ if not hasattr(compaction, name)]

    assert missing == []
    assert len(set(compaction.__all__)) == len(compaction.__all__)


def test_the_web_app_has_files_to_check() -> None:
    assert len(web_app_files()) > 50


def test_the_web_app_imports_only_exported_names() -> None:
    bad = [problem for path in web_app_files() for problem in violations(path)]

    assert bad == []


def test_the_checker_catches_private_imports(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import compaction\n"
        "from compaction import Policy\n"
        "from compaction import _private\n"
        "from compaction.flow import compact_messages\n"
        "import compaction.tokens\n"
        "from compaction import ScriptedSummarizer\n"
        "import importlib\n"
        "importlib.import_module('compaction.report')\n"
    )

    assert [line.split(" ", 1)[1] for line in violations(sample)] == [
        "imports _private, which is not in compaction.__all__",
        "imports compaction.flow (import from `compaction` itself)",
        "imports compaction.tokens (import from `compaction` itself)",
        "imports the test double ScriptedSummarizer",
        "imports compaction.report (import from `compaction` itself)",
    ]


@pytest.mark.parametrize("name", ["CompactOptions", "CallerSummary", "EventHandler"])
def test_the_grouped_options_and_the_caller_summary_are_public(name: str) -> None:
    assert name in compaction.__all__


@pytest.mark.parametrize("name", ["tool_result_text", "merge_adjacent_roles"])
def test_the_shared_message_helpers_are_public(name: str) -> None:
    """The web app's exporters, importers and viewmodels use the engine's one copy of each."""
    assert name in compaction.__all__


@pytest.mark.parametrize("name", ["extract_identifiers", "measure_recall"])
def test_the_retention_check_is_public(name: str) -> None:
    """The history's "what was lost" list uses the engine's own retention check."""
    assert name in compaction.__all__
