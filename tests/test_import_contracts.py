"""The layers of docs/architecture.md hold: `lint-imports` keeps every import-linter contract
of pyproject.toml ([tool.importlinter]): the engine imports no Django, the HTTP faces sit over
the view models, which sit over the selectors and services, and no router, view or proxy
module runs the engine itself."""

from __future__ import annotations

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
