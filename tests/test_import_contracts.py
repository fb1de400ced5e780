"""The layers of docs/architecture.md hold: `lint-imports` keeps every import-linter contract
of pyproject.toml ([tool.importlinter]): the engine imports no Django, the HTTP faces sit over
the view models, which sit over the selectors and services, and no router, view or proxy
module runs the engine itself."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_import_contracts_are_kept() -> None:
    lint_imports = Path(sys.executable).parent / "lint-imports"
    run = subprocess.run(
        [str(lint_imports), "--no-cache", "--config", str(ROOT / "pyproject.toml")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout


def test_http_faces_and_view_models_build_no_orm_query() -> None:
    """What the contracts cannot see (docs/architecture.md, "Layers"): no module of api/,
    views/, proxy/, mcp/ or viewmodels/ reaches a model's manager (`Model.objects`); their reads
    go through selectors and their writes through services."""
    found = []
    for package in ("api", "views", "proxy", "mcp", "viewmodels"):
        for path in sorted((ROOT / "sessions_app" / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            found += [
                f"{path.relative_to(ROOT)}:{node.lineno}"
                for node in ast.walk(tree)
                if isinstance(node, ast.Attribute) and node.attr in ("objects", "_default_manager")
            ]
    assert found == []
