"""The engine stays pure Python: no module under compaction/ imports Django or the web app."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ENGINE = Path(__file__).resolve().parents[2] / "compaction"
FORBIDDEN = ("django", "sessions_app", "ctxweb", "ninja")


def imported_modules(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            names.append(str(node.args[0].value))
    return names


def engine_files() -> list[Path]:
    return sorted(ENGINE.rglob("*.py"))


def test_the_engine_has_modules_to_check():
    assert len(engine_files()) > 10


@pytest.mark.parametrize("path", engine_files(), ids=lambda p: str(p.relative_to(ENGINE)))
def test_no_web_framework_imports(path):
    bad = [name for name in imported_modules(path) if name.split(".")[0] in FORBIDDEN]

    assert bad == [], f"{path} imports {bad}"


def test_the_checker_catches_a_django_import(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import os\nfrom django.db import models\nimport sessions_app.models as m\n"
        "import importlib\nimportlib.import_module('django.conf')\n"
    )

    assert imported_modules(sample) == [
        "os",
        "django.db",
        "sessions_app.models",
        "importlib",
        "django.conf",
    ]
